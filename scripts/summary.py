"""Rule entry point: tidy table -> the report's summary page."""

import logging
from pathlib import Path

import pandas as pd

from accelbench.analysis import summary
from accelbench.platform.processes import die_with_parent

# Snakemake's own child: it must not outlive a Snakemake that was killed.
die_with_parent()

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

frame = pd.read_parquet(snakemake.input[0])
page = Path(snakemake.output[0])
page.write_text(summary.summary_html(frame, snakemake.params.baseline), encoding="utf-8")
logging.info("summary of %d records: %s", len(frame), page)

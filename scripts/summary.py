"""Rule entry point: tidy table (and the workflow's committed references) -> the report's
summary page."""

import logging
from pathlib import Path

import pandas as pd

from accelbench import config as workflow_config
from accelbench.analysis import machines, summary
from accelbench.platform.processes import die_with_parent

# Snakemake's own child: it must not outlive a Snakemake that was killed.
die_with_parent()

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

frame = pd.read_parquet(snakemake.input[0])
page = Path(snakemake.output[0])
references = machines.committed_references(workflow_config.workflow_root())
page.write_text(
    summary.summary_html(frame, snakemake.params.baseline, references, snakemake.params.not_drawn),
    encoding="utf-8",
)
summary.write_attention(frame, snakemake.output.attention)
logging.info(
    "summary of %d records, beside %s: %s",
    len(frame),
    ", ".join(reference.name for reference in references) or "no reference",
    page,
)

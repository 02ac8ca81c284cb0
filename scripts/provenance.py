"""Rule entry point: tidy table -> provenance summary table, and the configuration as run."""

import logging
from pathlib import Path

import pandas as pd
import yaml

from accelbench.analysis import provenance_summary, tables
from accelbench.platform.processes import die_with_parent

# Snakemake's own child: it must not outlive a Snakemake that was killed.
die_with_parent()

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

frame = pd.read_parquet(snakemake.input[0])
table, footnotes = provenance_summary.summary_table(frame)
tables.write_table(table, footnotes, Path(snakemake.output.table).with_suffix(""))
Path(snakemake.output.config).write_text(
    yaml.safe_dump(dict(snakemake.params.config), sort_keys=False), encoding="utf-8"
)

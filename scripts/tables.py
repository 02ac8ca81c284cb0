"""Rule entry point: tidy table -> comparison tables (Markdown, LaTeX, CSV, HTML)."""

import logging
from pathlib import Path

import pandas as pd

from accelbench.analysis import outputs, tables
from accelbench.platform.processes import die_with_parent

# Snakemake's own child: it must not outlive a Snakemake that was killed.
die_with_parent()

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

frame = pd.read_parquet(snakemake.input[0])
for markdown in (Path(path) for path in snakemake.output if path.endswith(".md")):
    table, footnotes = outputs.TABLES[markdown.stem](frame, snakemake.params.baseline)
    tables.write_table(table, footnotes, markdown.with_suffix(""))
    logging.info("table %s: %d rows", markdown.with_suffix(""), len(table))

"""Rule entry point: tidy table -> comparison tables (Markdown, LaTeX, CSV)."""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

import pandas as pd

from accelbench.analysis import tables

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

frame = pd.read_parquet(snakemake.input[0])
for experiment, stem in (("train", "train_time_per_batch"), ("kernel", "kernel_time")):
    table, footnotes = tables.comparison_table(frame, experiment=experiment)
    tables.write_table(table, footnotes, f"results/tables/{stem}")

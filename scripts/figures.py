"""Rule entry point: tidy table -> figures (PDF and PNG)."""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

import pandas as pd

from accelbench.analysis import figures, style

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

frame = pd.read_parquet(snakemake.input[0])
style.save(figures.time_per_batch_by_device(frame), "results/figures/train_time_per_batch")
style.save(figures.kernel_throughput_by_size(frame), "results/figures/kernel_throughput")

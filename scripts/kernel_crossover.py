"""Rule entry point: tidy table -> which side is ahead at each size, and the crossovers the
sizes bracket, per kernel and workload: table, and the figure where the rule declares it."""

import logging
from pathlib import Path

import pandas as pd

from accelbench.analysis import crossovers, style
from accelbench.platform.processes import die_with_parent

# Snakemake's own child: it must not outlive a Snakemake that was killed.
die_with_parent()

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

frame = pd.read_parquet(snakemake.input[0])
pd.concat(
    [crossovers.crossovers(frame, with_transfer=flag) for flag in (False, True)], ignore_index=True
).to_csv(snakemake.output.crossovers, index=False)
# The figure only where the rule declares it: the grid plans two sizes on both sides.
for pdf in (Path(path) for path in snakemake.output if path.endswith(".pdf")):
    style.save(crossovers.crossover_figure(frame), pdf.with_suffix(""))

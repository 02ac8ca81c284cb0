"""Rule entry point: tidy table -> offload break-even table and figure."""

import logging
from pathlib import Path

import pandas as pd

from accelbench.analysis import style
from accelbench.platform.processes import die_with_parent
from accelbench.studies.roofline import offload

# Snakemake's own child: it must not outlive a Snakemake that was killed.
die_with_parent()

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

frame = pd.read_parquet(snakemake.input[0])
numbers = offload.break_even_table(frame)
offload.write_table(numbers, Path(snakemake.output.table[0]).with_suffix(""))
style.save(offload.figure(frame, numbers), Path(snakemake.output.figure_pdf).with_suffix(""))
shown = numbers["left_out"] == ""
logging.getLogger("offload").info("%d rows, %d left out", shown.sum(), (~shown).sum())

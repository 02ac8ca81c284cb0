"""Rule entry point: tidy table -> Shi et al. (2016) comparison table and figures."""

import logging
from pathlib import Path

import pandas as pd

from accelbench.analysis import style
from accelbench.platform.processes import die_with_parent
from accelbench.studies.shi2016 import comparison as shi2016

# Snakemake's own child: it must not outlive a Snakemake that was killed.
die_with_parent()

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

frame = pd.read_parquet(snakemake.input[0])
numbers, not_compared = shi2016.comparison(frame)
shi2016.write_table(numbers, not_compared, Path(snakemake.output.table[0]).with_suffix(""))
width = style.figure_width(snakemake.params.width)
style.save(shi2016.figure(numbers, width), Path(snakemake.output.figure_pdf).with_suffix(""))
style.save(
    shi2016.scaling_figure(numbers, width), Path(snakemake.output.scaling_pdf).with_suffix("")
)
logging.getLogger("shi2016").info(
    "%d rows of records compared, %d records not compared", len(numbers), len(not_compared)
)

"""Rule entry point: tidy table + roofs -> percent of roof, roofline figure."""

import logging
from pathlib import Path

import pandas as pd

from accelbench.analysis import style
from accelbench.platform.processes import die_with_parent
from accelbench.studies.roofline import roofline

# Snakemake's own child: it must not outlive a Snakemake that was killed.
die_with_parent()

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

frame = pd.read_parquet(snakemake.input[0])
percent = roofline.roof_table(frame)
percent.to_csv(snakemake.output.percent, index=False)
if note := roofline.above_roof_note(percent):
    logging.warning("kernels %s", note)
style.save(roofline.roofline_figure(frame), Path(snakemake.output.roofline_pdf).with_suffix(""))

"""Rule entry point: tidy table + roofs -> percent of roof, crossovers, roofline figures."""

import logging
from pathlib import Path

import pandas as pd

from accelbench.analysis import roofline, style

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

frame = pd.read_parquet(snakemake.input[0])
percent = roofline.roof_table(frame)
percent.to_csv(snakemake.output.percent, index=False)
if note := roofline.above_roof_note(percent):
    logging.warning("kernels %s", note)
pd.concat(
    [roofline.crossovers(frame, with_transfer=flag) for flag in (False, True)], ignore_index=True
).to_csv(snakemake.output.crossovers, index=False)
style.save(roofline.roofline_figure(frame), Path(snakemake.output.roofline_pdf).with_suffix(""))
style.save(roofline.crossover_figure(frame), Path(snakemake.output.crossover_pdf).with_suffix(""))

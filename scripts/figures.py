"""Rule entry point: tidy table -> figures (PDF and PNG), one per PDF the rule declares."""

import logging
from pathlib import Path

import pandas as pd

from accelbench.analysis import outputs, style
from accelbench.platform.processes import die_with_parent

# Snakemake's own child: it must not outlive a Snakemake that was killed.
die_with_parent()

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

frame = pd.read_parquet(snakemake.input[0])
width = style.figure_width(snakemake.params.width)
for pdf in (Path(path) for path in snakemake.output if path.endswith(".pdf")):
    draw = outputs.FIGURES[pdf.stem]
    style.save(draw(frame, snakemake.params.baseline, width), pdf.with_suffix(""))
    logging.info("figure %s", pdf)

"""Rule entry point: run the experiment its output path names and write the record."""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))

from accelbench import experiment, grid, provenance

logging.basicConfig(
    filename=snakemake.log[0],
    level=logging.INFO,
    format="%(asctime)s %(levelname)s %(name)s: %(message)s",
)
logging.captureWarnings(True)

wildcards = dict(snakemake.wildcards.items())
if "kernel" in wildcards:
    exp = grid.parse_kernel(wildcards)
elif "model" in wildcards:
    exp = grid.parse_train(wildcards)
else:
    exp = grid.parse_roof(wildcards)
settings = {
    **snakemake.params.settings,
    "config_hash": provenance.config_hash(snakemake.config),
}
experiment.run(exp, settings, snakemake.output[0])

"""Rule entry point: run the experiment its output path names and write the record."""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))  # noqa: F821

from accelbench import experiment, grid, provenance  # noqa: E402

logging.basicConfig(
    filename=snakemake.log[0],  # noqa: F821
    level=logging.INFO,
    format="%(asctime)s %(levelname)s %(name)s: %(message)s",
)
logging.captureWarnings(True)

wildcards = dict(snakemake.wildcards.items())  # noqa: F821
exp = grid.parse_kernel(wildcards) if "kernel" in wildcards else grid.parse_train(wildcards)
settings = {
    **snakemake.params.settings,  # noqa: F821
    "config_hash": provenance.config_hash(snakemake.config),  # noqa: F821
}
experiment.run(exp, settings, snakemake.output[0])  # noqa: F821

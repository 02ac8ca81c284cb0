"""Rule entry point: fetch one real dataset into the data directory."""

import logging
from pathlib import Path

from accelbench.platform.processes import die_with_parent
from accelbench.train import datasets

# Snakemake's own child: it must not outlive a Snakemake that was killed.
die_with_parent()

logging.basicConfig(
    filename=snakemake.log[0],
    level=logging.INFO,
    format="%(asctime)s %(levelname)s %(name)s: %(message)s",
)
output = Path(snakemake.output[0])
datasets.download(output.parent, snakemake.wildcards.dataset)
logging.info("%s is in %s", snakemake.wildcards.dataset, output)

"""Rule entry point: sacct of the configured partitions and window -> raw text file."""

import logging

from accelbench.platform.processes import die_with_parent
from accelbench.studies.queue_wait import sacct

# Snakemake's own child: it must not outlive a Snakemake that was killed.
die_with_parent()

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

text = sacct.query(snakemake.params.partitions, snakemake.params.since, snakemake.params.until)
sacct.write_dump(text, snakemake.output[0])
logging.getLogger("sacct").info("%s: %s", snakemake.output[0], sacct.parse(text).summary())

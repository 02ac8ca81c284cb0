"""Rule entry point: measure the comparison group the rule names, its cells' runs
interleaved in rounds (accelbench.job.group), and write each cell's record."""

import logging
import signal
import sys

from accelbench import grid
from accelbench.families.base import family_of
from accelbench.job import supervisor
from accelbench.job.context import JobContext
from accelbench.measuring.outcome import RetryableFailure
from accelbench.platform import provenance
from accelbench.platform.processes import die_with_parent

# Snakemake's own child: it must not outlive a Snakemake that was killed.
# SIGTERM: the supervisor stops its measuring process before it ends.
die_with_parent(signal.SIGTERM)

logging.basicConfig(
    filename=snakemake.log[0],
    level=logging.INFO,
    format="%(asctime)s %(levelname)s %(name)s: %(message)s",
)
logging.captureWarnings(True)

# The rule's outputs are its cells' records, in the grid's order, as are their settings.
outputs = list(snakemake.output)
exps = [grid.experiment_of_path(output) for output in outputs]
settings = [
    family_of(exp).settings_type.from_params(found)
    for exp, found in zip(exps, snakemake.params.settings, strict=True)
]
context = JobContext.of(
    provenance.config_hash(snakemake.config), snakemake.config["plugins"]["paths"]
)
group = supervisor.Group(snakemake.params.group, list(zip(exps, settings, outputs, strict=True)))
try:
    supervisor.run_supervised(
        exps[0],
        settings[0],
        outputs[0],
        context=context,
        attempt=snakemake.resources.attempt,
        max_attempts=snakemake.config["retries"] + 1,
        time_limit=supervisor.time_limit_seconds(snakemake.resources.runtime),
        log_file=snakemake.log[0],
        group=group,
    )
except RetryableFailure as err:
    logging.getLogger("run_group").error("%s", err)
    sys.exit(1)

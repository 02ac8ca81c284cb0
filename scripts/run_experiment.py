"""Rule entry point: run the experiment its output path names and write the record."""

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
from accelbench.slurm import resources as cluster

# Snakemake's own child: it must not outlive a Snakemake that was killed.
# SIGTERM: the supervisor stops its measuring process before it ends.
die_with_parent(signal.SIGTERM)

logging.basicConfig(
    filename=snakemake.log[0],
    level=logging.INFO,
    format="%(asctime)s %(levelname)s %(name)s: %(message)s",
)
logging.captureWarnings(True)

# The rule's input function (grid.target_check) has parsed and checked these wildcards.
exp = grid.planned_experiment(snakemake.rule, dict(snakemake.wildcards.items()))
# The rule's params are the experiment's settings, read back once here.
settings = family_of(exp).settings_type.from_params(snakemake.params.settings)
# The folders of the user's units travel with the job: every process that measures loads
# the same catalogue (accelbench.registry), absolute as the config's check left them.
context = JobContext.of(
    provenance.config_hash(snakemake.config), snakemake.config["plugins"]["paths"]
)
launcher = cluster.task_launcher(
    exp.parsed_device,
    getattr(exp, "strategy", "single"),
    snakemake.config,
    slurm_tasks=bool(snakemake.resources.get("mpi")),
)
try:
    supervisor.run_supervised(
        exp,
        settings,
        snakemake.output[0],
        context=context,
        attempt=snakemake.resources.attempt,
        max_attempts=snakemake.config["retries"] + 1,
        time_limit=supervisor.time_limit_seconds(snakemake.resources.runtime),
        log_file=snakemake.log[0],
        launcher=launcher,
    )
except RetryableFailure as err:
    logging.getLogger("run_experiment").error("%s", err)
    sys.exit(1)

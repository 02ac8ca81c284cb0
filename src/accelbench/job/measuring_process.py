"""The measuring process of one experiment job: measure, write the record, report by exit code.

Started by the job's supervisor (accelbench.job.supervisor), either as a new
interpreter (`python -m accelbench.job.measuring_process PAYLOAD`, also once per
task under srun) or forked by the run's fork server (accelbench.job.fork_server).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings
from typing import Any, TextIO

from accelbench import registry
from accelbench.families.base import Experiment, experiment_from, family_of
from accelbench.job import group, measurement
from accelbench.job.context import JobContext
from accelbench.measuring.outcome import (
    RANK_FAILED_EXIT_CODE,
    RETRY_EXIT_CODE,
    UNRECORDED_EXIT_CODE,
    RankFailure,
    RetryableFailure,
    last_words,
    of_error,
)
from accelbench.measuring.settings import Params, RunSettings
from accelbench.platform import forked_cuda
from accelbench.platform.gpu_support import LOW_OCCUPANCY_WARNING
from accelbench.platform.processes import (
    DEADLINE_VARIABLE,
    STACKS_FILE_VARIABLE,
    dump_stacks_on_request,
)
from accelbench.platform.ranks import from_environment, is_primary_process

log = logging.getLogger(__name__)


def configure_logging(log_file: str | None) -> TextIO:
    """INFO and up from the measurement into the rule's log (rank 0; other tasks to stderr,
    i.e. the Slurm job's log), warnings included, but only warnings from the libraries:
    Numba-CUDA's driver logs each allocation and free at INFO wherever the root logger
    has a handler (it quiets itself only where none is set), thousands of lines a job.
    Its low-occupancy warning is left out too: small sizes launch small grids on purpose
    (the launch-bound end of a kernel's sweep). Returns the stream the log goes to."""
    to_file = log_file and is_primary_process()
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        **({"filename": log_file} if to_file else {}),
    )
    logging.captureWarnings(True)
    logging.getLogger("numba").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=LOW_OCCUPANCY_WARNING)
    return logging.getLogger().handlers[0].stream


# Whether the fork server has asked the GPU questions of a GPU (True) and a CPU (False) job.
_ASKED: set[bool] = set()


def before_fork(payload: dict[str, Any]) -> None:
    """What the fork server asks before it forks the process for `payload`: the answers
    about the GPUs that every job would otherwise ask again (measurement.know_the_gpus)."""
    exp = experiment_from(payload["experiment_type"], payload["experiment"])
    on_gpu = exp.parsed_device.is_gpu
    if on_gpu not in _ASKED and forked_cuda.children_can_use_cuda():
        measurement.know_the_gpus(exp)
    _ASKED.add(on_gpu)


def _settings(exp: Experiment, params: Params) -> RunSettings:
    """The experiment's settings from the params its supervisor handed on (as_params)."""
    return family_of(exp).settings_type.from_params(params)


def _measure_group(payload: dict[str, Any], context: JobContext) -> None:
    """The comparison group the payload names, its cells measured together
    (accelbench.job.group); this process has measured nothing yet: it may fork."""
    cells = payload["group"]["cells"]
    exps = [experiment_from(cell["experiment_type"], cell["experiment"]) for cell in cells]
    group.run_group(
        payload["group"]["id"],
        exps,
        [_settings(exp, cell["settings"]) for exp, cell in zip(exps, cells, strict=True)],
        [cell["output"] for cell in cells],
        context=context,
        final_attempt=payload["final"],
        fresh_processes=True,
    )


def main(payload: dict[str, Any]) -> int:
    """Measure and write the record, or signal a retry (RETRY_EXIT_CODE).

    An error outside the measurement (the record's write on a full disk) cannot go
    into the record: its text goes to the supervisor as the process's last words on
    stderr (UNRECORDED_EXIT_CODE), and the supervisor records it or retries.
    This process and those it forks or starts (runs, ranks, torchrun's workers) learn the
    job's deadline from the environment, and write their stacks to the log when asked.
    """
    log_stream = configure_logging(payload["log_file"])
    dump_stacks_on_request(log_stream)
    os.environ[DEADLINE_VARIABLE] = str(payload["deadline"])
    if payload["log_file"]:
        os.environ[STACKS_FILE_VARIABLE] = payload["log_file"]
    exp = experiment_from(payload["experiment_type"], payload["experiment"])
    # The user's units the job's catalogue holds (a fork server's process inherits none).
    context = JobContext.from_payload(payload["context"])
    registry.use_plugins(context.plugins)
    try:
        if payload.get("group"):
            _measure_group(payload, context)
        else:
            measurement.run(
                exp,
                _settings(exp, payload["settings"]),
                payload["output"],
                context=context,
                final_attempt=payload["final"],
                failure_dir=payload["failure_dir"],
                fresh_processes=True,  # this process has measured nothing yet: it may fork
            )
    except RetryableFailure as err:
        log.error("%s", err)
        return RETRY_EXIT_CODE
    except RankFailure as err:
        log.error("%s", err)
        return RANK_FAILED_EXIT_CODE
    except Exception as err:  # whatever it was, the supervisor must hear its text
        log.exception("%s: no record written", exp.id)
        launched = from_environment()
        outcome = of_error(err, "outside the measurement: ")
        print(last_words(outcome, launched.rank if launched else 0), file=sys.stderr)
        sys.stderr.flush()
        return UNRECORDED_EXIT_CODE
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))

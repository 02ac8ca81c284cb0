"""Supervise one experiment job: a child process, a time limit, and the retry decision.

The measurement runs in a child process so that a crash no Python handler can
catch (killed by the host's OOM killer, a segfault in a native library) or a
hang past the job's time limit still ends in a definite outcome. On an attempt
that is not the last, any failure makes the job fail, and Snakemake retries it
with more memory and time. On the last attempt the failure is written into the
record instead, so the aggregate shows the cell as failed and is never blocked.

An experiment of several Slurm tasks is started through a launcher (srun):
every task runs the child, rank 0 writes the record, and the supervisor sees
srun's exit status as the child's. A task other than rank 0 that fails leaves
a note in a folder next to the record and exits non-zero (srun then stops the
others); its reason, not a peer's disconnect, goes into the record.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from accelbench import experiment, provenance
from accelbench.grid import Experiment
from accelbench.outcome import Outcome, RankFailure, RetryableFailure
from accelbench.train.distributed import is_primary_process

RETRY_EXIT_CODE = 3
RANK_FAILED_EXIT_CODE = 4
PACKAGE_ROOT = Path(__file__).resolve().parents[1]

log = logging.getLogger(__name__)


def time_limit_seconds(runtime_minutes: float) -> float:
    """The child's budget: the job's limit less a margin to write the record before Slurm kills."""
    limit = runtime_minutes * 60.0
    return limit - max(10.0, 0.05 * limit)


def _child(payload: dict[str, Any]) -> int:
    """Body of the child process: measure and write the record, or signal a retry."""
    # Rank 0 logs to the rule's log; other tasks to stderr, i.e. the Slurm job's log.
    to_file = payload["log_file"] and is_primary_process()
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        **({"filename": payload["log_file"]} if to_file else {}),
    )
    logging.captureWarnings(True)
    experiment_type, _ = experiment.FAMILIES[payload["family"]]
    exp = experiment_type(**payload["experiment"])
    try:
        experiment.run(
            exp,
            payload["settings"],
            payload["output"],
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
    return 0


def _describe_exit(code: int, launcher: list[str] | None) -> str:
    if launcher:
        what, was = f"the tasks started by `{' '.join(launcher)}`", "were"
    else:
        what, was = "the measuring process", "was"
    if code < 0:
        name = signal.Signals(-code).name
        hint = " (the usual sign of the host running out of memory)" if name == "SIGKILL" else ""
        return f"{what} {was} killed by {name}{hint}"
    return f"{what} exited with code {code}"


def run_supervised(
    exp: Experiment,
    settings: dict[str, Any],
    output: str,
    *,
    attempt: int,
    max_attempts: int,
    time_limit: float,
    log_file: str | None = None,
    launcher: list[str] | None = None,
) -> None:
    """Run `exp` in a child process; raise RetryableFailure unless this is the last attempt.

    `launcher` (e.g. cluster.srun_command) starts the child as several tasks.
    """
    final = attempt >= max_attempts
    log.info("%s: attempt %d of %d, time limit %.0f s", exp.id, attempt, max_attempts, time_limit)
    started = provenance.now()
    failure_dir = None
    if launcher:
        # Next to the record: on the shared file system every task's node can write there.
        folder = Path(output).parent
        folder.mkdir(parents=True, exist_ok=True)
        failure_dir = tempfile.mkdtemp(prefix=f".{Path(output).name}.ranks-", dir=folder)
    payload = {
        "family": exp.family,
        "experiment": asdict(exp),
        "settings": settings,
        "output": str(output),
        "final": final,
        "log_file": log_file,
        "failure_dir": failure_dir,
    }
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")])
        ),
    }
    # The payload goes on the command line: srun hands every task its arguments.
    child = subprocess.Popen(
        [*(launcher or []), sys.executable, "-m", "accelbench.supervise", json.dumps(payload)],
        env=env,
    )

    def stop_child() -> None:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    def forward_termination(signum, frame):
        # Cancelled (scancel, or Snakemake stopping): stop the child, write nothing.
        stop_child()
        sys.exit(128 + signum)

    previous_handler = signal.signal(signal.SIGTERM, forward_termination)
    notes = []
    try:
        try:
            code = child.wait(time_limit)
        except subprocess.TimeoutExpired:
            stop_child()
            code = None
        if failure_dir:
            notes = experiment.rank_failures(failure_dir)
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
        if failure_dir:
            shutil.rmtree(failure_dir, ignore_errors=True)
    if code == 0:
        return
    if code == RETRY_EXIT_CODE and not notes:
        # The child already decided: an error on a non-final attempt, logged by the child.
        raise RetryableFailure(f"{exp.id}: attempt {attempt} of {max_attempts} failed")
    if notes:
        first = notes[0]
        reason, status = f"rank {first['rank']}: {first['reason']}", first["status"]
    elif code is None:
        reason = f"exceeded the job's time limit: stopped after {time_limit:.0f} s"
        status = "failed"
    else:
        reason = _describe_exit(code, launcher)
        status = "oom" if code == -signal.SIGKILL else "failed"
    if not final:
        raise RetryableFailure(f"{exp.id}: {reason}; attempt {attempt} of {max_attempts}")
    log.error("%s: %s (last attempt: recorded as %s)", exp.id, reason, status)
    experiment.write_outcome(exp, settings, output, Outcome(status, reason), started)


if __name__ == "__main__":
    sys.exit(_child(json.loads(sys.argv[1])))

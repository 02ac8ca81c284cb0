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
others); its reason, not a peer's disconnect, goes into the record. A task that
dies without a word (killed by a signal) is named as srun reports it: srun's
first "srun: error: NODE: task N: ..." line says which task ended the step.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from accelbench import fork_server, provenance
from accelbench.grid import Experiment
from accelbench.outcome import RETRY_EXIT_CODE, Outcome, RetryableFailure, rank_failures
from accelbench.processes import OOM_HINT, exit_text

log = logging.getLogger(__name__)


def time_limit_seconds(runtime_minutes: float) -> float:
    """The child's budget: the job's limit less a margin to write the record before Slurm kills."""
    limit = runtime_minutes * 60.0
    return limit - max(10.0, 0.05 * limit)


# How srun reports a task that ended badly: "srun: error: node2: task 2: Killed",
# "srun: error: node1: tasks 0-1: Exited with exit code 1".
SRUN_TASK_END = re.compile(
    r"^srun: error: (?P<node>[^:\s]+): tasks? (?P<first>[0-9]+)[0-9,-]*: (?P<what>.+)$"
)


@dataclass(frozen=True)
class TaskEnd:
    """A task's bad end as srun reported it."""

    node: str
    rank: int
    what: str


def task_end(line: str) -> TaskEnd | None:
    """The task an `srun: error:` line reports (the first of a range), or None for other lines."""
    match = SRUN_TASK_END.match(line.strip())
    if match is None:
        return None
    return TaskEnd(match["node"], int(match["first"]), match["what"])


def _relay_stderr(stream, ends: list[TaskEnd]) -> None:
    """Copy the launcher's stderr (srun's and its tasks') to ours; keep srun's task reports."""
    for line in stream:
        sys.stderr.write(line)
        sys.stderr.flush()
        end = task_end(line)
        if end is not None:
            ends.append(end)


def first_failure(notes: list[dict[str, Any]], ends: list[TaskEnd]) -> tuple[str, str] | None:
    """(reason, status) of the task that failed first, in its own words where it left any.

    srun reports tasks in the order they ended, so its first report names the
    cause; the notes of tasks that then lost their peers are consequences.
    Without a report from srun, the lowest rank's note.
    """
    by_rank = {note["rank"]: note for note in notes}
    if ends:
        first = ends[0]
        note = by_rank.get(first.rank)
        if note is not None:
            return f"rank {note['rank']}: {note['reason']}", note["status"]
        killed = first.what == "Killed"
        reason = (
            f"rank {first.rank} on {first.node}: {first.what} (as srun reports it; the task "
            f"wrote no error of its own){OOM_HINT if killed else ''}"
        )
        return reason, "oom" if killed else "failed"
    if notes:
        return f"rank {notes[0]['rank']}: {notes[0]['reason']}", notes[0]["status"]
    return None


def _describe_exit(code: int, launcher: list[str] | None) -> str:
    what = f"the tasks started by `{' '.join(launcher)}`" if launcher else "the measuring process"
    hint = OOM_HINT if code == -signal.SIGKILL else ""
    return f"{what} {exit_text(code, plural=bool(launcher))}{hint}"


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
    # Locally, the run's fork server starts the process without the imports' cost;
    # srun's tasks, or a job without a server, start a new interpreter. The payload
    # goes on the command line: srun hands every task its arguments.
    child = None if launcher else fork_server.request(payload)
    ends: list[TaskEnd] = []
    relay = None
    if child is not None:
        log.info("measuring process %d forked by the fork server", child.pid)
    else:
        command = [sys.executable, "-m", "accelbench.measuring_process", json.dumps(payload)]
        stderr = subprocess.PIPE if launcher else None
        child = subprocess.Popen(
            [*(launcher or []), *command], stderr=stderr, text=True, errors="replace"
        )
        if launcher:
            relay = threading.Thread(target=_relay_stderr, args=(child.stderr, ends), daemon=True)
            relay.start()

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
        if relay is not None:
            relay.join(timeout=10)
        if failure_dir:
            notes = rank_failures(failure_dir)
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
        if failure_dir:
            shutil.rmtree(failure_dir, ignore_errors=True)
    if code == 0:
        return
    if code == RETRY_EXIT_CODE and not notes and not ends:
        # The child already decided: an error on a non-final attempt, logged by the child.
        raise RetryableFailure(f"{exp.id}: attempt {attempt} of {max_attempts} failed")
    failure = first_failure(notes, ends)
    if failure is not None:
        reason, status = failure
    elif code is None:
        reason = f"exceeded the job's time limit: stopped after {time_limit:.0f} s"
        status = "failed"
    else:
        reason = _describe_exit(code, launcher)
        status = "oom" if code == -signal.SIGKILL else "failed"
    if not final:
        raise RetryableFailure(f"{exp.id}: {reason}; attempt {attempt} of {max_attempts}")
    log.error("%s: %s (last attempt: recorded as %s)", exp.id, reason, status)
    # Only here, when the measuring process could not write the record itself: the
    # measuring code imports Numba and the kernels, a second this light parent saves.
    from accelbench import experiment

    experiment.write_outcome(exp, settings, output, Outcome(status, reason), started)

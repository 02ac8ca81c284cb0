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

A child that ended without its record is "oom" only where the OOM killer says so
(the cgroup's count of OOM kills rose while it ran, or srun reports "Out Of
Memory"); a crash is the configuration's failure; any other kill, a child that
could not write its record (its last words on stderr say why), or one that died
without a word is a passing fault, recorded as transient (accelbench.measuring.outcome).

A child still running at the time limit hung, or the host stalled it (a measurement's
own budget ends it well within the limit): before it is stopped, every process of its
tree writes its Python stacks into the job's log (processes.ask_for_stacks), and the
record is a passing fault too, measured again by the next run. The child and its
processes know the deadline (processes.DEADLINE_VARIABLE): ranks waiting for each other
give up shortly before it (accelbench.train.distributed).

The log of an attempt that is retried is kept beside the job's log
(`n64.attempt1.log`), since Snakemake empties the log before the next attempt.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from accelbench.families.base import Experiment, experiment_type_name
from accelbench.job import fork_server
from accelbench.job.context import JobContext
from accelbench.measuring.outcome import (
    MEASURED_AGAIN,
    RETRY_EXIT_CODE,
    Outcome,
    RetryableFailure,
    heard,
    of_note,
    of_process_end,
    rank_failures,
)
from accelbench.measuring.settings import RunSettings
from accelbench.platform import provenance
from accelbench.platform.processes import CRASH_SIGNALS, OomKills, ask_for_stacks
from accelbench.records.record import attempt_log

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


def _relay_stderr(stream, ends: list[TaskEnd], words: list[dict[str, Any]]) -> None:
    """Copy the child's stderr (under a launcher, srun's and its tasks') to ours; keep srun's
    task reports and the measuring process's last words (outcome.LAST_WORDS).

    A write that fails (our stderr on a full disk) does not stop the copying: the child
    would block on a full pipe.
    """
    for line in stream:
        with contextlib.suppress(OSError):
            sys.stderr.write(line)
            sys.stderr.flush()
        end = task_end(line)
        if end is not None:
            ends.append(end)
        note = heard(line.rstrip("\n"))
        if note is not None:
            words.append(note)


# srun's words for a task ended by SIG_OOM (Slurm's memory cgroup), and for a crash signal
# (strsignal's text, as srun prints it).
SRUN_OUT_OF_MEMORY = "Out Of Memory"
SRUN_CRASHES = frozenset(signal.strsignal(signum) for signum in CRASH_SIGNALS)


def first_failure(notes: list[dict[str, Any]], ends: list[TaskEnd]) -> Outcome | None:
    """The failure of the task that failed first, in its own words where it left any.

    srun reports tasks in the order they ended, so its first report names the
    cause; the notes of tasks that then lost their peers are consequences.
    Without a report from srun, the lowest rank's note.
    """
    by_rank = {note["rank"]: note for note in notes}
    if ends:
        first = ends[0]
        note = by_rank.get(first.rank)
        if note is not None:
            return of_note(note, f"rank {note['rank']}: ")
        reason = (
            f"rank {first.rank} on {first.node}: {first.what} (as srun reports it; the task "
            "wrote no error of its own)"
        )
        if first.what == SRUN_OUT_OF_MEMORY:
            return Outcome("oom", reason, raised=True)
        if first.what in SRUN_CRASHES:
            return Outcome("failed", reason, raised=True)
        return Outcome("failed", f"{reason}; {MEASURED_AGAIN}", raised=True, transient=True)
    if notes:
        ranked = sorted(notes, key=lambda note: note["rank"])
        return of_note(ranked[0], f"rank {ranked[0]['rank']}: ")
    return None


def _child_name(launcher: list[str] | None) -> str:
    return f"the tasks started by `{' '.join(launcher)}`" if launcher else "the measuring process"


def keep_attempt_log(log_file: str | None, attempt: int) -> Path | None:
    """A copy of the job's log beside it (results.attempt_log): Snakemake empties the log
    before the next attempt, and the failure of this one must stay readable."""
    if not log_file or not Path(log_file).is_file():
        return None
    kept = attempt_log(log_file, attempt)
    shutil.copyfile(log_file, kept)
    return kept


def _retry(exp: Experiment, why: str, log_file: str | None, attempt: int, max_attempts: int):
    """Log why attempt `attempt` failed and keep its log; the RetryableFailure to raise."""
    log.error("%s: attempt %d of %d failed: %s", exp.id, attempt, max_attempts, why)
    kept = keep_attempt_log(log_file, attempt)
    if kept is not None:
        log.info("the log of attempt %d is kept as %s", attempt, kept)
    return RetryableFailure(f"{exp.id}: {why}; attempt {attempt} of {max_attempts}")


@dataclass(frozen=True)
class Group:
    """A comparison group a job measures (accelbench.job.group): its id and its cells, each
    an experiment with its settings and the record it writes."""

    id: str
    cells: list[tuple[Experiment, RunSettings, str]]

    def payload(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "cells": [
                {
                    "experiment_type": experiment_type_name(exp),
                    "experiment": asdict(exp),
                    "settings": settings.as_params(),
                    "output": str(output),
                }
                for exp, settings, output in self.cells
            ],
        }


def run_supervised(
    exp: Experiment,
    settings: RunSettings,
    output: str,
    *,
    context: JobContext,
    attempt: int,
    max_attempts: int,
    time_limit: float,
    log_file: str | None = None,
    launcher: list[str] | None = None,
    group: Group | None = None,
) -> None:
    """Run `exp` in a child process; raise RetryableFailure unless this is the last attempt.

    `launcher` (e.g. cluster.srun_command) starts the child as several tasks. With a
    `group`, the child measures its cells together, `exp` (its first) naming the job.
    """
    final = attempt >= max_attempts
    log.info("%s: attempt %d of %d, time limit %.0f s", exp.id, attempt, max_attempts, time_limit)
    started = provenance.now()
    failure_dir = _rank_failure_dir(output) if launcher else None
    payload = {
        # What the measuring process imports to build the experiment (and declare its family).
        "experiment_type": experiment_type_name(exp),
        "experiment": asdict(exp),
        "settings": settings.as_params(),
        "context": context.as_payload(),
        "output": str(output),
        "final": final,
        "log_file": log_file,
        "failure_dir": failure_dir,
        "deadline": time.time() + time_limit,
        "group": group.payload() if group else None,
    }
    # The OOM killer's count before the child starts: only a rise calls its SIGKILL "oom".
    kills = OomKills.read()
    # The child's stderr comes through a pipe, relayed to ours (_relay_stderr).
    read_end, write_end = os.pipe()
    try:
        child = _start_child(payload, launcher, write_end)
    finally:
        os.close(write_end)
    ends: list[TaskEnd] = []
    words: list[dict[str, Any]] = []
    stream = os.fdopen(read_end, errors="replace")
    relay = threading.Thread(target=_relay_stderr, args=(stream, ends, words), daemon=True)
    relay.start()
    code, notes = _wait_for(child, exp, time_limit, relay, failure_dir)
    if code == 0:
        return
    if code == RETRY_EXIT_CODE and not notes and not ends:
        # The child already decided: an error on a non-final attempt, logged by the child.
        raise _retry(exp, "the measurement failed", log_file, attempt, max_attempts)
    outcome = _outcome_of(code, time_limit, launcher, kills, notes + words, ends)
    if not final:
        raise _retry(exp, outcome.reason, log_file, attempt, max_attempts)
    log.error("%s: %s (last attempt: recorded as %s)", exp.id, outcome.reason, outcome.status)
    cells = group.cells if group else [(exp, settings, output)]
    _record_outcome(cells, context, outcome, started)


def _rank_failure_dir(output: str) -> str:
    """A new folder where each task of a launched child notes why it failed; next to the
    record, since on the shared file system every task's node can write there."""
    folder = Path(output).parent
    folder.mkdir(parents=True, exist_ok=True)
    return tempfile.mkdtemp(prefix=f".{Path(output).name}.ranks-", dir=folder)


def _start_child(payload: dict[str, Any], launcher: list[str] | None, stderr: int):
    """The measuring process, its stderr on `stderr`.

    Locally, the run's fork server starts the process without the imports' cost; srun's
    tasks, or a job without a server, start a new interpreter. The payload goes on the
    command line: srun hands every task its arguments.
    """
    child = None if launcher else fork_server.request(payload, stderr=stderr)
    if child is not None:
        log.info("measuring process %d forked by the fork server", child.pid)
        return child
    command = [sys.executable, "-m", "accelbench.job.measuring_process", json.dumps(payload)]
    return subprocess.Popen([*(launcher or []), *command], stderr=stderr)


def _stop(child) -> None:
    """Ask the child to end, then kill it if it has not within 10 s."""
    child.terminate()
    try:
        child.wait(10)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _wait_for(
    child, exp: Experiment, time_limit: float, relay: threading.Thread, failure_dir: str | None
) -> tuple[int | None, list[dict[str, Any]]]:
    """(the child's exit code, None past the time limit; its tasks' failure notes).

    Past the limit the child is asked for its stacks, then stopped. A SIGTERM to this
    process (scancel, or Snakemake stopping) stops the child and exits, writing nothing.
    """

    def forward_termination(signum, frame):
        _stop(child)
        sys.exit(128 + signum)

    previous_handler = signal.signal(signal.SIGTERM, forward_termination)
    notes = []
    try:
        try:
            code = child.wait(time_limit)
        except subprocess.TimeoutExpired:
            log.error("%s: the time limit of %.0f s is reached", exp.id, time_limit)
            ask_for_stacks(child.pid)
            _stop(child)
            code = None
        relay.join(timeout=10)
        if failure_dir:
            notes = rank_failures(failure_dir)
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
        if failure_dir:
            shutil.rmtree(failure_dir, ignore_errors=True)
    return code, notes


def _outcome_of(
    code: int | None,
    time_limit: float,
    launcher: list[str] | None,
    kills: OomKills,
    said: list[dict[str, Any]],
    ends: list[TaskEnd],
) -> Outcome:
    """Why a child that did not succeed failed: past its time limit, from what its tasks
    or srun said (`said`, `ends`), else from how the process ended."""
    if code is None:
        return Outcome(
            "failed",
            f"exceeded the job's time limit: stopped after {time_limit:.0f} s, its processes' "
            f"stacks are in the job's log; {MEASURED_AGAIN}",
            raised=True,
            transient=True,
        )
    if launcher:
        return first_failure(said, ends) or of_process_end(
            _child_name(launcher), code, kills, plural=True
        )
    if said:
        return of_note(said[-1])
    return of_process_end(_child_name(launcher), code, kills)


def _record_outcome(
    cells: list[tuple[Experiment, RunSettings, str]],
    context: JobContext,
    outcome: Outcome,
    started: str,
) -> None:
    """Write `outcome` as the record of every cell, when the measuring process could not.

    Imported only here: the measuring chain, and the family's record_params (a kernel's
    imports Numba and the kernels), cost a second this light parent saves.
    """
    from accelbench import registry
    from accelbench.job import measurement

    registry.use_plugins(context.plugins)  # the record names its unit's origin
    for cell, found, path in cells:
        measurement.write_outcome(cell, found, path, outcome, started, context)

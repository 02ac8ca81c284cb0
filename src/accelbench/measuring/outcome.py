"""What one measurement came to, and the failures that end an attempt.

The measuring modules (kernels, roofs, training) return an Outcome, and the
orchestration in accelbench.job.measurement turns it into a record. It imports only the
shapes of the record's sections (accelbench.measuring.sections, its params' from .settings)
and accelbench.platform.processes, to tell how a process that left no outcome ended.

A failure is either the configuration's (it fails the same way next time, and
its record stays) or a passing fault (a full disk, a process killed from outside
other than by the OOM killer, a process that died without a word, processes that
hung waiting for each other): its record says `transient`, and the workflow's next
run measures the cell again.
"""

from __future__ import annotations

import errno
import json
import signal
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.measuring.sections import (
    CheckSection,
    ConditionsSection,
    EnergySection,
    FailureNote,
    MeasuredBy,
    Metrics,
    RawSamples,
    Series,
)
from accelbench.measuring.settings import Params
from accelbench.platform.processes import OomKills, crashed, exit_text

# How a measuring process tells its supervisor why it stopped without a record.
RETRY_EXIT_CODE = 3  # an error on an attempt that is not the last: retry the job
RANK_FAILED_EXIT_CODE = 4  # a launched rank other than 0 failed and left a note
UNRECORDED_EXIT_CODE = 5  # the measuring process could not write the record; its last words say why
# OSError numbers of a file system that is full for now: freeing space mends them.
TRANSIENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# What a transient failure's reason ends with, for the reader of a table or a record.
MEASURED_AGAIN = "a passing fault: the next run measures it again"
# The line a measuring process that could not write its record leaves on stderr, followed by
# its outcome as JSON; the supervisor, which reads that stderr, writes the record instead.
LAST_WORDS = "accelbench: the measuring process ends without its record: "


@dataclass
class Outcome:
    status: str
    reason: str | None = None
    metrics: Metrics = field(default_factory=dict)
    check: CheckSection | None = None
    params: Params = field(default_factory=dict)  # what the run settled (e.g. data used)
    series: dict[str, Series] | None = None  # per-step values (e.g. the loss trajectory)
    raised: bool = False  # the measurement raised: worth another attempt, unlike a result
    conditions: ConditionsSection | None = None  # what else the machine did (contention.py)
    # The raw samples behind the distribution metrics, run by run (statistics.raw_samples).
    raw: dict[str, RawSamples] | None = None
    measured_by: MeasuredBy | None = None
    # The energy of the measured work, the record's `energy` section (accelbench.measuring.energy).
    energy: EnergySection | None = None
    # A passing fault, not the configuration's: the next run measures the cell again.
    transient: bool = False


class RetryableFailure(RuntimeError):
    """An experiment failed on an attempt that is not the last: no record, the job fails."""


class Hung(RuntimeError):
    """Processes that waited for each other past their time (a peer that never joined the
    rendezvous, a collective that never completed): a passing fault, measured again."""


class RankFailure(RuntimeError):
    """A launched task other than rank 0 failed; it left a note saying why for the supervisor."""


# How errors say they ran out of memory: CUDA runtime, torch and the OS in words; the CUDA
# driver by its result's name, as numba-cuda's CudaAPIError reports a failed call.
OUT_OF_MEMORY_MESSAGES = ("out of memory", "can't allocate memory", "cuda_error_out_of_memory")


def is_out_of_memory(err: BaseException) -> bool:
    """Host MemoryError, torch's, CuPy's and Numba CUDA's device out-of-memory errors."""
    if isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError":
        return True
    message = str(err).lower()
    return any(words in message for words in OUT_OF_MEMORY_MESSAGES)


def is_transient_error(err: BaseException) -> bool:
    """A file system full for now (ENOSPC, a quota): the same measurement works once freed;
    or processes that hung waiting for each other."""
    return isinstance(err, Hung) or (isinstance(err, OSError) and err.errno in TRANSIENT_ERRNOS)


def of_error(err: BaseException, context: str = "") -> Outcome:
    """The outcome of an exception: "oom", a passing fault, or the configuration's failure;
    the reason is the exception's own text (after `context`, where given)."""
    reason = f"{context}{type(err).__name__}: {err}"
    if is_out_of_memory(err):
        return Outcome("oom", reason, raised=True)
    if is_transient_error(err):
        return Outcome("failed", f"{reason}; {MEASURED_AGAIN}", raised=True, transient=True)
    return Outcome("failed", reason, raised=True)


def of_process_end(what: str, code: int, kills: OomKills, plural: bool = False) -> Outcome:
    """The outcome of a process (`what`) that ended with `code` and left no outcome of its own.

    `kills` is the OOM killer's count read before the process started: only a SIGKILL
    while it rose is "oom". A crash (segfault, abort) is the configuration's failure;
    any other kill, or an exit without a word, is a passing fault.
    """
    ended = f"{what} {exit_text(code, plural)}"
    if code == -signal.SIGKILL:
        counted = kills.since()
        if counted:
            return Outcome(
                "oom",
                f"{ended} by the OOM killer ({kills.file} counted {counted} OOM kill"
                f"{'s' if counted > 1 else ''} meanwhile)",
                raised=True,
            )
        evidence = (
            f"not by the OOM killer ({kills.file} counted none)"
            if counted == 0
            else "with no OOM-kill counter readable here to call it out of memory"
        )
        ended = f"{ended}, {evidence}"
    elif crashed(code):
        return Outcome("failed", ended, raised=True)
    elif code >= 0:
        ended = f"{ended} without a record or an error of its own"
    return Outcome("failed", f"{ended}; {MEASURED_AGAIN}", raised=True, transient=True)


def _note(rank: int, outcome: Outcome) -> FailureNote:
    """What a failed process tells its supervisor: the rank, the status, the reason, and
    whether the fault was a passing one."""
    return {
        "rank": rank,
        "status": outcome.status,
        "reason": outcome.reason,
        "transient": outcome.transient,
    }


def of_note(note: FailureNote, prefix: str = "") -> Outcome:
    """The outcome a note (a rank's file, or a process's last words) hands over."""
    return Outcome(
        note["status"],
        f"{prefix}{note['reason']}",
        raised=True,
        transient=note.get("transient", False),
    )


def last_words(outcome: Outcome, rank: int = 0) -> str:
    """The stderr line that hands `outcome` to the supervisor (see LAST_WORDS)."""
    return LAST_WORDS + json.dumps(_note(rank, outcome))


def heard(line: str) -> FailureNote | None:
    """The note a LAST_WORDS line hands over, or None for any other line."""
    if not line.startswith(LAST_WORDS):
        return None
    return json.loads(line[len(LAST_WORDS) :])


def note_rank_failure(folder: str, rank: int, outcome: Outcome) -> None:
    """Leave `outcome`'s status and reason where the supervisor reads them (rank{r}.note)."""
    note = Path(folder) / f"rank{rank}.note"
    partial = note.with_suffix(".partial")
    partial.write_text(json.dumps(_note(rank, outcome)))
    partial.rename(note)


def rank_failures(folder: str) -> list[FailureNote]:
    """The notes failed ranks left in `folder`, lowest rank first."""
    notes = [json.loads(path.read_text()) for path in Path(folder).glob("rank*.note")]
    return sorted(notes, key=lambda note: note["rank"])

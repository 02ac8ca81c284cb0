"""What one measurement came to, and the failures that end an attempt.

A leaf module: the measuring modules (kernels, roofs, training) return an
Outcome, and the orchestration in accelbench.experiment turns it into a record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# How a measuring process tells its supervisor why it stopped without a record.
RETRY_EXIT_CODE = 3  # an error on an attempt that is not the last: retry the job
RANK_FAILED_EXIT_CODE = 4  # a launched rank other than 0 failed and left a note


@dataclass
class Outcome:
    status: str
    reason: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    check: dict[str, Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)  # what the run settled (e.g. data used)
    series: dict[str, Any] | None = None  # per-step values (e.g. the loss trajectory)
    raised: bool = False  # the measurement raised: worth another attempt, unlike a result
    conditions: dict[str, Any] | None = None  # what else the machine did (contention.py)
    # The raw samples behind the distribution metrics, run by run:
    # name -> {"unit": ..., "runs": [[sample, ...], ...]} (timing.raw_samples).
    raw: dict[str, Any] | None = None
    # What measured it: {"implementation": "module:variant", "timer": ...}.
    measured_by: dict[str, str] | None = None
    # The energy of the measured work, the record's `energy` section (accelbench.energy).
    energy: dict[str, Any] | None = None


class RetryableFailure(RuntimeError):
    """An experiment failed on an attempt that is not the last: no record, the job fails."""


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


def note_rank_failure(folder: str, rank: int, outcome: Outcome) -> None:
    """Leave `outcome`'s status and reason where the supervisor reads them (rank{r}.note)."""
    note = Path(folder) / f"rank{rank}.note"
    partial = note.with_suffix(".partial")
    partial.write_text(
        json.dumps({"rank": rank, "status": outcome.status, "reason": outcome.reason})
    )
    partial.rename(note)


def rank_failures(folder: str) -> list[dict[str, Any]]:
    """The notes failed ranks left in `folder`, lowest rank first."""
    notes = [json.loads(path.read_text()) for path in Path(folder).glob("rank*.note")]
    return sorted(notes, key=lambda note: note["rank"])

"""What one measurement came to, and the failures that end an attempt.

A leaf module: the measuring modules (kernels, roofs, training) return an
Outcome, and the orchestration in accelbench.experiment turns it into a record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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


class RetryableFailure(RuntimeError):
    """An experiment failed on an attempt that is not the last: no record, the job fails."""


class RankFailure(RuntimeError):
    """A launched task other than rank 0 failed; it left a note saying why for the supervisor."""


def is_out_of_memory(err: BaseException) -> bool:
    """Host MemoryError, torch's and CuPy's device out-of-memory errors."""
    if isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError":
        return True
    message = str(err).lower()
    return "out of memory" in message or "can't allocate memory" in message

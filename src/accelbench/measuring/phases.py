"""Where a job's wall time goes: named laps of the host clock, logged in one line.

A measurement's wall time is mostly not its timed samples: a fresh process and its CUDA
context, making inputs and their float64 reference, checks, energy windows. The job log
says how long each took, so a slow grid shows what to cut.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Phases:
    """Laps of the host clock, each named after what ran since the last one."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._last = clock()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        """The time since the last lap (or the start) was spent on `name` (added up)."""
        now = self._clock()
        self.laps[name] = self.laps.get(name, 0.0) + now - self._last
        self._last = now

    def text(self) -> str:
        """ "context 0.41 s, check 0.05 s, ..., 1.2 s in all"."""
        parts = [f"{name} {seconds:.2f} s" for name, seconds in self.laps.items()]
        return ", ".join([*parts, f"{sum(self.laps.values()):.2f} s in all"])

"""Whether the host ran this machine's CPUs at full speed while a measurement ran.

On a shared virtual machine the host slows a vCPU without a trace in the guest:
no steal time, no load, no clock change (the hyperthread beside it on the
physical core is busy, say). On a 2-vCPU Xeon VM a single-thread float32 GEMM
(n = 512) took 1.8 ms a call in some stretches and 2.6 to 3.5 ms in others, each
lasting seconds to tens of seconds, and a pure Python loop timed beside it was
40% slower in the same stretches; over the next hour the slow stretches grew from
about half the time to most of it. A measurement taken in such a stretch is not
the machine's, and an independent rerun minutes later may land in another one.

So each CPU run is bracketed by a probe: a fixed Python loop timed on every CPU
the run runs on (devices.cpus_used), the slowest CPU counting, held against the fastest this host
has shown (kept per host in the temporary directory, so for as long as the
machine runs). A run whose probe before or after it was more than
`max_host_slowdown` slower counts as slowed by the host, and a record whose runs
were at least half slowed (so its median is theirs) is flagged busy. The probe says
the host was not at full speed, not how much a given kernel slowed: an hour later
the loop stayed slow in 91% of the samples while the GEMM's median moved 4%
(correlation 0.40; benchmarks/host_drift.py prints both). Runs are not
waited for or replaced: tried on that VM, waiting up to a second for the host and
replacing slowed runs spent the precision budget (records that replaced runs
ended with a median of 3 runs and +-53%, the others with 7 runs and +-16%).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import tempfile
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

# About a millisecond of interpreter work, timed PROBE_REPEATS times per CPU (the median).
PROBE_ITERATIONS = 20_000
PROBE_REPEATS = 5
# The most CPUs probed: on a large node, a run's first CPUs stand for the rest.
MOST_CPUS = 8


def _loop(iterations: int) -> int:
    total = 0
    for value in range(iterations):
        total += value * value
    return total


def _probe_here() -> float:
    times = []
    for _ in range(PROBE_REPEATS):
        started = time.perf_counter()
        _loop(PROBE_ITERATIONS)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def probe(cpus: Collection[int] | None = None) -> float:
    """Seconds of the probe on the slowest of `cpus` (a run's: devices.cpus_used; by
    default every CPU this process may use), each timed pinned to it; the process's
    affinity is restored after."""
    allowed = os.sched_getaffinity(0)
    chosen = sorted(allowed if cpus is None else cpus)[:MOST_CPUS]
    try:
        slowest = 0.0
        for cpu in chosen:
            os.sched_setaffinity(0, {cpu})
            slowest = max(slowest, _probe_here())
        return slowest
    finally:
        os.sched_setaffinity(0, allowed)


def reference_file() -> Path:
    """Where this host's fastest probe is kept: per host and user, for as long as the
    temporary directory lasts (a Slurm job with a private one keeps its own)."""
    return (
        Path(tempfile.gettempdir())
        / f"accelbench-host-speed-{os.getuid()}-{socket.gethostname()}.json"
    )


@dataclass
class HostReference:
    """The probe's fastest time on this host, and the slowdown beyond which a run counts
    as slowed by the host."""

    limit: float
    best: float | None = None
    path: Path | None = None

    @classmethod
    def load(cls, limit: float, path: Path | None = None) -> HostReference:
        path = path or reference_file()
        try:
            best = float(json.loads(path.read_text())["probe_s"])
        except (OSError, ValueError, KeyError, TypeError):
            best = None
        return cls(limit, best if best and best > 0 else None, path)

    def slowdown(self, *probes: float) -> float:
        """How much slower the slowest of `probes` was than the host's fastest, after taking
        them into the fastest (the first probes are their own reference)."""
        fastest = min(probes)
        if self.best is None or fastest < self.best:
            self.best = fastest
            self._save()
        return max(probes) / self.best

    def slowed(self, slowdown: float) -> bool:
        return slowdown > self.limit

    def _save(self) -> None:
        if self.path is None:
            return
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            partial.write_text(json.dumps({"probe_s": self.best, "host": socket.gethostname()}))
            partial.replace(self.path)
        except OSError:  # a read-only or full temporary directory: the reference stays in memory
            partial.unlink(missing_ok=True)

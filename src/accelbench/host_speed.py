"""Whether the host ran this machine's CPUs at full speed around a run.

On a shared virtual machine the host's other work slows a vCPU without a trace
in the guest: no steal time, no load, no clock change (the hyperthread beside it
on the physical core is busy, say). On a 2-vCPU Xeon VM a single-thread float32
GEMM (n = 512) took 1.8 ms a call in some stretches and 2.6 to 3.5 ms in others,
each lasting seconds to tens of seconds, and a pure Python loop timed beside it
was 40% slower in the same stretches. A run measured in such a stretch is not
the machine's, and an independent rerun minutes later lands in another stretch:
its median falls outside an interval built from runs that agreed.

So each CPU run is bracketed by a probe: a fixed Python loop timed on every CPU
the run may use, the slowest CPU counting. Its time is held against the fastest
this host has shown (kept per host in the temporary directory, so for as long as
the machine runs). Before a run, the probe is repeated every POLL_S while it is
more than `max_host_slowdown` slower, for a second at most and as long as the
precision budget allows (accelbench.precision); a run whose probe before or after
it was slower is replaced by another where the budget allows, and kept, its
record marked, where it does not. A host slow at every probe of a measurement is
not waited for: its runs are kept and marked.
Over three minutes of such runs on that VM, the GEMM runs whose probes before and
after passed (41%) spread 1.77 to 1.98 ms (5th to 95th percentile) where all of
them spread 1.78 to 3.07 ms.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# About a millisecond of interpreter work, timed PROBE_REPEATS times per CPU (the median).
PROBE_ITERATIONS = 20_000
PROBE_REPEATS = 5
# The most CPUs probed: on a large node, a run's first CPUs stand for the rest.
MOST_CPUS = 8
# While the host is slow, the probe is repeated this often before a run starts, for at
# most MAX_WAIT_S: a dip of seconds is waited out, a host slow for minutes is not.
POLL_S = 0.05
MAX_WAIT_S = 1.0


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


def probe(cpus: set[int] | None = None) -> float:
    """Seconds of the probe on the slowest of `cpus` (default: those this process may use),
    each timed pinned to it; the process's affinity is restored after."""
    allowed = os.sched_getaffinity(0)
    chosen = sorted(cpus or allowed)[:MOST_CPUS]
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
class Gate:
    """The probe's fastest time on this host, and the slowdown a kept run may show."""

    limit: float
    best: float | None = None
    path: Path | None = None
    # Whether any probe of this measurement found the host at speed: only then is a slow
    # host worth waiting for, and a run it slowed worth replacing.
    seen_at_speed: bool = False
    probed: bool = False

    @classmethod
    def load(cls, limit: float, path: Path | None = None) -> Gate:
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
        self.probed = True
        self.seen_at_speed |= fastest / self.best <= self.limit
        return max(probes) / self.best

    def slowed(self, slowdown: float) -> bool:
        return slowdown > self.limit

    @property
    def worth_waiting(self) -> bool:
        """Before the first probe, or once the host has been at speed in this measurement:
        a host slow throughout is measured as it is (and marked), not waited for."""
        return not self.probed or self.seen_at_speed

    def wait_for_speed(self, allowance: float) -> float:
        """Probe until the host runs at speed or `allowance` seconds (MAX_WAIT_S at most)
        have passed; the last probe's seconds (the run's "before")."""
        deadline = time.perf_counter() + (min(allowance, MAX_WAIT_S) if self.worth_waiting else 0)
        while True:
            seconds = probe()
            if not self.slowed(self.slowdown(seconds)) or time.perf_counter() >= deadline:
                return seconds
            time.sleep(POLL_S)

    def _save(self) -> None:
        if self.path is None:
            return
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            partial.write_text(json.dumps({"probe_s": self.best, "host": socket.gethostname()}))
            partial.replace(self.path)
        except OSError:  # a read-only or full temporary directory: the reference stays in memory
            partial.unlink(missing_ok=True)

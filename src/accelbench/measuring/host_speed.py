"""Whether the host ran this machine's CPUs slower than usual while a measurement ran, and
how much the host's speed drifts over minutes.

On a shared virtual machine the host slows a vCPU without a trace in the guest: no steal
time, no load, no clock change (the hyperthread beside it on the physical core is busy,
say). On a 2-vCPU Xeon VM a single-thread float32 GEMM (n = 512) took 1.8 ms a call in some
stretches and 2.6 to 3.5 ms in others, each lasting seconds to tens of seconds, and a pure
Python loop timed beside it was 40% slower in the same stretches; on another VM the loop
ran at half its fastest speed for most of an hour. A measurement taken in a slow stretch
is not the machine's, and an independent rerun minutes later may land in another one.

So each CPU run is bracketed by a probe: a fixed Python loop timed on every CPU the run
may use, the slowest CPU counting. The probes of the last minutes are kept per host in the
temporary directory (HostHistory), and they serve three ends:

- a run whose probe was more than `max_host_slowdown` slower than the host's recent
  median counts as slowed, and a record at least half of whose runs were is flagged
  busy: it ran in a slower stretch than its neighbours. A host that is slow throughout
  is the machine's speed, not a reason to flag every cell: how far its recent median is
  from the fastest probe it ever showed is recorded (`host_speed_of_best`) and stated
  once in the summary;
- the spread of the probe's medians from one job to the next beyond its spread within a
  job is the host's drift over minutes (`drift`), which the rerun interval adds
  (accelbench.measuring.rerun): runs taken within seconds of each other cannot see it;
- the probe says the host was not at full speed, not how much a given kernel slowed
  (correlation 0.4 to 0.6 with a GEMM's times): it marks and widens, it never corrects.
"""

from __future__ import annotations

import json
import math
import os
import socket
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.measuring.statistics import madn

# About a millisecond of interpreter work, timed PROBE_REPEATS times per CPU (the median).
PROBE_ITERATIONS = 20_000
PROBE_REPEATS = 5
# The most CPUs probed: on a large node, a run's first CPUs stand for the rest.
MOST_CPUS = 8
# The probes that make the host's recent speed: those of the last RECENT_S seconds, and at
# most KEPT of them.
RECENT_S = 600.0
KEPT = 2000
# Probes a drift estimate needs, over at least DRIFT_SPAN_S, in at least DRIFT_JOBS jobs.
DRIFT_PROBES = 20
DRIFT_SPAN_S = 60.0
DRIFT_JOBS = 4


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


def probe(cpus: list[int] | None = None) -> float:
    """Seconds of the probe on the slowest of `cpus` (default: those this process may
    use), each timed pinned to it; the process's affinity is restored after."""
    allowed = os.sched_getaffinity(0)
    chosen = sorted(cpus if cpus is not None else allowed)[:MOST_CPUS]
    try:
        slowest = 0.0
        for cpu in chosen:
            os.sched_setaffinity(0, {cpu})
            slowest = max(slowest, _probe_here())
        return slowest
    finally:
        os.sched_setaffinity(0, allowed)


def history_file() -> Path:
    """Where this host's probes are kept: per host and user, for as long as the temporary
    directory lasts (a Slurm job with a private one keeps its own)."""
    name = f"accelbench-host-speed-{os.getuid()}-{socket.gethostname()}.json"
    return Path(tempfile.gettempdir()) / name


@dataclass
class HostHistory:
    """The host's probes: the fastest ever seen, and the recent ones as (time, job, seconds),
    `job` telling the probes of one measurement from its neighbours'."""

    limit: float
    best: float | None = None
    recent: list[tuple[float, str, float]] = field(default_factory=list)
    path: Path | None = None
    job: str = field(default_factory=lambda: f"{os.getpid()}-{time.time():.6f}")

    @classmethod
    def load(cls, limit: float, path: Path | None = None) -> HostHistory:
        path = path or history_file()
        try:
            kept = json.loads(path.read_text())
            best = float(kept["best"]) if kept.get("best") else None
            recent = [(float(at), str(job), float(s)) for at, job, s in kept.get("recent", [])]
        except (OSError, ValueError, KeyError, TypeError):
            best, recent = None, []
        return cls(limit, best if best and best > 0 else None, recent, path)

    def _window(self, now: float | None = None) -> list[tuple[float, str, float]]:
        now = time.time() if now is None else now
        return [entry for entry in self.recent if now - entry[0] <= RECENT_S]

    def reference(self) -> float | None:
        """The host's recent speed: the median probe of its recent neighbours (other
        measurements), else of its own probes, else none yet."""
        window = self._window()
        others = [seconds for _, job, seconds in window if job != self.job]
        chosen = others or [seconds for _, _, seconds in window]
        return statistics.median(chosen) if chosen else None

    def slowdown(self, *probes: float) -> float:
        """How much slower the slowest of `probes` (one run's) was than the host's recent
        speed, measured before they join it."""
        reference = self.reference() or min(probes)
        now = time.time()
        self.recent = self._window(now)[-(KEPT - len(probes)) :]
        self.recent += [(now, self.job, seconds) for seconds in probes]
        fastest = min(probes)
        if self.best is None or fastest < self.best:
            self.best = fastest
        self._save()
        return max(probes) / reference

    def slowed(self, slowdown: float) -> bool:
        return slowdown > self.limit

    def speed_of_best(self) -> float | None:
        """The host's recent speed as a fraction of the fastest it ever showed."""
        reference = self.reference()
        return self.best / reference if self.best and reference else None

    def drift(self) -> float | None:
        """The standard deviation (log scale) of the host's speed from one measurement to
        the next over the recent minutes, beyond the probe's own spread within a
        measurement: sqrt(MADn^2 of the measurements' median log probes - the part of it
        their within-measurement spread explains). None where the history is too short
        to tell (too few probes, jobs or minutes)."""
        window = self._window()
        if len(window) < DRIFT_PROBES or window[-1][0] - window[0][0] < DRIFT_SPAN_S:
            return None
        by_job: dict[str, list[float]] = {}
        for _, job, seconds in window:
            by_job.setdefault(job, []).append(math.log(seconds))
        if len(by_job) < DRIFT_JOBS:
            return None
        centres = [statistics.median(logs) for logs in by_job.values()]
        within = [value - statistics.median(logs) for logs in by_job.values() for value in logs]
        per_job = statistics.median(len(logs) for logs in by_job.values())
        excess = madn(centres) ** 2 - madn(within) ** 2 / per_job
        return math.sqrt(max(excess, 0.0))

    def _save(self) -> None:
        if self.path is None:
            return
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        kept = {"best": self.best, "host": socket.gethostname(), "recent": self.recent}
        try:
            partial.write_text(json.dumps(kept))
            partial.replace(self.path)
        except OSError:  # a read-only or full temporary directory: the history stays in memory
            partial.unlink(missing_ok=True)

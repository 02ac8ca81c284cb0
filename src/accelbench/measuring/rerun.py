"""The interval an independent rerun's median lands in, from a cell's own runs, the spread
of the other cells measured on the same host, and the host's drift over minutes.

A cell is measured in R independent runs; its value is the median m of their medians.
A rerun minutes later reports m', the median of its own R runs. With the log run medians
x_i = mu + d + sigma z_i, where d is the host's state during the measurement (which
runs seconds apart share) and z_i each run's own noise, the difference
m - m' = (d - d') + sigma (median(z) - median(z')) has the variance
2 sigma_d^2 + 2 V(R) sigma^2, V(R) the variance of the median of R standard normal
values (MEDIAN_VARIANCE). The 95% interval is m exp(+-1.96 sqrt(that)), where:

- sigma is the larger of the cell's own robust spread (MADn of its log run medians,
  scaled to be median-unbiased: MADN_FACTOR) and the median of that spread over the
  recent cells of the same device kind on this host (HostSpreads). On a noisy host the
  run-to-run spread is mostly the host's, so three runs alone cannot tell it (two of
  them agreeing by chance gave +-0.7%, where the next rerun landed 3% away), while the
  host's other cells can; a cell noisier than its neighbours keeps its own. Both are
  medians, so one odd run or one odd cell moves neither far.
- sigma_d is the host's drift from one measurement to the next: the larger of what the
  probes that bracket every CPU run saw (host_speed.HostHistory.drift; a GPU's runs are
  not timed by the host's CPUs), the typical spread and, on CPUs, the 80th percentile of
  the standard deviations of the log run medians of the host's recent cells of that kind
  (`spread_for`). Runs seconds apart rarely see it; a rerun minutes later meets it.

Without neighbours yet (the first cells a host measures), the interval is the
pivot of the runs alone (statistics.RERUN_QUANTILES), which sees no drift.
The prediction of how many runs a half-width needs follows from the same formula
(`runs_needed`): with drift as large as the target, no number of runs reaches it.
"""

from __future__ import annotations

import json
import math
import os
import socket
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from accelbench.measuring.statistics import madn

Z = 1.959963984540054  # the 97.5% quantile of the standard normal
# Var(median of R standard normal values), R = 1..30 (entry R - 1): 400,000 draws of each
# with numpy.random.default_rng(2026); tests/test_rerun.py repeats it with fewer.
MEDIAN_VARIANCE = (
    0.9994, 0.4986, 0.4489, 0.2984, 0.2876, 0.2148, 0.2107, 0.1685, 0.1661, 0.1383,
    0.1377, 0.1178, 0.1168, 0.1022, 0.1023, 0.0902, 0.0902, 0.0808, 0.0807, 0.0735,
    0.0733, 0.0671, 0.0671, 0.0618, 0.0618, 0.0573, 0.0573, 0.0534, 0.0535, 0.0500,
)  # fmt: skip
# c(R) with median(c(R) MADn(R standard normal values)) = 1, R = 2..30 (entry R - 2).
MADN_FACTOR = (
    1.410, 1.869, 1.488, 1.337, 1.262, 1.210, 1.177, 1.152, 1.133, 1.117,
    1.107, 1.097, 1.090, 1.081, 1.077, 1.071, 1.067, 1.063, 1.060, 1.057,
    1.053, 1.050, 1.049, 1.046, 1.046, 1.042, 1.041, 1.040, 1.038,
)  # fmt: skip
MAX_RUNS = len(MEDIAN_VARIANCE)
# The cells whose spreads make a host's: those of the last RECENT_S seconds, at least
# LEAST_CELLS of them, at most KEPT in all.
RECENT_S = 1800.0
LEAST_CELLS = 5
KEPT = 1000
# The quantile of the recent cells' standard deviations taken as the host's drift.
DRIFT_QUANTILE = 0.8
# An interval spanning more than this factor (high / low) says little: its record says so
# (precision.Progress.report), and where the host's typical interval is unknown, so do
# the tables (precision.imprecise_reason).
MOST_SPAN = 2.0


def own_spread(log_medians: list[float]) -> float:
    """The cell's own robust spread: c(R) MADn of its R >= 2 log run medians."""
    return MADN_FACTOR[min(len(log_medians), MAX_RUNS) - 2] * madn(log_medians)


@dataclass(frozen=True)
class Spread:
    """What the host says about a cell's runs: the typical run-to-run spread (log scale)
    of its recent cells of that device kind, and its drift between measurements."""

    host: float
    drift: float

    def sigma(self, log_medians: list[float], floor: float = 0.0) -> float:
        return max(own_spread(log_medians), self.host, floor)

    def half_width(self, log_medians: list[float], floor: float = 0.0) -> float:
        """The rerun interval's half-width on the log scale for these runs."""
        count = min(len(log_medians), MAX_RUNS)
        sigma = self.sigma(log_medians, floor)
        variance = 2 * MEDIAN_VARIANCE[count - 1] * sigma**2 + 2 * self.drift**2
        return Z * math.sqrt(variance)

    def runs_needed(self, log_medians: list[float], target: float) -> int | None:
        """The fewest runs whose interval would be within +-`target` (a fraction of the
        median) at this spread and drift; None where no number of runs up to MAX_RUNS
        would do."""
        sigma = self.sigma(log_medians)
        room = (math.log1p(target) / Z) ** 2 / 2 - self.drift**2
        if room <= 0:
            return None
        for runs in range(max(len(log_medians), 2), MAX_RUNS + 1):
            if MEDIAN_VARIANCE[runs - 1] * sigma**2 <= room:
                return runs
        return None

    def as_record(self) -> dict[str, float]:
        return {"host_run_spread": self.host, "host_drift": self.drift}


def spreads_file() -> Path:
    """Where this host's recent cells' spreads are kept, per user, in the temporary folder."""
    name = f"accelbench-spreads-{os.getuid()}-{socket.gethostname()}.json"
    return Path(tempfile.gettempdir()) / name


@dataclass
class HostSpreads:
    """The run-to-run spreads of the cells this host measured recently, by device kind:
    (time, kind, robust spread, standard deviation) each, of the cell's log run medians."""

    entries: list[tuple[float, str, float, float]]
    path: Path | None = None

    @classmethod
    def load(cls, path: Path | None = None) -> HostSpreads:
        path = path or spreads_file()
        try:
            found = json.loads(path.read_text())
            kept = [
                (float(at), str(kind), float(spread), float(deviation))
                for at, kind, spread, deviation in found
            ]
        except (OSError, ValueError, TypeError):
            kept = []
        return cls(kept, path)

    def _recent(self, kind: str) -> list[tuple[float, float]]:
        now = time.time()
        recent = [(s, d) for at, k, s, d in self.entries if k == kind and now - at <= RECENT_S]
        return recent if len(recent) >= LEAST_CELLS else []

    def typical(self, kind: str) -> float | None:
        """The median robust spread of this kind's recent cells; None with fewer than
        LEAST_CELLS."""
        recent = self._recent(kind)
        return statistics.median(spread for spread, _ in recent) if recent else None

    def swing(self, kind: str, quantile: float = DRIFT_QUANTILE) -> float | None:
        """That quantile (the 80th percentile) of the standard deviations of this kind's
        recent cells; None with fewer than LEAST_CELLS."""
        deviations = sorted(deviation for _, deviation in self._recent(kind))
        if not deviations:
            return None
        position = quantile * (len(deviations) - 1)
        below = math.floor(position)
        above = min(below + 1, len(deviations) - 1)
        return deviations[below] + (position - below) * (deviations[above] - deviations[below])

    def add(self, kind: str, log_medians: list[float]) -> None:
        """One more cell's own spreads (from R >= 2 runs)."""
        if len(log_medians) < 2 or not all(map(math.isfinite, log_medians)):
            return
        now = time.time()
        recent = [entry for entry in self.entries if now - entry[0] <= RECENT_S]
        cell = (now, kind, own_spread(log_medians), statistics.stdev(log_medians))
        self.entries = [*recent[-(KEPT - 1) :], cell]
        if self.path is None:
            return
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            partial.write_text(json.dumps(self.entries))
            partial.replace(self.path)
        except OSError:  # a read-only or full temporary directory: nothing is shared
            partial.unlink(missing_ok=True)


def spread_for(
    kind: str,
    drift: float | None,
    spreads: HostSpreads,
    quantile: float = DRIFT_QUANTILE,
    device_timed: bool = False,
) -> Spread | None:
    """The host's word on a cell of device kind `kind` whose probes drifted by `drift`, or
    None where it has too few recent cells of that kind to say (`quantile`: the swing's,
    which benchmarks/swing_replay.py varies).

    The drift is taken at least as large as the 80th percentile of the recent cells'
    standard deviations. A host runs slower in stretches of seconds to minutes: most
    cells' runs fall within one, while the cells whose runs met a change show how far a
    change moves a run, which is what a rerun minutes later meets. The robust spread is
    blind to one odd run by design, and the probe, a Python loop, feels less of a
    stretch than kernels do. The percentile is set from reruns of the default grid on a
    noisy VM (docs/methodology.md).

    A GPU's cells are timed by the device (`device_timed`): the host's stretches reach
    only the launch-bound ones, whose own spread shows them, so there is no swing. On an
    H200's host, launch-bound cells and pageable copies moved 20-30% from run to run, and
    as a swing they gave a device copy whose runs were 0.4% apart +-72%."""
    typical = spreads.typical(kind)
    if typical is None:
        return None
    swing = None if device_timed else spreads.swing(kind, quantile)
    return Spread(typical, max(typical, swing or 0.0, drift or 0.0))

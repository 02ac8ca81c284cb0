"""Paired ratios: two cells of one comparison group's measurement, read round by round.

The cells of a comparison group are measured in the same rounds (accelbench.job.group):
round i ran each of them once, in a random order, within seconds of each other. The log
ratio of their run medians round by round, d_i = ln(a_i / b_i), cancels what the host did
to both in that round (a slower stretch of minutes, a clock that moved), which a ratio of
two cells measured minutes apart carries twice. The paired ratio is exp(median d_i), and
its interval is where the same ratio of an independent rerun of the group lands, judged
from the spread of the d_i about their median:

- the spread is pooled over every pair of cells of the run on the same kind of device
  (robust: the median of their ranges, each over the median range of as many normal
  values), since three rounds alone say little of it; a pair whose own range is beyond
  what the pooled spread makes likely (its 99th percentile) keeps its own;
- a rerun's ratio and this one are each a median of n rounds (of variance v_n times a
  normal's), and each also carries what the host did to one cell and not to the other
  over the minutes between two measurements, which rounds seconds apart cannot see (on a
  2-core VM, the neighbour's share of the second core when 2 threads are set against 1).
  That term is taken as BETWEEN_MEASUREMENTS times the round-to-round spread, so the
  interval is the estimate times exp(+-z * sigma * sqrt(2 v_n + 2 k^2)), z for 95%
  (`constants`: the normal-theory numbers of n rounds; k: BETWEEN_MEASUREMENTS). The
  precision study (benchmarks/precision_study.py) checks that a rerun's ratios land inside.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

import numpy as np
import pandas as pd

from accelbench.platform.devices import DeviceError, parse_device

# Two-sided 95%.
Z = 1.959964
# The normal-theory constants of n rounds are simulated once per n (seeded, so every run
# of the analysis reads the same numbers): enough draws for three significant digits.
DRAWS = 200_000
# A pair's own range beyond the 99th percentile of the range of n normal values of the
# pooled spread is its own: that pair is noisier than its kind, and its interval says so.
OWN_QUANTILE = 0.99
# The spread of a pair's ratio between two measurements minutes apart, beyond its
# rounds', as a share of the round-to-round spread. Set from three independent runs of the
# default grid on a noisy 2-core VM (11 ratios, each run's intervals against the two
# others' medians, 66 in all): the rounds' term alone held 57 of 66 (86%); with 0.4, 61;
# with 0.6, 63 (95%), at a median interval of x/1.73 there (docs/methodology.md).
BETWEEN_MEASUREMENTS = 0.6


@dataclass(frozen=True)
class RoundConstants:
    """Of n standard normal values: the median of their range, its OWN_QUANTILE
    percentile over that median, and the variance of their median (of the middle two's
    mean for an even n)."""

    median_range: float
    own_limit: float
    median_variance: float


@functools.cache
def constants(n: int) -> RoundConstants:
    draws = np.random.default_rng(n).standard_normal((DRAWS, n))
    ranges = draws.max(axis=1) - draws.min(axis=1)
    middle = float(np.median(ranges))
    return RoundConstants(
        middle,
        float(np.quantile(ranges, OWN_QUANTILE)) / middle,
        float(np.median(draws, axis=1).var()),
    )


PAIRED_INTERVAL = (
    "paired: from the ratios of the two cells round by round, measured in the same rounds"
)


def log_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> list[float]:
    """ln(a_i / b_i) over the rounds both cells ran (run i of each was in round i)."""
    return [
        math.log(a / b)
        for a, b in zip(numerator, denominator, strict=False)
        if a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)
    ]


def _scaled_range(ratios: Sequence[float]) -> float | None:
    """A pair's range over the median range of as many normal values: its own spread."""
    if len(ratios) < 2:
        return None
    return (max(ratios) - min(ratios)) / constants(len(ratios)).median_range


def pooled_spread(pairs: Iterable[Sequence[float]]) -> float | None:
    """The typical round-to-round spread (a normal sigma) of the log ratios of many pairs of
    one kind: the median of their scaled ranges; None without a pair of two rounds."""
    scaled = [found for found in map(_scaled_range, pairs) if found is not None]
    return median(scaled) if scaled else None


def ratio(ratios: Sequence[float], pooled: float | None) -> tuple[float, float, float] | None:
    """(estimate, low, high) of a paired ratio from its pair's log ratios round by round and
    the pooled spread of its kind: the median of the ratios round by round (the ratio of
    the two cells' own medians would set two different rounds against each other, and
    bring back the drift the rounds cancel); None with fewer than two rounds in common."""
    n = len(ratios)
    own = _scaled_range(ratios)
    if own is None:
        return None
    sigma = pooled if pooled is not None else own
    if pooled is not None and own > constants(n).own_limit * pooled:
        sigma = own
    half = Z * sigma * math.sqrt(2 * constants(n).median_variance + 2 * BETWEEN_MEASUREMENTS**2)
    center = median(ratios)
    return math.exp(center), math.exp(center - half), math.exp(center + half)


def _runs(row: pd.Series) -> list[float]:
    """A tidy row's run medians of its time, in round order (tidy.PAIRING_COLUMNS)."""
    text = row.get("run_medians")
    return json.loads(text) if isinstance(text, str) else []


def _kind(device: Any) -> str | None:
    try:
        return parse_device(str(device)).kind
    except DeviceError:
        return None


def pooled_by_kind(frame: pd.DataFrame) -> dict[str, float]:
    """The pooled spread (`pooled_spread`) of every pair of records measured in one comparison
    group measurement, per device kind: what a pair of that kind's interval is built from."""
    if "group_measurement" not in frame.columns:
        return {}
    rows = frame[frame["group_measurement"].notna() & (frame["status"] == "ok")]
    by_kind: dict[str, list[list[float]]] = {}
    for _, group in rows.groupby("group_measurement", sort=False):
        runs = [_runs(row) for _, row in group.iterrows()]
        kind = _kind(group["device"].iloc[0])
        for first, second in itertools.combinations(runs, 2):
            by_kind.setdefault(kind, []).append(log_ratios(first, second))
    found = {kind: pooled_spread(pairs) for kind, pairs in by_kind.items()}
    return {kind: spread for kind, spread in found.items() if spread is not None}


def time_ratio(
    numerator: pd.Series, denominator: pd.Series, pooled: dict[str, float]
) -> tuple[float, float, float] | None:
    """(estimate, low, high) of numerator's time over denominator's, paired, where both rows
    were measured in the same comparison group measurement (the same work a call, so the
    ratio of their rates is its inverse); None otherwise."""
    measurement = numerator.get("group_measurement")
    if not isinstance(measurement, str) or measurement != denominator.get("group_measurement"):
        return None
    ratios = log_ratios(_runs(numerator), _runs(denominator))
    return ratio(ratios, pooled.get(_kind(numerator["device"])))

"""The statistics every metric carries: one run's summary, and the interval across runs.

The summary of one run is the median with a distribution-free 95% confidence
interval (order statistics of a binomial), because benchmark times
are skewed and the mean is not robust. That interval only describes the jitter
inside one run: everything the run shares (the process's memory layout, the
machine's load, the CPU's clock) moves all its samples together. An experiment
is therefore measured in several independent runs, and `across_runs` reports
the interval that an independent rerun's median lands in (RERUN_INTERVAL).
The samples come from the library timers (accelbench.measuring.timers).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, cast

from accelbench.measuring.sections import Distribution, Metric, RawSamples, Series, SingleValue

if TYPE_CHECKING:
    from accelbench.measuring.rerun import Spread

CI_LEVEL = 0.95
# The standard normal's third quartile: MADn's denominator (`madn`).
NORMAL_Q3 = statistics.NormalDist().inv_cdf(0.75)
# The 95% quantile of |median(X) - median(Y)| / S(X) for X, Y two independent samples
# of R standard normal values, S the rerun scale (`rerun_scale`: the range at three
# values, MADn otherwise), R = 2..MAX_RUNS (entry R - 2): the factor of the rerun
# interval (`across_runs`). Each is a simulation of 2,000,000 pairs with
# numpy.random.default_rng(R); tests/test_timing.py repeats it with fewer pairs.
RERUN_QUANTILES = (
    12.088, 2.018, 4.479, 4.019, 2.514, 2.375, 1.84, 1.78, 1.501, 1.466,
    1.29, 1.271, 1.146, 1.133, 1.044, 1.032, 0.959, 0.953, 0.894, 0.891,
    0.843, 0.838, 0.796, 0.794, 0.758, 0.755, 0.725, 0.722, 0.695,
)  # fmt: skip
MAX_RUNS = len(RERUN_QUANTILES) + 1
# The opening words of every rerun interval's description (record param `interval`), by
# which a table tells a rerun interval from a within-run CI whatever else the text names.
RERUN_INTERVAL_OPENING = "95% prediction interval for the median an independent rerun"
RERUN_INTERVAL = (
    f"{RERUN_INTERVAL_OPENING} of R runs reports: "
    "median of the R run medians times exp(+-q(R) * S(log run medians)), S their range at "
    "3 runs and their MADn otherwise, q(R) the 95% quantile of that pivot for normal log "
    "run medians (accelbench.measuring.statistics.RERUN_QUANTILES)"
)
HOST_RERUN_INTERVAL = (
    f"{RERUN_INTERVAL_OPENING} of R runs reports, minutes "
    "later: median of the R run medians times exp(+-1.96 sqrt(2 V(R) s^2 + 2 d^2)), s the "
    "larger of the runs' own spread and that of the host's recent cells, d the host's drift "
    "between measurements (conditions host_run_spread, host_drift; accelbench.measuring.rerun)"
)
WITHIN_RUN_INTERVAL = "order-statistic CI of the median within one run (does not cover reruns)"


def median_ci(
    sorted_samples: Sequence[float], level: float = CI_LEVEL
) -> tuple[float, float, float]:
    """Order-statistic confidence interval for the median.

    Returns (low, high, achieved_level): [x_k, x_(n-k+1)] for the largest k with
    P(B <= k - 1) <= (1 - level) / 2, B ~ Binomial(n, 1/2).
    With too few samples for the requested level the widest interval (min, max)
    is returned with the level it really has, so a reader never sees a 95% claim
    that the data cannot support.
    """
    n = len(sorted_samples)
    if n == 0:
        raise ValueError("no samples")
    if n == 1:
        return sorted_samples[0], sorted_samples[0], 0.0
    # The least j with P(B <= j) >= tail; a binomial CDF of n halves never equals a tail
    # such as 0.025 exactly, so k - 1 = j - 1.
    k = min(max(_half_binomial_quantile(n, (1.0 - level) / 2), 1), n // 2)
    achieved = 1.0 - 2.0 * _half_binomial_cdf(n, k - 1)
    return sorted_samples[k - 1], sorted_samples[n - k], achieved


# Terms of Binomial(n, 1/2) more than this many standard deviations below its mean add
# less than exp(-SKIPPED_SIGMAS^2 / 2) ~ 1e-22 to its CDF: the sums start there, so that a
# million samples cost thousands of terms, not half a million.
SKIPPED_SIGMAS = 10.0


def _half_binomial_cdfs(n: int) -> Iterator[tuple[int, float]]:
    """(j, P(B <= j)) for B ~ Binomial(n, 1/2), j rising from where the CDF starts to count;
    each term from log-gamma, which stays finite where C(n, j) / 2^n would overflow a float."""
    first = max(0, math.floor(n / 2 - SKIPPED_SIGMAS * math.sqrt(n) / 2))
    log_all = math.lgamma(n + 1) - n * math.log(2.0)
    total = 0.0
    for j in range(first, n + 1):
        total += math.exp(log_all - math.lgamma(j + 1) - math.lgamma(n - j + 1))
        yield j, total


def _half_binomial_quantile(n: int, tail: float) -> int:
    """The least j with P(B <= j) >= tail, B ~ Binomial(n, 1/2)."""
    return next((j for j, cdf in _half_binomial_cdfs(n) if cdf >= tail), n)


def _half_binomial_cdf(n: int, j: int) -> float:
    """P(B <= j), B ~ Binomial(n, 1/2)."""
    return next((cdf for at, cdf in _half_binomial_cdfs(n) if at == j), 0.0)


def summarize(samples: Sequence[float], unit: str) -> Distribution:
    """The statistics stored for a measured quantity: n, median, quartiles, IQR, 95% CI, spread."""
    values = sorted(float(sample) for sample in samples)
    if not values:
        raise ValueError("cannot summarise an empty sample")
    if len(values) >= 2:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    else:
        q1 = q3 = values[0]
    low, high, level = median_ci(values)
    return {
        "unit": unit,
        "n": len(values),
        "median": statistics.median(values),
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "ci_low": low,
        "ci_high": high,
        "ci_level": level,
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) >= 2 else 0.0,
        "min": values[0],
        "max": values[-1],
    }


def rerun_half_width(values: Sequence[float], floor: float = 0.0) -> float:
    """q(R) x S(values): the half-width of the rerun interval of R run medians (on the
    log scale for times and rates; see `across_runs`). Where the scale is 0 (a coarse
    timer: more than half the values equal, all three at three runs) `floor`, the scale
    the runs' own jitter gives one run's median, stands in for it."""
    count = len(values)
    if not 2 <= count <= MAX_RUNS:
        raise ValueError(f"a rerun interval needs 2 to {MAX_RUNS} runs, not {count}")
    scale = rerun_scale(values)
    return RERUN_QUANTILES[count - 2] * (scale if scale > 0 else floor)


def rerun_scale(values: Sequence[float]) -> float:
    """The spread the rerun interval scales with: MADn, robust to an odd run, except at
    three values, where it is the range. MADn of three values is the smaller of the two
    gaps to the middle one, often near zero, so its pivot needs 17.3 of it: on normal
    runs 11.6 sigma on average, against 2.02 ranges, 3.4 sigma, for the same 95%. No
    spread of three values is robust to an odd one; the range shows it."""
    if len(values) == 3:
        return max(values) - min(values)
    return madn(values)


def madn(values: Sequence[float]) -> float:
    """The normal-consistent median absolute deviation: median(|x - median(x)|) over the
    standard normal's third quartile, so that it estimates sigma for normal values."""
    centre = statistics.median(values)
    return float(statistics.median(abs(value - centre) for value in values)) / NORMAL_Q3


def _median_error(run: Distribution) -> float:
    """The standard error of a run's median from its own jitter: 1.2533 sigma / sqrt(n), with
    sigma = IQR / 1.349 (normal samples)."""
    return 0.929 * (run["q3"] - run["q1"]) / math.sqrt(run["n"])


def across_runs(runs: Sequence[Distribution], spread: Spread | None = None) -> Distribution:
    """Combine one metric's summaries from R independent runs into what a rerun would show.

    The median is the median of the run medians; the interval (RERUN_INTERVAL) is
    where the median reported by an independent rerun of R runs lands, 95% of the time.
    Why it is built so: let the log run medians be x_i = mu + sigma z_i, independent
    (each run is a process of its own) and equally distributed. A rerun reports
    m' = median(y_1..y_R) of its own runs, and m = median(x) is reported here.
    T = (m - m') / MADn(x) does not depend on mu or sigma (both statistics move and
    scale with the data), so it is a pivot: with q(R) its 95% quantile for normal z
    (RERUN_QUANTILES), P(|m' - m| <= q(R) MADn(x)) = 0.95 whatever mu and sigma are,
    and m exp(+-q(R) MADn(x)) covers the rerun's median. It narrows with R like
    sqrt(pi / R) (each median's variance is about pi sigma^2 / 2R). It is robust: one
    odd run shifts the median and the median absolute deviation by at most one order
    statistic, where it would inflate a standard deviation without bound (a cold
    run 6 times slower than the others made a t interval 50 times wider). At three runs
    the range takes MADn's place (`rerun_scale`), the same pivot argument with its own
    q(3). It covers no drift between runs minutes apart: where the host has told how its
    runs spread and drift (`spread`, accelbench.measuring.rerun), the interval is built
    from that instead.
    Times and rates vary by factors, hence the log scale: the interval stays
    positive, and a time's interval maps exactly onto its rate's. A metric with a
    median at or below zero gets the same interval on its own scale.
    One run gives back its own summary, whose interval covers only that run.
    """
    if not runs:
        raise ValueError("no runs to combine")
    if len(runs) == 1:
        return {**runs[0], "runs": 1}
    medians = [run["median"] for run in runs]
    count = len(runs)
    centre = statistics.median(medians)
    jitter = statistics.median(_median_error(run) for run in runs)
    if min(medians) > 0:
        logs = [math.log(median) for median in medians]
        if spread is not None:
            half = spread.half_width(logs, jitter / centre)
        else:
            half = rerun_half_width(logs, jitter / centre)
        low, high = centre * math.exp(-half), centre * math.exp(half)
    else:
        half = rerun_half_width(medians, jitter)
        low, high = centre - half, centre + half
    q1 = statistics.median(run["q1"] for run in runs)
    q3 = statistics.median(run["q3"] for run in runs)
    combined: Distribution = {
        "unit": runs[0]["unit"],
        "n": sum(run["n"] for run in runs),
        "runs": count,
        "median": centre,
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "ci_low": low,
        "ci_high": high,
        "ci_level": CI_LEVEL,
        "between_run_std": statistics.stdev(medians),
        "min": min(run["min"] for run in runs),
        "max": max(run["max"] for run in runs),
    }
    if all("mean" in run and "std" in run for run in runs):
        # Pooled over every sample: E[x^2] of each run from its mean and std.
        sizes = [run["n"] for run in runs]
        mean = sum(n * run["mean"] for n, run in zip(sizes, runs, strict=True)) / sum(sizes)
        second = sum(
            (n - 1) * run["std"] ** 2 + n * run["mean"] ** 2
            for n, run in zip(sizes, runs, strict=True)
        )
        combined["mean"] = mean
        combined["std"] = math.sqrt(max(second - sum(sizes) * mean**2, 0.0) / (sum(sizes) - 1))
    return combined


def relative_half_width(metric: Distribution) -> float:
    """How precise a distribution metric is: the larger side of its interval as a fraction
    of its median (0.05: within +-5%); infinite where the median is not positive."""
    median = metric["median"]
    if median is None or not median > 0:
        return math.inf
    return max(metric["ci_high"] - median, median - metric["ci_low"]) / median


# Series of one value per run, which a combination of runs joins run after run: each
# run's warm-up length and whether it reached steady state (a roof's are prefixed with it).
WARMUP_SERIES = ("warmup_s", "warmup_steady")


def warmup_series(
    seconds: Sequence[float], steady: Sequence[bool], prefix: str = ""
) -> dict[str, Series]:
    """Each run's warm-up as record series: its length, and 1 where it reached steady
    state (0: its budget was spent while the time per call still fell)."""
    return {
        f"{prefix}warmup_s": {"unit": "s", "values": [float(value) for value in seconds]},
        f"{prefix}warmup_steady": {"unit": "count", "values": [int(value) for value in steady]},
    }


def is_per_run_series(name: str) -> bool:
    return name.endswith(WARMUP_SERIES)


def raw_samples(unit: str, runs: Sequence[Sequence[float]]) -> RawSamples:
    """The raw samples of one quantity, one list per run, as a record's `raw` keeps them."""
    return {"unit": unit, "runs": [[float(sample) for sample in run] for run in runs]}


def combine_raw(
    raws: Sequence[dict[str, RawSamples] | None],
) -> dict[str, RawSamples] | None:
    """The raw samples of R runs as one set: each quantity's runs one after the other."""
    present = [raw for raw in raws if raw]
    if not present:
        return None
    return {
        name: {"unit": entry["unit"], "runs": [run for raw in present for run in raw[name]["runs"]]}
        for name, entry in present[0].items()
    }


def combine_metrics(
    runs: Sequence[dict[str, Metric]], spread: Spread | None = None
) -> dict[str, Metric]:
    """The metrics of R runs as one set: distributions across runs, single values from run 1."""
    return {
        name: across_runs(distributions(runs, name), spread) if "median" in metric else metric
        for name, metric in runs[0].items()
    }


def distributions(runs: Sequence[dict[str, Metric]], name: str) -> list[Distribution]:
    """Distribution metric `name` of every run (each run measured the same metrics the same
    way: where one run's is a distribution, every run's is)."""
    return cast(list[Distribution], [run[name] for run in runs])


def run_medians(runs: Sequence[dict[str, Metric]]) -> dict[str, Series]:
    """Each distribution metric's median in every run, as record series `<metric>_run_medians`."""
    return {
        f"{name}_run_medians": {
            "unit": metric["unit"],
            "values": [run["median"] for run in distributions(runs, name)],
        }
        for name, metric in runs[0].items()
        if "median" in metric
    }


def rate_from_time(time_stats: Distribution, amount: float, unit: str) -> Distribution:
    """Turn time statistics into a rate (amount per second), e.g. GFLOP/s or samples/s.

    A rate is a decreasing function of time, so quantiles map across with the
    interval ends swapped; n and the confidence level carry over unchanged.
    """

    def rate(seconds: float) -> float:
        return amount / seconds if seconds > 0 else math.inf

    return {
        "unit": unit,
        "n": time_stats["n"],
        "median": rate(time_stats["median"]),
        "q1": rate(time_stats["q3"]),
        "q3": rate(time_stats["q1"]),
        "iqr": rate(time_stats["q1"]) - rate(time_stats["q3"]),
        "ci_low": rate(time_stats["ci_high"]),
        "ci_high": rate(time_stats["ci_low"]),
        "ci_level": time_stats["ci_level"],
        "min": rate(time_stats["max"]),
        "max": rate(time_stats["min"]),
    }


def value(amount: float, unit: str) -> SingleValue:
    """A metric that is a single number, not a distribution (peak memory, a loss)."""
    return {"unit": unit, "value": amount}

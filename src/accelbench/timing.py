"""Measurement: the library timers, and the statistics every metric carries.

Timing itself is delegated to torch.utils.benchmark (CPU and PyTorch) and, on a
GPU, to cupyx.profiler.benchmark or CUDA events; this module only adapts their
results into plain per-run samples and summarises them. The summary of one run is the
median with a distribution-free 95% confidence interval (order statistics of a
binomial), because benchmark times are skewed and the mean is not robust.

That interval only describes the jitter inside one run: everything the run
shares (the process's memory layout, the machine's load, the CPU's clock)
moves all its samples together. An experiment is therefore measured in several
independent runs, and `across_runs` reports the interval a rerun is expected to
land in: a 95% prediction interval for one more run's median, from the spread
of the runs' log medians (Student's t, R - 1 degrees of freedom), never narrower
than a single run's own interval.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

CI_LEVEL = 0.95
# Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
RERUN_INTERVAL = (
    "95% prediction interval for the median of one more run: median of the R run medians "
    "times exp(+-t(0.975, R-1) * sd(log run medians) * sqrt(1 + 1/R)), at least a run's quartiles"
)
WITHIN_RUN_INTERVAL = "order-statistic CI of the median within one run (does not cover reruns)"
# What each backend's timer (backends.Backend.timer) is, as a record names it.
TIMERS = {
    "torch": "torch.utils.benchmark.Timer.timeit (one block per sample, threads pinned)",
    "cupy": "cupyx.profiler.benchmark (CUDA events, one per launch)",
    "cuda-events": "CUDA events around each Numba CUDA launch",
}
# Training times each step itself: the loop synchronises the device around it.
STEP_TIMER = "time.perf_counter around each training step, device synchronised"


def t_quantile_975(degrees_of_freedom: int) -> float:
    """Student's t 97.5% quantile; beyond 30 degrees of freedom a close approximation."""
    if degrees_of_freedom < 1:
        raise ValueError("t needs at least one degree of freedom")
    if degrees_of_freedom <= len(_T975):
        return _T975[degrees_of_freedom - 1]
    return 1.960 + 2.5 / degrees_of_freedom


def _binomial_cdf(k: int, n: int) -> float:
    """P(Binomial(n, 1/2) <= k), exact, computed in log space so large n does not overflow."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    log_half_n = n * math.log(0.5)
    return sum(
        math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + log_half_n)
        for i in range(k + 1)
    )


def median_ci(
    sorted_samples: Sequence[float], level: float = CI_LEVEL
) -> tuple[float, float, float]:
    """Order-statistic confidence interval for the median.

    Returns (low, high, achieved_level). With too few samples for the requested
    level the widest interval (min, max) is returned with the level it really has,
    so a reader never sees a 95% claim that the data cannot support.
    """
    n = len(sorted_samples)
    if n == 0:
        raise ValueError("no samples")
    if n == 1:
        return sorted_samples[0], sorted_samples[0], 0.0
    alpha = 1.0 - level
    # Largest k (1-based) with P(B <= k-1) <= alpha/2: interval [x_k, x_{n-k+1}].
    k = 1
    while k + 1 <= n // 2 and _binomial_cdf(k, n) <= alpha / 2:
        k += 1
    achieved = 1.0 - 2.0 * _binomial_cdf(k - 1, n)
    return sorted_samples[k - 1], sorted_samples[n - k], achieved


def summarize(samples: Sequence[float], unit: str) -> dict[str, Any]:
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


def across_runs(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Combine one metric's summaries from R independent runs into what a rerun would show.

    The median is the median of the run medians; the interval is the prediction
    interval of RERUN_INTERVAL, never narrower than the middle half of a run's
    samples (a between-run spread estimated from few runs can come out near zero
    by chance; a run's min..max, its order-statistic CI at few samples, would let
    one stray sample decide the width).
    One run gives back its own summary, whose interval covers only that run.
    """
    if not runs:
        raise ValueError("no runs to combine")
    if len(runs) == 1:
        return {**runs[0], "runs": 1}
    medians = [run["median"] for run in runs]
    count = len(runs)
    centre = statistics.median(medians)
    spread = statistics.stdev(medians)
    # Times and rates vary by factors: the interval is built on the log scale, so it
    # stays positive and a time's interval maps exactly onto its rate's.
    logs = [math.log(median) for median in medians] if min(medians) > 0 else None
    factor = t_quantile_975(count - 1) * math.sqrt(1.0 + 1.0 / count)
    below = statistics.median(run["median"] - run["q1"] for run in runs)
    above = statistics.median(run["q3"] - run["median"] for run in runs)
    if logs:
        half = factor * statistics.stdev(logs)
        low, high = centre * math.exp(-half), centre * math.exp(half)
    else:
        low, high = centre - factor * spread, centre + factor * spread
    q1 = statistics.median(run["q1"] for run in runs)
    q3 = statistics.median(run["q3"] for run in runs)
    combined = {
        "unit": runs[0]["unit"],
        "n": sum(run["n"] for run in runs),
        "runs": count,
        "median": centre,
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "ci_low": min(low, centre - below),
        "ci_high": max(high, centre + above),
        "ci_level": CI_LEVEL,
        "between_run_std": spread,
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


def raw_samples(unit: str, runs: Sequence[Sequence[float]]) -> dict[str, Any]:
    """The raw samples of one quantity, one list per run, as a record's `raw` keeps them."""
    return {"unit": unit, "runs": [[float(sample) for sample in run] for run in runs]}


def combine_raw(raws: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The raw samples of R runs as one set: each quantity's runs one after the other."""
    present = [raw for raw in raws if raw]
    if not present:
        return None
    return {
        name: {"unit": entry["unit"], "runs": [run for raw in present for run in raw[name]["runs"]]}
        for name, entry in present[0].items()
    }


def combine_metrics(runs: Sequence[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The metrics of R runs as one set: distributions across runs, single values from run 1."""
    return {
        name: across_runs([run[name] for run in runs]) if "median" in metric else metric
        for name, metric in runs[0].items()
    }


def run_medians(runs: Sequence[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each distribution metric's median in every run, as record series `<metric>_run_medians`."""
    return {
        f"{name}_run_medians": {
            "unit": metric["unit"],
            "values": [run[name]["median"] for run in runs],
        }
        for name, metric in runs[0].items()
        if "median" in metric
    }


def rate_from_time(time_stats: dict[str, Any], amount: float, unit: str) -> dict[str, Any]:
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


def value(amount: float, unit: str) -> dict[str, Any]:
    """A metric that is a single number, not a distribution (peak memory, a loss)."""
    return {"unit": unit, "value": amount}


def synchronizer(timer: str, on_gpu: bool) -> Callable[[], None]:
    """What waits for the GPU work a backend's calls queued (nothing on the CPU, where
    every call returns when it is done)."""
    if not on_gpu:
        return lambda: None
    if timer == "cupy":
        import cupy

        return cupy.cuda.runtime.deviceSynchronize
    if timer == "cuda-events":
        from numba import cuda

        return cuda.synchronize
    import torch

    return torch.cuda.synchronize


def torch_timer_samples(
    fn: Callable[[], object], *, num_threads: int, min_run_time: float, samples: int, label: str
) -> list[float]:
    """`samples` per-run times (s) of `fn`, each from one torch.utils.benchmark.Timer block.

    The block length (runs per sample) is chosen so that all samples together
    last about `min_run_time`; each `Timer.timeit` call warms up before its block,
    pins torch's thread count and synchronises CUDA around the block.
    blocked_autorange is not used because it grows blocks by factors of ten and
    can return as few as two samples, too few for a confidence interval.
    """
    from torch.utils import benchmark

    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=num_threads, label=label)
    per_run = timer.timeit(1).times[0]
    number = max(1, int(min_run_time / (samples * per_run)))
    return [timer.timeit(number).times[0] for _ in range(samples)]


def cupy_samples(
    fn: Callable[[], object], *, min_run_time: float, n_warmup: int = 3
) -> list[float]:
    """Per-run GPU times (s) of `fn` from cupyx.profiler.benchmark (CUDA events, synchronised)."""
    from cupyx.profiler import benchmark

    result = benchmark(fn, n_repeat=10_000, n_warmup=n_warmup, max_duration=min_run_time)
    return [float(t) for t in result.gpu_times[0]]


def cuda_event_samples(
    fn: Callable[[], object], *, min_run_time: float, n_warmup: int = 3, max_repeat: int = 10_000
) -> list[float]:
    """Per-launch GPU times (s) of a Numba CUDA launch, read from CUDA events.

    Numba has no benchmark helper, so this follows cupyx.profiler.benchmark's
    method: warm-up launches first, then one event pair around each launch,
    repeating until `min_run_time` of wall time is spent (the events, not the
    wall clock, give the samples).
    """
    import time

    from numba import cuda

    for _ in range(n_warmup):
        fn()
    cuda.synchronize()
    samples: list[float] = []
    deadline = time.perf_counter() + min_run_time
    while len(samples) < max_repeat and (len(samples) < 3 or time.perf_counter() < deadline):
        start, end = cuda.event(), cuda.event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3)
    return samples

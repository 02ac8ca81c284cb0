"""Measurement: the library timers, and the statistics every metric carries.

Timing itself is delegated to torch.utils.benchmark (CPU and PyTorch) and, on a
GPU, to cupyx.profiler.benchmark or CUDA events; this module only adapts their
results into plain per-run samples and summarises them. Before any sample counts,
a run warms up until its time per call stops falling (`warm_up`): a freshly
forked process is cold (page faults, thread pools starting, a clock still low
after idling) and its first calls can be several times slower than its later ones.

The summary of one run is the median with a distribution-free 95% confidence
interval (order statistics of a binomial, scipy.stats), because benchmark times
are skewed and the mean is not robust. That interval only describes the jitter
inside one run: everything the run shares (the process's memory layout, the
machine's load, the CPU's clock) moves all its samples together. An experiment
is therefore measured in several independent runs, and `across_runs` reports
the interval that an independent rerun's median lands in (RERUN_INTERVAL).
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.measuring.rerun import Spread

CI_LEVEL = 0.95
# The 95% quantile of |median(X) - median(Y)| / MADn(X) for X, Y two independent samples
# of R standard normal values, R = 2..MAX_RUNS (entry R - 2): the factor of the rerun
# interval (`across_runs`). Each is a simulation of 2,000,000 pairs with
# numpy.random.default_rng(R); tests/test_timing.py repeats it with fewer pairs.
RERUN_QUANTILES = (
    12.088, 17.3, 4.479, 4.019, 2.514, 2.375, 1.84, 1.78, 1.501, 1.466,
    1.29, 1.271, 1.146, 1.133, 1.044, 1.032, 0.959, 0.953, 0.894, 0.891,
    0.843, 0.838, 0.796, 0.794, 0.758, 0.755, 0.725, 0.722, 0.695,
)  # fmt: skip
MAX_RUNS = len(RERUN_QUANTILES) + 1
RERUN_INTERVAL = (
    "95% prediction interval for the median an independent rerun of R runs reports: "
    "median of the R run medians times exp(+-q(R) * MADn(log run medians)), q(R) the 95% "
    "quantile of that pivot for normal log run medians "
    "(accelbench.measuring.timing.RERUN_QUANTILES)"
)
HOST_RERUN_INTERVAL = (
    "95% prediction interval for the median an independent rerun of R runs reports, minutes "
    "later: median of the R run medians times exp(+-1.96 sqrt(2 V(R) s^2 + 2 d^2)), s the "
    "larger of the runs' own spread and that of the host's recent cells, d the host's drift "
    "between measurements (conditions host_run_spread, host_drift; accelbench.measuring.rerun)"
)
WITHIN_RUN_INTERVAL = "order-statistic CI of the median within one run (does not cover reruns)"
# What each backend's timer (backends.Backend.timer) is, as a record names it.
TIMERS = {
    "torch": "torch.utils.benchmark.Timer.timeit (one block per sample, threads pinned)",
    "cupy": "cupyx.profiler.benchmark (CUDA events) around blocks of back-to-back calls",
    "cuda-events": "CUDA events around blocks of back-to-back Numba CUDA launches",
}
# The GPU timers' samples are blocks of back-to-back calls lasting at least this long, as
# torch's Timer times blocks: an event pair around one call on an idle GPU also times the
# host preparing the launch (on an H100, a 134 MB copy read 157 us a call so in Numba and
# 102 us in CuPy, 129 us and 92 us in blocks of 20; torch's blocks gave 92 us), so the
# backends would not be compared alike.
GPU_BLOCK_S = 1e-3
# Training times each step itself: the loop synchronises the device around it.
STEP_TIMER = "time.perf_counter around each training step, device synchronised"
# Warm-up: blocks of calls until the median of the last WARMUP_WINDOW blocks' time per
# call is no more than WARMUP_TOLERANCE below the median of the WARMUP_WINDOW before.
WARMUP_WINDOW = 3
WARMUP_TOLERANCE = 0.03


def median_ci(
    sorted_samples: Sequence[float], level: float = CI_LEVEL
) -> tuple[float, float, float]:
    """Order-statistic confidence interval for the median.

    Returns (low, high, achieved_level): [x_k, x_(n-k+1)] for the largest k with
    P(B <= k - 1) <= (1 - level) / 2, B ~ Binomial(n, 1/2) (scipy.stats.binom).
    With too few samples for the requested level the widest interval (min, max)
    is returned with the level it really has, so a reader never sees a 95% claim
    that the data cannot support.
    """
    n = len(sorted_samples)
    if n == 0:
        raise ValueError("no samples")
    if n == 1:
        return sorted_samples[0], sorted_samples[0], 0.0
    from scipy import stats  # a second to import: not for every reader of this module

    tail = (1.0 - level) / 2
    binomial = stats.binom(n, 0.5)
    # ppf: the least j with P(B <= j) >= tail; a binomial CDF of n halves never equals
    # a tail such as 0.025 exactly, so k - 1 = j - 1.
    k = min(max(int(binomial.ppf(tail)), 1), n // 2)
    achieved = 1.0 - 2.0 * float(binomial.cdf(k - 1))
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


def rerun_half_width(values: Sequence[float], floor: float = 0.0) -> float:
    """q(R) x MADn(values): the half-width of the rerun interval of R run medians (on the
    log scale for times and rates; see `across_runs`). Where more than half the values are
    equal (a coarse timer) MADn is 0; `floor`, the scale the runs' own jitter gives one
    run's median, stands in for it then."""
    from scipy import stats  # a second to import: not for every reader of this module

    count = len(values)
    if not 2 <= count <= MAX_RUNS:
        raise ValueError(f"a rerun interval needs 2 to {MAX_RUNS} runs, not {count}")
    scale = float(stats.median_abs_deviation(values, scale="normal"))
    return RERUN_QUANTILES[count - 2] * (scale if scale > 0 else floor)


def _median_error(run: dict[str, Any]) -> float:
    """The standard error of a run's median from its own jitter: 1.2533 sigma / sqrt(n), with
    sigma = IQR / 1.349 (normal samples)."""
    return 0.929 * (run["q3"] - run["q1"]) / math.sqrt(run["n"])


def across_runs(runs: Sequence[dict[str, Any]], spread: Spread | None = None) -> dict[str, Any]:
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
    run 6 times slower than the others made a t interval 50 times wider). It is wide
    at few runs (17 MADn at three): where the host has told how its runs spread and
    drift (`spread`, accelbench.measuring.rerun), the interval is built from that instead.
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
    combined = {
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


def relative_half_width(metric: dict[str, Any]) -> float:
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
) -> dict[str, dict[str, Any]]:
    """Each run's warm-up as record series: its length, and 1 where it reached steady
    state (0: its budget was spent while the time per call still fell)."""
    return {
        f"{prefix}warmup_s": {"unit": "s", "values": [float(value) for value in seconds]},
        f"{prefix}warmup_steady": {"unit": "count", "values": [int(value) for value in steady]},
    }


def is_per_run_series(name: str) -> bool:
    return name.endswith(WARMUP_SERIES)


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


def combine_metrics(
    runs: Sequence[dict[str, dict[str, Any]]], spread: Spread | None = None
) -> dict[str, dict[str, Any]]:
    """The metrics of R runs as one set: distributions across runs, single values from run 1."""
    return {
        name: across_runs([run[name] for run in runs], spread) if "median" in metric else metric
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


@dataclass(frozen=True)
class Warmup:
    """How one run reached steady state before its samples: the warm-up's length, its
    blocks, whether the time per call had stopped falling (False: the warm-up budget was
    spent while it still fell), and the time per call it ended at."""

    seconds: float
    blocks: int
    steady: bool
    per_call: float


@dataclass(frozen=True)
class Timed:
    """One run's timed samples (s) and the warm-up before them."""

    samples: list[float]
    warmup: Warmup


def stopped_falling(per_call: Sequence[float]) -> bool:
    """Whether a sequence of block (or step) times has reached steady state: the median of
    the last WARMUP_WINDOW is no more than WARMUP_TOLERANCE below the median of the
    WARMUP_WINDOW before them. Medians, so that one slow block (an interrupt) neither
    ends nor prolongs the warm-up."""
    if len(per_call) < 2 * WARMUP_WINDOW:
        return False
    last = statistics.median(per_call[-WARMUP_WINDOW:])
    before = statistics.median(per_call[-2 * WARMUP_WINDOW : -WARMUP_WINDOW])
    return last >= (1.0 - WARMUP_TOLERANCE) * before


def warm_up(
    block: Callable[[int], float], first: float, *, block_s: float, budget_s: float
) -> Warmup:
    """Run `block(number)` (the time per call of `number` calls) until steady state or until
    `budget_s` is spent, in blocks of about `block_s` each, sized from the latest time per
    call (`first`: one call's, to start from). A fixed count of warm-up calls is not
    enough: a freshly forked process ran matmul at 9.2, 6.0, 3.8, 2.6 and 4.4 ms per call
    before it settled at 1.5 ms."""
    started = time.perf_counter()
    per_call: list[float] = []
    latest = first
    while True:
        latest = block(max(1, int(block_s / max(latest, 1e-9))))
        per_call.append(latest)
        steady = stopped_falling(per_call)
        spent = time.perf_counter() - started
        if steady or spent >= budget_s:
            settled = statistics.median(per_call[-WARMUP_WINDOW:])
            return Warmup(spent, len(per_call), steady, settled)


def synchronised_block(
    fn: Callable[[], object], sync: Callable[[], None]
) -> Callable[[int], float]:
    """A warm-up block for GPU timers: `number` calls between two device synchronisations,
    on the host clock (the samples themselves come from the library's CUDA events)."""

    def block(number: int) -> float:
        calls = repeated(fn, number)
        sync()
        started = time.perf_counter()
        calls()
        sync()
        return (time.perf_counter() - started) / number

    return block


def torch_timer_samples(
    fn: Callable[[], object],
    *,
    num_threads: int,
    min_run_time: float,
    samples: int,
    label: str,
    warmup_s: float,
) -> Timed:
    """`samples` per-run times (s) of `fn`, each from one torch.utils.benchmark.Timer block,
    after a warm-up (`warm_up`, at most `warmup_s`) in blocks of the same Timer.

    The block length (runs per sample) is chosen from the warmed-up time per call so
    that all samples together last about `min_run_time`; each `Timer.timeit` call
    pins torch's thread count and synchronises CUDA around the block.
    blocked_autorange is not used because it grows blocks by factors of ten and
    can return as few as two samples, too few for a confidence interval.
    """
    timer = torch_benchmark().Timer(
        stmt="fn()", globals={"fn": fn}, num_threads=num_threads, label=label
    )
    sample_s = min_run_time / samples
    warmup = warm_up(
        lambda number: timer.timeit(number).times[0],
        timer.timeit(1).times[0],
        block_s=sample_s / 2,
        budget_s=warmup_s,
    )
    number = max(1, int(sample_s / max(warmup.per_call, 1e-9)))
    return Timed([timer.timeit(number).times[0] for _ in range(samples)], warmup)


def torch_benchmark():
    """torch.utils.benchmark, imported in the run that times (see experiment.preload). Its
    import of torch.utils.cpp_extension warns, in every run of a host without a GPU, that
    no CUDA runtime is found: a message about compiling extensions, which nothing here
    does, so it is kept off the console."""
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    from torch.utils import benchmark

    return benchmark


def _gpu_warm_up(fn: Callable[[], object], sync, min_run_time: float, warmup_s: float) -> Warmup:
    block = synchronised_block(fn, sync)
    return warm_up(block, block(1), block_s=min_run_time / 10, budget_s=warmup_s)


def calls_per_block(per_call: float) -> int:
    """Back-to-back calls in one GPU timer sample: enough to last GPU_BLOCK_S."""
    return max(1, math.ceil(GPU_BLOCK_S / max(per_call, 1e-9)))


def repeated(fn: Callable[[], object], number: int) -> Callable[[], None]:
    """`fn` called `number` times back to back, nothing waited for in between."""

    def block() -> None:
        for _ in range(number):
            fn()

    return block


def cupy_samples(fn: Callable[[], object], *, min_run_time: float, warmup_s: float) -> Timed:
    """GPU times per call (s) of `fn` from cupyx.profiler.benchmark (CUDA events, synchronised)
    around blocks of calls (calls_per_block), after a warm-up (`warm_up`, at most `warmup_s`)."""
    import cupy
    from cupyx.profiler import benchmark

    warmup = _gpu_warm_up(fn, cupy.cuda.runtime.deviceSynchronize, min_run_time, warmup_s)
    number = calls_per_block(warmup.per_call)
    result = benchmark(repeated(fn, number), n_repeat=10_000, n_warmup=1, max_duration=min_run_time)
    return Timed([float(t) / number for t in result.gpu_times[0]], warmup)


def cuda_event_samples(
    fn: Callable[[], object], *, min_run_time: float, warmup_s: float, max_repeat: int = 10_000
) -> Timed:
    """GPU times per launch (s) of a Numba CUDA launch, read from CUDA events.

    Numba has no benchmark helper, so this follows cupyx.profiler.benchmark's
    method after the warm-up (`warm_up`, at most `warmup_s`): one event pair around
    each block of launches (calls_per_block), repeating until `min_run_time` of wall
    time is spent (the events, not the wall clock, give the samples).
    """
    from numba import cuda

    warmup = _gpu_warm_up(fn, cuda.synchronize, min_run_time, warmup_s)
    number = calls_per_block(warmup.per_call)
    block = repeated(fn, number)
    samples: list[float] = []
    deadline = time.perf_counter() + min_run_time
    while len(samples) < max_repeat and (len(samples) < 3 or time.perf_counter() < deadline):
        start, end = cuda.event(), cuda.event()
        start.record()
        block()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / number)
    return Timed(samples, warmup)

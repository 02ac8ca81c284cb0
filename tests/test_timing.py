"""Statistics of measured samples: median CI, quartiles, rates."""

from __future__ import annotations

import math
import statistics
import sys
import time
import types

import numpy as np
import pytest
from scipy import stats

from accelbench.measuring import statistics as sample_stats
from accelbench.measuring import timers


def test_median_ci_uses_order_statistics_with_true_level():
    samples = [float(i) for i in range(1, 11)]
    low, high, level = sample_stats.median_ci(samples)
    # n = 10: P(B(10, 1/2) <= 1) = 11/1024, so [x_2, x_9] covers 1 - 22/1024.
    assert (low, high) == (2.0, 9.0)
    assert level == pytest.approx(1 - 22 / 1024)


def test_median_ci_with_too_few_samples_reports_its_real_level():
    low, high, level = sample_stats.median_ci([1.0, 2.0, 3.0])
    assert (low, high) == (1.0, 3.0)
    assert level == pytest.approx(0.75)
    assert sample_stats.median_ci([5.0]) == (5.0, 5.0, 0.0)


def test_median_ci_large_sample_is_near_normal_approximation():
    n = 400
    low, high, level = sample_stats.median_ci(list(range(n)))
    half_width = 1.96 * math.sqrt(n) / 2
    assert abs((high - low) / 2 - half_width) <= 2
    assert 0.95 <= level < 0.96


def hand_written_median_ci(sorted_samples, level=sample_stats.CI_LEVEL):
    """The order-statistic CI as this module first computed it: an exact binomial sum,
    one term per k (its cost grows with the square of the sample count)."""
    n = len(sorted_samples)

    def cdf(k):
        if k < 0:
            return 0.0
        return sum(math.comb(n, i) for i in range(k + 1)) / 2**n

    k = 1
    while k + 1 <= n // 2 and cdf(k) <= (1 - level) / 2:
        k += 1
    return sorted_samples[k - 1], sorted_samples[n - k], 1.0 - 2.0 * cdf(k - 1)


@pytest.mark.parametrize("n", [*range(2, 60), 97, 200, 401])
def test_median_ci_is_the_hand_written_interval(n):
    samples = [float(value) for value in range(n)]
    low, high, level = sample_stats.median_ci(samples)
    expected_low, expected_high, expected_level = hand_written_median_ci(samples)
    assert (low, high) == (expected_low, expected_high)
    assert level == pytest.approx(expected_level, abs=1e-12)


def test_madn_is_scipys_normal_consistent_median_absolute_deviation():
    rng = np.random.default_rng(5)
    for count in range(2, sample_stats.MAX_RUNS + 1):
        values = list(rng.lognormal(size=count))
        assert sample_stats.madn(values) == pytest.approx(
            stats.median_abs_deviation(values, scale="normal"), rel=1e-12
        )
    assert sample_stats.madn([1.0, 1.0, 1.0, 2.0]) == 0.0  # more than half equal


def test_median_ci_of_many_samples_is_the_normal_approximation():
    n = 1_000_000  # a quarter-hour wait for the hand-written sum; the terms near the tail at once
    low, high, level = sample_stats.median_ci(range(n))
    assert (high - low) / 2 == pytest.approx(1.96 * math.sqrt(n) / 2, abs=2)
    assert level == pytest.approx(sample_stats.CI_LEVEL, abs=1e-3)


def test_summarize_statistics():
    stats = sample_stats.summarize([3.0, 1.0, 2.0, 5.0, 4.0], "s")
    assert stats["unit"] == "s" and stats["n"] == 5
    assert stats["median"] == 3.0 and stats["min"] == 1.0 and stats["max"] == 5.0
    assert (stats["q1"], stats["q3"], stats["iqr"]) == (2.0, 4.0, 2.0)
    assert stats["ci_low"] <= stats["median"] <= stats["ci_high"]
    with pytest.raises(ValueError):
        sample_stats.summarize([], "s")


def test_rate_from_time_inverts_and_swaps_interval():
    stats = sample_stats.summarize([0.5, 1.0, 2.0, 1.0, 1.0], "s")
    rate = sample_stats.rate_from_time(stats, 10.0, "GFLOP/s")
    assert rate["median"] == pytest.approx(10.0)
    assert rate["ci_low"] == pytest.approx(10.0 / stats["ci_high"])
    assert rate["ci_high"] == pytest.approx(10.0 / stats["ci_low"])
    assert rate["min"] == pytest.approx(5.0) and rate["max"] == pytest.approx(20.0)
    assert rate["q1"] <= rate["median"] <= rate["q3"]
    assert rate["n"] == 5 and rate["unit"] == "GFLOP/s"


def test_torch_timer_returns_requested_samples_after_its_warm_up():
    counter = {"calls": 0}

    def work():
        counter["calls"] += 1
        sum(range(1000))

    timed = timers.torch_timer_samples(
        work, num_threads=1, min_run_time=0.01, samples=7, label="t", warmup_s=1.0
    )
    assert len(timed.samples) == 7
    assert all(s > 0 for s in timed.samples)
    assert timed.warmup.blocks >= 2 * timers.WARMUP_WINDOW
    assert counter["calls"] >= 7 + timed.warmup.blocks  # warm-up calls are not samples


class ColdThenSteady:
    """A block whose time per call falls from `cold` towards `steady` over the first
    `cooling` calls (a freshly forked process), on a fake clock advanced by each block."""

    def __init__(self, clock, cold: float, steady: float, cooling: int):
        self.clock, self.cold, self.steady, self.cooling = clock, cold, steady, cooling
        self.calls = 0

    def per_call(self) -> float:
        left = max(0.0, 1.0 - self.calls / self.cooling)
        return self.steady + (self.cold - self.steady) * left

    def __call__(self, number: int) -> float:
        spent = 0.0
        for _ in range(number):
            spent += self.per_call()
            self.calls += 1
        self.clock.now += spent
        return spent / number


class FakeClock:
    """Stands in for the `time` module timers.py reads its clock from."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def test_the_warm_up_lasts_until_the_time_per_call_stops_falling(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(timers, "time", clock)
    # 9 ms per call at first, 1.5 ms once 40 calls have run: a fixed count of 2 calls
    # (torch's own warm-up) would have timed the cold calls.
    block = ColdThenSteady(clock, cold=9e-3, steady=1.5e-3, cooling=40)
    warmup = timers.warm_up(block, 9e-3, block_s=5e-3, budget_s=10.0)
    assert warmup.steady
    assert block.calls >= 40
    assert warmup.per_call == pytest.approx(1.5e-3, rel=timers.WARMUP_TOLERANCE)
    assert warmup.seconds == pytest.approx(clock.now)


def test_a_warm_up_that_never_settles_stops_at_its_budget_and_says_so(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(timers, "time", clock)
    per_call = [9e-3]

    def always_faster(number: int) -> float:  # each block 10% faster than the one before
        per_call.append(per_call[-1] * 0.9)
        clock.now += 5e-3
        return per_call[-1]

    warmup = timers.warm_up(always_faster, 9e-3, block_s=5e-3, budget_s=0.5)
    assert not warmup.steady
    assert 0.5 <= warmup.seconds < 0.5 + 0.02


def test_steady_state_ignores_one_slow_block():
    assert timers.stopped_falling([1.0, 1.0, 1.0, 1.0, 5.0, 1.0])
    assert not timers.stopped_falling([3.0, 2.8, 2.6, 2.0, 1.8, 1.6])
    assert not timers.stopped_falling([1.0] * (2 * timers.WARMUP_WINDOW - 1))


def rerun_pivots(runs: int, pairs: int, rng) -> np.ndarray:
    """|median(X) - median(Y)| / S(X) for X, Y of `runs` standard normal values each, S the
    range at three values and MADn otherwise (sample_stats.rerun_scale)."""
    first, rerun = rng.standard_normal((2, pairs, runs))
    if runs == 3:
        scale = first.max(1) - first.min(1)
    else:
        scale = stats.median_abs_deviation(first, axis=1, scale="normal")
    return np.abs(np.median(first, 1) - np.median(rerun, 1)) / scale


@pytest.mark.parametrize("runs", [2, 3, 4, 5, 8, 13, 30])
def test_the_rerun_quantiles_are_what_the_simulation_gives(runs):
    pivots = rerun_pivots(runs, 200_000, np.random.default_rng(1000 + runs))
    # 200,000 pairs put the 95% quantile within a few percent (heavier tails at R = 2, 3).
    tolerance = 0.08 if runs <= 3 else 0.03
    assert sample_stats.RERUN_QUANTILES[runs - 2] == pytest.approx(
        np.quantile(pivots, sample_stats.CI_LEVEL), rel=tolerance
    )


def run_summaries(samples: np.ndarray, unit: str = "s") -> list[dict]:
    """What across_runs reads of each run's summary, one run per row of `samples`
    (sample_stats.summarize gives more, one run at a time and slower)."""
    q1, median, q3 = np.quantile(samples, [0.25, 0.5, 0.75], axis=1)
    return [
        {"unit": unit, "n": samples.shape[1], "median": m, "q1": a, "q3": b, "min": lo, "max": hi}
        for m, a, b, lo, hi in zip(
            median.tolist(),
            q1.tolist(),
            q3.tolist(),
            samples.min(1).tolist(),
            samples.max(1).tolist(),
            strict=True,
        )
    ]


def simulated_runs(rng, true_time, between, within, runs, samples, odd=0.0):
    """Per-run summaries of a cell whose runs each shift all their samples by a common
    factor (log-normal, sd `between`): what a shared disturbance does to one run. With
    probability `odd` a run is an odd one, 1.35 to 7 times slower (cold, or disturbed)."""
    shifts = true_time * np.exp(rng.normal(0.0, between, runs))
    shifts *= np.where(rng.random(runs) < odd, np.exp(rng.uniform(0.3, 2.0, runs)), 1.0)
    return run_summaries(shifts[:, None] * np.exp(rng.normal(0.0, within, (runs, samples))))


def coverage_and_width(rng, runs, between, within, odd=0.0, samples=5, trials=1000):
    """Fraction of trials where an independent rerun's reported median (the median of its
    own `runs` run medians) lands in the first measurement's interval, and the median
    relative half-width of that interval."""
    inside, widths = 0, []
    for _ in range(trials):
        first = sample_stats.across_runs(
            simulated_runs(rng, 1e-3, between, within, runs, samples, odd)
        )
        rerun = sample_stats.across_runs(
            simulated_runs(rng, 1e-3, between, within, runs, samples, odd)
        )
        inside += first["ci_low"] <= rerun["median"] <= first["ci_high"]
        widths.append(sample_stats.relative_half_width(first))
    return inside / trials, float(np.median(widths))


@pytest.mark.parametrize("odd", [0.0, 0.1])
def test_the_rerun_interval_covers_an_independent_reruns_median_and_narrows_with_runs(odd):
    rng = np.random.default_rng(7)
    found = {
        runs: coverage_and_width(rng, runs, between=0.02, within=0.01, odd=odd)
        for runs in (3, 4, 8, 16)
    }
    assert all(covered >= 0.9 for covered, _ in found.values()), found
    widths = [width for _, width in found.values()]
    # Three runs' range gives about the width four runs' MADn gives (3.4 and 3.3 sigma on
    # average): from R = 4 on, each more run narrows it.
    assert widths[1:] == sorted(widths[1:], reverse=True), found
    assert widths[0] < 1.5 * widths[1], found  # not the 17.3 MADn of three runs
    assert widths[-1] < widths[1] / 2.5  # 16 runs: well under half of 4 runs' width


def test_without_between_run_spread_the_interval_still_covers_reruns():
    rng = np.random.default_rng(2)
    covered, width = coverage_and_width(rng, 5, between=0.0, within=0.02, samples=9)
    assert covered >= 0.93
    assert width < 0.05


def test_one_odd_run_does_not_blow_the_interval_up():
    rng = np.random.default_rng(3)
    runs = simulated_runs(rng, 1e-3, between=0.01, within=0.01, runs=6, samples=5)
    settled = sample_stats.across_runs(runs)
    # The cold first run of a forked process: six times slower than the others.
    cold = run_summaries(6e-3 * np.array([[1.0, 1.01, 0.99]]))[0]
    disturbed = sample_stats.across_runs([cold, *runs[1:]])
    assert sample_stats.relative_half_width(disturbed) < 3 * sample_stats.relative_half_width(
        settled
    )
    assert disturbed["median"] == pytest.approx(settled["median"], rel=0.05)


def test_across_runs_summarises_every_sample_and_stays_positive():
    runs = [
        sample_stats.summarize([1.0, 1.1, 1.2], "s"),
        sample_stats.summarize([2.0, 2.1, 2.2], "s"),
        sample_stats.summarize([4.0, 4.1, 4.2], "s"),
        sample_stats.summarize([8.0, 8.1, 8.2], "s"),
    ]
    combined = sample_stats.across_runs(runs)
    everything = [1.0, 1.1, 1.2, 2.0, 2.1, 2.2, 4.0, 4.1, 4.2, 8.0, 8.1, 8.2]
    assert combined["runs"] == 4 and combined["n"] == 12
    assert combined["median"] == pytest.approx(3.1)
    assert combined["min"] == 1.0 and combined["max"] == 8.2
    assert combined["mean"] == pytest.approx(np.mean(everything))
    assert combined["std"] == pytest.approx(np.std(everything, ddof=1))
    assert 0 < combined["ci_low"] < 1.0 and combined["ci_high"] > 8.2  # factors of two apart
    assert combined["ci_level"] == sample_stats.CI_LEVEL
    # A rate derived from each run combines to the same relative interval.
    rates = sample_stats.across_runs(
        [sample_stats.rate_from_time(run, 1.0, "GFLOP/s") for run in runs]
    )
    assert math.log(rates["ci_high"] / rates["ci_low"]) == pytest.approx(
        math.log(combined["ci_high"] / combined["ci_low"])
    )


def test_a_metric_at_or_below_zero_gets_its_interval_on_its_own_scale():
    runs = [sample_stats.summarize([value] * 3, "J") for value in (-1.0, 0.0, 1.0, 2.0)]
    combined = sample_stats.across_runs(runs)
    assert combined["ci_low"] < 0.5 < combined["ci_high"]
    assert combined["median"] - combined["ci_low"] == pytest.approx(
        combined["ci_high"] - combined["median"]
    )
    assert sample_stats.relative_half_width(sample_stats.across_runs(runs[:2])) == math.inf


def test_one_run_keeps_its_own_interval():
    run = sample_stats.summarize([1.0, 1.1, 1.2, 1.3, 1.4], "s")
    assert sample_stats.across_runs([run]) == {**run, "runs": 1}


def test_more_runs_than_the_quantiles_cover_are_refused():
    runs = [
        sample_stats.summarize([1.0 + index], "s") for index in range(sample_stats.MAX_RUNS + 1)
    ]
    with pytest.raises(ValueError, match="rerun interval needs 2 to"):
        sample_stats.across_runs(runs)


def test_combine_metrics_and_run_medians():
    runs = [
        {
            "time": sample_stats.summarize([m, m, m], "s"),
            "threads": sample_stats.value(2, "threads"),
        }
        for m in (1.0, 2.0, 3.0)
    ]
    combined = sample_stats.combine_metrics(runs)
    assert combined["time"]["runs"] == 3 and combined["threads"] == {"unit": "threads", "value": 2}
    assert sample_stats.run_medians(runs) == {
        "time_run_medians": {"unit": "s", "values": [1.0, 2.0, 3.0]}
    }


class WallClockEvent:
    """A CUDA event that reads the host clock when recorded (a GPU with no queue)."""

    def record(self, stream=0):
        self.at = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.at - self.at) * 1e3


def fake_cupy_benchmark(func, n_repeat, n_warmup, max_duration):
    """cupyx.profiler.benchmark's contract: gpu_times[device][repeat] of one call of func."""
    for _ in range(n_warmup):
        func()
    times, started = [], time.perf_counter()
    while len(times) < n_repeat and time.perf_counter() - started < max_duration:
        start, end = WallClockEvent(), WallClockEvent()
        start.record()
        func()
        end.record()
        times.append(start.elapsed_time(end) / 1e3)
    return types.SimpleNamespace(gpu_times=np.array([times]))


@pytest.fixture
def gpu_timers(monkeypatch):
    """CuPy's and Numba's CUDA timing APIs over the host clock."""
    import numba

    cupy = types.SimpleNamespace(
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(deviceSynchronize=lambda: None))
    )
    profiler = types.ModuleType("cupyx.profiler")
    profiler.benchmark = fake_cupy_benchmark
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupyx", types.ModuleType("cupyx"))
    monkeypatch.setitem(sys.modules, "cupyx.profiler", profiler)
    monkeypatch.setattr(
        numba,
        "cuda",
        types.SimpleNamespace(synchronize=lambda: None, event=WallClockEvent),
        raising=False,  # numba.cuda is not imported here until a GPU timer asks for it
    )


@pytest.mark.parametrize("timer", [timers.cupy_samples, timers.cuda_event_samples])
def test_a_gpu_timer_times_blocks_of_calls_and_reports_the_time_of_one(gpu_timers, timer):
    """An event pair around each single call would add the host's launch latency to every
    sample; torch's Timer times blocks, so the CuPy and Numba timers must too."""
    calls = []

    def call():
        calls.append(1)
        started = time.perf_counter()
        while time.perf_counter() - started < 1e-4:
            pass

    timed = timer(call, min_run_time=0.05, warmup_s=0.01)
    per_block = timers.calls_per_block(timed.warmup.per_call)
    assert per_block >= 3  # 1 ms blocks of 0.1 ms calls
    assert len(calls) >= per_block * len(timed.samples)
    assert 0.9e-4 <= statistics.median(timed.samples) <= 3e-4

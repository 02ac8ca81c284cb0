"""Statistics of measured samples: median CI, quartiles, rates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelbench import timing


def test_median_ci_uses_order_statistics_with_true_level():
    samples = [float(i) for i in range(1, 11)]
    low, high, level = timing.median_ci(samples)
    # n = 10: P(B(10, 1/2) <= 1) = 11/1024, so [x_2, x_9] covers 1 - 22/1024.
    assert (low, high) == (2.0, 9.0)
    assert level == pytest.approx(1 - 22 / 1024)


def test_median_ci_with_too_few_samples_reports_its_real_level():
    low, high, level = timing.median_ci([1.0, 2.0, 3.0])
    assert (low, high) == (1.0, 3.0)
    assert level == pytest.approx(0.75)
    assert timing.median_ci([5.0]) == (5.0, 5.0, 0.0)


def test_median_ci_large_sample_is_near_normal_approximation():
    n = 400
    low, high, level = timing.median_ci(list(range(n)))
    half_width = 1.96 * math.sqrt(n) / 2
    assert abs((high - low) / 2 - half_width) <= 2
    assert 0.95 <= level < 0.96


def test_summarize_statistics():
    stats = timing.summarize([3.0, 1.0, 2.0, 5.0, 4.0], "s")
    assert stats["unit"] == "s" and stats["n"] == 5
    assert stats["median"] == 3.0 and stats["min"] == 1.0 and stats["max"] == 5.0
    assert (stats["q1"], stats["q3"], stats["iqr"]) == (2.0, 4.0, 2.0)
    assert stats["ci_low"] <= stats["median"] <= stats["ci_high"]
    with pytest.raises(ValueError):
        timing.summarize([], "s")


def test_rate_from_time_inverts_and_swaps_interval():
    stats = timing.summarize([0.5, 1.0, 2.0, 1.0, 1.0], "s")
    rate = timing.rate_from_time(stats, 10.0, "GFLOP/s")
    assert rate["median"] == pytest.approx(10.0)
    assert rate["ci_low"] == pytest.approx(10.0 / stats["ci_high"])
    assert rate["ci_high"] == pytest.approx(10.0 / stats["ci_low"])
    assert rate["min"] == pytest.approx(5.0) and rate["max"] == pytest.approx(20.0)
    assert rate["q1"] <= rate["median"] <= rate["q3"]
    assert rate["n"] == 5 and rate["unit"] == "GFLOP/s"


def test_torch_timer_returns_requested_samples():
    counter = {"calls": 0}

    def work():
        counter["calls"] += 1
        sum(range(1000))

    samples = timing.torch_timer_samples(
        work, num_threads=1, min_run_time=0.01, samples=7, label="t"
    )
    assert len(samples) == 7
    assert all(s > 0 for s in samples)
    assert counter["calls"] >= 7 + 2  # warm-up runs are not among the samples


def simulated_runs(rng, true_time, between, within, runs, samples):
    """Per-run summaries of a cell whose runs each shift all their samples by a common
    factor (log-normal, sd `between`): what a shared disturbance does to one run."""
    found = []
    for _ in range(runs):
        shift = true_time * math.exp(rng.normal(0.0, between))
        found.append(
            timing.summarize((shift * np.exp(rng.normal(0.0, within, samples))).tolist(), "s")
        )
    return found


def coverage(rng, combine, between, within, runs=3, samples=5, trials=2000):
    """Fraction of trials where one more independent run's median lands in the interval."""
    inside = 0
    for _ in range(trials):
        first = combine(simulated_runs(rng, 1e-3, between, within, runs, samples))
        rerun = simulated_runs(rng, 1e-3, between, within, 1, samples)[0]["median"]
        inside += first["ci_low"] <= rerun <= first["ci_high"]
    return inside / trials


def test_the_interval_across_runs_covers_reruns_where_one_runs_jitter_does_not():
    rng = np.random.default_rng(1)
    # Between-run spread 5%, within-run jitter 1%: the situation of a busy or noisy host.
    across = coverage(rng, timing.across_runs, between=0.05, within=0.01)
    one_run = coverage(rng, lambda runs: runs[0], between=0.05, within=0.01)
    assert across >= 0.93  # a 95% prediction interval, checked on 2000 reruns
    assert one_run < 0.35  # one run's own interval misses most reruns


def test_without_between_run_spread_the_interval_keeps_a_runs_quartiles():
    rng = np.random.default_rng(2)
    runs = simulated_runs(rng, 1e-3, between=0.0, within=0.02, runs=3, samples=9)
    combined = timing.across_runs(runs)
    below = min(run["median"] - run["q1"] for run in runs)
    assert combined["median"] - combined["ci_low"] >= below
    assert coverage(rng, timing.across_runs, between=0.0, within=0.02) >= 0.93


def test_across_runs_summarises_every_sample_and_stays_positive():
    runs = [
        timing.summarize([1.0, 1.1, 1.2], "s"),
        timing.summarize([2.0, 2.1, 2.2], "s"),
        timing.summarize([4.0, 4.1, 4.2], "s"),
    ]
    combined = timing.across_runs(runs)
    assert combined["runs"] == 3 and combined["n"] == 9
    assert combined["median"] == pytest.approx(2.1)
    assert combined["min"] == 1.0 and combined["max"] == 4.2
    assert combined["mean"] == pytest.approx(np.mean([1.0, 1.1, 1.2, 2.0, 2.1, 2.2, 4.0, 4.1, 4.2]))
    assert combined["std"] == pytest.approx(
        np.std([1.0, 1.1, 1.2, 2.0, 2.1, 2.2, 4.0, 4.1, 4.2], ddof=1)
    )
    assert 0 < combined["ci_low"] < 1.0 and combined["ci_high"] > 4.2  # factors of two apart
    assert combined["ci_level"] == timing.CI_LEVEL
    # A rate derived from each run combines to the same relative interval.
    rates = timing.across_runs([timing.rate_from_time(run, 1.0, "GFLOP/s") for run in runs])
    assert rates["median"] == pytest.approx(1 / 2.1)
    assert rates["ci_high"] == pytest.approx(1 / combined["ci_low"], rel=1e-9)


def test_one_run_keeps_its_own_interval():
    run = timing.summarize([1.0, 1.1, 1.2, 1.3, 1.4], "s")
    assert timing.across_runs([run]) == {**run, "runs": 1}


def test_t_quantiles():
    assert timing.t_quantile_975(1) == pytest.approx(12.706)
    assert timing.t_quantile_975(2) == pytest.approx(4.303)
    assert timing.t_quantile_975(30) == pytest.approx(2.042)
    assert timing.t_quantile_975(120) == pytest.approx(1.980, abs=2e-3)
    with pytest.raises(ValueError):
        timing.t_quantile_975(0)


def test_combine_metrics_and_run_medians():
    runs = [
        {"time": timing.summarize([m, m, m], "s"), "threads": timing.value(2, "threads")}
        for m in (1.0, 2.0, 3.0)
    ]
    combined = timing.combine_metrics(runs)
    assert combined["time"]["runs"] == 3 and combined["threads"] == {"unit": "threads", "value": 2}
    assert timing.run_medians(runs) == {
        "time_run_medians": {"unit": "s", "values": [1.0, 2.0, 3.0]}
    }

"""Statistics of measured samples: median CI, quartiles, rates."""

from __future__ import annotations

import math

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

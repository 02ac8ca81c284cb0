"""Runs added until a measurement is precise, within its time budget."""

from __future__ import annotations

import logging
import math
from dataclasses import replace

import numpy as np
import pytest

from accelbench.families import FAMILIES
from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.measuring import contention, precision, statistics
from accelbench.measuring.settings import ContentionSettings, RunSettings
from accelbench.records.record import load_record


class Clock:
    """A clock each run advances by its duration."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run_metrics(median: float) -> dict:
    """One run's figure of merit as across_runs reads it."""
    spread = 0.01 * median
    return {
        "time": {
            "unit": "s",
            "n": 5,
            "median": median,
            "q1": median - spread,
            "q3": median + spread,
            "min": median - 2 * spread,
            "max": median + 2 * spread,
            "ci_low": median - 2 * spread,
            "ci_high": median + 2 * spread,
        }
    }


def measure(goal: precision.Goal, medians, run_s: float = 1.0) -> precision.Progress:
    """The runs a goal asks for, each taking `run_s` and giving the next of `medians`."""
    clock = Clock()
    progress = precision.Progress(goal, clock=clock)
    found = iter(medians)
    while progress.more():
        clock.now += run_s
        progress.add(run_metrics(next(found)))
    return progress


def kernel_goal(**settings) -> precision.Goal:
    return precision.Goal.of(
        FAMILIES["kernel"].precise_metrics,
        RunSettings(**{"runs": 3, "half_width": 0.05, **settings}),
    )


def test_a_measurement_stops_as_soon_as_it_is_precise():
    # Three runs 3% apart give +-6% (2.02 x their range); a fourth close to two of them,
    # +-1.7% (4.5 x their MADn): it stops there.
    progress = measure(kernel_goal(budget_s=100), [1.00, 1.03, 1.00, 1.005, 1.0, 1.0])
    report = progress.report()
    assert report["runs"] == 4
    assert not report["imprecise"] and report["imprecise_reason"] is None
    assert report["reached_half_width"] <= 0.05
    assert report["half_width_target"] == 0.05


def test_a_noisy_measurement_stops_when_the_next_run_would_overrun_its_budget():
    rng = np.random.default_rng(0)
    medians = np.exp(rng.normal(0.0, 0.3, 100))  # runs 30% apart: never within 5%
    progress = measure(kernel_goal(budget_s=7.5), medians, run_s=1.0)
    report = progress.report()
    # The budget counts from the end of the first run: after eight runs 7 s are spent,
    # and a ninth run of 1 s would end at 8 s > 7.5 s.
    assert report["runs"] == 8
    assert report["imprecise"]
    assert report["imprecise_reason"] == "time budget of 7.5 s spent after 8 runs"
    assert report["spent_s"] == pytest.approx(7.0)
    assert report["reached_half_width"] > 0.05
    assert "+-" in precision.describe(report) and "budget" in precision.describe(report)


def test_the_least_runs_are_run_whatever_the_budget():
    report = measure(kernel_goal(runs=5, budget_s=0.0), [1.0, 2.0, 3.0, 4.0, 5.0]).report()
    assert report["runs"] == 5


def test_without_a_budget_exactly_the_least_runs_are_run():
    report = measure(kernel_goal(budget_s=0.0), [1.0, 1.5, 3.0, 9.0]).report()
    assert report["runs"] == 3 and report["imprecise"]


def test_runs_stop_where_the_rerun_interval_ends():
    medians = np.exp(np.random.default_rng(1).normal(0.0, 0.3, 100))
    report = measure(kernel_goal(budget_s=1e9), medians, run_s=0.001).report()
    assert report["runs"] == statistics.MAX_RUNS
    assert "the most the rerun interval is defined for" in report["imprecise_reason"]


def test_run_medians_that_tie_do_not_make_a_zero_width_interval():
    # A coarse timer: the three runs report the same median, so their range is 0; the
    # runs' own jitter (IQR 2% of 5 samples) stands in for it.
    progress = measure(kernel_goal(budget_s=0.0), [1.0, 1.0, 1.0])
    half = statistics.RERUN_QUANTILES[1] * 0.929 * 0.02 / math.sqrt(5)  # on the log scale
    assert progress.achieved() == pytest.approx(math.expm1(half), rel=1e-3)


def test_a_roof_is_precise_only_when_all_its_roofs_are():
    goal = precision.Goal.of(FAMILIES["roof"].precise_metrics, RunSettings(runs=4, budget_s=0.0))
    progress = precision.Progress(goal)
    for gemm, stream in ((100.0, 10.0), (101.0, 14.0), (99.0, 7.0), (100.5, 12.0)):
        progress.add(
            {
                "peak_gflops": run_metrics(gemm)["time"],
                "memory_bandwidth": run_metrics(stream)["time"],
            }
        )
    gemm_only = precision.Progress(goal)
    for run in progress.runs:
        gemm_only.add({"peak_gflops": run["peak_gflops"]})
    assert gemm_only.achieved() < 0.05 < progress.achieved()


def test_one_run_is_judged_by_its_own_interval():
    progress = precision.Progress(kernel_goal(runs=1))
    assert progress.achieved() == math.inf
    progress.add(run_metrics(1.0))
    assert progress.achieved() == pytest.approx(0.02)


def adaptive_measurement(rng, spread: float, odd: float, goal: precision.Goal) -> tuple:
    """One adaptive measurement of a cell whose log run medians are normal with sd
    `spread`, a run being 1.35 to 7 times slower with probability `odd`: (median, low,
    high) of its rerun interval."""
    progress = precision.Progress(goal, clock=lambda: 0.0)  # the budget never runs out

    def one_run() -> float:
        slower = math.exp(rng.uniform(0.3, 2.0)) if rng.random() < odd else 1.0
        return math.exp(rng.normal(0.0, spread)) * slower

    while progress.more():
        progress.add(run_metrics(one_run()))
    combined = statistics.across_runs([run["time"] for run in progress.runs])
    return combined["median"], combined["ci_low"], combined["ci_high"], len(progress.runs)


@pytest.mark.parametrize("spread, odd", [(0.005, 0.0), (0.02, 0.0), (0.02, 0.1), (0.03, 0.05)])
def test_an_independent_adaptive_rerun_lands_in_the_first_measurements_interval(spread, odd):
    """Stopping as soon as the interval is narrow enough picks runs that happen to agree;
    the interval must still cover an independent rerun (measured the same way) 90% of
    the time."""
    rng = np.random.default_rng(11)
    goal = kernel_goal(budget_s=1.0)
    inside, runs = 0, []
    trials = 600
    for _ in range(trials):
        _, low, high, count = adaptive_measurement(rng, spread, odd, goal)
        rerun, *_ = adaptive_measurement(rng, spread, odd, goal)
        inside += low <= rerun <= high
        runs.append(count)
    assert inside / trials >= 0.9
    assert np.mean(runs) < 12  # precise in a handful of runs, not by exhausting them


# In the experiment: runs added, the record and the console told ------------------------

SAXPY = KernelExperiment("saxpy", "cpu1", "numpy", "float32", 10_000)
QUIET = ContentionSettings(max_other_cpus=64.0)
CONTEXT = JobContext("t")


def kernel_family(monkeypatch, medians) -> list:
    """The kernel family measuring each run as the next of `medians` (s); returns the list
    of the settings each run was given."""
    found, given = iter(medians), []

    def measure(exp, settings):
        given.append(settings)
        median = next(found)
        return measurement.Outcome(
            "ok",
            metrics={"time": statistics.summarize([0.99 * median, median, 1.01 * median], "s")},
            series=statistics.warmup_series([0.01], [True]),
        )

    monkeypatch.setattr("accelbench.kernels.measure.measure_kernel", measure)
    return given


def test_runs_are_added_until_the_record_is_precise(monkeypatch, tmp_path):
    # Three runs 10% apart, then runs that agree within 1%.
    kernel_family(monkeypatch, [1.0, 1.1, 0.9, *(1.0 + 0.002 * (i % 5) for i in range(40))])
    settings = KernelSettings(runs=3, half_width=0.05, budget_s=60, contention=QUIET)
    output = tmp_path / "record.json"
    assert measurement.run(SAXPY, settings, str(output), context=CONTEXT) == "ok"
    record = load_record(output)
    conditions = record["conditions"]
    runs = conditions["runs"]
    assert runs > 3
    assert conditions["imprecise"] is False and conditions["imprecise_reason"] is None
    assert conditions["reached_half_width"] <= 0.05 == conditions["half_width_target"]
    assert statistics.relative_half_width(record["metrics"]["time"]) == pytest.approx(
        conditions["reached_half_width"]
    )
    assert record["metrics"]["time"]["runs"] == runs
    assert record["series"]["warmup_s"]["values"] == [0.01] * runs  # each run's warm-up
    assert record["series"]["warmup_steady"]["values"] == [1] * runs
    assert record["params"]["interval"] == statistics.RERUN_INTERVAL


def test_a_record_that_stays_imprecise_says_so_and_the_console_hears_it(
    monkeypatch, tmp_path, capsys
):
    medians = np.exp(np.random.default_rng(4).normal(0.0, 0.3, 200))
    kernel_family(monkeypatch, medians)
    # The job logs to a file (its rule's log); warnings also reach the console.
    handler = logging.FileHandler(tmp_path / "job.log")
    logging.getLogger().addHandler(handler)
    try:
        settings = KernelSettings(runs=3, budget_s=0.0, contention=QUIET)
        output = tmp_path / "record.json"
        measurement.run(SAXPY, settings, str(output), context=CONTEXT)
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    conditions = load_record(output)["conditions"]
    assert conditions["imprecise"] is True
    assert conditions["imprecise_reason"] == (
        "measured in 3 runs, as the configuration asks (its budget_s is 0)"
    )
    assert conditions["reached_half_width"] > 0.05
    err = capsys.readouterr().err
    assert f"accelbench: {SAXPY.id}: short of its target:" in err
    assert "after 3 runs (target +-25%): measured in 3 runs, as the configuration asks" in err
    assert "short of its target" in (tmp_path / "job.log").read_text()


class BusyWatch(contention.Watch):
    """A contention.Watch that always saw 1.5 CPUs busy elsewhere."""

    def stop(self) -> contention.Conditions:
        return replace(super().stop(), other_cpus=1.5, steal_cpus=0.0, resolution_cpus=0.01)


def test_a_busy_repeat_is_told_on_the_console_and_the_reason_names_the_machine(
    monkeypatch, tmp_path, capsys
):
    kernel_family(monkeypatch, [1.0, 1.2, 0.8] * 10)
    monkeypatch.setattr(contention, "Watch", BusyWatch)
    handler = logging.FileHandler(tmp_path / "job.log")
    logging.getLogger().addHandler(handler)
    try:
        guard = ContentionSettings(max_other_cpus=0.25, pause_s=0, retries=1)
        outcome = measurement.measure_watched(SAXPY, KernelSettings(runs=3, contention=guard))
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    err = capsys.readouterr().err
    assert "1.50 CPUs were busy elsewhere during the measurement (limit 0.25); " in err
    assert "measuring again in 0 s (attempt 2 of 2)" in err
    assert f"{SAXPY.id}: flagged busy and short of its target: 1.50 CPUs busy elsewhere" in err
    assert outcome.conditions["busy"] and outcome.conditions["imprecise"]
    assert outcome.conditions["imprecise_reason"].startswith(
        "the machine was busy (1.50 CPUs elsewhere); measured in 3 runs"
    )


def test_a_run_added_for_precision_that_fails_fails_the_experiment_naming_it(monkeypatch):
    outcomes = iter(
        [
            *(measurement.Outcome("ok", metrics=run_metrics(median)) for median in (1.0, 1.3, 0.8)),
            measurement.Outcome("failed", "result differs from the float64 reference"),
        ]
    )
    monkeypatch.setattr(
        "accelbench.kernels.measure.measure_kernel",
        lambda exp, settings: next(outcomes),
    )
    outcome = measurement._in_runs(
        SAXPY, KernelSettings(runs=3, budget_s=60), fresh_processes=False
    )
    assert outcome.status == "failed"
    assert outcome.reason == "run 4: result differs from the float64 reference"

"""The rerun interval built from a cell's runs, its host's other cells and the host's drift:
its constants, its coverage of an independent rerun minutes later, how narrow it is at
three runs, the runs a goal needs, and the host's record of its cells' spreads."""

from __future__ import annotations

import json
import math
import os
import time

import numpy as np
import pytest
import yaml
from test_precision import Clock, kernel_goal, run_metrics

from accelbench import config as workflow_config
from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.measuring import contention, precision, rerun
from accelbench.measuring import statistics as sample_stats
from accelbench.measuring.outcome import Outcome
from accelbench.measuring.rerun import HostSpreads, Spread
from accelbench.measuring.settings import ContentionSettings, RunSettings
from accelbench.records.record import load_record

SAXPY = KernelExperiment("saxpy", "cpu1", "numpy", "float32", 10_000)


def test_the_median_variances_and_madn_factors_are_what_a_simulation_gives():
    rng = np.random.default_rng(7)
    for runs in (1, 2, 3, 4, 7, 15, 30):
        draws = rng.standard_normal((60_000, runs))
        medians = np.median(draws, axis=1)
        assert np.var(medians) == pytest.approx(rerun.MEDIAN_VARIANCE[runs - 1], rel=0.03)
        if runs >= 2:
            mad = 1.4826 * np.median(np.abs(draws - medians[:, None]), axis=1)
            assert 1 / np.median(mad) == pytest.approx(rerun.MADN_FACTOR[runs - 2], rel=0.03)


def coverage(sigma_cell, sigma_host, drift, runs=3, trials=20_000, seed=1) -> tuple[float, float]:
    """How often a rerun's median lands in the interval (the host's spread `sigma_host`
    and drift known), and the median half-width (a fraction of the median)."""
    rng = np.random.default_rng(seed)
    spread = Spread(sigma_host, drift)
    inside, widths = 0, []
    for _ in range(trials):
        first = rng.normal(rng.normal(0, drift), sigma_cell, runs)
        again = np.median(rng.normal(rng.normal(0, drift), sigma_cell, runs))
        half = spread.half_width(list(first))
        inside += abs(np.median(first) - again) <= half
        widths.append(math.expm1(half))
    return inside / trials, float(np.median(widths))


@pytest.mark.parametrize("drift", [0.0, 0.03, 0.08])
def test_a_rerun_minutes_later_lands_inside_at_least_nine_times_in_ten(drift):
    found, _ = coverage(sigma_cell=0.06, sigma_host=0.06, drift=drift)
    assert found >= 0.93


def test_a_cell_noisier_than_its_host_keeps_its_own_spread():
    """Its own three runs widen it: not to 95%, but far above what the host alone gives."""
    own, _ = coverage(sigma_cell=0.1, sigma_host=0.05, drift=0.0)
    host_only = Spread(0.05, 0.0)
    rng = np.random.default_rng(2)
    inside = 0
    for _ in range(5_000):
        first = rng.normal(0, 0.1, 3)
        half = rerun.Z * math.sqrt(2 * rerun.MEDIAN_VARIANCE[2] * host_only.host**2)
        inside += abs(np.median(first) - np.median(rng.normal(0, 0.1, 3))) <= half
    assert own >= 0.85 > inside / 5_000


def test_three_runs_give_an_informative_interval_where_the_pivot_alone_does_not():
    _, width = coverage(sigma_cell=0.05, sigma_host=0.05, drift=0.0)
    assert width < 0.12  # +-12%; the runs alone: q(3) = 17.3 MADn
    assert rerun.Z * math.sqrt(2 * rerun.MEDIAN_VARIANCE[2]) * 0.05 < 0.1


def test_one_odd_run_widens_the_interval_no_more_than_one_odd_run_should():
    spread = Spread(0.03, 0.0)
    steady = spread.half_width([0.0, 0.01, -0.01])
    odd = spread.half_width([0.0, 0.01, math.log(6)])  # a cold run six times slower
    assert odd < 1.5 * steady


def test_the_runs_a_goal_needs_and_when_none_do():
    steady = [0.0, 0.01, -0.01]
    assert Spread(0.05, 0.0).runs_needed(steady, 0.05) == 12
    assert Spread(0.01, 0.0).runs_needed(steady, 0.05) == 4  # its own spread, here
    assert Spread(0.05, 0.04).runs_needed(steady, 0.05) is None  # the drift alone is too wide
    assert Spread(0.2, 0.0).runs_needed(steady, 0.05) is None  # beyond 30 runs


def test_the_host_keeps_its_recent_cells_spreads_and_tells_the_typical_one(tmp_path):
    path = tmp_path / "spreads.json"
    spreads = HostSpreads.load(path)
    for _ in range(4):
        spreads.add("cpu", [0.0, 0.02, -0.02])
    assert spreads.typical("cpu") is None  # too few cells yet
    spreads.add("cpu", [0.0, 2.0, -2.0])  # one odd cell
    again = HostSpreads.load(path)
    assert again.typical("cpu") == pytest.approx(rerun.own_spread([0.0, 0.02, -0.02]))
    assert again.typical("cuda") is None
    again.entries = [(time.time() - 2 * rerun.RECENT_S, "cpu", 1.0, 1.0)] * 10
    assert again.typical("cpu") is None  # older than the recent minutes
    assert again.swing("cpu") is None


def test_the_host_swing_is_the_80th_percentile_of_its_cells_deviations(tmp_path):
    spreads = HostSpreads.load(tmp_path / "spreads.json")
    for shift in (0.01, 0.02, 0.03, 0.04, 0.4):
        spreads.add("cpu", [0.0, 0.0, shift])  # the robust spread cannot see one odd run
    assert spreads.typical("cpu") == 0.0
    deviations = sorted(float(np.std([0.0, 0.0, s], ddof=1)) for s in (0.01, 0.02, 0.03, 0.04, 0.4))
    assert spreads.swing("cpu") == pytest.approx(
        deviations[3] + 0.2 * (deviations[4] - deviations[3])
    )
    assert HostSpreads.load(tmp_path / "spreads.json").swing("cpu") == spreads.swing("cpu")


def test_spreads_kept_in_an_older_form_are_set_aside(tmp_path):
    path = tmp_path / "spreads.json"
    path.write_text(json.dumps([[time.time(), "cpu", 0.05]] * 10))
    assert HostSpreads.load(path).entries == []


def test_a_goal_out_of_reach_stops_at_once_and_says_how_many_runs_it_needs():
    clock = Clock()
    spread = Spread(0.05, 0.0)
    progress = precision.Progress(kernel_goal(budget_s=5.0), clock=clock, spread=spread)
    for median in (1.0, 1.01, 0.99):
        clock.now += 1.0
        progress.add(run_metrics(median))
    assert progress.more() is False
    report = progress.report()
    assert report["imprecise"] and report["runs"] == 3
    assert report["imprecise_reason"].startswith("stopped after 3 runs: needs about 12 runs")
    drifting = precision.Progress(kernel_goal(budget_s=60.0), clock=clock, spread=Spread(0.01, 0.1))
    for median in (1.0, 1.01, 0.99):
        drifting.add(run_metrics(median))
    assert drifting.more() is False
    assert "no number of runs reaches +-5%" in drifting.report()["imprecise_reason"]


def test_a_goal_within_reach_takes_more_runs():
    clock = Clock()
    progress = precision.Progress(kernel_goal(budget_s=60.0), clock=clock, spread=Spread(0.03, 0.0))
    for median in (1.0, 1.005, 0.995):
        clock.now += 1.0
        progress.add(run_metrics(median))
    assert progress.more() is True


def test_an_interval_wider_than_a_factor_of_two_is_imprecise_whatever_the_target():
    progress = precision.Progress(kernel_goal(half_width=5.0), spread=Spread(0.3, 0.1))
    for median in (1.0, 1.4, 0.7):
        progress.add(run_metrics(median))
    report = progress.report()
    assert report["reached_half_width"] < 5.0 and report["imprecise"]
    assert "spans more than a factor of 2" in report["imprecise_reason"]


def test_the_host_drift_is_the_largest_of_its_probes_swing_and_typical_spread(tmp_path):
    spreads = HostSpreads.load(tmp_path / "spreads.json")
    for _ in range(5):
        spreads.add("cpu", [0.0, 0.05, -0.05])
    typical, swing = spreads.typical("cpu"), spreads.swing("cpu")
    assert typical > swing  # even runs: the robust spread, scaled for three runs, is larger
    assert rerun.spread_for("cpu", 0.01, spreads) == Spread(typical, typical)
    assert rerun.spread_for("cpu", 3 * typical, spreads) == Spread(typical, 3 * typical)
    assert rerun.spread_for("cpu", None, spreads) == Spread(typical, typical)
    assert rerun.spread_for("cuda", 0.0, spreads) is None
    for _ in range(20):
        spreads.add("cpu", [0.0, 0.0, 0.6])  # runs that met a slower stretch
    swing = spreads.swing("cpu")
    assert swing > spreads.typical("cpu")
    assert rerun.spread_for("cpu", 0.01, spreads) == Spread(spreads.typical("cpu"), swing)


def test_a_gpus_cells_take_no_swing_from_the_launch_bound_ones(tmp_path):
    """As on an H200: launch-bound cells and pageable copies moved 20-30% from run to run
    in fresh processes, device-bound ones 0.1-3%. Their swing is no drift of the device: a
    device copy whose runs were 0.4% apart keeps an interval of a few percent."""
    spreads = HostSpreads.load(tmp_path / "spreads.json")
    for _ in range(6):
        spreads.add("cuda", [0.0, 0.01, -0.01])  # device-bound
    for _ in range(4):
        spreads.add("cuda", [0.0, 0.25, -0.3])  # launch-bound
    typical = spreads.typical("cuda")
    assert typical < 0.05 < spreads.swing("cuda")
    gpu = rerun.spread_for("cuda", 0.0, spreads, device_timed=True)
    assert gpu == Spread(typical, typical)
    assert rerun.spread_for("cuda", 0.0, spreads).drift == spreads.swing("cuda")
    copy = [math.log(34.76e-6), math.log(34.74e-6), math.log(34.89e-6)]
    assert math.expm1(gpu.half_width(copy)) < 0.1
    device_copy = KernelExperiment("transfer-d2d", "cuda1", "torch", "float32", 1 << 24)
    assert measurement.host_spread(device_copy, None, spreads) == gpu


def stretched_cell(rng, stretches: float, noise: float, runs: int = 3) -> np.ndarray:
    """A cell's log run medians on a host that switches between speeds for stretches of
    seconds: between two runs, one time in two, another stretch begins."""
    levels = np.full(runs, rng.normal(0, stretches))
    for run in range(1, runs):
        if rng.random() < 0.5:
            levels[run:] = rng.normal(0, stretches)
    return levels + rng.normal(0, noise, runs)


def test_reruns_on_a_host_of_stretches_land_inside_with_the_swing_and_not_without():
    """The typical spread sees the runs' own noise; the swing sees the stretches too.
    Here 95% against 77%. (Where stretches change between runs only one time in four,
    five times the runs' noise, the swing gives 83%: too few cells show a change.)"""
    rng = np.random.default_rng(4)
    spreads = HostSpreads([])
    for _ in range(40):
        spreads.add("cpu", list(stretched_cell(rng, 0.15, 0.03)))
    swing = Spread(spreads.typical("cpu"), spreads.swing("cpu"))
    typical = Spread(spreads.typical("cpu"), spreads.typical("cpu"))
    inside = {swing: 0, typical: 0}
    for _ in range(3_000):
        first, again = stretched_cell(rng, 0.15, 0.03), stretched_cell(rng, 0.15, 0.03)
        for spread in inside:
            inside[spread] += abs(np.median(first) - np.median(again)) <= spread.half_width(
                list(first)
            )
    assert inside[swing] / 3_000 >= 0.9 > 0.8 > inside[typical] / 3_000


class SeenWatch:
    """A contention watch that saw `other_cpus` of other processes' load."""

    other_cpus = 0.0

    def stop(self) -> contention.Conditions:
        return contention.Conditions(1.0, self.other_cpus, 0.0, 0.0, 0.0, 2, None, None, 0.01)


@pytest.mark.parametrize(("other_cpus", "kept"), [(0.0, 1), (1.5, 0)])
def test_only_a_measurement_no_other_process_disturbed_tells_the_host_its_spread(
    monkeypatch, tmp_path, other_cpus, kept
):
    def measure(exp, settings):
        seconds = 1e-3 * (1 + os.getpid() % 7 / 100)  # each run a process of its own
        return Outcome("ok", metrics={"time": sample_stats.summarize([seconds] * 3, "s")})

    monkeypatch.setattr("accelbench.kernels.measure.measure_kernel", measure)
    monkeypatch.setattr(SeenWatch, "other_cpus", other_cpus)
    monkeypatch.setattr(contention, "Watch", SeenWatch)
    # No host probe: a loaded test machine would mark the quiet case busy through it.
    guard = ContentionSettings(retries=0, max_host_slowdown=0)
    settings = KernelSettings(runs=3, contention=guard)
    output = tmp_path / "record.json"
    context = JobContext("t")
    status = measurement.run(SAXPY, settings, str(output), context=context, fresh_processes=True)
    assert status == "ok"
    assert load_record(output)["conditions"]["busy"] is bool(other_cpus)
    assert len(HostSpreads.load().entries) == kept


# A shared 2-vCPU VM when idle: runs about 6% apart, the host drifting as much between
# measurements, its cells' intervals about +-22%; busy, 10% and more of each.
SHARED_VM = Spread(0.06, 0.06)
BUSY_VM = Spread(0.1, 0.1)


def test_the_default_target_is_reached_in_the_least_runs_on_a_shared_vm_where_5_percent_is_not():
    config = workflow_config.load([])
    schema = yaml.safe_load((workflow_config.workflow_root() / workflow_config.SCHEMA).read_text())
    for family in ("kernels", "datasci", "train"):
        default = schema["properties"][family]["properties"]["half_width"]["default"]
        for target in (config[family]["half_width"], default, RunSettings().half_width):
            # The idle host's typical cell: no run beyond the least a default run asks (3);
            # a busy host cannot reach it and adds no run at all (nothing predicted).
            assert SHARED_VM.runs_needed([0.0, 0.0, 0.0], target) == 3
            assert BUSY_VM.runs_needed([0.0, 0.0, 0.0], target) is None
    assert SHARED_VM.runs_needed([0.0, 0.0, 0.0], 0.05) is None


def test_a_cell_spread_as_its_host_is_rarely_marked_and_a_much_noisier_one_often():
    """MARGIN's claim (precision.imprecise_reason): cells of three runs at the host's
    spread, their intervals from the host's typical spread and swing as a default run
    builds them, are marked about one time in twenty-five."""
    rng = np.random.default_rng(5)
    logs = rng.normal(0.0, 0.05, (4000, 3))
    own = np.array([rerun.own_spread(list(cell)) for cell in logs])
    swing = float(np.quantile(logs.std(axis=1, ddof=1), rerun.DRIFT_QUANTILE))
    host = Spread(float(np.median(own)), max(float(np.median(own)), swing))
    typical = precision.typical_width(math.expm1(host.half_width(list(cell))) for cell in logs)

    def share_marked(scale: float) -> float:
        widths = [math.expm1(host.half_width(list(scale * cell))) for cell in logs]
        marks = [precision.imprecise_reason(width, (1 + width) ** 2, typical) for width in widths]
        return np.mean([mark is not None for mark in marks])

    assert 0.02 < share_marked(1.0) < 0.07
    assert share_marked(3.0) > 0.3

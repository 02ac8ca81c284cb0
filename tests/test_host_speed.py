"""The host-speed probe: a run the host slowed (its probe slower than the host's recent
speed, its neighbours') is counted, a record at least half of whose runs were is flagged
busy, a host slow throughout is said to be so once, and the probes of the last minutes tell
the host's drift between measurements."""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import replace

import pandas as pd
import pytest

from accelbench import config as workflow_config
from accelbench.analysis import tidy
from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.measuring import host_speed, statistics
from accelbench.measuring.settings import ContentionSettings
from accelbench.records.record import load_record

SAXPY = KernelExperiment("saxpy", "cpu1", "numpy", "float32", 10_000)
SETTINGS = KernelSettings(runs=4, half_width=0.5, budget_s=0)
QUIET = ContentionSettings(max_other_cpus=64.0, retries=1, pause_s=0)
CONTEXT = JobContext("t")


@pytest.fixture
def reference(monkeypatch, tmp_path):
    """The host's probes kept in a file of the test's own."""
    path = tmp_path / "host-speed.json"
    monkeypatch.setattr(host_speed, "history_file", lambda: path)
    return path


@pytest.fixture
def steady_kernel(monkeypatch):
    """Every run of the kernel measures 1 ms (in the run's own forked process)."""

    def measure(exp, settings):
        return measurement.Outcome(
            "ok", metrics={"time": statistics.summarize([0.99e-3, 1e-3, 1.01e-3], "s")}
        )

    monkeypatch.setattr("accelbench.kernels.measure.measure_kernel", measure)


def scripted_probes(monkeypatch, *pairs):
    """The probe reads `pairs` (before, after) run after run, then 1 ms for ever; returns
    the readings left."""
    readings = [value for pair in pairs for value in pair]

    def probe(cpus=None):
        return readings.pop(0) if readings else 1e-3

    monkeypatch.setattr(host_speed, "probe", probe)
    return readings


def measured(tmp_path, settings) -> dict:
    output = tmp_path / "record.json"
    assert (
        measurement.run(SAXPY, settings, str(output), context=CONTEXT, fresh_processes=True) == "ok"
    )
    return load_record(output)


def test_the_probe_times_each_cpu_and_leaves_the_affinity_as_it_was():
    allowed = os.sched_getaffinity(0)
    seconds = host_speed.probe()
    assert 0 < seconds < 1
    assert os.sched_getaffinity(0) == allowed


def test_the_probes_are_kept_for_the_host_and_a_run_is_held_against_its_neighbours(reference):
    first = host_speed.HostHistory.load(1.2)
    assert first.best is None and first.reference() is None
    assert first.slowdown(2e-3, 3e-3) == pytest.approx(1.5)  # its own first probe, at first
    assert json.loads(reference.read_text())["best"] == 2e-3
    later = host_speed.HostHistory.load(1.2)  # another measurement: the neighbours' median
    assert later.reference() == pytest.approx(2.5e-3)
    assert later.slowed(later.slowdown(2.5e-3, 2.1e-3)) is False
    assert later.slowed(later.slowdown(4e-3, 2.1e-3)) is True


def test_a_host_slow_throughout_flags_nothing_and_says_how_far_from_its_best(reference):
    history = host_speed.HostHistory.load(1.2)
    history.slowdown(1e-3, 1e-3)  # once, the host ran at full speed
    slow = host_speed.HostHistory.load(1.2)
    slow.recent = [(time.time(), "others", 2e-3)] * 10  # since, at half of it
    assert slow.slowed(slow.slowdown(2e-3, 2.1e-3)) is False
    assert slow.speed_of_best() == pytest.approx(0.5)


def test_an_unreadable_history_starts_afresh(reference):
    reference.write_text("{not json")
    assert host_speed.HostHistory.load(1.2).best is None


def history_of(job_medians: list[float], within: float, seconds: float = 120.0):
    """A history of jobs spread evenly over `seconds`, each with probes at its median
    times exp(+-within)."""
    now = time.time()
    recent = []
    for index, median in enumerate(job_medians):
        at = now - seconds + index * seconds / len(job_medians)
        for factor in (math.exp(-within), 1.0, math.exp(within)):
            recent.append((at, f"job{index}", median * factor))
    return host_speed.HostHistory(1.2, min(job_medians), recent)


def test_the_drift_is_the_spread_between_measurements_beyond_that_within_them():
    steady = history_of([1e-3] * 12, within=0.05)
    assert steady.drift() == pytest.approx(0.0, abs=1e-9)
    medians = [1e-3 * math.exp(0.1 * z) for z in (-1.5, -1, -0.5, 0, 0.5, 1, 1.5) * 2]
    drifting = history_of(medians, within=0.01)
    assert 0.08 < drifting.drift() < 0.16
    assert history_of(medians[:3], within=0.01).drift() is None  # too few measurements
    assert history_of(medians, within=0.01, seconds=10).drift() is None  # too short


def test_a_few_slowed_runs_are_counted_and_leave_the_record_unmarked(
    monkeypatch, reference, steady_kernel, tmp_path, capsys
):
    left = scripted_probes(monkeypatch, (1e-3, 1e-3), (1e-3, 1.5e-3), (1e-3, 1e-3), (1e-3, 1e-3))
    record = measured(tmp_path, replace(SETTINGS, contention=QUIET))
    conditions = record["conditions"]
    assert left == []  # probed before and after each of the 4 runs
    assert conditions["runs"] == 4 and record["metrics"]["time"]["runs"] == 4
    assert conditions["host_slowed_runs"] == 1
    assert conditions["host_slowdown"] == pytest.approx(1.0)
    assert conditions["host_probe_s"] == 1e-3 and conditions["max_host_slowdown"] == 1.2
    assert conditions["host_speed_of_best"] == pytest.approx(1.0)
    assert conditions["busy"] is False
    assert "flagged" not in capsys.readouterr().err


def test_a_record_half_of_whose_runs_the_host_slowed_is_flagged_busy_without_a_repeat(
    monkeypatch, reference, steady_kernel, tmp_path, capsys
):
    scripted_probes(monkeypatch, (1e-3, 1e-3), (1.6e-3, 1e-3), (1e-3, 1e-3), (1e-3, 1.7e-3))
    record = measured(tmp_path, replace(SETTINGS, contention=QUIET))
    conditions = record["conditions"]
    assert conditions["host_slowed_runs"] == 2
    assert conditions["busy"] is True and conditions["attempts"] == 1
    err = capsys.readouterr().err
    assert "flagged busy: 2 of its runs slowed by the host" in err
    assert "measuring again" not in err  # the host's stretches last minutes: no pause


def test_without_the_probe_nothing_is_probed(monkeypatch, reference, steady_kernel, tmp_path):
    left = scripted_probes(monkeypatch, (1e-3, 9e-3))
    settings = replace(SETTINGS, contention=replace(QUIET, max_host_slowdown=0))
    conditions = measured(tmp_path, settings)["conditions"]
    assert "host_slowed_runs" not in conditions and "host_probe_s" not in conditions
    assert len(left) == 2 and not reference.exists()


def test_a_gpu_experiment_is_not_probed(monkeypatch, reference):
    exp = KernelExperiment("saxpy", "cuda1", "torch", "float32", 10_000)
    assert measurement.host_history(exp, KernelSettings(contention=QUIET)) is None
    assert measurement.host_history(SAXPY, KernelSettings(contention=QUIET)).limit == 1.2


@pytest.mark.parametrize("factor", [0.5, 0.99])
def test_a_slowdown_below_one_is_refused_naming_the_key(factor):
    config = workflow_config.load([])
    config["contention"]["max_host_slowdown"] = factor
    with pytest.raises(workflow_config.ConfigError, match="contention.max_host_slowdown"):
        workflow_config.check_values(config)


def test_the_summary_says_when_the_host_made_a_record_busy():
    row = pd.Series(
        {"busy": True, "imprecise": False, "host_slowed_runs": 3, "host_slowdown": 1.52}
    )
    assert tidy.flag_text(row) == (
        "measured while the machine was busy "
        "(the host slowed 3 of its runs: probe 1.52x its recent speed)"
    )
    other_load = pd.Series({"busy": True, "imprecise": False, "host_slowed_runs": 0})
    assert tidy.flag_text(other_load) == "measured while the machine was busy"

"""The host-speed gate: runs the host slowed (a probe slower than its fastest) are replaced
while the budget allows, else kept and the record flagged busy."""

from __future__ import annotations

import json
import os

import pytest

from accelbench import config as workflow_config
from accelbench import host_speed, timing
from accelbench.families.kernel import KernelExperiment
from accelbench.job import measurement
from accelbench.results import load_record

SAXPY = KernelExperiment("saxpy", "cpu1", "numpy", "float32", 10_000)
SETTINGS = {"seed": 0, "config_hash": "t", "runs": 3, "half_width": 0.5}
QUIET = {"max_other_cpus": 64.0, "retries": 0, "pause_s": 0}


@pytest.fixture
def reference(monkeypatch, tmp_path):
    """The host's fastest probe kept in a file of the test's own."""
    path = tmp_path / "host-speed.json"
    monkeypatch.setattr(host_speed, "reference_file", lambda: path)
    return path


@pytest.fixture
def steady_kernel(monkeypatch):
    """Every run of the kernel measures 1 ms (in the run's own forked process)."""

    def measure(exp, settings):
        return measurement.Outcome(
            "ok", metrics={"time": timing.summarize([0.99e-3, 1e-3, 1.01e-3], "s")}
        )

    monkeypatch.setattr("accelbench.measure.measure_kernel", measure)


def scripted_probes(monkeypatch, *pairs):
    """The probe reads `pairs` (before, after) run after run, then 1 ms for ever."""
    readings = [value for pair in pairs for value in pair]

    def probe(cpus=None):
        return readings.pop(0) if readings else 1e-3

    monkeypatch.setattr(host_speed, "probe", probe)


def test_the_probe_times_each_cpu_and_leaves_the_affinity_as_it_was():
    allowed = os.sched_getaffinity(0)
    seconds = host_speed.probe()
    assert 0 < seconds < 1
    assert os.sched_getaffinity(0) == allowed


def test_waiting_for_the_host_ends_at_speed_or_when_the_allowance_is_spent(monkeypatch, reference):
    scripted_probes(monkeypatch, (1e-3, 2e-3), (2e-3, 1.1e-3))
    gate = host_speed.Gate.load(1.2)
    assert gate.wait_for_speed(60) == 1e-3
    assert gate.wait_for_speed(60) == 1.1e-3  # two slow probes, then one at speed
    scripted_probes(monkeypatch, (5e-3, 5e-3))
    assert gate.wait_for_speed(0) == 5e-3  # no allowance: the first probe


def test_the_fastest_probe_is_kept_for_the_host_and_read_back(reference):
    gate = host_speed.Gate.load(1.2)
    assert gate.best is None
    assert gate.slowdown(2e-3, 3e-3) == pytest.approx(1.5)  # the first run is its own reference
    assert json.loads(reference.read_text())["probe_s"] == 2e-3
    again = host_speed.Gate.load(1.2)
    assert again.best == 2e-3
    assert again.slowed(again.slowdown(2.5e-3, 2.1e-3)) is True
    assert again.slowed(again.slowdown(1.5e-3, 1.6e-3)) is False  # a faster host: new best
    assert host_speed.Gate.load(1.2).best == 1.5e-3


def test_an_unreadable_reference_starts_afresh(reference):
    reference.write_text("{not json")
    assert host_speed.Gate.load(1.2).best is None


def test_a_run_waits_for_the_host_and_one_it_slowed_is_replaced_while_the_budget_allows(
    monkeypatch, reference, steady_kernel, tmp_path
):
    # Run 2 is slowed after it started; before run 3 the host is slow twice, then fast.
    scripted_probes(monkeypatch, (1e-3, 1e-3), (1e-3, 1.5e-3), (1.6e-3, 1.7e-3), (1e-3, 1e-3))
    settings = {**SETTINGS, "budget_s": 60, "contention": QUIET}
    output = tmp_path / "record.json"
    assert measurement.run(SAXPY, settings, str(output), fresh_processes=True) == "ok"
    conditions = load_record(output)["conditions"]
    assert conditions["runs"] == 3
    assert conditions["host_slowed_replaced"] == 1
    assert conditions["host_slowed_kept"] == 0
    assert conditions["busy"] is False
    assert conditions["host_probe_s"] == 1e-3 and conditions["max_host_slowdown"] == 1.2


def test_a_slowed_run_the_budget_cannot_replace_is_kept_and_the_record_flagged_busy(
    monkeypatch, reference, steady_kernel, tmp_path, capsys
):
    scripted_probes(monkeypatch, (1e-3, 1e-3), (1e-3, 1.5e-3))
    settings = {**SETTINGS, "budget_s": 0, "contention": QUIET}
    output = tmp_path / "record.json"
    assert measurement.run(SAXPY, settings, str(output), fresh_processes=True) == "ok"
    record = load_record(output)
    conditions = record["conditions"]
    assert conditions["runs"] == 3
    assert (conditions["host_slowed_replaced"], conditions["host_slowed_kept"]) == (0, 1)
    assert conditions["busy"] is True
    err = capsys.readouterr().err
    assert "flagged busy: 1 run slowed by the host" in err
    assert "measuring again" not in err  # the host's slowness is not waited out in a pause
    assert record["metrics"]["time"]["runs"] == 3


def test_without_the_probe_no_run_is_replaced(monkeypatch, reference, steady_kernel, tmp_path):
    scripted_probes(monkeypatch, (1e-3, 1e-3), (1e-3, 9e-3), (9e-3, 1e-3))
    settings = {**SETTINGS, "budget_s": 60, "contention": {**QUIET, "max_host_slowdown": 0}}
    output = tmp_path / "record.json"
    assert measurement.run(SAXPY, settings, str(output), fresh_processes=True) == "ok"
    conditions = load_record(output)["conditions"]
    assert conditions["host_slowed_replaced"] == conditions["host_slowed_kept"] == 0
    assert "host_probe_s" not in conditions
    assert not reference.exists()


def test_a_gpu_experiment_is_not_gated_by_the_host(monkeypatch, reference):
    exp = KernelExperiment("saxpy", "cuda1", "torch", "float32", 10_000)
    assert measurement._host_gate(exp, {"contention": QUIET}) is None
    assert measurement._host_gate(SAXPY, {"contention": QUIET}).limit == 1.2


@pytest.mark.parametrize("factor", [0.5, 0.99])
def test_a_slowdown_below_one_is_refused_naming_the_key(factor):
    config = workflow_config.load([])
    config["contention"]["max_host_slowdown"] = factor
    with pytest.raises(workflow_config.ConfigError, match="contention.max_host_slowdown"):
        workflow_config.check_values(config)


def test_a_host_slow_at_every_probe_is_measured_as_it_is_and_the_record_marked(
    monkeypatch, reference, steady_kernel, tmp_path
):
    reference.write_text(json.dumps({"probe_s": 1e-3}))
    probes = []

    def slow_probe(cpus=None):
        probes.append(1.6e-3)
        return 1.6e-3

    monkeypatch.setattr(host_speed, "probe", slow_probe)
    settings = {**SETTINGS, "budget_s": 60, "contention": QUIET}
    output = tmp_path / "record.json"
    assert measurement.run(SAXPY, settings, str(output), fresh_processes=True) == "ok"
    conditions = load_record(output)["conditions"]
    assert conditions["runs"] == 3
    assert (conditions["host_slowed_replaced"], conditions["host_slowed_kept"]) == (0, 3)
    assert conditions["busy"] is True
    # The first run waited its second for the host; the others did not wait at all.
    assert len(probes) <= host_speed.MAX_WAIT_S / host_speed.POLL_S + 6
    assert conditions["spent_s"] < 0.5 * conditions["budget_s"]

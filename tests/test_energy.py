"""Energy of measured windows: NVML and RAPL meters (faked here), the record's section."""

from __future__ import annotations

import copy
import multiprocessing
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from accelbench.analysis import tables, tidy
from accelbench.families.datasci import DatasciExperiment, DatasciSettings
from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.families.train import TrainExperiment
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.measuring import energy
from accelbench.measuring.settings import EnergySettings
from accelbench.measuring.statistics import summarize
from accelbench.records.record import RecordError, load_record, make_record
from accelbench.train.settings import TrainSettings

from records import KERNELS, TRAIN, with_energy, write_records

SETTINGS = KernelSettings(seed=0, min_run_time=0.02, samples=3)
CONTEXT = JobContext("test")
SAXPY = KernelExperiment("saxpy", "cpu1", "numpy", "float64", 1000)


class FakeNvml:
    """The calls of nvidia-ml-py the meter makes; each GPU's energy counter (mJ) answers
    with the next value of its injected sequence."""

    def __init__(self, counters, names=None):
        self.counters = {index: iter(values) for index, values in enumerate(counters)}
        self.names = names or ["NVIDIA H100"] * len(counters)
        self.started = 0

    def nvmlInit(self):
        self.started += 1

    def nvmlShutdown(self):
        self.started -= 1

    def nvmlDeviceGetCount(self):
        return len(self.counters)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return int(uuid.removeprefix("GPU-"))

    def nvmlDeviceGetUUID(self, handle):
        return f"GPU-{handle}"

    def nvmlDeviceGetName(self, handle):
        return self.names[handle]

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        value = next(self.counters[handle])
        if isinstance(value, Exception):
            raise value
        return value


class FakeClock:
    """A clock that moves when slept on, and by `tick` each time it is read."""

    def __init__(self):
        self.time = 100.0
        self.tick = 0.0

    def now(self):
        self.time += self.tick
        return self.time

    def sleep(self, seconds):
        self.time += seconds


@pytest.fixture
def clock(monkeypatch, tmp_path):
    fake = FakeClock()
    monkeypatch.setattr(energy, "CLOCK", energy.Clock(fake.now, fake.sleep))
    monkeypatch.setattr(energy, "BASELINES", {})
    monkeypatch.setattr(energy, "baseline_file", lambda: tmp_path / "idle.json")
    return fake


def powercap(root: Path, zones: dict[str, tuple[str, int | None, int]]) -> Path:
    """A powercap tree: zone folder -> (name, energy_uj or None for no file, max range)."""
    for zone, (name, count, wraps_at) in zones.items():
        folder = root / zone
        folder.mkdir(parents=True)
        (folder / "name").write_text(name + "\n")
        if count is not None:
            (folder / "energy_uj").write_text(f"{count}\n")
        (folder / "max_energy_range_uj").write_text(f"{wraps_at}\n")
    return root


def set_count(root: Path, zone: str, count: int) -> None:
    (root / zone / "energy_uj").write_text(f"{count}\n")


# --- NVML ------------------------------------------------------------------------------


def test_nvml_energy_is_the_counter_difference_summed_over_the_jobs_gpus(clock):
    # First value of each sequence: the check that the counter exists.
    nvml = FakeNvml([[0, 1_000, 3_500], [0, 10_000, 10_250]])
    meter = energy.nvml_meter([0, 1], nvml, visible=None)
    before = meter.read()
    assert meter.joules(before, meter.read()) == pytest.approx(2.5 + 0.25)
    assert meter.method == "nvml total-energy counter (GPU-0, GPU-1)"
    meter.close()
    assert nvml.started == 0


def test_the_energy_section_names_each_counter_it_read(clock):
    """NVML's counters by their GPU's UUID, so a record says which board was measured."""
    nvml = FakeNvml([[], [0, 1_000, 2_000, 3_000, 4_000]])
    meter = energy.nvml_meter([0], nvml, visible="1,0")
    idle = energy.baseline(meter, 1.0)
    window = energy.measure_window(meter, lambda: clock.sleep(1.0), 1)
    found = energy.section(meter, [window], idle, unit="call")
    assert found["status"] == "ok" and found["counters"] == ["GPU-1"]
    assert record_with(found)["energy"]["counters"] == ["GPU-1"]
    with pytest.raises(RecordError, match='energy.counters: "GPU-1" is not a list'):
        record_with({**found, "counters": "GPU-1"})


def test_nvml_follows_cuda_visible_devices_by_index_and_by_uuid():
    nvml = FakeNvml([[0], [0], [0], [0]])
    assert energy.nvml_meter([0], nvml, visible="2,3").method.endswith("(GPU-2)")
    assert energy.nvml_meter([1], nvml, visible="GPU-1,GPU-3").method.endswith("(GPU-3)")


def test_nvml_refuses_an_index_it_cannot_map_on_a_node_of_different_gpus():
    nvml = FakeNvml([[0], [0]], names=["NVIDIA A100", "NVIDIA T4"])
    with pytest.raises(energy.EnergyUnavailable, match="CUDA_DEVICE_ORDER=PCI_BUS_ID"):
        energy.nvml_meter([0], nvml, visible="1")
    meter = energy.nvml_meter([0], nvml, visible="1", order="PCI_BUS_ID")
    assert meter.method.endswith("(GPU-1)")


def test_a_gpu_without_the_counter_is_unavailable_with_the_reason():
    nvml = FakeNvml([[RuntimeError("Not Supported")]])
    with pytest.raises(energy.EnergyUnavailable, match="no total-energy counter for GPU-0"):
        energy.nvml_meter([0], nvml)
    assert nvml.started == 0


def test_a_window_shorter_than_ten_counter_updates_is_too_short_and_has_no_metrics(clock):
    nvml = FakeNvml([[0, 0, 5_000, 5_000, 5_040]])
    meter = energy.nvml_meter([0], nvml)
    idle = energy.baseline(meter, 0.1)  # stretched to 10 updates of 0.1 s
    assert idle.seconds == pytest.approx(1.0) and idle.watts == pytest.approx(5.0)
    window = energy.measure_window(meter, lambda: clock.sleep(0.01), 5)
    assert window == energy.Window(joules=0.04, seconds=pytest.approx(0.05), calls=5)
    found = energy.section(meter, [window], idle, unit="call")
    assert found["status"] == "too_short"
    assert "0.05 s, under 10 updates" in found["reason"]
    assert energy.metrics(found) == {}


def test_energy_per_step_and_per_sample_gross_and_above_idle(clock):
    # Idle 50 W; a window of 4 steps over 2 s using 300 J: 75 J/step, 25 above idle.
    nvml = FakeNvml([[0, 0, 50_000, 50_000, 350_000]])
    meter = energy.nvml_meter([0], nvml)
    idle = energy.baseline(meter, 1.0)
    window = energy.measure_window(meter, lambda: clock.sleep(0.5), 4)
    found = energy.section(meter, [window], idle, unit="step", samples_per_unit=25)
    assert found["status"] == "ok"
    measured = energy.metrics(found)
    assert measured["energy_per_step"]["median"] == pytest.approx(75.0)
    assert measured["energy_per_step_above_idle"]["median"] == pytest.approx(50.0)
    assert measured["energy_per_sample"]["median"] == pytest.approx(3.0)
    assert measured["energy_per_sample_above_idle"]["median"] == pytest.approx(2.0)
    assert measured["mean_power"]["median"] == pytest.approx(150.0)
    assert measured["energy_per_step"]["unit"] == "J"


def test_the_windows_of_several_runs_give_an_interval_across_runs(clock):
    nvml = FakeNvml([[0, 0, 0, 0, 100_000, 100_000, 210_000, 210_000, 300_000]])
    meter = energy.nvml_meter([0], nvml)
    idle = energy.baseline(meter, 1.0)
    runs = []
    for _ in range(3):
        window = energy.measure_window(meter, lambda: clock.sleep(1.0), 1)
        runs.append(energy.section(meter, [window], idle, unit="call"))
    combined = energy.combine_sections(runs)
    measured = energy.metrics(combined)["energy_per_call"]
    assert [w["joules"] for w in combined["windows"]] == [100.0, 110.0, 90.0]
    assert measured["runs"] == 3 and measured["median"] == pytest.approx(100.0)
    assert measured["ci_low"] < 90.0 < 110.0 < measured["ci_high"]


def numbers_of(measured):
    """Every number of a set of metrics."""
    return [
        number
        for metric in measured.values()
        for key, number in metric.items()
        if isinstance(number, float) and key != "ci_level"
    ]


def test_a_launch_bound_window_within_the_counters_resolution_gives_a_bound_not_a_number(clock):
    """As saxpy on an H200: 1,000 short calls drew a little less than idle in their second,
    which noise does at that size; the energy above idle is only bounded, never negative."""
    nvml = FakeNvml([[0, 0, 124_000, 124_000, 247_000]])  # idle 124 W, then 123 J in 1 s
    meter = energy.nvml_meter([0], nvml)
    idle = energy.baseline(meter, 1.0)
    window = energy.measure_window(meter, lambda: clock.sleep(1e-3), 1_000)
    found = energy.section(meter, [window], idle, unit="call")
    measured = energy.metrics(found)
    resolution = 0.1 * (123.0 + 124.0 * 1.0 / 1.0) / 1_000  # P (W + W0 T / T0) per call
    assert "energy_per_call_above_idle" not in measured
    bound = measured["energy_per_call_above_idle_upper_bound"]
    assert bound == {"unit": "J", "value": pytest.approx(resolution)}
    assert measured["energy_per_call_above_idle_resolution"]["value"] == pytest.approx(resolution)
    assert measured["energy_per_call"]["median"] == pytest.approx(0.123)
    assert min(numbers_of(measured)) >= 0
    record = record_with(found, measured)
    assert record["metrics"]["energy_per_call_above_idle_upper_bound"] == bound
    beside = {**measured, "energy_per_call_above_idle": summarize([0.01], "J")}
    with pytest.raises(RecordError, match="energy_per_call_above_idle: .* is not allowed here"):
        record_with(found, beside)
    without = {k: v for k, v in measured.items() if k != "energy_per_call_above_idle_resolution"}
    with pytest.raises(RecordError, match="'energy_per_call_above_idle_resolution' is missing"):
        record_with(found, without)


def test_one_window_gives_an_energy_interval_as_wide_as_the_counters_resolution(clock):
    # Idle 50 W; a window of 4 steps over 2 s using 300 J: 75 J/step, 50 above idle.
    nvml = FakeNvml([[0, 0, 50_000, 50_000, 350_000]])
    meter = energy.nvml_meter([0], nvml)
    idle = energy.baseline(meter, 1.0)
    window = energy.measure_window(meter, lambda: clock.sleep(0.5), 4)
    measured = energy.metrics(energy.section(meter, [window], idle, unit="step"))
    gross, above = 0.1 * 150 / 4, 0.1 * (150 + 50 * 2.0 / 1.0) / 4
    for name, median, resolution in [
        ("energy_per_step", 75.0, gross),
        ("energy_per_step_above_idle", 50.0, above),
        ("mean_power", 150.0, 0.1 * 150 / 2),
    ]:
        metric = measured[name]
        assert metric["median"] == pytest.approx(median)
        assert metric["ci_low"] == pytest.approx(median - resolution)
        assert metric["ci_high"] == pytest.approx(median + resolution)
        assert measured[f"{name}_resolution"]["value"] == pytest.approx(resolution)


def test_large_windows_give_their_measured_energy_with_an_interval_at_least_the_resolution(clock):
    # Idle 60 W; three windows of 10 calls, 2 s each at about 150 W: 18 J per call above
    # idle, the windows 0.05 J apart, much less than the counter's 2.7 J per call.
    readings = [0, 0, 60_000, 60_000, 360_000, 360_000, 660_500, 660_500, 960_000]
    meter = energy.nvml_meter([0], FakeNvml([readings]))
    idle = energy.baseline(meter, 1.0)
    windows = [energy.measure_window(meter, lambda: clock.sleep(0.2), 10) for _ in range(3)]
    measured = energy.metrics(energy.section(meter, windows, idle, unit="call"))
    above = measured["energy_per_call_above_idle"]
    resolution = measured["energy_per_call_above_idle_resolution"]["value"]
    assert resolution == pytest.approx(0.1 * (300.5 / 2 + 60.0 * 2 / 1) / 10)
    assert above["median"] == pytest.approx(18.0) and above["runs"] == 3
    # The windows' spread alone would give +-0.2 J: the counter cannot tell that apart.
    assert [above["ci_low"], above["ci_high"]] == pytest.approx([18 - resolution, 18 + resolution])
    assert "energy_per_call_above_idle_upper_bound" not in measured


def test_an_idle_baseline_kept_on_the_host_serves_the_next_jobs_without_measuring(clock, tmp_path):
    kept = tmp_path / "idle.json"
    first = energy.baseline(energy.nvml_meter([0], FakeNvml([[0, 0, 60_000]])), 1.0, kept)
    assert first.watts == pytest.approx(60.0)
    energy.BASELINES.clear()  # the next job: another process, the same host
    unread = FakeNvml([[0]])  # only the check that the counter exists
    again = energy.baseline(energy.nvml_meter([0], unread), 1.0, kept)
    assert again == first and again.age() < 5


def test_an_idle_baseline_older_than_its_age_limit_is_measured_again(clock, tmp_path, monkeypatch):
    kept = tmp_path / "idle.json"
    energy.baseline(energy.nvml_meter([0], FakeNvml([[0, 0, 60_000]])), 1.0, kept)
    energy.BASELINES.clear()
    monkeypatch.setattr(energy, "BASELINE_MAX_AGE_S", -1.0)
    again = energy.baseline(energy.nvml_meter([0], FakeNvml([[0, 0, 80_000]])), 1.0, kept)
    assert again.watts == pytest.approx(80.0)


def test_only_the_first_window_runs_of_a_measurement_take_an_energy_window(
    monkeypatch, tmp_path, clock
):
    fast_nvml(monkeypatch, clock)
    output = tmp_path / "saxpy.json"
    energy_settings = EnergySettings(window_runs=1, min_window_s={"cpu": 1e-3})
    settings = replace(SETTINGS, runs=3, energy=energy_settings)
    measurement.run(SAXPY, settings, str(output), context=CONTEXT)
    record = load_record(output)
    assert len(record["energy"]["windows"]) == 1
    assert record["metrics"]["time"]["runs"] == 3
    assert record["energy"]["baseline_age_s"] >= 0


def test_one_run_without_a_meter_makes_the_combined_energy_unavailable():
    found = {"status": "ok", "windows": [{"joules": 1.0, "seconds": 1.0, "calls": 1}]}
    lost = energy.unavailable("reading the energy counters failed: NVMLError: GPU is lost")
    assert energy.combine_sections([found, lost]) == lost
    assert energy.combine_sections([None, None]) is None


# --- RAPL ------------------------------------------------------------------------------


def test_rapl_reads_packages_and_dram_but_not_their_inner_zones(tmp_path, clock):
    root = powercap(
        tmp_path,
        {
            "intel-rapl:0": ("package-0", 1_000_000, 2**32),
            "intel-rapl:0:0": ("core", 500, 2**32),
            "intel-rapl:0:1": ("dram", 2_000_000, 2**32),
            "intel-rapl:1": ("psys", 7, 2**32),
        },
    )
    meter = energy.rapl_meter(root)
    assert meter.method == "rapl powercap (package-0, package-0 dram)"
    before = meter.read()
    set_count(root, "intel-rapl:0", 4_000_000)
    set_count(root, "intel-rapl:0:1", 2_500_000)
    assert meter.joules(before, meter.read()) == pytest.approx(3.5)


def test_rapl_undoes_a_counter_wrap_at_its_max_range(tmp_path):
    root = powercap(tmp_path, {"intel-rapl:0": ("package-0", 999_000_000, 1_000_000_000)})
    meter = energy.rapl_meter(root)
    before = meter.read()
    set_count(root, "intel-rapl:0", 1_000_000)  # wrapped: 1 J before the top, 1 J after
    assert meter.joules(before, meter.read()) == pytest.approx(2.0)


def test_rapl_energy_is_bounded_by_its_own_periods_resolution_across_a_wrap(tmp_path, clock):
    """RAPL's counter updates every millisecond: with the idle 30 W read across the
    counter's wrap, 10,000 calls of 20 µs that drew a little under it are bounded by
    4.2 µJ a call; ten calls of 20 ms at 80 W are measured, to within 9.2 mJ a call."""
    wraps_at = 2**32
    root = powercap(tmp_path, {"intel-rapl:0": ("package-0", 0, wraps_at)})
    meter = energy.rapl_meter(root)
    start = wraps_at - 10_000_000  # 10 J below the wrap
    counts = [start, start + 15_000_000]  # idle: 15 J in 0.5 s
    counts += [counts[-1], counts[-1] + 5_999_000]  # 10,000 calls: 5.999 J in 0.2 s
    counts += [counts[-1], counts[-1] + 16_000_000]  # 10 calls: 16 J in 0.2 s
    readings = iter(count % wraps_at for count in counts)
    meter.counters[0] = energy.Counter("package-0", lambda: next(readings), wraps_at, 1e-6)
    idle = energy.baseline(meter, 0.5)
    assert idle.watts == pytest.approx(30.0)
    short = energy.measure_window(meter, lambda: clock.sleep(2e-5), 10_000)
    large = energy.measure_window(meter, lambda: clock.sleep(0.02), 10)
    bounded = energy.metrics(energy.section(meter, [short], idle, unit="call"))
    assert "energy_per_call_above_idle" not in bounded
    assert bounded["energy_per_call_above_idle_upper_bound"]["value"] == pytest.approx(
        0.001 * (29.995 + 30.0 * 0.2 / 0.5) / 10_000
    )
    assert min(numbers_of(bounded)) >= 0
    measured = energy.metrics(energy.section(meter, [large], idle, unit="call"))
    above, resolution = measured["energy_per_call_above_idle"], 0.001 * (80 + 12) / 10
    assert above["median"] == pytest.approx(1.0)
    assert [above["ci_low"], above["ci_high"]] == pytest.approx([1 - resolution, 1 + resolution])


def test_rapl_without_powercap_is_unavailable_with_the_reason(tmp_path):
    with pytest.raises(energy.EnergyUnavailable, match="no RAPL powercap interface here"):
        energy.rapl_meter(tmp_path / "absent")


def test_rapl_without_an_energy_file_is_unavailable_with_the_reason(tmp_path):
    root = powercap(tmp_path, {"intel-rapl:0": ("package-0", None, 2**32)})
    with pytest.raises(energy.EnergyUnavailable, match="energy_uj cannot be read"):
        energy.rapl_meter(root)


def test_rapl_readable_by_root_only_says_so(tmp_path):
    root = powercap(tmp_path, {"intel-rapl:0": ("package-0", 5, 2**32)})

    def refuse(path: Path) -> int:
        raise PermissionError(13, "Permission denied", str(path))

    with pytest.raises(energy.EnergyUnavailable, match="only root may read RAPL counters"):
        energy.rapl_meter(root, read=refuse)


# --- the probe and the record ----------------------------------------------------------


def test_a_probe_without_a_meter_skips_its_windows_and_says_why(monkeypatch):
    def absent(is_gpu, gpus, nvml=None, powercap=energy.POWERCAP):
        raise energy.EnergyUnavailable("no RAPL powercap interface here")

    monkeypatch.setattr(energy, "open_meter", absent)
    calls = []
    with energy.Probe(False, [], EnergySettings()) as probe:
        probe.window(lambda: calls.append(1), 1e-3)
    assert calls == []
    assert probe.section("call") == {
        "status": "unavailable",
        "reason": "no RAPL powercap interface here",
    }


def test_energy_off_in_the_config_is_recorded_as_not_measured():
    probe = energy.Probe(True, [0], EnergySettings(enabled=False))
    assert "energy.enabled is false" in probe.section("call")["reason"]


def test_a_probe_repeats_the_work_for_the_minimum_window(monkeypatch, tmp_path, clock):
    root = powercap(tmp_path, {"intel-rapl:0": ("package-0", 0, 2**32)})
    monkeypatch.setattr(energy, "open_meter", lambda is_gpu, gpus: energy.rapl_meter(root))
    settings = EnergySettings(min_window_s={"cpu": 0.05})
    with energy.Probe(False, [], settings) as probe:
        probe.window(lambda: clock.sleep(0.004), 0.004)
    found = probe.section("call")
    assert found["windows"][0]["calls"] == 13  # ceil(0.05 / 0.004)
    assert found["windows"][0]["seconds"] == pytest.approx(0.052)
    assert found["min_window_s"] == 0.05


def record_with(found, measured=None):
    return make_record(
        experiment="kernel",
        experiment_id="kernels/saxpy/cpu1/numpy/float64/n1000",
        status="ok",
        params={"kernel": "saxpy", "device": "cpu1", "backend": "numpy", "dtype": "float64"}
        | {"size": 1000},
        metrics={"time": summarize([1.0], "s"), **(measured or {})},
        provenance={},
        energy=found,
    )


def test_the_record_keeps_a_valid_energy_section_and_refuses_a_broken_one(clock):
    nvml = FakeNvml([[0, 0, 10_000, 10_000, 30_000]])
    meter = energy.nvml_meter([0], nvml)
    idle = energy.baseline(meter, 1.0)
    window = energy.measure_window(meter, lambda: clock.sleep(1.0), 10)
    found = energy.section(meter, [window], idle, unit="call")
    record = record_with(found, energy.metrics(found))
    assert record["energy"]["method"] == "nvml total-energy counter (GPU-0)"
    assert record["metrics"]["energy_per_call"]["median"] == pytest.approx(2.0)
    for broken, message in [
        ({"status": "estimated"}, 'energy.status: "estimated" is not one of "ok"'),
        ({"status": "unavailable"}, "energy: 'reason' is missing"),
        ({**found, "windows": []}, "energy.windows: needs at least 1 items"),
        ({**found, "windows": [{"joules": 1.0, "seconds": 0.0, "calls": 1}]}, "is not above 0"),
        ({**found, "baseline_w": "idle"}, 'energy.baseline_w: "idle" is not a number'),
        ({**found, "windows": [{"joules": 1.0, "seconds": 1.0, "calls": 1.5}]}, "calls: 1.5"),
    ]:
        with pytest.raises(RecordError, match=message):
            record_with(broken)


# --- experiments -----------------------------------------------------------------------


def test_a_cpu_kernel_on_this_machine_records_its_energy_or_why_not(tmp_path):
    output = tmp_path / "saxpy.json"
    measurement.run(SAXPY, SETTINGS, str(output), context=CONTEXT)
    record = load_record(output)
    found = record["energy"]
    if found["status"] == "unavailable":
        assert found["reason"]
        assert not any(name.startswith("energy_") for name in record["metrics"])
    else:  # a machine whose RAPL counters this process may read
        assert found["method"].startswith("rapl powercap (")
        assert record["metrics"]["energy_per_call"]["unit"] == "J"


def fast_nvml(monkeypatch, clock) -> FakeNvml:
    """An NVML counter that rises 1 J per reading and updates every 0.1 ms, on a clock that
    moves 2 ms per reading: a window of real calls reaches its ten updates in one reading
    (with the real 0.1 s period the window would top up real calls to a fake second)."""
    clock.tick = 2e-3
    monkeypatch.setattr(energy, "NVML_PERIOD_S", 1e-4)
    nvml = FakeNvml([iter(range(0, 10**9, 1000))])
    monkeypatch.setattr(
        energy, "open_meter", lambda is_gpu, gpus: energy.nvml_meter(gpus, nvml, visible="0")
    )
    return nvml


def test_a_kernel_measured_with_nvml_records_energy_per_call(monkeypatch, tmp_path, clock):
    nvml = fast_nvml(monkeypatch, clock)
    output = tmp_path / "saxpy.json"
    settings = replace(SETTINGS, runs=2, energy=EnergySettings(min_window_s={"cpu": 1e-3}))
    measurement.run(SAXPY, settings, str(output), context=CONTEXT)
    record = load_record(output)
    found = record["energy"]
    assert found["method"] == "nvml total-energy counter (GPU-0)"
    assert found["baseline_s"] == pytest.approx(0.5, abs=0.01)  # the CPU's baseline_s
    assert len(found["windows"]) == 2 and found["status"] == "ok"
    assert all(window["seconds"] >= 1e-3 for window in found["windows"])
    assert record["metrics"]["energy_per_call"]["unit"] == "J"
    assert nvml.started == 0


def test_a_window_that_ran_faster_than_planned_is_topped_up_to_ten_counter_updates(
    monkeypatch, clock
):
    """On an H200 the windows planned from the timed median for NVML's 1 s lasted 0.90 to
    1.0 s (the calls back to back ran faster than timed), and every GPU record's energy
    was too short. The window now adds calls at the rate it has shown."""
    nvml = FakeNvml([iter(range(0, 10**9, 1000))])
    meter = energy.nvml_meter([0], nvml)
    window = energy.measure_window(meter, lambda: clock.sleep(0.09), 10, min_seconds=1.0)
    assert window.calls == 12 and window.seconds == pytest.approx(1.08)
    assert energy.measure_window(meter, lambda: clock.sleep(0.09), 10).calls == 10
    monkeypatch.setattr(energy, "open_meter", lambda is_gpu, gpus: meter)
    with energy.Probe(True, [0], EnergySettings(min_window_s={"cuda": 0.5})) as probe:
        probe.window(lambda: clock.sleep(0.09), 0.1)  # planned: 5 calls for 0.5 s
    found = probe.section("call")
    assert found["status"] == "ok", found["reason"]
    assert found["windows"][0]["seconds"] >= 1.0  # ten updates, above the config's 0.5 s


def test_training_records_energy_per_step_and_per_sample(monkeypatch, tmp_path, clock):
    root = powercap(tmp_path / "powercap", {"intel-rapl:0": ("package-0", 0, 2**40)})
    meter = energy.rapl_meter(root)
    counted = iter(range(0, 10**12, 2_000_000))  # 2 J more at every reading
    meter.counters[0] = energy.Counter("package-0", lambda: next(counted), 2**40, 1e-6)
    # A window lasts 20 ms on this clock (one reading): 20 updates of RAPL's counter,
    # longer than the window the settings ask for.
    clock.tick = 0.02
    monkeypatch.setattr(energy, "open_meter", lambda is_gpu, gpus: meter)
    exp = TrainExperiment("fcn", "cpu1", "fp32", "single", 8)
    settings = TrainSettings(
        seed=0, steps=2, warmup_steps=1, runs=1, energy=EnergySettings(min_window_s={"cpu": 0.01})
    )
    output = tmp_path / "fcn.json"
    measurement.run(exp, settings, str(output), context=CONTEXT)
    record = load_record(output)
    assert record["energy"]["status"] == "ok" and record["energy"]["unit"] == "step"
    steps = record["energy"]["windows"][0]["calls"]
    per_step = record["metrics"]["energy_per_step"]["median"]
    assert per_step == pytest.approx(2.0 / steps)
    assert record["metrics"]["energy_per_sample"]["median"] == pytest.approx(per_step / 8)


def test_a_data_science_workload_records_energy_per_call(monkeypatch, tmp_path, clock):
    root = powercap(tmp_path / "powercap", {"intel-rapl:0": ("package-0", 0, 2**40)})
    meter = energy.rapl_meter(root)
    counted = iter(range(0, 10**12, 2_000_000))  # 2 J more at every reading
    meter.counters[0] = energy.Counter("package-0", lambda: next(counted), 2**40, 1e-6)
    clock.tick = 0.02
    monkeypatch.setattr(energy, "open_meter", lambda is_gpu, gpus: meter)
    output = tmp_path / "groupby.json"
    settings = DatasciSettings(
        min_run_time=0.02, samples=3, energy=EnergySettings(min_window_s={"cpu": 0.01})
    )
    exp = DatasciExperiment("groupby", "cpu1", "pandas", 1000)
    measurement.run(exp, settings, str(output), context=CONTEXT)
    record = load_record(output)
    assert record["energy"]["status"] == "ok" and record["energy"]["unit"] == "call"
    calls = record["energy"]["windows"][0]["calls"]
    assert record["metrics"]["energy_per_call"]["median"] == pytest.approx(2.0 / calls)


# --- tidy table, tables ----------------------------------------------------------------


@pytest.fixture
def energy_frame(tmp_path):
    records = with_energy([*TRAIN, *KERNELS], unreadable=("cpu2",))
    short = copy.deepcopy(dict(records)["train/resnet18/cpu16/fp32/single/bs16"])
    short["energy"] = {**short["energy"], "status": "too_short", "reason": "window 0.05 s"}
    short["metrics"] = {k: v for k, v in short["metrics"].items() if "energy" not in k}
    records = [(exp_id, short if exp_id == short["id"] else r) for exp_id, r in records]
    frame, problems = tidy.collect(write_records(tmp_path, records))
    assert problems == []
    return frame


def test_the_tidy_table_has_the_energy_its_method_and_why_not(energy_frame):
    rows = energy_frame.set_index("id")
    cpu1 = rows.loc["train/resnet18/cpu1/fp32/single/bs16"]
    assert cpu1["energy_status"] == "ok"
    assert cpu1["energy_method"] == "rapl powercap (package-0)"
    assert cpu1["energy_baseline_w"] == 30.0
    # 50 W over a step of 0.55 s, 16 samples a step.
    assert cpu1["energy_per_sample_median"] == pytest.approx(50 * 0.55 / 16, rel=0.03)
    assert energy_frame.attrs["units"]["energy_per_sample_median"] == "J"
    cpu2 = rows.loc["train/resnet18/cpu2/fp32/single/bs16"]
    assert cpu2["energy_status"] == "unavailable" and "Permission denied" in cpu2["energy_reason"]
    assert pd.isna(cpu2["energy_per_sample_median"])
    assert pd.isna(rows.loc["train/resnet18/cuda1/fp32/single/bs16", "energy_status"])


def test_the_energy_table_sets_time_and_energy_side_by_side_and_says_why_not(energy_frame):
    table, footnotes = tables.energy_table(energy_frame, "train")
    assert list(table.columns) == [
        "time per sample (ms)",
        "energy per sample (J)",
        "energy per sample above idle (J)",
    ]
    cpu1 = table.loc["resnet18, cpu1"]
    assert cpu1["time per sample (ms)"].startswith("34.")  # 0.55 s / 16
    assert cpu1["energy per sample (J)"].startswith("1.7")
    assert cpu1["energy per sample above idle (J)"].startswith("0.6")  # 20 W of 50 above idle
    assert table.loc["resnet18, cpu2", "energy per sample (J)"].startswith("n/a (")
    assert table.loc["resnet18, cpu16", "energy per sample (J)"].startswith("too short (")
    assert table.loc["vgg11, cuda1", "energy per sample (J)"].startswith("OOM (")
    assert table.attrs["best"] == []  # time and energy are not compared with each other
    notes = " ".join(footnotes)
    assert "Energy measured with rapl powercap (package-0) (3 records)" in notes
    assert "Permission denied" in notes and "too short: window 0.05 s" in notes
    assert tables.ENERGY_NOTE in footnotes


def test_the_tables_show_an_energy_above_idle_below_resolution_as_a_bound(tmp_path):
    """A launch-bound call's energy above idle reads "< X" in the table, with a note on what
    X is; the tidy table has the bound and no median; the CSV says below resolution."""
    records = dict(with_energy(KERNELS))
    launch_bound = records["kernels/matmul/cpu1/torch/float32/n256"]
    found = launch_bound["energy"]
    # 5,000 calls in 1 s drawing 0.1% under the idle 30 W
    found["windows"] = [{"joules": 29.97, "seconds": 1.0, "calls": 5_000} for _ in range(3)]
    kept = {k: v for k, v in launch_bound["metrics"].items() if "energy" not in k}
    launch_bound["metrics"] = {**kept, **energy.metrics(found)}
    frame, problems = tidy.collect(write_records(tmp_path, records.items()))
    assert problems == []
    row = frame.set_index("id").loc["kernels/matmul/cpu1/torch/float32/n256"]
    bound = 0.1 * (29.97 + 30.0) / 5_000  # P (W + W0 T / T0) per call: 1.2 mJ
    assert row["energy_per_call_above_idle_upper_bound"] == pytest.approx(bound)
    assert pd.isna(row["energy_per_call_above_idle_median"])
    assert frame.attrs["units"]["energy_per_call_above_idle_upper_bound"] == "J"
    table, footnotes = tables.energy_table(frame, "kernel")
    above_idle = table["energy per call above idle (mJ)"]
    assert above_idle["matmul, torch, n=256, cpu1"] == "< 1.2"
    assert above_idle["matmul, torch, n=256, cpu2"].startswith("3.4 [")  # 20 W for 114.5 µs
    assert tables.builders.BELOW_RESOLUTION_NOTE in footnotes
    # LaTeX's text fonts set a bare < as another glyph (¡): as math it reads as itself.
    latex = tables.to_latex(table, footnotes, "kernel_energy")
    assert r"$<$ 1.2" in latex and "<" not in latex.replace("$<$", "")
    cells = pd.read_csv(tables.write_table(table, footnotes, tmp_path / "kernel_energy")[2])
    below = cells[cells["status"] == "below_resolution"]
    assert list(below["reason"]) == ["below the counter's resolution: < 1.2 mJ"]


def test_an_energy_table_without_any_energy_says_so(tmp_path):
    frame, _ = tidy.collect(write_records(tmp_path, KERNELS))
    table, footnotes = tables.energy_table(frame, "kernel")
    assert "No energy was measured in these kernel records (reasons below)." in footnotes
    assert any("no energy section" in note for note in footnotes)
    assert table.loc["matmul, torch, n=256, cpu1", "energy per call"].startswith("n/a (")
    paths = tables.write_table(table, footnotes, tmp_path / "kernel_energy")
    cells = pd.read_csv(paths[2])
    # The column in the unit of its largest time: 1645 µs is 1.645 ms.
    assert set(cells["quantity"]) == {
        "time per call (ms)",
        "energy per call",
        "energy per call above idle",
    }


def _combine_in_rank(rank, store, sections, answers):
    import torch.distributed as dist

    from accelbench.train import loop

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        answers.put((rank, loop._combine_energy(sections[rank], "cpu")))
    finally:
        dist.destroy_process_group()


def window_section(joules, seconds, idle):
    return {
        "status": "ok",
        "reason": None,
        "method": "nvml total-energy counter (GPU-0)",
        "unit": "step",
        "samples_per_unit": 32,
        "counter_period_s": 0.1,
        "baseline_w": idle,
        "baseline_s": 1.0,
        "windows": [{"joules": joules, "seconds": seconds, "calls": 10}],
    }


def combined_in_two_ranks(store: Path, sections) -> dict[int, dict]:
    """Each rank's result of combining its section with the other's (gloo, forked)."""
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    ranks = [
        context.Process(target=_combine_in_rank, args=(rank, store, sections, answers))
        for rank in range(2)
    ]
    for process in ranks:
        process.start()
    combined = dict(answers.get(timeout=60) for _ in ranks)
    for process in ranks:
        process.join(timeout=60)
    return combined


def test_the_processes_of_a_group_sum_their_gpus_energy(tmp_path):
    sections = [window_section(300.0, 1.0, 60.0), window_section(320.0, 1.1, 62.0)]
    combined = combined_in_two_ranks(tmp_path / "store", sections)
    assert combined[0] == combined[1]
    assert combined[0]["windows"] == [{"joules": 620.0, "seconds": 1.1, "calls": 10}]
    assert combined[0]["baseline_w"] == 122.0
    assert combined[0]["method"].endswith("in each of 2 processes, summed")


def test_a_group_with_one_process_without_energy_has_none(tmp_path):
    lost = energy.unavailable("NVML has no total-energy counter for GPU-1: Not Supported")
    combined = combined_in_two_ranks(tmp_path / "store", [window_section(300.0, 1.0, 60.0), lost])
    assert combined[1] == lost
    assert combined[0]["status"] == "unavailable"
    assert "another process of the group" in combined[0]["reason"]

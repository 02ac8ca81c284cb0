"""What a GPU record keeps of its GPUs (accelbench.measuring.gpu_state): clocks, power,
temperature and throttling over the measurement, read through a stand-in for nvidia-ml-py
as strict as the real module in what the watch relies on."""

from __future__ import annotations

import collections
import dataclasses
import errno
import functools
import os
import signal
import time

import jsonschema
import pynvml as real  # nvidia-ml-py: its errors, ctypes structures and constants
import pytest

from accelbench.families import FAMILIES
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.measuring import gpu_state
from accelbench.measuring.settings import ContentionSettings
from accelbench.records import record
from accelbench.records.record import RecordError, load_record, make_record

from records import provenance

H200 = "GPU-58a6b4b0-1111-2222-3333-444455556666"
OTHER = "GPU-9f00aa11-7777-8888-9999-000011112222"
IDLE, POWER_CAP, HW_SLOWDOWN = 0x1, 0x4, 0x8
RING = 119  # the power samples an H200's driver keeps: 2.4 s at 20 ms


class Clock:
    """NVML's sample clock (microseconds of the Unix clock), moved by the test."""

    def __init__(self) -> None:
        self.us = 1_795_881_530_000_000

    def now_us(self) -> int:
        return self.us

    def advance(self, seconds: float) -> None:
        self.us += round(seconds * 1e6)


@dataclasses.dataclass
class FakeGpu:
    """One board's state as NVML reports it; the test changes it between readings."""

    uuid: str
    name: str = "NVIDIA H200"
    sm_mhz: int = 345
    memory_mhz: int = 3201
    power_mw: int = 78_000
    temperature_c: int = 38
    reasons: int = IDLE
    power_limit_mw: int = 700_000
    violations_ns: dict[str, int] = dataclasses.field(default_factory=dict)
    # NVML's ring buffers, by sampling type; an H200's driver keeps no clock samples.
    kept: dict[int, collections.deque] = dataclasses.field(
        default_factory=lambda: {real.NVML_TOTAL_POWER_SAMPLES: collections.deque(maxlen=RING)}
    )
    refused: dict[str, type[real.NVMLError]] = dataclasses.field(default_factory=dict)


class StrictNvml:
    """nvidia-ml-py as the GPU watch calls it, and as strict: every call before nvmlInit or
    after the last nvmlShutdown raises NVMLError_Uninitialized; a call the board does not
    support raises the real module's error class (`FakeGpu.refused`); samples and violation
    times come as the real ctypes structures; nvmlDeviceGetSamples raises NotFound where
    nothing was sampled after the timestamp asked; a function an older nvidia-ml-py lacks
    (`missing`) is no attribute at all."""

    def __init__(self, gpus, clock=None, missing=(), init_error=None) -> None:
        self.gpus = list(gpus)
        self.clock = clock or Clock()
        self.missing = set(missing)
        self.init_error = init_error
        self.started = 0
        self.calls = 0
        for name in dir(real):
            if name.startswith("NVML_"):
                setattr(self, name, getattr(real, name))

    def __getattribute__(self, name):
        if name in object.__getattribute__(self, "missing"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def _open(self) -> None:
        if self.started <= 0:
            raise real.NVMLError_Uninitialized()
        self.calls += 1

    def _gpu(self, handle: int, function: str) -> FakeGpu:
        self._open()
        gpu = self.gpus[handle]
        if function in gpu.refused:
            raise gpu.refused[function]()
        return gpu

    def nvmlInit(self):
        if self.init_error:
            raise self.init_error()
        self.started += 1

    def nvmlShutdown(self):
        self._open()
        self.started -= 1

    def nvmlDeviceGetCount(self):
        self._open()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        self._open()
        if index >= len(self.gpus):
            raise real.NVMLError_InvalidArgument()
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid):
        self._open()
        for index, gpu in enumerate(self.gpus):
            if gpu.uuid == uuid:
                return index
        raise real.NVMLError_NotFound()

    def nvmlDeviceGetUUID(self, handle):
        return self._gpu(handle, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetName(self, handle):
        return self._gpu(handle, "nvmlDeviceGetName").name

    def nvmlDeviceGetClockInfo(self, handle, clock_type):
        gpu = self._gpu(handle, "nvmlDeviceGetClockInfo")
        return {real.NVML_CLOCK_SM: gpu.sm_mhz, real.NVML_CLOCK_MEM: gpu.memory_mhz}[clock_type]

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._gpu(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return self._gpu(handle, "nvmlDeviceGetEnforcedPowerLimit").power_limit_mw

    def nvmlDeviceGetTemperature(self, handle, sensor):
        assert sensor == real.NVML_TEMPERATURE_GPU
        return self._gpu(handle, "nvmlDeviceGetTemperature").temperature_c

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self._gpu(handle, "nvmlDeviceGetCurrentClocksEventReasons").reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return self._gpu(handle, "nvmlDeviceGetCurrentClocksThrottleReasons").reasons

    def nvmlDeviceGetViolationStatus(self, handle, policy):
        gpu = self._gpu(handle, "nvmlDeviceGetViolationStatus")
        name = next(
            key for key, value in gpu_state.VIOLATIONS.items() if getattr(real, value) == policy
        )
        return real.c_nvmlViolationTime_t(
            referenceTime=self.clock.now_us(), violationTime=gpu.violations_ns.get(name, 0)
        )

    def nvmlDeviceGetSamples(self, handle, sampling_type, last_seen_us):
        gpu = self._gpu(handle, "nvmlDeviceGetSamples")
        newer = [entry for entry in gpu.kept.get(sampling_type, ()) if entry[0] > last_seen_us]
        if not newer:
            raise real.NVMLError_NotFound()
        samples = [
            real.c_nvmlSample_t(timeStamp=at, sampleValue=real.c_nvmlValue_t(uiVal=value))
            for at, value in newer
        ]
        return real.NVML_VALUE_TYPE_UNSIGNED_INT, samples


def sample(nvml: StrictNvml, gpu: FakeGpu, power_mw: int, seconds: float = 0.02) -> None:
    """The driver samples the board's power after `seconds`."""
    nvml.clock.advance(seconds)
    gpu.kept[real.NVML_TOTAL_POWER_SAMPLES].append((nvml.clock.now_us(), power_mw))


@pytest.fixture
def clock(monkeypatch):
    found = Clock()
    monkeypatch.setattr(gpu_state, "_now_us", found.now_us)
    return found


def busy(gpu: FakeGpu, sm_mhz: int, power_mw: int, reasons: int = POWER_CAP, celsius=60) -> None:
    gpu.sm_mhz, gpu.power_mw, gpu.reasons, gpu.temperature_c = sm_mhz, power_mw, reasons, celsius


def idle(gpu: FakeGpu) -> None:
    busy(gpu, 345, 78_000, IDLE, 40)


def as_recorded(section: dict) -> dict:
    """`section` as a record keeps it: the record schema must take it."""
    return make_record(
        experiment="roof",
        experiment_id="roofs/cuda1/float16",
        status="unavailable",
        reason="not measured here",
        params={"device": "cuda1", "dtype": "float16"},
        provenance=provenance(),
        conditions={"busy": False, "gpu_state": section},
    )["conditions"]["gpu_state"]


def test_a_power_capped_gemm_is_kept_with_its_clocks_power_limit_and_throttled_seconds(clock):
    """As on an H200: the driver keeps power samples and no clock samples, so the clocks
    come from the readings and the power from the samples taken while the GPU was busy."""
    gpu = FakeGpu(H200)
    nvml = StrictNvml([gpu], clock)
    for _ in range(5):  # before the measurement: not the measurement's
        sample(nvml, gpu, 900_000)
    sampler = gpu_state.Sampler([0], nvml, visible=None, order=None)
    sampler.poll()  # idle: the run's process starts
    for sm_mhz, power_mw in ((1530, 690_000), (1485, 700_000), (1425, 705_000)):
        clock.advance(0.1)
        busy(gpu, sm_mhz, power_mw)
        gpu.violations_ns["power"] = gpu.violations_ns.get("power", 0) + 100_000_000
        sampler.poll()
        sample(nvml, gpu, power_mw)
    clock.advance(0.1)
    sampler.poll()
    idle(gpu)
    sample(nvml, gpu, 130_000)  # after the run, idle again
    clock.advance(0.1)
    sampler.poll()
    section = as_recorded(sampler.section())
    sampler.close()
    assert nvml.started == 0
    assert section["status"] == "ok" and section["period_s"] == gpu_state.PERIOD_S
    found = section["gpus"][H200]
    assert found["sm_clock_mhz"] == {
        "min": 1425.0,
        "median": 1455.0,
        "max": 1530.0,
        "samples": 4,
        "source": "readings",
    }
    assert found["power_w"]["source"] == "samples"
    assert (found["power_w"]["min"], found["power_w"]["max"]) == pytest.approx((690, 705))
    assert found["power_limit_w"] == 700
    assert found["temperature_c"] == {"min": 60, "max": 60}
    assert found["clock_event_reasons"] == ["sw_power_cap"]
    assert found["throttled_s"]["power"] == pytest.approx(0.3)
    assert found["throttled_s"]["thermal"] == 0
    assert (found["readings"], found["busy_readings"]) == (6, 4)
    assert found["busy_s"] == pytest.approx(3 * 0.12)  # between the four busy readings
    assert found["unreadable"] == {}


def test_the_clocks_of_the_idle_gaps_between_runs_are_left_out(clock):
    gpu = FakeGpu(H200)
    nvml = StrictNvml([gpu], clock)
    sampler = gpu_state.Sampler([0], nvml)
    for state in (idle, busy, busy, idle, idle, busy, busy):
        clock.advance(0.1)
        if state is busy:
            busy(gpu, 1980, 600_000, reasons=0)
        else:
            idle(gpu)
        sampler.poll()
    found = sampler.section()["gpus"][H200]
    sampler.close()
    assert found["sm_clock_mhz"]["min"] == 1980 and found["sm_clock_mhz"]["samples"] == 4
    assert found["clock_event_reasons"] == []
    assert found["busy_s"] == pytest.approx(0.2)


def test_where_the_driver_keeps_clock_samples_they_give_the_clocks(clock):
    gpu = FakeGpu(H200)
    gpu.kept[real.NVML_PROCESSOR_CLK_SAMPLES] = collections.deque(maxlen=RING)
    nvml = StrictNvml([gpu], clock)
    sampler = gpu_state.Sampler([0], nvml)
    busy(gpu, 1755, 650_000)
    sampler.poll()
    for mhz in (1755, 1830, 1980):
        clock.advance(0.05)
        gpu.kept[real.NVML_PROCESSOR_CLK_SAMPLES].append((clock.now_us(), mhz))
    clock.advance(0.05)
    sampler.poll()
    found = sampler.section()["gpus"][H200]
    sampler.close()
    assert found["sm_clock_mhz"] == {
        "min": 1755,
        "median": 1830,
        "max": 1980,
        "samples": 3,
        "source": "samples",
    }
    assert found["memory_clock_mhz"]["source"] == "readings"


def test_what_nvml_does_not_support_or_permit_is_null_and_says_why(clock):
    gpu = FakeGpu(H200, reasons=0)
    gpu.refused = {
        "nvmlDeviceGetEnforcedPowerLimit": real.NVMLError_NotSupported,
        "nvmlDeviceGetViolationStatus": real.NVMLError_NoPermission,
        "nvmlDeviceGetTemperature": real.NVMLError_NotSupported,
    }
    nvml = StrictNvml([gpu], clock)
    sampler = gpu_state.Sampler([0], nvml)
    sampler.poll()
    clock.advance(0.1)
    sampler.poll()
    found = as_recorded(sampler.section())["gpus"][H200]
    sampler.close()
    assert found["power_limit_w"] is None and found["temperature_c"] is None
    assert found["throttled_s"] == dict.fromkeys(gpu_state.VIOLATIONS)
    unreadable = found["unreadable"]
    assert unreadable["power_limit_w"] == (
        "nvmlDeviceGetEnforcedPowerLimit: NVMLError_NotSupported: Not Supported"
    )
    assert "Insufficient Permissions" in unreadable["throttled_s.thermal"]
    assert "NotSupported" in unreadable["temperature_c"]
    assert found["sm_clock_mhz"]["max"] == 345 and "sm_clock_mhz" not in unreadable


def test_an_older_nvidia_ml_py_is_asked_the_clock_event_reasons_by_their_older_name(clock):
    gpu = FakeGpu(H200, reasons=POWER_CAP | HW_SLOWDOWN)
    nvml = StrictNvml([gpu], clock, missing={"nvmlDeviceGetCurrentClocksEventReasons"})
    sampler = gpu_state.Sampler([0], nvml)
    sampler.poll()
    found = sampler.section()["gpus"][H200]
    sampler.close()
    assert found["clock_event_reasons"] == ["sw_power_cap", "hw_slowdown"]


def test_a_driver_before_535_is_asked_by_the_older_name_once_the_newer_fails(clock):
    gpu = FakeGpu(H200, reasons=0x20)
    gpu.refused = {"nvmlDeviceGetCurrentClocksEventReasons": real.NVMLError_FunctionNotFound}
    nvml = StrictNvml([gpu], clock)
    sampler = gpu_state.Sampler([0], nvml)
    sampler.poll()
    calls = nvml.calls
    sampler.poll()
    asked = nvml.calls - calls
    found = sampler.section()["gpus"][H200]
    sampler.close()
    assert found["clock_event_reasons"] == ["sw_thermal_slowdown"]
    assert "clock_event_reasons" not in found["unreadable"]
    assert asked == 4 + 1 + 3  # clocks, power, temperature; the reasons once; the samples


def test_neither_clock_event_call_leaves_the_reasons_null_and_every_reading_counts(clock):
    gpu = FakeGpu(H200)  # idle, but nothing says so
    missing = set(gpu_state.REASON_FUNCTIONS)
    sampler = gpu_state.Sampler([0], StrictNvml([gpu], clock, missing=missing))
    sampler.poll()
    found = sampler.section()["gpus"][H200]
    sampler.close()
    assert found["clock_event_reasons"] is None and found["busy_readings"] == 1
    assert found["unreadable"]["clock_event_reasons"] == (
        "this nvidia-ml-py has neither nvmlDeviceGetCurrentClocksEventReasons "
        "nor nvmlDeviceGetCurrentClocksThrottleReasons"
    )


def test_the_gpus_are_the_cuda_devices_the_process_sees_by_nvml_uuid(clock):
    nvml = StrictNvml([FakeGpu(OTHER), FakeGpu(H200)], clock)
    sampler = gpu_state.Sampler([0], nvml, visible=H200)
    sampler.poll()
    assert list(sampler.section()["gpus"]) == [H200]
    sampler.close()
    assert list(gpu_state.watched_gpus(4, "3")) == [0]  # a launched rank sees its own only
    assert list(gpu_state.watched_gpus(2, None)) == [0, 1]


@pytest.mark.parametrize(
    ("nvml", "reason"),
    [
        (
            StrictNvml([FakeGpu(H200)], init_error=real.NVMLError_DriverNotLoaded),
            "NVML cannot start: Driver Not Loaded",
        ),
        (
            StrictNvml([FakeGpu(H200)]),
            "NVML cannot find the measurement's GPUs: CUDA devices [0, 1] used",
        ),
    ],
)
def test_without_nvml_or_the_gpus_the_section_is_unavailable_and_says_why(nvml, reason):
    with gpu_state.GpuWatch([0, 1], nvml, period_s=0.01) as watch:
        pass
    assert watch.section["status"] == "unavailable"
    assert watch.section["reason"].startswith(reason)
    assert nvml.started == 0


def test_without_nvidia_ml_py_the_section_is_unavailable(monkeypatch):
    def no_module(name):
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(gpu_state.importlib, "import_module", no_module)
    with pytest.raises(gpu_state.GpuStateUnavailable, match="nvidia-ml-py is not installed"):
        gpu_state.Sampler([0])


def test_the_watch_reads_in_a_process_of_its_own_and_never_opens_nvml_in_this_one():
    gpu = FakeGpu(H200)
    busy(gpu, 1980, 500_000, reasons=0)
    nvml = StrictNvml([gpu])
    with gpu_state.GpuWatch([0], nvml, period_s=0.01) as watch:
        time.sleep(0.2)
        assert nvml.started == 0  # the process that forks runs keeps NVML closed
    section = as_recorded(watch.section)
    assert section["status"] == "ok" and section["seconds"] >= 0.1
    assert section["gpus"][H200]["readings"] >= 5
    assert section["gpus"][H200]["sm_clock_mhz"]["max"] == 1980


class Dying(StrictNvml):
    def nvmlDeviceGetPowerUsage(self, handle):
        os.kill(os.getpid(), signal.SIGKILL)


class Hanging(StrictNvml):
    def nvmlDeviceGetPowerUsage(self, handle):
        time.sleep(60)


def test_a_watch_whose_process_died_says_so_and_the_measurement_goes_on():
    with gpu_state.GpuWatch([0], Dying([FakeGpu(H200)]), period_s=0.01) as watch:
        pass
    assert watch.section == gpu_state.unavailable(
        "the GPU watch's process was killed by SIGKILL without an answer"
    )


def test_a_watch_that_stops_answering_is_ended_after_its_time(monkeypatch):
    monkeypatch.setattr(gpu_state, "STOP_TIMEOUT_S", 0.3)
    started = time.monotonic()
    with gpu_state.GpuWatch([0], Hanging([FakeGpu(H200)]), period_s=0.01) as watch:
        pass
    assert time.monotonic() - started < 5
    assert watch.section["reason"] == "the GPU watch's process did not answer within 0.3 s"


def test_a_watch_that_cannot_start_its_process_says_so(monkeypatch):
    def out_of_processes():
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(gpu_state.os, "fork", out_of_processes)
    with gpu_state.GpuWatch([0], StrictNvml([FakeGpu(H200)])) as watch:
        pass
    assert watch.section == gpu_state.unavailable(
        "the GPU watch's process could not start: [Errno 11] Resource temporarily unavailable"
    )


def test_a_watch_that_fails_says_why_in_the_section(monkeypatch):
    def broken(*args):
        raise ValueError("a bug")

    monkeypatch.setattr(gpu_state, "_sample_until_stopped", broken)
    with gpu_state.GpuWatch([0], StrictNvml([FakeGpu(H200)]), period_s=0.01) as watch:
        pass
    assert watch.section["reason"] == "the GPU watch failed: ValueError: a bug"


def test_the_bits_and_calls_the_watch_decodes_are_nvidia_ml_pys():
    for bit, name in gpu_state.REASONS.items():
        words = "".join(part.capitalize() for part in name.split("_"))
        assert getattr(real, f"nvmlClocksEventReason{words}") == bit
    assert gpu_state.reason_names(0x4 | 0x400) == ["sw_power_cap", "0x400"]
    for index, member in enumerate(gpu_state.VALUE_MEMBERS):
        assert member in dict(real.c_nvmlValue_t._fields_)
        assert index == getattr(real, f"NVML_VALUE_TYPE_{_value_type(member)}")
    for function, argument, sampling, _ in gpu_state.FIGURES.values():
        assert callable(getattr(real, function)) and hasattr(real, sampling)
        assert argument is None or hasattr(real, argument)
    assert all(hasattr(real, policy) for policy in gpu_state.VIOLATIONS.values())
    assert all(hasattr(real, name) for name in gpu_state.REASON_FUNCTIONS)


def _value_type(member: str) -> str:
    return {
        "dVal": "DOUBLE",
        "uiVal": "UNSIGNED_INT",
        "ulVal": "UNSIGNED_LONG",
        "ullVal": "UNSIGNED_LONG_LONG",
        "sllVal": "SIGNED_LONG_LONG",
        "siVal": "SIGNED_INT",
        "usVal": "UNSIGNED_SHORT",
    }[member]


def test_the_record_refuses_a_gpu_state_of_the_wrong_shape(clock):
    gpu = FakeGpu(H200)
    sampler = gpu_state.Sampler([0], StrictNvml([gpu], clock))
    sampler.poll()
    section = sampler.section()
    sampler.close()
    found = section["gpus"][H200]
    for broken, message in [
        ({**section, "status": "throttled"}, "is not one of"),
        (gpu_state.unavailable(""), "gpu_state.reason"),
        ({**section, "gpus": {H200: {**found, "power_limit_w": "700 W"}}}, "power_limit_w"),
        ({**section, "gpus": {H200: {**found, "clock_event_reasons": ["slow"]}}}, "slow"),
        ({**section, "gpus": {H200: {**found, "busy_s": -1.0}}}, "busy_s"),
        ({**section, "gpus": {H200: {**found, "fan": 30}}}, "fan"),
    ]:
        with pytest.raises(RecordError, match=message):
            as_recorded(broken)


# The job: the watch around the runs ---------------------------------------------------


def gpu_toy(repeats_runs_itself: bool):
    """The families' toy, declared to run on a GPU and measured in this process."""
    from test_families import TOY, ToyExperiment

    family = dataclasses.replace(TOY, repeats_runs_itself=repeats_runs_itself)
    return family, ToyExperiment("loop", "cuda1", 1000)


@pytest.mark.parametrize("repeats_runs_itself", [False, True])
def test_a_gpu_record_keeps_its_gpus_state_and_its_cpus_clocks(
    monkeypatch, tmp_path, repeats_runs_itself
):
    family, exp = gpu_toy(repeats_runs_itself)
    monkeypatch.setitem(FAMILIES, "toy", family)
    gpu = FakeGpu(H200)
    busy(gpu, 1980, 450_000, reasons=0)
    monkeypatch.setattr(
        gpu_state, "GpuWatch", functools.partial(gpu_state.GpuWatch, nvml=StrictNvml([gpu]))
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    output = tmp_path / exp.path
    # Beside the tests running alongside, not busy: busy, a family that repeats its runs
    # itself would have to report its precision (training does).
    quiet = ContentionSettings(max_other_cpus=1000.0)
    settings = dataclasses.replace(family.settings({}, None), contention=quiet)
    assert measurement.run(exp, settings, str(output), context=JobContext("toy")) == "ok"
    written = load_record(output)
    conditions = written["conditions"]
    assert conditions["gpu_state"]["status"] == "ok"
    assert conditions["gpu_state"]["gpus"][H200]["sm_clock_mhz"]["max"] == 1980
    assert conditions["cpu_clock"]["cpus"] == sorted(os.sched_getaffinity(0))
    # A general validator reads the schema as accelbench does (the toy family's included).
    errors = jsonschema.Draft202012Validator(record.record_schema()).iter_errors(written)
    assert [error.message for error in errors] == []

"""What the GPUs did while an experiment was measured: their clocks, power, temperature and
why their clocks were held back, from NVML (package nvidia-ml-py).

A GPU's time for the same work moves with its SM clock, and the clock moves with the
board's power limit, its temperature and the driver's policies: on an H200 a bfloat16
GEMM at n = 8192 drew the board to its 700 W limit within two seconds and ran power-capped
from then on, its SM clock at 1425-1530 MHz against the 1980 MHz it boosts to. So
every GPU record keeps, per GPU (by NVML's UUID), over its measurement:

- the SM and memory clocks and the board's power (min, median, max), and its temperature,
  each over the readings taken while the GPU was busy (its clock-event reasons without
  gpu_idle: the gaps between runs, each run's start and its checks on the CPU idle it);
- the enforced power limit;
- the clock-event reasons seen (nvmlDeviceGetCurrentClocksEventReasons, a bitmask, named as
  REASONS names them);
- `throttled_s`: how far NVML's cumulative violation counters (nvmlDeviceGetViolationStatus,
  nanoseconds) advanced from the start to the end, per policy (VIOLATIONS).

The readings are taken by a process of their own every PERIOD_S throughout the
measurement (GpuWatch), not between the runs: NVML keeps no history of the clocks on an
H200 (nvmlDeviceGetSamples answers NotFound for NVML_PROCESSOR_CLK_SAMPLES and
NVML_MEMORY_CLK_SAMPLES) and 119 power samples, 2.4 s at 20 ms, so readings between runs
would see the idle gap and the last seconds of each run only. Where the driver keeps
samples (power, on an H200) those taken while the GPU was busy give the figure instead of
the readings; the record names which (`source`). The process that forks the runs must
not touch the CUDA driver (a forked child could not use CUDA); NVML is not CUDA, and the
sampling process is forked before the runs and asks NVML alone.

A reading is eight NVML calls of 0.01 to 0.4 ms (H200, driver 580). Beside a launch-bound
op there (7 us a launch), readings every 0.1 s left its time within the host's own swing,
7 to 10 us from run to run watched or not (over 8 alternating runs, median 7.3 us watched
and 9.0 us alone), and a float16 GEMM at n = 4096 within 1% (650 to 655 TFLOP/s watched,
655 to 656 alone).

Nothing here may stop a measurement: a call NVML does not support here (NotSupported,
NoPermission, a function this nvidia-ml-py or driver lacks) leaves its field null, with
the reason in the GPU's `unreadable`; NVML missing altogether, or a sampling process that
died or stopped answering, gives a section "unavailable" with the reason.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import importlib
import itertools
import json
import operator
import os
import select
import signal
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from accelbench.measuring.energy import nvml_handles, nvml_text
from accelbench.measuring.sections import GpuReport, GpuStateSection
from accelbench.platform.host_cpus import Figure
from accelbench.platform.processes import die_with_parent, exit_text

STATUSES = ("ok", "unavailable")
PERIOD_S = 0.1
# How long a sampling process is given to answer once told to stop.
STOP_TIMEOUT_S = 10.0
METHOD = "nvml readings every {period:g} s"
# The bits of nvmlClocksEventReason* (nvml.h; nvmlClocksThrottleReason* before driver 535).
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
GPU_IDLE = 0x1
# Reasons by which the board slows itself down, beyond the power limit it was given: too
# hot, or told by its hardware (an external power brake, an over-current or over-heat input).
SLOWDOWNS = (
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)
# The names nvidia-ml-py gives the clock-event reasons call, the driver's current name first:
# driver 535 renamed it, and nvidia-ml-py 12 and 13 keep both.
REASON_FUNCTIONS = (
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
)
# throttled_s key -> NVML's performance policy: time the clocks were held below what the
# work asked by the power limit, temperature, the board's own limit, or voltage reliability.
VIOLATIONS = {
    "power": "NVML_PERF_POLICY_POWER",
    "thermal": "NVML_PERF_POLICY_THERMAL",
    "board_limit": "NVML_PERF_POLICY_BOARD_LIMIT",
    "reliability": "NVML_PERF_POLICY_RELIABILITY",
}
# Figure -> (how it is read now, its argument, NVML's sampling type, its unit per NVML unit).
FIGURES = {
    "sm_clock_mhz": ("nvmlDeviceGetClockInfo", "NVML_CLOCK_SM", "NVML_PROCESSOR_CLK_SAMPLES", 1.0),
    "memory_clock_mhz": (
        "nvmlDeviceGetClockInfo",
        "NVML_CLOCK_MEM",
        "NVML_MEMORY_CLK_SAMPLES",
        1.0,
    ),
    "power_w": ("nvmlDeviceGetPowerUsage", None, "NVML_TOTAL_POWER_SAMPLES", 1e-3),
}
# Where a figure came from: NVML's own samples, or the readings every PERIOD_S.
SOURCES = ("samples", "readings")
# The sampleValue member of each NVML_VALUE_TYPE_* (0 = double, 1 = unsigned int, ...).
VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


class GpuStateUnavailable(RuntimeError):
    """NVML cannot be asked about the measurement's GPUs here; the message says why."""


def reason_names(mask: int) -> list[str]:
    """The clock-event reasons of a bitmask, by name; a bit this code does not know, in hex."""
    bits = [1 << place for place in range(mask.bit_length()) if mask >> place & 1]
    return [REASONS.get(bit, f"{bit:#x}") for bit in bits]


def unavailable(reason: str) -> GpuStateSection:
    """The section of a measurement whose GPUs NVML could not tell of."""
    return {"status": "unavailable", "reason": reason}


def watched_gpus(count: int, visible: str | None) -> range:
    """The CUDA devices a process of an experiment on `count` GPUs watches: all of them, or as
    many as CUDA_VISIBLE_DEVICES (`visible`) names where it names fewer (a launched rank
    that sees only its own GPU)."""
    if visible is None:
        return range(count)
    return range(min(count, len([name for name in visible.split(",") if name.strip()])))


def _now_us() -> int:
    """The time in NVML's sample timestamps: microseconds of the Unix clock."""
    return time.time_ns() // 1000


@dataclass(frozen=True)
class _Reading:
    at_us: int
    busy: bool
    figures: dict[str, float | None]  # FIGURES and temperature_c, in the record's units
    reasons: int | None


def _spread(values: list[float], source: str | None = None) -> Figure | None:
    if not values:
        return None
    found: Figure = {
        "min": min(values),
        "median": statistics.median(values),
        "max": max(values),
        "samples": len(values),
    }
    if source:
        found["source"] = source
    return found


class _Gpu:
    """One GPU's readings, samples and violation counters over a measurement."""

    def __init__(self, nvml, handle) -> None:
        self.nvml = nvml
        self.handle = handle
        self.unreadable: dict[str, str] = {}
        self.uuid = nvml_text(nvml.nvmlDeviceGetUUID(handle))
        self.reason_functions = [name for name in REASON_FUNCTIONS if hasattr(nvml, name)]
        limit = self._ask("power_limit_w", "nvmlDeviceGetEnforcedPowerLimit")
        self.power_limit_w = None if limit is None else limit * 1e-3
        self.violations_at_start = self._violations()
        self.readings: list[_Reading] = []
        self.samples: dict[str, list[tuple[int, float]]] = {name: [] for name in FIGURES}
        # Only samples taken after the start count: the driver's buffer holds older ones.
        self.seen_us = {name: self._latest_sample(name) for name in FIGURES}

    def _ask(self, field: str, function: str, *constants: str | None):
        """NVML's answer to `function(handle, *constants)`, or None with the reason kept as the
        field's (the first reason only: a field read later stays read)."""
        call = getattr(self.nvml, function, None)
        arguments = [getattr(self.nvml, name, None) for name in constants if name]
        if call is None or None in arguments:
            missing = function if call is None else ", ".join(c for c in constants if c)
            self.unreadable.setdefault(field, f"this nvidia-ml-py has no {missing}")
            return None
        try:
            return call(self.handle, *arguments)
        except Exception as err:  # NVMLError_NotSupported, _NoPermission, _FunctionNotFound...
            self.unreadable.setdefault(field, f"{function}: {type(err).__name__}: {err}")
            return None

    def _violations(self) -> dict[str, int | None]:
        found = {}
        for name, policy in VIOLATIONS.items():
            status = self._ask(f"throttled_s.{name}", "nvmlDeviceGetViolationStatus", policy)
            found[name] = None if status is None else status.violationTime
        return found

    def _sampled(self, name: str, since_us: int) -> list[tuple[int, float]]:
        """NVML's samples of a figure taken after `since_us`; none where it keeps none."""
        _, _, sampling, scale = FIGURES[name]
        call = getattr(self.nvml, "nvmlDeviceGetSamples", None)
        kind = getattr(self.nvml, sampling, None)
        if call is None or kind is None:
            return []
        try:
            value_type, samples = call(self.handle, kind, since_us)
        except Exception:  # NotFound: none since; NotSupported: the readings stand in
            return []
        member = VALUE_MEMBERS[value_type]
        return [
            (sample.timeStamp, getattr(sample.sampleValue, member) * scale) for sample in samples
        ]

    def _latest_sample(self, name: str) -> int:
        return max((at for at, _ in self._sampled(name, 0)), default=0)

    def _reasons(self) -> int | None:
        """The clock-event reasons now, by the newer call while this driver answers it."""
        while self.reason_functions:
            found = self._ask("clock_event_reasons", self.reason_functions[0])
            if found is not None or len(self.reason_functions) == 1:
                return found
            self.reason_functions.pop(0)  # a driver before 535 has the older name only
        self.unreadable.setdefault(
            "clock_event_reasons", "this nvidia-ml-py has neither " + " nor ".join(REASON_FUNCTIONS)
        )
        return None

    def poll(self) -> None:
        figures = {}
        for name, (function, argument, _, scale) in FIGURES.items():
            value = self._ask(name, function, argument)
            figures[name] = None if value is None else value * scale
        figures["temperature_c"] = self._ask(
            "temperature_c", "nvmlDeviceGetTemperature", "NVML_TEMPERATURE_GPU"
        )
        reasons = self._reasons()
        # Without the reasons, idle cannot be told from busy: every reading counts.
        busy = reasons is None or not reasons & GPU_IDLE
        self.readings.append(_Reading(_now_us(), busy, figures, reasons))
        for name in FIGURES:
            found = self._sampled(name, self.seen_us[name])
            if found:
                self.samples[name].extend(found)
                self.seen_us[name] = max(at for at, _ in found)

    def _busy_spans(self) -> list[tuple[int, int]]:
        """The stretches between two readings that both found the GPU busy."""
        return [
            (before.at_us, after.at_us)
            for before, after in itertools.pairwise(self.readings)
            if before.busy and after.busy
        ]

    def _figure(self, name: str, spans: list[tuple[int, int]]) -> Figure | None:
        """A figure over the busy stretches: NVML's samples in them, else the busy readings."""
        starts = [start for start, _ in spans]

        def in_a_span(at: int) -> bool:
            index = bisect.bisect_right(starts, at) - 1
            return index >= 0 and at <= spans[index][1]

        sampled = [value for at, value in self.samples[name] if in_a_span(at)]
        if sampled:
            return _spread(sampled, "samples")
        busy = [r.figures[name] for r in self.readings if r.busy and r.figures[name] is not None]
        return _spread(busy, "readings")

    def record(self) -> GpuReport:
        """The GPU's part of the section; the violation counters are read now, at the end."""
        spans = self._busy_spans()
        busy = [reading for reading in self.readings if reading.busy]
        temperatures = [r.figures["temperature_c"] for r in busy]
        temperatures = [value for value in temperatures if value is not None]
        masks = [reading.reasons for reading in busy if reading.reasons is not None]
        unread_reasons = not masks and "clock_event_reasons" in self.unreadable
        at_start, at_end = self.violations_at_start, self._violations()
        throttled = {
            name: None
            if at_start[name] is None or at_end[name] is None
            else (at_end[name] - at_start[name]) * 1e-9
            for name in VIOLATIONS
        }
        found: GpuReport = {
            "sm_clock_mhz": self._figure("sm_clock_mhz", spans),
            "memory_clock_mhz": self._figure("memory_clock_mhz", spans),
            "power_w": self._figure("power_w", spans),
            "power_limit_w": self.power_limit_w,
            "temperature_c": (
                {"min": min(temperatures), "max": max(temperatures)} if temperatures else None
            ),
            "clock_event_reasons": (
                None if unread_reasons else reason_names(functools.reduce(operator.or_, masks, 0))
            ),
            "throttled_s": throttled,
            "readings": len(self.readings),
            "busy_readings": len(busy),
            "busy_s": sum(end - start for start, end in spans) * 1e-6,
            "unreadable": {},  # below: why each field left None is None
        }
        unknown = {name for name, value in found.items() if value is None}
        unknown |= {f"throttled_s.{name}" for name, value in throttled.items() if value is None}
        found["unreadable"] = {
            field: why for field, why in self.unreadable.items() if field in unknown
        }
        return found


class Sampler:
    """NVML opened on the measurement's GPUs (CUDA indices `gpus`, mapped to NVML's as the
    energy meter maps them), read at each `poll`, summed up by `section`.

    `visible` and `order` default to CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER.
    """

    def __init__(
        self,
        gpus: Sequence[int],
        nvml=None,
        visible: str | None = None,
        order: str | None = None,
        period_s: float = PERIOD_S,
    ) -> None:
        if visible is None:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if order is None:
            order = os.environ.get("CUDA_DEVICE_ORDER")
        try:
            self.nvml = nvml or importlib.import_module("pynvml")
        except ImportError as err:
            raise GpuStateUnavailable(f"nvidia-ml-py is not installed ({err})") from None
        try:
            self.nvml.nvmlInit()
        except Exception as err:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
            raise GpuStateUnavailable(f"NVML cannot start: {err}") from None
        try:
            handles = nvml_handles(self.nvml, gpus, visible, order)
            self.gpus = [_Gpu(self.nvml, handle) for handle in handles]
        except Exception as err:  # EnergyUnavailable's words, or an NVMLError looking them up
            self.nvml.nvmlShutdown()
            raise GpuStateUnavailable(f"NVML cannot find the measurement's GPUs: {err}") from None
        self.period_s = period_s
        self.started = time.monotonic()

    def poll(self) -> None:
        for gpu in self.gpus:
            gpu.poll()

    def close(self) -> None:
        self.nvml.nvmlShutdown()

    def section(self) -> GpuStateSection:
        """The record's `conditions.gpu_state`: per GPU, by UUID, what its readings showed."""
        return {
            "status": "ok",
            "reason": None,
            "method": METHOD.format(period=self.period_s),
            "period_s": self.period_s,
            "seconds": time.monotonic() - self.started,
            "gpus": {gpu.uuid: gpu.record() for gpu in self.gpus},
        }


def _told_to_stop(stop_fd: int, period_s: float) -> bool:
    """Wait up to one period for the word to stop."""
    return bool(select.select([stop_fd], [], [], period_s)[0])


def _sample_until_stopped(
    stop_fd: int, gpus: Sequence[int], nvml, period_s: float
) -> GpuStateSection:
    """The sampling process's work: read every period until told to stop, once more, then
    the section."""
    try:
        sampler = Sampler(gpus, nvml, period_s=period_s)
    except GpuStateUnavailable as err:
        return unavailable(str(err))
    try:
        sampler.poll()
        while not _told_to_stop(stop_fd, period_s):
            sampler.poll()
        sampler.poll()
        return sampler.section()
    finally:
        with contextlib.suppress(Exception):  # the readings are in: a failed shutdown can't
            sampler.close()  # change them, and the process ends anyway


class GpuWatch:
    """A process of its own that reads NVML on the GPUs `gpus` every `period_s` from its start
    until the watch is stopped (on leaving the `with` block); `section` is then the record's
    `conditions.gpu_state`.

    Forked, not a thread: the process that forks the runs must keep to one thread (OpenMP
    and NVML's own locks do not survive a fork taken while another thread holds them).
    """

    def __init__(self, gpus: Sequence[int], nvml=None, period_s: float = PERIOD_S) -> None:
        self.section: GpuStateSection | None = None
        sys.stdout.flush()
        sys.stderr.flush()
        opened: list[int] = []
        try:
            opened += os.pipe()
            opened += os.pipe()
            self.pid = os.fork()
        except OSError as err:  # out of processes or files: the measurement goes on without
            for fd in opened:
                os.close(fd)
            self.section = unavailable(f"the GPU watch's process could not start: {err}")
            return
        stop_read, self._stop, self._answer, answer_write = opened
        if self.pid == 0:  # the sampling process
            os.close(self._stop)
            os.close(self._answer)
            _sampling_process(stop_read, answer_write, gpus, nvml, period_s)
        os.close(stop_read)
        os.close(answer_write)

    def __enter__(self) -> GpuWatch:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def stop(self) -> GpuStateSection:
        """Tell the sampling process to stop; its section, or why there is none."""
        if self.section is not None:
            return self.section
        with contextlib.suppress(BrokenPipeError):  # a sampling process that died: said below
            os.write(self._stop, b"stop")
        os.close(self._stop)
        answer = _read_until(self._answer, time.monotonic() + STOP_TIMEOUT_S)
        os.close(self._answer)
        if answer is None:
            os.kill(self.pid, signal.SIGKILL)
        _, status = os.waitpid(self.pid, 0)
        if answer:
            self.section = json.loads(answer)
        elif answer is None:
            self.section = unavailable(
                f"the GPU watch's process did not answer within {STOP_TIMEOUT_S:g} s"
            )
        else:
            ended = exit_text(os.waitstatus_to_exitcode(status))
            self.section = unavailable(f"the GPU watch's process {ended} without an answer")
        return self.section


def _sampling_process(
    stop_fd: int, answer_fd: int, gpus: Sequence[int], nvml, period_s: float
) -> None:
    """The body of the forked sampling process: it never returns."""
    code = 1
    try:
        die_with_parent()
        try:
            section = _sample_until_stopped(stop_fd, gpus, nvml, period_s)
        except Exception as err:  # the record says the watch failed; the measurement goes on
            section = unavailable(f"the GPU watch failed: {type(err).__name__}: {err}")
        with os.fdopen(answer_fd, "w") as pipe:
            json.dump(section, pipe)
        code = 0
    finally:
        os._exit(code)


def _read_until(fd: int, deadline: float) -> bytes | None:
    """Everything written to `fd` until its writer closed it; None if that is not by
    `deadline`."""
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)

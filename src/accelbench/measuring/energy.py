"""Energy of a measured window: NVML's total-energy counter on NVIDIA GPUs, RAPL on CPUs.

Both are cumulative counters read at the start and at the end of a window;
the difference is the energy the devices used in it. Nothing is estimated: a
device whose counter cannot be read gets a record section that says
"unavailable" and why.

- NVML (`nvmlDeviceGetTotalEnergyConsumption`, package nvidia-ml-py): millijoules
  since the driver was loaded, per GPU, for every GPU the job uses (CUDA's
  device order mapped to NVML's through CUDA_VISIBLE_DEVICES). The counter is
  updated only every 20-100 ms, so a reading may be that old: a window shorter
  than MIN_PERIODS updates is flagged "too_short" and its numbers are not
  reported as measurements.
- RAPL (`/sys/class/powercap/intel-rapl:*`): microjoules of each package and its
  DRAM where the kernel exposes them (AMD's packages appear there too, without
  DRAM); a counter wraps at its `max_energy_range_uj`. Since Linux 5.10 only
  root may read `energy_uj`. The package is the whole socket, shared with
  whatever else runs on it, which the contention guard watches.

The energy window is separate from the timing: after the timed samples, the
same work is repeated for at least `min_window_s` and MIN_PERIODS counter updates
(planned from the median time of one call, then topped up at the window's own rate),
so the timing is untouched and the window spans enough counter updates; the
first `window_runs` runs of a measurement take one each. An idle baseline (power
with nothing running) is measured before the first job's work and kept per host
(BASELINE_MAX_AGE_S): measured again before every job, it would cost a GPU job a
second and read a device still warm from the job before. "Above idle" energy
subtracts it over the window.

A counter tells energy only to within one update at each end of a window (and of the
baseline): `window_resolution` derives how much. Every energy metric carries that
resolution and an interval at least as wide; an energy above idle below it, which a short,
launch-bound call gives, is recorded as an upper bound, never as a number (`metrics`).
"""

from __future__ import annotations

import importlib
import json
import math
import os
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from accelbench.measuring import statistics
from accelbench.measuring.sections import EnergySection, EnergyWindow, Metric
from accelbench.measuring.settings import EnergySettings, RunSettings, Settings

NVML_METHOD = "nvml total-energy counter"
RAPL_METHOD = "rapl powercap"
POWERCAP = Path("/sys/class/powercap")
# Worst-case update periods: NVML's counter every 20-100 ms, RAPL's about every 1 ms.
NVML_PERIOD_S = 0.1
RAPL_PERIOD_S = 0.001
NVML_RANGE = 2**64  # an unsigned 64-bit count of millijoules: it does not wrap in practice
# A window (or the baseline) must span this many counter updates: a reading may be one
# update old at either end, so the energy is then within about 2 / MIN_PERIODS.
MIN_PERIODS = 10
MAX_CALLS = 1_000_000
STATUSES = ("ok", "too_short", "unavailable")
# What a window repeats: calls (of a kernel or a workload) or training steps.
WORK_UNITS = ("call", "step")
# The suffix of the energy metrics that subtract the idle baseline.
ABOVE_IDLE = "_above_idle"
# How long an idle baseline serves the jobs after it on this host.
BASELINE_MAX_AGE_S = 600.0


@dataclass(frozen=True)
class Clock:
    """The wall clock windows are timed with and the sleep of the idle baseline."""

    now: Callable[[], float] = time.perf_counter
    sleep: Callable[[float], None] = time.sleep


CLOCK = Clock()


class EnergyUnavailable(RuntimeError):
    """No energy counter can be read here; the message says why (it goes into the record)."""


@dataclass(frozen=True)
class Counter:
    """One cumulative energy counter: how to read it, its wrap range and its unit in joules."""

    name: str
    read: Callable[[], int]
    wraps_at: int
    joules_per_count: float


@dataclass
class Meter:
    """Counters read together; `method` names them as the record does."""

    method: str
    counters: list[Counter]
    period_s: float
    close: Callable[[], None] = lambda: None

    def read(self) -> list[int]:
        try:
            return [counter.read() for counter in self.counters]
        except Exception as err:  # a counter that stopped answering (NVMLError, OSError)
            raise EnergyUnavailable(
                f"reading the energy counters failed: {type(err).__name__}: {err}"
            ) from err

    def joules(self, before: Sequence[int], after: Sequence[int]) -> float:
        """Energy between two readings, each counter's wrap undone (at most one per window)."""
        total = 0.0
        for counter, start, end in zip(self.counters, before, after, strict=True):
            delta = end - start
            if delta < 0:
                delta += counter.wraps_at
            total += delta * counter.joules_per_count
        return total

    @property
    def min_seconds(self) -> float:
        return MIN_PERIODS * self.period_s


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


def rapl_meter(root: Path = POWERCAP, read: Callable[[Path], int] = _read_int) -> Meter:
    """The package and DRAM counters of every CPU package under `root` (sysfs powercap).

    Core and uncore zones lie inside their package and psys covers the platform,
    so they are left out: adding them would count energy twice.
    """
    if not root.is_dir():
        raise EnergyUnavailable(f"no RAPL powercap interface here ({root} does not exist)")
    zones = [path for path in sorted(root.glob("intel-rapl:*")) if (path / "name").is_file()]
    chosen = []
    for zone in zones:
        name = (zone / "name").read_text().strip()
        parent = zone.parent / zone.name.rsplit(":", 1)[0] if zone.name.count(":") == 2 else None
        if parent is None and name.startswith("package"):
            chosen.append((name, zone))
        elif parent is not None and name == "dram":
            package = (parent / "name").read_text().strip() if (parent / "name").is_file() else ""
            chosen.append((f"{package} dram".strip(), zone))
    if not chosen:
        raise EnergyUnavailable(f"no RAPL package zone under {root}")
    counters = []
    for name, zone in chosen:
        try:
            read(zone / "energy_uj")
            wraps_at = read(zone / "max_energy_range_uj")
        except OSError as err:
            hint = (
                " (only root may read RAPL counters since Linux 5.10)"
                if isinstance(err, PermissionError)
                else ""
            )
            raise EnergyUnavailable(
                f"RAPL counter {zone / 'energy_uj'} cannot be read: {err.strerror or err}{hint}"
            ) from None
        counters.append(Counter(name, lambda path=zone / "energy_uj": read(path), wraps_at, 1e-6))
    names = ", ".join(counter.name for counter in counters)
    return Meter(f"{RAPL_METHOD} ({names})", counters, RAPL_PERIOD_S)


def nvml_text(value: str | bytes) -> str:
    """A name NVML returned: bytes from older nvidia-ml-py releases, text from newer ones."""
    return value.decode() if isinstance(value, bytes) else value


def nvml_handles(nvml, gpus: Sequence[int], visible: str | None, order: str | None) -> list:
    """Handles of the GPUs CUDA numbers `gpus` (0, 1, ...) in this process.

    CUDA_VISIBLE_DEVICES names them by UUID or by index; an index is NVML's index
    when CUDA orders by PCI bus (CUDA_DEVICE_ORDER=PCI_BUS_ID), or when all GPUs
    are alike (CUDA's default order, fastest first, then ties by PCI bus).
    """
    total = nvml.nvmlDeviceGetCount()
    names = visible.split(",") if visible is not None else [str(i) for i in range(total)]
    names = [name.strip() for name in names if name.strip()]
    if not gpus or max(gpus) >= len(names):
        raise EnergyUnavailable(
            f"CUDA devices {list(gpus)} used, but CUDA_VISIBLE_DEVICES={visible!r} "
            f"and NVML finds {total} GPU(s)"
        )
    handles = []
    for name in (names[index] for index in gpus):
        if name.startswith(("GPU-", "MIG-")):
            handles.append(nvml.nvmlDeviceGetHandleByUUID(name))
            continue
        if order != "PCI_BUS_ID":
            models = {
                nvml_text(nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(i)))
                for i in range(total)
            }
            if len(models) > 1:
                raise EnergyUnavailable(
                    f"CUDA's device order is not NVML's on a node with different GPUs "
                    f"({', '.join(sorted(models))}); set CUDA_DEVICE_ORDER=PCI_BUS_ID"
                )
        handles.append(nvml.nvmlDeviceGetHandleByIndex(int(name)))
    return handles


def nvml_meter(
    gpus: Sequence[int],
    nvml=None,
    visible: str | None = None,
    order: str | None = None,
) -> Meter:
    """The total-energy counters of the CUDA devices `gpus` of this process, through NVML.

    `visible` and `order` default to CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER.
    """
    if visible is None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if order is None:
        order = os.environ.get("CUDA_DEVICE_ORDER")
    try:
        nvml = nvml or importlib.import_module("pynvml")
    except ImportError as err:
        raise EnergyUnavailable(f"nvidia-ml-py is not installed ({err})") from None
    try:
        nvml.nvmlInit()
    except Exception as err:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        raise EnergyUnavailable(f"NVML cannot start: {err}") from None
    try:
        counters = []
        for handle in nvml_handles(nvml, gpus, visible, order):
            uuid = nvml_text(nvml.nvmlDeviceGetUUID(handle))
            try:
                nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
            except Exception as err:  # NVMLError_NotSupported before Volta, on MIG, ...
                raise EnergyUnavailable(
                    f"NVML has no total-energy counter for {uuid}: {err}"
                ) from None
            counters.append(
                Counter(
                    uuid,
                    lambda handle=handle: nvml.nvmlDeviceGetTotalEnergyConsumption(handle),
                    NVML_RANGE,
                    1e-3,
                )
            )
    except EnergyUnavailable:
        nvml.nvmlShutdown()
        raise
    except Exception as err:  # an NVMLError looking a GPU up
        nvml.nvmlShutdown()
        raise EnergyUnavailable(f"NVML cannot find the job's GPUs: {err}") from None
    names = ", ".join(counter.name for counter in counters)
    return Meter(f"{NVML_METHOD} ({names})", counters, NVML_PERIOD_S, close=nvml.nvmlShutdown)


def open_meter(is_gpu: bool, gpus: Sequence[int], nvml=None, powercap: Path = POWERCAP) -> Meter:
    """The meter of an experiment's devices: NVML over its GPUs (CUDA indices), else RAPL
    over the CPU packages."""
    return nvml_meter(gpus, nvml) if is_gpu else rapl_meter(powercap)


@dataclass(frozen=True)
class Baseline:
    watts: float
    seconds: float
    measured_at: float = 0.0  # time.time() when it was measured

    def age(self) -> float:
        return max(0.0, time.time() - self.measured_at)


# Idle power per meter method, remembered by the process (a forked run inherits it).
BASELINES: dict[str, Baseline] = {}


def baseline_file() -> Path:
    """Where this host's idle baselines are kept, per user and meter, for the jobs after."""
    name = f"accelbench-idle-{os.getuid()}-{socket.gethostname()}.json"
    return Path(tempfile.gettempdir()) / name


def _kept_baselines(path: Path) -> dict[str, Baseline]:
    try:
        kept = json.loads(path.read_text())
        return {method: Baseline(**found) for method, found in kept.items()}
    except (OSError, ValueError, TypeError):
        return {}


def _keep_baseline(path: Path, method: str, idle: Baseline) -> None:
    kept = {name: asdict(found) for name, found in _kept_baselines(path).items()}
    kept[method] = asdict(idle)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        partial.write_text(json.dumps(kept))
        partial.replace(path)
    except OSError:  # a read-only or full temporary directory: this process keeps it
        partial.unlink(missing_ok=True)


def baseline(meter: Meter, seconds: float, path: Path | None = None) -> Baseline:
    """The devices' power with nothing running, over at least MIN_PERIODS counter updates:
    the one kept for this meter on this host if it is younger than BASELINE_MAX_AGE_S,
    else measured now and kept (`path`: where; None keeps it in this process only)."""
    kept = BASELINES.get(meter.method) or (_kept_baselines(path) if path else {}).get(meter.method)
    if kept is None or kept.age() > BASELINE_MAX_AGE_S:
        seconds = max(seconds, meter.min_seconds)
        before, started, at = meter.read(), CLOCK.now(), time.time()
        CLOCK.sleep(seconds)
        after, elapsed = meter.read(), CLOCK.now() - started
        kept = Baseline(meter.joules(before, after) / elapsed, elapsed, at)
        if path is not None:
            _keep_baseline(path, meter.method, kept)
    BASELINES[meter.method] = kept
    return kept


@dataclass(frozen=True)
class Window:
    """One energy window: joules over seconds for `calls` repetitions of the work."""

    joules: float
    seconds: float
    calls: int

    def as_record(self) -> EnergyWindow:
        return {"joules": self.joules, "seconds": self.seconds, "calls": self.calls}


def planned_calls(min_window_s: float, seconds_per_call: float) -> int:
    """Repetitions that last at least `min_window_s` at the timed median per call."""
    if not seconds_per_call > 0 or not math.isfinite(seconds_per_call):
        return 1
    return max(1, min(MAX_CALLS, math.ceil(min_window_s / seconds_per_call)))


def measure_window(
    meter: Meter,
    work: Callable[[], object],
    calls: int,
    synchronize: Callable[[], None] = lambda: None,
    min_seconds: float = 0.0,
) -> Window:
    """Run `work` `calls` times between two readings of the meter, devices synchronised,
    then more, at the rate the window has shown, until it has lasted `min_seconds`.

    The planned count comes from the timed median, which calls run back to back need not
    repeat: on an H200, windows planned for 1 s lasted 0.90 to 1.0 s, under the ten
    updates of NVML's counter that make a measurement.
    """
    synchronize()
    before, started = meter.read(), CLOCK.now()
    done = 0
    while True:
        for _ in range(calls):
            work()
        done += calls
        synchronize()
        seconds = CLOCK.now() - started
        if seconds >= min_seconds or done >= MAX_CALLS:
            break
        calls = min(MAX_CALLS - done, planned_calls(min_seconds - seconds, seconds / done))
    return Window(meter.joules(before, meter.read()), seconds, done)


def without_window(settings: Settings) -> Settings:
    """`settings` for a run that takes no energy window (beyond `window_runs`)."""
    return replace(settings, energy=replace(settings.energy, window=False))


def takes_window(settings: RunSettings, run: int) -> bool:
    """Whether run `run` (1, 2, ...) of a measurement takes an energy window."""
    return run <= settings.energy.window_runs


class Probe:
    """The energy of one experiment's windows: its meter opened once, the idle baseline
    taken once (`baseline`), then one window after each run's timing. Without a meter (or
    with energy off) every window is skipped at once and the section says why; in a run
    that takes no window (`without_window`) it has no section."""

    def __init__(
        self,
        is_gpu: bool,
        gpus: Sequence[int],
        settings: EnergySettings,
        *,
        declined: str | None = None,
    ) -> None:
        kind = "cuda" if is_gpu else "cpu"
        self.min_window_s = settings.min_window_for(kind)
        self.baseline_s = settings.baseline_for(kind)
        self.meter: Meter | None = None
        self.reason: str | None = None
        self.windows: list[Window] = []
        self.skipped = not settings.window
        if self.skipped:
            return
        if declined or not settings.enabled:
            self.reason = declined or "not measured: energy.enabled is false in the config"
            return
        try:
            self.meter = open_meter(is_gpu, gpus)
            # Before any work: a device that just worked draws more than at rest for a while.
            self.idle = baseline(self.meter, self.baseline_s, baseline_file())
        except EnergyUnavailable as err:
            self._lost(err)

    def _lost(self, err: EnergyUnavailable) -> None:
        self.close()
        self.meter = None
        self.reason = str(err)

    def __enter__(self) -> Probe:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        if self.meter is not None:
            self.meter.close()

    @property
    def reads(self) -> bool:
        """Whether this probe has a meter to read."""
        return self.meter is not None

    def decline(self, reason: str) -> None:
        """Measure no more windows (e.g. another process of the group cannot)."""
        self._lost(EnergyUnavailable(reason))

    def window(
        self,
        work: Callable[[], object],
        seconds_per_call: float,
        synchronize: Callable[[], None] = lambda: None,
    ) -> None:
        """One window of `work` repeated for at least min_window_s, and at least the ten
        counter updates a measurement needs (none without a meter)."""
        if self.meter is None:
            return
        seconds = max(self.min_window_s, self.meter.min_seconds)
        calls = planned_calls(seconds, seconds_per_call)
        try:
            self.windows.append(measure_window(self.meter, work, calls, synchronize, seconds))
        except EnergyUnavailable as err:
            self._lost(err)

    def section(self, unit: str, samples_per_unit: int | None = None) -> EnergySection | None:
        """The record's `energy` section of the windows so far (None: a run without one)."""
        if self.skipped:
            return None
        if self.meter is None or not self.windows:
            return unavailable(self.reason or "no energy window was measured")
        found = section(
            self.meter, self.windows, self.idle, unit=unit, samples_per_unit=samples_per_unit
        )
        return {**found, "min_window_s": self.min_window_s}


def unavailable(reason: str) -> EnergySection:
    """The record section of energy that could not be measured."""
    return {"status": "unavailable", "reason": reason}


def section(
    meter: Meter,
    windows: list[Window],
    idle: Baseline,
    *,
    unit: str,
    samples_per_unit: int | None = None,
) -> EnergySection:
    """The record's `energy` section: the method, the baseline and every window, with the
    status "too_short" (and the reason) if any window spans too few counter updates."""
    short = [window.seconds for window in windows if window.seconds < meter.min_seconds]
    reason = None
    if short:
        reason = (
            f"an energy window lasted {min(short):.3g} s, under {MIN_PERIODS} updates of the "
            f"counter ({meter.period_s:g} s each): its energy is not a measurement; "
            "raise energy.min_window_s"
        )
    return {
        "status": "too_short" if short else "ok",
        "reason": reason,
        "method": meter.method,
        # Each counter by name: NVML's by its GPU's UUID, RAPL's by its zone.
        "counters": [counter.name for counter in meter.counters],
        "unit": unit,
        "samples_per_unit": samples_per_unit,
        "counter_period_s": meter.period_s,
        "baseline_w": idle.watts,
        "baseline_s": idle.seconds,
        "baseline_age_s": idle.age(),
        "windows": [window.as_record() for window in windows],
    }


def combine_sections(sections: Sequence[EnergySection | None]) -> EnergySection | None:
    """The energy of R runs as one section: every run's windows; the first run's method and
    baseline; not ok (with its reason) if any run was not."""
    present = [found for found in sections if found]
    if not present:
        return None
    worst = next((found for found in present if found["status"] != "ok"), None)
    if worst is not None and worst["status"] == "unavailable":
        return worst
    combined: EnergySection = {
        **present[0],
        "windows": [window for found in present for window in found["windows"]],
    }
    if worst is not None:
        combined["status"], combined["reason"] = worst["status"], worst["reason"]
    return combined


def window_resolution(energy: EnergySection, window: EnergyWindow) -> tuple[float, float]:
    """(the window's energy, its energy above idle): each to within how many joules its
    counters can tell it, from their update period P, the window's mean power W over its
    T seconds and the idle baseline's power W0 over its T0 seconds (record section `energy`).

    A reading shows the count as it was up to P before: the window's count spans
    [t0 - a0, t1 - a1], a0 and a1 in [0, P], and differs from the energy over [t0, t1] by
    what the devices used in a0 less what they used in a1, each between 0 and about P W
    (before the window the same work ran, timed): the energy is within +-P W. The
    baseline's energy is within +-P W0 alike, its power within +-P W0 / T0, and the
    window's T seconds multiply that: the energy above idle, E - W0 T, is within
    +-(P W + P W0 T / T0). Counters summed (several GPUs, packages and DRAM, processes)
    sum their powers into W and W0, so the same bounds hold; a RAPL counter's wrap is
    undone before (Meter.joules). One count at each reading (1 mJ on NVML, 1 µJ on RAPL)
    is a thousandth of P W or less at the power any device draws, so it is left out.
    """
    period = energy["counter_period_s"]
    gross = period * window["joules"] / window["seconds"]
    idle = period * energy["baseline_w"] * window["seconds"] / energy["baseline_s"]
    return gross, gross + idle


def _window_metrics(energy: EnergySection, window: EnergyWindow) -> dict[str, tuple[float, float]]:
    """Each energy metric of one window: (its value, its resolution)."""
    unit, samples, calls = energy["unit"], energy.get("samples_per_unit"), window["calls"]
    gross_j, above_j = window_resolution(energy, window)
    gross = window["joules"] / calls
    above = (window["joules"] - energy["baseline_w"] * window["seconds"]) / calls
    found = {
        f"energy_per_{unit}": (gross, gross_j / calls),
        f"energy_per_{unit}{ABOVE_IDLE}": (above, above_j / calls),
        "mean_power": (window["joules"] / window["seconds"], gross_j / window["seconds"]),
    }
    if samples:
        found["energy_per_sample"] = (gross / samples, gross_j / calls / samples)
        found[f"energy_per_sample{ABOVE_IDLE}"] = (above / samples, above_j / calls / samples)
    return found


def metrics(energy: EnergySection | None) -> dict[str, Metric]:
    """Energy metrics of a section that is ok: per call (or step) and per sample, gross and
    above idle, and the mean power, each with `<metric>_resolution`: the largest of its
    windows' (window_resolution per call, sample or second).

    Each window is one sample, so R windows give the interval a rerun is expected to land
    in (statistics.across_runs); the counter cannot resolve less than its resolution, so
    the interval spans at least +-that (one window: exactly that), and stops at zero,
    below which no energy lies. An energy above idle under its resolution is no
    measurement (a launch-bound call's can come out negative): `<metric>_upper_bound`,
    the top of its interval and at least the resolution, stands in its place.
    """
    if not energy or energy["status"] != "ok":
        return {}
    per_window = [_window_metrics(energy, window) for window in energy["windows"]]
    combined = [
        statistics.across_runs(
            [
                statistics.summarize([found[name][0]], "W" if name == "mean_power" else "J")
                for found in per_window
            ]
        )
        for name in per_window[0]
    ]
    measured: dict[str, Metric] = {}
    for name, metric in zip(per_window[0], combined, strict=True):
        unit, median = metric["unit"], metric["median"]
        resolution = max(found[name][1] for found in per_window)
        measured[f"{name}_resolution"] = statistics.value(resolution, unit)
        high = max(metric["ci_high"], median + resolution)
        if name.endswith(ABOVE_IDLE) and median < resolution:
            measured[f"{name}_upper_bound"] = statistics.value(max(high, resolution), unit)
            continue
        low = max(0.0, min(metric["ci_low"], median - resolution))
        measured[name] = {**metric, "ci_low": low, "ci_high": high}
    return measured

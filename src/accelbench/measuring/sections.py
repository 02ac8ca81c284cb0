"""The shapes of what a measurement hands its record: the metrics, the check, the raw
samples, the conditions, the energy, what measured it, and a failed process's note.

They are dicts, as the record's JSON holds them; these types name their keys so that the
code that builds a section and the code that reads it agree. What each may hold is
declared once more, for the records themselves, by the record's JSON Schema
(accelbench.records.record.record_schema), which imports this package, not the reverse.
"""

from __future__ import annotations

from typing import NotRequired, Required, TypedDict

from accelbench.platform.host_cpus import CpuClock, Figure


class Distribution(TypedDict):
    """A metric measured as many samples (statistics.summarize, across_runs, rate_from_time):
    its statistics in its unit; `runs` and `between_run_std` where runs were combined."""

    unit: str
    n: int
    runs: NotRequired[int]
    median: float
    q1: float
    q3: float
    iqr: float
    ci_low: float
    ci_high: float
    ci_level: float
    mean: NotRequired[float]
    std: NotRequired[float]
    between_run_std: NotRequired[float]
    min: float
    max: float


class SingleValue(TypedDict):
    """A metric that is one number (statistics.value): a peak memory, a loss, a resolution."""

    unit: str
    value: float


Metric = Distribution | SingleValue
# A record's metrics: name -> its distribution or its single value.
Metrics = dict[str, Metric]


class RawSamples(TypedDict):
    """The samples behind one distribution metric, one list per run (statistics.raw_samples)."""

    unit: str
    runs: list[list[float]]


class Series(TypedDict):
    """Per-step (or per-run) values of one quantity, e.g. the loss of every training step."""

    unit: str
    values: list[float | None]


class _Checked(TypedDict, total=False):
    """What every check says: whether it passed and, against a reference, by how much."""

    passed: Required[bool]
    relative_error: float | None  # None: infinite
    tolerance: float | None
    measure: str
    reference: str
    # A kernel's result in another dtype than asked: the one it came in, and the asked.
    output_dtype: str
    dtype: str


class RoofCheck(_Checked, total=False):
    """One ceiling of a roof: its winning candidate and every candidate's rate."""

    kernel: str
    backend: str
    size: int
    candidates: dict[str, float]


class CheckSection(_Checked, total=False):
    """The record's `check`: the correctness check, and a roof's ceilings (`roofs`) with
    why a ceiling was not measured (`unmeasured`)."""

    roofs: dict[str, RoofCheck]
    unmeasured: dict[str, str]


class EnergyWindow(TypedDict):
    """One energy window: joules over seconds for `calls` repetitions of the work."""

    joules: float
    seconds: float
    calls: int


class EnergySection(TypedDict, total=False):
    """The record's `energy` (accelbench.measuring.energy): "ok" or "too_short" with the
    method, the idle baseline and each window; "unavailable" with the reason alone."""

    status: Required[str]
    reason: str | None
    method: str
    counters: list[str]
    unit: str
    samples_per_unit: int | None
    counter_period_s: float
    baseline_w: float
    baseline_s: float
    baseline_age_s: float
    min_window_s: float
    windows: list[EnergyWindow]


class TemperatureRange(TypedDict):
    min: float
    max: float


class GpuReport(TypedDict):
    """One GPU's part of the GPU state (gpu_state._Gpu.record); None where NVML did not tell,
    with the reason in `unreadable`."""

    sm_clock_mhz: Figure | None
    memory_clock_mhz: Figure | None
    power_w: Figure | None
    power_limit_w: float | None
    temperature_c: TemperatureRange | None
    clock_event_reasons: list[str] | None
    throttled_s: dict[str, float | None]  # violation policy -> seconds held back
    readings: int
    busy_readings: int
    busy_s: float
    unreadable: dict[str, str]  # field -> why it is None


class GpuStateSection(TypedDict, total=False):
    """The record's `conditions.gpu_state` (gpu_state.GpuWatch): per GPU, by NVML's UUID,
    what its readings showed; "unavailable" with the reason alone."""

    status: Required[str]
    reason: str | None
    method: str
    period_s: float
    seconds: float
    gpus: dict[str, GpuReport]


class GroupSection(TypedDict):
    """The comparison group a record was measured in (accelbench.job.group)."""

    id: str
    measurement: str
    cells: list[str]
    rounds: list[list[str]]


class ConditionsSection(TypedDict, total=False):
    """The record's `conditions`: what else the machine did (contention.Conditions and the
    guard's verdict), the CPUs used and their clocks, what the GPUs did, how precise the
    measurement ended (precision.Progress.report) and what the host's speed showed. Built
    part by part; a record's has `busy`, which the job adds last (accelbench.job.measurement)."""

    busy: bool
    window_s: float
    other_cpus: float
    workflow_cpus: float
    steal_cpus: float
    load_average_1m: float
    resolution_cpus: float
    max_other_cpus: float
    cpus_online: int
    cpu_mhz: float | None
    governor: str | None
    attempts: int
    cpus_used: list[int]
    runs: int
    reached_half_width: float | None
    half_width_target: float
    imprecise: bool
    imprecise_reason: str | None
    budget_s: float
    spent_s: float
    host_slowed_runs: int
    host_slowdown: float
    host_probe_s: float | None
    host_speed_of_best: float | None
    max_host_slowdown: float
    host_run_spread: float
    host_drift: float
    cpu_clock: CpuClock
    gpu_state: GpuStateSection
    group: GroupSection


class MeasuredBy(TypedDict):
    """What measured it: the implementation ("module:variant") and its timer."""

    implementation: str
    timer: str


class FailureNote(TypedDict):
    """What a failed process tells its supervisor (accelbench.measuring.outcome): its rank,
    status and reason, and whether the fault was a passing one."""

    rank: int
    status: str
    reason: str | None
    transient: NotRequired[bool]

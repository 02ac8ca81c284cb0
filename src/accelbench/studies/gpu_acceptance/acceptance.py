"""The GPU acceptance check: the records of the GPU grid judged against what a working
GPU half must show.

The grid (config/gpu.yaml, or the complete config/gpu-full.yaml) runs every kernel,
roof and training configuration that can go wrong on first contact with a GPU; this
module reads its records and lists every condition that fails, each with the record it
was read from. Nothing is measured here, and nothing is judged that a data sheet or the
records do not say.

The conditions:

- record: every cell of the grid has a valid record.
- status: every GPU record is "ok". A cell in a format the board cannot compute in
  (tf32 or bfloat16 before Ampere, by its data sheet) may be "unavailable".
- one_gpu: every GPU record names the same board (a roof bounds the board it was
  measured on only).
- datasheet: the board is in the data-sheet table (studies.gpu_acceptance.datasheets).
- energy: every GPU kernel, training and data science record has its energy
  measured by NVML ("ok"), on the GPU the experiment ran on: the counters' UUIDs
  are those torch gives the devices it used (provenance.accelerator.uuids).
- clocks: every GPU record holds what NVML read of the GPU it ran on during its
  measurement (conditions.gpu_state: clocks, power, throttling), and no GPU slowed
  itself down (SLOWDOWN_RULE); a roof held back by the power cap is a note.
- roof_plausible: every GPU roof lies within PLAUSIBLE of the data sheet's peak.
- above_roof: no GPU kernel lies above its roof beyond the roof's interval
  (accelbench.analysis.roof_percent, as the roofline table marks them).
- tf32: on every model trained in fp32 and tf32 on the GPU, tf32 is at least
  MIN_TF32_SPEEDUP times faster per step.
- coverage: the grid holds GPU kernels, GPU roofs in float32 and a 16-bit type and,
  where the board has TF32, a model trained in fp32 and tf32; without them the
  other conditions would pass on nothing.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypedDict

import pandas as pd

from accelbench import dtypes, grid
from accelbench.analysis import plain_tables, roof_percent, tidy
from accelbench.measuring import energy, gpu_state
from accelbench.platform.devices import names_a_gpu, parse_device
from accelbench.records.record import Record, load_record
from accelbench.studies.gpu_acceptance import datasheets as gpu_datasheets
from accelbench.studies.gpu_acceptance.datasheets import DataSheet

CONDITIONS = {
    "record": "every cell of the grid has a valid record",
    "status": "every GPU record is ok (a format the board lacks may be unavailable)",
    "one_gpu": "every GPU record was measured on the same board",
    "datasheet": "the board is in the data-sheet table",
    "energy": "NVML measured the energy of the GPU torch ran on (same UUID)",
    "clocks": "NVML read the clocks of the GPU torch ran on, and it never slowed itself down",
    "roof_plausible": "every GPU roof is a plausible fraction of the board's data sheet",
    "above_roof": "no GPU kernel lies above its roof beyond the roof's interval",
    "tf32": "tf32 beats fp32 on every GEMM-bound training configuration",
    "coverage": "the grid holds what the other conditions judge",
}
# The fraction of its data-sheet peak a measured roof may reach, (lowest, highest).
# Highest: a data-sheet peak is the board's boost clock times its units, which no code
# exceeds; 5% allows for the data sheets' rounding (3.35 TB/s, 989 TFLOPS). A float32
# GEMM above FP32 means TF32 crept in; a rate above the memory means a cache was timed.
# Lowest, by what a working library reaches and what a broken path falls to:
# - GEMM 0.30: cuBLAS reaches 60-90% at n of some thousands, less on power-capped
#   boards (T4 and L4 run at 70 W); FP16 on the CUDA cores instead of the tensor
#   cores gives a quarter (A100) to a seventh (H100) of the tensor-core peak.
# - memory 0.50: a STREAM kernel over arrays far beyond the L2 reaches 80-95% on HBM,
#   somewhat less on GDDR with ECC; half is a kernel that does not saturate the
#   memory or a byte count off by a word.
# - host link 0.25 of one direction: pinned copies reach 80-90% of a link; a card in
#   a slot of the previous PCIe generation, or on a narrower one, halves it again;
#   less is pageable memory or a copy that does not stream.
PLAUSIBLE = {
    "peak_gflops": (0.30, 1.05),
    "memory_bandwidth": (0.50, 1.05),
    "h2d_bandwidth": (0.25, 1.05),
    "d2h_bandwidth": (0.25, 1.05),
}
# TF32 tensor cores do two (L4, L40S) to eight (A100) times the FP32 rate by the data
# sheets; a GEMM-bound step keeps most of that. TF32 silently off gives 1.0 within the
# few percent between runs, which this bound separates from a working TF32.
MIN_TF32_SPEEDUP = 1.1
ENERGY_FAMILIES = ("kernel", "train", "datasci")
# Throttling seen in a GPU record's conditions.gpu_state. A board that slows itself down
# (gpu_state.SLOWDOWNS: too hot, or told so by its hardware: a power brake, an over-current
# or over-heat input), or whose thermal violation counter ran for more than
# MAX_THROTTLED_SHARE of the time it was busy, is not delivering what it is built for: the
# check fails. A power cap is not that: a GEMM at the tensor cores' rate draws an H100 or
# H200 to its 700 W limit (an H200's bfloat16 GEMM at n = 8192 ran power-capped 12.3 s of
# 12 s, its SM clock at 1425-1530 MHz against 1980 MHz), the board working as designed.
# A data sheet's peak assumes the boost clock, so a roof held back by the cap is noted
# with its clocks, which say why the roof stays below the data sheet.
MAX_THROTTLED_SHARE = 0.01
SLOWDOWN_RULE = (
    f"no slowdown reason ({', '.join(gpu_state.SLOWDOWNS)}) seen, and thermal violation "
    f"time at most {MAX_THROTTLED_SHARE:.0%} of the time the GPU was busy"
)
GRID = "the grid"  # what a coverage finding names instead of a record
# The tensor cores' 16-bit types: bfloat16 from Ampere on, float16 on every board.
SIXTEEN_BITS = dtypes.HALF_DTYPES
# The judged figures' tables: a roof against its data sheet, tf32 against fp32.
ROOF_COLUMNS = [
    "dtype",
    "roof",
    "measured",
    "data_sheet",
    "fraction",
    "low",
    "high",
    "plausible",
    "path",
]
TF32_COLUMNS = ["model", "device", "strategy", "batch", "fp32_s", "tf32_s", "speedup", "path"]


@dataclass(frozen=True)
class Finding:
    """One condition not met (or, as a note, not judged) by one record, and why."""

    condition: str
    path: str
    message: str


@dataclass
class Verdict:
    """The check's result: the board, what failed, what could not be judged, and the
    figures it judged by (roofs against the data sheet, tf32 against fp32)."""

    gpu: str | None
    datasheet: DataSheet | None
    records: int
    gpu_records: int
    findings: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    roofs: pd.DataFrame = field(default_factory=pd.DataFrame)
    tf32: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def passed(self) -> bool:
        return not self.findings

    def fail(self, condition: str, path: str, message: str) -> None:
        self.findings.append(Finding(condition, str(path), message))

    def note(self, condition: str, path: str, message: str) -> None:
        self.notes.append(Finding(condition, str(path), message))


def _bare_uuid(name: str) -> str:
    """A UUID without NVML's "GPU-"/"MIG-" prefix, in lower case, as torch writes it."""
    return name.removeprefix("GPU-").removeprefix("MIG-").lower()


def _gpu_name(record: Record) -> str | None:
    gpus = (record["provenance"].get("accelerator") or {}).get("gpus") or []
    return gpus[0] if gpus else None


def _format_of(record: Record) -> str | None:
    params = record["params"]
    return params.get("precision") or params.get("dtype")


def _torch_uuids(record: Record) -> list[str]:
    """The UUIDs of the devices torch ran the experiment on (provenance.accelerator.uuids)."""
    uuids = (record["provenance"].get("accelerator") or {}).get("uuids") or []
    return uuids[: parse_device(record["params"]["device"]).count]


def _energy_problem(record: Record) -> str | None:
    """Why a GPU record's energy is not NVML's measurement of the GPU it ran on, or None."""
    found = record.get("energy")
    if not found:
        return "the record has no energy section"
    if found["status"] != "ok":
        return f"energy {found['status']}: {found.get('reason')}"
    if not str(found.get("method", "")).startswith(energy.NVML_METHOD):
        return f"energy measured by {found.get('method')!r}, not NVML"
    counters = found.get("counters")
    if not counters:
        return "the energy section does not name its counters (the GPUs' UUIDs)"
    used = _torch_uuids(record)
    if not used:
        return "the provenance does not hold the UUIDs of torch's devices"
    measured = sorted(_bare_uuid(name) for name in counters)
    ran_on = sorted(_bare_uuid(name) for name in used)
    if measured != ran_on:
        return (
            f"NVML measured {', '.join(counters)} but torch ran on "
            f"{', '.join(used)}: the energy is another GPU's"
        )
    return None


def _gpu_state_problem(record: Record) -> str | None:
    """Why a GPU record does not hold NVML's readings of the GPU it ran on, or None."""
    found = (record.get("conditions") or {}).get("gpu_state")
    if not found:
        return "the record has no GPU state (conditions.gpu_state): its clocks are unknown"
    if found["status"] != "ok":
        return f"GPU state {found['status']}: {found.get('reason')}"
    used = _torch_uuids(record)
    if not used:
        return "the provenance does not hold the UUIDs of torch's devices"
    read = sorted(_bare_uuid(name) for name in found["gpus"])
    if read != sorted(_bare_uuid(name) for name in used):
        return (
            f"NVML read {', '.join(found['gpus'])} but torch ran on {', '.join(used)}: "
            "the clocks are another GPU's"
        )
    return None


def _held(what: str, seconds: float | None, busy: float) -> str:
    """How long `what` held the clocks back, where NVML counted it."""
    if not seconds:
        return f"{what} seen"
    return f"{what} for {seconds:.3g} s of the {busy:.3g} s it was busy"


def _throttling(record: Record) -> tuple[list[str], list[str]]:
    """What held each GPU's clocks back during the record's measurement: (slowdowns, which
    fail the check; power caps, noted on a roof), each in words with its seconds."""
    slowdowns, caps = [], []
    gpus = record["conditions"]["gpu_state"]["gpus"]
    for uuid, found in gpus.items():
        reasons = found["clock_event_reasons"] or []
        thermal, power = found["throttled_s"]["thermal"], found["throttled_s"]["power"]
        busy = found["busy_s"]
        board = f" on {uuid}" if len(gpus) > 1 else ""
        seen = [reason for reason in reasons if reason in gpu_state.SLOWDOWNS]
        if seen or (thermal or 0.0) > busy * MAX_THROTTLED_SHARE:
            said = [f"{', '.join(seen)} seen"] if seen else []
            said += [_held("thermal throttling", thermal, busy)] if thermal else []
            slowdowns.append("; ".join(said) + board)
        if "sw_power_cap" in reasons or (power or 0.0) > busy * MAX_THROTTLED_SHARE:
            caps.append(_held("sw_power_cap", power, busy) + board)
    return slowdowns, caps


def _sm_clock(record: Record) -> str:
    clocks = [
        found["sm_clock_mhz"]
        for found in record["conditions"]["gpu_state"]["gpus"].values()
        if found["sm_clock_mhz"]
    ]
    if not clocks:
        return "SM clock unknown"
    low, high = min(clock["min"] for clock in clocks), max(clock["max"] for clock in clocks)
    return f"SM clock {low:.0f}-{high:.0f} MHz"


def _judge_clocks(verdict: Verdict, path: str, record: Record) -> None:
    """The clocks condition of one ok GPU record: its GPU state is there, of its GPU, and
    shows no slowdown (SLOWDOWN_RULE); a roof's power cap is a note."""
    if problem := _gpu_state_problem(record):
        verdict.fail("clocks", path, problem)
        return
    slowdowns, caps = _throttling(record)
    roof = record["experiment"] == "roof"
    during = f"the {record['params']['dtype']} roof" if roof else "the measurement"
    if slowdowns:
        said = "; ".join(slowdowns)
        verdict.fail(
            "clocks",
            path,
            f"the GPU slowed itself down during {during}: {said}, {_sm_clock(record)}",
        )
    if roof and caps:
        said = "; ".join(caps)
        verdict.note(
            "clocks",
            path,
            f"the GPU throttled during {during}: {said}, "
            f"{_sm_clock(record)} (its power limit, not a fault)",
        )


def _roof_peak(sheet: DataSheet, metric: str, dtype: str) -> float | None:
    """The data-sheet figure a roof metric is held against, in the roof's unit."""
    if metric == "peak_gflops":
        return gpu_datasheets.gemm_peak_gflops(sheet, dtype)
    if metric == "memory_bandwidth":
        return sheet.memory_gbs
    return gpu_datasheets.host_link_per_direction_gbs(sheet)


def _judge_roofs(verdict: Verdict, frame: pd.DataFrame, paths_by_id: dict[str, str]) -> None:
    rows = frame[
        (frame["experiment"] == "roof")
        & (frame["status"] == "ok")
        & frame["device"].map(names_a_gpu).astype(bool)
    ]
    table = []
    for roof in rows.itertuples(index=False):
        path = paths_by_id[roof.id]
        for metric, (low, high) in PLAUSIBLE.items():
            measured = getattr(roof, f"{metric}_median", math.nan)
            if measured is None or not math.isfinite(measured):
                verdict.fail("roof_plausible", path, f"the roof has no {metric}")
                continue
            peak = _roof_peak(verdict.datasheet, metric, roof.dtype)
            if peak is None:
                verdict.note(
                    "roof_plausible",
                    path,
                    f"{metric} not judged: the data sheet of {verdict.datasheet.name} at hand "
                    f"gives no figure for it in {roof.dtype} "
                    "(studies/gpu_acceptance/datasheets.py)",
                )
                continue
            fraction = measured / peak
            plausible = low <= fraction <= high
            table.append(
                {
                    "dtype": roof.dtype,
                    "roof": metric,
                    "measured": measured,
                    "data_sheet": peak,
                    "fraction": fraction,
                    "low": low,
                    "high": high,
                    "plausible": plausible,
                    "path": path,
                }
            )
            if not plausible:
                verdict.fail(
                    "roof_plausible",
                    path,
                    f"{metric} {number(measured)} is {fraction:.1%} of the data sheet's "
                    f"{number(peak)} ({verdict.datasheet.name}); plausible: {low:.0%} to "
                    f"{high:.0%}",
                )
    verdict.roofs = pd.DataFrame(table, columns=ROOF_COLUMNS)


def _judge_above_roof(verdict: Verdict, frame: pd.DataFrame, paths_by_id: dict[str, str]) -> None:
    kernels = roof_percent.add_roof_percent(frame)
    above = kernels[
        (kernels["experiment"] == "kernel")
        & kernels["device"].map(names_a_gpu).astype(bool)
        & kernels["above_roof"].fillna(False).astype(bool)
    ]
    for row in above.itertuples(index=False):
        verdict.fail(
            "above_roof",
            paths_by_id[row.id],
            f"{row.roof_percent:.0f}% of its {row.roof_bound} roof, beyond the roof's interval",
        )


def _judge_tf32(verdict: Verdict, frame: pd.DataFrame, paths_by_id: dict[str, str]) -> None:
    trained = frame[
        (frame["experiment"] == "train")
        & (frame["status"] == "ok")
        & frame["device"].map(names_a_gpu).astype(bool)
        & frame["precision"].isin(["fp32", "tf32"])
    ]
    table = []
    for (model, device, strategy, batch), group in trained.groupby(
        ["model", "device", "strategy", "batch"]
    ):
        times = group.set_index("precision")["time_per_batch_median"]
        if not {"fp32", "tf32"} <= set(times.index):
            continue
        tf32_id = group.loc[group["precision"] == "tf32", "id"].iloc[0]
        path = paths_by_id[tf32_id]
        speedup = times["fp32"] / times["tf32"]
        table.append(
            {
                "model": model,
                "device": device,
                "strategy": strategy,
                "batch": batch,
                "fp32_s": times["fp32"],
                "tf32_s": times["tf32"],
                "speedup": speedup,
                "path": path,
            }
        )
        if not speedup >= MIN_TF32_SPEEDUP:
            verdict.fail(
                "tf32",
                path,
                f"tf32 {times['tf32']:.4g} s per step against fp32 {times['fp32']:.4g} s: "
                f"{speedup:.2f}x, under {MIN_TF32_SPEEDUP}x (TF32 not in use?)",
            )
    verdict.tf32 = pd.DataFrame(table, columns=TF32_COLUMNS)


def _judge_coverage(verdict: Verdict, gpu_records: dict[str, Record]) -> None:
    families = Counter(record["experiment"] for record in gpu_records.values())
    roof_dtypes = {
        record["params"]["dtype"]
        for record in gpu_records.values()
        if record["experiment"] == "roof"
    }
    if not families["kernel"]:
        verdict.fail("coverage", GRID, "the grid has no GPU kernel")
    if "float32" not in roof_dtypes:
        verdict.fail("coverage", GRID, "the grid has no GPU roof in float32")
    if not roof_dtypes & set(SIXTEEN_BITS):
        verdict.fail(
            "coverage", GRID, "the grid has no GPU roof in a 16-bit type (float16, bfloat16)"
        )
    sheet = verdict.datasheet
    if sheet is not None and gpu_datasheets.lacks_format(sheet, "tf32"):
        verdict.note("tf32", GRID, f"not judged: {sheet.name} has no TF32 by its data sheet")
    elif verdict.tf32.empty:
        verdict.fail("coverage", GRID, "the grid trains no model on the GPU in fp32 and tf32")


def _judge_records(verdict: Verdict, gpu_records: dict[str, Record]) -> None:
    """Status, one board, energy and clocks, record by record."""
    for path, record in gpu_records.items():
        board = _gpu_name(record)
        if board and board != verdict.gpu:
            verdict.fail("one_gpu", path, f"measured on {board}, the others on {verdict.gpu}")
        if record["status"] != "ok":
            form = _format_of(record)
            sheet = verdict.datasheet
            if (
                record["status"] == "unavailable"
                and sheet is not None
                and gpu_datasheets.lacks_format(sheet, form)
            ):
                verdict.note("status", path, f"{sheet.name} has no {form}: {record.get('reason')}")
            else:
                verdict.fail("status", path, f"{record['status']}: {record.get('reason')}")
            continue
        if record["experiment"] in ENERGY_FAMILIES and (problem := _energy_problem(record)):
            verdict.fail("energy", path, problem)
        _judge_clocks(verdict, path, record)


def _on_gpu(path: str) -> bool:
    """Whether a result path names a GPU device (read from the path: its record may be
    missing)."""
    cell = grid.cell_of_path(path)
    return cell is not None and names_a_gpu(cell[2].get("device"))


def evaluate(paths: Iterable[str], root: str | os.PathLike[str] = ".") -> Verdict:
    """Judge the records at `paths` (every result path of the grid, below `root`) by
    CONDITIONS; findings name the paths as given."""
    paths = [str(path) for path in paths]
    located = {str(Path(root, path)): path for path in paths}
    present = [path for path in paths if Path(root, path).is_file()]
    frame, problems = tidy.collect(str(Path(root, path)) for path in present)
    broken = {located[path]: problem for path, problem in problems}
    records = {path: load_record(Path(root, path)) for path in present if path not in broken}
    gpu_records = {
        path: record
        for path, record in records.items()
        if names_a_gpu(record["params"].get("device"))
    }
    boards = Counter(name for name in map(_gpu_name, gpu_records.values()) if name)
    gpu = boards.most_common(1)[0][0] if boards else None
    verdict = Verdict(
        gpu=gpu,
        datasheet=gpu_datasheets.datasheet_for(gpu) if gpu else None,
        records=len(paths),
        gpu_records=sum(map(_on_gpu, paths)),
    )
    for path in paths:
        if path not in present:
            verdict.fail("record", path, "no record: the run did not write it")
    for path, problem in broken.items():
        verdict.fail("record", path, problem)
    paths_by_id = {record["id"]: path for path, record in records.items()}
    _judge_records(verdict, gpu_records)
    if gpu is None:
        verdict.fail("datasheet", GRID, "no GPU record names a GPU: none ran")
        return verdict
    if verdict.datasheet is None:
        verdict.fail(
            "datasheet",
            next(iter(gpu_records)),
            f"{gpu} is not in the data-sheet table (studies/gpu_acceptance/datasheets.py): "
            "add its data sheet's peaks to judge its roofs",
        )
        return verdict
    _judge_roofs(verdict, frame, paths_by_id)
    _judge_above_roof(verdict, frame, paths_by_id)
    _judge_tf32(verdict, frame, paths_by_id)
    _judge_coverage(verdict, gpu_records)
    return verdict


def _percent(value: float) -> str:
    return f"{value:.1%}"


def number(value: float) -> str:
    """A rate as a reader compares it with a data sheet: whole units with thousands
    separated from 100 on, three significant digits below."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def render(verdict: Verdict) -> str:
    """The verdict as Markdown: the outcome, every failed condition with its record, the
    roofs against the data sheet, tf32 against fp32, what was not judged, the conditions."""
    outcome = "PASSED" if verdict.passed else f"FAILED ({len(verdict.findings)} findings)"
    sheet = verdict.datasheet
    lines = [
        f"# GPU acceptance: {outcome}",
        "",
        f"GPU: {verdict.gpu or 'none'}"
        + (f" (data sheet: {sheet.name}; {sheet.source})" if sheet else ""),
        "",
        f"Records: {verdict.records} in the grid, {verdict.gpu_records} on the GPU.",
        "",
    ]
    tables = [
        _findings_table(verdict.findings, "Failed conditions, each with its record"),
        _roofs_table(verdict.roofs),
        _tf32_table(verdict.tf32),
        _findings_table(verdict.notes, "Notes: what was not judged, and what is no fault"),
    ]
    lines += [f"{table}\n" for table in tables if table]
    lines += ["Conditions:", ""]
    lines += [f"- {name}: {text}" for name, text in CONDITIONS.items()]
    return "\n".join(lines) + "\n"


def _findings_table(findings: list[Finding], caption: str) -> str:
    if not findings:
        return ""
    display = pd.DataFrame(
        [(item.condition, item.path, item.message) for item in findings],
        columns=["condition", "record", "why"],
    )
    return plain_tables.to_markdown(display, caption, [], 3)


def _roofs_table(roofs: pd.DataFrame) -> str:
    if roofs.empty:
        return ""
    display = pd.DataFrame(
        {
            "dtype": roofs["dtype"],
            "roof": roofs["roof"],
            "measured": roofs["measured"].map(number),
            "data sheet": roofs["data_sheet"].map(number),
            "of data sheet": roofs["fraction"].map(_percent),
            "plausible": [
                f"{_percent(low)} to {_percent(high)}"
                for low, high in zip(roofs["low"], roofs["high"], strict=True)
            ],
            "judged": roofs["plausible"].map({True: "ok", False: "FAILED"}),
        }
    )
    caption = (
        "Roofs against the data sheet: GEMM in GFLOP/s, memory and host link "
        "(one direction) in GB/s"
    )
    return plain_tables.to_markdown(display, caption, [], 2)


def _tf32_table(tf32: pd.DataFrame) -> str:
    if tf32.empty:
        return ""
    display = pd.DataFrame(
        {
            "model": tf32["model"],
            "device": tf32["device"],
            "batch": tf32["batch"].astype(str),
            "fp32 s/step": tf32["fp32_s"].map("{:.4g}".format),
            "tf32 s/step": tf32["tf32_s"].map("{:.4g}".format),
            "speedup": tf32["speedup"].map("{:.2f}x".format),
        }
    )
    return plain_tables.to_markdown(
        display,
        f"tf32 against fp32: median time per step; tf32 must be {MIN_TF32_SPEEDUP}x faster",
        [],
        3,
    )


# A row of the roofs or tf32 table (ROOF_COLUMNS, TF32_COLUMNS): names, numbers, verdicts.
TableRow = dict[str, str | float | bool | None]


class VerdictJson(TypedDict):
    """acceptance.json: the verdict, and the conditions and bounds it was judged by."""

    passed: bool
    gpu: str | None
    datasheet: dict[str, str | float | tuple[str, ...] | None] | None  # DataSheet's fields
    records: int
    gpu_records: int
    findings: list[dict[str, str]]  # Finding's fields
    notes: list[dict[str, str]]
    roofs: list[TableRow]
    tf32: list[TableRow]
    conditions: dict[str, str]
    plausible: dict[str, list[float]]
    min_tf32_speedup: float


def as_json(verdict: Verdict) -> VerdictJson:
    """The verdict as plain data (acceptance.json beside the Markdown)."""
    return VerdictJson(
        passed=verdict.passed,
        gpu=verdict.gpu,
        datasheet=asdict(verdict.datasheet) if verdict.datasheet else None,
        records=verdict.records,
        gpu_records=verdict.gpu_records,
        findings=[asdict(item) for item in verdict.findings],
        notes=[asdict(item) for item in verdict.notes],
        roofs=verdict.roofs.to_dict("records"),
        tf32=verdict.tf32.to_dict("records"),
        conditions=CONDITIONS,
        plausible={metric: list(bounds) for metric, bounds in PLAUSIBLE.items()},
        min_tf32_speedup=MIN_TF32_SPEEDUP,
    )

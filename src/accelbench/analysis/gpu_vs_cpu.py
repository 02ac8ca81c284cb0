"""The answer: the best GPU result against the best CPU result of the same machine.

For every cell of work a GPU ran (a family's primary and secondary parameters less the
implementation: a kernel at a dtype and size, a data science workload at a size, a model
at a precision, strategy and batch), the fastest GPU record is set against the fastest
CPU record of the same host, over the implementations and devices of each side: how many
times faster the GPU is (CPU time / GPU time), with the interval `ratios.ratio` gives from
the two records' intervals. Once for the work alone, once with the GPU's copies in and
out (its end-to-end time; a CPU copies nothing). A parameter the CPU is measured at one
value only (a model's precision: fp32) takes that value on the CPU side, whatever the
GPU's, and the cell says so.

Records of different hosts are never paired: the same cell measured on a GPU of one
machine and the CPU of another says nothing about either machine. A GPU cell without a
CPU counterpart on its host is not compared; `Comparison.unpaired` names it and why.
Records that name no host pair with each other only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from accelbench.analysis import ratios, tidy
from accelbench.families import FAMILIES, Family
from accelbench.platform.devices import DeviceError, parse_device

# The parameter that names the code that ran: each side takes its fastest value.
IMPLEMENTATION = "backend"
# Parameters a CPU is measured at one value only: its side of a cell takes that value.
CPU_BASELINE = {"precision": "fp32"}
# The metric of a GPU record with its copies in and out: this prefix and the family's time.
END_TO_END = "end_to_end_"
COPIES = {"copies excluded": False, "copies included": True}
HOST = "host"
CELL_COLUMNS = [
    "experiment",
    "label",
    HOST,
    "copies",
    "status",
    "reason",
    "median",
    "ci_low",
    "ci_high",
    "ci_level",
    "busy",
    "imprecise",
    "gpu",
    "cpu",
    "gpu_record",
    "cpu_record",
    "baseline",
]
UNPAIRED_COLUMNS = ["experiment", "label", HOST, "reason"]


@dataclass(frozen=True)
class Comparison:
    """`cells`: one row per compared cell and copies (CELL_COLUMNS, then the parameters
    that name the cell), in reading order; `unpaired`: the GPU cells not compared."""

    cells: pd.DataFrame
    unpaired: pd.DataFrame


def work_families() -> dict[str, Family]:
    """The families whose cells have a time and a name: those a GPU can pay off for."""
    return {
        name: family
        for name, family in FAMILIES.items()
        if family.primary is not None and family.time_metric is not None
    }


def work_keys(family: Family) -> list[str]:
    """The parameters that name a cell of work of `family`: its primary and secondary
    parameters, less the implementation."""
    return [name for name in (family.primary, *family.secondary) if name != IMPLEMENTATION]


def cell_params() -> list[str]:
    """The parameters that name the cells of every family compared, each once: the columns
    of `Comparison.cells` after CELL_COLUMNS."""
    return list(
        dict.fromkeys(key for family in work_families().values() for key in work_keys(family))
    )


def is_cpu_baseline(params: Mapping[str, Any]) -> bool:
    """Whether the parameters a CPU is measured at one value only hold that value (or are
    not parameters of the cell)."""
    return all(_normal(params.get(name)) in (None, value) for name, value in CPU_BASELINE.items())


def _on_gpu(device: Any) -> bool | None:
    """True for a GPU device, False for a CPU one, None for a name that is neither."""
    try:
        return parse_device(str(device)).is_gpu
    except DeviceError:
        return None


def _normal(value: Any) -> Any:
    """A parameter value as a key: every missing value alike."""
    return None if pd.isna(value) else value


def _key(row: pd.Series, names: list[str]) -> tuple:
    return tuple(_normal(row[name]) for name in names)


def implementation(row: pd.Series, other: pd.Series | None = None) -> str:
    """What ran a side of a cell, as a sentence quotes it: the implementation, a baseline
    parameter where it differs from `other` (the other side), the threads of a CPU and the
    GPUs beyond one (the device's name where nothing else tells it)."""
    device = parse_device(str(row["device"]))
    parts = [str(row[IMPLEMENTATION])] if pd.notna(row.get(IMPLEMENTATION)) else []
    if other is not None:
        parts += [
            str(row[name])
            for name in CPU_BASELINE
            if pd.notna(row.get(name)) and row.get(name) != other.get(name)
        ]
    if not device.is_gpu:
        parts.append(f"{device.units} thread{'s' if device.units != 1 else ''}")
    elif device.units > 1:
        parts.append(f"{device.units} GPUs")
    if device.nodes > 1:
        parts.append(f"{device.nodes} nodes")
    return ", ".join(parts) or str(row["device"])


def _fastest(rows: pd.DataFrame, metric: str) -> pd.Series | None:
    """The row with the smallest median of `metric`; None where none has one."""
    column = f"{metric}_median"
    if column not in rows:
        return None
    values = rows[column].astype(float)
    values = values[values.notna()]
    return rows.loc[values.idxmin()] if len(values) else None


def _baseline_text(gpu: pd.Series, cpu: pd.Series) -> str:
    """'bf16 on the GPU vs fp32 on the CPU' where a baseline parameter differs; else ''."""
    return "; ".join(
        f"{gpu[name]} on the GPU vs {cpu[name]} on the CPU"
        for name in CPU_BASELINE
        if pd.notna(gpu.get(name)) and gpu.get(name) != cpu.get(name)
    )


def _factor_cells(
    gpu_rows: pd.DataFrame, cpu: pd.Series, metric: str, common: dict[str, Any]
) -> list[dict[str, Any]]:
    """The cell's two factors: copies excluded (time against time) and included (the GPU's
    end-to-end time against the CPU's time), each from the fastest GPU record of it."""
    cells = []
    for copies, included in COPIES.items():
        gpu_metric = END_TO_END + metric if included else metric
        gpu = _fastest(gpu_rows, gpu_metric)
        cell = dict.fromkeys(CELL_COLUMNS, math.nan) | common | {"copies": copies}
        if gpu is None:
            cell.update(
                status="unavailable",
                reason=f"no GPU record of it measured {gpu_metric} (its copies in and out)",
            )
            cells.append(cell)
            continue
        factor = ratios.ratio(ratios.stats(cpu, metric), ratios.stats(gpu, gpu_metric))
        if all(map(math.isfinite, factor)):
            cell.update(zip(("median", "ci_low", "ci_high", "ci_level"), factor, strict=True))
            cell.update(status="ok", reason=None, gpu=implementation(gpu), gpu_record=gpu["id"])
            cell.update(ratios.ratio_flags(gpu, cpu))
        else:
            reason = f"the intervals of {cpu['id']} and {gpu['id']} give no ratio (a bound <= 0)"
            cell.update(status="unavailable", reason=reason)
        cells.append(cell)
    return cells


def _why_unpaired(same: pd.DataFrame, host: Any, keys: list[str]) -> str:
    """Why a GPU cell has no CPU counterpart, from the CPU records of the same cell (`same`,
    in the CPU's baseline): none, on other hosts only, or none with a time on its host."""
    if same.empty:
        baseline = " and ".join(value for name, value in CPU_BASELINE.items() if name in keys)
        return f"no CPU record of it{f' in {baseline}' if baseline else ''}"
    here = same[_on_host(same, host)]
    if here.empty:
        hosts = ", ".join(sorted(str(name) for name in same[HOST].map(_normal).unique()))
        return f"its CPU records are of another host ({hosts})"
    statuses = ", ".join(sorted(tidy.STATUS_TEXT.get(status, status) for status in here["status"]))
    return f"its CPU records on this host hold no time ({statuses})"


def _on_host(rows: pd.DataFrame, host: Any) -> pd.Series:
    """Which of `rows` were measured on `host` (None: on a host that is not named)."""
    return rows[HOST].map(lambda name: _normal(name) == host).astype(bool)


def _by_cell(rows: pd.DataFrame, keys: list[str]) -> dict[tuple, list[Any]]:
    """The index of `rows` by the cell they measure (their values of `keys`)."""
    found: dict[tuple, list[Any]] = {}
    values = zip(*(rows[name].map(_normal) for name in keys), strict=True)
    for index, key in zip(rows.index, values, strict=True):
        found.setdefault(key, []).append(index)
    return found


def in_reading_order(rows: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """`rows` sorted by `names`, each in its reading order (tidy.ordered: precisions from
    wide to narrow)."""

    def rank(column: pd.Series) -> pd.Series:
        order = tidy.ordered(str(column.name), column)
        return column.map({value: index for index, value in enumerate(order)})

    return rows.sort_values(names, kind="stable", na_position="last", key=rank)


def _family_cells(
    rows: pd.DataFrame, family: Family
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(compared cells, unpaired GPU cells) of one family's rows."""
    keys, metric = work_keys(family), family.time_metric
    kind = rows["device"].map(_on_gpu)
    column = f"{metric}_median"
    timed = rows[column].astype(float).notna() if column in rows else False
    ran = rows[(rows["status"] == "ok") & timed]
    gpu_rows = in_reading_order(ran[kind[ran.index].eq(True)], keys)
    cpu_rows = rows[kind.eq(False)]
    baselines = cpu_rows[cpu_rows.apply(is_cpu_baseline, axis=1)] if len(cpu_rows) else cpu_rows
    cpu_cells = _by_cell(baselines, keys)
    cells, unpaired = [], []
    for _, group in gpu_rows.groupby([HOST, *keys], dropna=False, sort=False):
        first = group.iloc[0]
        host = _normal(first[HOST])
        same = baselines.loc[cpu_cells.get(_key(pd.Series({**first, **CPU_BASELINE}), keys), [])]
        found = same[_on_host(same, host) & same.index.isin(ran.index)]
        common = {"experiment": family.name, "label": tidy.row_label(first, keys), HOST: host}
        if found.empty:
            unpaired.append(common | {"reason": _why_unpaired(same, host, keys)})
            continue
        cpu = _fastest(found, metric)
        common |= {
            "cpu": implementation(cpu, first),
            "cpu_record": cpu["id"],
            "baseline": _baseline_text(first, cpu),
            **{name: first[name] for name in keys},
        }
        cells += _factor_cells(group, cpu, metric, common)
    return cells, unpaired


def compare(frame: pd.DataFrame) -> Comparison:
    """Every GPU cell of `frame` against the best CPU result of its host (module docstring);
    where the cells span several hosts, each label names its host."""
    cells, unpaired = [], []
    for name, family in work_families().items():
        rows = frame[frame["experiment"] == name]
        if len(rows):
            found, missing = _family_cells(rows, family)
            cells += found
            unpaired += missing
    compared = pd.DataFrame(cells, columns=[*CELL_COLUMNS, *cell_params()])
    if compared[HOST].nunique(dropna=False) > 1:
        compared["label"] = compared["label"] + ", host " + compared[HOST].astype(str)
    return Comparison(compared, pd.DataFrame(unpaired, columns=UNPAIRED_COLUMNS))

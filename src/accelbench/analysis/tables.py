"""Comparison tables in the style of Shi et al. (2016): rows x devices, median [95% CI].

One cell per (row, column). A cell that could not run says why (OOM, n/a,
failed) and points to a footnote with the reason, so a missing number is never
mistaken for a slow one. Rows and columns come from what was measured: a row or
column with nothing but dashes is left out (its reason in a note), and rows that
have numbers in different columns go to separate blocks, each with its own
header, so that a table is not half dashes; a dash that remains is explained in
a note. The best cell of each row (lowest time, highest speedup) is set in bold
only where its interval clears the runner-up's, and a speedup above the ideal
(more than N on N devices) is marked. Numbers keep the digits their interval
supports and no more, and a table of times is printed in the unit (s, ms, µs,
ns) that makes its middle time at least 1. LaTeX tables are split into parts
that fit the text width, with decimal points aligned, and laid out on pages as
accelbench.analysis.latex_pages says (a column or both, continued floats).

Tables: the classic one (rows x devices), the same across precisions, speedup
over a baseline device, and scaling efficiency over device counts. Each builder
returns (table of display strings, footnotes); the numbers behind the strings,
the bold cells and the caption ride along in `table.attrs` so the writers can
emit Markdown, LaTeX, HTML and a CSV of plain numbers from the same table.
"""

from __future__ import annotations

import html
import itertools
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from accelbench.analysis import ratios, tidy
from accelbench.analysis.latex_pages import (
    COLUMN_SEP_PT,
    TEXT_WIDTH_PT,
    Tabular,
    column_width,
    latex_float,
    latex_parts,
)
from accelbench.devices import DeviceError, parse_device
from accelbench.timing import CI_LEVEL, RERUN_INTERVAL

MISSING = "–"
# Columns of the CSV (long form, one line per table cell); "column" is written under the
# name of what the table's columns are (device, precision).
CSV_COLUMNS = (
    "row",
    "column",
    "status",
    "median",
    "ci_low",
    "ci_high",
    "unit",
    "best",
    "busy",
    "imprecise",
    "above_ideal",
    "reason",
)
# A number measured on a busy machine (record conditions.busy) keeps its cell, marked.
BUSY_MARK = "†"
BUSY_NOTE = (
    "measured while other processes kept the machine busy, after the retries "
    "(the number may be too slow)"
)
# A number whose rerun interval stayed wider than asked (record conditions.imprecise: the
# time budget ran out first) keeps its cell, marked.
IMPRECISE_MARK = "◊"
IMPRECISE_NOTE = (
    "less precise than asked: the interval stayed wider than the configured half-width "
    "until the measurement's time budget ran out (the summary gives each reason)"
)
# A speedup above N on N devices (efficiency above 1) is possible (caches), but suspect.
ABOVE_IDEAL_MARK = "‡"
ABOVE_IDEAL_NOTE = (
    "above the ideal (a speedup of N on N threads or GPUs, efficiency 1): "
    "caches or a slow baseline can do that; check before quoting it"
)
MISSING_NOTE = (
    f"{MISSING} no record: the cell is not in the grid, or was excluded from it "
    "(results/excluded.csv); a cell that ran and failed says so"
)
BOLD_NOTE = (
    "Bold: the best of its row, only where its interval does not overlap the "
    "runner-up's; a row without bold has no clear best."
)
# Statuses whose cell shows a bare dash: nothing was measured there.
DASH_STATUSES = ("missing", ratios.NO_BASELINE)
# What a cell that holds no number shows, and how its footnote names the cause.
CELL_TEXT = {**tidy.STATUS_TEXT, ratios.NO_BASELINE: MISSING, "too_short": "too short"}
NOTE_TEXT = {**tidy.STATUS_TEXT, ratios.NO_BASELINE: "no baseline", "too_short": "too short"}
TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
ENERGY_UNITS = (("J", 1.0), ("mJ", 1e-3), ("µJ", 1e-6), ("nJ", 1e-9))
READABLE_UNITS = {"s": TIME_UNITS, "J": ENERGY_UNITS}


@dataclass(frozen=True)
class TableSpec:
    metric: str
    title: str
    row_header: str


SPECS = {
    "train": TableSpec("time_per_batch", "Time per mini-batch", "Model"),
    "kernel": TableSpec("time", "Kernel time", "Kernel"),
    "datasci": TableSpec("time", "Data science workload time", "Workload"),
}


def _decimals(value: float) -> int:
    """Decimal places that put the last kept digit at the first significant digit of `value`."""
    return -math.floor(math.log10(abs(value)))


def shared_exponent(values: list[float]) -> int:
    """Power of ten for a group of numbers printed side by side.

    0 (plain decimals) when every finite value lies in [1e-3, 1e6), otherwise
    the largest value's power of ten, so that the mantissas of one table row
    can be compared at a glance.
    """
    finite = [abs(value) for value in values if math.isfinite(value) and value != 0]
    if all(1e-3 <= value < 1e6 for value in finite):
        return 0
    return math.floor(math.log10(max(finite)))


def format_with_ci(median: float, low: float, high: float, exponent: int | None = None) -> str:
    """`median [low, high]`, rounded to what the interval supports.

    The last digit kept is the second significant digit of the interval width
    (the median keeps at least two significant digits), so the printed digits
    carry information and no more. With a nonzero `exponent` (by default the
    one `shared_exponent` picks for the median alone) all three share that
    power of ten, e.g. `1.234e-06 [1.200e-06, 1.270e-06]`.
    """
    if not all(math.isfinite(value) for value in (median, low, high)):
        return MISSING
    if exponent is None:
        exponent = shared_exponent([median])
    scaled = [value / 10.0**exponent for value in (median, low, high)]
    decimals = _decimals(scaled[0]) + 1 if scaled[0] else 0
    width = scaled[2] - scaled[1]
    if width > 0:
        decimals = max(decimals, _decimals(width) + 1)
    suffix = f"e{exponent:+03d}" if exponent else ""
    texts = [f"{round(value, decimals):.{max(decimals, 0)}f}{suffix}" for value in scaled]
    return f"{texts[0]} [{texts[1]}, {texts[2]}]"


def _marker(index: int) -> str:
    """Footnote markers a, b, ..., z, aa, ab, ..."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return letters


def readable_unit(unit: str | None, medians: list[float]) -> tuple[str | None, float]:
    """(unit, base units per unit) for a table of times or energies: the largest of s, ms,
    µs, ns (J, mJ, µJ, nJ) in which the middle one of the medians is at least 1, so most
    numbers read without exponents or leading zeros. Other units are kept as they are
    (factor 1)."""
    finite = sorted(value for value in medians if math.isfinite(value) and value > 0)
    if unit not in READABLE_UNITS or not finite:
        return unit, 1.0
    middle = finite[(len(finite) - 1) // 2]
    for name, factor in READABLE_UNITS[unit]:
        if middle >= factor:
            return name, factor
    return READABLE_UNITS[unit][-1]


def _blank_cell(row: str, column: str, unit: str | None) -> dict[str, Any]:
    return {
        "row": row,
        "column": column,
        "status": "missing",
        "median": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "ci_level": math.nan,
        "unit": unit,
        "best": False,
        "reason": None,
        "busy": False,
        "imprecise": False,
        "above_ideal": False,
    }


def _grid(
    found: pd.DataFrame, labels: list[str], columns: list[str], across: str, unit: str | None
) -> list[dict[str, Any]]:
    """One cell per (label, column), row-major, from long-form cells with `label`, `across`,
    status, reason, median, ci_low, ci_high and ci_level; a pair not in `found` is missing."""
    by_cell = found.set_index(["label", across])
    if not by_cell.index.is_unique:
        raise ValueError(
            f"records with the same row label and {across}: "
            f"{sorted(set(by_cell.index[by_cell.index.duplicated()]))}"
        )
    cells = []
    for label in labels:
        for column in columns:
            cell = _blank_cell(label, column, unit)
            if (label, column) in by_cell.index:
                record = by_cell.loc[(label, column)]
                cell["status"], cell["reason"] = record["status"], record["reason"]
                if record["status"] == "ok":
                    for field in ("median", "ci_low", "ci_high", "ci_level"):
                        cell[field] = float(record[field])
                    cell["busy"] = tidy.flagged(record.get("busy"))
                    cell["imprecise"] = tidy.flagged(record.get("imprecise"))
            cells.append(cell)
    return cells


def separated(best: dict[str, Any], runner_up: dict[str, Any], higher_is_better: bool) -> bool:
    """Whether the best cell's interval clears the runner-up's, so that bold means something."""
    if higher_is_better:
        return best["ci_low"] > runner_up["ci_high"]
    return best["ci_high"] < runner_up["ci_low"]


def _mark_best(row_cells: list[dict[str, Any]], higher_is_better: bool) -> None:
    """Flag the row's best cell; a lone number is not best of anything."""
    ran = sorted(
        (cell for cell in row_cells if math.isfinite(cell["median"])),
        key=lambda cell: -cell["median"] if higher_is_better else cell["median"],
    )
    for cell in row_cells:
        cell["best"] = False
    if len(ran) > 1 and separated(ran[0], ran[1], higher_is_better):
        ran[0]["best"] = True


def blocks(filled: dict[str, list[str]], columns: list[str]) -> list[tuple[list[str], list[str]]]:
    """(rows, columns) blocks: rows with something in the same columns share a block.

    Two blocks merge where that adds no more dashes than the cells of the header
    row it saves, so a lone odd row joins the others while a group of rows
    measured elsewhere gets its own header instead of a column of dashes.
    """
    groups: list[tuple[list[str], set[str]]] = []
    for row, present in filled.items():
        same = next((group for group in groups if group[1] == set(present)), None)
        if same:
            same[0].append(row)
        else:
            groups.append(([row], set(present)))
    while len(groups) > 1:
        merges = []
        for first, second in itertools.combinations(range(len(groups)), 2):
            (rows_a, columns_a), (rows_b, columns_b) = groups[first], groups[second]
            union = columns_a | columns_b
            dashes = len(rows_a) * len(union - columns_a) + len(rows_b) * len(union - columns_b)
            if dashes <= len(union) + 1:
                merges.append((dashes, first, second))
        if not merges:
            break
        _, first, second = min(merges)
        groups[first] = (groups[first][0] + groups[second][0], groups[first][1] | groups[second][1])
        del groups[second]
    order = {row: index for index, row in enumerate(filled)}
    return [
        (sorted(rows, key=order.__getitem__), [column for column in columns if column in present])
        for rows, present in groups
    ]


def _render(
    cells: list[dict[str, Any]],
    labels: list[str],
    columns: list[str],
    *,
    row_header: str,
    column_header: str,
    caption: str,
    higher_is_better: bool = False,
    expected_level: float = CI_LEVEL,
    factor: float = 1.0,
    empty: str = "No records.",
    ideal: dict[str, float] | None = None,
    best: bool = True,
) -> tuple[pd.DataFrame, list[str]]:
    """Display strings, bold cells, blocks and footnotes for a grid of cells (numbers /
    `factor`); a table without rows gets the footnote `empty`, saying why it has none.
    A cell above its column's `ideal` value is marked. Without `best` (columns of different
    quantities) no cell is set in bold."""
    ideal = ideal or {}
    by_place = {(cell["row"], cell["column"]): cell for cell in cells}
    exponents = {}
    for label in labels:
        row_cells = [by_place[label, column] for column in columns]
        if best:
            _mark_best(row_cells, higher_is_better)
        exponents[label] = shared_exponent([cell["median"] / factor for cell in row_cells])
    filled = {
        label: [
            column for column in columns if by_place[label, column]["status"] not in DASH_STATUSES
        ]
        for label in labels
    }
    shown = blocks({label: present for label, present in filled.items() if present}, columns)
    shown_rows = [row for rows, _ in shown for row in rows]
    shown_columns = [column for column in columns if any(column in cols for _, cols in shown)]
    displayed = [by_place[row, column] for rows, cols in shown for row in rows for column in cols]

    def place(row: str, column: str) -> str:
        return f"{row} on {column}" if column_header == "device" else f"{row}, {column}"

    markers: dict[tuple[str, str], str] = {}
    places: dict[tuple[str, str], list[str]] = {}
    text = pd.DataFrame(
        MISSING,
        index=pd.Index(shown_rows, name=row_header, dtype="str"),
        columns=pd.Index(shown_columns, name=column_header, dtype="str"),
        dtype="str",
    )
    for cell in displayed:
        row, column, status = cell["row"], cell["column"], cell["status"]
        if status == "ok":
            cell["above_ideal"] = cell["median"] > ideal.get(column, math.inf)
            text.loc[row, column] = (
                format_with_ci(
                    *(cell[field] / factor for field in ("median", "ci_low", "ci_high")),
                    exponents[row],
                )
                + (BUSY_MARK if cell["busy"] else "")
                + (IMPRECISE_MARK if cell["imprecise"] else "")
                + (ABOVE_IDEAL_MARK if cell["above_ideal"] else "")
            )
        elif status in CELL_TEXT:
            key = (status, " ".join(str(cell["reason"]).split()))
            marker = markers.setdefault(key, _marker(len(markers)))
            places.setdefault(key, []).append(place(row, column))
            text.loc[row, column] = f"{CELL_TEXT[status]} ({marker})"

    footnotes = [
        f"({marker}) {NOTE_TEXT[status]}: {reason} [{'; '.join(places[status, reason])}]"
        for (status, reason), marker in markers.items()
    ]
    hidden: dict[tuple[str, str], list[str]] = {}
    on_show = {id(cell) for cell in displayed}
    for cell in cells:
        if cell["status"] in CELL_TEXT and id(cell) not in on_show:
            key = (cell["status"], " ".join(str(cell["reason"]).split()))
            hidden.setdefault(key, []).append(place(cell["row"], cell["column"]))
    footnotes += [
        f"Not shown, {NOTE_TEXT[status]}: {reason} [{'; '.join(where)}]"
        for (status, reason), where in hidden.items()
    ]
    weak = [
        f"{place(cell['row'], cell['column'])} ({cell['ci_level']:.0%})"
        for cell in cells
        if cell["ci_level"] < expected_level
    ]
    busy = [place(cell["row"], cell["column"]) for cell in cells if cell["busy"]]
    if busy:
        footnotes.append(f"{BUSY_MARK} {BUSY_NOTE}: {'; '.join(busy)}")
    imprecise = [place(cell["row"], cell["column"]) for cell in cells if cell["imprecise"]]
    if imprecise:
        footnotes.append(f"{IMPRECISE_MARK} {IMPRECISE_NOTE}: {'; '.join(imprecise)}")
    above = [place(cell["row"], cell["column"]) for cell in cells if cell["above_ideal"]]
    if above:
        footnotes.append(f"{ABOVE_IDEAL_MARK} {ABOVE_IDEAL_NOTE}: {'; '.join(above)}")
    if not labels:
        footnotes.append(empty)
    if weak:
        footnotes.append(
            f"Too few samples for a {expected_level:.0%} interval; the interval shown has "
            f"the level in parentheses: {'; '.join(weak)}"
        )
    legend = []
    if any(cell["status"] == "missing" for cell in displayed):
        legend.append(MISSING_NOTE)
    if best and any(
        sum(math.isfinite(by_place[row, c]["median"]) for c in columns) > 1 for row in labels
    ):
        legend.append(BOLD_NOTE)
    text.attrs = {
        "caption": caption,
        "best": [[cell["row"], cell["column"]] for cell in cells if cell["best"]],
        "cells": [{key: cell[key] for key in CSV_COLUMNS} for cell in cells],
        "blocks": [[rows, cols] for rows, cols in shown],
        "legend": legend,
    }
    return text, footnotes


def interval_name(rows: pd.DataFrame) -> str:
    """What the brackets hold: a rerun interval where every record that ran was measured
    in independent runs (record param `interval`), else the within-run CI."""
    ran = rows[rows["status"] == "ok"]
    methods = set(ran["interval"].dropna()) if "interval" in ran else set()
    rerun = bool(methods) and methods == {RERUN_INTERVAL}
    return f"{CI_LEVEL:.0%} {'rerun interval' if rerun else 'CI'}"


def _caption(text: str, unit: str | None, interval: str, constants: list[str]) -> str:
    caption = f"{text}{f' ({unit})' if unit else ''}, median [{interval}]"
    return caption + ("; " + ", ".join(constants) if constants else "")


def comparison_table(
    frame: pd.DataFrame, experiment: str = "train", across: str = "device"
) -> tuple[pd.DataFrame, list[str]]:
    """(table of display strings, footnotes): one experiment's metric, rows x `across`.

    Rows are models (train) or kernels, labelled with the parameters that vary;
    columns are the values of `across`: devices in natural order (cpu1, cpu2,
    cpu16, cuda1) for the classic table, precisions for the precision table
    (which keeps only the rows measured in two or more precisions).
    The table's attrs hold `caption`, `best` ([row, column] pairs set in bold)
    and `cells` (one dict per cell with the plain numbers, the CSV's rows).
    """
    spec = SPECS[experiment]
    if across == "device":
        rows, constants = tidy.experiment_rows(frame, experiment, across)
    else:
        rows, constants = tidy.compared_rows(frame, experiment, across)
    labels = list(dict.fromkeys(rows["label"]))
    columns = tidy.ordered(across, rows[across]) if labels else []
    unit = frame.attrs.get("units", {}).get(f"{spec.metric}_median")
    found = pd.DataFrame(
        {
            "label": rows["label"],
            across: rows[across] if labels else [],
            "status": rows["status"],
            "reason": rows["reason"],
            "busy": rows.get("busy", False),
            "imprecise": rows.get("imprecise", False),
            **{
                field: rows.get(f"{spec.metric}_{field}", pd.Series(math.nan, index=rows.index))
                for field in ("median", "ci_low", "ci_high", "ci_level")
            },
        }
    )
    cells = _grid(found, labels, columns, across, unit)
    shown, factor = readable_unit(unit, [cell["median"] for cell in cells])
    title = spec.title if across == "device" else f"{spec.title} by {across}"
    return _render(
        cells,
        labels,
        columns,
        row_header=spec.row_header,
        column_header=across,
        caption=_caption(title, shown, interval_name(rows), constants),
        factor=factor,
        empty=(
            f"No {experiment} records."
            if across == "device"
            else f"No {experiment} configuration was measured in more than one {across}."
        ),
    )


def _ratio_table(
    found: pd.DataFrame,
    experiment: str,
    caption: str,
    columns: list[str],
    empty: str,
    ideal: dict[str, float],
) -> tuple[pd.DataFrame, list[str]]:
    labels = list(dict.fromkeys(found["label"]))
    cells = _grid(found, labels, columns if labels else [], "device", None)
    return _render(
        cells,
        labels,
        columns if labels else [],
        row_header=SPECS[experiment].row_header,
        column_header="device",
        caption=caption,
        higher_is_better=True,
        expected_level=ratios.RATIO_LEVEL,
        empty=empty,
        ideal=ideal,
    )


def ideal_speedups(devices: list[str], baseline: str) -> dict[str, float]:
    """The most a device can gain over the baseline by its count alone: N / M for N > M
    devices of the same kind (cpu16 over cpu1: 16); none across kinds or for fewer."""
    try:
        base = parse_device(baseline)
    except DeviceError:
        return {}
    ideal = {}
    for device in devices:
        try:
            parsed = parse_device(device)
        except DeviceError:
            continue
        count, base_count = parsed.count * parsed.nodes, base.count * base.nodes
        if parsed.kind == base.kind and count > base_count:
            ideal[device] = count / base_count
    return ideal


def speedup_table(
    frame: pd.DataFrame, experiment: str, baseline: str
) -> tuple[pd.DataFrame, list[str]]:
    """How many times faster each device runs each row than the `baseline` device does."""
    cells, constants = ratios.speedup(frame, experiment, baseline)
    title = SPECS[experiment].title.lower()
    caption = _caption(
        f"Speedup over {baseline}: {title} on {baseline} / {title} on the device",
        "×",
        f"interval from both {CI_LEVEL:.0%} CIs, level ≥ {ratios.RATIO_LEVEL:.0%}",
        constants,
    )
    empty = f"No {experiment} records on a device other than {baseline}."
    devices = tidy.natural_devices(cells["device"])
    return _ratio_table(
        cells, experiment, caption, devices, empty, ideal_speedups(devices, baseline)
    )


def scaling_table(frame: pd.DataFrame, experiment: str = "train") -> tuple[pd.DataFrame, list[str]]:
    """Parallel efficiency on K devices of a kind: speedup over one device of it, over K."""
    cells, constants = ratios.scaling(frame, experiment)
    metric = ratios.RATE_METRIC[experiment]
    return _efficiency_table(
        cells[cells["count"] > 1],
        constants,
        experiment,
        f"Scaling efficiency: {metric} on K devices / (K × {metric} on one; strategy single)",
        f"No {experiment} configuration was measured on more than one device of a kind.",
        "Batch sizes are global mini-batches, split over the K devices. Each row is "
        "named after the one-device run its cells are compared with: the same global "
        "mini-batch, else the global mini-batch / K (the same samples per device); "
        "throughput is compared, so both are fair.",
    )


def node_scaling_table(
    frame: pd.DataFrame, experiment: str = "train"
) -> tuple[pd.DataFrame, list[str]]:
    """Efficiency of N nodes over one node with the same devices: speedup over N."""
    cells, constants = ratios.node_scaling(frame, experiment)
    metric = ratios.RATE_METRIC[experiment]
    return _efficiency_table(
        cells,
        constants,
        experiment,
        f"Scaling across nodes: {metric} on N nodes (NxK) / (N × {metric} on one node "
        f"with the same K devices)",
        f"No {experiment} configuration was measured on more than one node.",
        "Batch sizes are global mini-batches, split over every process of every node; "
        "one node runs the same strategy with the same global mini-batch (else that "
        "mini-batch / N), or 'single' where one node has one device.",
    )


def _efficiency_table(
    cells: pd.DataFrame,
    constants: list[str],
    experiment: str,
    what: str,
    empty: str,
    batches: str,
) -> tuple[pd.DataFrame, list[str]]:
    """Rows x devices of scaling efficiencies (1 = linear), with the batches' footnote."""
    efficiency = cells.drop(columns=["median", "ci_low", "ci_high"]).rename(
        columns=lambda name: name.removeprefix("efficiency_")
    )
    caption = _caption(
        f"{what}, 1 = linear",
        None,
        f"interval from both {CI_LEVEL:.0%} CIs, level ≥ {ratios.RATIO_LEVEL:.0%}",
        constants,
    )
    devices = tidy.natural_devices(efficiency["device"])
    table, footnotes = _ratio_table(
        efficiency, experiment, caption, devices, empty, dict.fromkeys(devices, 1.0)
    )
    if not table.empty:
        footnotes.append(batches)
    return table, footnotes


@dataclass(frozen=True)
class EnergySpec:
    """The columns of an energy table: time and energy per unit of work, side by side."""

    work: str  # "sample" or "call"
    time_metric: str
    per_batch: bool  # the time is per mini-batch: divided by the batch size
    energy_metric: str


ENERGY_SPECS = {
    "train": EnergySpec("sample", "time_per_batch", True, "energy_per_sample"),
    "kernel": EnergySpec("call", "time", False, "energy_per_call"),
    "datasci": EnergySpec("call", "time", False, "energy_per_call"),
}
ENERGY_NOTE = (
    "Energy: the devices' energy counters read around a window of repeated work after the "
    "timing (NVML's total-energy counter on GPUs, RAPL on CPUs); above idle: less the idle "
    "power, measured once per job, over the window. A cell without energy says why: "
    "n/a where no counter could be read, too short where the window spanned too few "
    "counter updates. Nothing is estimated."
)
TRAIN_ENERGY_NOTE = (
    "Time per sample: time per mini-batch / batch size (the step, batch loading excluded); "
    "the energy window's steps each load their batch."
)


def _quantity_cells(rows: pd.DataFrame, metric: str, scale: pd.Series, energy: bool):
    """Long-form cells of one quantity: the record's status where it did not run, the
    energy status (with its reason) where it ran without energy, else the numbers / scale."""
    fields = ("median", "ci_low", "ci_high", "ci_level")
    found = pd.DataFrame(
        {
            "label": rows["label"],
            "status": rows["status"],
            "reason": rows["reason"],
            "busy": rows.get("busy", False),
            "imprecise": rows.get("imprecise", False),
            **{
                field: rows.get(f"{metric}_{field}", pd.Series(math.nan, index=rows.index))
                / (scale if field != "ci_level" else 1.0)
                for field in fields
            },
        }
    )
    if energy:
        missing = (found["status"] == "ok") & ~found["median"].astype(float).notna()
        status = rows.get("energy_status", pd.Series(None, index=rows.index, dtype="object"))
        reason = rows.get("energy_reason", pd.Series(None, index=rows.index, dtype="object"))
        found.loc[missing, "status"] = (
            status[missing].fillna("unavailable").replace("ok", "unavailable")
        )
        found.loc[missing, "reason"] = reason[missing].fillna(
            "the record has no energy section (measured without it)"
        )
    return found


def energy_table(frame: pd.DataFrame, experiment: str = "train") -> tuple[pd.DataFrame, list[str]]:
    """Time and energy per unit of work side by side, one row per configuration and device:
    time per sample, energy per sample and the same above idle (training), or the same per
    call (kernels), so whether a GPU pays off can be read in joules as well as seconds."""
    spec = ENERGY_SPECS[experiment]
    rows, constants = tidy.experiment_rows(frame, experiment, across="quantity")
    labels = list(dict.fromkeys(rows["label"]))
    units = frame.attrs.get("units", {})
    batch = rows["batch"].astype(float) if spec.per_batch else pd.Series(1.0, index=rows.index)
    one = pd.Series(1.0, index=rows.index)
    quantities = [
        (f"time per {spec.work}", spec.time_metric, batch, False),
        (f"energy per {spec.work}", spec.energy_metric, one, True),
        (f"energy per {spec.work} above idle", f"{spec.energy_metric}_above_idle", one, True),
    ]
    cells, columns = [], []
    for name, metric, scale, is_energy in quantities:
        found = _quantity_cells(rows, metric, scale, is_energy)
        unit, factor = readable_unit(units.get(f"{metric}_median"), list(found["median"]))
        found[["median", "ci_low", "ci_high"]] = found[["median", "ci_low", "ci_high"]] / factor
        column = f"{name} ({unit})" if unit else name
        columns.append(column)
        cells.append(_grid(found.assign(quantity=column), labels, [column], "quantity", unit))
    status = rows.get("energy_status", pd.Series(None, index=rows.index, dtype="object"))
    measured = rows[status == "ok"]
    footnotes = [
        f"Energy measured with {method} [{'; '.join(group['label'])}]"
        for method, group in measured.groupby("energy_method", sort=True)
    ]
    if labels and measured.empty:
        footnotes.append(f"No energy was measured in these {experiment} records (reasons below).")
    table, notes = _render(
        [cell for part in cells for cell in part],
        labels,
        columns if labels else [],
        row_header=SPECS[experiment].row_header,
        column_header="quantity",
        caption=_caption(f"Time and energy per {spec.work}", None, interval_name(rows), constants),
        empty=f"No {experiment} records.",
        best=False,
    )
    extra = [ENERGY_NOTE, *([TRAIN_ENERGY_NOTE] if spec.per_batch else [])] if labels else []
    return table, [*footnotes, *notes, *extra]


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "–": "--",
    "—": "---",
    "µ": r"\textmu{}",
    "×": r"$\times$",
    "≥": r"$\geq$",
    "†": r"\textdagger{}",
    "◊": r"$\diamond$",
    "‡": r"\textdaggerdbl{}",
}
_LATEX_PATTERN = re.compile("|".join(re.escape(char) for char in _LATEX_SPECIAL))
_MARKDOWN_PATTERN = re.compile(r"([\\|*_])")


def latex_escape(text: str) -> str:
    return _LATEX_PATTERN.sub(lambda match: _LATEX_SPECIAL[match.group()], text)


def markdown_escape(text: str) -> str:
    return _MARKDOWN_PATTERN.sub(r"\\\1", text)


_NUMBER_CELL = re.compile(r"(?P<median>\S+) (?P<interval>\[[^\]]*\])(?P<marks>\S*)")
_INTEGER = re.compile(r"[-+]?[\d,]+")


def decimal_pads(numbers: Sequence[str]) -> list[str]:
    """What each right-aligned number lacks after its integer part for the decimal points
    to line up: the end of the longest fraction, to be set invisibly (\\phantom)."""
    tails = [
        number[match.end() :] if (match := _INTEGER.match(number)) else "" for number in numbers
    ]
    widest = max(tails, key=len, default="")
    return [widest[len(tail) :] for tail in tails]


def _bold_cells(table: pd.DataFrame) -> set[tuple[str, str]]:
    return {(row, column) for row, column in table.attrs.get("best", [])}


def table_blocks(table: pd.DataFrame) -> list[tuple[list[str], list[str]]]:
    """The (rows, columns) blocks a table is printed in; one block where it names none."""
    if table.index.empty:
        return []
    return [
        (rows, cols) for rows, cols in table.attrs.get("blocks", [[table.index, table.columns]])
    ]


def _notes(table: pd.DataFrame, footnotes: list[str]) -> list[str]:
    """The footnotes, then what the marks of the printed table mean."""
    return [*footnotes, *table.attrs.get("legend", [])]


def _rows(table: pd.DataFrame, rows, columns, escape, emphasise) -> list[list[str]]:
    """Label and cells of `rows`, escaped for one format, the best cells emphasised."""
    bold = _bold_cells(table)

    def cell(row: str, column: str) -> str:
        text = escape(table.loc[row, column])
        return emphasise(text) if (row, column) in bold else text

    return [[escape(row), *(cell(row, column) for column in columns)] for row in rows]


# Invisible in Markdown, as wide as a digit and as a decimal point: the padding that lines
# right-aligned numbers up at the point (LaTeX's \phantom).
FIGURE_SPACE, PUNCTUATION_SPACE = "\u2007", "\u2008"


def markdown_pads(numbers: Sequence[str]) -> list[str]:
    """decimal_pads set in figure spaces (a point or comma as a punctuation space)."""
    return [
        "".join(PUNCTUATION_SPACE if char in ".," else FIGURE_SPACE for char in pad)
        for pad in decimal_pads(numbers)
    ]


def _markdown_block(table: pd.DataFrame, rows: list[str], columns: list[str]) -> list[str]:
    """The pipe table of one block. A column of numbers is two: the median, right-aligned and
    padded to line up at the decimal point, and its interval beside it, left-aligned; a
    cell without a number (a status, a dash) stands in the median's place."""
    bold = _bold_cells(table)
    header, align, cells = [markdown_escape(str(table.index.name))], ["|:---"], []
    for column in columns:
        texts = [table.loc[row, column] for row in rows]
        matches = [_NUMBER_CELL.fullmatch(text) for text in texts]
        if not any(matches):
            header.append(markdown_escape(column))
            align.append("|---:")
            cells.append([[markdown_escape(text)] for text in texts])
            continue
        pads = iter(markdown_pads([match["median"] for match in matches if match]))
        split = [
            [
                markdown_escape(match["median"]) + next(pads),
                markdown_escape(match["interval"] + match["marks"]),
            ]
            if match
            else [markdown_escape(text), ""]
            for match, text in zip(matches, texts, strict=True)
        ]
        header += [markdown_escape(column), ""]
        align += ["|---:", "|:---"]
        cells.append(split)
    lines = ["| " + " | ".join(header) + " |", "".join(align) + "|"]
    for index, row in enumerate(rows):
        line = [markdown_escape(row)]
        for column, column_cells in zip(columns, cells, strict=True):
            strong = (row, column) in bold
            line += [f"**{text}**" if strong and text else text for text in column_cells[index]]
        lines.append("| " + " | ".join(line) + " |")
    return lines


def to_markdown(table: pd.DataFrame, footnotes: list[str]) -> str:
    """Pipe tables (one per block) under a pandoc `Table:` caption, medians lined up at the
    decimal point beside their intervals, footnotes as paragraphs below; a table without
    rows is only the lines saying why."""
    notes = [markdown_escape(note) for note in _notes(table, footnotes)]
    if table.index.empty:
        return "\n\n".join(notes) + "\n"
    lines = [f"Table: {markdown_escape(table.attrs.get('caption', ''))}"]
    for rows, columns in table_blocks(table):
        lines += ["", *_markdown_block(table, list(rows), list(columns))]
    for note in notes:
        lines += ["", note]
    return "\n".join(lines) + "\n"


def _latex_block(table: pd.DataFrame, rows: list[str], columns: list[str]) -> list[Tabular]:
    """The tabulars of one block. A column of numbers is two: the median, right-aligned with
    its decimal point lined up, and the interval; columns that do not fit the text width
    beside the row labels go to a further tabular, and a lone text column too wide wraps."""
    bold = _bold_cells(table)
    texts = {column: [table.loc[row, column] for row in rows] for column in columns}
    matches = {
        column: [_NUMBER_CELL.fullmatch(text) for text in texts[column]] for column in columns
    }
    pads = {
        column: dict(
            zip(
                [index for index, match in enumerate(matches[column]) if match],
                decimal_pads([match["median"] for match in matches[column] if match]),
                strict=True,
            )
        )
        for column in columns
    }
    widths = [
        column_width(
            [
                column,
                *(text + pads[column].get(index, "") for index, text in enumerate(texts[column])),
            ]
        )
        for column in columns
    ]
    key_width = column_width([str(table.index.name), *rows])

    def cell(index: int, row: str, column: str) -> str:
        strong = (row, column) in bold

        def emphasise(text: str) -> str:
            return rf"\textbf{{{text}}}" if strong and text else text

        match = matches[column][index]
        if not any(matches[column]):
            return emphasise(latex_escape(texts[column][index]))
        if match is None:
            return rf"\multicolumn{{2}}{{c}}{{{emphasise(latex_escape(texts[column][index]))}}}"
        pad = pads[column][index]
        phantom = rf"\phantom{{{latex_escape(pad)}}}" if pad else ""
        return (
            f"{emphasise(latex_escape(match['median']))}{phantom} & "
            f"{emphasise(latex_escape(match['interval']))}{latex_escape(match['marks'])}"
        )

    tabulars = []
    for part in latex_parts(key_width, widths):
        spec, header = "l", [latex_escape(str(table.index.name))]
        for position in part:
            column = columns[position]
            if any(matches[column]):
                spec += r"r@{\ }l"
                header.append(rf"\multicolumn{{2}}{{c}}{{{latex_escape(column)}}}")
            elif key_width + widths[position] > TEXT_WIDTH_PT:
                spec += f"p{{{TEXT_WIDTH_PT - key_width - 2 * COLUMN_SEP_PT:.0f}pt}}"
                header.append(latex_escape(column))
            else:
                spec += "r"
                header.append(latex_escape(column))
        body = [
            [latex_escape(row), *(cell(index, row, columns[position]) for position in part)]
            for index, row in enumerate(rows)
        ]
        width = key_width + sum(widths[position] for position in part)
        tabulars.append(Tabular(spec, header, body, width))
    return tabulars


def to_latex(table: pd.DataFrame, footnotes: list[str], label: str) -> str:
    """A booktabs table float, ready for \\input (with booktabs loaded); footnotes in small
    type below the rule. Each block, and each part of a block too wide for the page, is a
    tabular of its own."""
    tabulars = [
        tabular
        for rows, columns in table_blocks(table)
        for tabular in _latex_block(table, list(rows), list(columns))
    ]
    caption = latex_escape(table.attrs.get("caption", ""))
    notes = [latex_escape(note) for note in _notes(table, footnotes)]
    return latex_float(caption, label, tabulars, notes)


HTML_STYLE = """
body { font-family: sans-serif; font-size: 14px; margin: 1em; }
table { border-collapse: collapse; margin-bottom: 1em; }
caption { caption-side: top; text-align: left; font-weight: bold; padding-bottom: 0.5em; }
thead th { border-top: 2px solid black; border-bottom: 1px solid black; }
tbody tr:last-child td { border-bottom: 2px solid black; }
th, td { padding: 0.2em 0.8em; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
p.note { font-size: 12px; max-width: 60em; overflow-wrap: anywhere; }
div.wide { overflow-x: auto; }
"""


def to_html(table: pd.DataFrame, footnotes: list[str]) -> str:
    """A standalone HTML page with the table (booktabs-like rules, one per block) and its
    footnotes; a table without rows is its caption and the lines saying why."""
    caption = html.escape(table.attrs.get("caption", ""))
    parts = []
    for index, (rows, columns) in enumerate(table_blocks(table)):
        header = "".join(
            f"<th>{html.escape(str(name))}</th>" for name in (table.index.name, *columns)
        )
        body = "\n".join(
            "<tr>" + "".join(f"<td>{text}</td>" for text in row) + "</tr>"
            for row in _rows(table, rows, columns, html.escape, lambda text: f"<b>{text}</b>")
        )
        title = f"<caption>{caption}</caption>\n" if index == 0 else ""
        # A table wider than the window scrolls in its own box; the notes stay in view.
        parts.append(
            f'<div class="wide"><table>{title}<thead><tr>{header}</tr></thead>\n'
            f"<tbody>\n{body}\n</tbody></table></div>"
        )
    if not parts:
        parts.append(f"<p><b>{caption}</b></p>")
    notes = "\n".join(
        f'<p class="note">{html.escape(note)}</p>' for note in _notes(table, footnotes)
    )
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{caption}</title>'
        f"<style>{HTML_STYLE}</style></head><body>\n"
        + "\n".join(parts)
        + f"\n{notes}\n</body></html>\n"
    )


def write_table(
    table: pd.DataFrame, footnotes: list[str], stem: str | os.PathLike[str]
) -> list[Path]:
    """Write `<stem>.md`, `.tex`, `.csv` and `.html`; returns the paths.

    The CSV is long form, one line per cell (the columns of `attrs["csv_columns"]`,
    by default CSV_COLUMNS with "column" named after the table's columns): plain
    numbers (median, ci_low, ci_high in `unit`) for cells that ran, NaN and the
    status (oom, unavailable, failed, no_baseline, missing) with its reason otherwise.
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_name(stem.name + suffix) for suffix in (".md", ".tex", ".csv", ".html")]
    paths[0].write_text(to_markdown(table, footnotes), encoding="utf-8")
    paths[1].write_text(to_latex(table, footnotes, stem.name), encoding="utf-8")
    columns = table.attrs.get("csv_columns", CSV_COLUMNS)
    pd.DataFrame(table.attrs.get("cells", []), columns=list(columns)).rename(
        columns={"column": str(table.columns.name or "column")}
    ).to_csv(paths[2], index=False)
    paths[3].write_text(to_html(table, footnotes), encoding="utf-8")
    return paths


def datasci_time_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Time per data science workload and size (rows) on each device (columns), with a
    note naming the library that ran on each device."""
    table, footnotes = comparison_table(frame, "datasci")
    rows = frame[frame["experiment"] == "datasci"]
    libraries = {
        device: ", ".join(sorted(set(rows.loc[rows["device"] == device, "backend"].dropna())))
        for device in tidy.natural_devices(rows["device"])
    }
    if libraries:
        text = "; ".join(f"{device}: {names}" for device, names in libraries.items())
        footnotes = [*footnotes, f"Libraries by device: {text}."]
    return table, footnotes


# Every table the workflow writes, by file name: builder(frame, baseline device).
TABLES: dict[str, Callable[[pd.DataFrame, str], tuple[pd.DataFrame, list[str]]]] = {
    "train_time_per_batch": lambda frame, baseline: comparison_table(frame, "train"),
    "kernel_time": lambda frame, baseline: comparison_table(frame, "kernel"),
    "datasci_time": lambda frame, baseline: datasci_time_table(frame),
    "train_speedup": lambda frame, baseline: speedup_table(frame, "train", baseline),
    "kernel_speedup": lambda frame, baseline: speedup_table(frame, "kernel", baseline),
    "train_precision": lambda frame, baseline: comparison_table(frame, "train", "precision"),
    "train_scaling": lambda frame, baseline: scaling_table(frame, "train"),
    "train_node_scaling": lambda frame, baseline: node_scaling_table(frame, "train"),
    "train_energy": lambda frame, baseline: energy_table(frame, "train"),
    "kernel_energy": lambda frame, baseline: energy_table(frame, "kernel"),
    "datasci_energy": lambda frame, baseline: energy_table(frame, "datasci"),
}

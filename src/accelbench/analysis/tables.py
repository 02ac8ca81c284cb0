"""Comparison tables in the style of Shi et al. (2016): rows x devices, median [95% CI].

One cell per (row, column). A cell that could not run says why (OOM, n/a,
failed) and points to a footnote with the reason, so a missing number is never
mistaken for a slow one; a cell with no record at all shows a dash. The best
cell of each row (lowest time, highest speedup) is set in bold where the row
has two numbers to compare. Numbers keep the digits their interval supports
and no more, and a table of times is printed in the unit (s, ms, µs, ns) that
makes its middle time at least 1.

Tables: the classic one (rows x devices), the same across precisions, speedup
over a baseline device, and scaling efficiency over device counts. Each builder
returns (table of display strings, footnotes); the numbers behind the strings,
the bold cells and the caption ride along in `table.attrs` so the writers can
emit Markdown, LaTeX, HTML and a CSV of plain numbers from the same table.
"""

from __future__ import annotations

import html
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from accelbench.analysis import ratios, tidy
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
    "reason",
)
# A number measured on a busy machine (record conditions.busy) keeps its cell, marked.
BUSY_MARK = "†"
BUSY_NOTE = (
    "measured while other processes kept the machine busy, after the retries "
    "(the number may be too slow)"
)
# What a cell that holds no number shows, and how its footnote names the cause.
CELL_TEXT = {**tidy.STATUS_TEXT, ratios.NO_BASELINE: MISSING}
NOTE_TEXT = {**tidy.STATUS_TEXT, ratios.NO_BASELINE: "no baseline"}
TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


@dataclass(frozen=True)
class TableSpec:
    metric: str
    title: str
    row_header: str


SPECS = {
    "train": TableSpec("time_per_batch", "Time per mini-batch", "Model"),
    "kernel": TableSpec("time", "Kernel time", "Kernel"),
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
    """(unit, seconds per unit) for a table of times: the largest of s, ms, µs, ns in which
    the middle one of the medians is at least 1, so most numbers read without exponents
    or leading zeros. Other units are kept as they are (factor 1)."""
    finite = sorted(value for value in medians if math.isfinite(value) and value > 0)
    if unit != "s" or not finite:
        return unit, 1.0
    middle = finite[(len(finite) - 1) // 2]
    for name, factor in TIME_UNITS:
        if middle >= factor:
            return name, factor
    return TIME_UNITS[-1]


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
            cells.append(cell)
    return cells


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
) -> tuple[pd.DataFrame, list[str]]:
    """Display strings, bold cells and footnotes for a grid of cells (numbers / `factor`);
    a table without rows gets the footnote `empty`, saying why it has none."""
    by_row = {label: [cell for cell in cells if cell["row"] == label] for label in labels}
    exponents = {}
    for label, row_cells in by_row.items():
        medians = [cell["median"] for cell in row_cells]
        finite = [median for median in medians if math.isfinite(median)]
        # A lone number in its row is not "best" of anything: bold needs two to compare.
        best = (max if higher_is_better else min)(finite) if len(finite) > 1 else None
        for cell in row_cells:
            cell["best"] = cell["median"] == best
        exponents[label] = shared_exponent([median / factor for median in medians])

    def place(row: str, column: str) -> str:
        return f"{row} on {column}" if column_header == "device" else f"{row}, {column}"

    markers: dict[tuple[str, str], str] = {}
    places: dict[tuple[str, str], list[str]] = {}
    text = pd.DataFrame(
        MISSING,
        index=pd.Index(labels, name=row_header, dtype="str"),
        columns=pd.Index(columns, name=column_header, dtype="str"),
        dtype="str",
    )
    for cell in cells:
        row, column, status = cell["row"], cell["column"], cell["status"]
        if status == "ok":
            text.loc[row, column] = format_with_ci(
                *(cell[field] / factor for field in ("median", "ci_low", "ci_high")),
                exponents[row],
            ) + (BUSY_MARK if cell["busy"] else "")
        elif status in CELL_TEXT:
            key = (status, " ".join(str(cell["reason"]).split()))
            marker = markers.setdefault(key, _marker(len(markers)))
            places.setdefault(key, []).append(place(row, column))
            text.loc[row, column] = f"{CELL_TEXT[status]} ({marker})"

    footnotes = [
        f"({marker}) {NOTE_TEXT[status]}: {reason} [{'; '.join(places[status, reason])}]"
        for (status, reason), marker in markers.items()
    ]
    weak = [
        f"{place(cell['row'], cell['column'])} ({cell['ci_level']:.0%})"
        for cell in cells
        if cell["ci_level"] < expected_level
    ]
    busy = [place(cell["row"], cell["column"]) for cell in cells if cell["busy"]]
    if busy:
        footnotes.append(f"{BUSY_MARK} {BUSY_NOTE}: {'; '.join(busy)}")
    if not labels:
        footnotes.append(empty)
    if weak:
        footnotes.append(
            f"Too few samples for a {expected_level:.0%} interval; the interval shown has "
            f"the level in parentheses: {'; '.join(weak)}"
        )
    text.attrs = {
        "caption": caption,
        "best": [[cell["row"], cell["column"]] for cell in cells if cell["best"]],
        "cells": [{key: cell[key] for key in CSV_COLUMNS} for cell in cells],
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
    found: pd.DataFrame, experiment: str, caption: str, columns: list[str], empty: str
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
    )


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
    return _ratio_table(cells, experiment, caption, tidy.natural_devices(cells["device"]), empty)


def scaling_table(frame: pd.DataFrame, experiment: str = "train") -> tuple[pd.DataFrame, list[str]]:
    """Parallel efficiency on K devices of a kind: speedup over one device of it, over K."""
    cells, constants = ratios.scaling(frame, experiment)
    cells = cells[cells["count"] > 1]
    efficiency = cells.drop(columns=["median", "ci_low", "ci_high"]).rename(
        columns=lambda name: name.removeprefix("efficiency_")
    )
    caption = _caption(
        f"Scaling efficiency: {ratios.RATE_METRIC[experiment]} on K devices / "
        f"(K × {ratios.RATE_METRIC[experiment]} on one; strategy single), 1 = linear",
        None,
        f"interval from both {CI_LEVEL:.0%} CIs, level ≥ {ratios.RATIO_LEVEL:.0%}",
        constants,
    )
    empty = f"No {experiment} configuration was measured on more than one device of a kind."
    devices = tidy.natural_devices(cells["device"])
    table, footnotes = _ratio_table(efficiency, experiment, caption, devices, empty)
    if not table.empty:
        footnotes.append(
            "Batch sizes are global mini-batches, split over the K devices. Each row is "
            "named after the one-device run its cells are compared with: the same global "
            "mini-batch, else the global mini-batch / K (the same samples per device); "
            "throughput is compared, so both are fair."
        )
    return table, footnotes


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
}
_LATEX_PATTERN = re.compile("|".join(re.escape(char) for char in _LATEX_SPECIAL))
_MARKDOWN_PATTERN = re.compile(r"([\\|*_])")


def latex_escape(text: str) -> str:
    return _LATEX_PATTERN.sub(lambda match: _LATEX_SPECIAL[match.group()], text)


def markdown_escape(text: str) -> str:
    return _MARKDOWN_PATTERN.sub(r"\\\1", text)


def _bold_cells(table: pd.DataFrame) -> set[tuple[str, str]]:
    return {(row, column) for row, column in table.attrs.get("best", [])}


def _cells(table: pd.DataFrame, escape, emphasise) -> tuple[list[str], list[list[str]]]:
    """Header and rows of `table` escaped for one format, the best cells emphasised."""
    bold = _bold_cells(table)

    def cell(row: str, device: str) -> str:
        text = escape(table.loc[row, device])
        return emphasise(text) if (row, device) in bold else text

    header = [escape(str(table.index.name)), *map(escape, table.columns)]
    rows = [[escape(row)] + [cell(row, device) for device in table.columns] for row in table.index]
    return header, rows


def to_markdown(table: pd.DataFrame, footnotes: list[str]) -> str:
    """Pipe table with a pandoc `Table:` caption, footnotes as paragraphs below."""
    header, rows = _cells(table, markdown_escape, lambda text: f"**{text}**")
    lines = [
        f"Table: {markdown_escape(table.attrs.get('caption', ''))}",
        "",
        "| " + " | ".join(header) + " |",
        "|:---|" + "---:|" * len(table.columns),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    for note in footnotes:
        lines += ["", markdown_escape(note)]
    return "\n".join(lines) + "\n"


def to_latex(table: pd.DataFrame, footnotes: list[str], label: str) -> str:
    """A booktabs table float, ready for \\input; footnotes in small type below the rule."""
    header, rows = _cells(table, latex_escape, lambda text: rf"\textbf{{{text}}}")
    caption = latex_escape(table.attrs.get("caption", ""))
    notes = [latex_escape(note) for note in footnotes]
    return latex_float(caption, label, "l" + "r" * len(table.columns), header, rows, notes)


def latex_float(
    caption: str, label: str, spec: str, header: list[str], rows: list[list[str]], notes: list[str]
) -> str:
    """A booktabs table float from cells already escaped; notes in small type below the rule."""
    lines = [
        r"\begin{table}[htbp]",
        r"\centering",
        rf"\caption{{{caption}}}",
        rf"\label{{tab:{label}}}",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(header) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    if notes:
        lines += [
            r"\par\smallskip",
            r"\begin{minipage}{\linewidth}\footnotesize",
            " \\\\\n".join(notes),
            r"\end{minipage}",
        ]
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


HTML_STYLE = """
body { font-family: sans-serif; font-size: 14px; margin: 1em; }
table { border-collapse: collapse; }
caption { caption-side: top; text-align: left; font-weight: bold; padding-bottom: 0.5em; }
thead th { border-top: 2px solid black; border-bottom: 1px solid black; }
tbody tr:last-child td { border-bottom: 2px solid black; }
th, td { padding: 0.2em 0.8em; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
p.note { font-size: 12px; max-width: 60em; }
"""


def to_html(table: pd.DataFrame, footnotes: list[str]) -> str:
    """A standalone HTML page with the table (booktabs-like rules) and its footnotes."""
    bold = _bold_cells(table)

    def cell(row: str, column: str) -> str:
        text = html.escape(table.loc[row, column])
        return f"<td><b>{text}</b></td>" if (row, column) in bold else f"<td>{text}</td>"

    header = "".join(
        f"<th>{html.escape(str(name))}</th>" for name in (table.index.name, *table.columns)
    )
    body = "\n".join(
        f"<tr><td>{html.escape(row)}</td>"
        + "".join(cell(row, column) for column in table.columns)
        + "</tr>"
        for row in table.index
    )
    caption = html.escape(table.attrs.get("caption", ""))
    notes = "\n".join(f'<p class="note">{html.escape(note)}</p>' for note in footnotes)
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{caption}</title>'
        f"<style>{HTML_STYLE}</style></head><body>\n"
        f"<table><caption>{caption}</caption>\n<thead><tr>{header}</tr></thead>\n"
        f"<tbody>\n{body}\n</tbody></table>\n{notes}\n</body></html>\n"
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


# Every table the workflow writes, by file name: builder(frame, baseline device).
TABLES: dict[str, Callable[[pd.DataFrame, str], tuple[pd.DataFrame, list[str]]]] = {
    "train_time_per_batch": lambda frame, baseline: comparison_table(frame, "train"),
    "kernel_time": lambda frame, baseline: comparison_table(frame, "kernel"),
    "train_speedup": lambda frame, baseline: speedup_table(frame, "train", baseline),
    "kernel_speedup": lambda frame, baseline: speedup_table(frame, "kernel", baseline),
    "train_precision": lambda frame, baseline: comparison_table(frame, "train", "precision"),
    "train_scaling": lambda frame, baseline: scaling_table(frame, "train"),
}

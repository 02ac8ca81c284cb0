"""Comparison tables in the style of Shi et al. (2016): rows x devices, median [95% CI].

One cell per (row, device). A cell that could not run says why (OOM, n/a,
failed) and points to a footnote with the reason, so a missing number is never
mistaken for a slow one; a cell with no record at all shows a dash. The best
(lowest) time in each row is set in bold.

`comparison_table` returns display strings; the numbers behind them, the bold
cells and the caption ride along in `table.attrs` so the writers can emit
Markdown, LaTeX and a CSV of plain numbers from the same table.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from accelbench.analysis import tidy
from accelbench.timing import CI_LEVEL

MISSING = "–"
# Columns of the CSV (long form, one line per table cell).
CSV_COLUMNS = ("row", "device", "status", "median", "ci_low", "ci_high", "unit", "best", "reason")


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


def _cells(
    rows: pd.DataFrame, devices: list[str], metric: str, unit: str | None
) -> list[dict[str, Any]]:
    """One dict per (row label, device), row-major: status, reason and the metric's numbers."""
    if rows.empty:
        return []
    by_cell = rows.set_index(["label", "device"])
    if not by_cell.index.is_unique:
        raise ValueError(
            "records with the same row label and device: "
            f"{sorted(set(by_cell.index[by_cell.index.duplicated()]))}"
        )
    cells = []
    for label in dict.fromkeys(rows["label"]):
        for device in devices:
            cell = {
                "row": label,
                "device": device,
                "status": "missing",
                "median": math.nan,
                "ci_low": math.nan,
                "ci_high": math.nan,
                "ci_level": math.nan,
                "unit": unit,
                "best": False,
                "reason": None,
            }
            if (label, device) in by_cell.index:
                record = by_cell.loc[(label, device)]
                cell["status"], cell["reason"] = record["status"], record["reason"]
                if record["status"] == "ok":
                    for field in ("median", "ci_low", "ci_high", "ci_level"):
                        cell[field] = float(record.get(f"{metric}_{field}", math.nan))
            cells.append(cell)
    return cells


def comparison_table(
    frame: pd.DataFrame, experiment: str = "train"
) -> tuple[pd.DataFrame, list[str]]:
    """(table of display strings, footnotes) for one experiment family.

    Rows are models (train) or kernels, labelled with the parameters that vary;
    columns are devices in natural order (cpu1, cpu2, cpu16, cuda1). The table's
    attrs hold `caption`, `best` ([row, device] pairs set in bold) and `cells`
    (one dict per cell with the plain numbers, the CSV's rows).
    """
    spec = SPECS[experiment]
    rows, constants = tidy.experiment_rows(frame, experiment)
    unit = frame.attrs.get("units", {}).get(f"{spec.metric}_median")
    caption = f"{spec.title}{f' ({unit})' if unit else ''}, median [95% CI]"
    if constants:
        caption += "; " + ", ".join(constants)
    labels = list(dict.fromkeys(rows["label"]))
    devices = tidy.natural_devices(rows["device"]) if labels else []
    cells = _cells(rows, devices, spec.metric, unit)
    by_row = {label: [cell for cell in cells if cell["row"] == label] for label in labels}
    exponents = {}
    for label, row_cells in by_row.items():
        medians = [cell["median"] for cell in row_cells]
        fastest = min((median for median in medians if math.isfinite(median)), default=None)
        for cell in row_cells:
            cell["best"] = cell["median"] == fastest
        exponents[label] = shared_exponent(medians)

    markers: dict[tuple[str, str], str] = {}
    places: dict[tuple[str, str], list[str]] = {}
    text = pd.DataFrame(
        MISSING,
        index=pd.Index(labels, name=spec.row_header, dtype="str"),
        columns=pd.Index(devices, name="device", dtype="str"),
        dtype="str",
    )
    for cell in cells:
        row, device, status = cell["row"], cell["device"], cell["status"]
        if status == "ok":
            text.loc[row, device] = format_with_ci(
                cell["median"], cell["ci_low"], cell["ci_high"], exponents[row]
            )
        elif status in tidy.STATUS_TEXT:
            key = (status, " ".join(str(cell["reason"]).split()))
            marker = markers.setdefault(key, _marker(len(markers)))
            places.setdefault(key, []).append(f"{row} on {device}")
            text.loc[row, device] = f"{tidy.STATUS_TEXT[status]} ({marker})"

    footnotes = [
        f"({marker}) {tidy.STATUS_TEXT[status]}: {reason} [{'; '.join(places[status, reason])}]"
        for (status, reason), marker in markers.items()
    ]
    weak = [
        f"{cell['row']} on {cell['device']} ({cell['ci_level']:.0%})"
        for cell in cells
        if cell["ci_level"] < CI_LEVEL
    ]
    if weak:
        footnotes.append(
            "Too few samples for a 95% interval; the interval shown is "
            f"[min, max] at the level in parentheses: {'; '.join(weak)}"
        )
    text.attrs = {
        "caption": caption,
        "best": [[cell["row"], cell["device"]] for cell in cells if cell["best"]],
        "cells": [{key: cell[key] for key in CSV_COLUMNS} for cell in cells],
    }
    return text, footnotes


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
}
_LATEX_PATTERN = re.compile("|".join(re.escape(char) for char in _LATEX_SPECIAL))
_MARKDOWN_PATTERN = re.compile(r"([\\|*_])")


def latex_escape(text: str) -> str:
    return _LATEX_PATTERN.sub(lambda match: _LATEX_SPECIAL[match.group()], text)


def markdown_escape(text: str) -> str:
    return _MARKDOWN_PATTERN.sub(r"\\\1", text)


def _bold_cells(table: pd.DataFrame) -> set[tuple[str, str]]:
    return {(row, device) for row, device in table.attrs.get("best", [])}


def to_markdown(table: pd.DataFrame, footnotes: list[str]) -> str:
    """Pipe table with a pandoc `Table:` caption, footnotes as paragraphs below."""
    bold = _bold_cells(table)

    def cell(row: str, device: str) -> str:
        text = markdown_escape(table.loc[row, device])
        return f"**{text}**" if (row, device) in bold else text

    header = [markdown_escape(str(table.index.name)), *map(markdown_escape, table.columns)]
    lines = [
        f"Table: {markdown_escape(table.attrs.get('caption', ''))}",
        "",
        "| " + " | ".join(header) + " |",
        "|:---|" + "---:|" * len(table.columns),
    ]
    lines += [
        "| "
        + " | ".join([markdown_escape(row)] + [cell(row, device) for device in table.columns])
        + " |"
        for row in table.index
    ]
    for note in footnotes:
        lines += ["", markdown_escape(note)]
    return "\n".join(lines) + "\n"


def to_latex(table: pd.DataFrame, footnotes: list[str], label: str) -> str:
    """A booktabs table float, ready for \\input; footnotes in small type below the rule."""
    bold = _bold_cells(table)

    def cell(row: str, device: str) -> str:
        text = latex_escape(table.loc[row, device])
        return rf"\textbf{{{text}}}" if (row, device) in bold else text

    header = [latex_escape(str(table.index.name)), *map(latex_escape, table.columns)]
    lines = [
        r"\begin{table}[htbp]",
        r"\centering",
        rf"\caption{{{latex_escape(table.attrs.get('caption', ''))}}}",
        rf"\label{{tab:{label}}}",
        rf"\begin{{tabular}}{{l{'r' * len(table.columns)}}}",
        r"\toprule",
        " & ".join(header) + r" \\",
        r"\midrule",
    ]
    lines += [
        " & ".join([latex_escape(row)] + [cell(row, device) for device in table.columns]) + r" \\"
        for row in table.index
    ]
    lines += [r"\bottomrule", r"\end{tabular}"]
    if footnotes:
        lines += [
            r"\par\smallskip",
            r"\begin{minipage}{\linewidth}\footnotesize",
            " \\\\\n".join(latex_escape(note) for note in footnotes),
            r"\end{minipage}",
        ]
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def write_table(
    table: pd.DataFrame, footnotes: list[str], stem: str | os.PathLike[str]
) -> list[Path]:
    """Write `<stem>.md`, `<stem>.tex` and `<stem>.csv`; returns the paths.

    The CSV is long form, one line per cell with the columns in CSV_COLUMNS:
    plain numbers (median, ci_low, ci_high in `unit`) for cells that ran, NaN
    and the status (oom, unavailable, failed, missing) with its reason otherwise.
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_name(stem.name + suffix) for suffix in (".md", ".tex", ".csv")]
    paths[0].write_text(to_markdown(table, footnotes), encoding="utf-8")
    paths[1].write_text(to_latex(table, footnotes, stem.name), encoding="utf-8")
    pd.DataFrame(table.attrs.get("cells", []), columns=list(CSV_COLUMNS)).to_csv(
        paths[2], index=False
    )
    return paths

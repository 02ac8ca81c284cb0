"""The table model: which rows and columns a comparison table shows, the unit each row
reads in, each cell's text, the bold winners, the marks (busy, imprecise, above the ideal)
and the footnotes that explain every dash and mark, computed once for all writers.

A model is a DataFrame of display strings (rows x columns) whose `attrs` hold the caption,
the bold cells, the (rows, columns) blocks it is printed in, the legend of its marks and
the plain numbers of every cell (the CSV's lines); the footnotes travel beside it. The
writers (render_markdown, render_latex, render_html) only lay that out.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any

import pandas as pd

from accelbench.analysis import ratios, tidy
from accelbench.analysis.tables.numbers import (
    MISSING,
    format_with_ci,
    readable_unit,
    shared_exponent,
)
from accelbench.measuring.statistics import CI_LEVEL

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
    "unpaired",
    "reason",
)
# A number measured on a busy machine (record conditions.busy) keeps its cell, marked.
BUSY_MARK = "†"
BUSY_NOTE = (
    "measured beside other load, or in a stretch the host ran slower than around it "
    "(the number may be too slow); the summary lists these cells"
)
# A number whose interval is clearly wider than its machine allows (tidy column imprecise)
# keeps its cell, marked.
IMPRECISE_MARK = "◊"
IMPRECISE_NOTE = (
    "less precise than this machine allows: the interval is clearly wider than those of the "
    "other cells measured on the same kind of device here, or spans more than a factor of 2; "
    "the summary lists these cells, each with why"
)
# A ratio whose two cells were not measured together (analysis.paired), in a table whose
# other ratios are paired: its interval comes from the two cells' own, and is wider.
UNPAIRED_MARK = "°"
UNPAIRED_NOTE = (
    "not measured together: the interval comes from the two cells' own 95% intervals "
    "(level at least 90%), not from their ratios round by round"
)
# A speedup above N on N devices (efficiency above 1) is possible (caches), but suspect.
ABOVE_IDEAL_MARK = "‡"
ABOVE_IDEAL_NOTE = (
    "above the ideal (a speedup of N on N threads or GPUs, efficiency 1): "
    "caches or a slow baseline can do that; check before quoting it"
)
MISSING_NOTE = (
    f"{MISSING} no record: the cell is not in the grid, or was left out of it (the run's "
    "list of excluded cells says why); a cell that ran and failed says so"
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

# Record reasons name some settings by their configuration keys; a note says what they
# mean (pattern, words).
SETTING_WORDS = (
    (re.compile(r"\bmax_call_s = (\S+) s\b"), r"the limit of \1 s per call"),
    (re.compile(r"\bnaive size limit\b"), "the size limit of the plain Python loops"),
)

Cell = dict[str, Any]
Place = tuple[str, str]
Units = dict[str, tuple[str | None, float]]


def _marker(index: int) -> str:
    """Footnote markers a, b, ..., z, aa, ab, ..."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return letters


def _blank_cell(row: str, column: str, unit: str | None) -> Cell:
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
        "unpaired": False,
        "text": None,
    }


def text_cell(row: str, column: str, text: str) -> Cell:
    """A cell that holds words (what ran, say), printed as they are: never bold, never a
    dash, no number in the CSV."""
    return _blank_cell(row, column, None) | {"status": "ok", "text": text}


def cell_grid(
    found: pd.DataFrame, labels: list[str], columns: list[str], across: str, unit: str | None
) -> list[Cell]:
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
                    cell["unpaired"] = tidy.flagged(record.get("unpaired"))
            cells.append(cell)
    return cells


def separated(best: Cell, runner_up: Cell, higher_is_better: bool) -> bool:
    """Whether the best cell's interval clears the runner-up's, so that bold means something."""
    if higher_is_better:
        return best["ci_low"] > runner_up["ci_high"]
    return best["ci_high"] < runner_up["ci_low"]


def _mark_best(row_cells: list[Cell], higher_is_better: bool) -> None:
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


def _shown_blocks(
    by_place: dict[Place, Cell], labels: list[str], columns: list[str]
) -> list[tuple[list[str], list[str]]]:
    """The blocks of the rows and columns that hold more than dashes."""
    filled = {
        label: [
            column for column in columns if by_place[label, column]["status"] not in DASH_STATUSES
        ]
        for label in labels
    }
    return blocks({label: present for label, present in filled.items() if present}, columns)


def reason_in_words(status: str, reason: str) -> str:
    """A record's reason as a note says it: without the status word it repeats (the note
    names the status) and with the settings it names said in words."""
    said = NOTE_TEXT.get(status, status)
    text = re.sub(rf"(^|: ){re.escape(said)}: ", r"\1", " ".join(reason.split()))
    for pattern, words in SETTING_WORDS:
        text = pattern.sub(words, text)
    return text


def _reason_key(cell: Cell) -> tuple[str, str]:
    """(status, reason in words): cells with the same key share a note."""
    return cell["status"], reason_in_words(cell["status"], str(cell["reason"]))


def _number_text(cell: Cell, factor: float, exponent: int) -> str:
    """The number of a cell that ran, in the table's unit, with its marks."""
    return (
        format_with_ci(
            *(cell[field] / factor for field in ("median", "ci_low", "ci_high")), exponent
        )
        + (BUSY_MARK if cell["busy"] else "")
        + (IMPRECISE_MARK if cell["imprecise"] else "")
        + (ABOVE_IDEAL_MARK if cell["above_ideal"] else "")
        + (UNPAIRED_MARK if cell["unpaired"] else "")
    )


def _fill_texts(
    text: pd.DataFrame, displayed: list[Cell], factors: dict[str, float], exponents: dict[str, int]
) -> list[str]:
    """Write each shown cell's text into `text`; returns the lettered footnotes that say why
    a shown cell has no number, one per (status, reason), in the order they are first seen
    (the cells carry the letter)."""
    markers: dict[tuple[str, str], str] = {}
    for cell in displayed:
        row, column, status = cell["row"], cell["column"], cell["status"]
        if cell.get("text") is not None:
            text.loc[row, column] = cell["text"]
        elif status == "ok":
            text.loc[row, column] = _number_text(cell, factors[row], exponents[row])
        elif status in CELL_TEXT:
            marker = markers.setdefault(_reason_key(cell), _marker(len(markers)))
            text.loc[row, column] = f"{CELL_TEXT[status]} ({marker})"
    return [
        f"({marker}) {NOTE_TEXT[status]}: {reason}" for (status, reason), marker in markers.items()
    ]


def _cells(count: int) -> str:
    return f"{count} cell{'s' if count != 1 else ''}"


def _hidden_notes(cells: list[Cell], displayed: list[Cell]) -> list[str]:
    """Why the cells of the rows and columns left out (all dashes) hold no number: one line
    per reason, with how many cells it explains (the summary names each)."""
    hidden: dict[tuple[str, str], int] = {}
    on_show = {id(cell) for cell in displayed}
    for cell in cells:
        if cell["status"] in CELL_TEXT and id(cell) not in on_show:
            key = _reason_key(cell)
            hidden[key] = hidden.get(key, 0) + 1
    return [
        f"Not shown, {NOTE_TEXT[status]}: {reason} ({_cells(count)})"
        for (status, reason), count in hidden.items()
    ]


def _mark_notes(cells: list[Cell]) -> list[str]:
    """What the busy, imprecise and above-ideal marks mean, one line each where a cell
    carries it; the cells themselves are marked, and the summary lists them."""
    return [
        f"{mark} {note}"
        for flag, mark, note in (
            ("busy", BUSY_MARK, BUSY_NOTE),
            ("imprecise", IMPRECISE_MARK, IMPRECISE_NOTE),
            ("above_ideal", ABOVE_IDEAL_MARK, ABOVE_IDEAL_NOTE),
            ("unpaired", UNPAIRED_MARK, UNPAIRED_NOTE),
        )
        if any(cell[flag] for cell in cells)
    ]


def _weak_interval_notes(cells: list[Cell], expected_level: float) -> list[str]:
    """How many cells' intervals are at a lower level than asked (too few samples)."""
    levels = [cell["ci_level"] for cell in cells if cell["ci_level"] < expected_level]
    if not levels:
        return []
    return [
        f"Too few samples for a {expected_level:.0%} interval in {_cells(len(levels))}: "
        f"theirs have a level of {min(levels):.0%} or more (the summary lists them)"
    ]


def _legend(
    by_place: dict[Place, Cell],
    displayed: list[Cell],
    labels: list[str],
    columns: list[str],
    best: bool,
) -> list[str]:
    """What the dashes and the bold of the printed table mean, where it has them."""
    legend = []
    if any(cell["status"] == "missing" for cell in displayed):
        legend.append(MISSING_NOTE)
    if best and any(
        sum(math.isfinite(by_place[row, c]["median"]) for c in columns) > 1 for row in labels
    ):
        legend.append(BOLD_NOTE)
    return legend


def row_units(cells: list[Cell], unit: str | None) -> Units:
    """Each row's unit and base units per unit (numbers.readable_unit of its medians), so
    the numbers compared along a row read in one unit; a row without numbers has none."""
    medians: dict[str, list[float]] = {}
    for cell in cells:
        medians.setdefault(cell["row"], []).append(cell["median"])
    return {
        row: readable_unit(unit, values) if any(map(math.isfinite, values)) else (None, 1.0)
        for row, values in medians.items()
    }


def shared_unit(units: Units) -> str | None:
    """The unit of every row that has one, for the caption to name; None where rows differ
    (each row's name says its own) or none has a unit."""
    names = {name for name, _ in units.values() if name}
    return names.pop() if len(names) == 1 else None


def _row_names(labels: list[str], units: Units) -> dict[str, str]:
    """What each row is called: its label, and its unit where the rows' units differ."""
    if shared_unit(units) or not any(name for name, _ in units.values()):
        return {label: label for label in labels}
    return {
        label: f"{label} ({name})" if (name := units.get(label, (None, 1.0))[0]) else label
        for label in labels
    }


def _row_scales(
    by_place: dict[Place, Cell], labels: list[str], columns: list[str], units: Units
) -> tuple[dict[str, float], dict[str, int]]:
    """Per row: the base units per unit of its numbers, and the power of ten they share."""
    factors = {label: units.get(label, (None, 1.0))[1] for label in labels}
    exponents = {
        label: shared_exponent(
            [by_place[label, column]["median"] / factors[label] for column in columns]
        )
        for label in labels
    }
    return factors, exponents


def build_table(
    cells: list[Cell],
    labels: list[str],
    columns: list[str],
    *,
    row_header: str,
    column_header: str,
    caption: str,
    higher_is_better: bool = False,
    expected_level: float = CI_LEVEL,
    units: Units | None = None,
    empty: str = "No records.",
    ideal: dict[str, float] | None = None,
    best: bool = True,
) -> tuple[pd.DataFrame, list[str]]:
    """The model of a grid of cells: display strings, bold cells, blocks and footnotes; a
    table without rows gets the footnote `empty`, saying why it has none. A row's numbers
    are divided by its `units` factor (row_units), its name carrying the unit where the
    rows' units differ. A cell above its column's `ideal` value is marked. Without `best`
    (columns of different quantities) no cell is set in bold."""
    ideal, units = ideal or {}, units or {}
    by_place = {(cell["row"], cell["column"]): cell for cell in cells}
    for label in labels if best else []:
        _mark_best([by_place[label, column] for column in columns], higher_is_better)
    factors, exponents = _row_scales(by_place, labels, columns, units)
    shown = _shown_blocks(by_place, labels, columns)
    displayed = [by_place[row, column] for rows, cols in shown for row in rows for column in cols]
    for cell in displayed:
        if cell["status"] == "ok":
            cell["above_ideal"] = cell["median"] > ideal.get(cell["column"], math.inf)
    text = pd.DataFrame(
        MISSING,
        index=pd.Index([row for rows, _ in shown for row in rows], name=row_header, dtype="str"),
        columns=pd.Index(
            [column for column in columns if any(column in cols for _, cols in shown)],
            name=column_header,
            dtype="str",
        ),
        dtype="str",
    )
    footnotes = _fill_texts(text, displayed, factors, exponents)
    footnotes += _hidden_notes(cells, displayed)
    footnotes += _mark_notes(cells)
    footnotes += [] if labels else [empty]
    footnotes += _weak_interval_notes(cells, expected_level)
    names = _row_names(labels, units)
    text = text.rename(index=names)
    text.attrs = {
        "caption": caption,
        "best": [[names[cell["row"]], cell["column"]] for cell in cells if cell["best"]],
        "cells": [{key: cell[key] for key in CSV_COLUMNS} for cell in cells],
        "blocks": [[[names[row] for row in rows], cols] for rows, cols in shown],
        "legend": _legend(by_place, displayed, labels, columns, best),
    }
    return text, footnotes

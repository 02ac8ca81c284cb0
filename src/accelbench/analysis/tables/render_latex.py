"""A table model as a booktabs float: each block a tabular, medians aligned at the decimal
point, parts too wide for the text width split off and laid out on pages as
accelbench.analysis.latex_pages says (a column or both, continued floats)."""

from __future__ import annotations

import re

import pandas as pd

from accelbench.analysis.latex_pages import (
    COLUMN_SEP_PT,
    TEXT_WIDTH_PT,
    Tabular,
    column_width,
    latex_float,
    latex_parts,
)
from accelbench.analysis.tables.layout import (
    BlockColumn,
    block_columns,
    bold_cells,
    header_lines,
    table_blocks,
    table_notes,
)

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
    "≤": r"$\leq$",
    # The default (OT1) and T1 text fonts set < and > as other glyphs (¡, ¿).
    "<": "$<$",
    ">": "$>$",
    "†": r"\textdagger{}",
    "◊": r"$\diamond$",
    "‡": r"\textdaggerdbl{}",
}
_LATEX_PATTERN = re.compile("|".join(re.escape(char) for char in _LATEX_SPECIAL))
# Superscript digits (a size's 2²⁰, accelbench.analysis.sizes), which the text fonts lack.
_SUPERSCRIPT = re.compile("[⁰¹²³⁴⁵⁶⁷⁸⁹]+")
_SUPERSCRIPT_DIGITS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")


def latex_escape(text: str) -> str:
    """`text` as LaTeX text: its special characters escaped, the characters the text fonts
    lack set as math or markup."""
    text = _LATEX_PATTERN.sub(lambda match: _LATEX_SPECIAL[match.group()], text)
    return _SUPERSCRIPT.sub(
        lambda match: rf"\textsuperscript{{{match.group().translate(_SUPERSCRIPT_DIGITS)}}}",
        text,
    )


def _bold(text: str, strong: bool) -> str:
    return rf"\textbf{{{text}}}" if strong and text else text


def _latex_cell(column: BlockColumn, index: int, strong: bool) -> str:
    """One cell's LaTeX: the median with its invisible pad & the interval with its marks, in
    a column of numbers; a cell there without a number spans both."""
    text = latex_escape(column.texts[index])
    number = column.numbers[index]
    if not column.has_numbers:
        return _bold(text, strong)
    if number is None:
        return rf"\multicolumn{{2}}{{c}}{{{_bold(text, strong)}}}"
    pad = column.pads[index]
    phantom = rf"\phantom{{{latex_escape(pad)}}}" if pad else ""
    return (
        f"{_bold(latex_escape(number.median), strong)}{phantom} & "
        f"{_bold(latex_escape(number.interval), strong)}{latex_escape(number.marks)}"
    )


def _header(name: str) -> str:
    """A column's name; one of several lines, stacked in a tabular of its own."""
    lines = [latex_escape(line) for line in header_lines(name)]
    if len(lines) == 1:
        return lines[0]
    return r"\begin{tabular}[b]{@{}c@{}}" + r" \\ ".join(lines) + r"\end{tabular}"


def _column_spec(column: BlockColumn, width: float, key_width: float) -> tuple[str, str]:
    """(tabular column spec, header cell): two columns for numbers; a lone text column too
    wide for the text width beside the row labels wraps."""
    header = _header(column.name)
    if column.has_numbers:
        return r"r@{\ }l", rf"\multicolumn{{2}}{{c}}{{{header}}}"
    if key_width + width > TEXT_WIDTH_PT:
        return f"p{{{TEXT_WIDTH_PT - key_width - 2 * COLUMN_SEP_PT:.0f}pt}}", header
    return "r", header


def _printed_width(column: BlockColumn) -> float:
    """The width of a column: its header's widest line or its widest cell, medians padded as
    printed."""
    padded = [text + pad for text, pad in zip(column.texts, column.pads, strict=True)]
    return column_width([*header_lines(column.name), *padded])


def _latex_block(table: pd.DataFrame, rows: list[str], columns: list[str]) -> list[Tabular]:
    """The tabulars of one block. A column of numbers is two: the median, right-aligned with
    its decimal point lined up, and the interval; columns that do not fit the text width
    beside the row labels go to a further tabular, and a lone text column too wide wraps."""
    bold = bold_cells(table)
    laid_out = block_columns(table, rows, columns)
    widths = [_printed_width(column) for column in laid_out]
    key_width = column_width([str(table.index.name), *rows])
    tabulars = []
    for part in latex_parts(key_width, widths):
        specs = [_column_spec(laid_out[position], widths[position], key_width) for position in part]
        body = [
            [
                latex_escape(row),
                *(
                    _latex_cell(laid_out[position], index, (row, columns[position]) in bold)
                    for position in part
                ),
            ]
            for index, row in enumerate(rows)
        ]
        tabulars.append(
            Tabular(
                "l" + "".join(spec for spec, _ in specs),
                [latex_escape(str(table.index.name)), *(header for _, header in specs)],
                body,
                key_width + sum(widths[position] for position in part),
            )
        )
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
    notes = [latex_escape(note) for note in table_notes(table, footnotes)]
    return latex_float(caption, label, tabulars, notes)

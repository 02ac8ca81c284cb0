"""A table model as pandoc Markdown: pipe tables, one per block and each under its caption,
medians lined up at the decimal point beside their intervals. Bold is `**...**` around the
text alone: the padding stays outside, since a CommonMark parser closes no bold after a
space (a figure space included)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pandas as pd

from accelbench.analysis.tables.layout import (
    BlockColumn,
    block_caption,
    block_columns,
    bold_cells,
    decimal_pads,
    header_lines,
    table_blocks,
    table_notes,
)

_MARKDOWN_PATTERN = re.compile(r"([\\|*_])")
# Invisible in Markdown, as wide as a digit and as a decimal point: the padding that lines
# right-aligned numbers up at the point (LaTeX's \phantom).
FIGURE_SPACE, PUNCTUATION_SPACE = "\u2007", "\u2008"


def markdown_escape(text: str) -> str:
    return _MARKDOWN_PATTERN.sub(r"\\\1", text)


def _figure_spaces(pad: str) -> str:
    """A decimal pad set in figure spaces (a point or comma as a punctuation space)."""
    return "".join(PUNCTUATION_SPACE if char in ".," else FIGURE_SPACE for char in pad)


def markdown_pads(numbers: Sequence[str]) -> list[str]:
    """decimal_pads set in figure spaces (a point or comma as a punctuation space)."""
    return [_figure_spaces(pad) for pad in decimal_pads(numbers)]


def _strong(text: str, strong: bool) -> str:
    return f"**{text}**" if strong and text else text


def _column_cells(column: BlockColumn, strong: list[bool]) -> list[list[str]]:
    """The Markdown cells of one column, row by row: one per row for a column without
    numbers, else the padded median (or the text standing in for it) and the interval; the
    `strong` rows in bold, their padding outside it."""
    if not column.has_numbers:
        return [
            [_strong(markdown_escape(text), bold)]
            for text, bold in zip(column.texts, strong, strict=True)
        ]
    return [
        [
            _strong(markdown_escape(number.median), bold) + _figure_spaces(pad),
            _strong(markdown_escape(number.interval + number.marks), bold),
        ]
        if number
        else [_strong(markdown_escape(text), bold), ""]
        for number, text, pad, bold in zip(
            column.numbers, column.texts, column.pads, strong, strict=True
        )
    ]


def _markdown_block(table: pd.DataFrame, rows: list[str], columns: list[str]) -> list[str]:
    """The pipe table of one block. A column of numbers is two: the median, right-aligned and
    padded to line up at the decimal point, and its interval beside it, left-aligned; a
    cell without a number (a status, a dash) stands in the median's place."""
    bold = bold_cells(table)
    header, align = [markdown_escape(str(table.index.name))], ["|:---"]
    laid_out = block_columns(table, rows, columns)
    for column in laid_out:
        name = markdown_escape(", ".join(header_lines(column.name)))
        if column.has_numbers:
            header += [name, ""]
            align += ["|---:", "|:---"]
        else:
            header.append(name)
            align.append("|---:")
    cells = [
        _column_cells(column, [(row, column.name) in bold for row in rows]) for column in laid_out
    ]
    lines = ["| " + " | ".join(header) + " |", "".join(align) + "|"]
    for index, row in enumerate(rows):
        line = [markdown_escape(row)]
        for column_cells in cells:
            line += column_cells[index]
        lines.append("| " + " | ".join(line) + " |")
    return lines


def to_markdown(table: pd.DataFrame, footnotes: list[str]) -> str:
    """Pipe tables, one per block, each under a pandoc `Table:` caption (the table's, then
    continued), medians lined up at the decimal point beside their intervals, footnotes as
    paragraphs below; a table without rows is only the lines saying why."""
    notes = [markdown_escape(note) for note in table_notes(table, footnotes)]
    if table.index.empty:
        return "\n\n".join(notes) + "\n"
    caption = table.attrs.get("caption", "")
    blocks = [
        "\n".join(
            [
                f"Table: {markdown_escape(block_caption(caption, index))}",
                "",
                *_markdown_block(table, list(rows), list(columns)),
            ]
        )
        for index, (rows, columns) in enumerate(table_blocks(table))
    ]
    return "\n\n".join(blocks + notes) + "\n"

"""What every writer reads from a table model: its blocks and their captions, its bold
cells, its notes, and each block's columns with number cells split into median, interval
and marks and padded so that decimal points line up. Tables built elsewhere in the same
shape (the provenance summary) are laid out the same way. A column's name may break into
lines (HEADER_BREAK): LaTeX stacks them, HTML breaks there, Markdown (a header of one line)
joins them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

_NUMBER_CELL = re.compile(r"(?P<median>\S+) (?P<interval>\[[^\]]*\])(?P<marks>\S*)")
_INTEGER = re.compile(r"[-+]?[\d,]+")
# Where a column's name goes on in a line of its own.
HEADER_BREAK = "\n"


def header_lines(name: str) -> list[str]:
    """The lines of a column's name."""
    return name.split(HEADER_BREAK)


def decimal_pads(numbers: Sequence[str]) -> list[str]:
    """What each right-aligned number lacks after its integer part for the decimal points
    to line up: the end of the longest fraction, to be set invisibly (\\phantom)."""
    tails = [
        number[match.end() :] if (match := _INTEGER.match(number)) else "" for number in numbers
    ]
    widest = max(tails, key=len, default="")
    return [widest[len(tail) :] for tail in tails]


def bold_cells(table: pd.DataFrame) -> set[tuple[str, str]]:
    """The (row, column) places set in bold."""
    return {(row, column) for row, column in table.attrs.get("best", [])}


def table_blocks(table: pd.DataFrame) -> list[tuple[list[str], list[str]]]:
    """The (rows, columns) blocks a table is printed in; one block where it names none."""
    if table.index.empty:
        return []
    return [
        (rows, cols) for rows, cols in table.attrs.get("blocks", [[table.index, table.columns]])
    ]


def block_caption(caption: str, index: int) -> str:
    """The caption of a table's `index`-th block: the table's, then continued, so that no
    block stands without one."""
    return caption if index == 0 else f"{caption} (continued)"


def table_notes(table: pd.DataFrame, footnotes: list[str]) -> list[str]:
    """The footnotes, then what the marks of the printed table mean."""
    return [*footnotes, *table.attrs.get("legend", [])]


@dataclass(frozen=True)
class NumberText:
    """A number cell's text in its parts: `1.23 [1.20, 1.27]†` is 1.23, [1.20, 1.27], †."""

    median: str
    interval: str
    marks: str


@dataclass(frozen=True)
class BlockColumn:
    """One column of a block as it is printed. A column with numbers is two columns (the
    median, right-aligned, and its interval); its cells without a number (a status, a dash)
    stand in the median's place. `pads` is what each median lacks for the decimal points to
    line up ("" where a cell has no number)."""

    name: str
    texts: list[str]
    numbers: list[NumberText | None]
    pads: list[str]

    @property
    def has_numbers(self) -> bool:
        return any(self.numbers)


def _split_number(text: str) -> NumberText | None:
    match = _NUMBER_CELL.fullmatch(text)
    return NumberText(match["median"], match["interval"], match["marks"]) if match else None


def block_columns(table: pd.DataFrame, rows: list[str], columns: list[str]) -> list[BlockColumn]:
    """The columns of one block, each cell split and padded for printing."""
    laid_out = []
    for column in columns:
        texts = [table.loc[row, column] for row in rows]
        numbers = [_split_number(text) for text in texts]
        pads = iter(decimal_pads([number.median for number in numbers if number]))
        laid_out.append(
            BlockColumn(
                column, texts, numbers, [next(pads) if number else "" for number in numbers]
            )
        )
    return laid_out

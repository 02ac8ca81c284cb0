"""Plain tables (a caption, text columns, then number columns, notes below) in four forms.

For analysis tables that are not a rows x devices comparison (the studies' tables,
accelbench.studies, and what the command line prints). Markdown and LaTeX (booktabs)
show the display strings; the CSV holds the plain numbers behind them, so
nothing read from the CSV has been rounded for display. Plain text, for a
terminal, shows the display strings as they are: no markup, nothing escaped.
A LaTeX table wider than the text width is split into parts that each repeat
the key columns; a table without rows is only the lines that say why.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from accelbench.analysis.latex_pages import Tabular, column_width, latex_float, latex_parts
from accelbench.analysis.tables.layout import decimal_pads
from accelbench.analysis.tables.render_latex import latex_escape
from accelbench.analysis.tables.render_markdown import markdown_escape, markdown_pads

_NUMBER = re.compile(r"[-+]?[\d,]+(\.\d+)?")


def to_markdown(display: pd.DataFrame, caption: str, notes: list[str], text_columns: int) -> str:
    """Pipe table with a pandoc `Table:` caption; the first `text_columns` align left."""
    if display.empty:
        return "\n\n".join(markdown_escape(note) for note in notes) + "\n"
    align = ["|:---"] * text_columns + ["|---:"] * (len(display.columns) - text_columns)
    lines = [
        f"Table: {markdown_escape(caption)}",
        "",
        "| " + " | ".join(markdown_escape(str(name)) for name in display.columns) + " |",
        "".join(align) + "|",
    ]
    columns = [
        [markdown_escape(str(value)) for value in display[name]]
        if index < text_columns
        else _markdown_cells([str(value) for value in display[name]])
        for index, name in enumerate(display.columns)
    ]
    lines += ["| " + " | ".join(row) + " |" for row in zip(*columns, strict=True)]
    for note in notes:
        lines += ["", markdown_escape(note)]
    return "\n".join(lines) + "\n"


def to_text(
    display: pd.DataFrame, caption: str, notes: list[str], text_columns: int, width: int = 100
) -> str:
    """Aligned columns under a caption, notes wrapped to `width`; the first `text_columns`
    align left."""
    header = [str(name) for name in display.columns]
    rows = [[str(value) for value in row] for row in display.itertuples(index=False)]
    widths = [max(map(len, column)) for column in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        aligned = [
            cell.ljust(size) if index < text_columns else cell.rjust(size)
            for index, (cell, size) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(aligned).rstrip()

    lines = [caption, "", line(header), line(["-" * size for size in widths])]
    lines += [line(row) for row in rows]
    for note in notes:
        lines += ["", textwrap.fill(note, width, break_long_words=False, break_on_hyphens=False)]
    return "\n".join(lines) + "\n"


def _aligned(column: list[str], escape: Callable[[str], str], pad) -> list[str]:
    """A right-aligned column escaped, its plain numbers padded to line up at the point:
    `pad` turns the numbers into what each lacks, set invisibly in the format."""
    numbers = [index for index, text in enumerate(column) if _NUMBER.fullmatch(text)]
    pads = dict(zip(numbers, pad([column[index] for index in numbers]), strict=True))
    return [escape(text) + pads.get(index, "") for index, text in enumerate(column)]


def _markdown_cells(column: list[str]) -> list[str]:
    return _aligned(column, markdown_escape, markdown_pads)


def _latex_cells(column: list[str]) -> list[str]:
    def phantoms(numbers: list[str]) -> list[str]:
        return [rf"\phantom{{{pad}}}" if pad else "" for pad in decimal_pads(numbers)]

    return _aligned(column, latex_escape, phantoms)


def to_latex(
    display: pd.DataFrame,
    caption: str,
    notes: list[str],
    text_columns: int,
    label: str,
    key_columns: int | None = None,
) -> str:
    """A booktabs table float, ready for \\input; notes in small type below the rule.

    Columns that do not fit the text width beside the first `key_columns` (by
    default the text columns) go to a further tabular that repeats those.
    """
    keys = text_columns if key_columns is None else key_columns
    names = [str(name) for name in display.columns]
    texts = [[str(value) for value in display[name]] for name in display.columns]
    cells = [
        [latex_escape(text) for text in column] if index < text_columns else _latex_cells(column)
        for index, column in enumerate(texts)
    ]
    widths = [column_width([name, *column]) for name, column in zip(names, texts, strict=True)]
    tabulars = []
    if not display.empty:
        for part in latex_parts(sum(widths[:keys]), widths[keys:]):
            chosen = [*range(keys), *(keys + index for index in part)]
            spec = "".join("l" if index < text_columns else "r" for index in chosen)
            header = [latex_escape(names[index]) for index in chosen]
            rows = [[cells[index][row] for index in chosen] for row in range(len(display))]
            width = sum(widths[index] for index in chosen)
            tabulars.append(Tabular(spec, header, rows, width))
    notes = [latex_escape(note) for note in notes]
    return latex_float(latex_escape(caption), label, tabulars, notes)


def write(
    display: pd.DataFrame,
    numbers: pd.DataFrame,
    caption: str,
    notes: list[str],
    stem: str | os.PathLike[str],
    text_columns: int = 1,
    key_columns: int | None = None,
) -> list[Path]:
    """Write `<stem>.md` and `<stem>.tex` from `display`, `<stem>.csv` from `numbers`;
    `key_columns` as `to_latex` takes them."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_name(stem.name + suffix) for suffix in (".md", ".tex", ".csv")]
    paths[0].write_text(to_markdown(display, caption, notes, text_columns), encoding="utf-8")
    paths[1].write_text(
        to_latex(display, caption, notes, text_columns, stem.name, key_columns),
        encoding="utf-8",
    )
    numbers.to_csv(paths[2], index=False)
    return paths

"""Plain tables (a caption, text columns, then number columns, notes below) in four forms.

For analysis tables that are not a rows x devices comparison: queue wait by
request size, the offload break-even per kernel. Markdown and LaTeX (booktabs)
show the display strings; the CSV holds the plain numbers behind them, so
nothing read from the CSV has been rounded for display. Plain text, for a
terminal, shows the display strings as they are: no markup, nothing escaped.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pandas as pd

from accelbench.analysis.tables import latex_escape, latex_float, markdown_escape

# Characters the LaTeX text font lacks or sets wrongly, as math after escaping.
_LATEX_MATH = {
    "<": "$<$",
    ">": "$>$",
    "≥": r"$\geq$",
    "≤": r"$\leq$",
    "×": r"$\times$",
    "µ": r"$\mu$",
}


def _latex(text: str) -> str:
    text = latex_escape(text)
    for char, math in _LATEX_MATH.items():
        text = text.replace(char, math)
    return text


def to_markdown(display: pd.DataFrame, caption: str, notes: list[str], text_columns: int) -> str:
    """Pipe table with a pandoc `Table:` caption; the first `text_columns` align left."""
    align = ["|:---"] * text_columns + ["|---:"] * (len(display.columns) - text_columns)
    lines = [
        f"Table: {markdown_escape(caption)}",
        "",
        "| " + " | ".join(markdown_escape(str(name)) for name in display.columns) + " |",
        "".join(align) + "|",
    ]
    lines += [
        "| " + " | ".join(markdown_escape(str(value)) for value in row) + " |"
        for row in display.itertuples(index=False)
    ]
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


def to_latex(
    display: pd.DataFrame, caption: str, notes: list[str], text_columns: int, label: str
) -> str:
    """A booktabs table float, ready for \\input; notes in small type below the rule."""
    spec = "l" * text_columns + "r" * (len(display.columns) - text_columns)
    header = [_latex(str(name)) for name in display.columns]
    rows = [[_latex(str(value)) for value in row] for row in display.itertuples(index=False)]
    notes = [_latex(note) for note in notes]
    return latex_float(_latex(caption), label, spec, header, rows, notes)


def write(
    display: pd.DataFrame,
    numbers: pd.DataFrame,
    caption: str,
    notes: list[str],
    stem: str | os.PathLike[str],
    text_columns: int = 1,
) -> list[Path]:
    """Write `<stem>.md` and `<stem>.tex` from `display`, `<stem>.csv` from `numbers`."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_name(stem.name + suffix) for suffix in (".md", ".tex", ".csv")]
    paths[0].write_text(to_markdown(display, caption, notes, text_columns), encoding="utf-8")
    paths[1].write_text(
        to_latex(display, caption, notes, text_columns, stem.name), encoding="utf-8"
    )
    numbers.to_csv(paths[2], index=False)
    return paths

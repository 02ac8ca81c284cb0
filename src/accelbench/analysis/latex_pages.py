"""How a LaTeX table is laid out on paper: widths, parts, floats, pages.

A table is one or more tabulars (the parts of a table too wide for the text
width, each repeating the key columns, or its blocks of rows), each part after the
first under a line "Table N (continued)". The float that holds them spans both
columns of a two-column paper (`table*`) where a part is wider than one column,
and a table taller than a page goes on in further floats, its header repeated,
captioned "(continued)" under the same number. In a one-column paper `table*`
is an ordinary table. Widths and heights are estimates from character counts at
the table font (\\small of a 10 pt paper); the paper-ready tests compile every
table with pdflatex to hold them to it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Page geometry: a 6.5 in text width, one column of a two-column paper (3.33 in), a
# 9 in text height less the float's own spacing; glyphs at 10 pt (0.5 em on average;
# digits are exactly that wide) and \tabcolsep on either side of every column.
TEXT_WIDTH_PT = 469.0
COLUMN_WIDTH_PT = 240.0
TEXT_HEIGHT_PT = 600.0
CHAR_PT = 5.0
COLUMN_SEP_PT = 12.0
# Heights: a \small row, booktabs' three rules with their spacing, a caption of two lines
# with its skip, the gap between two parts with the line that names the second, a
# \footnotesize line of notes and its glyphs.
ROW_PT = 11.0
RULES_PT = 14.0
CAPTION_PT = 36.0
PART_GAP_PT = 8.0
CONTINUED_PT = PART_GAP_PT + ROW_PT
NOTE_LINE_PT = 9.5
NOTE_CHAR_PT = 4.2
# Fewer rows than this do not start a part at the foot of a float; they go on in the next.
MIN_ROWS = 3


def text_width(text: str) -> float:
    """Estimated width in points of `text` set in the table font."""
    return CHAR_PT * len(text)


def column_width(texts: Sequence[str]) -> float:
    """Estimated width in points of a column holding `texts` (its header among them)."""
    return max(map(text_width, texts), default=0.0) + 2 * COLUMN_SEP_PT


def latex_parts(
    key_width: float, widths: Sequence[float], limit: float = TEXT_WIDTH_PT
) -> list[list[int]]:
    """Indices of the columns in each part of a table split to fit `limit` points: as many
    as fit beside the key columns repeated in every part (`key_width`), at least one."""
    parts: list[list[int]] = []
    used = math.inf
    for index, width in enumerate(widths):
        if used + width > limit:
            parts.append([])
            used = key_width
        parts[-1].append(index)
        used += width
    return parts


@dataclass(frozen=True)
class Tabular:
    """One part of a table: its column spec, header and rows (cells already escaped), and
    its estimated width in points."""

    spec: str
    header: list[str]
    rows: list[list[str]]
    width: float


def latex_tabular(tabular: Tabular, rows: list[list[str]] | None = None) -> list[str]:
    """A booktabs tabular of `tabular`'s rows (or of `rows`, some of them)."""
    return [
        rf"\begin{{tabular}}{{{tabular.spec}}}",
        r"\toprule",
        " & ".join(tabular.header) + r" \\",
        r"\midrule",
        *(" & ".join(row) + r" \\" for row in (tabular.rows if rows is None else rows)),
        r"\bottomrule",
        r"\end{tabular}",
    ]


def _notes_height(notes: list[str], width: float) -> float:
    per_line = max(1, int(width / NOTE_CHAR_PT))
    lines = sum(math.ceil(max(1, len(note)) / per_line) for note in notes)
    return lines * NOTE_LINE_PT + PART_GAP_PT


def _pages(tabulars: list[Tabular]) -> list[list[tuple[Tabular, list[list[str]]]]]:
    """The (part, rows) pieces of each float: as many rows as fit a page, in order."""
    pages: list[list[tuple[Tabular, list[list[str]]]]] = [[]]
    used = CAPTION_PT
    for tabular in tabulars:
        rows = tabular.rows
        while rows:
            gap = CONTINUED_PT if pages[-1] else 0.0
            fits = int((TEXT_HEIGHT_PT - used - gap - RULES_PT) // ROW_PT) - 1  # the header
            if pages[-1] and fits < min(len(rows), MIN_ROWS):
                pages.append([])
                used = CAPTION_PT
                continue
            taken = rows[: max(fits, 1)]
            pages[-1].append((tabular, taken))
            used += gap + RULES_PT + ROW_PT * (len(taken) + 1)
            rows = rows[len(taken) :]
    return pages


# What names a further part of a table in its float: the float's own number, continued.
CONTINUED_LINE = r"Table~\thetable{} (continued)\par\smallskip"


def latex_float(caption: str, label: str, tabulars: list[Tabular], notes: list[str]) -> str:
    """Table floats of the tabulars stacked (the parts of one table), ready for \\input
    with booktabs loaded: `table*` where a part is wider than a column, each further part
    under CONTINUED_LINE, further floats "(continued)" where the rows do not fit a page,
    notes in small type below the last;
    without tabulars, one float whose notes say why there is no table."""
    wide = any(tabular.width > COLUMN_WIDTH_PT for tabular in tabulars)
    environment = "table*" if wide else "table"
    pages = _pages(tabulars)
    rows_height = sum(
        (CONTINUED_PT if index else 0.0) + RULES_PT + ROW_PT * (len(rows) + 1)
        for index, (_, rows) in enumerate(pages[-1])
    )
    width = TEXT_WIDTH_PT if wide else COLUMN_WIDTH_PT
    if pages[-1] and CAPTION_PT + rows_height + _notes_height(notes, width) > TEXT_HEIGHT_PT:
        pages.append([])  # the notes go on alone
    lines = []
    for number, page in enumerate(pages):
        lines += [rf"\begin{{{environment}}}[htbp]", r"\centering", r"\small"]
        if number:
            lines += [r"\addtocounter{table}{-1}", rf"\caption{{{caption} (continued)}}"]
        else:
            lines += [rf"\caption{{{caption}}}", rf"\label{{tab:{label}}}"]
        for index, (tabular, rows) in enumerate(page):
            if index:
                lines += [r"\par\medskip", CONTINUED_LINE]
            lines += latex_tabular(tabular, rows)
        if number == len(pages) - 1 and notes:
            if tabulars:
                lines += [
                    r"\par\smallskip",
                    r"\begin{minipage}{\linewidth}\footnotesize",
                    " \\\\\n".join(notes),
                    r"\end{minipage}",
                ]
            else:
                lines.append(" \\\\\n".join(notes))
        lines.append(rf"\end{{{environment}}}")
    return "\n".join(lines) + "\n"

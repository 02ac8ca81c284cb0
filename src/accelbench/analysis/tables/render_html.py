"""A table model as a standalone HTML page: one table per block, each with its caption (the
table's, then continued), booktabs-like rules, the footnotes below."""

from __future__ import annotations

import html

import pandas as pd

from accelbench.analysis.tables.layout import (
    block_caption,
    bold_cells,
    header_lines,
    table_blocks,
    table_notes,
)

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


def _body_rows(table: pd.DataFrame, rows: list[str], columns: list[str]) -> list[list[str]]:
    """Label and cells of `rows`, escaped, the best cells in bold."""
    bold = bold_cells(table)

    def cell(row: str, column: str) -> str:
        text = html.escape(table.loc[row, column])
        return f"<strong>{text}</strong>" if (row, column) in bold else text

    return [[html.escape(row), *(cell(row, column) for column in columns)] for row in rows]


def to_html(table: pd.DataFrame, footnotes: list[str]) -> str:
    """A standalone HTML page with the table (booktabs-like rules, one per block, each
    captioned) and its footnotes; a table without rows is its caption and the lines saying
    why."""
    caption = table.attrs.get("caption", "")
    parts = []
    for index, (rows, columns) in enumerate(table_blocks(table)):
        header = "".join(
            f"<th>{'<br>'.join(map(html.escape, header_lines(str(name))))}</th>"
            for name in (table.index.name, *columns)
        )
        body = "\n".join(
            "<tr>" + "".join(f"<td>{text}</td>" for text in row) + "</tr>"
            for row in _body_rows(table, rows, columns)
        )
        title = f"<caption>{html.escape(block_caption(caption, index))}</caption>\n"
        # A table wider than the window scrolls in its own box; the notes stay in view.
        parts.append(
            f'<div class="wide"><table>{title}<thead><tr>{header}</tr></thead>\n'
            f"<tbody>\n{body}\n</tbody></table></div>"
        )
    if not parts:
        parts.append(f"<p><b>{html.escape(caption)}</b></p>")
    notes = "\n".join(
        f'<p class="note">{html.escape(note)}</p>' for note in table_notes(table, footnotes)
    )
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(caption)}</title>'
        f"<style>{HTML_STYLE}</style></head><body>\n"
        + "\n".join(parts)
        + f"\n{notes}\n</body></html>\n"
    )

"""A table model written in every form: Markdown, LaTeX, a CSV of plain numbers, HTML."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from accelbench.analysis.tables.model import CSV_COLUMNS
from accelbench.analysis.tables.render_html import to_html
from accelbench.analysis.tables.render_latex import to_latex
from accelbench.analysis.tables.render_markdown import to_markdown


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

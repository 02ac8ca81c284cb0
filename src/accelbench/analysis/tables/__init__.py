"""Comparison tables in the style of Shi et al. (2016): rows x devices, median [95% CI].

One cell per (row, column). A cell that could not run says why (OOM, n/a,
failed) and points to a footnote with the reason, so a missing number is never
mistaken for a slow one. Rows and columns come from what was measured: a row or
column with nothing but dashes is left out (its reason in a note), and rows that
have numbers in different columns go to separate blocks, each with its own
header and captioned as the table's continuation, so that a table is not half
dashes; a dash that remains is explained in a note. The best cell of each row
(lowest time, highest speedup) is set in bold only where its interval clears the
runner-up's, and a speedup above the ideal (more than N on N devices) is marked.
Numbers keep the digits their interval supports and no more; the numbers read
side by side share a unit (s, ms, µs; J, mJ), the one of the largest, so that
none needs four digits before its point: a row of times across devices (named
in the caption where every row has the same, else beside the row's name), a
column of an energy table. Notes say in words what a record's reason names by a
setting's key. LaTeX tables are split into parts that fit the text width, with
decimal points aligned, and laid out on pages as accelbench.analysis.latex_pages
says (a column or both, continued floats).

The modules: `builders` gathers each table's cells from the tidy table (`headline` those
of the first table, the GPU against the CPU of the same machine; `machines` those of
several machines' records side by side), `model`
decides everything shown (rows, columns, blocks, texts, bold, marks, footnotes)
once, `numbers` formats the numbers, `layout` is what every writer reads from a
model, and `render_markdown`, `render_latex`, `render_html` and `write` only lay
it out. The names other modules use are re-exported here.
"""

from accelbench.analysis.tables.builders import (
    ENERGY_NOTE,
    ENERGY_SPECS,
    comparison_table,
    datasci_time_table,
    energy_table,
    ideal_speedups,
    node_scaling_table,
    scaling_table,
    speedup_table,
)
from accelbench.analysis.tables.headline import headline_table
from accelbench.analysis.tables.layout import HEADER_BREAK, decimal_pads
from accelbench.analysis.tables.machines import machines_table
from accelbench.analysis.tables.model import (
    ABOVE_IDEAL_MARK,
    ABOVE_IDEAL_NOTE,
    BOLD_NOTE,
    BUSY_MARK,
    BUSY_NOTE,
    CSV_COLUMNS,
    IMPRECISE_MARK,
    IMPRECISE_NOTE,
    MISSING_NOTE,
    separated,
)
from accelbench.analysis.tables.numbers import (
    MISSING,
    format_with_ci,
    readable_unit,
    shared_exponent,
)
from accelbench.analysis.tables.render_html import to_html
from accelbench.analysis.tables.render_latex import latex_escape, to_latex
from accelbench.analysis.tables.render_markdown import (
    FIGURE_SPACE,
    PUNCTUATION_SPACE,
    markdown_escape,
    to_markdown,
)
from accelbench.analysis.tables.write import write_table

__all__ = [
    "ABOVE_IDEAL_MARK",
    "ABOVE_IDEAL_NOTE",
    "BOLD_NOTE",
    "BUSY_MARK",
    "BUSY_NOTE",
    "CSV_COLUMNS",
    "ENERGY_NOTE",
    "ENERGY_SPECS",
    "FIGURE_SPACE",
    "HEADER_BREAK",
    "IMPRECISE_MARK",
    "IMPRECISE_NOTE",
    "MISSING",
    "MISSING_NOTE",
    "PUNCTUATION_SPACE",
    "comparison_table",
    "datasci_time_table",
    "decimal_pads",
    "energy_table",
    "format_with_ci",
    "headline_table",
    "ideal_speedups",
    "latex_escape",
    "machines_table",
    "markdown_escape",
    "node_scaling_table",
    "readable_unit",
    "scaling_table",
    "separated",
    "shared_exponent",
    "speedup_table",
    "to_html",
    "to_latex",
    "to_markdown",
    "write_table",
]

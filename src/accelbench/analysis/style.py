"""The look of every figure, set in one place so all figures match and fit a paper column.

Sizes are in inches at print size, so fonts set here are the fonts on paper.
Type 42 (TrueType) fonts keep the PDF's text as text, editable and searchable.
The PDF carries no creation date, so rerunning the workflow on the same data
gives the same file.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on cluster or CI nodes

import math  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import Colormap  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402
from matplotlib.textpath import text_to_path  # noqa: E402

# Font subsetting while writing a PDF logs every table it touches at INFO level.
logging.getLogger("fontTools").setLevel(logging.WARNING)

SINGLE_COLUMN = 3.5  # inches, one column of a two-column paper
DOUBLE_COLUMN = 7.0  # inches, full text width
PANEL_HEIGHT = 2.2  # inches, one row of axes
MIN_PANEL_WIDTH = 2.2  # inches: room for a y label, tick labels and a readable plot
MIN_PANEL_HEIGHT = 1.5  # inches: what a row may shrink to so that a figure fits a page
MAX_HEIGHT = 9.0  # inches: a text page less room for the caption
WIDTHS = {"single": SINGLE_COLUMN, "double": DOUBLE_COLUMN}
PNG_DPI = 300
PALETTE = "colorblind"
# Diverging map for ratios around 1 (speedup): ColorBrewer's purple-orange, safe for
# colour-vision deficiencies and in greyscale print as light-to-dark on both sides.
DIVERGING = "PuOr"
NOT_RUN = "0.85"  # grey fill of a cell that has no number (did not run, no baseline)

RC = {
    "font.size": 8,
    "axes.labelsize": 8,
    "axes.titlesize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.title_fontsize": 7,
    "legend.frameon": False,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.0,
    "lines.markersize": 4,
    "errorbar.capsize": 2,
    "axes.formatter.min_exponent": 4,  # log axes: 0.001 ... 1000 as plain numbers
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "svg.fonttype": "none",
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.02,
}


# Marker and line style cycles, for series that colour alone must not tell apart. The
# triangle pointing down comes last: on one point with the one pointing up it reads as the
# diamond, another series' marker.
MARKERS = ("o", "s", "^", "D", "P", "X", "*", "v")
LINESTYLES = ("-", "--", ":", "-.")


def no_data(ax, message: str) -> None:
    """Say in the middle of `ax` why it is empty, with no ticks to suggest a scale."""
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center")
    ax.set_xticks([])
    ax.set_yticks([])


def empty_figure(message: str, width: float | None = None) -> Figure:
    """A small figure that only says why there is nothing to draw: the workflow declares
    every figure file, and empty axes would read as a plot of zeros."""
    fig = Figure(figsize=(width or SINGLE_COLUMN, 0.8), layout="constrained")
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center", wrap=True)
    return fig


def panel_grid(count: int, width: float) -> tuple[float, int, int, float]:
    """(width, rows, columns, row height) for `count` panels: as many columns as keep each
    panel readable, rows shrunk as far as needed to fit a page. Panels that would not fit
    a page in `width` get the full text width instead: narrower, they could not be read."""
    room = MAX_HEIGHT - 1.0  # for the legend and titles
    if math.ceil(count / max(1, int(width // MIN_PANEL_WIDTH))) * MIN_PANEL_HEIGHT > room:
        width = max(width, DOUBLE_COLUMN)
    ncols = max(1, min(count, int(width // MIN_PANEL_WIDTH)))
    nrows = math.ceil(count / ncols)
    return width, nrows, ncols, min(PANEL_HEIGHT, max(MIN_PANEL_HEIGHT, room / nrows))


def text_width(text: str, size: float) -> float:
    """Inches that one line of `text` takes at `size` points in the style's font."""
    width, _, _ = text_to_path.get_text_width_height_descent(
        text, FontProperties(size=size), ismath=False
    )
    return width / 72


def legend(fig: Figure, handles: list) -> None:
    """A legend above the axes in as many columns as its entries fit the figure's width,
    with the figure made taller by the legend's height (up to a page) so the axes keep
    their size."""
    size = plt.rcParams["legend.fontsize"]
    widest = max(text_width(handle.get_label(), size) for handle in handles)
    # In em: handle length, gap to the text, gap to the next column.
    spacing = {"handlelength": 1.5, "handletextpad": 0.5, "columnspacing": 1.2}
    entry = widest + sum(spacing.values()) * size / 72
    per_row = max(1, int((fig.get_figwidth() - size / 72) // entry))
    nrows = math.ceil(len(handles) / per_row)
    ncols = math.ceil(len(handles) / nrows)  # as many rows, filled as evenly as they go
    fig.set_figheight(min(MAX_HEIGHT, fig.get_figheight() + (nrows * 1.5 + 0.5) * size / 72))
    fig.legend(handles=handles, loc="outside upper center", ncols=ncols, **spacing)


def apply() -> None:
    """Seaborn's paper theme with the sizes above and a colour-blind-safe palette.

    Seaborn is imported here and in `colors`, where figures are drawn: it brings SciPy's
    statistics (about a second), which processes that only read the sizes above skip.
    """
    import seaborn as sns

    sns.set_theme(context="paper", style="ticks", palette=PALETTE, rc=RC)


def colors(count: int) -> list[tuple[float, float, float]]:
    """`count` colours from the palette, in order, so a category keeps its colour."""
    import seaborn as sns

    return sns.color_palette(PALETTE, n_colors=count)


def diverging_colormap() -> Colormap:
    """The colour map of heat maps of ratios centred on 1."""
    return matplotlib.colormaps[DIVERGING]


def figure_width(name: str) -> float | None:
    """Inches for a named width (single, double); None for "auto" (each figure chooses)."""
    return WIDTHS.get(name)


def save(fig: Figure, stem: str | os.PathLike[str]) -> list[Path]:
    """Write `<stem>.pdf` (vector) and `<stem>.png` (300 dpi), then close the figure."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    pdf, png = stem.with_name(stem.name + ".pdf"), stem.with_name(stem.name + ".png")
    fig.savefig(pdf, metadata={"CreationDate": None})
    fig.savefig(png, dpi=PNG_DPI)
    plt.close(fig)
    return [pdf, png]

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

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.colors import Colormap  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

# Font subsetting while writing a PDF logs every table it touches at INFO level.
logging.getLogger("fontTools").setLevel(logging.WARNING)

SINGLE_COLUMN = 3.5  # inches, one column of a two-column paper
DOUBLE_COLUMN = 7.0  # inches, full text width
PANEL_HEIGHT = 2.2  # inches, one row of axes
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


# Marker and line style cycles, for series that colour alone must not tell apart.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", ":", "-.")


def no_data(ax, message: str) -> None:
    """Say in the middle of `ax` why it is empty, with no ticks to suggest a scale."""
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center")
    ax.set_xticks([])
    ax.set_yticks([])


def empty_figure(message: str) -> Figure:
    """A one-panel figure that says why there is nothing to draw."""
    fig = Figure(figsize=(SINGLE_COLUMN, PANEL_HEIGHT), layout="constrained")
    no_data(fig.add_subplot(), message)
    return fig


def apply() -> None:
    """Seaborn's paper theme with the sizes above and a colour-blind-safe palette."""
    sns.set_theme(context="paper", style="ticks", palette=PALETTE, rc=RC)


def colors(count: int) -> list[tuple[float, float, float]]:
    """`count` colours from the palette, in order, so a category keeps its colour."""
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

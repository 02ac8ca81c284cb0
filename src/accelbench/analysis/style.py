"""The look of every figure, set in one place so all figures match and fit a paper column.

Sizes are in inches at print size, so fonts set here are the fonts on paper.
Type 42 (TrueType) fonts keep the PDF's text as text, editable and searchable.
The PDF carries no creation date, so rerunning the workflow on the same data
gives the same file.

Which colour, marker and line style a name gets is declared here too, once, by name
(`LOOKS`, `look`): a backend, device, precision, dtype, strategy, model or kernel looks
the same in every figure of every run, whatever else the run measured. The colours are
Okabe and Ito's colour-blind-safe palette (black kept for reference lines and for legend
entries that stand for a style alone) and a grey; a marker and a line style per name
are the second channel, so a greyscale print still tells the series apart. A name no
table declares (a user's own kernel or model) gets a colour and marker pair of the
leftovers of its category, chosen by a checksum of the name, so it too keeps its look
from run to run. A figure draws a series in the look of the name that tells it apart
(its primary name); where a second parameter varies within a panel, a line takes that
name's line style, a point that name's marker.
"""

from __future__ import annotations

import logging
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on cluster or CI nodes

import math  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import Colormap, to_hex  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
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
# Diverging map for ratios around 1 (speedup): ColorBrewer's purple-orange, safe for
# colour-vision deficiencies and in greyscale print as light-to-dark on both sides.
DIVERGING = "PuOr"
NOT_RUN = "0.85"  # grey fill of a cell that has no number (did not run, no baseline)

# Okabe and Ito, "Color Universal Design" (2008), less black; then a grey.
BLUE, VERMILLION, GREEN, ORANGE = "#0072b2", "#d55e00", "#009e73", "#e69f00"
SKY, PURPLE, YELLOW, GREY = "#56b4e9", "#cc79a7", "#f0e442", "#7f7f7f"
COLOURS = (BLUE, VERMILLION, GREEN, ORANGE, SKY, PURPLE, GREY, YELLOW)
NEUTRAL = "#000000"  # reference lines (roofs, ideal scaling) and entries of a style alone
REFERENCE = "#999999"  # another machine's or a paper's numbers, beside the ones measured here
# Markers and line styles, for series that colour alone must not tell apart. The
# triangle pointing down comes late: on one point with the one pointing up it reads as
# the diamond, another series' marker.
MARKERS = ("o", "s", "^", "D", "P", "*", "v", "h")
LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))
FLAGGED_LABEL = "hollow: busy machine or imprecise"

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
    "mathtext.default": "regular",  # math in the text's own font: t_CPU reads like its label
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "svg.fonttype": "none",
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.02,
}


@dataclass(frozen=True)
class Look:
    """How a named series is drawn: its colour, its marker and its line style."""

    color: str
    marker: str
    linestyle: str | tuple = "-"


# The declared looks, per category. Within a category no two names share a colour and a
# marker; names likely in one panel (the backends of a kernel, the libraries of a
# workload, the devices of one run) differ in colour.
LOOKS: dict[str, dict[str, Look]] = {
    "backend": {
        "numpy": Look(BLUE, "o"),
        "torch": Look(VERMILLION, "s"),
        "numba": Look(GREEN, "^"),
        "cupy": Look(ORANGE, "P"),
        "numba-parallel": Look(SKY, "D"),
        "numba-cuda": Look(PURPLE, "v"),
        "python": Look(GREY, "*"),
        "jax": Look(YELLOW, "h"),
        "pandas": Look(BLUE, "D"),
        "polars": Look(SKY, "o"),
        "cudf": Look(ORANGE, "s"),
        "sklearn": Look(GREEN, "s"),
        "cuml": Look(PURPLE, "o"),
        "networkx": Look(BLUE, "^"),
        "cugraph": Look(VERMILLION, "D"),
    },
    # CPUs in cool colours, GPUs in warm ones, by the count on one node.
    "device": {
        "cpu1": Look(SKY, "o", "-"),
        "cpu2": Look(BLUE, "s", "--"),
        "cpu4": Look(GREEN, "^", ":"),
        "cpu8": Look(GREY, "D", "-."),
        "cpu16": Look(SKY, "v", (0, (5, 1))),
        "cpu32": Look(BLUE, "P", (0, (3, 1, 1, 1, 1, 1))),
        "cpu64": Look(GREEN, "*", "-"),
        "cuda1": Look(VERMILLION, "o", "-"),
        "cuda2": Look(ORANGE, "s", "--"),
        "cuda4": Look(PURPLE, "^", ":"),
        "cuda8": Look(VERMILLION, "D", "-."),
    },
    "device kind": {"cpu": Look(BLUE, "o", "-"), "cuda": Look(VERMILLION, "s", "--")},
    "precision": {
        "fp64": Look(BLUE, "o", ":"),
        "fp32": Look(VERMILLION, "s", "-"),
        "tf32": Look(ORANGE, "^", "--"),
        "bf16": Look(GREEN, "D", "-."),
        "fp16": Look(PURPLE, "v", (0, (5, 1))),
    },
    "dtype": {
        "float64": Look(BLUE, "o", ":"),
        "float32": Look(VERMILLION, "s", "-"),
        "float16": Look(PURPLE, "v", "--"),
        "bfloat16": Look(GREEN, "D", "-."),
    },
    "strategy": {
        "single": Look(BLUE, "o", "-"),
        "ddp": Look(VERMILLION, "s", "--"),
        "dp": Look(GREEN, "^", ":"),
        "fsdp": Look(ORANGE, "D", "-."),
        "pipeline": Look(PURPLE, "P", (0, (5, 1))),
    },
    "model": {
        "resnet18": Look(BLUE, "o"),
        "resnet50": Look(VERMILLION, "s"),
        "lstm": Look(GREEN, "^"),
        "fcn": Look(ORANGE, "D"),
        "alexnet": Look(SKY, "P"),
        "vgg11": Look(PURPLE, "v"),
        "resnet56": Look(GREY, "*"),
        "bert": Look(BLUE, "D"),
        "gpt": Look(VERMILLION, "^"),
        "gcn": Look(GREEN, "o"),
        "dcgan": Look(ORANGE, "s"),
        "autoencoder": Look(SKY, "^"),
        "fcn-r": Look(ORANGE, "P"),
        "fcn-s": Look(ORANGE, "*"),
        "alexnet-r": Look(SKY, "s"),
        "alexnet-s": Look(SKY, "*"),
    },
    "kernel": {
        "matmul": Look(BLUE, "o"),
        "saxpy": Look(VERMILLION, "s"),
        "reduction": Look(GREEN, "^"),
        "stencil": Look(ORANGE, "D"),
        "mandelbrot": Look(SKY, "P"),
        "fft1d": Look(PURPLE, "v"),
        "fft2d": Look(GREY, "*"),
        "transfer-d2d": Look(BLUE, "s"),
        "transfer-h2d": Look(VERMILLION, "^"),
        "transfer-h2d-pinned": Look(VERMILLION, "D"),
        "transfer-d2h": Look(GREEN, "D"),
        "transfer-d2h-pinned": Look(GREEN, "s"),
    },
    "copies": {
        "copies excluded": Look(BLUE, "o", "-"),
        "copies included": Look(VERMILLION, "s", "--"),
    },
}


def _leftovers(category: str) -> list[tuple[str, str]]:
    """The colour and marker pairs no declared name of `category` has, in palette order."""
    taken = {(known.color, known.marker) for known in LOOKS.get(category, {}).values()}
    return [(c, m) for m in MARKERS for c in COLOURS if (c, m) not in taken]


def look(category: str, name: object) -> Look:
    """The look of `name` in `category` (a key of LOOKS): the declared one, else a pair
    of its category's leftovers and a line style chosen by the CRC-32 of the name, the
    same on every machine and in every run."""
    text = str(name)
    declared = LOOKS.get(category, {}).get(text)
    if declared is not None:
        return declared
    checksum = zlib.crc32(f"{category}:{text}".encode())
    colour, marker = (pairs := _leftovers(category))[checksum % len(pairs)]
    return Look(colour, marker, LINESTYLES[checksum // len(pairs) % len(LINESTYLES)])


def entry(look_of: Look, label: str, *, line: bool = False, marker: bool = True) -> Line2D:
    """A legend entry in a look: its marker, and its line where series are lines."""
    return Line2D(
        [],
        [],
        color=look_of.color,
        marker=look_of.marker if marker else "None",
        linestyle=look_of.linestyle if line else "None",
        label=label,
    )


def style_entry(label: str, **style) -> Line2D:
    """A legend entry for a style alone (a marker, a line style, hollow): neutral, or the
    figure's one colour where all its series share it (`legend`)."""
    handle = Line2D([], [], color=NEUTRAL, **{"linestyle": "None", **style}, label=label)
    handle.set_gid("style")
    return handle


def flagged_entry() -> Line2D:
    """The legend entry of hollow marks."""
    return style_entry(FLAGGED_LABEL, marker="o", markerfacecolor="white")


def interval_entry(interval: str) -> Line2D:
    """The legend entry of error bars, naming the interval they draw."""
    return style_entry(f"bar: {interval}", marker="|", markersize=8)


def empty_figure(message: str, width: float | None = None) -> Figure:
    """A small figure that says why a declared figure has nothing to draw: the grid planned
    what it compares (accelbench.analysis.fillable), and its cells did not run or measured
    nothing it shows. Empty axes would read as a plot of zeros."""
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


def _one_colour(handles: list) -> None:
    """Where every coloured entry shares one colour (black reference lines aside), the
    entries of a style alone take it: their lines and marks are drawn in it."""
    lines = [handle for handle in handles if isinstance(handle, Line2D)]
    coloured = {to_hex(h.get_color()) for h in lines if h.get_gid() != "style"} - {NEUTRAL}
    if len(coloured) == 1:
        for handle in lines:
            if handle.get_gid() == "style":
                handle.set_color(next(iter(coloured)))
                handle.set_markeredgecolor(next(iter(coloured)))


def legend(fig: Figure, handles: list) -> None:
    """A legend above the axes in as many columns as its entries fit the figure's width,
    with the figure made taller by the legend's height (up to a page) so the axes keep
    their size."""
    _one_colour(handles)
    size = plt.rcParams["legend.fontsize"]
    widest = max(text_width(handle.get_label(), size) for handle in handles)
    # In em: handle length, gap to the text, gap to the next column.
    spacing = {"handlelength": 1.5, "handletextpad": 0.5, "columnspacing": 1.2}
    entry_width = widest + sum(spacing.values()) * size / 72
    per_row = max(1, int((fig.get_figwidth() - size / 72) // entry_width))
    nrows = math.ceil(len(handles) / per_row)
    ncols = math.ceil(len(handles) / nrows)  # as many rows, filled as evenly as they go
    fig.set_figheight(min(MAX_HEIGHT, fig.get_figheight() + (nrows * 1.5 + 0.5) * size / 72))
    drawn = fig.legend(handles=handles, loc="outside upper center", ncols=ncols, **spacing)
    for proxy, handle in zip(drawn.legend_handles, handles, strict=True):
        proxy.set_gid(handle.get_gid())  # which entries stand for a style alone


def apply() -> None:
    """Seaborn's paper theme with the sizes above and the palette's colours.

    Seaborn is imported here, where figures are drawn: it brings SciPy's statistics (about
    a second), which processes that only read the sizes above skip.
    """
    import seaborn as sns

    sns.set_theme(context="paper", style="ticks", palette=list(COLOURS), rc=RC)


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

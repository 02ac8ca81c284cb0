"""How a measurement is drawn, the same in every figure, and which scale an axis takes.

A median is a mark in its series' look (accelbench.analysis.style) with its interval as
an error bar; a cell measured on a busy machine or less precisely than asked is hollow
(the caller says which: accelbench.analysis.figures.flagged_rows), and its interval
does not set the axis range, so it may leave the axes: an interval that does is drawn to
the edge, where an arrow says it goes on (`arrows`, once the limits are final). A cell
that did not run is labelled where its mark would be (`not_run`).

An axis is logarithmic only where its values span a decade or more; below that it is
linear, and for a quantity that cannot be negative (a time, a rate, a speedup) it starts
at zero, so that the distances between marks are in proportion to their values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.container import ErrorbarContainer
from matplotlib.patches import FancyArrowPatch
from matplotlib.ticker import EngFormatter, LogLocator, NullFormatter
from matplotlib.transforms import blended_transform_factory

from accelbench.analysis import tidy
from accelbench.analysis.style import Look

DECADE = 10.0  # the least span of a logarithmic axis
# Margin around the plotted range: a factor on a log axis, a fraction of the span on a
# linear one.
LOG_MARGIN = 1.25
LINEAR_MARGIN = 0.05
BEYOND = "beyond the axes"  # the gid of an arrow at an edge an interval passes
ARROW_LENGTH = 0.1  # of the axes
HOLLOW = "white"
ENGINEERING_FROM = 1e4  # an axis reaching this writes its ticks with SI prefixes: 20k, 15M


def spans_decade(low: float, high: float) -> bool:
    """Whether positive values from `low` to `high` span a decade or more."""
    return math.isfinite(low) and math.isfinite(high) and low > 0 and high / low >= DECADE


def _linear_limits(low: float, high: float, from_zero: bool) -> tuple[float, float]:
    """Limits of a linear axis: from zero with a margin above, or a margin both sides."""
    if from_zero and low >= 0:
        return 0.0, high * (1 + LINEAR_MARGIN) or 1.0
    pad = LINEAR_MARGIN * (high - low) or abs(high) * LINEAR_MARGIN or 1.0
    return low - pad, high + pad


def _engineering(ticks, few_decades: bool) -> None:
    """Tick labels with SI prefixes, 15M rather than 1.5 under an offset 1e7 (or 1.5 x 10^7)
    to multiply out; on a log axis over two decades or less at 1, 2 and 5 of each."""
    ticks.set_major_formatter(EngFormatter(sep=""))
    ticks.set_minor_formatter(NullFormatter())
    if few_decades:
        ticks.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))


def fit_axis(
    ax, axis: str, low: float, high: float, *, band: float = 0.0, from_zero: bool = True
) -> None:
    """Scale and limits of `axis` ("x" or "y") for values from `low` to `high`: logarithmic
    where they span a decade, else linear (from zero where `from_zero` and nothing is
    negative), with a margin, and with `band` (a fraction of the axis) free below `low`
    for the labels of cells that did not run. Nothing finite: left to matplotlib."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return
    log = spans_decade(low, high)
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log" if log else "linear")
    if log:
        scale, unscale = math.log, math.exp
        bottom, top = math.log(low) - math.log(LOG_MARGIN), math.log(high) + math.log(LOG_MARGIN)
    else:
        scale, unscale = float, float
        bottom, top = _linear_limits(low, high, from_zero)
    # The lowest value at `band` of the way up: bottom' = (low - band * top) / (1 - band).
    bottom = min(bottom, (scale(low) - band * top) / (1.0 - band))
    (ax.set_xlim if axis == "x" else ax.set_ylim)(unscale(bottom), unscale(top))
    if high >= ENGINEERING_FROM:
        _engineering(ax.xaxis if axis == "x" else ax.yaxis, log and high / low <= DECADE**2)
    if not log and from_zero and unscale(bottom) < 0 <= low:
        ticks = ax.get_xticks() if axis == "x" else ax.get_yticks()
        (ax.set_xticks if axis == "x" else ax.set_yticks)([t for t in ticks if 0 <= t <= high])


def _bars(low: np.ndarray, value: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Error bar lengths below and above, none on a side without a bound."""
    below = np.nan_to_num(value - low, nan=0.0, posinf=0.0).clip(min=0)
    above = np.nan_to_num(high - value, nan=0.0, posinf=0.0).clip(min=0)
    return np.vstack([below, above])


def measured(
    ax,
    x: Sequence[float],
    y: Sequence[float],
    interval: tuple[Sequence[float], Sequence[float]] | None,
    look: Look,
    flagged: Sequence[bool],
    *,
    linestyle: str | tuple = "None",
    marker: str | None = None,
    x_interval: tuple[Sequence[float], Sequence[float]] | None = None,
    size: float | None = None,
) -> None:
    """Medians at (x, y) in `look` (its marker unless `marker` is given, at `size` points
    if given), joined in `linestyle`, with their intervals (low, high) as error bars
    (`x_interval`: across too); the `flagged` ones hollow."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    marker = marker or look.marker
    bars = {}
    if interval is not None:
        bars["yerr"] = _bars(np.asarray(interval[0], float), y, np.asarray(interval[1], float))
    if x_interval is not None:
        bars["xerr"] = _bars(np.asarray(x_interval[0], float), x, np.asarray(x_interval[1], float))
    sized = {"markersize": size} if size else {}
    ax.errorbar(
        x, y, **bars, color=look.color, marker=marker, linestyle=linestyle, elinewidth=0.8, **sized
    )
    hollow = np.asarray(flagged, bool)
    if hollow.any():
        ax.plot(
            x[hollow],
            y[hollow],
            linestyle="None",
            marker=marker,
            markerfacecolor=HOLLOW,
            markeredgecolor=look.color,
            zorder=3,
            **sized,
        )


def _arrow(ax, at: float, edge: float, axis: str, color) -> None:
    """An arrow inside `ax` with its head on the edge at `edge` (0 or 1 of the axes) of
    `axis`, at data position `at` along the other axis."""
    inward = ARROW_LENGTH if edge == 0 else -ARROW_LENGTH
    if axis == "y":
        transform = blended_transform_factory(ax.transData, ax.transAxes)
        start, end = (at, edge + inward), (at, edge)
    else:
        transform = blended_transform_factory(ax.transAxes, ax.transData)
        start, end = (edge + inward, at), (edge, at)
    arrow = FancyArrowPatch(
        start, end, transform=transform, arrowstyle="-|>", mutation_scale=6, color=color, lw=0.8
    )
    arrow.set_gid(BEYOND)
    ax.add_artist(arrow)


def beyond(segment, view: tuple[float, float], axis: str) -> list[float]:
    """The edges (0: low, 1: high) of a view that an error bar's segment passes."""
    (x0, y0), (x1, y1) = segment
    ends = (y0, y1) if axis == "y" else (x0, x1)
    low, high = sorted(view)
    return [edge for edge, out in ((0, min(ends) < low), (1, max(ends) > high)) if out]


def arrows(ax) -> None:
    """An arrow at each edge of `ax` that an error bar passes: the interval goes on beyond
    what the axes show. Call once the limits are final."""
    views = {"x": ax.get_xlim(), "y": ax.get_ylim()}
    for container in ax.containers:
        if not isinstance(container, ErrorbarContainer):
            continue
        for collection in container.lines[2]:
            color = collection.get_color()[0]
            for segment in collection.get_segments():
                (x0, y0), (x1, _) = segment
                axis, at = ("y", x0) if x0 == x1 else ("x", y0)
                across = views["x" if axis == "y" else "y"]
                if not min(across) <= at <= max(across):
                    continue
                for edge in beyond(segment, views[axis], axis):
                    _arrow(ax, at, edge, axis, color)


def not_run(ax, x: float, status: str, *, height: float, rotation: float, color) -> None:
    """The status of a cell that did not run (n/a, OOM, failed) at data position x, at a
    fixed height in the axes (any y scale)."""
    ax.text(
        x,
        height,
        tidy.STATUS_TEXT[status],
        transform=ax.get_xaxis_transform(),
        ha="center",
        va="bottom",
        rotation=rotation,
        color=color,
    )

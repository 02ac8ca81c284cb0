"""Figures from the tidy table, one function each: training time per mini-batch by
device, speedup heat map, CPU thread scaling, precision comparison, multi-GPU
scaling efficiency, scaling across nodes, kernel throughput against size; and the times of
the cells of work several machines share (`machine_times`, from their joined records).
`FIGURES` names the ones the workflow draws.

The records hold summaries (median and its 95% interval), not raw samples, so
points and error bars are drawn explicitly from those columns rather than letting
seaborn estimate them. Times and rates are points with their intervals, never
bars (a bar's length means nothing on a log axis), and the points of a group go
from the fastest to the slowest, so the winner comes first. A cell measured on a
busy machine or less precisely than asked is drawn hollow, and its interval does
not set the axis range (its median does, so it stays in view). A cell that
exists but did not run is labelled where its point would be (n/a, OOM, failed)
so an absent point is never read as a zero or forgotten; a selection with
nothing in it gives a small figure that says why. Every function takes an
optional width in inches (style.WIDTHS); without one it picks single or double
column by its content.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, NullLocator

from accelbench.analysis import machines, ratios, style, tables, tidy
from accelbench.families import FAMILIES

LOG_SPAN = 10.0  # switch to a log axis when the values span more than a decade
NOT_RUN_TEXT = {**tidy.STATUS_TEXT, ratios.NO_BASELINE: "no base"}
FLAGGED_LABEL = "hollow: busy machine or imprecise"
# Record flags (tidy columns) that draw a cell hollow and keep its interval off the axes.
FLAG_COLUMNS = ("busy", "imprecise")
# Margin around the plotted range: a factor on a log axis, a fraction of the span on a
# linear one.
LOG_MARGIN = 1.25
LINEAR_MARGIN = 0.05
# Below one flop per byte a kernel is limited by memory on any device (ridge points are
# several flop/byte), so its bandwidth says more than its GFLOP/s; copies have no flops.
MEMORY_BOUND_INTENSITY = 1.0
KERNEL_METRICS = {"gflops": ("Throughput", "GFLOP/s"), "bandwidth": ("Bandwidth", "GB/s")}
SIZE_TICK_WIDTH = 0.45  # inches per size tick label, so that neighbours never touch


def _with_metric(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    """`rows` with the metric's columns, added as NaN where no record has them (none ran)."""
    needed = [f"{metric}_{field}" for field in ("median", "ci_low", "ci_high")]
    return rows.reindex(
        columns=[*rows.columns, *(name for name in needed if name not in rows.columns)]
    )


def _measured(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Rows that ran and have a finite median for `metric`."""
    ok = (rows["status"] == "ok") & np.isfinite(rows[f"{metric}_median"].astype(float))
    return rows[ok]


def _yerr(rows: pd.DataFrame, metric: str) -> np.ndarray:
    """Asymmetric error bars from the stored CI; a missing bound draws no bar on that side."""
    median = rows[f"{metric}_median"].to_numpy(float)
    low = rows[f"{metric}_ci_low"].to_numpy(float)
    high = rows[f"{metric}_ci_high"].to_numpy(float)
    below = np.nan_to_num(median - low, nan=0.0, posinf=0.0).clip(min=0)
    above = np.nan_to_num(high - median, nan=0.0, posinf=0.0).clip(min=0)
    return np.vstack([below, above])


def _spans_decades(values: np.ndarray) -> bool:
    values = values[np.isfinite(values) & (values > 0)]
    return values.size > 0 and values.max() / values.min() > LOG_SPAN


def _annotate(ax, x: float, status: str, *, height: float, rotation: float, color) -> None:
    """Status text at data position x, at a fixed height in the axes (works on any y scale)."""
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


def flagged_rows(rows: pd.DataFrame) -> np.ndarray:
    """Which rows were measured on a busy machine or less precisely than asked (tidy columns
    `busy`, `imprecise`; absent: none)."""
    found = np.zeros(len(rows), bool)
    for column in FLAG_COLUMNS:
        if column in rows:
            found |= rows[column].map(tidy.flagged).to_numpy(bool)
    return found


def flagged_handle() -> Line2D:
    """Legend entry explaining hollow markers."""
    return Line2D(
        [], [], color="black", marker="o", markerfacecolor="white", ls="none", label=FLAGGED_LABEL
    )


def hollow_flagged(ax, x, y, rows: pd.DataFrame, color, marker: str = "o") -> None:
    """Redraw the markers of flagged rows hollow, over what was plotted at (x, y)."""
    flagged = flagged_rows(rows)
    if flagged.any():
        ax.plot(
            np.asarray(x, float)[flagged],
            np.asarray(y, float)[flagged],
            ls="none",
            marker=marker,
            markerfacecolor="white",
            markeredgecolor=color,
            zorder=3,
        )


def plotted_range(rows: pd.DataFrame, prefix: str) -> tuple[float, float]:
    """(low, high) the axis of a metric must show: every median, and the intervals of the
    rows that are not flagged (a busy cell's interval, 0 to 2e10 us, once stretched an
    axis over twelve decades); NaN where nothing is finite."""
    medians = rows[f"{prefix}median"].to_numpy(float)
    trusted = ~flagged_rows(rows)
    values = np.concatenate(
        [
            medians,
            rows[f"{prefix}ci_low"].to_numpy(float)[trusted],
            rows[f"{prefix}ci_high"].to_numpy(float)[trusted],
        ]
    )
    values = values[np.isfinite(values)]
    if not values.size:
        return math.nan, math.nan
    return float(values.min()), float(values.max())


def set_range(ax, axis: str, low: float, high: float, band: float = 0.0) -> None:
    """Limit `axis` ("x" or "y") of `ax` to [low, high] with a margin, in its scale, and with
    `band` (a fraction of the axis) left free below `low` for the labels of cells that did
    not run; a range with nothing finite, or nothing positive on a log axis, is left to
    matplotlib."""
    log = (ax.get_xscale() if axis == "x" else ax.get_yscale()) == "log"
    if not (math.isfinite(low) and math.isfinite(high)) or (log and low <= 0):
        return
    scale, unscale = (math.log, math.exp) if log else (float, float)
    bottom, top = scale(low), scale(high)
    pad = (math.log(LOG_MARGIN) if log else LINEAR_MARGIN * (top - bottom)) or 1.0
    bottom, top = bottom - pad, top + pad
    # The lowest value at `band` of the way up: bottom' = (low - band * top) / (1 - band).
    bottom = min(bottom, (scale(low) - band * top) / (1.0 - band))
    (ax.set_xlim if axis == "x" else ax.set_ylim)(unscale(bottom), unscale(top))


def _legend(fig: Figure, handles: list, rows: pd.DataFrame | None = None) -> None:
    """The style's compact legend; with `rows` that hold a flagged measurement, also the
    entry for hollow marks."""
    if rows is not None and flagged_rows(rows).any():
        handles = [*handles, flagged_handle()]
    style.legend(fig, handles)


def _time_unit(frame: pd.DataFrame, rows: pd.DataFrame, metric: str) -> tuple[str, float]:
    """Axis label and seconds per unit for the metric's times in `rows`: the unit the
    tables print (s, ms, µs), so that figure and table read alike."""
    unit = frame.attrs.get("units", {}).get(f"{metric}_median")
    unit, factor = tables.readable_unit(unit, list(rows[f"{metric}_median"].astype(float)))
    return (f"Time per mini-batch ({unit})" if unit else "Time per mini-batch"), factor


def _scaled(rows: pd.DataFrame, metric: str, factor: float) -> pd.DataFrame:
    """`rows` with the metric's median and interval divided by `factor`."""
    columns = [f"{metric}_{field}" for field in ("median", "ci_low", "ci_high")]
    return rows.assign(**{column: rows[column].astype(float) / factor for column in columns})


def _points(ax, rows: pd.DataFrame, hue: str, hues: list[str], metric: str, palette: dict) -> float:
    """`metric` as points with their intervals: one group per label, one point per value of
    `hue` (its colour and marker), from the lowest median to the highest, so that for a
    time the winner comes first; cells that did not run are labelled in the places after
    them. Flagged cells are hollow and their intervals do not set the range. The axis goes
    logarithmic when the values span more than a decade. Returns the inches the figure
    must grow by for labels turned upright, so the panel keeps its height."""
    labels = list(dict.fromkeys(rows["label"]))
    measured = _measured(rows, metric)
    low, high = plotted_range(measured, f"{metric}_")
    if _spans_decades(np.array([low, high])):
        ax.set_yscale("log")
    markers = {value: style.MARKERS[index % len(style.MARKERS)] for index, value in enumerate(hues)}
    slot = 0.8 / max(rows.groupby("label", sort=False).size().max(), 1)
    notes = [tidy.STATUS_TEXT[status] for status in rows["status"] if status in tidy.STATUS_TEXT]
    for position, label in enumerate(labels):
        group = rows[rows["label"] == label]
        done = group[group.index.isin(measured.index)]
        done = done.sort_values(f"{metric}_median", kind="stable")
        places = position + (np.arange(len(group)) - (len(group) - 1) / 2) * slot
        hollow = flagged_rows(done)
        for place, (index, row), flagged in zip(places, done.iterrows(), hollow, strict=False):
            color = palette[row[hue]]
            ax.errorbar(
                [place],
                [row[f"{metric}_median"]],
                yerr=_yerr(done.loc[[index]], metric),
                color=color,
                marker=markers[row[hue]],
                markerfacecolor="white" if flagged else color,
                linestyle="none",
                elinewidth=0.8,
            )
        statuses = group.loc[~group.index.isin(measured.index), "status"]
        for place, status in zip(places[len(done) :], statuses, strict=True):
            if status in tidy.STATUS_TEXT:
                _annotate(ax, place, status, height=0.03, rotation=90, color="black")
    # Upright labels of cells that did not run stand at the bottom, below every point.
    size = plt.rcParams["xtick.labelsize"]
    tall = max((style.text_width(note, size) for note in notes), default=0.0)
    height = ax.get_position().height * ax.get_figure().get_figheight()
    set_range(ax, "y", low, high, band=min(0.5, 0.05 + tall / height) if notes else 0.0)
    if measured.empty:
        ax.set_yticks([])  # nothing measured: a number scale would suggest values
    ax.set_xlabel("Model")
    ax.set_xlim(-0.5, len(labels) - 0.5)
    return _fit_labels(ax, labels)


def _hue_legend(palette: dict) -> list[Line2D]:
    """Legend entries of `_points`: each value's colour and marker."""
    return [
        Line2D(
            [],
            [],
            color=color,
            marker=style.MARKERS[index % len(style.MARKERS)],
            ls="none",
            label=value,
        )
        for index, (value, color) in enumerate(palette.items())
    ]


def _panel_figure(count: int, width: float | None) -> tuple[Figure, np.ndarray]:
    """A figure of `count` panels in as many rows as the width needs, and its axes in order."""
    width = width or (style.SINGLE_COLUMN if count == 1 else style.DOUBLE_COLUMN)
    width, nrows, ncols, height = style.panel_grid(count, width)
    fig = Figure(figsize=(width, height * nrows), layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False).flatten()


def _fit_labels(ax, labels: list[str]) -> float:
    """Category tick labels that fit side by side under `ax`: as they are, else one setting
    per line (labels list settings separated by commas), else turned upright. Returns the
    inches that upright labels take below the axis (0 otherwise)."""
    room = ax.get_position().width * ax.get_figure().get_figwidth() / len(labels) - 0.08
    size = plt.rcParams["xtick.labelsize"]
    wrapped = [label.replace(", ", "\n") for label in labels]
    for candidate in (labels, wrapped):
        lines = [line for label in candidate for line in label.split("\n")]
        if max(style.text_width(line, size) for line in lines) <= room:
            ax.set_xticks(range(len(labels)), candidate)
            return 0.0
    ax.set_xticks(range(len(labels)), labels, rotation=90)
    return max(style.text_width(label, size) for label in labels)


def time_per_batch_by_device(frame: pd.DataFrame, width: float | None = None) -> Figure:
    """Time per mini-batch as points with intervals: one group per model (row label), one
    point per device, fastest first."""
    style.apply()
    metric = "time_per_batch"
    rows, _ = tidy.experiment_rows(frame, "train")
    if rows.empty:
        return style.empty_figure("no training records", width)
    rows = _with_metric(rows, metric)
    label, factor = _time_unit(frame, rows, metric)
    rows = _scaled(rows, metric, factor)
    labels = list(dict.fromkeys(rows["label"]))
    devices = tidy.natural_devices(rows["device"])
    auto = style.SINGLE_COLUMN if len(labels) * len(devices) <= 12 else style.DOUBLE_COLUMN
    fig = Figure(figsize=(width or auto, style.PANEL_HEIGHT), layout="constrained")
    ax = fig.add_subplot()
    ax.set_ylabel(label)
    palette = dict(zip(devices, style.colors(len(devices)), strict=True))
    grow = _points(ax, rows, "device", devices, metric, palette)
    fig.set_figheight(min(style.MAX_HEIGHT - 1.0, fig.get_figheight() + grow))
    _legend(fig, _hue_legend(palette), rows)
    return fig


def precision_comparison(frame: pd.DataFrame, width: float | None = None) -> Figure:
    """Time per mini-batch by precision: one panel per device, one group per model, one point
    per precision with its interval, fastest first, so the gain of a narrower type is read
    within a panel. Only models measured in two or more precisions on a device are shown."""
    style.apply()
    metric = "time_per_batch"
    rows, _ = tidy.compared_rows(frame, "train", "precision")
    devices = tidy.natural_devices(rows["device"]) if not rows.empty else []
    if not devices:
        return style.empty_figure("no model measured in two precisions", width)
    precisions = tidy.ordered("precision", rows["precision"])
    width = width or (style.SINGLE_COLUMN if len(devices) == 1 else style.DOUBLE_COLUMN)
    width, nrows, ncols, height = style.panel_grid(len(devices), width)
    fig = Figure(figsize=(width, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).flatten()
    palette = dict(zip(precisions, style.colors(len(precisions)), strict=True))
    label, factor = _time_unit(frame, _with_metric(rows, metric), metric)
    grow = 0.0
    for ax, device in zip(axes, devices, strict=False):
        ids = rows.loc[rows["device"] == device, "id"]
        here, _ = tidy.experiment_rows(frame[frame["id"].isin(ids)], "train", "precision")
        here = _scaled(_with_metric(here, metric), metric, factor)
        grow = max(grow, _points(ax, here, "precision", precisions, metric, palette))
        ax.set_title(device)
        ax.set_ylabel(label)
    fig.set_figheight(min(style.MAX_HEIGHT - 1.0, fig.get_figheight() + grow * nrows))
    for ax in axes[len(devices) :]:
        ax.remove()
    _legend(fig, _hue_legend(palette), rows)
    return fig


def machine_times(joined: machines.Joined, width: float | None = None) -> Figure:
    """The time of each cell of work several machines share (accelbench.analysis.machines):
    one panel per family, one group per cell, one point per machine and device with its
    interval, fastest first; the legend names each column as the joined table does. Drawn
    at the text width: a legend entry names a machine, its device, date and source."""
    style.apply()
    cells = joined.cells
    if cells.empty:
        return style.empty_figure("no cell of work measured on two machines", width)
    names = {
        place: ", ".join(machines.column_lines(joined, *place))
        for place in machines.columns(joined)
    }
    places = zip(cells["source"].astype(int), cells["device"], strict=True)
    rows = pd.DataFrame(
        {
            "experiment": cells["experiment"],
            "label": cells["label"],
            "column": [names[place] for place in places],
            "status": cells["status"],
            **{flag: cells[flag] for flag in FLAG_COLUMNS},
            **{f"time_{field}": cells[field] for field in ("median", "ci_low", "ci_high")},
        }
    )
    families = list(dict.fromkeys(rows["experiment"]))
    fig, axes = _panel_figure(len(families), width or style.DOUBLE_COLUMN)
    palette = dict(zip(names.values(), style.colors(len(names)), strict=True))
    grow = 0.0
    for ax, name in zip(axes, families, strict=False):
        here = rows[rows["experiment"] == name]
        unit, factor = tables.readable_unit(
            str(cells["unit"].iloc[0]), list(here["time_median"].astype(float))
        )
        grow = max(
            grow,
            _points(
                ax, _scaled(here, "time", factor), "column", list(names.values()), "time", palette
            ),
        )
        family = FAMILIES[name]
        ax.set_ylabel(f"{family.time_metric.replace('_', ' ').capitalize()} ({unit})")
        ax.set_xlabel("Cell of work")
        ax.set_title(family.units_called or name)
    fig.set_figheight(min(style.MAX_HEIGHT - 1.0, fig.get_figheight() + grow))
    for ax in axes[len(families) :]:
        ax.remove()
    _legend(fig, _hue_legend(palette), rows)
    return fig


def _ratio_text(median: float, low: float, high: float) -> str:
    """The median as the tables print it: with the digits its interval supports."""
    return tables.format_with_ci(median, low, high).split(" [", 1)[0]


def _log_speedups(grid: pd.DataFrame, labels: list[str], devices: list[str]) -> np.ndarray:
    """log2 of each cell's speedup, rows x devices; NaN where it did not run."""
    values = np.full((len(labels), len(devices)), np.nan)
    for (label, device), cell in grid.iterrows():
        if cell["status"] == "ok" and cell["median"] > 0:
            values[labels.index(label), devices.index(device)] = math.log2(cell["median"])
    return values


def _heatmap_marks(
    ax, grid: pd.DataFrame, labels: list[str], devices: list[str], values, norm
) -> list[tuple[int, int, str, str]]:
    """(row, column, text, colour) of every cell: the speedup with the tables' marks, in
    a colour that reads on its hue; a cell that did not run is greyed and says why."""
    marks = []
    for (label, device), cell in grid.iterrows():
        row, column = labels.index(label), devices.index(device)
        if cell["status"] == "ok" and math.isfinite(values[row, column]):
            text = _ratio_text(cell["median"], cell["ci_low"], cell["ci_high"])
            text += tables.BUSY_MARK if tidy.flagged(cell["busy"]) else ""
            text += tables.IMPRECISE_MARK if tidy.flagged(cell["imprecise"]) else ""
            dark = abs(norm(values[row, column]) - 0.5) > 0.3
            color = "white" if dark else "black"
        else:
            ax.add_patch(Rectangle((column, row), 1, 1, facecolor=style.NOT_RUN, edgecolor="white"))
            text, color = NOT_RUN_TEXT.get(cell["status"], tables.MISSING), "black"
        marks.append((row, column, text, color))
    return marks


def _write_marks(ax, marks, width: float, labels: list[str], devices: list[str]) -> None:
    """The cells' texts; with many devices at the widest width they shrink to fit a column."""
    size = plt.rcParams["ytick.labelsize"]
    column_width = (width - max(style.text_width(label, size) for label in labels) - 1.0) / len(
        devices
    )
    widest = max(style.text_width(text, size) for _, _, text, _ in marks)
    cell_size = size * min(1.0, 0.85 * column_width / widest)
    for row, column, text, color in marks:
        ax.text(
            column + 0.5, row + 0.5, text, ha="center", va="center", color=color, size=cell_size
        )


def _heatmap_axes(ax, labels: list[str], devices: list[str]) -> None:
    """Devices across, models down, one tick per cell, no frame."""
    ax.set_xticks(np.arange(len(devices)) + 0.5, devices)
    ax.set_yticks(np.arange(len(labels)) + 0.5, labels)
    ax.set_xlim(0, len(devices))
    ax.set_ylim(len(labels), 0)
    ax.tick_params(length=0)
    ax.set_xlabel("Device")
    ax.set_ylabel("Model")
    for side in ax.spines.values():
        side.set_visible(False)


def _speedup_colorbar(fig: Figure, mesh, ax, span: int, baseline: str) -> None:
    """A colour bar in powers of two: 1/4, 1/2, 1, 2, 4 (every other power when wide)."""
    ticks = np.arange(-span, span + 1, 1 if span <= 3 else 2)
    bar = fig.colorbar(mesh, ax=ax, ticks=ticks, shrink=0.9)
    bar.ax.set_yticklabels([f"{2**tick:g}" if tick >= 0 else f"1/{2**-tick:g}" for tick in ticks])
    bar.set_label(f"Speedup over {baseline} (×)")


def speedup_heatmap(
    frame: pd.DataFrame, baseline: str, experiment: str = "train", width: float | None = None
) -> Figure:
    """Speedup over the `baseline` device, rows x devices, coloured on a log scale centred
    on 1 (one hue faster, the other slower); cells that did not run say why, cells
    measured on a busy machine or less precisely than asked carry the tables' marks."""
    style.apply()
    cells, _ = ratios.speedup(frame, experiment, baseline)
    labels = list(dict.fromkeys(cells["label"]))
    if not labels:
        return style.empty_figure(f"no {experiment} records besides {baseline}", width)
    devices = tidy.natural_devices(cells["device"])
    auto = style.SINGLE_COLUMN if len(devices) <= 4 else style.DOUBLE_COLUMN
    # Room for the row labels, a number in each cell and the colour bar; a narrower width
    # than that would print the numbers over each other.
    size = plt.rcParams["ytick.labelsize"]
    needed = max(style.text_width(label, size) for label in labels) + 0.45 * len(devices) + 1.0
    width = min(style.DOUBLE_COLUMN, max(width or auto, needed))
    height = min(0.9 + 0.25 * len(labels), style.MAX_HEIGHT)
    fig = Figure(figsize=(width, max(height, style.PANEL_HEIGHT)), layout="constrained")
    ax = fig.add_subplot()
    grid = cells.set_index(["label", "device"])
    values = _log_speedups(grid, labels, devices)
    span = max(1.0, math.ceil(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0)
    norm = Normalize(-span, span)
    mesh = ax.pcolormesh(
        np.ma.masked_invalid(values),
        cmap=style.diverging_colormap(),
        norm=norm,
        edgecolors="white",
        linewidth=0.5,
    )
    _write_marks(
        ax, _heatmap_marks(ax, grid, labels, devices, values, norm), width, labels, devices
    )
    _heatmap_axes(ax, labels, devices)
    _speedup_colorbar(fig, mesh, ax, span, baseline)
    return fig


def _lines(ax, cells: pd.DataFrame, prefix: str, palette: dict) -> list[Line2D]:
    """One line per label over the device count, with interval error bars, flagged cells
    hollow; cells that did not run are labelled at their count, in the label's colour.
    Returns legend handles."""
    handles = []
    for slot, label in enumerate(palette):
        here = cells[cells["label"] == label].sort_values("count")
        ok = (here["status"] == "ok") & np.isfinite(here[f"{prefix}median"].astype(float))
        done = here[ok]
        marker = style.MARKERS[slot % len(style.MARKERS)]
        # Every label is in the legend, also one whose cells all failed: its colour names them.
        handles.append(Line2D([], [], color=palette[label], marker=marker, label=label))
        if not done.empty:
            median = done[f"{prefix}median"].to_numpy(float)
            below = (median - done[f"{prefix}ci_low"].to_numpy(float)).clip(min=0)
            above = (done[f"{prefix}ci_high"].to_numpy(float) - median).clip(min=0)
            ax.errorbar(
                done["count"].to_numpy(float),
                median,
                yerr=np.vstack([below, above]),
                color=palette[label],
                marker=marker,
            )
            hollow_flagged(ax, done["count"], median, done, palette[label], marker)
        for count, status in here.loc[~ok, ["count", "status"]].itertuples(index=False):
            text = NOT_RUN_TEXT.get(status)
            if text:
                ax.text(
                    float(count),
                    0.03 + 0.08 * (slot % 10),
                    text,
                    transform=ax.get_xaxis_transform(),
                    ha="center",
                    va="bottom",
                    color=palette[label],
                )
    return handles


def _count_axis(ax, counts: list[int], label: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(counts[0] / 1.3, counts[-1] * 1.3)
    ax.set_xlabel(label)


def cpu_thread_scaling(
    frame: pd.DataFrame, experiment: str = "train", width: float | None = None
) -> Figure:
    """Speedup over one thread against CPU threads, log-log, one line per row label, with
    the ideal (linear) speedup as a dashed line."""
    style.apply()
    cells, _ = ratios.scaling(frame, experiment)
    cells = cells[cells["kind"] == "cpu"]
    scaled = cells.loc[cells["count"] > 1, "label"]
    cells = cells[cells["label"].isin(scaled)]  # a row measured on one thread only has no line
    counts = sorted(set(cells["count"].astype(int)))
    if len(counts) < 2:
        return style.empty_figure("no CPU thread-scaling records", width)
    fig = Figure(figsize=(width or style.SINGLE_COLUMN, style.PANEL_HEIGHT), layout="constrained")
    ax = fig.add_subplot()
    ax.set_ylabel("Speedup over 1 thread (×)")
    labels = list(dict.fromkeys(cells["label"]))
    palette = dict(zip(labels, style.colors(len(labels)), strict=True))
    ideal = ax.plot(counts, counts, color="black", linestyle="--", linewidth=0.8, label="ideal")
    handles = _lines(ax, cells, "", palette)
    _count_axis(ax, counts, "CPU threads")
    ax.set_yscale("log", base=2)
    low, high = plotted_range(cells[cells["status"] == "ok"], "")
    set_range(ax, "y", min(low, counts[0]), max(high, counts[-1]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    _legend(fig, [*ideal, *handles], cells)
    return fig


def scaling_efficiency(
    frame: pd.DataFrame, experiment: str = "train", kind: str = "cuda", width: float | None = None
) -> Figure:
    """Parallel efficiency (speedup over one device, over K) in percent against the device
    count K, one line per row label (model and strategy); 100% is linear scaling."""
    style.apply()
    cells, _ = ratios.scaling(frame, experiment)
    # Efficiency on one device is 100% by definition: the lines start at two. Several
    # nodes have a figure of their own (node_scaling_efficiency).
    cells = cells[(cells["kind"] == kind) & (cells["count"] > 1) & (cells["nodes"] == 1)]
    counts = sorted(set(cells["count"].astype(int)))
    if not counts:
        what = "multi-GPU" if kind == "cuda" else "multi-thread"
        return style.empty_figure(f"no {what} records", width)
    return _efficiency_figure(
        cells,
        [1, *counts],
        "GPUs" if kind == "cuda" else "CPU threads",
        "Scaling efficiency (%)",
        width,
    )


def _efficiency_figure(
    cells: pd.DataFrame, counts: list[int], xlabel: str, ylabel: str, width: float | None
) -> Figure:
    """Efficiency in percent against a count (devices, nodes), one line per label, with
    the ideal (100%) dashed."""
    columns = [f"efficiency_{field}" for field in ("median", "ci_low", "ci_high")]
    cells = cells.assign(**{column: cells[column].astype(float) * 100 for column in columns})
    fig = Figure(figsize=(width or style.SINGLE_COLUMN, style.PANEL_HEIGHT), layout="constrained")
    ax = fig.add_subplot()
    ax.set_ylabel(ylabel)
    labels = list(dict.fromkeys(cells["label"]))
    palette = dict(zip(labels, style.colors(len(labels)), strict=True))
    ideal = ax.axhline(100.0, color="black", linestyle="--", linewidth=0.8, label="ideal")
    handles = _lines(ax, cells, "efficiency_", palette)
    _count_axis(ax, counts, xlabel)
    _, top = plotted_range(cells[cells["status"] == "ok"], "efficiency_")
    ax.set_ylim(0, max(110.0, top * 1.05) if math.isfinite(top) else 110.0)
    _legend(fig, [ideal, *handles], cells)
    return fig


def node_scaling_efficiency(
    frame: pd.DataFrame, experiment: str = "train", width: float | None = None
) -> Figure:
    """Efficiency of N nodes against one node with the same devices, in percent, against
    the node count: one line per configuration and devices per node, starting at 100% on
    one node; the dashed line at 100% is linear scaling across nodes."""
    style.apply()
    cells, _ = ratios.node_scaling(frame, experiment)
    if cells.empty:
        return style.empty_figure("no multi-node records", width)
    unit = {"cpu": "processes", "cuda": "GPUs"}
    cells = cells.assign(
        label=[
            f"{label}; {per_node} {unit[kind]} per node"
            for label, per_node, kind in cells[["label", "per_node", "kind"]].itertuples(False)
        ]
    )
    # One node is each line's baseline: 100% by definition, where a cell was compared to it.
    compared = cells[cells["status"] == "ok"].drop_duplicates("label")
    one_node = compared.assign(
        count=1,
        status="ok",
        busy=False,
        efficiency_median=1.0,
        efficiency_ci_low=1.0,
        efficiency_ci_high=1.0,
    )
    cells = pd.concat([one_node, cells], ignore_index=True)
    counts = sorted(set(cells["count"].astype(int)))
    return _efficiency_figure(cells, counts, "Nodes", "Efficiency over one node (%)", width)


def kernel_metric(rows: pd.DataFrame) -> str:
    """What to plot of one kernel's records: "gflops" for kernels that arithmetic limits,
    "bandwidth" for copies (no flops) and kernels under MEMORY_BOUND_INTENSITY."""
    rows = _with_metric(_with_metric(rows, "gflops"), "bandwidth")
    intensity = rows.get("arithmetic_intensity", pd.Series(dtype=float)).astype(float)
    intensity = intensity[np.isfinite(intensity)]
    has_flops = not _measured(rows, "gflops").empty
    memory_bound = not intensity.empty and intensity.median() < MEMORY_BOUND_INTENSITY
    if (not has_flops or memory_bound) and not _measured(rows, "bandwidth").empty:
        return "bandwidth"
    return "gflops"


def _size_text(size: float) -> str:
    """A problem size as a short tick label: 512, 65.5k, 4M."""
    for least, scale, suffix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if size >= least:
            return f"{size / scale:.3g}{suffix}"
    return f"{size:g}"


def _size_axis(ax, sizes: list[int]) -> None:
    """A log axis of this panel's own sizes (base 2 when they are powers of two), with as
    many of them as tick labels as fit side by side and a margin around the outer ones."""
    powers_of_two = all(size > 0 and size & (size - 1) == 0 for size in sizes)
    ax.set_xscale("log", base=2 if powers_of_two else 10)
    fits = max(1, int(ax.get_position().width * ax.get_figure().get_figwidth() / SIZE_TICK_WIDTH))
    shown = sizes[:: math.ceil(len(sizes) / fits)]
    ax.set_xticks(shown, [_size_text(size) for size in shown])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(sizes[0] / 2, sizes[-1] * 2)
    ax.set_xlabel("Problem size n")


def _looks(values: list[str]) -> dict[str, tuple[str, str]]:
    """Marker and line style of each value, in order."""
    return {
        value: (style.MARKERS[i % len(style.MARKERS)], style.LINESTYLES[i % len(style.LINESTYLES)])
        for i, value in enumerate(values)
    }


def _series_legend(fig: Figure, palette: dict, looks: dict, flagged: bool) -> None:
    """Legend of throughput panels: a colour per backend (fastest first), a marker and line
    style per value of the other parameter, and the hollow-marker entry where a point was
    flagged."""
    handles = [Line2D([], [], color=color, label=backend) for backend, color in palette.items()]
    handles += [
        Line2D([], [], color="black", marker=marker, linestyle=linestyle, label=value)
        for value, (marker, linestyle) in looks.items()
    ]
    if flagged:
        handles.append(flagged_handle())
    style.legend(fig, handles)


def fastest_first(rows: pd.DataFrame, panels: list[str], metric_of) -> list[str]:
    """The backends of `rows` by their mean rank over the panels (`panels`: the columns
    that make one; rank 1: the highest rate of the panel, `metric_of(panel)`), so that a
    legend reads from the winner down; backends that ran nowhere come last, by name."""
    ranks: dict[str, list[float]] = {}
    for _, panel in rows.groupby(panels, sort=False):
        metric = metric_of(panel)
        measured = _measured(_with_metric(panel, metric), metric)
        best = measured.groupby("backend")[f"{metric}_median"].max().rank(ascending=False)
        for backend, rank in best.items():
            ranks.setdefault(backend, []).append(float(rank))
    return sorted(
        set(rows["backend"].dropna()),
        key=lambda name: (float(np.mean(ranks[name])) if name in ranks else math.inf, name),
    )


def _throughput_panel(
    ax, panel: pd.DataFrame, metric: str, series: list, looks: dict, by: str = "dtype"
) -> None:
    """One kernel on one device: a line per (backend, dtype) over size with interval error
    bars, flagged points hollow and their intervals off the axis range; cells that did not
    run are labelled at their size, in the backend's colour. `by` is the parameter the line
    style and marker tell apart (the device for data science)."""
    measured = _measured(panel, metric)
    notes_at: dict[float, int] = {}  # labels already stacked at a size, from the bottom
    for (backend, value), color in series:
        line = panel[(panel["backend"] == backend) & (panel[by] == value)]
        line = line.sort_values("size")
        done = line[line.index.isin(measured.index)]
        marker, linestyle = looks[value]
        if not done.empty:
            ax.errorbar(
                done["size"].to_numpy(float),
                done[f"{metric}_median"].to_numpy(float),
                yerr=_yerr(done, metric),
                color=color,
                marker=marker,
                linestyle=linestyle,
            )
            hollow_flagged(ax, done["size"], done[f"{metric}_median"], done, color, marker)
        failed = line.loc[~line.index.isin(measured.index), ["size", "status"]]
        for size, status in failed.itertuples(index=False):
            if status in tidy.STATUS_TEXT:
                stacked = notes_at.get(float(size), 0)
                notes_at[float(size)] = stacked + 1
                height = 0.03 + 0.08 * (stacked % 10)
                _annotate(ax, float(size), status, height=height, rotation=0, color=color)
    if measured.empty:
        ax.set_yticks([])  # nothing measured: a number scale would suggest values
    else:
        ax.set_yscale("log")  # backends differ by factors: equal ratios, equal distances
        set_range(ax, "y", *plotted_range(measured, f"{metric}_"))


def kernel_throughput_by_size(frame: pd.DataFrame, width: float | None = None) -> Figure:
    """Throughput against problem size n, one panel per (kernel, device) with its own axes:
    GFLOP/s for compute-bound kernels, GB/s for copies and memory-bound ones
    (`kernel_metric`). Colour = backend, line style and marker = dtype."""
    style.apply()
    rows, _ = tidy.experiment_rows(frame, "kernel")
    panels = [
        (kernel, device)
        for kernel in sorted(set(rows.get("kernel", [])))
        for device in tidy.natural_devices(rows.loc[rows["kernel"] == kernel, "device"])
    ]
    if not panels:
        return style.empty_figure("no kernel records", width)
    fig, axes = _panel_figure(len(panels), width)
    backends = fastest_first(
        rows,
        ["kernel", "device"],
        lambda panel: kernel_metric(rows[rows["kernel"] == panel["kernel"].iloc[0]]),
    )
    dtypes = sorted(set(rows["dtype"].dropna()))
    palette = dict(zip(backends, style.colors(len(backends)), strict=True))
    looks = _looks(dtypes)
    series = [((backend, dtype), palette[backend]) for backend in backends for dtype in dtypes]
    single_kernel = len({kernel for kernel, _ in panels}) == 1
    flagged = False
    for ax, (kernel, device) in zip(axes, panels, strict=False):
        metric = kernel_metric(rows[rows["kernel"] == kernel])
        panel = _with_metric(rows[(rows["kernel"] == kernel) & (rows["device"] == device)], metric)
        _throughput_panel(ax, panel, metric, series, looks)
        flagged |= flagged_rows(_measured(panel, metric)).any()
        _size_axis(ax, sorted(set(panel["size"].dropna().astype(int))))
        name, unit = KERNEL_METRICS[metric]
        ax.set_ylabel(f"{name} ({frame.attrs.get('units', {}).get(f'{metric}_median', unit)})")
        ax.set_title(device if single_kernel else f"{kernel}, {device}")
    for ax in axes[len(panels) :]:
        ax.remove()
    _series_legend(fig, palette, looks, flagged)
    return fig


def datasci_throughput_by_size(frame: pd.DataFrame, width: float | None = None) -> Figure:
    """Throughput (items/s: rows, samples or nodes) against problem size n, one panel per
    workload, CPU and GPU together: colour = library, line style and marker = device."""
    style.apply()
    rows, _ = tidy.experiment_rows(frame, "datasci")
    names = sorted(set(rows.get("workload", [])))
    if not names:
        return style.empty_figure("no data science records", width)
    fig, axes = _panel_figure(len(names), width)
    backends = fastest_first(rows, ["workload"], lambda panel: "item_throughput")
    devices = tidy.natural_devices(rows["device"])
    palette = dict(zip(backends, style.colors(len(backends)), strict=True))
    looks = _looks(devices)
    series = [((backend, device), palette[backend]) for backend in backends for device in devices]
    flagged = False
    for ax, name in zip(axes, names, strict=False):
        panel = _with_metric(rows[rows["workload"] == name], "item_throughput")
        _throughput_panel(ax, panel, "item_throughput", series, looks, by="device")
        flagged |= flagged_rows(_measured(panel, "item_throughput")).any()
        _size_axis(ax, sorted(set(panel["size"].dropna().astype(int))))
        items = panel["item"].dropna() if "item" in panel else pd.Series(dtype="str")
        ax.set_ylabel(f"Throughput ({items.iloc[0] if not items.empty else 'items'}/s)")
        ax.set_title(name)
    for ax in axes[len(names) :]:
        ax.remove()
    _series_legend(fig, palette, looks, flagged)
    return fig


# What tells the points of an energy figure's panel apart besides the device.
ENERGY_MARKERS = {"train": "precision", "kernel": "backend", "datasci": "backend"}


def _per_work(rows: pd.DataFrame, metric: str, divisor, unit: str | None):
    """`rows` with the metric's median and interval divided by `divisor` (the batch size)
    and put in the unit the tables print; returns (rows, unit)."""
    columns = [f"{metric}_{field}" for field in ("median", "ci_low", "ci_high")]
    rows = rows.assign(**{column: rows[column].astype(float) / divisor for column in columns})
    shown, factor = tables.readable_unit(unit, list(rows[columns[0]]))
    return _scaled(rows, metric, factor), shown


def _energy_panel(
    ax, here: pd.DataFrame, metrics: tuple[str, str], marker: str, palette: dict, markers: dict
) -> None:
    """One model's (kernel's) energy against time: a point per device and `marker` kind,
    error bars both ways, flagged points hollow; log axes where a range spans decades."""
    time_metric, energy_metric = metrics
    for (device, kind), group in here.groupby(["device", marker], sort=False):
        x = group[f"{time_metric}_median"].to_numpy(float)
        y = group[f"{energy_metric}_median"].to_numpy(float)
        ax.errorbar(
            x,
            y,
            xerr=_yerr(group, time_metric),
            yerr=_yerr(group, energy_metric),
            color=palette[device],
            marker=markers[kind],
            linestyle="none",
            elinewidth=0.6,
        )
        hollow_flagged(ax, x, y, group, palette[device], markers[kind])
    for axis, metric in (("x", time_metric), ("y", energy_metric)):
        low, high = plotted_range(here, f"{metric}_")
        if _spans_decades(np.array([low, high])):
            (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
        set_range(ax, axis, low, high)


def energy_against_time(
    frame: pd.DataFrame, experiment: str = "train", width: float | None = None
) -> Figure:
    """Energy against time per sample (training) or per call (kernels), one panel per model
    or kernel, colour the device, marker the precision (backend); error bars both ways are
    the 95% intervals. Left is faster, low is cheaper in energy: a device that pays off in
    time but not in energy sits left and up. Only measured energy is drawn."""
    style.apply()
    spec, marker = tables.ENERGY_SPECS[experiment], ENERGY_MARKERS[experiment]
    time_metric, energy_metric = spec.time_metric, spec.energy_metric
    rows, _ = tidy.experiment_rows(frame, experiment)
    rows = _with_metric(_with_metric(rows, time_metric), energy_metric)
    measured = _measured(_measured(rows, energy_metric), time_metric)
    if measured.empty:
        return style.empty_figure(f"no energy measured in the {experiment} records", width)
    units = frame.attrs.get("units", {})
    divisor = measured["batch"].astype(float) if spec.per_batch else 1.0
    measured, time_unit = _per_work(
        measured, time_metric, divisor, units.get(f"{time_metric}_median")
    )
    measured, energy_unit = _per_work(
        measured, energy_metric, 1.0, units.get(f"{energy_metric}_median")
    )
    primary = FAMILIES[experiment].primary
    panels = sorted(set(measured[primary]))
    fig, axes = _panel_figure(len(panels), width)
    devices = tidy.natural_devices(measured["device"])
    palette = dict(zip(devices, style.colors(len(devices)), strict=True))
    kinds = tidy.ordered(marker, measured[marker])
    markers = {kind: style.MARKERS[i % len(style.MARKERS)] for i, kind in enumerate(kinds)}
    for ax, panel in zip(axes, panels, strict=False):
        here = measured[measured[primary] == panel]
        _energy_panel(ax, here, (time_metric, energy_metric), marker, palette, markers)
        ax.set_xlabel(f"Time per {spec.work} ({time_unit})")
        ax.set_ylabel(f"Energy per {spec.work} ({energy_unit})")
        ax.set_title(panel)
    for ax in axes[len(panels) :]:
        ax.remove()
    handles = [
        Line2D([], [], color=palette[device], marker="o", ls="none", label=device)
        for device in devices
    ]
    handles += [
        Line2D([], [], color="black", marker=markers[kind], ls="none", label=kind) for kind in kinds
    ]
    _legend(fig, handles, measured)
    return fig


# Every figure the workflow draws, by file name: draw(frame, baseline device, width).
FIGURES: dict[str, Callable[[pd.DataFrame, str, float | None], Figure]] = {
    "train_time_per_batch": lambda frame, baseline, width: time_per_batch_by_device(frame, width),
    "train_speedup": lambda frame, baseline, width: speedup_heatmap(
        frame, baseline, "train", width
    ),
    "train_thread_scaling": lambda frame, baseline, width: cpu_thread_scaling(
        frame, "train", width
    ),
    "train_precision": lambda frame, baseline, width: precision_comparison(frame, width),
    "train_gpu_scaling": lambda frame, baseline, width: scaling_efficiency(
        frame, "train", "cuda", width
    ),
    "train_node_scaling": lambda frame, baseline, width: node_scaling_efficiency(
        frame, "train", width
    ),
    "kernel_throughput": lambda frame, baseline, width: kernel_throughput_by_size(frame, width),
    "datasci_throughput": lambda frame, baseline, width: datasci_throughput_by_size(frame, width),
    "train_energy": lambda frame, baseline, width: energy_against_time(frame, "train", width),
    "kernel_energy": lambda frame, baseline, width: energy_against_time(frame, "kernel", width),
    "datasci_energy": lambda frame, baseline, width: energy_against_time(frame, "datasci", width),
}

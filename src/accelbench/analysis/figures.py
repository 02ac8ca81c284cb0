"""Figures from the tidy table, one function each: training time per mini-batch by
device, speedup heat map, CPU thread scaling, precision comparison, multi-GPU
scaling efficiency, scaling across nodes, kernel and data science throughput against
size, energy against time; and the times of the cells of work several machines share
(`machine_times`, from their joined records). The ones the workflow draws are declared in
accelbench.analysis.outputs.

A figure draws what it compares, and only that: a configuration measured on one device
is not in the figure of devices, a kernel measured at one size has no line over sizes
(it joins the other kernels measured at one size, side by side), a panel or group with
nothing beside it is left to the tables, and no two figures draw the same numbers (the
speedups over the baseline of the baseline's own kind are the scaling figures', not the
heat map's). The grid decides beforehand which figures it fills
(accelbench.analysis.fillable).

The records hold summaries (median and its interval), not raw samples, so points and
error bars are drawn explicitly from those columns rather than letting seaborn estimate
them, the same way in every figure (accelbench.analysis.marks): each series in its name's
look (accelbench.analysis.style), a cell measured on a busy machine or less precisely
than asked hollow and its interval off the axis range, an interval beyond the axes drawn
to the edge with an arrow, a cell that exists but did not run labelled where its point
would be (n/a, OOM, failed). Times and rates are points with their intervals, never bars,
and the points of a group go from the fastest to the slowest, so the winner comes first.
Every function takes an optional width in inches (style.WIDTHS); without one it picks
single or double column by its content.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, NullLocator

from accelbench.analysis import crossovers, machines, marks, ratios, style, tables, tidy
from accelbench.analysis.sizes import size_label, size_text
from accelbench.analysis.tables.builders import interval_name
from accelbench.families import FAMILIES
from accelbench.measuring.statistics import CI_LEVEL
from accelbench.platform.devices import DeviceError, parse_device

NOT_RUN_TEXT = {**tidy.STATUS_TEXT, ratios.NO_BASELINE: "no base"}
# Record flags (tidy columns) that draw a cell hollow and keep its interval off the axes.
FLAG_COLUMNS = ("busy", "imprecise")
# Below one flop per byte a kernel is limited by memory on any device (ridge points are
# several flop/byte), so its bandwidth says more than its GFLOP/s; copies have no flops.
MEMORY_BOUND_INTENSITY = 1.0
KERNEL_METRICS = {"gflops": ("Throughput", "GFLOP/s"), "bandwidth": ("Bandwidth", "GB/s")}
SIZE_TICK_WIDTH = 0.45  # inches per size tick label, so that neighbours never touch
# What tells the points of an energy figure's panel apart besides the device.
ENERGY_HUES = {"train": "precision", "kernel": "backend", "datasci": "backend"}


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


def _interval(rows: pd.DataFrame, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """The (low, high) ends of the rows' intervals of `prefix` (a metric and "_")."""
    return (rows[f"{prefix}ci_low"].to_numpy(float), rows[f"{prefix}ci_high"].to_numpy(float))


def flagged_rows(rows: pd.DataFrame) -> np.ndarray:
    """Which rows were measured on a busy machine or less precisely than asked (tidy columns
    `busy`, `imprecise`; absent: none)."""
    found = np.zeros(len(rows), bool)
    for column in FLAG_COLUMNS:
        if column in rows:
            found |= rows[column].map(tidy.flagged).to_numpy(bool)
    return found


def plotted_range(rows: pd.DataFrame, prefix: str) -> tuple[float, float]:
    """(low, high) the axis of a metric must show: every median, and the intervals of the
    rows that are not flagged (a busy cell's interval, 0 to 2e10 us, once stretched an
    axis over twelve decades); NaN where nothing is finite."""
    medians = rows[f"{prefix}median"].to_numpy(float)
    trusted = ~flagged_rows(rows)
    low, high = _interval(rows, prefix)
    values = np.concatenate([medians, low[trusted], high[trusted]])
    values = values[np.isfinite(values)]
    if not values.size:
        return math.nan, math.nan
    return float(values.min()), float(values.max())


def _interval_text(rows: pd.DataFrame) -> str:
    """What an error bar of `rows` is: the records' interval (the tables' name for it), or
    for a ratio of two records (cells with a `ci_level`, accelbench.analysis.ratios) the
    level the two intervals guarantee it."""
    ran = rows[rows["status"] == "ok"]
    paired = (
        ran["paired"].fillna(False).astype(bool)
        if "paired" in ran
        else pd.Series(False, index=ran.index)
    )
    levels = ran["ci_level"] if "ci_level" in ran else pd.Series(np.nan, index=ran.index)
    unpaired = levels[~paired].dropna().astype(float)
    weakest = unpaired.min() if not unpaired.empty and unpaired.min() < CI_LEVEL else None
    if paired.any() and weakest is not None:
        return f"{CI_LEVEL:.0%} interval of the ratio round by round, {weakest:.0%} unpaired"
    if weakest is not None:
        return f"{weakest:.0%} interval of the ratio"
    if paired.any():
        return f"{CI_LEVEL:.0%} paired interval of the ratio (round by round)"
    return interval_name(rows)


def legend_with_marks(fig: Figure, handles: list, rows: pd.DataFrame | None = None) -> None:
    """The style's compact legend; with the `rows` drawn, also what an error bar is and,
    where one of them is flagged, what a hollow mark is."""
    if rows is not None and (rows["status"] == "ok").any():
        handles = [*handles, style.interval_entry(_interval_text(rows))]
        if flagged_rows(rows[rows["status"] == "ok"]).any():
            handles.append(style.flagged_entry())
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


def _group_points(ax, group: pd.DataFrame, done: pd.DataFrame, places, hue: str, looks, metric):
    """The points of one group at `places`: the measured ones (`done`, fastest first) in
    their look with their intervals, then the labels of the cells that did not run."""
    for place, (index, row), flagged in zip(
        places, done.iterrows(), flagged_rows(done), strict=False
    ):
        low, high = _interval(done.loc[[index]], f"{metric}_")
        marks.measured(
            ax, [place], [row[f"{metric}_median"]], (low, high), looks[row[hue]], [flagged]
        )
    statuses = group.loc[~group.index.isin(done.index), "status"]
    for place, status in zip(places[len(done) :], statuses, strict=True):
        if status in tidy.STATUS_TEXT:
            marks.not_run(ax, place, status, height=0.03, rotation=90, color="black")


def _points(ax, rows: pd.DataFrame, hue: str, looks: dict, metric: str) -> float:
    """`metric` as points with their intervals: one group per label, one point per value of
    `hue` in its look (`looks`), from the lowest median to the highest, so that for a time
    the winner comes first; cells that did not run are labelled in the places after them.
    Returns the inches the figure must grow by for labels turned upright, so the panel
    keeps its height."""
    labels = list(dict.fromkeys(rows["label"]))
    measured = _measured(rows, metric)
    slot = 0.8 / max(rows.groupby("label", sort=False).size().max(), 1)
    notes = [tidy.STATUS_TEXT[status] for status in rows["status"] if status in tidy.STATUS_TEXT]
    for position, label in enumerate(labels):
        group = rows[rows["label"] == label]
        done = group[group.index.isin(measured.index)]
        done = done.sort_values(f"{metric}_median", kind="stable")
        places = position + (np.arange(len(group)) - (len(group) - 1) / 2) * slot
        _group_points(ax, group, done, places, hue, looks, metric)
    # Upright labels of cells that did not run stand at the bottom, below every point.
    size = plt.rcParams["xtick.labelsize"]
    tall = max((style.text_width(note, size) for note in notes), default=0.0)
    height = ax.get_position().height * ax.get_figure().get_figheight()
    band = min(0.5, 0.05 + tall / height) if notes else 0.0
    marks.fit_axis(ax, "y", *plotted_range(measured, f"{metric}_"), band=band)
    if measured.empty:
        ax.set_yticks([])  # nothing measured: a number scale would suggest values
    ax.set_xlim(-0.5, len(labels) - 0.5)
    grow = _fit_labels(ax, labels)
    marks.arrows(ax)
    return grow


def _entries(category: str, values, *, line: bool = False) -> list[Line2D]:
    """Legend entries of names of one category, each in its look."""
    return [style.entry(style.look(category, value), str(value), line=line) for value in values]


def _looks(category: str, values) -> dict:
    """Each value's look in its category."""
    return {value: style.look(category, value) for value in values}


def time_per_batch_by_device(frame: pd.DataFrame, width: float | None = None) -> Figure:
    """Time per mini-batch of the training configurations measured on two devices or more:
    one group per configuration (row label), one point per device in its look, fastest
    first. A configuration on one device has nothing to set beside: the table has it."""
    style.apply()
    metric = FAMILIES["train"].time_metric
    rows, _ = tidy.compared_rows(frame, "train", "device")
    if rows.empty:
        return style.empty_figure("no training configuration measured on two devices", width)
    rows = _with_metric(rows, metric)
    label, factor = _time_unit(frame, rows, metric)
    rows = _scaled(rows, metric, factor)
    labels = list(dict.fromkeys(rows["label"]))
    devices = tidy.natural_devices(rows["device"])
    auto = style.SINGLE_COLUMN if len(labels) * len(devices) <= 12 else style.DOUBLE_COLUMN
    fig = Figure(figsize=(width or auto, style.PANEL_HEIGHT), layout="constrained")
    ax = fig.add_subplot()
    ax.set_ylabel(label)
    ax.set_xlabel("Model")
    grow = _points(ax, rows, "device", _looks("device", devices), metric)
    fig.set_figheight(min(style.MAX_HEIGHT - 1.0, fig.get_figheight() + grow))
    legend_with_marks(fig, _entries("device", devices), rows)
    return fig


def precision_comparison(frame: pd.DataFrame, width: float | None = None) -> Figure:
    """Time per mini-batch by precision: one panel per device, one group per model, one point
    per precision in its look, fastest first, so the gain of a narrower type is read
    within a panel. Only models measured in two or more precisions on a device are shown."""
    style.apply()
    metric = FAMILIES["train"].time_metric
    rows, _ = tidy.compared_rows(frame, "train", "precision")
    devices = tidy.natural_devices(rows["device"]) if not rows.empty else []
    if not devices:
        return style.empty_figure("no model measured in two precisions", width)
    precisions = tidy.ordered("precision", rows["precision"])
    fig, axes = _panel_figure(len(devices), width)
    label, factor = _time_unit(frame, _with_metric(rows, metric), metric)
    grow = 0.0
    for ax, device in zip(axes, devices, strict=False):
        ids = rows.loc[rows["device"] == device, "id"]
        here, _ = tidy.experiment_rows(frame[frame["id"].isin(ids)], "train", "precision")
        here = _scaled(_with_metric(here, metric), metric, factor)
        grow = max(grow, _points(ax, here, "precision", _looks("precision", precisions), metric))
        ax.set_title(device)
        ax.set_ylabel(label)
        ax.set_xlabel("Model")
    fig.set_figheight(min(style.MAX_HEIGHT - 1.0, fig.get_figheight() + grow))
    for ax in axes[len(devices) :]:
        ax.remove()
    legend_with_marks(fig, _entries("precision", precisions), _with_metric(rows, metric))
    return fig


def _machine_rows(joined: machines.Joined) -> tuple[pd.DataFrame, dict[str, style.Look]]:
    """The joined cells as `_points` reads them, a column per machine and device, and the
    look of each column: its device's colour, the marker of its source (the order given)."""
    cells = joined.cells
    looks, names = {}, {}
    for source, device in machines.columns(joined):
        name = ", ".join(machines.column_lines(joined, source, device))
        names[source, device] = name
        marker = style.MARKERS[source % len(style.MARKERS)]
        looks[name] = style.Look(style.look("device", device).color, marker)
    places = zip(cells["source"].astype(int), cells["device"], strict=True)
    rows = pd.DataFrame(
        {
            "experiment": cells["experiment"],
            "label": cells["label"],
            "column": [names[place] for place in places],
            "status": cells["status"],
            "unit": cells["unit"],
            **{flag: cells[flag] for flag in FLAG_COLUMNS},
            **{f"time_{field}": cells[field] for field in ("median", "ci_low", "ci_high")},
        }
    )
    return rows, looks


def machine_times(joined: machines.Joined, width: float | None = None) -> Figure:
    """The time of each cell of work several machines share (accelbench.analysis.machines):
    one panel per family, one group per cell, one point per machine and device with its
    interval, fastest first: the device's colour, a marker per machine; the legend names
    each column as the joined table does. Drawn at the text width: a legend entry names a
    machine, its device, date and source."""
    style.apply()
    if joined.cells.empty:
        return style.empty_figure("no cell of work measured on two machines", width)
    rows, looks = _machine_rows(joined)
    families = list(dict.fromkeys(rows["experiment"]))
    fig, axes = _panel_figure(len(families), width or style.DOUBLE_COLUMN)
    grow = 0.0
    for ax, name in zip(axes, families, strict=False):
        here = rows[rows["experiment"] == name]
        unit, factor = tables.readable_unit(
            str(here["unit"].iloc[0]), list(here["time_median"].astype(float))
        )
        grow = max(grow, _points(ax, _scaled(here, "time", factor), "column", looks, "time"))
        family = FAMILIES[name]
        ax.set_ylabel(f"{family.time_metric.replace('_', ' ').capitalize()} ({unit})")
        ax.set_xlabel("Cell of work")
        ax.set_title(family.units_called or name)
    fig.set_figheight(min(style.MAX_HEIGHT - 1.0, fig.get_figheight() + grow))
    for ax in axes[len(families) :]:
        ax.remove()
    handles = [style.entry(look, name) for name, look in looks.items()]
    legend_with_marks(fig, handles, rows)
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
    found = []
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
        found.append((row, column, text, color))
    return found


def _write_marks(ax, written, width: float, labels: list[str], devices: list[str]) -> None:
    """The cells' texts; with many devices at the widest width they shrink to fit a column."""
    size = plt.rcParams["ytick.labelsize"]
    column_width = (width - max(style.text_width(label, size) for label in labels) - 1.0) / len(
        devices
    )
    widest = max(style.text_width(text, size) for _, _, text, _ in written)
    cell_size = size * min(1.0, 0.85 * column_width / widest)
    for row, column, text, color in written:
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


def _kind(device: str) -> tuple[str | None, int]:
    """(kind, nodes) of a device name; (None, 1) for one that names no device."""
    try:
        parsed = parse_device(str(device))
    except DeviceError:
        return None, 1
    return parsed.kind, parsed.nodes


def _compared_across_kinds(cells: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """The speedup cells of devices the scaling figures do not draw (not the baseline's kind
    on one node), of the rows where one was compared with the baseline."""
    kind, _ = _kind(baseline)
    other = cells["device"].map(lambda device: _kind(device) != (kind, 1)).astype(bool)
    cells = cells[other]
    compared = cells.loc[cells["status"] != ratios.NO_BASELINE, "label"]
    return cells[cells["label"].isin(compared)]


def speedup_heatmap(
    frame: pd.DataFrame, baseline: str, experiment: str = "train", width: float | None = None
) -> Figure:
    """Speedup over the `baseline` device of the devices of another kind (GPUs over a CPU,
    CPUs over a GPU) and of several nodes, rows x devices, coloured on a log scale centred
    on 1 (one hue faster, the other slower); cells that did not run say why, cells
    measured on a busy machine or less precisely than asked carry the tables' marks. The
    baseline's own kind on one node is the scaling figures' (thread and GPU scaling)."""
    style.apply()
    cells = _compared_across_kinds(ratios.speedup(frame, experiment, baseline)[0], baseline)
    labels = list(dict.fromkeys(cells["label"]))
    if not labels:
        return style.empty_figure(f"no {experiment} records on another kind of device", width)
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


def _configuration_look(label: str) -> style.Look:
    """A scaling line's look: the colour and marker of its model (the label's first part),
    the line style of the strategy it names."""
    parts = label.replace("; ", ", ").split(", ")
    model = style.look("model", parts[0])
    strategy = next((part for part in parts[1:] if part in style.LOOKS["strategy"]), None)
    linestyle = style.look("strategy", strategy).linestyle if strategy else "-"
    return style.Look(model.color, model.marker, linestyle)


def _from_one(cells: pd.DataFrame, prefix: str, one: float) -> pd.DataFrame:
    """`cells` with, for every label compared at a larger count, its one-device (one-node)
    baseline at count 1 where it has none of its own strategy: `one` by definition (the
    record it is compared with), so each line joins the counts measured to where it
    starts."""
    compared = cells[(cells["status"] == "ok") & (cells["count"] > 1)]
    known = set(cells.loc[cells["count"] == 1, "label"])
    missing = compared[~compared["label"].isin(known)].drop_duplicates("label")
    columns = [f"{prefix}{field}" for field in ("median", "ci_low", "ci_high")]
    start = missing.assign(
        count=1, status="ok", busy=False, imprecise=False, **dict.fromkeys(columns, one)
    )
    return pd.concat([start, cells], ignore_index=True)


def _lines(ax, cells: pd.DataFrame, prefix: str, looks: dict) -> list[Line2D]:
    """One line per label over the device count in its look, with interval error bars,
    flagged cells hollow; cells that did not run are labelled at their count, in the
    label's colour. Returns legend handles."""
    handles = []
    for slot, (label, look) in enumerate(looks.items()):
        here = cells[cells["label"] == label].sort_values("count")
        ok = (here["status"] == "ok") & np.isfinite(here[f"{prefix}median"].astype(float))
        done = here[ok]
        # Every label is in the legend, also one whose cells all failed: its colour names them.
        handles.append(style.entry(look, label, line=True))
        if not done.empty:
            marks.measured(
                ax,
                done["count"],
                done[f"{prefix}median"],
                _interval(done, prefix),
                look,
                flagged_rows(done),
                linestyle=look.linestyle,
            )
        for count, status in here.loc[~ok, ["count", "status"]].itertuples(index=False):
            if NOT_RUN_TEXT.get(status):
                ax.text(
                    float(count),
                    0.03 + 0.08 * (slot % 10),
                    NOT_RUN_TEXT[status],
                    transform=ax.get_xaxis_transform(),
                    ha="center",
                    va="bottom",
                    color=look.color,
                )
    return handles


def _count_axis(ax, counts: list[int], label: str) -> None:
    """Device counts as ticks: on a log2 axis where they span a decade, else linear."""
    if marks.spans_decade(counts[0], counts[-1]):
        ax.set_xscale("log", base=2)
        ax.set_xlim(counts[0] / 1.3, counts[-1] * 1.3)
    else:
        pad = 0.1 * (counts[-1] - counts[0]) or 0.5
        ax.set_xlim(counts[0] - pad, counts[-1] + pad)
    ax.set_xticks(counts)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(label)


def _drawn(cells: pd.DataFrame, look_of=_configuration_look) -> tuple[pd.DataFrame, dict]:
    """The cells to draw and each label's look (`look_of`), labels in order: a line for a
    label measured at a count above one (from its baseline, `_from_one`), and the status
    of every cell that did not run; a label's baseline alone is not drawn."""
    larger = set(cells.loc[(cells["status"] == "ok") & (cells["count"] > 1), "label"])
    cells = cells[cells["label"].isin(larger) | (cells["status"] != "ok")]
    return cells, {label: look_of(label) for label in sorted(set(cells["label"]))}


def cpu_thread_scaling(
    frame: pd.DataFrame, experiment: str = "train", width: float | None = None
) -> Figure:
    """Speedup over one thread against CPU threads, one line per row label from its
    baseline on one thread, with the ideal (linear) speedup dashed. A label measured on
    one thread only has no line."""
    style.apply()
    cells, _ = ratios.scaling(frame, experiment)
    cells = cells[(cells["kind"] == "cpu") & (cells["nodes"] == 1)]
    cells = cells[cells["label"].isin(cells.loc[cells["count"] > 1, "label"])]
    cells, looks = _drawn(_from_one(cells, "", 1.0))
    counts = sorted(set(cells["count"].astype(int)))
    if len(counts) < 2:
        return style.empty_figure("no CPU thread-scaling records", width)
    fig = Figure(figsize=(width or style.SINGLE_COLUMN, style.PANEL_HEIGHT), layout="constrained")
    ax = fig.add_subplot()
    ax.set_ylabel("Speedup over 1 thread (×)")
    ideal = ax.plot(counts, counts, color=style.NEUTRAL, linestyle="--", lw=0.8, label="ideal")
    handles = _lines(ax, cells, "", looks)
    _count_axis(ax, counts, "CPU threads")
    low, high = plotted_range(cells[cells["status"] == "ok"], "")
    marks.fit_axis(ax, "y", min(low, counts[0]), max(high, counts[-1]))
    if ax.get_yscale() == "log":
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    marks.arrows(ax)
    legend_with_marks(fig, [*ideal, *handles], cells)
    return fig


def scaling_efficiency(
    frame: pd.DataFrame, experiment: str = "train", kind: str = "cuda", width: float | None = None
) -> Figure:
    """Parallel efficiency (speedup over one device, over K) in percent against the device
    count K, one line per row label (model and strategy) from 100% on one device; 100% is
    linear scaling."""
    style.apply()
    cells, _ = ratios.scaling(frame, experiment)
    # Several nodes have a figure of their own (node_scaling_efficiency).
    cells = cells[(cells["kind"] == kind) & (cells["nodes"] == 1)]
    cells = cells[cells["label"].isin(cells.loc[cells["count"] > 1, "label"])]
    if cells.empty:
        what = "multi-GPU" if kind == "cuda" else "multi-thread"
        return style.empty_figure(f"no {what} records", width)
    return _efficiency_figure(
        cells,
        "GPUs" if kind == "cuda" else "CPU threads",
        "Scaling efficiency (%)",
        width,
    )


def _efficiency_figure(
    cells: pd.DataFrame, xlabel: str, ylabel: str, width: float | None, look_of=None
) -> Figure:
    """Efficiency in percent against a count (devices, nodes), one line per label from
    100% at one (`_from_one`), in the look `look_of` gives it, with the ideal (100%)
    dashed."""
    columns = [f"efficiency_{field}" for field in ("median", "ci_low", "ci_high")]
    cells = _from_one(cells, "efficiency_", 1.0)
    cells = cells.assign(**{column: cells[column].astype(float) * 100 for column in columns})
    cells, looks = _drawn(cells, look_of or _configuration_look)
    counts = sorted(set(cells["count"].astype(int)))
    fig = Figure(figsize=(width or style.SINGLE_COLUMN, style.PANEL_HEIGHT), layout="constrained")
    ax = fig.add_subplot()
    ax.set_ylabel(ylabel)
    ideal = ax.axhline(100.0, color=style.NEUTRAL, linestyle="--", linewidth=0.8, label="ideal")
    handles = _lines(ax, cells, "efficiency_", looks)
    _count_axis(ax, counts, xlabel)
    _, top = plotted_range(cells[cells["status"] == "ok"], "efficiency_")
    ax.set_ylim(0, max(110.0, top * 1.05) if math.isfinite(top) else 110.0)
    marks.arrows(ax)
    legend_with_marks(fig, [ideal, *handles], cells)
    return fig


def node_scaling_efficiency(
    frame: pd.DataFrame, experiment: str = "train", width: float | None = None
) -> Figure:
    """Efficiency of N nodes against one node with the same devices, in percent, against
    the node count: one line per configuration and devices per node (the look of those
    devices on one node), starting at 100% on one node; the dashed line at 100% is
    linear scaling across nodes."""
    style.apply()
    cells, _ = ratios.node_scaling(frame, experiment)
    if cells.empty:
        return style.empty_figure("no multi-node records", width)
    unit = {"cpu": "processes", "cuda": "GPUs"}
    labels = [
        f"{label}; {count} {unit[kind]} per node"
        for label, count, kind in cells[["label", "per_node", "kind"]].itertuples(False)
    ]
    per_node = cells["kind"] + cells["per_node"].astype(int).astype(str)
    devices = dict(zip(labels, per_node, strict=True))
    return _efficiency_figure(
        cells.assign(label=labels),
        "Nodes",
        "Efficiency over one node (%)",
        width,
        lambda label: style.look("device", devices[label]),
    )


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


def size_axis(ax, sizes: list[int]) -> None:
    """An axis of this panel's own sizes: logarithmic where they span a decade (base 2
    when they are powers of two), else linear from zero, with as many of them as tick
    labels as fit side by side."""
    if marks.spans_decade(sizes[0], sizes[-1]):
        powers_of_two = all(size > 0 and size & (size - 1) == 0 for size in sizes)
        ax.set_xscale("log", base=2 if powers_of_two else 10)
        ax.set_xlim(sizes[0] / 2, sizes[-1] * 2)
    else:
        ax.set_xlim(0, sizes[-1] * (1 + 2 * marks.LINEAR_MARGIN))
    fits = max(1, int(ax.get_position().width * ax.get_figure().get_figwidth() / SIZE_TICK_WIDTH))
    shown = sizes[:: math.ceil(len(sizes) / fits)]
    ax.set_xticks(shown, [size_text(size) for size in shown])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("Problem size n")


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


@dataclass(frozen=True)
class _Panel:
    """One panel of a throughput figure: a kernel (workload) on a device over its sizes
    (`curves`), or the kernels (workloads) measured at one size, side by side."""

    title: str
    rows: pd.DataFrame
    metric: str
    ylabel: str
    curves: bool


def _metric_of(frame: pd.DataFrame, experiment: str, rows: pd.DataFrame) -> tuple[str, str]:
    """(metric, y label) of one kernel's or workload's rows: GFLOP/s or GB/s for a kernel
    (`kernel_metric`), its own items per second for a workload."""
    if experiment == "kernel":
        metric = kernel_metric(rows)
        name, unit = KERNEL_METRICS[metric]
        return metric, f"{name} ({frame.attrs.get('units', {}).get(f'{metric}_median', unit)})"
    items = rows["item"].dropna() if "item" in rows else pd.Series(dtype="str")
    return "item_throughput", f"Throughput ({items.iloc[0] if not items.empty else 'items'}/s)"


def _pooled(rows: pd.DataFrame, primary: str, variant: str | None) -> tuple[pd.DataFrame, str]:
    """Rows measured at one size each, labelled by what tells their cells apart (the
    kernel and its size; its `variant` (dtype) where it has several here, the device where
    several are), and the panel's title, which names what all share."""
    parts = [rows[primary].astype(str)]
    if variant is not None:
        several = rows.groupby(primary)[variant].transform("nunique") > 1
        parts.append(rows[variant].astype(str).where(several, ""))
    devices = rows["device"].nunique() > 1
    if devices:
        parts.append(rows["device"].astype(str))
    parts.append(rows["size"].map(size_label))
    labels = pd.concat(parts, axis=1).agg(lambda row: ", ".join(filter(None, row)), axis=1)
    shared = [] if devices else [str(rows["device"].iloc[0])]
    if variant is not None and rows[variant].nunique() == 1:
        shared.append(str(rows[variant].iloc[0]))
    title = ", ".join([*shared, "at one size each"])
    order = rows.assign(label=labels.astype(str)).sort_values([primary, "device"], key=_natural)
    return order, title


def _natural(column: pd.Series) -> pd.Series:
    """Devices sort naturally (cpu2 before cpu16), anything else as it is."""
    return column.map(tidy.device_key) if column.name == "device" else column


def _throughput_panels(frame: pd.DataFrame, experiment: str, primary: str) -> list[_Panel]:
    """The panels of a throughput figure: a kernel (workload) on a device measured at two
    sizes or more, over its sizes; the others side by side, a panel per metric (unit),
    where two cells or more were measured."""
    rows, _ = tidy.experiment_rows(frame, experiment)
    found, pooled = [], {}
    for name in sorted(set(rows.get(primary, pd.Series(dtype="str")).dropna())):
        here = rows[rows[primary] == name]
        metric, ylabel = _metric_of(frame, experiment, here)
        for device in tidy.natural_devices(here["device"]):
            panel = _with_metric(here[here["device"] == device], metric)
            if _measured(panel, metric)["size"].nunique() >= 2:
                found.append(_Panel(f"{name}, {device}", panel, metric, ylabel, True))
            else:
                pooled.setdefault((metric, ylabel), []).append(panel)
    for (metric, ylabel), parts in pooled.items():
        pool = pd.concat(parts)
        if len(_measured(pool, metric)) >= 2:
            rows_of, title = _pooled(pool, primary, crossovers.variant(experiment))
            found.append(_Panel(title, rows_of, metric, ylabel, False))
    return found


def _throughput_panel(ax, panel: pd.DataFrame, metric: str, variant: str | None, values: list):
    """One kernel (workload) on one device: a line per backend (and `variant`, a kernel's
    dtype, where it has several `values`: their line styles) over size with interval error
    bars, flagged points hollow and their intervals off the axis range; cells that did
    not run are labelled at their size, in the backend's colour."""
    measured = _measured(panel, metric)
    notes_at: dict[float, int] = {}  # labels already stacked at a size, from the bottom
    by = variant if len(values) > 1 else None
    for backend in sorted(set(panel["backend"].dropna())):
        look = style.look("backend", backend)
        for value in values if by else [None]:
            selected = panel["backend"] == backend
            if by:
                selected &= panel[by] == value
            line = panel[selected].sort_values("size")
            done = line[line.index.isin(measured.index)]
            if not done.empty:
                linestyle = style.look(by, value).linestyle if by else look.linestyle
                marks.measured(
                    ax,
                    done["size"],
                    done[f"{metric}_median"],
                    _interval(done, f"{metric}_"),
                    look,
                    flagged_rows(done),
                    linestyle=linestyle,
                )
            failed = line.loc[~line.index.isin(measured.index), ["size", "status"]]
            for size, status in failed.itertuples(index=False):
                if status in tidy.STATUS_TEXT:
                    stacked = notes_at.get(float(size), 0)
                    notes_at[float(size)] = stacked + 1
                    height = 0.03 + 0.08 * (stacked % 10)
                    marks.not_run(
                        ax, float(size), status, height=height, rotation=0, color=look.color
                    )
    size_axis(ax, sorted(set(panel["size"].dropna().astype(int))))
    marks.fit_axis(ax, "y", *plotted_range(measured, f"{metric}_"))
    marks.arrows(ax)


def _throughput_axes(panels: list[_Panel], width: float | None) -> tuple[Figure, list]:
    """The axes of a throughput figure: the panels over sizes in as many columns as stay
    readable, then each panel of one size each across the whole width, where its cells'
    labels have room."""
    curves = sum(panel.curves for panel in panels)
    width = width or (style.SINGLE_COLUMN if len(panels) == 1 else style.DOUBLE_COLUMN)
    width, _, ncols, _ = style.panel_grid(max(curves, 1), width)
    nrows = math.ceil(curves / ncols) + len(panels) - curves
    height = min(style.PANEL_HEIGHT, max(style.MIN_PANEL_HEIGHT, (style.MAX_HEIGHT - 1) / nrows))
    fig = Figure(figsize=(width, height * nrows), layout="constrained")
    grid = fig.add_gridspec(nrows, ncols)
    axes = [fig.add_subplot(grid[index // ncols, index % ncols]) for index in range(curves)]
    first = math.ceil(curves / ncols)
    axes += [fig.add_subplot(grid[first + index, :]) for index in range(len(panels) - curves)]
    return fig, axes


def _throughput_figure(
    frame: pd.DataFrame, experiment: str, primary: str, width: float | None
) -> Figure:
    """Throughput against size per kernel (workload) and device, and the ones measured at
    one size side by side (`_throughput_panels`); colour and marker the backend, line
    style the variant (a kernel's dtype, crossovers.variant) where several."""
    style.apply()
    panels = _throughput_panels(frame, experiment, primary)
    if not panels:
        return style.empty_figure(f"no {primary} measured at two sizes or beside another", width)
    fig, axes = _throughput_axes(panels, width)
    drawn = pd.concat([panel.rows for panel in panels])
    curves = pd.concat([panel.rows for panel in panels if panel.curves] or [drawn.iloc[:0]])
    variant = crossovers.variant(experiment)
    values = sorted(set(curves[variant].dropna())) if variant is not None else []
    backends = fastest_first(
        drawn, [primary, "device"], lambda rows: _metric_of(frame, experiment, rows)[0]
    )
    grow = 0.0
    for ax, panel in zip(axes, panels, strict=True):
        if panel.curves:
            _throughput_panel(ax, panel.rows, panel.metric, variant, values)
        else:
            looks = _looks("backend", backends)
            grow = max(grow, _points(ax, panel.rows, "backend", looks, panel.metric))
            ax.set_xlabel(f"{primary.capitalize()} and its size")
        ax.set_ylabel(panel.ylabel)
        ax.set_title(panel.title)
    fig.set_figheight(min(style.MAX_HEIGHT, fig.get_figheight() + grow))
    handles = _entries("backend", backends, line=not curves.empty)
    if variant is not None and len(values) > 1:
        handles += [
            style.style_entry(value, linestyle=style.look(variant, value).linestyle)
            for value in values
        ]
    legend_with_marks(fig, handles, drawn)
    return fig


def kernel_throughput_by_size(frame: pd.DataFrame, width: float | None = None) -> Figure:
    """Throughput against problem size n, one panel per kernel and device measured at two
    sizes or more, with its own axes: GFLOP/s for compute-bound kernels, GB/s for copies
    and memory-bound ones (`kernel_metric`); the kernels measured at one size side by
    side, a panel per unit. Colour and marker = backend, line style = dtype."""
    return _throughput_figure(frame, "kernel", "kernel", width)


def datasci_throughput_by_size(frame: pd.DataFrame, width: float | None = None) -> Figure:
    """Throughput (items/s: rows, samples or nodes) against problem size n, one panel per
    workload and device measured at two sizes or more; the workloads measured at one size
    side by side, a panel per item. Colour and marker = library."""
    return _throughput_figure(frame, "datasci", "workload", width)


def _per_work(rows: pd.DataFrame, metric: str, divisor, unit: str | None):
    """`rows` with the metric's median and interval divided by `divisor` (the batch size)
    and put in the unit the tables print; returns (rows, unit)."""
    columns = [f"{metric}_{field}" for field in ("median", "ci_low", "ci_high")]
    rows = rows.assign(**{column: rows[column].astype(float) / divisor for column in columns})
    shown, factor = tables.readable_unit(unit, list(rows[columns[0]]))
    return _scaled(rows, metric, factor), shown


def _energy_panel(ax, here: pd.DataFrame, metrics: tuple[str, str], hue: str, devices) -> None:
    """One model's (kernel's) energy against time: a point per cell, colour and marker of
    its `hue` (precision, backend), or the marker of its device where the figure holds
    several; error bars both ways, flagged points hollow."""
    time_metric, energy_metric = metrics
    for (device, value), group in here.groupby(["device", hue], sort=False):
        look = style.look(hue, value)
        marks.measured(
            ax,
            group[f"{time_metric}_median"],
            group[f"{energy_metric}_median"],
            _interval(group, f"{energy_metric}_"),
            look,
            flagged_rows(group),
            marker=style.look("device", device).marker if len(devices) > 1 else None,
            x_interval=_interval(group, f"{time_metric}_"),
        )
    for axis, metric in (("x", time_metric), ("y", energy_metric)):
        marks.fit_axis(ax, axis, *plotted_range(here, f"{metric}_"))
    marks.arrows(ax)


def _energy_rows(frame: pd.DataFrame, experiment: str) -> tuple[pd.DataFrame, str, str]:
    """The rows of `experiment` with a measured energy and time, per sample (training) or
    per call, in the tables' units; and those units (time, energy)."""
    spec, time_metric = tables.ENERGY_SPECS[experiment], FAMILIES[experiment].time_metric
    rows, _ = tidy.experiment_rows(frame, experiment)
    rows = _with_metric(_with_metric(rows, time_metric), spec.energy_metric)
    measured = _measured(_measured(rows, spec.energy_metric), time_metric)
    units = frame.attrs.get("units", {})
    divisor = measured["batch"].astype(float) if spec.per_batch else 1.0
    measured, time_unit = _per_work(
        measured, time_metric, divisor, units.get(f"{time_metric}_median")
    )
    measured, energy_unit = _per_work(
        measured, spec.energy_metric, 1.0, units.get(f"{spec.energy_metric}_median")
    )
    return measured, time_unit, energy_unit


def _energy_panel_names(rows: pd.DataFrame, experiment: str) -> pd.Series:
    """Each row's panel: its model, kernel or workload, and its variant (a kernel's dtype,
    crossovers.variant) where it was measured in several (a backend's look would not tell
    them apart)."""
    primary, variant = FAMILIES[experiment].primary, crossovers.variant(experiment)
    names = rows[primary].astype(str)
    if variant is None:
        return names
    several = rows.groupby(primary)[variant].transform("nunique") > 1
    return names.where(~several, names + ", " + rows[variant].astype(str))


def energy_against_time(
    frame: pd.DataFrame, experiment: str = "train", width: float | None = None
) -> Figure:
    """Energy against time per sample (training) or per call (kernels), one panel per model
    or kernel with two cells or more measured; the precision's (backend's) colour and
    marker, the device's marker where several; error bars both ways are the intervals.
    Left is faster, low is cheaper in energy: a device that pays off in time but not in
    energy sits left and up. Only measured energy is drawn."""
    style.apply()
    spec, hue = tables.ENERGY_SPECS[experiment], ENERGY_HUES[experiment]
    time_metric = FAMILIES[experiment].time_metric
    measured, time_unit, energy_unit = _energy_rows(frame, experiment)
    measured = measured.assign(panel=_energy_panel_names(measured, experiment))
    counts = measured["panel"].value_counts()
    panels = sorted(name for name, count in counts.items() if count >= 2)
    if not panels:
        what = f"no {experiment} cells whose energy was measured beside another's"
        return style.empty_figure(what, width)
    measured = measured[measured["panel"].isin(panels)]
    devices = tidy.natural_devices(measured["device"])
    fig, axes = _panel_figure(len(panels), width)
    for ax, panel in zip(axes, panels, strict=False):
        here = measured[measured["panel"] == panel]
        _energy_panel(ax, here, (time_metric, spec.energy_metric), hue, devices)
        ax.set_xlabel(f"Time per {spec.work} ({time_unit})")
        ax.set_ylabel(f"Energy per {spec.work} ({energy_unit})")
        ax.set_title(panel if len(devices) > 1 else f"{panel}, {devices[0]}")
    for ax in axes[len(panels) :]:
        ax.remove()
    values = tidy.ordered(hue, measured[hue])
    several = len(devices) > 1
    handles = [
        style.entry(style.look(hue, value), str(value), line=several, marker=not several)
        for value in values
    ]
    if several:
        handles += [
            style.style_entry(device, marker=style.look("device", device).marker)
            for device in devices
        ]
    legend_with_marks(fig, handles, measured)
    return fig

"""Figures from the tidy table, one function each: training time per mini-batch by
device, speedup heat map, CPU thread scaling, precision comparison, multi-GPU
scaling efficiency, kernel throughput against size. `FIGURES` names the ones
the workflow draws.

The records hold summaries (median and its 95% CI), not raw samples, so bars
and error bars are drawn explicitly from those columns rather than letting
seaborn estimate them. A cell that exists but did not run is labelled where
its bar or point would be (n/a, OOM, failed) so an absent bar is never read
as a zero or forgotten; a selection with nothing in it draws a "no data" note.
Every function takes an optional width in inches (style.WIDTHS); without one
it picks single or double column by its content.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter, NullLocator

from accelbench.analysis import ratios, style, tables, tidy

LOG_SPAN = 100.0  # switch to a log axis when the values span more than two decades
NOT_RUN_TEXT = {**tidy.STATUS_TEXT, ratios.NO_BASELINE: "no base"}
LEGEND_CHAR_WIDTH = 0.06  # inches per character of a legend entry at the style's font size
LEGEND_HANDLE = 0.5  # inches of marker, padding and gap per legend entry
BUSY_LABEL = "hollow: busy machine"


def _axis_label(title: str, frame: pd.DataFrame, column: str) -> str:
    unit = frame.attrs.get("units", {}).get(column)
    return f"{title} ({unit})" if unit else title


def _no_data(fig: Figure, ax, message: str) -> Figure:
    style.no_data(ax, message)
    return fig


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


def busy_rows(rows: pd.DataFrame) -> np.ndarray:
    """Which rows were measured on a busy machine (tidy column `busy`; absent: none)."""
    if "busy" not in rows:
        return np.zeros(len(rows), bool)
    return rows["busy"].map(tidy.flagged).to_numpy(bool)


def busy_handle() -> Line2D:
    """Legend entry explaining hollow markers and bars."""
    return Line2D(
        [], [], color="black", marker="o", markerfacecolor="white", ls="none", label=BUSY_LABEL
    )


def hollow_busy(ax, x, y, rows: pd.DataFrame, color, marker: str = "o") -> None:
    """Redraw the markers of busy rows hollow, over what was plotted at (x, y)."""
    busy = busy_rows(rows)
    if busy.any():
        ax.plot(
            np.asarray(x, float)[busy],
            np.asarray(y, float)[busy],
            ls="none",
            marker=marker,
            markerfacecolor="white",
            markeredgecolor=color,
            zorder=3,
        )


def _legend(fig: Figure, handles: list, rows: pd.DataFrame | None = None) -> None:
    """Legend above the axes, in as many columns as the longest entry lets fit the width;
    with `rows` that hold a busy measurement, also the entry for hollow marks."""
    if rows is not None and busy_rows(rows).any():
        handles = [*handles, busy_handle()]
    longest = max(len(handle.get_label()) for handle in handles)
    per_row = max(1, int(fig.get_figwidth() // (LEGEND_CHAR_WIDTH * longest + LEGEND_HANDLE)))
    fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), per_row))


def _bars(ax, rows: pd.DataFrame, hue: str, hues: list[str], metric: str, palette: dict) -> None:
    """Grouped bars of `metric` with CI error bars: one group per label, one bar per value
    of `hue`; cells that did not run are labelled where their bar would be. The axis goes
    logarithmic when the values span more than two decades."""
    labels = list(dict.fromkeys(rows["label"]))
    measured = _measured(rows, metric)
    log = _spans_decades(measured[[f"{metric}_ci_low", f"{metric}_ci_high"]].to_numpy(float))
    bar_width = 0.8 / len(hues)
    positions = {label: index for index, label in enumerate(labels)}
    for index, value in enumerate(hues):
        here = rows[rows[hue] == value]
        x = np.array([positions[label] for label in here["label"]], float)
        x += (index - (len(hues) - 1) / 2) * bar_width
        ok = here.index.isin(measured.index)
        done = here[ok]
        ax.bar(
            x[ok],
            done[f"{metric}_median"].to_numpy(float),
            bar_width,
            color=["white" if busy else palette[value] for busy in busy_rows(done)],
            edgecolor=palette[value],
            log=log,
        )
        ax.errorbar(
            x[ok],
            done[f"{metric}_median"].to_numpy(float),
            yerr=_yerr(done, metric),
            fmt="none",
            ecolor="black",
            elinewidth=0.6,
        )
        for position, status in zip(x[~ok], here.loc[~ok, "status"], strict=True):
            if status in tidy.STATUS_TEXT:
                _annotate(ax, position, status, height=0.03, rotation=90, color="black")
    if log:
        ax.set_ylim(bottom=measured[f"{metric}_ci_low"].min() / 2)
    elif measured.empty:
        ax.set_yticks([])  # nothing measured: a number scale would suggest values
    ax.set_xticks(range(len(labels)), labels)
    fig = ax.get_figure()
    panel_width = fig.get_figwidth() / len(fig.axes)
    if sum(map(len, labels)) > 8 * panel_width:  # about the characters that fit side by side
        ax.tick_params(axis="x", labelrotation=30)
        for text in ax.get_xticklabels():
            text.set_horizontalalignment("right")
    ax.set_xlim(-0.5, len(labels) - 0.5)


def time_per_batch_by_device(frame: pd.DataFrame, width: float | None = None) -> Figure:
    """Bars of time per mini-batch: one group per model (row label), one bar per device."""
    style.apply()
    metric = "time_per_batch"
    rows, _ = tidy.experiment_rows(frame, "train")
    rows = _with_metric(rows, metric)
    labels = list(dict.fromkeys(rows["label"]))
    devices = tidy.natural_devices(rows["device"]) if labels else []
    auto = style.SINGLE_COLUMN if len(labels) * len(devices) <= 12 else style.DOUBLE_COLUMN
    fig = Figure(figsize=(width or auto, style.PANEL_HEIGHT + 0.4), layout="constrained")
    ax = fig.add_subplot()
    ax.set_ylabel(_axis_label("Time per mini-batch", frame, f"{metric}_median"))
    if not labels:
        return _no_data(fig, ax, "no training records")
    palette = dict(zip(devices, style.colors(len(devices)), strict=True))
    _bars(ax, rows, "device", devices, metric, palette)
    _legend(fig, [Patch(color=palette[device], label=device) for device in devices], rows)
    return fig


def precision_comparison(frame: pd.DataFrame, width: float | None = None) -> Figure:
    """Time per mini-batch by precision: one panel per device, one group per model, one bar
    per precision (fp64 ... fp16), so the gain of a narrower type is read within a panel.
    Only models measured in two or more precisions on a device are shown."""
    style.apply()
    metric = "time_per_batch"
    rows, _ = tidy.compared_rows(frame, "train", "precision")
    devices = tidy.natural_devices(rows["device"]) if not rows.empty else []
    if not devices:
        fig = Figure(
            figsize=(width or style.SINGLE_COLUMN, style.PANEL_HEIGHT), layout="constrained"
        )
        return _no_data(fig, fig.add_subplot(), "no model measured in two precisions")
    precisions = tidy.ordered("precision", rows["precision"])
    ncols = min(len(devices), 3)
    nrows = math.ceil(len(devices) / ncols)
    auto = style.SINGLE_COLUMN if ncols == 1 else style.DOUBLE_COLUMN
    fig = Figure(figsize=(width or auto, style.PANEL_HEIGHT * nrows + 0.4), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).flatten()
    palette = dict(zip(precisions, style.colors(len(precisions)), strict=True))
    label = _axis_label("Time per mini-batch", frame, f"{metric}_median")
    for index, (ax, device) in enumerate(zip(axes, devices, strict=False)):
        ids = rows.loc[rows["device"] == device, "id"]
        here, _ = tidy.experiment_rows(frame[frame["id"].isin(ids)], "train", "precision")
        _bars(ax, _with_metric(here, metric), "precision", precisions, metric, palette)
        ax.set_title(device)
        ax.set_ylabel(label if index % ncols == 0 else "")
    for ax in axes[len(devices) :]:
        ax.set_visible(False)
    _legend(fig, [Patch(color=palette[name], label=name) for name in precisions], rows)
    return fig


def _ratio_text(median: float, low: float, high: float) -> str:
    """The median as the tables print it: with the digits its interval supports."""
    return tables.format_with_ci(median, low, high).split(" [", 1)[0]


def speedup_heatmap(
    frame: pd.DataFrame, baseline: str, experiment: str = "train", width: float | None = None
) -> Figure:
    """Speedup over the `baseline` device, rows x devices, coloured on a log scale centred
    on 1 (one hue faster, the other slower); cells that did not run say why, cells
    measured on a busy machine carry the tables' † mark."""
    style.apply()
    cells, _ = ratios.speedup(frame, experiment, baseline)
    labels = list(dict.fromkeys(cells["label"]))
    devices = tidy.natural_devices(cells["device"])
    auto = style.SINGLE_COLUMN if len(devices) <= 4 else style.DOUBLE_COLUMN
    height = min(0.9 + 0.25 * len(labels), 9.0)
    fig = Figure(figsize=(width or auto, max(height, style.PANEL_HEIGHT)), layout="constrained")
    ax = fig.add_subplot()
    if not labels:
        return _no_data(fig, ax, f"no {experiment} records besides {baseline}")
    grid = cells.set_index(["label", "device"])
    values = np.full((len(labels), len(devices)), np.nan)
    for (label, device), cell in grid.iterrows():
        if cell["status"] == "ok" and cell["median"] > 0:
            values[labels.index(label), devices.index(device)] = math.log2(cell["median"])
    span = max(1.0, math.ceil(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0)
    norm = Normalize(-span, span)
    mesh = ax.pcolormesh(
        np.ma.masked_invalid(values),
        cmap=style.diverging_colormap(),
        norm=norm,
        edgecolors="white",
        linewidth=0.5,
    )
    for (label, device), cell in grid.iterrows():
        row, column = labels.index(label), devices.index(device)
        if cell["status"] == "ok" and math.isfinite(values[row, column]):
            text = _ratio_text(cell["median"], cell["ci_low"], cell["ci_high"])
            text += tables.BUSY_MARK if tidy.flagged(cell["busy"]) else ""
            dark = abs(norm(values[row, column]) - 0.5) > 0.3
            color = "white" if dark else "black"
        else:
            ax.add_patch(Rectangle((column, row), 1, 1, facecolor=style.NOT_RUN, edgecolor="white"))
            text, color = NOT_RUN_TEXT.get(cell["status"], tables.MISSING), "black"
        ax.text(column + 0.5, row + 0.5, text, ha="center", va="center", color=color)
    ax.set_xticks(np.arange(len(devices)) + 0.5, devices)
    ax.set_yticks(np.arange(len(labels)) + 0.5, labels)
    ax.set_xlim(0, len(devices))
    ax.set_ylim(len(labels), 0)
    ax.tick_params(length=0)
    ax.set_xlabel("Device")
    for side in ax.spines.values():
        side.set_visible(False)
    ticks = np.arange(-span, span + 1, 1 if span <= 3 else 2)
    bar = fig.colorbar(mesh, ax=ax, ticks=ticks, shrink=0.9)
    bar.ax.set_yticklabels([f"{2**tick:g}" if tick >= 0 else f"1/{2**-tick:g}" for tick in ticks])
    bar.set_label(f"Speedup over {baseline} (×)")
    return fig


def _lines(ax, cells: pd.DataFrame, prefix: str, palette: dict) -> list[Line2D]:
    """One line per label over the device count, with interval error bars; cells that did
    not run are labelled at their count, in the label's colour. Returns legend handles."""
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
            hollow_busy(ax, done["count"], median, done, palette[label], marker)
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
    fig = Figure(
        figsize=(width or style.SINGLE_COLUMN, style.PANEL_HEIGHT + 0.4), layout="constrained"
    )
    ax = fig.add_subplot()
    ax.set_ylabel("Speedup over 1 thread (×)")
    if len(counts) < 2:
        return _no_data(fig, ax, "no CPU thread-scaling records")
    labels = list(dict.fromkeys(cells["label"]))
    palette = dict(zip(labels, style.colors(len(labels)), strict=True))
    ideal = ax.plot(counts, counts, color="black", linestyle="--", linewidth=0.8, label="ideal")
    handles = _lines(ax, cells, "", palette)
    _count_axis(ax, counts, "CPU threads")
    ax.set_yscale("log", base=2)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    _legend(fig, [*ideal, *handles], cells)
    return fig


def scaling_efficiency(
    frame: pd.DataFrame, experiment: str = "train", kind: str = "cuda", width: float | None = None
) -> Figure:
    """Parallel efficiency (speedup over one device, over K) against the device count K,
    one line per row label (model and strategy); 1 is linear scaling."""
    style.apply()
    cells, _ = ratios.scaling(frame, experiment)
    # Efficiency on one device is 1 by definition: the lines start at two.
    cells = cells[(cells["kind"] == kind) & (cells["count"] > 1)]
    counts = sorted(set(cells["count"].astype(int)))
    fig = Figure(
        figsize=(width or style.SINGLE_COLUMN, style.PANEL_HEIGHT + 0.4), layout="constrained"
    )
    ax = fig.add_subplot()
    ax.set_ylabel("Scaling efficiency")
    if not counts:
        what = "multi-GPU" if kind == "cuda" else "multi-thread"
        return _no_data(fig, ax, f"no {what} records")
    labels = list(dict.fromkeys(cells["label"]))
    palette = dict(zip(labels, style.colors(len(labels)), strict=True))
    ideal = ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8, label="ideal")
    handles = _lines(ax, cells, "efficiency_", palette)
    _count_axis(ax, [1, *counts], "GPUs" if kind == "cuda" else "CPU threads")
    top = np.nanmax(cells["efficiency_ci_high"].to_numpy(float), initial=1.0)
    ax.set_ylim(0, max(1.1, top * 1.05))
    _legend(fig, [ideal, *handles], cells)
    return fig


def kernel_throughput_by_size(frame: pd.DataFrame, width: float | None = None) -> Figure:
    """GFLOP/s against problem size n, log-log: one panel per (kernel, device), colour = backend,
    line style and marker = dtype."""
    style.apply()
    metric = "gflops"
    rows, _ = tidy.experiment_rows(frame, "kernel")
    rows = _with_metric(rows, metric)
    panels = [
        (kernel, device)
        for kernel in sorted(set(rows.get("kernel", [])))
        for device in tidy.natural_devices(rows.loc[rows["kernel"] == kernel, "device"])
    ]
    if not panels:
        fig = Figure(
            figsize=(width or style.SINGLE_COLUMN, style.PANEL_HEIGHT), layout="constrained"
        )
        return _no_data(fig, fig.add_subplot(), "no kernel records")

    ncols = min(len(panels), 4)
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(
        figsize=(
            width or (style.SINGLE_COLUMN if ncols == 1 else style.DOUBLE_COLUMN),
            style.PANEL_HEIGHT * nrows + 0.4,
        ),
        layout="constrained",
    )
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).flatten()
    backends = sorted(set(rows["backend"].dropna()))
    dtypes = sorted(set(rows["dtype"].dropna()))
    palette = dict(zip(backends, style.colors(len(backends)), strict=True))
    looks = {
        dtype: (style.MARKERS[i % len(style.MARKERS)], style.LINESTYLES[i % len(style.LINESTYLES)])
        for i, dtype in enumerate(dtypes)
    }
    series = [(backend, dtype) for backend in backends for dtype in dtypes]
    measured = _measured(rows, metric)
    single_kernel = len({kernel for kernel, _ in panels}) == 1

    for index, (ax, (kernel, device)) in enumerate(zip(axes, panels, strict=False)):
        panel = rows[(rows["kernel"] == kernel) & (rows["device"] == device)]
        for slot, (backend, dtype) in enumerate(series):
            line = panel[(panel["backend"] == backend) & (panel["dtype"] == dtype)]
            line = line.sort_values("size")
            done = line[line.index.isin(measured.index)]
            marker, linestyle = looks[dtype]
            if not done.empty:
                ax.errorbar(
                    done["size"].to_numpy(float),
                    done[f"{metric}_median"].to_numpy(float),
                    yerr=_yerr(done, metric),
                    color=palette[backend],
                    marker=marker,
                    linestyle=linestyle,
                )
                hollow_busy(
                    ax, done["size"], done[f"{metric}_median"], done, palette[backend], marker
                )
            for size, status in line.loc[
                ~line.index.isin(measured.index), ["size", "status"]
            ].itertuples(index=False):
                if status in tidy.STATUS_TEXT:
                    _annotate(
                        ax,
                        float(size),
                        status,
                        height=0.03 + 0.08 * (slot % 10),
                        rotation=0,
                        color=palette[backend],
                    )
        ax.set_title(device if single_kernel else f"{kernel}, {device}")
        # Sizes under every panel with no panel below it, throughput left of each row.
        bottom, left = index + ncols >= len(panels), index % ncols == 0
        ax.tick_params(labelbottom=bottom, labelleft=left)
        ax.set_xlabel("Problem size n" if bottom else "")
        ax.set_ylabel(_axis_label("Throughput", frame, f"{metric}_median") if left else "")
    for ax in axes[len(panels) :]:
        ax.set_visible(False)

    sizes = sorted(set(rows["size"].dropna().astype(int)))
    first = axes[0]
    first.set_xscale("log", base=2)
    first.set_xticks(sizes)
    first.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    first.xaxis.set_minor_locator(NullLocator())
    first.set_xlim(sizes[0] / 1.5, sizes[-1] * 1.5)
    if measured.empty:
        first.set_yticks([])
    else:
        first.set_yscale("log")
    handles = [Line2D([], [], color=palette[backend], label=backend) for backend in backends]
    handles += [
        Line2D(
            [], [], color="black", marker=looks[dtype][0], linestyle=looks[dtype][1], label=dtype
        )
        for dtype in dtypes
    ]
    if busy_rows(measured).any():
        handles.append(busy_handle())
    fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 6))
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
    "kernel_throughput": lambda frame, baseline, width: kernel_throughput_by_size(frame, width),
}

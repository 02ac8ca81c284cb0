"""Figures from the tidy table: training time per mini-batch, kernel throughput vs size.

The records hold summaries (median and its 95% CI), not raw samples, so bars
and error bars are drawn explicitly from those columns rather than letting
seaborn estimate them. A cell that exists but did not run is labelled where
its bar or point would be (n/a, OOM, failed) so an absent bar is never read
as a zero or forgotten.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, NullLocator

from accelbench.analysis import style, tidy

LOG_SPAN = 100.0  # switch to a log axis when the values span more than two decades
MARKERS = ("o", "s", "^", "D", "v")
LINESTYLES = ("-", "--", ":", "-.")


def _axis_label(title: str, frame: pd.DataFrame, column: str) -> str:
    unit = frame.attrs.get("units", {}).get(column)
    return f"{title} ({unit})" if unit else title


def _no_data(fig: Figure, ax, message: str) -> Figure:
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center")
    ax.set_xticks([])
    ax.set_yticks([])
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


def time_per_batch_by_device(frame: pd.DataFrame) -> Figure:
    """Bars of time per mini-batch: one group per model (row label), one bar per device."""
    style.apply()
    metric = "time_per_batch"
    rows, _ = tidy.experiment_rows(frame, "train")
    rows = _with_metric(rows, metric)
    labels = list(dict.fromkeys(rows["label"]))
    devices = tidy.natural_devices(rows["device"]) if labels else []
    bars = len(labels) * len(devices)
    width = style.SINGLE_COLUMN if bars <= 12 else style.DOUBLE_COLUMN
    fig = Figure(figsize=(width, style.PANEL_HEIGHT + 0.4), layout="constrained")
    ax = fig.add_subplot()
    ax.set_ylabel(_axis_label("Time per mini-batch", frame, f"{metric}_median"))
    if not labels:
        return _no_data(fig, ax, "no training records")

    measured = _measured(rows, metric)
    log = _spans_decades(measured[[f"{metric}_ci_low", f"{metric}_ci_high"]].to_numpy(float))
    bar_width = 0.8 / len(devices)
    positions = {label: index for index, label in enumerate(labels)}
    palette = dict(zip(devices, style.colors(len(devices)), strict=True))
    for index, device in enumerate(devices):
        here = rows[rows["device"] == device]
        x = np.array([positions[label] for label in here["label"]], float)
        x += (index - (len(devices) - 1) / 2) * bar_width
        ok = here.index.isin(measured.index)
        done = here[ok]
        ax.bar(
            x[ok],
            done[f"{metric}_median"].to_numpy(float),
            bar_width,
            color=palette[device],
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
    if sum(map(len, labels)) > 8 * width:  # about the characters that fit side by side
        ax.tick_params(axis="x", labelrotation=30)
        for text in ax.get_xticklabels():
            text.set_horizontalalignment("right")
    ax.set_xlim(-0.5, len(labels) - 0.5)
    fig.legend(
        handles=[Patch(color=palette[device], label=device) for device in devices],
        loc="outside upper center",
        ncols=min(len(devices), 5),
    )
    return fig


def kernel_throughput_by_size(frame: pd.DataFrame) -> Figure:
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
        fig = Figure(figsize=(style.SINGLE_COLUMN, style.PANEL_HEIGHT), layout="constrained")
        return _no_data(fig, fig.add_subplot(), "no kernel records")

    ncols = min(len(panels), 4)
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(
        figsize=(
            style.SINGLE_COLUMN if ncols == 1 else style.DOUBLE_COLUMN,
            style.PANEL_HEIGHT * nrows + 0.4,
        ),
        layout="constrained",
    )
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).flatten()
    backends = sorted(set(rows["backend"].dropna()))
    dtypes = sorted(set(rows["dtype"].dropna()))
    palette = dict(zip(backends, style.colors(len(backends)), strict=True))
    looks = {
        dtype: (MARKERS[i % len(MARKERS)], LINESTYLES[i % len(LINESTYLES)])
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
    fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 6))
    return fig

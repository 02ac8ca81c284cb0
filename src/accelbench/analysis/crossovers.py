"""Where the GPU overtakes the CPU: crossover sizes per kernel and data science workload.

Crossovers compare, size by size, the best CPU result with the best GPU result of
a kernel or workload, once for the work alone and once with the host<->device
transfer included. The summary page names them; the crossover figure and table
(rule kernel_crossover) draw and list them. Only the figure needs the plotting
libraries, so only drawing it imports them: the summary, which needs the numbers
alone, starts without their second or two of imports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from accelbench.analysis.tidy import natural_devices
from accelbench.platform.devices import names_a_gpu

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _throughput(
    rows: pd.DataFrame,
    with_transfer: bool,
    compute_column: str = "gflops_median",
    end_to_end_column: str = "end_to_end_gflops_median",
) -> pd.Series:
    """Throughput of each row (GFLOP/s for kernels); with the transfer, GPU rows use their
    end-to-end throughput."""
    compute = rows.get(compute_column, pd.Series(np.nan, index=rows.index)).astype(float)
    if not with_transfer:
        return compute
    end_to_end = rows.get(end_to_end_column, pd.Series(np.nan, index=rows.index))
    gpu = rows["device"].map(names_a_gpu).astype(bool)
    return compute.where(~gpu, end_to_end.astype(float))


# Per family: what names a curve, and its throughput alone and with the copies.
CROSSOVER_FAMILIES = {
    "kernel": (("kernel", "dtype"), "gflops_median", "end_to_end_gflops_median"),
    "datasci": (("workload",), "item_throughput_median", "end_to_end_item_throughput_median"),
}
CROSSOVER_COLUMNS = [
    "experiment",
    "kernel",
    "workload",
    "dtype",
    "crossover_size",
    "first_gpu_size",
    "with_transfer",
]


def _crossover(sizes: np.ndarray, ratio: np.ndarray) -> tuple[float, float]:
    """(crossover, first GPU size) from log(GPU / CPU throughput) at increasing sizes."""
    if ratio[-1] <= 0:
        return math.nan, math.nan
    losing = np.nonzero(ratio <= 0)[0]
    if losing.size == 0:
        return sizes[0], sizes[0]
    i = losing[-1]
    low, high = np.log(sizes[i]), np.log(sizes[i + 1])
    fraction = -ratio[i] / (ratio[i + 1] - ratio[i])
    return float(np.exp(low + fraction * (high - low))), sizes[i + 1]


@dataclass(frozen=True)
class _Curves:
    """One row of the crossover figure: a kernel and dtype, or a data science workload."""

    family: str
    names: dict[str, Any]  # the CROSSOVER_FAMILIES keys and their values
    rows: pd.DataFrame
    unit: str

    @property
    def title(self) -> str:
        return ", ".join(str(value) for value in self.names.values())


def _both_sides(frame: pd.DataFrame) -> list[_Curves]:
    """Every kernel/dtype and workload with a throughput measured on a CPU and on a GPU."""
    found = []
    for family, (keys, compute, _) in CROSSOVER_FAMILIES.items():
        rows = frame[(frame["experiment"] == family) & (frame["status"] == "ok")]
        if compute not in rows:
            continue
        rows = rows[np.isfinite(rows[compute].astype(float))]
        on_gpu = rows["device"].map(names_a_gpu).astype(bool)
        for names, group in rows.groupby(list(keys), sort=True):
            if not on_gpu[group.index].any() or on_gpu[group.index].all():
                continue
            if family == "kernel":
                unit = label_unit(frame, compute, "GFLOP/s")
            else:  # items per second: the workload's own item (rows, samples, nodes)
                items = group["item"].dropna() if "item" in group else pd.Series(dtype="str")
                unit = f"{items.iloc[0] if not items.empty else 'items'}/s"
            found.append(_Curves(family, dict(zip(keys, names, strict=True)), group, unit))
    return found


def crossovers(frame: pd.DataFrame, with_transfer: bool = False) -> pd.DataFrame:
    """Per kernel and dtype, and per data science workload: the size from which the best
    GPU result beats the best CPU result.

    Sizes where both sides ran are compared; the crossover is where log(GPU /
    CPU throughput) changes sign for the last time, interpolated on log-log
    axes between the two sizes around it. `first_gpu_size` is the smallest
    measured size from which the GPU stays faster. Both are NaN where the GPU
    is never faster at the largest size; where it is faster at every size, the
    crossover is the smallest size (it lies at or below it).
    """
    found = []
    for group in _both_sides(frame):
        _, compute, end_to_end = CROSSOVER_FAMILIES[group.family]
        rows = group.rows.assign(
            throughput=_throughput(group.rows, with_transfer, compute, end_to_end),
            gpu=group.rows["device"].map(names_a_gpu).astype(bool),
        )
        rows = rows[np.isfinite(rows["throughput"])]
        best = rows.groupby(["size", "gpu"])["throughput"].max().unstack()
        if True not in best.columns or False not in best.columns:
            continue
        best = best.dropna().sort_index()
        if best.empty:
            continue
        ratio = np.log(best[True].to_numpy(float) / best[False].to_numpy(float))
        crossover, first = _crossover(best.index.to_numpy(float), ratio)
        found.append(
            {
                "experiment": group.family,
                **group.names,
                "crossover_size": crossover,
                "first_gpu_size": first,
                "with_transfer": with_transfer,
            }
        )
    return pd.DataFrame(found, columns=CROSSOVER_COLUMNS)


def label_unit(frame: pd.DataFrame, column: str, fallback: str) -> str:
    return frame.attrs.get("units", {}).get(column, fallback)


def _throughput_lines(ax, here: pd.DataFrame, values: pd.Series, series, palette, looks) -> None:
    """One line per (backend, device) over the problem size, where it has numbers."""
    for backend, device in series:
        line = here[(here["backend"] == backend) & (here["device"] == device)]
        y = values[line.index].astype(float)
        ok = np.isfinite(y)
        if not ok.any():
            continue
        order = np.argsort(line["size"].to_numpy(float)[ok])
        marker, linestyle = looks[device]
        ax.plot(
            line["size"].to_numpy(float)[ok][order],
            y[ok].to_numpy()[order],
            color=palette[backend],
            marker=marker,
            linestyle=linestyle,
        )


def _crossover_marks(ax, found: pd.DataFrame, group: _Curves) -> list[str]:
    """A dotted line where the GPU overtakes the CPU; returns what the panel's title says
    of it (under the title: inside the axes, a corner held the GPU's point on an H200).
    Where the GPU is ahead at the smallest size measured, that size is no crossover: the
    title says so, and no line is drawn."""
    found = found[found["experiment"] == group.family]
    for key, value in group.names.items():
        found = found[found[key] == value]
    said = []
    for size, first in found[["crossover_size", "first_gpu_size"]].dropna().to_numpy(float):
        if size == first == group.rows["size"].astype(float).min():
            said.append(f"GPU ahead at every size measured (n ≥ {size:,.0f})")
            continue
        ax.axvline(size, color="black", linestyle=":", linewidth=0.8)
        said.append(f"GPU wins from n ≈ {float(f'{size:.3g}'):,.0f}")
    return said


def crossover_figure(frame: pd.DataFrame) -> Figure:
    """Throughput vs problem size per backend and device, alone and with the transfer.

    One row per kernel and dtype, and per data science workload, measured on both
    a CPU and a GPU (without both there is no crossover, and the two panels would
    be the same); left the work alone, right including the host<->device copies
    of the GPU backends (CPU lines are the same in both). A dotted vertical line
    marks where the best GPU result overtakes the best CPU result. Rows shrink to
    fit a page.
    """
    from matplotlib.figure import Figure

    from accelbench.analysis import style

    style.apply()
    groups = _both_sides(frame)
    if not groups:
        return style.empty_figure(
            "no kernel or workload ran on both a CPU and a GPU: no crossover to draw",
            style.DOUBLE_COLUMN,
        )
    row_height = min(
        style.PANEL_HEIGHT, max(style.MIN_PANEL_HEIGHT, (style.MAX_HEIGHT - 1.0) / len(groups))
    )
    fig = Figure(
        figsize=(style.DOUBLE_COLUMN, row_height * len(groups) + 0.3), layout="constrained"
    )
    axes = fig.subplots(len(groups), 2, squeeze=False)
    rows = pd.concat([group.rows for group in groups])
    series = sorted(
        set(zip(rows["backend"], rows["device"], strict=True)),
        key=lambda item: (names_a_gpu(item[1]), item[0], natural_devices([item[1]])),
    )
    backends = sorted({backend for backend, _ in series})
    devices = natural_devices(rows["device"])
    palette = dict(zip(backends, style.colors(len(backends)), strict=True))
    looks = {
        device: (style.MARKERS[i % len(style.MARKERS)], style.LINESTYLES[i % len(style.LINESTYLES)])
        for i, device in enumerate(devices)
    }
    marks = {flag: crossovers(frame, with_transfer=flag) for flag in (False, True)}
    for row_axes, group in zip(axes, groups, strict=True):
        _, compute, end_to_end = CROSSOVER_FAMILIES[group.family]
        for ax, with_transfer in zip(row_axes, (False, True), strict=True):
            values = _throughput(group.rows, with_transfer, compute, end_to_end)
            _throughput_lines(ax, group.rows, values, series, palette, looks)
            said = _crossover_marks(ax, marks[with_transfer], group)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            alone = "kernel only" if group.family == "kernel" else "call only"
            title = f"{group.title}, {'with transfer' if with_transfer else alone}"
            ax.set_title("\n".join([title, *said]))
            ax.set_xlabel("Problem size n")
            ax.set_ylabel(f"Throughput ({group.unit})")
    style.legend(fig, _legend_handles(palette, looks))
    return fig


def _legend_handles(palette: dict[str, Any], looks: dict[str, tuple[str, str]]) -> list[Any]:
    """One entry per backend (its colour) and per device (its marker and line)."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colour, label=backend) for backend, colour in palette.items()]
    return handles + [
        Line2D([], [], color="black", marker=marker, linestyle=line, label=device)
        for device, (marker, line) in looks.items()
    ]

"""Kernels against the measured roofs: percent of roof and the roofline figure.

The roofs are records of their own (experiment "roof", one per device and
dtype); accelbench.analysis.roof_percent joins them to the kernel records on
(device, dtype). A kernel's attainable throughput is the roofline min(peak GEMM,
arithmetic intensity x memory bandwidth); copies, which do no arithmetic, are held
against the bandwidth of the path they take. The CPU/GPU crossovers are
accelbench.analysis.crossovers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from accelbench.analysis import marks, style
from accelbench.analysis.crossovers import label_unit
from accelbench.analysis.figures import flagged_rows, legend_with_marks
from accelbench.analysis.roof_percent import add_roof_percent, roofs
from accelbench.analysis.tidy import natural_devices


def above_roof_note(rows: pd.DataFrame) -> str | None:
    """What a table or figure says when kernels beat their roof beyond the roof's interval."""
    flagged = (
        rows[rows["above_roof"].fillna(False).astype(bool)] if "above_roof" in rows else rows[:0]
    )
    if flagged.empty:
        return None
    names = "; ".join(
        f"{row.kernel} {row.backend} {row.dtype} n={row.size} on {row.device}"
        for row in flagged.itertuples(index=False)
    )
    return (
        f"above its measured roof, beyond the roof's interval (a working set that fits "
        f"in cache, or a roof measured in other conditions): {names}"
    )


def roof_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Kernel rows that ran, with their throughput and percent of the measured roof."""
    with_roofs = add_roof_percent(frame)
    rows = with_roofs[(with_roofs["experiment"] == "kernel") & (with_roofs["status"] == "ok")]
    columns = [
        "kernel",
        "device",
        "backend",
        "dtype",
        "size",
        "gflops_median",
        "bandwidth_median",
        "arithmetic_intensity",
        "roof_bound",
        "roof_percent",
        "above_roof",
        "busy",
        "imprecise",
    ]
    rows = rows.reindex(columns=columns)
    return rows.sort_values(["kernel", "device", "dtype", "size", "backend"]).reset_index(drop=True)


def _grid(panels: int) -> tuple[Figure, np.ndarray]:
    """One panel per roof, as many per row as stay readable, the whole within a page."""
    width = style.SINGLE_COLUMN if panels == 1 else style.DOUBLE_COLUMN
    width, nrows, ncols, height = style.panel_grid(panels, width)
    fig = Figure(figsize=(width, height * nrows + 0.3), layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False).flatten()


def _plotted_kernels(frame: pd.DataFrame) -> pd.DataFrame:
    """The kernel records that have a place on a roofline: ran, with a throughput and an
    arithmetic intensity above zero."""
    kernels = frame[(frame["experiment"] == "kernel") & (frame["status"] == "ok")]
    if "gflops_median" not in kernels or "arithmetic_intensity" not in kernels:
        return kernels.iloc[0:0]
    return kernels[
        np.isfinite(kernels["gflops_median"].astype(float))
        & (kernels["arithmetic_intensity"].astype(float) > 0)
    ]


SI_PREFIXES = "kMGTPE"


def scaled(value: float, unit: str) -> str:
    """A value in its unit's next SI prefix up while it reaches 1000, three figures:
    (669016, "GFLOP/s") -> "669 TFLOP/s". A GPU's roofs in G units read 6.69e+05 and made
    its panel's title run into the next one's."""
    step = SI_PREFIXES.find(unit[:1]) if len(unit) > 1 else -1
    if step < 0 or not np.isfinite(value):
        return f"{value:.3g} {unit}"
    while abs(value) >= 999.5 and step < len(SI_PREFIXES) - 1:
        value, step = value / 1000, step + 1
    return f"{value:.3g} {SI_PREFIXES[step]}{unit[1:]}"


def _ceilings(ax, roof, x: np.ndarray, gflops_unit: str) -> list[str]:
    """Draw a roof's ceilings; returns the panel's title lines, which name their values
    (under the title: inside the axes any corner can hold a measured point)."""
    # A ceiling the roof record lacks bounds nothing: fmin keeps the other one alone.
    ax.plot(x, np.fmin(roof.peak_gflops, x * roof.memory_bandwidth), color=style.NEUTRAL)
    gemm = scaled(roof.peak_gflops, gflops_unit) if np.isfinite(roof.peak_gflops) else None
    memory = scaled(roof.memory_bandwidth, "GB/s") if np.isfinite(roof.memory_bandwidth) else None
    title = [
        f"{roof.device}, {roof.dtype}",
        f"GEMM {gemm or 'not measured'}, memory {memory or 'not measured'}",
    ]
    if np.isfinite(roof.h2d_bandwidth):
        title.append(f"host→device {scaled(roof.h2d_bandwidth, 'GB/s')} (dashed)")
        ax.plot(x, np.fmin(roof.peak_gflops, x * roof.h2d_bandwidth), color=style.NEUTRAL, ls="--")
    return title


OTHER_BACKEND_SIZE = 2.5  # points: the small mark of a kernel's slower backends


def _largest(here: pd.DataFrame, above_roof: pd.Series) -> pd.DataFrame:
    """Each kernel and backend of one roof at its largest size, with whether it is above."""
    if here.empty:
        return here.assign(above_roof=pd.Series(dtype="boolean"))
    largest = here.loc[here.groupby(["kernel", "backend"])["size"].idxmax()]
    return largest.assign(above_roof=above_roof.reindex(largest.index))


def _kernel_points(ax, largest: pd.DataFrame) -> int:
    """Each kernel's fastest backend at its largest size in the kernel's look, with its
    interval, and its other backends as small marks in its colour; flagged ones hollow,
    points above the roof circled. Returns how many are above it."""
    for kernel, rows in largest.groupby("kernel", sort=True):
        look = style.look("kernel", kernel)
        rows = rows.sort_values("gflops_median", ascending=False)
        best, others = rows.iloc[:1], rows.iloc[1:]
        marks.measured(
            ax,
            best["arithmetic_intensity"],
            best["gflops_median"],
            (best["gflops_ci_low"], best["gflops_ci_high"]),
            look,
            flagged_rows(best),
        )
        if len(others):
            x, y = others["arithmetic_intensity"], others["gflops_median"]
            small = style.Look(look.color, "o")
            marks.measured(ax, x, y, None, small, flagged_rows(others), size=OTHER_BACKEND_SIZE)
    above = largest[largest["above_roof"].fillna(False).astype(bool)]
    ax.plot(
        above["arithmetic_intensity"].astype(float),
        above["gflops_median"].astype(float),
        linestyle="none",
        marker="o",
        markersize=12,
        markerfacecolor="none",
        markeredgecolor=style.NEUTRAL,
    )
    return len(above)


def _roofline_legend(fig: Figure, kernels: pd.DataFrame, table: pd.DataFrame) -> None:
    """Kernels in their looks, what the large and small marks are, the roofs, and the
    marks only where used."""
    names = sorted(set(kernels["kernel"]))
    handles = [style.entry(style.look("kernel", name), name) for name in names]
    handles += [
        style.style_entry("large: a kernel's fastest backend", marker="o"),
        style.style_entry("small: its other backends", marker="o", markersize=OTHER_BACKEND_SIZE),
        Line2D([], [], color=style.NEUTRAL, label="measured roof"),
    ]
    if table["h2d_bandwidth"].notna().any():
        handles.append(Line2D([], [], color=style.NEUTRAL, ls="--", label="host→device roof"))
    legend_with_marks(fig, handles, kernels)


def _drawn_roofs(table: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    """The roofs with two kernel points or more on them (a roof with one point says what
    the percent-of-roof table says), in natural device order."""
    counts = kernels.groupby(["device", "dtype"]).apply(
        lambda rows: rows[["kernel", "backend"]].drop_duplicates().shape[0], include_groups=False
    )
    points = [counts.get((roof.device, roof.dtype), 0) for roof in table.itertuples()]
    table = table[np.asarray(points) >= 2]
    order = {device: i for i, device in enumerate(natural_devices(table["device"]))}
    return table.sort_values(
        ["device", "dtype"], key=lambda s: s.map(order) if s.name == "device" else s
    )


def roofline_figure(frame: pd.DataFrame) -> Figure:
    """Roofline per (device, dtype): the measured ceilings as lines, each kernel as points.

    Ceilings: min(peak GEMM, intensity x STREAM memory bandwidth), and on a GPU the
    pinned host->device bandwidth as the ceiling of work whose data must first
    cross the host link. Points: each kernel at its largest measured size, its fastest
    backend in the kernel's look and its other backends small; copies (no arithmetic)
    have no place on the intensity axis. A roof with fewer than two points is left to
    the percent-of-roof table.
    """
    style.apply()
    kernels = _plotted_kernels(frame)
    roofs_found = roofs(frame).dropna(subset=["peak_gflops", "memory_bandwidth"], how="all")
    table = _drawn_roofs(roofs_found, kernels) if len(kernels) else roofs_found.iloc[:0]
    if table.empty:
        return style.empty_figure("no roof with two kernel points on it")
    above_roof = add_roof_percent(frame)["above_roof"]
    fig, axes = _grid(len(table))
    ridge_points = (table["peak_gflops"] / table["memory_bandwidth"]).dropna()
    spread = np.concatenate(
        [kernels["arithmetic_intensity"].to_numpy(float), ridge_points.to_numpy(float)]
    )
    x = np.geomspace(spread.min() / 4, spread.max() * 4, 200)
    gflops_unit = label_unit(frame, "peak_gflops_median", "GFLOP/s")
    drawn = []
    for ax, roof in zip(axes, table.itertuples(index=False), strict=False):
        title = _ceilings(ax, roof, x, gflops_unit)
        here = kernels[(kernels["device"] == roof.device) & (kernels["dtype"] == roof.dtype)]
        drawn.append(here)
        above = _kernel_points(ax, _largest(here, above_roof))
        if above:
            title.append(f"{above} above the roof (circled)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        marks.arrows(ax)
        ax.set_title("\n".join(title))
        ax.set_xlabel(
            f"Arithmetic intensity ({label_unit(frame, 'arithmetic_intensity', 'flop/byte')})"
        )
        ax.set_ylabel(f"Throughput ({gflops_unit})")
    for ax in axes[len(table) :]:
        ax.set_visible(False)
    _roofline_legend(fig, pd.concat(drawn), table)
    return fig

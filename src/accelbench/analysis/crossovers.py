"""Where the GPU overtakes the CPU: named only where the measured sizes bracket it.

From the answer's cells (accelbench.analysis.gpu_vs_cpu: at each size the best GPU result
against the best CPU result of the same host, as a factor with its interval), per kernel
and dtype and per data science workload, for the work alone and with the GPU's copies:
at each measured size the GPU is ahead (the factor's interval lies above 1), the CPU is
ahead (below 1), or the size decides nothing (the interval holds 1: undecided). A
crossover is named only where one side is ahead at a size and the other at the next
larger size that decides (the undecided sizes between them lie in the bracket); without
such a pair the sizes say which side was ahead at all of them, and nothing beyond the
sizes measured is guessed. The summary page and the crossover table and figure (rule
kernel_crossover) say it in the same terms. Only the figure needs the plotting
libraries, so only drawing it imports them: the summary, which needs the numbers alone,
starts without their second or two of imports.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from accelbench.analysis import gpu_vs_cpu
from accelbench.analysis.tidy import natural_devices
from accelbench.platform.devices import names_a_gpu

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# The parameter along which a crossover is looked for.
SIZE = "size"
GPU, CPU, UNDECIDED = "GPU", "CPU", "undecided"


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


# Per family: what names a row of the figure, and its throughput alone and with the copies.
CROSSOVER_FAMILIES = {
    "kernel": (("kernel", "dtype"), "gflops_median", "end_to_end_gflops_median"),
    "datasci": (("workload",), "item_throughput_median", "end_to_end_item_throughput_median"),
}


def _curve_params() -> dict[str, list[str]]:
    """Per family with sizes: the parameters that name one of its curves (a cell of work
    less its size)."""
    return {
        name: [key for key in gpu_vs_cpu.work_keys(family) if key != SIZE]
        for name, family in gpu_vs_cpu.work_families().items()
        if SIZE in gpu_vs_cpu.work_keys(family)
    }


CURVE_PARAMS = list(dict.fromkeys(name for names in _curve_params().values() for name in names))
CROSSOVER_COLUMNS = [
    "experiment",
    *CURVE_PARAMS,
    gpu_vs_cpu.HOST,
    "with_transfer",
    "sizes",
    "smallest_size",
    "largest_size",
    "gpu_ahead",
    "cpu_ahead",
    "undecided",
    "crossover_low",
    "crossover_high",
    "says",
]


def side(low: float, high: float) -> str:
    """Which side a factor (CPU time / GPU time) with this interval puts ahead."""
    return GPU if low > 1 else CPU if high < 1 else UNDECIDED


def _n(size: int) -> str:
    return f"{size:,}"


def _sizes_text(sizes: list[int]) -> str:
    if len(sizes) == 1:
        return f"n = {_n(sizes[0])}"
    if len(sizes) == 2:
        return f"n = {_n(sizes[0])} and {_n(sizes[1])}"
    return f"the {len(sizes)} sizes from n = {_n(sizes[0])} to n = {_n(sizes[-1])}"


def _ahead(who: str) -> str:
    return who if who == UNDECIDED else f"{who} ahead"


@dataclass(frozen=True)
class Crossing:
    """One curve's sides, size by size: a kernel and dtype or a workload, on one host, for
    the work alone or with the GPU's copies."""

    experiment: str
    names: dict[str, Any]  # the curve's parameters and their values
    host: Any
    with_transfer: bool
    sizes: tuple[int, ...]
    sides: tuple[str, ...]

    @property
    def title(self) -> str:
        return ", ".join(str(value) for value in self.names.values())

    @property
    def brackets(self) -> list[tuple[int, int, str]]:
        """(last size of one side, first size of the other, the side ahead from there) for
        each change of side between consecutive deciding sizes."""
        decided = [(size, who) for size, who in self.at_sizes() if who != UNDECIDED]
        return [
            (low, high, after)
            for (low, before), (high, after) in itertools.pairwise(decided)
            if before != after
        ]

    def at_sizes(self) -> list[tuple[int, str]]:
        return list(zip(self.sizes, self.sides, strict=True))

    def runs(self) -> list[tuple[str, list[int]]]:
        """The sides in order of size, consecutive sizes of one side together."""
        found: list[tuple[str, list[int]]] = []
        for size, who in self.at_sizes():
            if found and found[-1][0] == who:
                found[-1][1].append(size)
            else:
                found.append((who, [size]))
        return found

    @property
    def says(self) -> str:
        """The sides at the sizes measured, and the crossovers they bracket, in words."""
        runs = self.runs()
        if len(runs) == 1:
            who, sizes = runs[0]
            if len(sizes) == 1:
                return f"{_ahead(who)} at the one size measured, n = {_n(sizes[0])}"
            return (
                f"{_ahead(who)} at all {len(sizes)} sizes measured, "
                f"from n = {_n(sizes[0])} to n = {_n(sizes[-1])}"
            )
        text = ", ".join(f"{_ahead(who)} at {_sizes_text(sizes)}" for who, sizes in runs)
        if not self.brackets:
            (who,) = {who for who in self.sides if who != UNDECIDED}
            other = CPU if who == GPU else GPU
            return f"{text}; no size has the {other} ahead, so no crossover is named"
        return (
            text
            + ": "
            + "; ".join(
                f"the {after} overtakes the {CPU if after == GPU else GPU} between "
                f"n = {_n(low)} and n = {_n(high)}"
                for low, high, after in self.brackets
            )
        )

    @property
    def short(self) -> str:
        """`says` short enough for a figure panel's title."""
        if self.brackets:
            return "; ".join(
                f"{after} overtakes between n = {_n(low)} and {_n(high)}"
                for low, high, after in self.brackets
            )
        counts = {who: self.sides.count(who) for who in dict.fromkeys(self.sides)}
        if len(counts) == 1:
            who = next(iter(counts))
            measured = "the one size" if len(self.sizes) == 1 else f"all {len(self.sizes)} sizes"
            return f"{_ahead(who)} at {measured} measured"
        parts = ", ".join(f"{_ahead(who)} at {count}" for who, count in counts.items())
        return f"{parts} of {len(self.sizes)} sizes"

    def row(self) -> dict[str, Any]:
        """The crossover table's line."""

        def at(who: str) -> str:
            return " ".join(str(size) for size, found in self.at_sizes() if found == who)

        low, high, _ = self.brackets[-1] if self.brackets else (np.nan, np.nan, None)
        return {
            "experiment": self.experiment,
            **self.names,
            gpu_vs_cpu.HOST: self.host,
            "with_transfer": self.with_transfer,
            "sizes": len(self.sizes),
            "smallest_size": self.sizes[0],
            "largest_size": self.sizes[-1],
            "gpu_ahead": at(GPU),
            "cpu_ahead": at(CPU),
            "undecided": at(UNDECIDED),
            "crossover_low": low,
            "crossover_high": high,
            "says": self.says,
        }


def crossings(frame: pd.DataFrame, with_transfer: bool = False) -> list[Crossing]:
    """Per kernel and dtype and per data science workload, on each host measured on both a
    GPU and its CPU: the side ahead at every size compared (module docstring)."""
    comparison = gpu_vs_cpu.compare(frame).cells
    copies = next(name for name, flag in gpu_vs_cpu.COPIES.items() if flag == with_transfer)
    cells = comparison[(comparison["copies"] == copies) & (comparison["status"] == "ok")]
    found = []
    for experiment, names in _curve_params().items():
        rows = cells[cells["experiment"] == experiment]
        for _, curve in rows.groupby([gpu_vs_cpu.HOST, *names], dropna=False, sort=False):
            curve = curve.sort_values(SIZE)
            first = curve.iloc[0]
            found.append(
                Crossing(
                    experiment,
                    {name: first[name] for name in names},
                    first[gpu_vs_cpu.HOST],
                    with_transfer,
                    tuple(int(size) for size in curve[SIZE]),
                    tuple(map(side, curve["ci_low"], curve["ci_high"])),
                )
            )
    return found


def crossovers(frame: pd.DataFrame, with_transfer: bool = False) -> pd.DataFrame:
    """The crossover table: one line per curve (`crossings`), the sizes where each side is
    ahead or nothing is decided, the last crossover's bracket (crossover_low and
    crossover_high; NaN where the sizes bracket none) and what the sizes say, in words."""
    lines = [crossing.row() for crossing in crossings(frame, with_transfer)]
    return pd.DataFrame(lines, columns=CROSSOVER_COLUMNS)


def label_unit(frame: pd.DataFrame, column: str, fallback: str) -> str:
    return frame.attrs.get("units", {}).get(column, fallback)


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


def _crossover_marks(ax, found: list[Crossing], group: _Curves) -> list[str]:
    """Each crossover's bracket shaded, between the two measured sizes around it (no line at
    a size nobody measured); returns what the panel's title says of the sizes, a line per
    host (under the title: inside the axes, a corner held the GPU's point on an H200)."""
    mine = [one for one in found if one.experiment == group.family and one.names == group.names]
    hosts = len({one.host for one in mine}) > 1
    said = []
    for crossing in mine:
        for low, high, _ in crossing.brackets:
            ax.axvspan(low, high, color="0.88", linewidth=0, zorder=0)
        said.append(f"{crossing.host}: {crossing.short}" if hosts else crossing.short)
    return said


def crossover_figure(frame: pd.DataFrame) -> Figure:
    """Throughput vs problem size per backend and device, alone and with the transfer.

    One row per kernel and dtype, and per data science workload, measured on both
    a CPU and a GPU (without both there is no crossover, and the two panels would
    be the same); left the work alone, right including the host<->device copies
    of the GPU backends (CPU lines are the same in both). A shaded band spans each
    crossover's bracket (the measured sizes around it, `crossings`), and the title
    says which side was ahead where. Rows shrink to fit a page.
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
    marks = {flag: crossings(frame, with_transfer=flag) for flag in (False, True)}
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

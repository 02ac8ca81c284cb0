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
from accelbench.analysis.sizes import size_label, size_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# The parameter along which a crossover is looked for.
SIZE = "size"
GPU, CPU, UNDECIDED = "GPU", "CPU", "undecided"
BAND = "0.88"  # the grey of the sizes a crossover lies between, in the figure


def _curve_params() -> dict[str, list[str]]:
    """Per family with sizes: the parameters that name one of its curves (a cell of work
    less its size)."""
    return {
        name: [key for key in gpu_vs_cpu.work_keys(family) if key != SIZE]
        for name, family in gpu_vs_cpu.work_families().items()
        if SIZE in gpu_vs_cpu.work_keys(family)
    }


def variant(experiment: str) -> str | None:
    """The parameter that names a curve besides its unit (a kernel's dtype), if it has one:
    the figures over sizes draw it as the line style."""
    found = _curve_params().get(experiment, [])[1:]
    return found[0] if found else None


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


def _sizes_text(sizes: list[int]) -> str:
    if len(sizes) == 1:
        return size_label(sizes[0])
    if len(sizes) == 2:
        return f"{size_label(sizes[0])} and {size_text(sizes[1])}"
    return f"the {len(sizes)} sizes from {size_label(sizes[0])} to {size_label(sizes[-1])}"


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
                return f"{_ahead(who)} at the one size measured, {size_label(sizes[0])}"
            return (
                f"{_ahead(who)} at all {len(sizes)} sizes measured, "
                f"from {size_label(sizes[0])} to {size_label(sizes[-1])}"
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
                f"{size_label(low)} and {size_label(high)}"
                for low, high, after in self.brackets
            )
        )

    @property
    def short(self) -> str:
        """`says` short enough for a figure panel's title."""
        if self.brackets:
            return "; ".join(
                f"{after} overtakes between {size_label(low)} and {size_text(high)}"
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
class _Factors:
    """One panel of the crossover figure: a kernel and dtype, or a data science workload,
    on one host, with its compared cells (gpu_vs_cpu) copies excluded and included."""

    experiment: str
    names: dict[str, Any]  # the curve's parameters and their values
    host: Any
    cells: pd.DataFrame
    title: str

    def crossing(self, found: list[Crossing]) -> Crossing | None:
        """This panel's crossing among `found`, if any."""
        return next(
            (
                one
                for one in found
                if (one.experiment, one.names, one.host) == (self.experiment, self.names, self.host)
            ),
            None,
        )


def _factor_panels(frame: pd.DataFrame) -> list[_Factors]:
    """Every curve compared at two sizes or more on one host (with one size there is no
    curve: the answer's table and the throughput figure have its one factor)."""
    cells = gpu_vs_cpu.compare(frame).cells
    cells = cells[cells["status"] == "ok"]
    hosts = cells[gpu_vs_cpu.HOST].nunique(dropna=False) > 1
    found = []
    for experiment, names in _curve_params().items():
        rows = cells[cells["experiment"] == experiment]
        for _, curve in rows.groupby([gpu_vs_cpu.HOST, *names], dropna=False, sort=True):
            if curve[SIZE].nunique() < 2:
                continue
            first = curve.iloc[0]
            title = ", ".join(str(first[name]) for name in names)
            title += f" on {first[gpu_vs_cpu.HOST]}" if hosts else ""
            named = {name: first[name] for name in names}
            found.append(_Factors(experiment, named, first[gpu_vs_cpu.HOST], curve, title))
    return found


def _factor_panel(ax, panel: _Factors, found: dict[bool, list[Crossing]]) -> list[str]:
    """The factor at each size, copies excluded and included, each in its look with its
    interval; the sizes around each crossover shaded; 1 (neither side ahead) as a line.
    Returns what the title says of each series."""
    from accelbench.analysis import figures, marks, style

    said = []
    for copies, with_transfer in gpu_vs_cpu.COPIES.items():
        rows = panel.cells[panel.cells["copies"] == copies].sort_values(SIZE)
        if rows.empty:
            continue
        look = style.look("copies", copies)
        marks.measured(
            ax,
            rows[SIZE],
            rows["median"],
            (rows["ci_low"], rows["ci_high"]),
            look,
            figures.flagged_rows(rows),
            linestyle=look.linestyle,
        )
        crossing = panel.crossing(found[with_transfer])
        for low, high, _ in crossing.brackets if crossing else []:
            ax.axvspan(low, high, color=BAND, linewidth=0, zorder=0)
        said.append(f"{copies}: {crossing.short}" if crossing else copies)
    ax.axhline(1.0, color=style.NEUTRAL, linewidth=0.6)
    figures.size_axis(ax, sorted(set(panel.cells[SIZE].astype(int))))
    low, high = figures.plotted_range(panel.cells, "")
    marks.fit_axis(ax, "y", min(low, 1.0), max(high, 1.0))
    marks.arrows(ax)
    return said


def crossover_figure(frame: pd.DataFrame) -> Figure:
    """The GPU's speedup over the CPU of its host against the problem size, copies excluded
    and included, per kernel and dtype and per data science workload compared at two sizes
    or more: at each size the factor of the best CPU time over the best GPU time with its
    interval (accelbench.analysis.gpu_vs_cpu), so that the GPU is ahead above 1 and the
    CPU below. Shaded: the two measured sizes a crossover lies between (`crossings`); the
    title says which side was ahead where. Rows shrink to fit a page.
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    from accelbench.analysis import figures, style

    style.apply()
    panels = _factor_panels(frame)
    if not panels:
        return style.empty_figure(
            "no kernel or workload compared with the CPU of its host at two sizes",
            style.DOUBLE_COLUMN,
        )
    ncols = min(2, len(panels))
    nrows = -(-len(panels) // ncols)
    row_height = min(
        style.PANEL_HEIGHT, max(style.MIN_PANEL_HEIGHT, (style.MAX_HEIGHT - 1.0) / nrows)
    )
    width = style.DOUBLE_COLUMN if ncols > 1 else style.SINGLE_COLUMN
    fig = Figure(figsize=(width, row_height * nrows + 0.3), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).flatten()
    found = {flag: crossings(frame, with_transfer=flag) for flag in (False, True)}
    for ax, panel in zip(axes, panels, strict=False):
        said = _factor_panel(ax, panel, found)
        ax.set_title("\n".join([panel.title, *said]))
        ax.set_ylabel("GPU speedup over the CPU (×)")
    for ax in axes[len(panels) :]:
        ax.remove()
    handles = [
        style.entry(style.look("copies", copies), copies, line=True) for copies in gpu_vs_cpu.COPIES
    ]
    band = Patch(facecolor=BAND, label="shaded: the sizes a crossover lies between")
    figures.legend_with_marks(fig, [*handles, band], pd.concat(p.cells for p in panels))
    return fig

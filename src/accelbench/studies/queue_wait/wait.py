"""Queue wait per partition, binned by the size of the request, and a forecast from it.

The wait of a job is Start - Eligible (Start - Submit when sacct has no
eligible time): the time the job could have run but had to wait, without the
time it was held back by a dependency or a begin time. A job's size is what it
asked for, because that is all the scheduler knows when it decides:
CPU-hours = requested CPUs x time limit, GB-hours = requested memory x time
limit. Jobs without a finite time limit (UNLIMITED, Partition_Limit) or
without a known memory request have no size and are counted, not binned.
Each array task and each component of a heterogeneous job is a job here, in
its own partition. A job submitted to several partitions counts where sacct
says it ran: once a job starts, Slurm records only the partition it runs in.
While it waits, or when it never started, sacct lists every partition it was
submitted to, and it waited in each, so it counts in each. A line that lists
several partitions for a job that started does not say where it ran: its wait
counts in each listed partition, and the table notes say how many such jobs
each partition holds.

Statistics are over the jobs that started. Jobs that did not start (still
pending, or cancelled while pending) are counted per bin: they waited at least
as long as they were seen, so a bin with many of them waits longer than its
median says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from accelbench.analysis import marks, plain_tables, style
from accelbench.measuring import statistics as sample_stats
from accelbench.studies.queue_wait.sacct import ParsedDump

DIMENSIONS = {"cpu_hours": "Requested CPU-hours", "gb_hours": "Requested GB-hours"}
STAT_COLUMNS = ("median_s", "q1_s", "q3_s", "ci_low_s", "ci_high_s", "ci_level")
FORECAST_METHOD = (
    "Forecast: the median and quartiles of the waits of started jobs in the same partition "
    "whose request falls in the same CPU-hours bin and the same GB-hours bin; where fewer "
    "than {min_jobs} such jobs started, the same CPU-hours bin alone; where that too has "
    "fewer, all jobs of the partition."
)
# Display units for durations: (upper bound in seconds, unit, seconds per unit).
DURATION_UNITS = (
    (120, "s", 1),
    (2 * 3600, "min", 60),
    (2 * 86400, "h", 3600),
    (math.inf, "d", 86400),
)


def bin_labels(edges: list[float]) -> list[str]:
    """Labels of the half-open bins [edge_i, edge_i+1): '< 4', '4–16', '16–64', '≥ 64'."""
    text = [f"{edge:g}" for edge in edges]
    return (
        [f"< {text[0]}"]
        + [f"{low}–{high}" for low, high in zip(text, text[1:], strict=False)]
        + [f"≥ {text[-1]}"]
    )


def assign_bins(values: pd.Series, edges: list[float]) -> pd.Series:
    """The bin label of each value (NaN stays NaN: a request without a size)."""
    return pd.cut(
        values.astype(float), [-math.inf, *edges, math.inf], right=False, labels=bin_labels(edges)
    )


def _wait_stats(waits: pd.Series) -> dict[str, float]:
    if waits.empty:
        return dict.fromkeys(STAT_COLUMNS, math.nan)
    stats = sample_stats.summarize(waits.tolist(), "s")
    return {
        "median_s": stats["median"],
        "q1_s": stats["q1"],
        "q3_s": stats["q3"],
        "ci_low_s": stats["ci_low"],
        "ci_high_s": stats["ci_high"],
        "ci_level": stats["ci_level"],
    }


def _group_row(group: pd.DataFrame) -> dict[str, float]:
    started = group["wait_s"].dropna()
    return {
        "jobs": len(started),
        "not_started": int(group.loc[group["wait_s"].isna(), "array_tasks"].sum()),
        **_wait_stats(started),
    }


def summarise(
    jobs: pd.DataFrame, dimension: str, edges: list[float], partitions: list[str]
) -> pd.DataFrame:
    """One row per (partition, bin) in that order, empty bins included (jobs 0, stats NaN).

    `attrs["unsized"]` holds, per partition, the jobs without a size in this dimension.
    """
    if dimension not in DIMENSIONS:
        raise ValueError(f"dimension {dimension!r} is not one of {list(DIMENSIONS)}")
    labels = bin_labels(edges)
    rows = []
    unsized = {}
    for partition in partitions:
        mine = jobs[jobs["partition"] == partition]
        bins = assign_bins(mine[dimension], edges)
        unsized[partition] = int(mine.loc[bins.isna(), "array_tasks"].sum())
        for label in labels:
            rows.append({"partition": partition, "bin": label, **_group_row(mine[bins == label])})
    summary = pd.DataFrame(rows, columns=["partition", "bin", "jobs", "not_started", *STAT_COLUMNS])
    summary.attrs = {"dimension": dimension, "unsized": unsized}
    return summary


@dataclass(frozen=True)
class Request:
    """What a job asks the scheduler for."""

    cpus: int
    mem_gb: float
    hours: float

    @property
    def cpu_hours(self) -> float:
        return self.cpus * self.hours

    @property
    def gb_hours(self) -> float:
        return self.mem_gb * self.hours


@dataclass(frozen=True)
class WaitForecast:
    partition: str
    basis: str  # which jobs the numbers come from
    jobs: int  # started jobs behind the numbers
    not_started: int
    median_s: float
    q1_s: float
    q3_s: float
    ci_low_s: float
    ci_high_s: float
    ci_level: float
    enough: bool  # at least min_jobs jobs behind the numbers


def forecast(
    jobs: pd.DataFrame,
    partition: str,
    request: Request,
    cpu_edges: list[float],
    gb_edges: list[float],
    min_jobs: int,
) -> WaitForecast:
    """Expected wait of `request` in `partition`: see FORECAST_METHOD."""
    mine = jobs[jobs["partition"] == partition]
    cpu_bin = bin_labels(cpu_edges)[int(np.searchsorted(cpu_edges, request.cpu_hours, "right"))]
    gb_bin = bin_labels(gb_edges)[int(np.searchsorted(gb_edges, request.gb_hours, "right"))]
    in_cpu = assign_bins(mine["cpu_hours"], cpu_edges) == cpu_bin
    in_gb = assign_bins(mine["gb_hours"], gb_edges) == gb_bin
    groups = [
        (f"CPU-hours {cpu_bin} and GB-hours {gb_bin}", mine[in_cpu & in_gb]),
        (f"CPU-hours {cpu_bin}", mine[in_cpu]),
        ("all jobs of the partition", mine),
    ]
    basis, group = next(
        ((basis, group) for basis, group in groups if group["wait_s"].notna().sum() >= min_jobs),
        groups[-1],
    )
    row = _group_row(group)
    if row["jobs"] == 0:
        basis = "no started job of the partition in the accounting data"
    return WaitForecast(partition=partition, basis=basis, enough=row["jobs"] >= min_jobs, **row)


def duration_unit(seconds: float) -> tuple[str, float]:
    """(unit, seconds per unit) that shows `seconds` as a number a person reads at once."""
    return next((unit, scale) for bound, unit, scale in DURATION_UNITS if seconds < bound)


def format_duration(seconds: float) -> str:
    """'0 s', '45 s', '12 min', '3.5 h', '1.2 d'; '–' when unknown."""
    if not math.isfinite(seconds):
        return "–"
    if seconds == 0:
        return "0 s"
    unit, scale = duration_unit(abs(seconds))
    value = seconds / scale
    return f"{value:.0f} {unit}" if abs(value) >= 10 else f"{value:.1f} {unit}"


def _cell(row: pd.Series) -> str:
    if row["jobs"] == 0:
        text = "–; n = 0"
    else:
        text = (
            f"{format_duration(row['median_s'])} "
            f"({format_duration(row['q1_s'])} – {format_duration(row['q3_s'])}); n = {row['jobs']}"
        )
    return text + (f" (+{row['not_started']} not started)" if row["not_started"] else "")


def display_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Rows = bins, columns = partitions, cells 'median (q1 – q3); n = jobs'."""
    labels = list(dict.fromkeys(summary["bin"]))
    partitions = list(dict.fromkeys(summary["partition"]))
    display = pd.DataFrame({DIMENSIONS[summary.attrs["dimension"]]: labels})
    for partition in partitions:
        here = summary[summary["partition"] == partition].set_index("bin")
        display[partition] = [_cell(here.loc[label]) for label in labels]
    return display


def table_notes(summary: pd.DataFrame, extra: list[str]) -> list[str]:
    unsized = {name: count for name, count in summary.attrs["unsized"].items() if count}
    notes = [
        "Wait = Start - Eligible (Start - Submit without an eligible time); median "
        "(quartiles) over the jobs that started; n = started jobs; not started = pending "
        "or cancelled while pending, so they waited longer than they were seen.",
    ]
    if unsized:
        noun = (
            "time limit or memory request"
            if summary.attrs["dimension"] == "gb_hours"
            else ("time limit")
        )
        notes.append(
            f"Jobs without a finite {noun}, not binned: "
            + ", ".join(f"{name} {count}" for name, count in unsized.items())
        )
    return notes + extra


def data_notes(parsed: ParsedDump, source: str, partitions: list[str]) -> list[str]:
    """What the accounting data held, the configured partitions it has no job of, and the
    started jobs counted in several partitions (their wait is in each partition's numbers)."""
    notes = [f"Accounting data: {source} ({parsed.summary()})."]
    jobs = parsed.jobs
    present = sorted(set(jobs["partition"]))
    absent = [name for name in partitions if name not in present]
    if absent:
        notes.append(
            f"No job of partition {', '.join(absent)} in the accounting data "
            f"(it has: {', '.join(present) or 'none'})."
        )
    shared = jobs[(jobs["partitions_listed"] > 1) & jobs["wait_s"].notna()]
    counts = shared["partition"].value_counts()
    listed = [f"{name} {counts[name]}" for name in partitions if name in counts]
    if listed:
        notes.append(
            "Started jobs whose accounting line lists several partitions, not the one they "
            "ran in, counted in each with their wait: " + ", ".join(listed) + "."
        )
    return notes


def write_table(summary: pd.DataFrame, stem: str, extra_notes: list[str]) -> list:
    dimension = summary.attrs["dimension"]
    caption = f"Queue wait per partition by {DIMENSIONS[dimension].removeprefix('Requested ')}"
    numbers = summary.rename(columns={"bin": dimension.replace("_", "-")})
    return plain_tables.write(
        display_table(summary), numbers, caption, table_notes(summary, extra_notes), stem
    )


def _partition_points(ax, summary: pd.DataFrame, partitions: list[str], scale: float) -> None:
    """One binning's panel: per bin and partition the median wait (point, in the partition's
    look) with the 95% CI of the median (error bar), the quartiles (wide pale bar) and the
    started jobs (number beside)."""
    labels = list(dict.fromkeys(summary["bin"]))
    width = 0.7 / len(partitions)
    for index, partition in enumerate(partitions):
        here = summary[(summary["partition"] == partition) & (summary["jobs"] > 0)]
        x = np.array([labels.index(label) for label in here["bin"]], float)
        x += (index - (len(partitions) - 1) / 2) * width
        median = here["median_s"].to_numpy(float) / scale
        look = style.look("partition", partition)
        ax.vlines(x, here["q1_s"] / scale, here["q3_s"] / scale, color=look.color, alpha=0.35, lw=5)
        ci = (here["ci_low_s"] / scale, here["ci_high_s"] / scale)
        marks.measured(ax, x, median, ci, look, np.zeros(len(here), bool))
        for position, value, count in zip(x, median, here["jobs"], strict=True):
            ax.annotate(
                f"{count}",
                (position, value),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=6,
                color=look.color,
            )
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlim(-0.5, len(labels) - 0.5)
    ax.set_xlabel(DIMENSIONS[summary.attrs["dimension"]])


def figure(summaries: list[pd.DataFrame]) -> Figure:
    """One panel per binning: median wait per bin and partition (point), the 95% CI of the
    median (error bar), the quartiles (wide pale bar), the started jobs (number beside);
    the time axis logarithmic where the waits span a decade."""
    style.apply()
    everything = pd.concat(summaries)
    started = everything[everything["jobs"] > 0]
    if started.empty:
        return style.empty_figure("no started jobs", style.DOUBLE_COLUMN)
    fig = Figure(figsize=(style.DOUBLE_COLUMN, style.PANEL_HEIGHT + 0.5), layout="constrained")
    axes = fig.subplots(1, len(summaries), sharey=True, squeeze=False)[0]
    unit, scale = duration_unit(float(started[["q3_s", "ci_high_s"]].max().max()))
    partitions = list(dict.fromkeys(everything["partition"]))
    for ax, summary in zip(axes, summaries, strict=True):
        _partition_points(ax, summary, partitions, scale)
    low = float(started[["q1_s", "ci_low_s"]].to_numpy(float).min()) / scale
    high = float(started[["q3_s", "ci_high_s"]].to_numpy(float).max()) / scale
    marks.fit_axis(axes[0], "y", low if low > 0 else high / 1e3, high)
    for ax in axes:
        marks.arrows(ax)
    axes[0].set_ylabel(f"Queue wait ({unit})")
    handles = [style.entry(style.look("partition", name), name) for name in partitions]
    handles += [
        style.style_entry("pale bar: quartiles of the waits", marker="|", markersize=8, alpha=0.35),
        style.interval_entry("95% CI of the median"),
        style.style_entry("number: jobs started", marker="None"),
    ]
    style.legend(fig, handles)
    return fig

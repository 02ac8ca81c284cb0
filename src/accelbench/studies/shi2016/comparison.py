"""Measured time per mini-batch beside Shi et al. (2016), Table 7: a table and two figures.

The study's config.yaml plans the paper's seven networks (accelbench.studies.shi2016.paper).
A record stands for a network only if its model, batch, precision (fp32),
strategy (single) and options match: a ResNet-50 at 64 x 64 pixels is not the
paper's ResNet-50, and the table lists it as not compared with the option that
differs.

A record is set beside the paper's columns of the same kind of platform: a CPU
device here (cpuN on one node) beside the paper's desktop and server CPUs on N
threads, one GPU here beside the paper's three GPUs. In each column it meets the
paper's Torch time (Torch is PyTorch's ancestor) and the fastest of the paper's
five tools, with the measured time's ratio to each. The GPUs of 2016 ran with
that year's CUDA, cuDNN and tools: a GPU here is another generation of hardware
and software, so those rows and lines are a reference, not a like-for-like
claim. A cell the paper prints as "-" says "did not run"; nothing is estimated.
"""

from __future__ import annotations

import json
import math
from typing import TypedDict

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

from accelbench.analysis import figures, marks, plain_tables, style
from accelbench.analysis.tables import (
    ABOVE_IDEAL_MARK,
    ABOVE_IDEAL_NOTE,
    BUSY_MARK,
    BUSY_NOTE,
    IMPRECISE_MARK,
    IMPRECISE_NOTE,
    MISSING,
    format_with_ci,
)
from accelbench.analysis.tidy import STATUS_TEXT, device_key, flagged
from accelbench.platform.devices import DeviceError, parse_device
from accelbench.studies.shi2016.paper import (
    CITATION,
    NETWORKS,
    PLATFORMS,
    PRECISION,
    REFERENCE_TOOL,
    STRATEGY,
    TOOLS,
    Network,
    best,
    differing_options,
    published,
)
from accelbench.train.models import OptionValue

DID_NOT_RUN = "did not run"
NONE_RAN = "none ran"
CPU_PLATFORMS = tuple(platform for platform in PLATFORMS.values() if not platform.is_gpu)
GPU_PLATFORMS = tuple(platform for platform in PLATFORMS.values() if platform.is_gpu)
OTHER_GENERATION = (
    "The paper's GPUs (GTX 980, GTX 1080, Tesla K80) ran with 2016's CUDA, cuDNN and "
    "tools: a GPU here is another generation of hardware and software, so its rows are "
    "a reference line, not a like-for-like comparison."
)


def _device(device: str):
    """The parsed device, or None for a name that is not one."""
    try:
        return parse_device(device)
    except DeviceError:
        return None


def _threads(device: str) -> int | None:
    """Threads of a one-node CPU device; None for any other device."""
    parsed = _device(device)
    return parsed.count if parsed and parsed.kind == "cpu" and parsed.nodes == 1 else None


def paper_columns(device: str) -> list[tuple[str, int]]:
    """(platform, threads) of the paper's columns a device here is compared with: a one-node
    CPU's at its thread count on the desktop and the server, one GPU's on the three GPUs;
    none for anything else (the paper ran one process on one GPU or one CPU)."""
    parsed = _device(device)
    if parsed is None or parsed.nodes != 1:
        return []
    if parsed.kind == "cpu":
        return [(p.key, parsed.count) for p in CPU_PLATFORMS if parsed.count in p.threads]
    return [(p.key, 1) for p in GPU_PLATFORMS] if parsed.count == 1 else []


def _records(frame: pd.DataFrame, network: Network) -> pd.DataFrame:
    """Training records of the network's model at the paper's batch, fp32 and single, in
    natural device order."""
    chosen = frame[
        (frame["experiment"] == "train")
        & (frame["model"] == network.model)
        & (frame["batch"] == network.batch)
        & (frame["precision"] == PRECISION)
        & (frame["strategy"] == STRATEGY)
    ]
    return chosen.sort_values("device", key=lambda devices: devices.map(device_key))


def _options(record: pd.Series) -> dict[str, OptionValue]:
    text = record.get("options")
    return json.loads(text) if isinstance(text, str) else {}


def comparison(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """(one row per record of a paper network and column of the paper it meets, in the
    paper's network order and devices in natural order; a note per record with the paper's
    model and batch but other options, which is not compared). A row has the measured
    median and interval, the paper's Torch time and the best of its five tools in that
    column with their ratios, and on CPUs the speed-up over one thread here and in the
    paper (Torch on the same platform). A record that meets no column of the paper keeps
    one row without them."""
    rows, not_compared = [], []
    for network in NETWORKS:
        compared = []
        for _, record in _records(frame, network).iterrows():
            differs = differing_options(network, _options(record))
            if differs:
                wanted = ", ".join(f"{key} {value}" for key, value in differs.items())
                not_compared.append(f"{record['id']} is not {network.name}, which has {wanted}")
            else:
                compared.append(record)
        one_thread = next(
            (_measured(record)[0] for record in compared if record["device"] == "cpu1"), math.nan
        )
        for record in compared:
            for column in paper_columns(record["device"]) or [(None, None)]:
                rows.append(_row(network, record, one_thread, *column))
    return pd.DataFrame(rows, columns=list(COLUMNS)), not_compared


def _measured(record: pd.Series) -> tuple[float, float, float]:
    """(median, low, high) seconds per mini-batch of an ok record; NaN for any other (a
    table of records that all failed has no time columns at all)."""
    if record["status"] != "ok":
        return math.nan, math.nan, math.nan
    fields = ("median", "ci_low", "ci_high")
    return tuple(record.get(f"time_per_batch_{field}", math.nan) for field in fields)


def _seconds(cell) -> float:
    return cell.seconds if cell is not None and cell.ran else math.nan


class ComparisonRow(TypedDict):
    """A row of the comparison (COLUMNS): one record against one column of the paper, or
    against none (`platform` None, the paper's numbers nan)."""

    network: str
    model: str
    faithful: bool
    batch: int
    device: str
    status: str
    reason: str | None
    busy: bool
    imprecise: bool
    measured_s: float
    measured_low_s: float
    measured_high_s: float
    threads: int | None
    platform: str | None
    torch_s: float
    torch_ran: bool
    torch_ratio: float
    best_s: float
    best_tool: str | None
    best_ratio: float
    speedup_here: float
    speedup_torch: float


def _row(
    network: Network,
    record: pd.Series,
    one_thread: float,
    platform: str | None,
    threads: int | None,
) -> ComparisonRow:
    ok = record["status"] == "ok"
    median, low, high = _measured(record)
    torch = published(network.name, REFERENCE_TOOL, platform, threads) if platform else None
    fastest = best(network.name, platform, threads) if platform else None
    torch_one = published(network.name, REFERENCE_TOOL, platform, 1) if platform else None
    on_cpu = _threads(record["device"])
    return {
        "network": network.name,
        "model": network.model,
        "faithful": network.faithful,
        "batch": network.batch,
        "device": record["device"],
        "status": record["status"],
        "reason": None if ok else record["reason"],
        "busy": flagged(record.get("busy")),
        "imprecise": flagged(record.get("imprecise")),
        "measured_s": median,
        "measured_low_s": low,
        "measured_high_s": high,
        "threads": on_cpu,
        "platform": platform,
        "torch_s": _seconds(torch),
        "torch_ran": bool(torch and torch.ran),
        "torch_ratio": median / _seconds(torch),
        "best_s": _seconds(fastest),
        "best_tool": fastest.tool if fastest else None,
        "best_ratio": median / _seconds(fastest),
        "speedup_here": one_thread / median if on_cpu else math.nan,
        "speedup_torch": (
            _seconds(torch_one) / _seconds(torch)
            if platform and not PLATFORMS[platform].is_gpu
            else math.nan
        ),
    }


COLUMNS = (
    "network",
    "model",
    "faithful",
    "batch",
    "device",
    "status",
    "reason",
    "busy",
    "imprecise",
    "measured_s",
    "measured_low_s",
    "measured_high_s",
    "threads",
    "platform",
    "torch_s",
    "torch_ran",
    "torch_ratio",
    "best_s",
    "best_tool",
    "best_ratio",
    "speedup_here",
    "speedup_torch",
)
STAND_IN_MARK = "*"


def _number(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else MISSING


def _ratio(value: float) -> str:
    """A ratio to two decimals, or to two significant digits below 0.1 (a GPU against a
    CPU of 2016 can be a hundred times faster)."""
    if not math.isfinite(value):
        return MISSING
    return f"{value:.{max(2, 1 - math.floor(math.log10(value)))}f}"


def _speedup(value: float, threads: float) -> str:
    """A speed-up on `threads` threads, marked where it exceeds the ideal (N on N)."""
    if not math.isfinite(value):
        return MISSING
    return f"{value:.2f}" + (ABOVE_IDEAL_MARK if value > threads else "")


def _paper(seconds: float, ran: bool, platform: str | None, none: str) -> str:
    """A time of the paper as it prints it (three decimals), `none` where it prints "-",
    a dash where it has no such column."""
    if platform is None:
        return MISSING
    return f"{seconds:.3f}" if ran else none


def display_table(numbers: pd.DataFrame) -> pd.DataFrame:
    """The comparison as text cells, one line per record and column of the paper: the
    measured median and its interval, the paper's Torch time and its best of five with
    the ratios, the speed-ups over one thread here and for Torch in the paper. A record's
    second column of the paper leaves its network, device and measurement blank, as
    the lines above hold them."""
    cells = []
    previous_network, previous_record = None, None
    for row in numbers.itertuples():
        if row.status == "ok":
            measured = format_with_ci(row.measured_s, row.measured_low_s, row.measured_high_s)
            median, interval = measured.split(" ", 1)
            median += BUSY_MARK if row.busy else ""
            median += IMPRECISE_MARK if row.imprecise else ""
        else:
            median, interval = STATUS_TEXT.get(row.status, row.status), ""
        first = (row.network, row.device) != previous_record
        cells.append(
            {
                "Network": (row.network + ("" if row.faithful else STAND_IN_MARK))
                if row.network != previous_network
                else "",
                "Device": row.device if first else "",
                "Paper column": PLATFORMS[row.platform].label if row.platform else MISSING,
                "Measured (s)": median if first else "",
                "95% interval": interval if first else "",
                "Torch (s)": _paper(row.torch_s, row.torch_ran, row.platform, DID_NOT_RUN),
                "Measured / Torch": _ratio(row.torch_ratio),
                "Best of five (s)": _paper(
                    row.best_s, row.best_tool is not None, row.platform, NONE_RAN
                ),
                "Best tool": row.best_tool or MISSING,
                "Measured / best": _ratio(row.best_ratio),
                "Speed-up here": _speedup(row.speedup_here, row.threads) if first else "",
                "Speed-up, Torch": _speedup(row.speedup_torch, row.threads),
            }
        )
        previous_network, previous_record = row.network, (row.network, row.device)
    return pd.DataFrame(cells, columns=DISPLAY_COLUMNS)


DISPLAY_COLUMNS = (
    "Network",
    "Device",
    "Paper column",
    "Measured (s)",
    "95% interval",
    "Torch (s)",
    "Measured / Torch",
    "Best of five (s)",
    "Best tool",
    "Measured / best",
    "Speed-up here",
    "Speed-up, Torch",
)


def notes(numbers: pd.DataFrame, not_compared: list[str]) -> list[str]:
    """What the table's columns, marks and dashes mean, how each model differs, and what
    was left out."""
    if numbers.empty:
        found = [
            "No record of a Shi et al. (2016) network at the paper's batch size, "
            "fp32, single process: run the grid of studies/shi2016/config.yaml."
        ]
        return found + not_compared
    said = [
        f"Paper: {CITATION}. Paper column: a CPU device here (cpuN) meets the paper's "
        "desktop CPU and server CPU on N threads, one GPU here the paper's three GPUs. "
        f"Torch: the paper's {REFERENCE_TOOL} time there; best of five: the fastest of its "
        f"tools there ({', '.join(TOOLS)}; TF is TensorFlow). {DID_NOT_RUN}, {NONE_RAN}: "
        "the paper prints - (the tool could not run the network there).",
        "Measured: median and 95% prediction interval for the median of an independent "
        "rerun, of the seconds per training step (forward, backward, optimiser step). "
        "Speed-up: time on one thread over time on N threads of the same network, here "
        f"and for Torch on the same platform of the paper. {MISSING}: nothing to compare "
        "(the paper has no such column, or one side lacks the one-thread time).",
    ]
    if numbers["platform"].map(lambda key: key in {p.key for p in GPU_PLATFORMS}).any():
        said.append(OTHER_GENERATION)
    if numbers["busy"].any():
        said.append(f"{BUSY_MARK} {BUSY_NOTE}")
    if numbers["imprecise"].any():
        said.append(f"{IMPRECISE_MARK} {IMPRECISE_NOTE}")
    if any(ABOVE_IDEAL_MARK in text for text in display_table(numbers).to_numpy().ravel()):
        said.append(f"{ABOVE_IDEAL_MARK} {ABOVE_IDEAL_NOTE}")
    shown = dict.fromkeys(numbers["network"])
    for network in (network for network in NETWORKS if network.name in shown):
        mark = "" if network.faithful else STAND_IN_MARK
        said.append(
            f"{network.name}{mark} (model {network.model}, batch {network.batch}): "
            f"{network.differs}."
        )
    failed = numbers[numbers["status"] != "ok"].drop_duplicates(["network", "device"])
    said += [f"{row.network} on {row.device}: {row.reason}" for row in failed.itertuples()]
    return said + [f"Not compared: {line}." for line in not_compared]


def write_table(numbers: pd.DataFrame, not_compared: list[str], stem: str) -> list:
    """`<stem>.md`, `.tex` from the display cells, `.csv` with the numbers behind them."""
    caption = (
        "Time per mini-batch measured here beside Shi et al. (2016): the paper's Torch "
        "and the best of its five tools on the same kind of platform"
    )
    display = display_table(numbers)
    return plain_tables.write(
        display, numbers, caption, notes(numbers, not_compared), stem, text_columns=3
    )


# Labelled ticks of a logarithmic time axis, per decade.
TICKS = (1.0, 2.0, 3.0, 5.0)


def _value_axis(ax, values: list[float]) -> None:
    """The time (speed-up) axis: logarithmic where the values span a decade, with labelled
    ticks at 1, 2, 3 and 5 of each, so that the thread-scaling shapes compare; else
    linear from zero."""
    values = [value for value in values if math.isfinite(value) and value > 0]
    marks.fit_axis(ax, "y", min(values), max(values))
    if ax.get_yscale() == "log":
        ax.yaxis.set_major_locator(LogLocator(subs=TICKS))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.yaxis.set_minor_locator(LogLocator(subs="auto"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: ""))
    marks.arrows(ax)


def _thread_axis(ax, threads: list[int]) -> None:
    """CPU thread counts with a labelled tick at each count shown: on a log2 axis where
    they span a decade, else linear."""
    low, high = min(threads), max(threads)
    if marks.spans_decade(low, high):
        ax.set_xscale("log", base=2)
        ax.set_xlim(low / 1.4, high * 1.4)
    else:
        ax.set_xlim(low - 0.1 * (high - low) - 0.5, high + 0.1 * (high - low) + 0.5)
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(threads))))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("CPU threads")


def torch_curve(network: str, platform: str) -> tuple[list[int], list[float]]:
    """(threads, seconds) of the paper's Torch on a CPU platform, where it ran."""
    cells = [published(network, REFERENCE_TOOL, platform, n) for n in PLATFORMS[platform].threads]
    ran = [cell for cell in cells if cell.ran]
    return [cell.threads for cell in ran], [cell.seconds for cell in ran]


def best_curve(network: str, platform: str) -> tuple[list[int], list[float]]:
    """(threads, seconds) of the fastest of the paper's tools at each thread count of a CPU
    platform, where one ran."""
    cells = [best(network, platform, n) for n in PLATFORMS[platform].threads]
    ran = [cell for cell in cells if cell is not None]
    return [cell.threads for cell in ran], [cell.seconds for cell in ran]


def scaling_curve(network: str, platform: str) -> tuple[list[int], list[float]]:
    """(threads, speed-up over one thread) of the paper's Torch on a CPU platform."""
    threads, seconds = torch_curve(network, platform)
    if 1 not in threads:
        return [], []
    one = seconds[threads.index(1)]
    return threads, [one / value for value in seconds]


# How the paper's platforms are drawn: in the grey of others' numbers, a marker per CPU,
# a dash pattern per GPU; the runs here in the look of their device kind.
CPU_MARKERS = {"desktop_cpu": "s", "server_cpu": "^"}
GPU_DASHES = {"gpu_gtx980": (0, (5, 2)), "gpu_gtx1080": (0, (1, 1)), "gpu_tesla_k80": "-."}
HERE = style.look("device kind", "cpu")
GPU_HERE = style.look("device kind", "cuda")
INTERVAL = "95% interval"  # as the table names it


def _one_gpu(numbers: pd.DataFrame) -> pd.DataFrame:
    """The ok records of one GPU (those that meet the paper's GPUs), one row each."""
    on_gpu = numbers[numbers["platform"].isin([p.key for p in GPU_PLATFORMS])]
    return on_gpu[on_gpu["status"] == "ok"].drop_duplicates("device")


def _panels(count: int, width: float | None) -> tuple[Figure, list]:
    width, nrows, ncols, height = style.panel_grid(count, width or style.DOUBLE_COLUMN)
    fig = Figure(figsize=(width, nrows * height), layout="constrained")
    axes = list(fig.subplots(nrows, ncols, squeeze=False).ravel())
    for ax in axes[count:]:
        ax.set_visible(False)
    return fig, axes


def _title(ax, name: str) -> None:
    network = next(network for network in NETWORKS if network.name == name)
    stand_in = "" if network.faithful else ", stand-in"
    ax.set_title(f"{name} (batch {network.batch}{stand_in})")


def _measured_on_cpu(ax, on_cpu: pd.DataFrame) -> bool:
    """The medians here against threads with their intervals, flagged points hollow;
    returns whether any is flagged."""
    flagged = figures.flagged_rows(on_cpu)
    interval = (on_cpu["measured_low_s"], on_cpu["measured_high_s"])
    marks.measured(
        ax, on_cpu["threads"], on_cpu["measured_s"], interval, HERE, flagged, linestyle="-"
    )
    return bool(flagged.any())


def _paper_cpu_curves(ax, name: str) -> tuple[list[float], list[int]]:
    """The paper's Torch (dashed, hollow) and best of five tools (dotted) on each CPU
    platform; returns the (seconds, threads) drawn, for the axes' ranges."""
    values, threads = [], []
    for platform in CPU_PLATFORMS:
        for curve, line in ((torch_curve, "--"), (best_curve, ":")):
            x, y = curve(name, platform.key)
            ax.plot(
                x,
                y,
                marker=CPU_MARKERS[platform.key],
                fillstyle="none" if curve is torch_curve else "full",
                markersize=3 if curve is best_curve else None,
                linestyle=line,
                color=style.REFERENCE,
            )
            values += y
            threads += x
    return values, threads


def _gpu_lines(ax, name: str, rows: pd.DataFrame) -> list[float]:
    """A GPU measured here as a line in its interval's band, beside the paper's GPUs as
    grey lines; returns the seconds drawn, for the axis' range."""
    values = []
    for gpu in _one_gpu(rows).itertuples():
        ax.axhspan(gpu.measured_low_s, gpu.measured_high_s, color=GPU_HERE.color, alpha=0.2, lw=0)
        ax.axhline(gpu.measured_s, color=GPU_HERE.color, linewidth=1.5)
        for platform in GPU_PLATFORMS:
            cell = published(name, REFERENCE_TOOL, platform.key, 1)
            if cell.ran:
                ax.axhline(cell.seconds, color=style.REFERENCE, linestyle=GPU_DASHES[platform.key])
                values.append(cell.seconds)
        values += [gpu.measured_low_s, gpu.measured_high_s]
    return values


def _paper_cpu_handles(best_too: bool) -> list:
    """Legend entries of the paper's CPU curves."""
    handles = []
    for platform in CPU_PLATFORMS:
        marker = CPU_MARKERS[platform.key]
        handles.append(
            Line2D(
                [],
                [],
                color=style.REFERENCE,
                marker=marker,
                fillstyle="none",
                linestyle="--",
                label=f"{REFERENCE_TOOL}, {platform.label} (2016)",
            )
        )
        if best_too:
            handles.append(
                Line2D(
                    [],
                    [],
                    color=style.REFERENCE,
                    marker=marker,
                    markersize=3,
                    linestyle=":",
                    label=f"best of five tools, {platform.label} (2016)",
                )
            )
    return handles


def _time_handles(gpus_drawn: bool, flagged: bool) -> list:
    """The legend of the time figure: what is measured here, the paper's curves and GPUs."""
    handles = [style.entry(HERE, "measured here", line=True), *_paper_cpu_handles(True)]
    if gpus_drawn:
        handles.append(
            Patch(facecolor=GPU_HERE.color, alpha=0.5, label="one GPU here (line: median)")
        )
        handles += [
            Line2D(
                [],
                [],
                color=style.REFERENCE,
                linestyle=GPU_DASHES[platform.key],
                label=f"{platform.label}, {REFERENCE_TOOL} (2016: another generation)",
            )
            for platform in GPU_PLATFORMS
        ]
    handles.append(style.interval_entry(INTERVAL))
    return handles + ([style.flagged_entry()] if flagged else [])


def figure(numbers: pd.DataFrame, width: float | None = None) -> Figure:
    """Seconds per mini-batch against CPU threads, a panel per network measured: the
    medians here with their intervals, the paper's Torch and its best of five tools on
    the desktop and the server CPU; a GPU here as a horizontal line with its interval,
    beside the paper's three GPUs as grey reference lines of another generation. Log
    axes where the times span a decade, so that the thread-scaling shapes compare."""
    style.apply()
    measured = numbers[numbers["status"] == "ok"]
    if measured.empty:
        return style.empty_figure(
            "no record of a Shi et al. (2016) network at the paper's batch size", width
        )
    names = list(dict.fromkeys(measured["network"]))
    fig, axes = _panels(len(names), width)
    gpus_drawn, flagged = False, False
    for ax, name in zip(axes, names, strict=False):
        rows = measured[measured["network"] == name]
        on_cpu = rows[rows["threads"].notna()].drop_duplicates("device")
        flagged = _measured_on_cpu(ax, on_cpu) or flagged
        paper_values, paper_threads = _paper_cpu_curves(ax, name)
        values = [*on_cpu["measured_s"], *paper_values]
        values += [*on_cpu.loc[~figures.flagged_rows(on_cpu), "measured_low_s"]]
        values += [*on_cpu.loc[~figures.flagged_rows(on_cpu), "measured_high_s"]]
        threads = [int(n) for n in on_cpu["threads"]] + paper_threads
        values += _gpu_lines(ax, name, rows)
        gpus_drawn = gpus_drawn or not _one_gpu(rows).empty
        _thread_axis(ax, threads)
        _value_axis(ax, values)
        _title(ax, name)
        ax.set_ylabel("Time per mini-batch (s)")
    style.legend(fig, _time_handles(gpus_drawn, flagged))
    return fig


def scaling_figure(numbers: pd.DataFrame, width: float | None = None) -> Figure:
    """Speed-up over one thread against CPU threads, a panel per network measured on one
    thread and more: here, and the paper's Torch on its desktop and server CPUs over all
    their thread counts, with the ideal (N on N threads) for scale."""
    style.apply()
    on_cpu = numbers[(numbers["status"] == "ok") & numbers["speedup_here"].notna()].drop_duplicates(
        ["network", "device"]
    )
    names = [
        name for name in dict.fromkeys(on_cpu["network"]) if (on_cpu["network"] == name).sum() > 1
    ]
    if not names:
        return style.empty_figure(
            "no Shi et al. (2016) network measured on one CPU thread and on more", width
        )
    fig, axes = _panels(len(names), width)
    flagged = False
    for ax, name in zip(axes, names, strict=False):
        rows = on_cpu[on_cpu["network"] == name]
        hollow = figures.flagged_rows(rows)
        marks.measured(ax, rows["threads"], rows["speedup_here"], None, HERE, hollow, linestyle="-")
        flagged = flagged or bool(hollow.any())
        values, threads = list(rows["speedup_here"]), [int(n) for n in rows["threads"]]
        for platform in CPU_PLATFORMS:
            x, y = scaling_curve(name, platform.key)
            ax.plot(
                x,
                y,
                marker=CPU_MARKERS[platform.key],
                fillstyle="none",
                linestyle="--",
                color=style.REFERENCE,
            )
            values, threads = values + y, threads + x
        ideal = sorted(set(threads))
        ax.plot(ideal, ideal, color=style.NEUTRAL, linestyle="--", linewidth=0.6, zorder=0)
        _thread_axis(ax, threads)
        _value_axis(ax, values + ideal)
        _title(ax, name)
        ax.set_ylabel("Speed-up over one thread (×)")
    handles = [style.entry(HERE, "measured here", line=True), *_paper_cpu_handles(False)]
    handles.append(
        Line2D([], [], color=style.NEUTRAL, ls="--", linewidth=0.6, label="ideal: N on N threads")
    )
    if flagged:
        handles.append(style.flagged_entry())
    style.legend(fig, handles)
    return fig

"""Measured time per mini-batch beside Shi et al. (2016), Table 7 (Torch): table and figure.

`config/shi2016.yaml` plans the paper's seven networks (accelbench.analysis.shi2016_paper).
A record stands for a network only if its model, batch, precision (fp32),
strategy (single) and options match: a ResNet-50 at 64 x 64 pixels is not the
paper's ResNet-50, and the table lists it as not compared with the option that
differs. A cell the paper's data here lack says "not transcribed"; nothing is
estimated or filled in.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator

from accelbench.analysis import figures, plain_tables, style
from accelbench.analysis.shi2016_paper import (
    CITATION,
    NETWORKS,
    PRECISION,
    PUBLISHED,
    STRATEGY,
    Network,
    Published,
    differing_options,
)
from accelbench.analysis.tables import (
    ABOVE_IDEAL_MARK,
    ABOVE_IDEAL_NOTE,
    BUSY_MARK,
    BUSY_NOTE,
    MISSING,
    format_with_ci,
)
from accelbench.analysis.tidy import STATUS_TEXT, device_key, flagged
from accelbench.devices import DeviceError, parse_device

NOT_TRANSCRIBED = "not transcribed"


def _threads(device: str) -> int | None:
    """Threads of a one-node CPU device; None for any other device."""
    try:
        parsed = parse_device(device)
    except DeviceError:
        return None
    return parsed.count if parsed.kind == "cpu" and parsed.nodes == 1 else None


def published(network: str, device: str) -> Published | None:
    """The paper's cell for a device here: a CPU's by its thread count (GPUs differ by
    model, so a GPU here has no published counterpart to divide by)."""
    threads = _threads(device)
    if threads is None:
        return None
    return next(
        (cell for cell in PUBLISHED if cell.network == network and cell.threads == threads), None
    )


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


def _options(record: pd.Series) -> dict[str, Any]:
    text = record.get("options")
    return json.loads(text) if isinstance(text, str) else {}


def comparison(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """(one row per record of a paper network, in the paper's order and devices in natural
    order; a note per record with the paper's model and batch but other options, which is
    not compared). A row has the measured median and interval, the published seconds and
    the ratio, and on CPUs the speed-up over one thread here and in the paper."""
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
        paper_one_thread = published(network.name, "cpu1")
        for record in compared:
            rows.append(_row(network, record, one_thread, paper_one_thread))
    return pd.DataFrame(rows, columns=list(COLUMNS)), not_compared


def _measured(record: pd.Series) -> tuple[float, float, float]:
    """(median, low, high) seconds per mini-batch of an ok record; NaN for any other (a
    table of records that all failed has no time columns at all)."""
    if record["status"] != "ok":
        return math.nan, math.nan, math.nan
    fields = ("median", "ci_low", "ci_high")
    return tuple(record.get(f"time_per_batch_{field}", math.nan) for field in fields)


def _row(
    network: Network, record: pd.Series, one_thread: float, paper_one_thread: Published | None
) -> dict[str, Any]:
    ok = record["status"] == "ok"
    median, low, high = _measured(record)
    cell = published(network.name, record["device"])
    threads = _threads(record["device"])
    return {
        "network": network.name,
        "model": network.model,
        "faithful": network.faithful,
        "batch": network.batch,
        "device": record["device"],
        "status": record["status"],
        "reason": None if ok else record["reason"],
        "busy": flagged(record.get("busy")),
        "measured_s": median,
        "measured_low_s": low,
        "measured_high_s": high,
        "published_s": cell.seconds if cell else math.nan,
        "published_platform": cell.platform if cell else None,
        "ratio": median / cell.seconds if cell else math.nan,
        "threads": threads,
        "speedup_here": one_thread / median if threads else math.nan,
        "speedup_paper": (
            paper_one_thread.seconds / cell.seconds if cell and paper_one_thread else math.nan
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
    "measured_s",
    "measured_low_s",
    "measured_high_s",
    "published_s",
    "published_platform",
    "ratio",
    "threads",
    "speedup_here",
    "speedup_paper",
)
STAND_IN_MARK = "*"


def _number(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else MISSING


def _speedup(value: float, threads: float) -> str:
    """A speed-up on `threads` threads, marked where it exceeds the ideal (N on N)."""
    if not math.isfinite(value):
        return MISSING
    return f"{value:.2f}" + (ABOVE_IDEAL_MARK if value > threads else "")


def display_table(numbers: pd.DataFrame) -> pd.DataFrame:
    """The comparison as text cells: seconds with the measured interval, the ratio, the
    speed-ups over one thread here and in the paper."""
    cells = []
    for row in numbers.itertuples():
        if row.status == "ok":
            measured = format_with_ci(row.measured_s, row.measured_low_s, row.measured_high_s)
            measured += BUSY_MARK if row.busy else ""
        else:
            measured = STATUS_TEXT.get(row.status, row.status)
        # A CPU here compares with the paper's CPU at its thread count; a GPU with none.
        on_cpu = pd.notna(row.threads)
        paper = _number(row.published_s) if pd.notna(row.published_s) else NOT_TRANSCRIBED
        cells.append(
            {
                "Network": row.network + ("" if row.faithful else STAND_IN_MARK),
                "Device": row.device,
                "Measured (s)": measured,
                "Paper (s)": paper if on_cpu else MISSING,
                "Measured / paper": _number(row.ratio),
                "Speed-up here": _speedup(row.speedup_here, row.threads),
                "Speed-up in paper": _speedup(row.speedup_paper, row.threads),
            }
        )
    return pd.DataFrame(cells, columns=DISPLAY_COLUMNS)


DISPLAY_COLUMNS = (
    "Network",
    "Device",
    "Measured (s)",
    "Paper (s)",
    "Measured / paper",
    "Speed-up here",
    "Speed-up in paper",
)


def notes(numbers: pd.DataFrame, not_compared: list[str]) -> list[str]:
    """What the table's marks and dashes mean, how each model differs, and what was left out."""
    if numbers.empty:
        found = [
            "No record of a Shi et al. (2016) network at the paper's batch size, "
            "fp32, single process: run config/shi2016.yaml."
        ]
        return found + not_compared
    said = [
        f"Paper: {CITATION}. A CPU device here (cpuN) is compared with the paper's CPU "
        "time on N threads. Speed-up: time on one thread over time on N threads of the "
        "same network, here and in the paper.",
        f"{NOT_TRANSCRIBED}: the paper's value for this cell is not in the project's data; "
        f"{MISSING}: nothing to compare (a GPU here has no published counterpart of its "
        "model, or one side lacks the one-thread time).",
        "Measured: median [95% prediction interval for one more run] of the seconds per "
        "training step (forward, backward, optimiser step).",
    ]
    if numbers["busy"].any():
        said.append(f"{BUSY_MARK} {BUSY_NOTE}")
    if any(ABOVE_IDEAL_MARK in text for text in display_table(numbers).to_numpy().ravel()):
        said.append(f"{ABOVE_IDEAL_MARK} {ABOVE_IDEAL_NOTE}")
    shown = dict.fromkeys(numbers["network"])
    for network in (network for network in NETWORKS if network.name in shown):
        mark = "" if network.faithful else STAND_IN_MARK
        said.append(
            f"{network.name}{mark} (model {network.model}, batch {network.batch}): "
            f"{network.differs}."
        )
    failed = numbers[numbers["status"] != "ok"]
    said += [f"{row.network} on {row.device}: {row.reason}" for row in failed.itertuples()]
    return said + [f"Not compared: {line}." for line in not_compared]


def write_table(numbers: pd.DataFrame, not_compared: list[str], stem: str) -> list:
    """`<stem>.md`, `.tex` from the display cells, `.csv` with the numbers behind them."""
    caption = (
        "Time per mini-batch measured here beside Shi et al. (2016), Torch, by network and device"
    )
    display = display_table(numbers)
    return plain_tables.write(
        display, numbers, caption, notes(numbers, not_compared), stem, text_columns=2
    )


# Labelled ticks of the time axis, per decade: two of them in any span of 4x or more.
TICKS = (1.0, 2.0, 3.0, 5.0)
MIN_SPAN = 4.0


def _log_axis(ax, values: list[float]) -> None:
    """A log time axis spanning at least MIN_SPAN around the values, so a panel whose
    times differ by less than that still shows two labelled ticks to read them by."""
    low, high = min(values), max(values)
    if high / low < MIN_SPAN:
        centre = math.sqrt(low * high)
        low, high = centre / math.sqrt(MIN_SPAN), centre * math.sqrt(MIN_SPAN)
    ax.set_yscale("log")
    ax.set_ylim(low / 1.1, high * 1.1)
    ax.yaxis.set_major_locator(LogLocator(subs=TICKS))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_locator(LogLocator(subs="auto"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: ""))


def figure(numbers: pd.DataFrame, width: float | None = None) -> Figure:
    """Seconds per mini-batch against the device, a panel per network: measured medians
    with their intervals, the paper's values hollow beside them, on a log axis so that
    the thread-scaling shapes compare."""
    style.apply()
    measured = numbers[numbers["status"] == "ok"]
    if measured.empty:
        return style.empty_figure(
            "no record of a Shi et al. (2016) network at the paper's batch size", width
        )
    names = list(dict.fromkeys(measured["network"]))
    width, nrows, ncols, height = style.panel_grid(len(names), width or style.DOUBLE_COLUMN)
    fig = Figure(figsize=(width, nrows * height), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    here, paper = style.colors(2)
    for ax, name in zip(axes, names, strict=False):
        rows = numbers[numbers["network"] == name]
        ok = rows[rows["status"] == "ok"]
        known = rows.dropna(subset=["published_s"])
        # Only devices with a number; CPU thread counts joined by a line, a GPU apart.
        devices = [
            device for device in rows["device"] if device in {*ok["device"], *known["device"]}
        ]
        at = {device: index for index, device in enumerate(devices)}
        for on_cpu in (True, False):
            part = ok[ok["threads"].notna() == on_cpu]
            ax.errorbar(
                part["device"].map(at),
                part["measured_s"],
                yerr=[
                    part["measured_s"] - part["measured_low_s"],
                    part["measured_high_s"] - part["measured_s"],
                ],
                marker="o",
                color=here,
                linestyle="-" if on_cpu else "none",
            )
        figures.hollow_busy(ax, ok["device"].map(at), ok["measured_s"], ok, here)
        ax.plot(
            known["device"].map(at),
            known["published_s"],
            marker="s",
            fillstyle="none",
            color=paper,
            linestyle="--",
        )
        ax.set_xticks(range(len(devices)), devices)
        ax.set_xlim(-0.5, len(devices) - 0.5)
        _log_axis(ax, [*ok["measured_low_s"], *ok["measured_high_s"], *known["published_s"]])
        network = next(network for network in NETWORKS if network.name == name)
        stand_in = "" if network.faithful else ", stand-in"
        ax.set_title(f"{name} (batch {network.batch}{stand_in})")
        ax.set_xlabel("Device")
        ax.set_ylabel("Time per mini-batch (s)")
    for ax in axes[len(names) :]:
        ax.set_visible(False)
    handles = [
        Line2D([], [], color=here, marker="o", label="measured here (median, 95% interval)"),
        Line2D(
            [],
            [],
            color=paper,
            marker="s",
            fillstyle="none",
            linestyle="--",
            label="Shi et al. (2016), Torch",
        ),
    ]
    if numbers["busy"].any():
        handles.append(figures.busy_handle())
    style.legend(fig, handles)
    return fig

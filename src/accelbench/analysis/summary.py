"""The report's first page: the answers before the details.

From the tidy table: first the answer to the project's question, does the GPU
pay off and by how much (or, on a run without a GPU, which devices to add to
the config to find out); then the fastest backend of every kernel cell on each device,
the fastest device of every training configuration and its speedup over the
baseline device, where a GPU starts to beat the CPU (kernels and data science
workloads, copies included), and every cell that did not run, was measured on
a busy machine or stayed less precise than asked, with why. Each section is a plain
table; the detailed tables and figures of the report carry the intervals and the
footnotes.
"""

from __future__ import annotations

import html
import math
from statistics import median

import pandas as pd

from accelbench.analysis import crossovers as crossing
from accelbench.analysis import tables, tidy
from accelbench.platform.devices import names_a_gpu

# Below this fraction of its best speed, the host's speed is stated in the summary.
SLOW_HOST = 0.9
STYLE = (
    "body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em}"
    "table{border-collapse:collapse;margin:0.5em 0 1.5em}"
    "th,td{padding:0.2em 0.6em;text-align:left;border-bottom:1px solid #ccc}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}"
    "p{overflow-wrap:anywhere}div.wide{overflow-x:auto}"
)


def _time(seconds: float) -> str:
    """A time in the largest of s, ms, µs, ns that keeps it at 1 or more."""
    if not math.isfinite(seconds):
        return tables.MISSING
    unit, factor = tables.readable_unit("s", [seconds])
    return f"{seconds / factor:.3g} {unit}"


def best_backends(frame: pd.DataFrame) -> pd.DataFrame:
    """Per kernel, dtype, size and device: the backend with the smallest median time."""
    rows = frame[(frame["experiment"] == "kernel") & (frame["status"] == "ok")]
    rows = rows[rows["time_median"].astype(float).notna()] if "time_median" in rows else rows[:0]
    keys = ["kernel", "dtype", "size", "device"]
    if rows.empty:
        return pd.DataFrame(columns=[*keys, "fastest backend", "time per call", "backends"])
    found = []
    for names, group in rows.groupby(keys, sort=False):
        best = group.loc[group["time_median"].astype(float).idxmin()]
        found.append(
            {
                **dict(zip(keys, names, strict=True)),
                "fastest backend": best["backend"],
                "time per call": _time(float(best["time_median"])),
                "backends": len(group),
            }
        )
    table = pd.DataFrame(found)
    order = {device: i for i, device in enumerate(tidy.natural_devices(table["device"]))}
    return table.sort_values(
        ["kernel", "dtype", "size", "device"],
        key=lambda c: c.map(order) if c.name == "device" else c,
    ).reset_index(drop=True)


def fastest_devices(frame: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per training configuration: the fastest device, its time per mini-batch and its
    speedup over `baseline` (the ratio of the medians; blank without a baseline record)."""
    keys = ["model", "precision", "strategy", "batch"]
    columns = [*keys, "fastest device", "time per batch", f"speedup over {baseline}"]
    rows = frame[(frame["experiment"] == "train") & (frame["status"] == "ok")]
    if "time_per_batch_median" not in rows or rows.empty:
        return pd.DataFrame(columns=columns)
    rows = rows[rows["time_per_batch_median"].astype(float).notna()]
    baseline_times = {
        tuple(row[key] for key in keys): float(row["time_per_batch_median"])
        for _, row in rows[rows["device"] == baseline].iterrows()
    }
    found = []
    for names, group in rows.groupby(keys, sort=True):
        best = group.loc[group["time_per_batch_median"].astype(float).idxmin()]
        time = float(best["time_per_batch_median"])
        reference = baseline_times.get(tuple(names))
        speedup = f"{reference / time:.2f}x" if reference else ""
        found.append(
            {
                **dict(zip(keys, names, strict=True)),
                "fastest device": best["device"],
                "time per batch": _time(time),
                f"speedup over {baseline}": speedup,
            }
        )
    return pd.DataFrame(found, columns=columns)


def crossovers(frame: pd.DataFrame) -> pd.DataFrame:
    """Where the best GPU result overtakes the best CPU result, copies included."""
    found = crossing.crossovers(frame, with_transfer=True)
    return pd.DataFrame(
        {
            "kernel or workload": found["kernel"].fillna(found["workload"]),
            "dtype": found["dtype"].fillna(""),
            "GPU faster from n ≈": found["crossover_size"].map(
                lambda n: f"{n:.3g}" if math.isfinite(n) else "never (up to the largest n)"
            ),
        }
    )


# The config section of each family whose devices say where a cell runs.
DEVICE_SECTIONS = {"kernel": "kernels", "datasci": "datasci", "train": "train"}
TRAIN_KEYS = ["model", "precision", "strategy", "batch"]


def headline(frame: pd.DataFrame) -> list[str]:
    """The answer to the question the project asks (does the GPU pay off, and by how much?)
    as far as this run measured it, one paragraph each; on a run without a GPU, what to
    add to the config to get it."""
    cells = frame[frame["experiment"].isin(DEVICE_SECTIONS)]
    on_gpu = cells["device"].map(names_a_gpu).astype(bool)
    if not on_gpu.any():
        lines = [
            f"{section}.devices: [{', '.join([*tidy.natural_devices(devices), 'cuda1'])}]"
            for family, section in DEVICE_SECTIONS.items()
            if len(devices := cells.loc[cells["experiment"] == family, "device"])
        ]
        return [
            "This run measured CPUs only, so it cannot tell where a GPU pays off. To find "
            "out, measure the same cells on a GPU too: add cuda1 to the devices in a config "
            f"file of your own ({'; '.join(lines)}) and run it on a machine with an NVIDIA "
            "GPU, or run config/cluster.yaml, which has them, on a cluster with a GPU "
            "partition (snakemake --executor slurm --configfile config/cluster.yaml)."
        ]
    gpu_cells = cells[on_gpu]
    if not (gpu_cells["status"] == "ok").any():
        reasons = gpu_cells["reason"].fillna(gpu_cells["status"]).value_counts()
        why = "; ".join(f"{reason} ({count})" for reason, count in reasons.items())
        return [
            f"No GPU cell ran in this run ({len(gpu_cells)} planned): {why}. Run the grid "
            "where its GPUs are to see where the GPU pays off."
        ]
    said = []
    found = crossing.crossovers(frame, with_transfer=True)
    if not found.empty:
        said.append(
            "Kernels and data science workloads: the GPU overtakes the CPU, copies "
            f"included, in {found['crossover_size'].notna().sum()} of the {len(found)} "
            "measured on both (from which size: below)."
        )
    speedups = _training_gpu_speedups(frame)
    if speedups:
        low, high = (f"{value:.3g}x" for value in (min(speedups), max(speedups)))
        factor = low if low == high else f"from {low} to {high} (median {median(speedups):.3g}x)"
        said.append(
            f"Training: the fastest GPU device is {factor} as fast as the fastest CPU device "
            f"in the {len(speedups)} configurations measured on both."
        )
    return said or [
        "A GPU ran, but nothing ran on both a CPU and a GPU to compare: list the CPU "
        "devices beside the GPU ones in the config."
    ]


def _training_gpu_speedups(frame: pd.DataFrame) -> list[float]:
    """Per training configuration measured on a CPU and on a GPU: the fastest CPU device's
    time per mini-batch over the fastest GPU device's."""
    rows = frame[(frame["experiment"] == "train") & (frame["status"] == "ok")]
    if rows.empty or "time_per_batch_median" not in rows:
        return []
    rows = rows.assign(
        gpu=rows["device"].map(names_a_gpu).astype(bool),
        time=rows["time_per_batch_median"].astype(float),
    )
    best = rows.groupby([*TRAIN_KEYS, "gpu"])["time"].min().unstack("gpu").dropna()
    if True not in best.columns or False not in best.columns:
        return []
    return list(best[False] / best[True])


def _flag(frame: pd.DataFrame, column: str) -> pd.Series:
    """A record flag (tidy column `busy`, `imprecise`) as plain booleans; absent: none."""
    if column not in frame:
        return pd.Series(False, index=frame.index)
    return frame[column].map(tidy.flagged).astype(bool)


def attention(frame: pd.DataFrame) -> pd.DataFrame:
    """Every record that did not run (with its reason), and every one measured busy, less
    precisely than asked (with the precision it reached and why it stopped there) or with
    an interval of a lower level than asked: the cells the tables mark, by name."""
    weak = frame.apply(tidy.weak_level, axis=1).notna() if len(frame) else False
    flagged = _flag(frame, "busy") | _flag(frame, "imprecise") | weak
    rows = frame[(frame["status"] != "ok") | flagged]
    ran = rows["status"] == "ok"
    reasons = rows["reason"].astype("object").where(~ran, rows.apply(tidy.flag_text, axis=1))
    return pd.DataFrame(
        {"record": rows["id"], "status": rows["status"], "why": reasons.fillna("")}
    ).sort_values("record", ignore_index=True)


def _section(title: str, table: pd.DataFrame, empty: str, note: str = "") -> str:
    heading = f"<h2>{html.escape(title)}</h2>\n"
    if table.empty:
        return heading + f"<p>{html.escape(empty)}</p>\n"
    if note:
        heading += f"<p>{html.escape(note)}</p>\n"
    header = "".join(f"<th>{html.escape(str(name))}</th>" for name in table.columns)
    body = "\n".join(
        "<tr>"
        + "".join(
            f'<td class="n">{value}</td>'
            if isinstance(value, int | float)
            else f"<td>{html.escape(str(value))}</td>"
            for value in row
        )
        + "</tr>"
        for row in table.itertuples(index=False)
    )
    # A table wider than the window (the report shows this page in a narrow frame) scrolls
    # in its own box.
    table_html = f"<table><thead><tr>{header}</tr></thead>\n<tbody>\n{body}\n</tbody></table>"
    return heading + f'<div class="wide">{table_html}</div>\n'


def summary_html(frame: pd.DataFrame, baseline: str) -> str:
    """The summary page: the answer to the headline question (or how to get it), then four
    sections, each a table or the sentence saying why not."""
    counts = frame["status"].value_counts()
    status = ", ".join(f"{count} {name}" for name, count in counts.items()) or "no records"
    answer = "".join(f"<p>{html.escape(paragraph)}</p>\n" for paragraph in headline(frame))
    sections = [
        f"<h2>Does the GPU pay off?</h2>\n{answer}",
        _section(
            "Fastest backend per kernel and device",
            best_backends(frame),
            "No kernel ran in this run.",
        ),
        _section(
            "Fastest device per training configuration",
            fastest_devices(frame, baseline),
            "No training experiment ran in this run.",
            f"A blank speedup: the configuration has no record on {baseline}.",
        ),
        _section(
            "Where the GPU starts to pay off (copies included)",
            crossovers(frame),
            "No kernel or data science workload ran on both a CPU and a GPU.",
        ),
        _section(
            "Cells that need attention",
            attention(frame),
            "Every record ran, none on a busy machine, all as precise as asked.",
        ),
    ]
    host = host_speed_text(frame)
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Summary</title>'
        f"<style>{STYLE}</style></head><body>\n<h1>Summary</h1>\n"
        f"<p>{len(frame)} records: {html.escape(status)}. Times are medians of the runs; "
        "the tables of the report give their intervals.</p>\n"
        + (f"<p>{html.escape(host)}</p>\n" if host else "")
        + "".join(sections)
        + "</body></html>\n"
    )


def host_speed_text(frame: pd.DataFrame) -> str | None:
    """The host's speed in one sentence where it ran the CPU measurements well below its best
    (a shared virtual machine's host often does, for the whole run: that is the machine's
    speed, stated once here rather than marked in every cell)."""
    if "host_speed_of_best" not in frame:
        return None
    fractions = frame["host_speed_of_best"].dropna().astype(float)
    if fractions.empty or fractions.median() >= SLOW_HOST:
        return None
    return (
        f"The host ran this machine's CPUs at about {fractions.median():.0%} of the speed it "
        "showed at its best (the probe of accelbench.measuring.host_speed, median over the CPU "
        "records): CPU numbers are this machine's at that speed; only cells measured in a "
        "stretch slower than around them are marked busy."
    )

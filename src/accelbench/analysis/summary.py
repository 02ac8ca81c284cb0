"""The report's first page: the answers before the details.

From the tidy table: first the answer to the project's question, does the GPU
pay off and by how much: quotable lines, the best GPU against the best CPU of the
same machine (accelbench.analysis.gpu_vs_cpu), then that table, the report's first,
and the GPU cells without a CPU counterpart (or, on a run without a GPU, which
devices to add to the config to find out). Then the fastest backend of every kernel
cell on each device, the fastest device of every training configuration and its
speedup over the baseline device, where the GPU overtakes the CPU of its host
(kernels and data science workloads, alone and with the copies, as far as the sizes
measured bracket it), the cells of work a committed reference (another machine) measured
as this run did, what the machine can resolve, and the cells that did not run, were
measured on a busy machine or are clearly less precise than the machine allows,
counted by why (each with its numbers in attention.csv). A run without a GPU quotes
what a reference's GPU did for its cells, named as another machine with its date and
commit. The sections after the answer are plain tables; the detailed tables and figures
of the report carry the intervals and the footnotes.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Sequence

import pandas as pd

from accelbench.analysis import crossovers as crossing_sizes
from accelbench.analysis import gpu_vs_cpu, machines, tables, tidy
from accelbench.families import FAMILIES
from accelbench.measuring import precision
from accelbench.measuring.statistics import CI_LEVEL
from accelbench.platform.devices import names_a_gpu

# Below this fraction of its best speed, the host's speed is stated in the summary.
SLOW_HOST = 0.9
# The cells that need attention: why, in the words the page groups them by, in its order.
NOT_RUN = {
    "failed": "did not run: failed",
    "oom": "did not run: out of memory",
    "unavailable": "did not run: not available on this machine",
    "skipped": "did not run: skipped",
    tidy.INVALID: "did not run: its record is invalid",
}
BUSY = "measured while the machine was busy (beside other load, or the host slowed its runs)"
WEAK = f"its interval has a level below {CI_LEVEL:.0%} (too few samples)"
ATTENTION_ORDER = (*NOT_RUN.values(), BUSY, precision.WIDE_TEXT, precision.SPAN_TEXT, WEAK)
# The full list's columns: tidy.precision_of's numbers under these names.
NUMBER_COLUMNS = {"half_width": "width", "span": "span", "typical_half_width": "typical"}
ATTENTION_COLUMNS = ["record", "status", "why", "detail", *NUMBER_COLUMNS]
ATTENTION_CSV = "attention.csv"
EXAMPLES = 2  # records the page names for each reason
KIND_NAMES = {"cpu": "CPUs", "cuda": "GPUs"}
STYLE = (
    "body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em}"
    "table{border-collapse:collapse;margin:0.5em 0 1.5em}"
    "th,td{padding:0.2em 0.6em;text-align:left;border-bottom:1px solid #ccc}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}"
    "p{overflow-wrap:anywhere}div.wide{overflow-x:auto}p.note{font-size:smaller}"
)
# The section of the cells of work this run shares with the committed references.
OTHER_MACHINES = "Other machines"
OTHER_COLUMNS = ["cell of work", "other machine", "there", "this run"]
OTHER_NOTE = (
    "The same cells of work measured on a committed reference (any implementation; the "
    "fastest on each device): another machine, at its own date and commit, so its times "
    "are that machine's, not a GPU beside this run's CPU."
)
THIS_RUN = "this run"
COPIES_EXCLUDED = next(iter(gpu_vs_cpu.COPIES))
# How many cells of work a reference's quote names before it points to OTHER_MACHINES.
QUOTED = 4
CROSSOVER_NOTE = (
    "At each size measured, the GPU or the CPU is ahead where the interval of the GPU's "
    "factor over the best CPU lies above or below 1; a size whose interval holds 1 is "
    "undecided. A crossover is named only between two measured sizes with a different side "
    "ahead."
)


def _time(seconds: float) -> str:
    """A time in the largest of s, ms, µs, ns that keeps it at 1 or more."""
    if not math.isfinite(seconds):
        return tables.MISSING
    unit, factor = tables.readable_unit("s", [seconds])
    return f"{seconds / factor:.3g} {unit}"


def best_backends(frame: pd.DataFrame) -> pd.DataFrame:
    """Per cell of work of a kernel (its dtype and size, gpu_vs_cpu.work_keys) and device:
    the backend with the smallest median time."""
    family = FAMILIES["kernel"]
    median = f"{family.time_metric}_median"
    rows = frame[(frame["experiment"] == family.name) & (frame["status"] == "ok")]
    rows = rows[rows[median].astype(float).notna()] if median in rows else rows[:0]
    keys = [*gpu_vs_cpu.work_keys(family), "device"]
    if rows.empty:
        return pd.DataFrame(columns=[*keys, "fastest backend", "time per call", "backends"])
    found = []
    for names, group in rows.groupby(keys, sort=False):
        best = group.loc[group[median].astype(float).idxmin()]
        found.append(
            {
                **dict(zip(keys, names, strict=True)),
                "fastest backend": best[gpu_vs_cpu.IMPLEMENTATION],
                "time per call": _time(float(best[median])),
                "backends": len(group),
            }
        )
    table = pd.DataFrame(found)
    order = {device: i for i, device in enumerate(tidy.natural_devices(table["device"]))}
    return table.sort_values(
        keys, key=lambda c: c.map(order) if c.name == "device" else c
    ).reset_index(drop=True)


def fastest_devices(frame: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per training configuration: the fastest device, its time per mini-batch and its
    speedup over `baseline` (the ratio of the medians; blank without a baseline record)."""
    family = FAMILIES["train"]
    keys, median = gpu_vs_cpu.work_keys(family), f"{family.time_metric}_median"
    columns = [*keys, "fastest device", "time per batch", f"speedup over {baseline}"]
    rows = frame[(frame["experiment"] == family.name) & (frame["status"] == "ok")]
    if median not in rows or rows.empty:
        return pd.DataFrame(columns=columns)
    rows = rows[rows[median].astype(float).notna()]
    baseline_times = {
        tuple(row[key] for key in keys): float(row[median])
        for _, row in rows[rows["device"] == baseline].iterrows()
    }
    found = []
    for names, group in rows.groupby(keys, sort=True):
        best = group.loc[group[median].astype(float).idxmin()]
        time = float(best[median])
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
    """Per kernel and dtype and per data science workload, what the sizes say of where the
    GPU overtakes the CPU of its host, for the work alone and with the GPU's copies."""
    said: dict[tuple, dict[str, str]] = {}
    for copies, with_transfer in gpu_vs_cpu.COPIES.items():
        for crossing in crossing_sizes.crossings(frame, with_transfer):
            key = (crossing.experiment, crossing.title, crossing.host)
            said.setdefault(key, {})[copies] = crossing.says
    hosts = len({host for _, _, host in said}) > 1
    return pd.DataFrame(
        [
            {
                "kernel or workload": f"{title} on {host}" if hosts else title,
                **{copies: texts.get(copies, "") for copies in gpu_vs_cpu.COPIES},
            }
            for (_, title, host), texts in said.items()
        ],
        columns=["kernel or workload", *gpu_vs_cpu.COPIES],
    )


# The config section of each family whose devices say where a cell runs.
DEVICE_SECTIONS = {"kernel": "kernels", "datasci": "datasci", "train": "train"}


def cpu_only_answer(cells: pd.DataFrame, references: Sequence[machines.Source] = ()) -> list[str]:
    """What a run that measured no GPU can say of the question (`cells`: the run's kernel,
    data science and training rows): what a committed reference's GPU did for the same cells
    of work (`reference_quote`: another machine, named with its date and commit), then which
    devices to add to the config to answer it on this machine."""
    lines = [
        f"{section}.devices: [{', '.join([*tidy.natural_devices(devices), 'cuda1'])}]"
        for family, section in DEVICE_SECTIONS.items()
        if len(devices := cells.loc[cells["experiment"] == family, "device"])
    ]
    advice = (
        "measure the same cells on a GPU too: add cuda1 to the devices in a config "
        f"file of your own ({'; '.join(lines)}) and run it on a machine with an NVIDIA "
        "GPU, or run config/cluster.yaml, which has them, on a cluster with a GPU "
        "partition (snakemake --executor slurm --configfile config/cluster.yaml)."
    )
    quoted = [line for source in references if (line := reference_quote(cells, source))]
    if not quoted:
        return [
            "This run measured CPUs only, so it cannot tell where a GPU pays off. To find "
            "out, " + advice
        ]
    return [
        "This run measured CPUs only. " + quoted[0],
        *quoted[1:],
        "Those are numbers of other machines. To see where a GPU pays off on this one, " + advice,
    ]


def _fastest(rows: pd.DataFrame) -> pd.Series:
    return rows.loc[rows["median"].astype(float).idxmin()]


def _own_factor(compared: pd.DataFrame, gpu: pd.Series, keys: list[str]) -> pd.Series | None:
    """The cell of work of `gpu` (a record of it) as its machine compared it with its own
    CPU (gpu_vs_cpu.compare, copies excluded), or None where it did not."""
    same = compared[compared[gpu_vs_cpu.HOST].map(str) == str(gpu["host"])]
    for key in keys:
        same = same[same[key].map(machines.key_text) == machines.key_text(gpu[key])]
    return same.iloc[0] if len(same) else None


def _quoted_cell(work: pd.DataFrame, compared: pd.DataFrame, keys: list[str]) -> str:
    """One cell of work in a quote: that GPU's time, this run's CPU's, and where that
    machine measured its own CPU too, its own factor (never a ratio of two machines)."""
    gpu = _fastest(work[(work["source"] == 1) & work["device"].map(names_a_gpu).astype(bool)])
    cpu = _fastest(work[work["source"] == 0])
    text = (
        f"{gpu['label']}: that GPU ({gpu_vs_cpu.implementation(gpu)}) took "
        f"{_time(float(gpu['median']))}, this run's CPU ({gpu_vs_cpu.implementation(cpu)}) "
        f"{_time(float(cpu['median']))}"
    )
    own = _own_factor(compared, gpu, keys)
    return text + (f"; on that machine {_who_is_faster(own)}" if own is not None else "")


def reference_quote(cells: pd.DataFrame, reference: machines.Source) -> str | None:
    """What `reference`'s GPU did for the cells of work (any implementation) this run
    measured, beside this run's CPU: "On another machine — NVIDIA H200 on host vm (Intel
    Xeon), measured 2026-11-28 at commit 302a446 (reference/nvidia-h200) — the same cells:
    ..."; None where its GPU measured none of them."""
    joined = machines.join([machines.Source(THIS_RUN, cells), reference], gpu_vs_cpu.work_keys)
    shared = joined.cells
    on_gpu = shared["device"].map(names_a_gpu).astype(bool) & (shared["source"] == 1)
    works = list(dict.fromkeys(shared.loc[on_gpu, "work"]))
    if not works:
        return None
    compared = gpu_vs_cpu.compare(reference.frame).cells
    compared = compared[(compared["copies"] == COPIES_EXCLUDED) & (compared["status"] == "ok")]
    keys = {
        name: gpu_vs_cpu.work_keys(family) for name, family in gpu_vs_cpu.work_families().items()
    }
    said = [
        _quoted_cell(work, compared, keys[work["experiment"].iloc[0]])
        for work in (shared[shared["work"] == name] for name in works[:QUOTED])
    ]
    more = len(works) - QUOTED
    theirs = shared[on_gpu]
    commit = machines.commits(theirs)
    return (
        f"On another machine — {machines.machine_text(theirs)}, measured "
        f"{machines.dates(theirs)}{f' at commit {commit}' if commit else ''} "
        f"({reference.name}) — the same cells: {'. '.join(said)}"
        + (f". And {more} more, under {OTHER_MACHINES}." if more > 0 else ".")
    )


def _device_times(rows: pd.DataFrame) -> str:
    """Each device's fastest record of a cell of work: "cuda1 (torch) 49.5 µs"."""
    said = []
    for device in tidy.natural_devices(rows["device"]):
        best = _fastest(rows[rows["device"] == device])
        code = best.get(gpu_vs_cpu.IMPLEMENTATION)
        said.append(f"{device}{f' ({code})' if pd.notna(code) else ''} {_time(best['median'])}")
    return "; ".join(said)


def other_machines(
    frame: pd.DataFrame, references: Sequence[machines.Source]
) -> tuple[pd.DataFrame, list[str]]:
    """(table, notes): per committed reference, the cells of work (any implementation) it
    measured as this run did, with each side's devices and times; the notes name each such
    reference's machine, date and commit."""
    rows, notes = [], []
    for reference in references:
        joined = machines.join([machines.Source(THIS_RUN, frame), reference], gpu_vs_cpu.work_keys)
        theirs = joined.cells[joined.cells["source"] == 1]
        if theirs.empty:
            continue
        commit = machines.commits(theirs)
        notes.append(
            f"{reference.name}: {machines.machine_text(theirs)}, measured "
            f"{machines.dates(theirs)}{f' at commit {commit}' if commit else ''}."
        )
        for label, work in joined.cells.groupby("label", sort=False):
            rows.append(
                {
                    "cell of work": label,
                    "other machine": reference.name,
                    "there": _device_times(work[work["source"] == 1]),
                    "this run": _device_times(work[work["source"] == 0]),
                }
            )
    return pd.DataFrame(rows, columns=OTHER_COLUMNS), notes


def none_shared_text(references: Sequence[machines.Source]) -> str:
    """Why the section of other machines has no row: no reference, or none that shares a cell
    of work with this run (and which cells each has)."""
    if not references:
        return (
            "No committed reference to set beside this run: the workflow's reference/ holds none."
        )
    have = [
        f"{reference.name} has {machines.named(list(dict.fromkeys(cells['label'])))}"
        for reference in references
        if len(cells := machines.measured(reference, keys_of=gpu_vs_cpu.work_keys))
    ]
    return "No reference shares a cell of work with this run. " + (
        f"{'. '.join(have)}." if have else "The references hold no cell of work with a time."
    )


def headline(frame: pd.DataFrame, references: Sequence[machines.Source] = ()) -> list[str]:
    """The answer to the question the project asks (does the GPU pay off, and by how much?)
    as far as this run measured it: quotable lines, the GPU against the best CPU of the same
    machine (`quotes`); on a run without a GPU, what the GPU of a committed reference did
    for the same cells (`references`) and what to add to the config to get it here."""
    cells = frame[frame["experiment"].isin(DEVICE_SECTIONS)]
    on_gpu = cells["device"].map(names_a_gpu).astype(bool)
    if not on_gpu.any():
        return cpu_only_answer(cells, references)
    gpu_cells = cells[on_gpu]
    if not (gpu_cells["status"] == "ok").any():
        reasons = gpu_cells["reason"].fillna(gpu_cells["status"]).value_counts()
        why = "; ".join(f"{reason} ({count})" for reason, count in reasons.items())
        return [
            f"No GPU cell ran in this run ({len(gpu_cells)} planned): {why}. Run the grid "
            "where its GPUs are to see where the GPU pays off."
        ]
    return quotes(gpu_vs_cpu.compare(frame).cells) or [
        "A GPU ran, but no cell of work ran on both the GPU and the CPU of the same host, "
        "so nothing is compared: list CPU devices beside the GPU ones in the config, so "
        "that the same machine measures both."
    ]


def _times(median: float, low: float, high: float) -> str:
    """A factor as a sentence quotes it: `38x [35, 41]`, with the digits its interval
    supports."""
    number, _, interval = tables.format_with_ci(median, low, high).partition(" ")
    return f"{number}x {interval}"


def _who_is_faster(cell: pd.Series) -> str:
    """Which side is faster by how much, from a compared cell's factor (CPU time / GPU
    time) and its interval; a factor whose interval holds 1 decides nothing."""
    median, low, high = (float(cell[field]) for field in ("median", "ci_low", "ci_high"))
    who = crossing_sizes.side(low, high)
    gpu, cpu = f"the GPU ({cell['gpu']})", f"the best CPU ({cell['cpu']})"
    if who == crossing_sizes.GPU:
        return f"{gpu} is {_times(median, low, high)} faster than {cpu}"
    if who == crossing_sizes.CPU:
        return (
            f"the CPU ({cell['cpu']}) is {_times(1 / median, 1 / high, 1 / low)} faster than "
            f"the best GPU ({cell['gpu']})"
        )
    return f"undecided: {gpu} runs it {_times(median, low, high)} as fast as {cpu}"


def _with_copies(alone: pd.Series, copied: pd.Series) -> str:
    """The clause a quote adds for the copies included, or "" where they were not timed."""
    if copied["status"] != "ok":
        return ""
    median, low, high = (float(copied[field]) for field in ("median", "ci_low", "ci_high"))
    who = crossing_sizes.side(low, high)
    gpu = f"the GPU ({copied['gpu']})" if copied["gpu"] != alone["gpu"] else "the GPU"
    if who == crossing_sizes.GPU:
        return f"; copies included, {gpu} is {_times(median, low, high)} faster"
    if who == crossing_sizes.CPU:
        return f"; copies included, the CPU is {_times(1 / median, 1 / high, 1 / low)} faster"
    return f"; copies included, undecided ({_times(median, low, high)})"


def _ends(rows: pd.DataFrame) -> set[int]:
    """The rows of the smallest and the largest size (the first row, where none has one)."""
    sizes = rows[crossing_sizes.SIZE].astype(float)
    if sizes.isna().all():
        return {rows.index[0]}
    return {sizes.idxmin(), sizes.idxmax()}


def _telling(alone: pd.DataFrame) -> list[int]:
    """The most telling of the compared cells: of each kernel or workload (alike in all but
    the size and the CPU's baseline parameters) the smallest and the largest size in the
    CPU's baseline, and the largest factor at the largest size where that is in another."""
    names = [
        name
        for name in gpu_vs_cpu.cell_params()
        if name != crossing_sizes.SIZE and name not in gpu_vs_cpu.CPU_BASELINE
    ]
    picked = set()
    for _, group in alone.groupby(["experiment", gpu_vs_cpu.HOST, *names], dropna=False):
        base = group[group.apply(gpu_vs_cpu.is_cpu_baseline, axis=1)]
        picked |= _ends(base) if len(base) else set()
        sizes = group[crossing_sizes.SIZE].astype(float)
        largest = group[sizes.isna() | sizes.eq(sizes.max())]
        picked.add(largest["median"].astype(float).idxmax())
    return sorted(picked)


def quotes(cells: pd.DataFrame) -> list[str]:
    """Quotable lines, the most telling few (`_telling`): "matmul, float32, n=4096: the
    GPU (torch) is 38x [35, 41] faster than the best CPU (numpy, 16 threads); copies
    included, ...", in the order of the table."""
    alone_name, copied_name = gpu_vs_cpu.COPIES
    alone = cells[(cells["copies"] == alone_name) & (cells["status"] == "ok")]
    copied = cells[cells["copies"] == copied_name].set_index("label")
    lines = []
    for index in _telling(alone):
        cell = alone.loc[index]
        line = f"{cell['label']}: {_who_is_faster(cell)}"
        line += _with_copies(cell, copied.loc[cell["label"]])
        lines.append(line + (f" ({cell['baseline']})" if cell["baseline"] else "") + ".")
    return lines


def unpaired_text(unpaired: pd.DataFrame) -> str:
    """The GPU cells not compared, by why: the cells to measure on the host's CPU too."""
    hosts = unpaired[gpu_vs_cpu.HOST].nunique(dropna=False) > 1
    labels = unpaired["label"] + (" on " + unpaired[gpu_vs_cpu.HOST].astype(str) if hosts else "")
    parts = [
        f"{reason} ({len(group)}): {'; '.join(group)}"
        for reason, group in labels.groupby(unpaired["reason"], sort=False)
    ]
    count = len(unpaired)
    cells = f"{count} GPU cell{'s' if count != 1 else ''}"
    return (
        f"The {cells} without the same cell on the CPU of the same host, not compared: "
        f"{'. '.join(parts)}. Measure them on that CPU too to see whether the GPU pays off "
        "for them."
    )


def _number(value: float) -> str:
    """Two significant digits, without an exponent: 19, 1.9, 0.19, 134."""
    if not math.isfinite(value) or value <= 0:
        return f"{value:g}"
    return f"{value:.{max(0, 1 - math.floor(math.log10(value)))}f}"


def _share(width: float) -> str:
    """A relative half-width in words: ±19%, ±1.9%; from 100% up, as a factor."""
    return f"a factor of {_number(1 + width)}" if width >= 1 else f"±{_number(100 * width)}%"


def resolution_text(frame: pd.DataFrame) -> str | None:
    """What this machine can resolve, stated once: the typical half-width of the 95%
    intervals of its cells, per device kind (tidy.resolutions; a GPU resolves far finer
    than the CPUs of its host); None where too few cells of any kind tell it."""
    found = tidy.resolutions(frame).reset_index()
    if found.empty:
        return None
    named = found["kind"].duplicated(keep=False)  # a kind of several models names each
    parts = [
        f"{_share(row.typical)} on its {row.model + ' ' if model else ''}"
        f"{KIND_NAMES.get(row.kind, row.kind)}"
        for row, model in zip(found.itertuples(), named, strict=True)
    ]
    spread = " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)
    return (
        f"On this machine an independent rerun moves a median by up to {spread} (the typical "
        "spread of its cells, 95%); differences smaller than that are not decided here."
    )


def _numbers_text(judged: pd.Series) -> str:
    """A judged interval in words: how far it reaches, and the typical one beside it."""
    text = (
        f"its 95% interval reaches {_share(judged['width'])} from its median "
        f"(high / low {_number(judged['span'])})"
    )
    if pd.notna(judged["typical"]):
        text += f"; the typical one of its kind here, {_share(judged['typical'])}"
    return text


def _busy_text(row: pd.Series) -> str:
    """What the machine did beside a busy measurement: other processes' CPUs, runs the
    host slowed."""
    others, slowed = row.get("other_cpus"), row.get("host_slowed_runs")
    parts = [f"{others:.2f} CPUs busy elsewhere"] if pd.notna(others) else []
    if pd.notna(slowed) and slowed:
        parts.append(f"the host slowed {int(slowed)} of its runs")
    return "; ".join(parts)


def _reasons(row: pd.Series, judged: pd.DataFrame) -> list[tuple[str, str]]:
    """(why, detail) for each reason a record needs a second look; none for a cell that
    ran, busy nowhere and precise."""
    if row["status"] != "ok":
        why = NOT_RUN.get(row["status"], f"did not run: {row['status']}")
        return [(why, row["reason"] if pd.notna(row["reason"]) else "")]
    found = []
    if tidy.flagged(row.get("busy")):
        found.append((BUSY, _busy_text(row)))
    if row.name in judged.index and judged.at[row.name, "reason"]:
        found.append((judged.at[row.name, "reason"], _numbers_text(judged.loc[row.name])))
    if (level := tidy.weak_level(row)) is not None:
        found.append((WEAK, f"level {level:.0%}"))
    return found


def attention(frame: pd.DataFrame) -> pd.DataFrame:
    """Every record that needs a second look, once for each reason (`why`, in the words
    the page groups them by, with its `detail`): it did not run, ran on a busy machine,
    its interval is clearly wider than this machine allows (with its half-width, span
    and the typical half-width of its kind, tidy.precision_of) or of a lower level than
    asked. The full list beside the summary (attention.csv)."""
    judged = tidy.precision_of(frame)
    busy = frame["busy"].map(tidy.flagged) if "busy" in frame else False
    weak = frame.apply(tidy.weak_level, axis=1).notna() if len(frame) else False
    marked = judged["reason"].notna().reindex(frame.index, fill_value=False)
    looked_at = frame[(frame["status"] != "ok") | busy | marked | weak]
    rows = [
        {
            "record": row["id"],
            "status": row["status"],
            "why": why,
            "detail": detail,
            **{
                column: judged.at[index, name] if index in judged.index else None
                for column, name in NUMBER_COLUMNS.items()
            },
        }
        for index, row in looked_at.iterrows()
        for why, detail in _reasons(row, judged)
    ]
    found = pd.DataFrame(rows, columns=ATTENTION_COLUMNS)
    return found.sort_values("record", kind="stable", ignore_index=True)


def attention_groups(listed: pd.DataFrame) -> pd.DataFrame:
    """The records of `attention` grouped by why, with how many and the first few: one
    line per reason, at most len(ATTENTION_ORDER)."""
    groups = listed.groupby("why", sort=False)["record"]
    found = pd.DataFrame(
        {
            "why": list(groups.groups),
            "cells": groups.size().to_numpy(),
            "for example": groups.agg(
                lambda records: (
                    ", ".join(records.iloc[:EXAMPLES])
                    + (", ..." if len(records) > EXAMPLES else "")
                )
            ).to_numpy(),
        }
    )
    order = {why: position for position, why in enumerate(ATTENTION_ORDER)}
    place = found["why"].map(lambda why: order.get(why, len(order)))
    return found.iloc[place.argsort(kind="stable")].reset_index(drop=True)


def write_attention(frame: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """The full list of the cells that need attention (`attention`), as CSV."""
    attention(frame).to_csv(path, index=False)


def _attention_section(frame: pd.DataFrame) -> str:
    """The cells that need attention, grouped by why with a count each; the full list is
    the CSV beside the page."""
    listed = attention(frame)
    heading = "<h2>Cells that need attention</h2>\n"
    if listed.empty:
        return heading + (
            "<p>Every record ran, none on a busy machine, none less precise than this "
            "machine allows.</p>\n"
        )
    cells, records = listed["record"].nunique(), len(frame)
    note = (
        f"{cells} of {records} records, counted under each reason they have; every one "
        f"with its numbers in {ATTENTION_CSV} beside this page. An interval is marked "
        f"imprecise ({tables.IMPRECISE_MARK} in the tables, hollow in the figures) only where "
        f"it is more than {precision.MARGIN:g} times as wide as the typical one of its device "
        "kind here or, where too few cells of its kind tell that, spans more than a factor of "
        f"{precision.MOST_SPAN:g}."
    )
    return heading + _paragraphs([note]) + _table_html(attention_groups(listed))


def _table_html(table: pd.DataFrame) -> str:
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
    return f'<div class="wide">{table_html}</div>\n'


def _section(title: str, table: pd.DataFrame, empty: str, note: str = "") -> str:
    heading = f"<h2>{html.escape(title)}</h2>\n"
    if table.empty:
        return heading + f"<p>{html.escape(empty)}</p>\n"
    if note:
        heading += f"<p>{html.escape(note)}</p>\n"
    return heading + _table_html(table)


def _paragraphs(texts: list[str], kind: str = "") -> str:
    opening = f'<p class="{kind}">' if kind else "<p>"
    return "".join(f"{opening}{html.escape(text)}</p>\n" for text in texts)


def _answer(frame: pd.DataFrame, references: Sequence[machines.Source]) -> str:
    """The page's first section: the quotable lines, the GPU against the CPU table (the
    report's first table) with its notes, and the GPU cells it could not compare."""
    table, notes = tables.headline_table(frame)
    unpaired = gpu_vs_cpu.compare(frame).unpaired
    shown = _table_html(table.reset_index()) + _paragraphs(notes, "note") if len(table) else ""
    return (
        "<h2>Does the GPU pay off?</h2>\n"
        + _paragraphs(headline(frame, references))
        + shown
        + (_paragraphs([unpaired_text(unpaired)]) if len(unpaired) else "")
    )


def not_drawn_section(not_drawn: Sequence[str]) -> str:
    """The figures the grid does not fill where their tables are made, each with why
    (accelbench.analysis.outputs.not_drawn); nothing where every one is drawn."""
    if not not_drawn:
        return ""
    return "<h2>Figures not drawn</h2>\n" + _paragraphs(list(not_drawn))


def summary_html(
    frame: pd.DataFrame,
    baseline: str,
    references: Sequence[machines.Source] = (),
    not_drawn: Sequence[str] = (),
) -> str:
    """The summary page: the answer to the headline question (or how to get it, and what the
    committed `references` measured of the same cells), then five sections, each a table or
    the sentence saying why not, and the figures `not_drawn` with why."""
    shared, machine_notes = other_machines(frame, references)
    counts = frame["status"].value_counts()
    status = ", ".join(f"{count} {name}" for name, count in counts.items()) or "no records"
    sections = [
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
            "Where the GPU overtakes the CPU of its host",
            crossovers(frame),
            "No kernel or data science workload ran on both a GPU and the CPU of its host.",
            CROSSOVER_NOTE,
        ),
        _section(
            OTHER_MACHINES,
            shared,
            none_shared_text(references),
            " ".join([OTHER_NOTE, *machine_notes]),
        ),
    ]
    host = host_speed_text(frame)
    resolution = resolution_text(frame)
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Summary</title>'
        f"<style>{STYLE}</style></head><body>\n<h1>Summary</h1>\n"
        + _answer(frame, references)
        + f"<p>{len(frame)} records: {html.escape(status)}. Times are medians of the runs; "
        "the tables of the report give their intervals.</p>\n"
        + (f"<p>{html.escape(host)}</p>\n" if host else "")
        + (f"<p>{html.escape(resolution)}</p>\n" if resolution else "")
        + "".join(sections)
        + not_drawn_section(not_drawn)
        + _attention_section(frame)
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

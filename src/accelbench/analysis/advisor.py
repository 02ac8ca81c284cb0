"""Time to result: the expected queue wait in a partition plus the run time there.

For an experiment, every measured variant of it (device, backend) is an
option: it runs in the partition its device maps to (config `slurm:`), asks
for the resources the workflow would ask for (config `resources:`), and runs
for its measured median time, times the number of repetitions asked for. For
a bare job size, each partition is an option with the same request and, when
given, a run time per partition. The expected wait comes from
queue_wait.forecast; the option that finishes first (median wait + run time)
wins. An option whose run time exceeds its time limit would be killed, so it
ranks after the ones that fit. Partitions named for a job size must have jobs
in the accounting data: the error lists the partitions it has.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from accelbench import cluster
from accelbench.analysis import queue_wait, sacct
from accelbench.devices import parse_device

# The measured time of one unit of work per experiment family, best first.
RUN_TIME_METRICS = {
    "kernel": ("end_to_end_time_median", "time_median"),  # copies included where measured
    "train": ("time_per_batch_median",),
}
RESOURCE_FAMILY = {"kernel": "kernels", "train": "train"}
COLUMNS = (
    "partition",
    "option",
    "run_s",
    "limit_s",
    "wait_median_s",
    "wait_q1_s",
    "wait_q3_s",
    "wait_jobs",
    "wait_basis",
    "total_median_s",
    "total_q1_s",
    "total_q3_s",
    "fits_limit",
    "best",
)


class AdviceError(ValueError):
    """The question cannot be answered from these records and accounting data."""


@dataclass(frozen=True)
class Option:
    partition: str
    label: str  # what runs: device and backend, or "job"
    run_s: float  # NaN: not known
    request: queue_wait.Request


def _run_time(row: pd.Series) -> tuple[float, str]:
    for column in RUN_TIME_METRICS[row["experiment"]]:
        value = row.get(column)
        if value is not None and pd.notna(value):
            return float(value), column.removesuffix("_median")
    return math.nan, ""


def experiment_options(
    frame: pd.DataFrame, pattern: str, config: dict[str, Any], count: int
) -> list[Option]:
    """One option per record whose id matches the glob `pattern`.

    e.g. 'kernels/matmul/*/*/float32/n4096': every device and backend of that cell.
    """
    pattern = pattern.removeprefix("results/").removesuffix(".json")
    matches = frame[frame["id"].map(lambda name: fnmatch.fnmatchcase(name, pattern))]
    if matches.empty:
        raise AdviceError(f"no record matches {pattern!r}")
    families = set(matches["experiment"])
    if not families <= set(RUN_TIME_METRICS):
        raise AdviceError(
            f"{pattern!r} matches {sorted(families)} records; advice needs one of "
            f"{sorted(RUN_TIME_METRICS)}"
        )
    ran = matches[matches["status"] == "ok"]
    if ran.empty:
        raise AdviceError(
            f"no record matching {pattern!r} ran: "
            + "; ".join(f"{row.id}: {row.status}" for row in matches.itertuples())
        )
    options = []
    for _, row in ran.iterrows():
        device = parse_device(row["device"])
        if not cluster.partition(device, config):
            continue  # a GPU record on a site without a GPU partition: nowhere to submit it
        resources = config["resources"][RESOURCE_FAMILY[row["experiment"]]]
        seconds, metric = _run_time(row)
        label = row["device"] + (f" {row['backend']}" if pd.notna(row.get("backend")) else "")
        options.append(
            Option(
                partition=cluster.partition(device, config),
                label=f"{label} ({metric} x {count})",
                run_s=seconds * count,
                request=queue_wait.Request(
                    cpus=cluster.cpus_per_task(device, config),
                    mem_gb=resources["mem_mb"] / 1024,
                    hours=resources["runtime"] / 60,
                ),
            )
        )
    return options


def require_jobs_in(jobs: pd.DataFrame, partitions: list[str]) -> None:
    """Partitions named for a comparison must have jobs in the accounting data.

    Without any job there is no wait to forecast, and a misspelt name or a dump
    of other partitions would otherwise give a table of unknowns and no error.
    """
    present = sorted(set(jobs["partition"]))
    missing = [name for name in partitions if name not in present]
    if missing:
        raise AdviceError(
            f"partition(s) {', '.join(missing)} have no job in the accounting data; "
            f"partitions with jobs: {', '.join(present) or 'none'}"
        )


def job_size_options(
    partitions: list[str],
    cpus: int | None,
    mem: str | None,
    time_limit: str | None,
    runtimes: list[str],
) -> list[Option]:
    """One option per partition for a job size; `runtimes` are 'PARTITION=TIME' (Slurm format)."""
    if cpus is None or mem is None or time_limit is None:
        raise AdviceError("give an experiment, or a job size: CPUs, memory and time limit")
    try:
        request = queue_wait.Request(
            cpus=cpus,
            mem_gb=sacct.parse_memory(mem, cpus, 1) or math.nan,
            hours=(sacct.parse_duration(time_limit) or math.nan) / 3600,
        )
        malformed = [item for item in runtimes if "=" not in item]
        if malformed:
            raise ValueError(f"run time {malformed[0]!r} is not PARTITION=TIME")
        given = dict(item.split("=", 1) for item in runtimes)
        run = {name: sacct.parse_duration(text) for name, text in given.items()}
    except ValueError as err:
        raise AdviceError(f"job size: {err}") from None
    unknown = sorted(set(run) - set(partitions))
    if unknown:
        raise AdviceError(f"run time given for {unknown}, not among partitions {partitions}")
    if not math.isfinite(request.mem_gb * request.hours):
        raise AdviceError("job size: memory and time limit must be finite amounts")
    return [
        Option(name, "job", math.nan if run.get(name) is None else run[name], request)
        for name in partitions
    ]


def rank(
    jobs: pd.DataFrame,
    options: list[Option],
    cpu_edges: list[float],
    gb_edges: list[float],
    min_jobs: int,
) -> pd.DataFrame:
    """The options with their expected wait and time to result, the one to pick first."""
    rows = []
    for option in options:
        wait = queue_wait.forecast(
            jobs, option.partition, option.request, cpu_edges, gb_edges, min_jobs
        )
        run = 0.0 if math.isnan(option.run_s) else option.run_s
        limit = option.request.hours * 3600
        rows.append(
            {
                "partition": option.partition,
                "option": option.label,
                "run_s": option.run_s,
                "limit_s": limit,
                "wait_median_s": wait.median_s,
                "wait_q1_s": wait.q1_s,
                "wait_q3_s": wait.q3_s,
                "wait_jobs": wait.jobs,
                "wait_basis": wait.basis + ("" if wait.enough else f" (fewer than {min_jobs})"),
                "total_median_s": wait.median_s + run,
                "total_q1_s": wait.q1_s + run,
                "total_q3_s": wait.q3_s + run,
                "fits_limit": run <= limit,
            }
        )
    table = pd.DataFrame(rows, columns=list(COLUMNS[:-1]))
    table = table.sort_values(
        ["fits_limit", "total_median_s", "total_q3_s"],
        ascending=[False, True, True],
        na_position="last",
        kind="stable",
    ).reset_index(drop=True)
    table["best"] = False
    if not table.empty and table.loc[0, "fits_limit"] and pd.notna(table.loc[0, "total_median_s"]):
        table.loc[0, "best"] = True
    return table


def display(table: pd.DataFrame) -> pd.DataFrame:
    fmt = queue_wait.format_duration
    return pd.DataFrame(
        {
            "Partition": table["partition"],
            "Runs": table["option"],
            "Run time": [
                ("not given" if math.isnan(run) else fmt(run))
                + ("" if fits else f" > limit {fmt(limit)}")
                for run, limit, fits in zip(
                    table["run_s"], table["limit_s"], table["fits_limit"], strict=True
                )
            ],
            "Wait (quartiles)": [
                f"{fmt(m)} ({fmt(a)} – {fmt(b)})"
                for m, a, b in zip(
                    table["wait_median_s"], table["wait_q1_s"], table["wait_q3_s"], strict=True
                )
            ],
            "Wait from": [
                f"{basis}, n = {jobs}"
                for basis, jobs in zip(table["wait_basis"], table["wait_jobs"], strict=True)
            ],
            "Result after (quartiles)": [
                f"{fmt(m)} ({fmt(a)} – {fmt(b)})"
                for m, a, b in zip(
                    table["total_median_s"], table["total_q1_s"], table["total_q3_s"], strict=True
                )
            ],
        }
    )


def verdict(table: pd.DataFrame) -> str:
    if table.empty or not table["best"].any():
        return "No option can be ranked: no queue-wait data for a partition, or no option fits."
    best = table.iloc[0]
    text = (
        f"First result: partition {best['partition']} ({best['option']}), after about "
        f"{queue_wait.format_duration(best['total_median_s'])} (median wait "
        f"{queue_wait.format_duration(best['wait_median_s'])} + run time)."
    )
    others = table[(table["partition"] != best["partition"]) & table["total_median_s"].notna()]
    if not others.empty:
        runner_up = others.iloc[0]
        text += (
            f" Next: {runner_up['partition']} ({runner_up['option']}), after about "
            f"{queue_wait.format_duration(runner_up['total_median_s'])}."
        )
    return text

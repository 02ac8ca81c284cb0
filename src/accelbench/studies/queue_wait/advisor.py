"""Time to result: the expected queue wait in a partition plus the run time there.

For an experiment, every measured variant of it (device, backend) is an
option: it runs in the partition its device maps to (config `slurm:`) and asks
for the resources the workflow would ask for (config `resources:`). Its run
time is what a job costs: the measured wall time of the experiment (its
record's start to finish: backend imports, set-up, warm-up and all its
repetitions) plus the compute asked for, the measured median time of one unit
of work times the number of units. Only the interpreter's start and the batch
system's job start come on top. Where a record has no start and finish
time, the run time is the compute alone, and the table and the verdict say so.
A record that did not run (unavailable, failed, ...) and a device with no
partition are listed with the reason, never dropped. For a bare job size, each
partition is an option with the same request and, when given, a run time per
partition; without one, the ranking is by queue wait alone and the verdict
says so. The expected wait comes from queue_wait.forecast; the option that
finishes first (median wait + run time) wins. An option whose run time exceeds
its time limit would be killed, so it ranks after the ones that fit, and one
without a run time ranks after the ones with. Partitions named for a job size
must have jobs in the accounting data: the error lists the partitions it has.
"""

from __future__ import annotations

import difflib
import fnmatch
import heapq
import math
from dataclasses import dataclass

import pandas as pd

from accelbench.families.base import Config
from accelbench.platform.devices import parse_device
from accelbench.slurm import resources as cluster
from accelbench.studies.queue_wait import sacct
from accelbench.studies.queue_wait import wait as queue_wait

# The measured time of one unit of work per experiment family, best first.
RUN_TIME_METRICS = {
    "kernel": ("end_to_end_time_median", "time_median"),  # copies included where measured
    "train": ("time_per_batch_median",),
}
RESOURCE_FAMILY = {"kernel": "kernels", "train": "train"}
# What an option's run time counts.
JOB_AND_COMPUTE = "job wall time + compute"
COMPUTE_ONLY = "compute only"
GIVEN = "given"
NOT_GIVEN = "not given"
COLUMNS = (
    "partition",
    "option",
    "compute_s",
    "compute_units",
    "job_wall_s",
    "run_s",
    "run_counts",
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
IDS_SHOWN = 5


class AdviceError(ValueError):
    """The question cannot be answered from these records and accounting data."""


@dataclass(frozen=True)
class Option:
    partition: str
    label: str  # what runs: device and backend, or "job"
    run_s: float  # the whole job; NaN: not known
    request: queue_wait.Request
    run_counts: str  # JOB_AND_COMPUTE, COMPUTE_ONLY, GIVEN or NOT_GIVEN
    compute_s: float = math.nan  # experiments: the units of work asked for
    compute_units: str = ""  # experiments: what compute_s counts, e.g. "1000 x time"
    job_wall_s: float = math.nan  # experiments: the measured job, start to finish


@dataclass(frozen=True)
class NotRanked:
    """A record that gives no run time, or a device the site has no partition for."""

    partition: str  # empty: no partition for the device
    label: str
    why: str

    def __str__(self) -> str:
        return f"{self.partition or 'no partition'}: {self.label}: {self.why}"


def _run_time(row: pd.Series) -> tuple[float, str]:
    for column in RUN_TIME_METRICS[row["experiment"]]:
        value = row.get(column)
        if value is not None and pd.notna(value):
            return float(value), column.removesuffix("_median")
    return math.nan, ""


def job_wall_time(row: pd.Series) -> float:
    """Seconds from the record's start to its finish; NaN where it has no such times."""
    started, finished = (
        pd.to_datetime(row.get(column), utc=True, errors="coerce")
        for column in ("started", "finished")
    )
    if pd.isna(started) or pd.isna(finished) or finished < started:
        return math.nan
    return (finished - started).total_seconds()


def _label(row: pd.Series) -> str:
    backend = row.get("backend")
    return row["device"] + (f" {backend}" if backend is not None and pd.notna(backend) else "")


def closest_ids(ids: list[str], pattern: str, shown: int = IDS_SHOWN) -> list[str]:
    """The ids that share the longest leading part of the glob, the most alike first:
    what the user probably meant to match."""
    parts = pattern.split("/")
    near = ids
    for kept in range(len(parts) - 1, 0, -1):
        prefix = "/".join(parts[:kept]) + "/*"
        matching = [name for name in ids if fnmatch.fnmatchcase(name, prefix)]
        if matching:
            near = matching
            break
    return heapq.nsmallest(
        shown,
        near,
        key=lambda name: (-difflib.SequenceMatcher(None, name, pattern).ratio(), name),
    )


def _no_match(frame: pd.DataFrame, pattern: str, source: str) -> AdviceError:
    ids = sorted(frame["id"].astype(str))
    if not ids:
        return AdviceError(f"no record matches {pattern!r}: {source} has no records")
    return AdviceError(
        f"no record matches {pattern!r} in {source} ({len(ids)} records); "
        f"closest ids: {', '.join(closest_ids(ids, pattern))}"
    )


def _why(row: pd.Series) -> str:
    reason = row.get("reason")
    return row["status"] + (f" ({reason})" if reason is not None and pd.notna(reason) else "")


def _matching_records(frame: pd.DataFrame, pattern: str, source: str) -> pd.DataFrame:
    """The records whose id matches the glob `pattern`; an error unless they are of a family
    advice knows and at least one of them ran."""
    matches = frame[frame["id"].map(lambda name: fnmatch.fnmatchcase(name, pattern))]
    if matches.empty:
        raise _no_match(frame, pattern, source)
    families = set(matches["experiment"])
    if not families <= set(RUN_TIME_METRICS):
        raise AdviceError(
            f"{pattern!r} matches {sorted(families)} records; advice needs one of "
            f"{sorted(RUN_TIME_METRICS)}"
        )
    if not (matches["status"] == "ok").any():
        raise AdviceError(
            f"no record matching {pattern!r} ran: "
            + "; ".join(f"{row['id']}: {_why(row)}" for _, row in matches.iterrows())
        )
    return matches


def _option(row: pd.Series, config: Config, count: int) -> Option | NotRanked:
    """The option of running one record's experiment `count` times, or why it is none."""
    device = parse_device(row["device"])
    partition = cluster.partition(device, config)
    if row["status"] != "ok":
        return NotRanked(partition, _label(row), _why(row))
    if not partition:
        return NotRanked("", _label(row), "the site has no GPU partition (config slurm)")
    unit_s, metric = _run_time(row)
    if math.isnan(unit_s):
        wanted = " or ".join(RUN_TIME_METRICS[row["experiment"]])
        return NotRanked(partition, _label(row), f"ok, but no {wanted}")
    resources = config["resources"][RESOURCE_FAMILY[row["experiment"]]]
    compute = unit_s * count
    wall = job_wall_time(row)
    return Option(
        partition=partition,
        label=_label(row),
        run_s=compute if math.isnan(wall) else wall + compute,
        request=queue_wait.Request(
            cpus=cluster.cpus_per_task(device, config),
            mem_gb=resources["mem_mb"] / 1024,
            hours=resources["runtime"] / 60,
        ),
        run_counts=COMPUTE_ONLY if math.isnan(wall) else JOB_AND_COMPUTE,
        compute_s=compute,
        compute_units=f"{count} x {metric}",
        job_wall_s=wall,
    )


def experiment_options(
    frame: pd.DataFrame,
    pattern: str,
    config: Config,
    count: int,
    source: str = "the tidy table",
) -> tuple[list[Option], list[NotRanked]]:
    """One option per record whose id matches the glob `pattern`, and the matching
    records that cannot be one, with the reason.

    e.g. 'kernels/matmul/*/*/float32/n4096': every device and backend of that cell.
    `source` names where `frame` came from, for the error messages.
    """
    pattern = pattern.removeprefix("results/").removesuffix(".json")
    found = [
        _option(row, config, count)
        for _, row in _matching_records(frame, pattern, source).iterrows()
    ]
    return (
        [item for item in found if isinstance(item, Option)],
        [item for item in found if isinstance(item, NotRanked)],
    )


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
        Option(name, "job", math.nan, request, NOT_GIVEN)
        if run.get(name) is None
        else Option(name, "job", run[name], request, GIVEN)
        for name in partitions
    ]


def rank(
    jobs: pd.DataFrame,
    options: list[Option],
    cpu_edges: list[float],
    gb_edges: list[float],
    min_jobs: int,
) -> pd.DataFrame:
    """The options with their expected wait and time to result, the one to pick first.

    An option without a run time has only its wait as its time to result, so it
    ranks after every option with one: it cannot be said to finish first.
    """
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
                "compute_s": option.compute_s,
                "compute_units": option.compute_units,
                "job_wall_s": option.job_wall_s,
                "run_s": option.run_s,
                "run_counts": option.run_counts,
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
    table = (
        table.assign(run_known=table["run_counts"] != NOT_GIVEN)
        .sort_values(
            ["fits_limit", "run_known", "total_median_s", "total_q3_s"],
            ascending=[False, False, True, True],
            na_position="last",
            kind="stable",
        )
        .drop(columns="run_known")
        .reset_index(drop=True)
    )
    table["best"] = False
    if not table.empty and table.loc[0, "fits_limit"] and pd.notna(table.loc[0, "total_median_s"]):
        table.loc[0, "best"] = True
    return table


def _quartiles(median: float, q1: float, q3: float) -> str:
    fmt = queue_wait.format_duration
    return f"{fmt(median)} ({fmt(q1)} – {fmt(q3)})"


def _run_cell(row: pd.Series) -> str:
    fmt = queue_wait.format_duration
    if row["run_counts"] == NOT_GIVEN:
        return NOT_GIVEN
    text = fmt(row["run_s"]) + (", compute only" if row["run_counts"] == COMPUTE_ONLY else "")
    return text + ("" if row["fits_limit"] else f" > limit {fmt(row['limit_s'])}")


def display(table: pd.DataFrame) -> pd.DataFrame:
    """The table as text; experiments show the compute and the job's wall time apart."""
    fmt = queue_wait.format_duration
    rows = [row for _, row in table.iterrows()]
    columns = {"Partition": table["partition"], "Runs": table["option"]}
    if table["compute_units"].astype(bool).any():
        columns["Compute"] = [f"{fmt(row['compute_s'])} ({row['compute_units']})" for row in rows]
        columns["Job wall time"] = [
            "not recorded" if math.isnan(row["job_wall_s"]) else fmt(row["job_wall_s"])
            for row in rows
        ]
    columns["Run time"] = [_run_cell(row) for row in rows]
    columns["Wait (quartiles)"] = [
        _quartiles(row["wait_median_s"], row["wait_q1_s"], row["wait_q3_s"]) for row in rows
    ]
    columns["Wait from"] = [f"{row['wait_basis']}, n = {row['wait_jobs']}" for row in rows]
    columns["Result after (quartiles)"] = [
        "not known: no run time"
        if row["run_counts"] == NOT_GIVEN
        else _quartiles(row["total_median_s"], row["total_q1_s"], row["total_q3_s"])
        for row in rows
    ]
    return pd.DataFrame(columns)


def notes(table: pd.DataFrame, not_ranked: list[NotRanked]) -> list[str]:
    """What the run time counts, and every option that could not be ranked, with why."""
    counts = set(table["run_counts"])
    lines = []
    if counts & {JOB_AND_COMPUTE, COMPUTE_ONLY}:
        lines.append(
            "Run time: the experiment's measured job wall time (its record's start to finish: "
            "backend imports, set-up, warm-up and all its repetitions) plus the compute asked "
            "for (units x the measured median time of one); the interpreter's start and the "
            "batch system's job start are not counted. 'compute only': the record has no start "
            "and finish time, so the run time lacks the job's set-up and warm-up."
        )
    if NOT_GIVEN in counts:
        lines.append(
            "Run time not given (--runtime PARTITION=TIME): such a partition is ranked by its "
            "queue wait alone, which is not its time to result."
        )
    lines += [f"Not ranked: {item}" for item in not_ranked]
    return lines


def verdict(table: pd.DataFrame) -> str:
    """The option to pick, and what its time to result leaves out."""
    fmt = queue_wait.format_duration
    if table.empty or not table["best"].any():
        return "No option can be ranked: no queue-wait data for a partition, or no option fits."
    best = table.iloc[0]
    if best["run_counts"] == NOT_GIVEN:
        return (
            f"Run time not given: ranked by queue wait alone, not by time to result. "
            f"Shortest expected wait: partition {best['partition']}, median "
            f"{fmt(best['wait_median_s'])}. Give --runtime PARTITION=TIME for each partition "
            "to rank by time to result."
        )
    text = (
        f"First result: partition {best['partition']} ({best['option']}), after about "
        f"{fmt(best['total_median_s'])} (median wait {fmt(best['wait_median_s'])} + run time "
        f"{fmt(best['run_s'])}{', compute only' if best['run_counts'] == COMPUTE_ONLY else ''})."
    )
    ranked = table[table["run_counts"] != NOT_GIVEN]
    others = ranked[
        (ranked["partition"] != best["partition"])
        & ranked["total_median_s"].notna()
        & ranked["fits_limit"]
    ]
    if not others.empty:
        runner_up = others.iloc[0]
        text += (
            f" Next: {runner_up['partition']} ({runner_up['option']}), after about "
            f"{fmt(runner_up['total_median_s'])}."
        )
    compute_only = ranked.loc[ranked["run_counts"] == COMPUTE_ONLY, "option"]
    if not compute_only.empty:
        text += (
            f" Run time of {', '.join(compute_only)} is compute only (no start and finish "
            "time in the record): the job's set-up, imports and warm-up are not counted."
        )
    unknown = table.loc[table["run_counts"] == NOT_GIVEN, "partition"]
    if not unknown.empty:
        text += f" Not compared, run time not given: {', '.join(unknown)}."
    return text

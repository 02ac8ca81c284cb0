"""Slurm accounting data: query `sacct` on the login node, and parse what it prints.

The raw text sacct prints is stored as a file and is the input of the queue
analysis, so the analysis reruns without the cluster, and on a dump made
elsewhere by hand (`sacct --parsable2 --format=...`, with or without header).

Parsing never stops at a bad line: a line that cannot be read is counted and
reported with its number and the reason, and the other lines are still used.
What sacct prints varies with the Slurm version and the job, so the parser
takes all of these:

- memory with units (K, M, G, T, P; Slurm's 1 G = 1024 M) and the per-node
  ("4000Mn") and per-CPU ("2Gc") suffixes of versions before 21.08 (since
  then ReqMem is the job's total): per node times the requested nodes
  (ReqNodes, else node= in ReqTRES, else NNodes), per CPU times ReqCPUS; with
  no node count at all, ReqTRES mem= (Slurm's total), else unknown;
- GPUs from ReqTRES as "gres/gpu=4", typed "gres/gpu:a100=4", or both for
  the same request (Slurm lists both when it tracks the type): counted once;
- time limits with days ("2-12:00:00") and the other Slurm forms, and
  UNLIMITED / Partition_Limit (no finite limit: the job has no CPU-hours);
- jobs not started (Start "Unknown" while pending, "None" when cancelled first);
- array jobs ("123_4", and "123_[5-9%2]" for tasks still pending together),
  heterogeneous job components ("123+1"); job steps ("123.batch") are skipped;
- jobs submitted to several partitions ("medium,gpu"). Slurm lists them all
  while the job waits, and keeps the list for a job that never started; once
  the job starts, sacct names only the partition it ran in (checked with
  Slurm 22.05). Such a line is one job row per listed partition, with
  partitions_listed > 1: a job that never started waited in each. A line
  that lists several partitions for a job that started does not say where it
  ran; its wait is kept and counted in each listed partition too, and the
  queue-wait tables say how many such jobs they hold;
- states with a suffix ("CANCELLED by 0").
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TypedDict

import pandas as pd

from accelbench.families.base import Config
from accelbench.slurm import resources as cluster

# Fixed field list of the query; free-text fields (JobName, Comment) are left
# out because they may contain the "|" separator.
SACCT_FIELDS = (
    "JobID",
    "Partition",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "ReqCPUS",
    "ReqMem",
    "ReqNodes",
    "NNodes",
    "Timelimit",
    "Elapsed",
    "State",
    "ReqTRES",
    "AllocTRES",
)
REQUIRED_FIELDS = (
    "JobID",
    "Partition",
    "Submit",
    "Start",
    "ReqCPUS",
    "ReqMem",
    "Timelimit",
    "State",
)
NOT_A_TIME = {"", "Unknown", "None", "N/A"}
NO_TIME_LIMIT = {"UNLIMITED", "Partition_Limit", "INVALID"}
# Slurm's memory units, in GB as Slurm counts them (1 G = 1024 M).
MEMORY_UNITS_GB = {"K": 1 / 1024**2, "M": 1 / 1024, "G": 1.0, "T": 1024.0, "P": 1024.0**2}
GPU_TRES = "gres/gpu"

JOB_ID = re.compile(
    r"^(?P<job>\d+)"
    r"(?:_(?P<task>\d+|\[[^\]]+\]))?"
    r"(?:\+(?P<component>\d+))?"
    r"(?:\.(?P<step>.+))?$"
)
MEMORY = re.compile(r"^(?P<value>\d+(?:\.\d+)?)(?P<unit>[KMGTP]?)(?P<per>[nc]?)$")
STATE = re.compile(r"^(?P<state>[A-Z][A-Z_]*)(?: by (?P<uid>\d+))?$")
DURATION = re.compile(
    r"^(?:(?P<days>\d+)-)?(?P<first>\d+)(?::(?P<second>\d+))?(?::(?P<third>\d+(?:\.\d+)?))?$"
)

JOB_COLUMNS = (
    "job_id",
    "array_tasks",
    "partition",
    "partitions_listed",
    "state",
    "cancelled_by",
    "submit",
    "eligible",
    "start",
    "end",
    "req_cpus",
    "req_mem_gb",
    "req_gpus",
    "timelimit_h",
    "cpu_hours",
    "gb_hours",
    "wait_s",
)


class JobFields(TypedDict):
    """What one sacct line says of its job, in the units of JOB_COLUMNS."""

    job_id: str
    array_tasks: int
    state: str
    cancelled_by: int | None  # the uid of whoever cancelled it
    submit: datetime
    eligible: datetime | None
    start: datetime | None
    end: datetime | None
    req_cpus: int
    req_mem_gb: float  # nan: unknown
    req_gpus: int
    timelimit_h: float  # nan: none or unknown
    cpu_hours: float
    gb_hours: float
    wait_s: float  # nan: not started


class JobRow(JobFields):
    """One row of the jobs table: a job in one of the partitions its line lists."""

    partition: str
    partitions_listed: int


class SacctError(RuntimeError):
    """sacct or sinfo could not answer, or the partitions asked for do not exist."""


Runner = Callable[..., subprocess.CompletedProcess]


def _run(runner: Runner, command: list[str]) -> str:
    env = {**os.environ, "SLURM_TIME_FORMAT": "standard"}  # ISO times, whatever the user set
    try:
        done = runner(command, capture_output=True, text=True, timeout=300, env=env)
    except FileNotFoundError:
        raise SacctError(f"{command[0]} not found: run this on a Slurm login node") from None
    except subprocess.TimeoutExpired:
        raise SacctError(f"{' '.join(command)} did not answer within 300 s") from None
    if done.returncode != 0:
        raise SacctError(
            f"{' '.join(command)} failed (exit {done.returncode}): {done.stderr.strip()}"
        )
    return done.stdout


def query(
    partitions: Sequence[str], since: str, until: str, runner: Runner = subprocess.run
) -> str:
    """The raw sacct text (with header) of all users' jobs in `partitions` and the window.

    A partition the cluster does not have (by sinfo) is an error that lists the
    ones it has, because sacct itself would silently return nothing for it.
    """
    if not partitions:
        raise SacctError("no partitions to query; set cluster_analysis.partitions")
    available = cluster.slurm_partitions()
    if available is None:
        raise SacctError("sinfo did not answer: run this on a Slurm login node")
    unknown = [name for name in partitions if name not in available]
    if unknown:
        raise SacctError(
            f"partition(s) {', '.join(unknown)} do not exist on this cluster; "
            f"partitions: {', '.join(available) or 'none'}"
        )
    return _run(
        runner,
        [
            "sacct",
            "--allusers",
            "--allocations",  # one line per job, no steps
            "--parsable2",
            f"--format={','.join(SACCT_FIELDS)}",
            f"--partition={','.join(partitions)}",
            f"--starttime={since}",
            f"--endtime={until}",
        ],
    )


def configured_partitions(config: Config) -> list[str]:
    """cluster_analysis.partitions, or the partitions the experiments are sent to."""
    named = config["cluster_analysis"]["partitions"]
    slurm = config["slurm"]
    default = [name for name in (slurm["cpu_partition"], slurm["gpu_partition"]) if name]
    return list(dict.fromkeys(named or default))


def write_dump(text: str, path: str | os.PathLike[str]) -> None:
    """Write the raw text atomically, so a failed query never leaves a dump that looks valid."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, target)


def parse_time(text: str) -> datetime | None:
    """An ISO timestamp, or None for Unknown/None (not started, not ended)."""
    if text in NOT_A_TIME:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"time {text!r} is not ISO 8601 (set SLURM_TIME_FORMAT=standard)"
        ) from None


def parse_duration(text: str) -> float | None:
    """Seconds of a Slurm duration; None for UNLIMITED / Partition_Limit (no finite limit).

    Slurm's forms: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
    """
    if text in NO_TIME_LIMIT:
        return None
    match = DURATION.match(text)
    if not match:
        raise ValueError(f"duration {text!r} is not a Slurm time")
    days = int(match["days"] or 0)
    parts = [match["first"], match["second"], match["third"]]
    given = [float(part) for part in parts if part is not None]
    if match["days"] is not None:
        hours, minutes, seconds = (given + [0.0, 0.0])[:3]
    elif len(given) == 3:
        hours, minutes, seconds = given
    else:
        hours = 0.0
        minutes, seconds = (given + [0.0])[:2]
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def parse_memory(text: str, cpus: int, nodes: int | None) -> float | None:
    """GB (Slurm's units) a job asked for in total; None when unknown: empty, 0 (whole
    node), or per node without a node count.

    A trailing "c" means per CPU, "n" per node (Slurm before 21.08); no suffix: total.
    """
    if text == "":
        return None
    match = MEMORY.match(text)
    if not match:
        raise ValueError(f"memory {text!r} is not a Slurm size (e.g. 500M, 4000Mn, 2Gc)")
    amount = float(match["value"]) * MEMORY_UNITS_GB[match["unit"] or "M"]
    if amount == 0:
        return None
    if match["per"] == "c":
        return amount * cpus
    if match["per"] == "n":
        return None if nodes is None else amount * nodes
    return amount


def parse_tres(text: str) -> dict[str, str]:
    """'cpu=4,mem=8G,gres/gpu=1' -> {'cpu': '4', 'mem': '8G', 'gres/gpu': '1'}."""
    pairs = [item.split("=", 1) for item in text.split(",") if item]
    if any(len(pair) != 2 for pair in pairs):
        raise ValueError(f"TRES {text!r} is not a list of name=value")
    return dict(pairs)


def requested_gpus(tres: dict[str, str]) -> int:
    """GPUs in a parsed ReqTRES.

    Where Slurm tracks GPU types it lists one request twice, "gres/gpu=4" and
    "gres/gpu:a100=4": the untyped count is the total. Without it (only typed
    GPUs tracked) the typed counts add up, as a job may ask for several types.
    gres/gpumem and gres/gpuutil are not GPUs.
    """
    if GPU_TRES in tres:
        return _count(tres[GPU_TRES], GPU_TRES) or 0
    return sum(
        _count(value, name) or 0 for name, value in tres.items() if name.startswith(f"{GPU_TRES}:")
    )


def array_task_count(task: str | None) -> int:
    """Jobs one line stands for: 1, or the tasks of a pending range like [1-3,7%2] or [1-9:2]."""
    if task is None or not task.startswith("["):
        return 1
    spec = task[1:-1].split("%", 1)[0]
    count = 0
    for part in spec.split(","):
        match = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", part)
        if not match:
            raise ValueError(f"array task range {task!r} is malformed")
        first, last, step = int(match[1]), int(match[2] or match[1]), int(match[3] or 1)
        if last < first or step < 1:
            raise ValueError(f"array task range {task!r} is malformed")
        count += len(range(first, last + 1, step))
    return count


def _count(text: str, name: str) -> int | None:
    if text == "":
        return None
    match = re.match(r"^\d+", text)  # ReqNodes may be a range "2-4": its minimum
    if not match:
        raise ValueError(f"{name} {text!r} is not a count")
    return int(match.group())


def _node_count(values: dict[str, str], tres: dict[str, str]) -> int | None:
    """Nodes the job asked for: ReqNodes, else node= in ReqTRES, else NNodes (0: not given)."""
    sources = (
        ("ReqNodes", values.get("ReqNodes", "")),
        ("ReqTRES node", tres.get("node", "")),
        ("NNodes", values.get("NNodes", "")),
    )
    for name, text in sources:
        count = _count(text, name)
        if count:
            return count
    return None


@dataclass
class ParsedDump:
    """Jobs (one row per job and partition), the lines that could not be read, steps skipped."""

    jobs: pd.DataFrame
    problems: list[tuple[int, str, str]] = field(default_factory=list)  # (line no., line, why)
    steps_skipped: int = 0
    lines_read: int = 0

    def problems_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.problems, columns=["line", "text", "problem"])

    def summary(self) -> str:
        return (
            f"{self.lines_read} lines: {len(self.jobs)} job rows, "
            f"{self.steps_skipped} job steps skipped, {len(self.problems)} unreadable"
        )


def _job_rows(values: dict[str, str]) -> list[JobRow] | None:
    """One line's job rows (one per partition it lists), or None for a job step."""
    match = JOB_ID.match(values["JobID"])
    if not match:
        raise ValueError(f"job id {values['JobID']!r} is malformed")
    if match["step"] is not None:
        return None
    state = STATE.match(values["State"])
    if not state:
        raise ValueError(f"state {values['State']!r} is not a Slurm job state")
    partitions = [name for name in values["Partition"].split(",") if name]
    if not partitions:
        raise ValueError("partition is empty")
    submit = parse_time(values["Submit"])
    if submit is None:
        raise ValueError(f"submit time {values['Submit']!r} is missing")
    eligible = parse_time(values.get("Eligible", ""))
    start = parse_time(values["Start"])
    end = parse_time(values.get("End", ""))
    wait = None
    if start is not None:
        try:
            wait = (start - (eligible or submit)).total_seconds()
        except TypeError:
            raise ValueError("start and submit/eligible times mix time zones") from None
        if wait < 0:
            raise ValueError(f"start {values['Start']} is before submit/eligible time")

    tres = parse_tres(values.get("ReqTRES", ""))
    cpus = _count(values["ReqCPUS"], "ReqCPUS")
    if cpus is None:
        raise ValueError("ReqCPUS is empty")
    nodes = _node_count(values, tres)
    memory = parse_memory(values["ReqMem"], cpus, nodes)
    if memory is None and "mem" in tres:
        memory = parse_memory(tres["mem"], cpus, nodes)
    limit = parse_duration(values["Timelimit"])
    hours = math.nan if limit is None else limit / 3600
    gpus = requested_gpus(tres)
    job = JobFields(
        job_id=values["JobID"],
        array_tasks=array_task_count(match["task"]),
        state=state["state"],
        cancelled_by=None if state["uid"] is None else int(state["uid"]),
        submit=submit,
        eligible=eligible,
        start=start,
        end=end,
        req_cpus=cpus,
        req_mem_gb=math.nan if memory is None else memory,
        req_gpus=gpus,
        timelimit_h=hours,
        cpu_hours=cpus * hours,
        gb_hours=math.nan if memory is None else memory * hours,
        wait_s=math.nan if wait is None else wait,
    )
    return [JobRow(**job, partition=name, partitions_listed=len(partitions)) for name in partitions]


def _field_names(first_line: str) -> tuple[list[str], bool]:
    """(field names, whether the first line is a header)."""
    names = first_line.split("|")
    if "JobID" in names:
        return names, True
    return list(SACCT_FIELDS), False


def parse(text: str) -> ParsedDump:
    """Parse sacct --parsable2 (or --parsable) output, with or without a header line.

    Without a header the fields must be SACCT_FIELDS in that order.
    """
    lines = text.splitlines()
    numbered = [(number, line) for number, line in enumerate(lines, 1) if line.strip()]
    result = ParsedDump(jobs=pd.DataFrame(columns=list(JOB_COLUMNS)), lines_read=len(numbered))
    if not numbered:
        return result
    names, has_header = _field_names(numbered[0][1])
    trailing_bar = numbered[0][1].endswith("|")  # --parsable ends every line with "|"
    if trailing_bar:
        names = names[:-1]
    if has_header:
        numbered = numbered[1:]
        result.lines_read -= 1
        missing = [name for name in REQUIRED_FIELDS if name not in names]
        if missing:
            raise SacctError(
                f"the sacct dump lacks the fields {', '.join(missing)}; "
                f"write it with --format={','.join(SACCT_FIELDS)}"
            )
    rows: list[JobRow] = []
    for number, line in numbered:
        values = line.removesuffix("|").split("|") if trailing_bar else line.split("|")
        if len(values) != len(names):
            result.problems.append(
                (number, line, f"{len(values)} fields, expected {len(names)} ({'|'.join(names)})")
            )
            continue
        try:
            job_rows = _job_rows(dict(zip(names, values, strict=True)))
        except ValueError as err:
            result.problems.append((number, line, str(err)))
            continue
        if job_rows is None:
            result.steps_skipped += 1
        else:
            rows.extend(job_rows)
    if rows:
        jobs = pd.DataFrame(rows, columns=list(JOB_COLUMNS))
        for column in ("submit", "eligible", "start", "end"):
            jobs[column] = pd.to_datetime(jobs[column])
        jobs["cancelled_by"] = jobs["cancelled_by"].astype("Int64")
        result.jobs = jobs
    return result


def read(path: str | os.PathLike[str]) -> ParsedDump:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return parse(handle.read())

"""How far a run has come: what it is about to measure, what it left unmeasured, and the
grid's records so far with an estimate of the time left.

Snakemake prints jobs by rule ("Job stats") and "N of M steps done"; a person asks
how many experiments of each family and device a run measures, which of them an
interrupted run did not finish, and when the grid will be done. The answers come
from the grid, the record files and the wall times the records carry
(provenance.started and finished), never from re-running anything.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from accelbench import grid
from accelbench.config import partition
from accelbench.families.base import Config

EXCLUDED_CSV = "results/excluded.csv"
# Paths listed per kind in the message of an unfinished run; the rest are counted.
LISTED = 10


def member_jobs(jobs: Iterable[Any]) -> Iterator[Any]:
    """Each Snakemake job, and each member of a group job (Snakemake 9: a GroupJob says
    is_group() and holds its jobs)."""
    for job in jobs:
        yield from job.jobs if job.is_group() else [job]


def measured_paths(jobs: Iterable[Any]) -> list[str]:
    """The record paths among the outputs of Snakemake jobs, a group's members included."""
    paths = [
        str(path)
        for member in member_jobs(jobs)
        for path in member.output
        if grid.cell_of_path(str(path))
    ]
    return sorted(set(paths))


def _family_and_device(path: str) -> tuple[str, str]:
    family, _, parameters = grid.cell_of_path(path)
    return family, parameters["device"]


def _counts_by_family(paths: Iterable[str], order: Sequence[str]) -> list[str]:
    """'  kernel   cpu1 24, cpu2 20', one line per family, devices in the grid's order."""
    counts = Counter(_family_and_device(path) for path in paths)
    families = list(dict.fromkeys(family for family, _ in counts))
    width = max(map(len, families), default=0)
    rank = {device: index for index, device in enumerate(order)}
    lines = []
    for family in families:
        devices = sorted(
            (device for name, device in counts if name == family),
            key=lambda device: (rank.get(device, len(rank)), device),
        )
        listed = ", ".join(f"{device} {counts[family, device]}" for device in devices)
        lines.append(f"  {family:<{width}}  {listed}")
    return lines


def plan_message(
    to_measure: Sequence[str],
    expanded: grid.Grid,
    exists: Callable[[str], bool] = lambda path: Path(path).exists(),
) -> str:
    """What a run is about to measure, by family and device, and what the grid excludes."""
    order = list(dict.fromkeys(exp.device for exp in expanded.experiments))
    recorded = sum(map(exists, expanded.paths))
    count = len(to_measure)
    noun = "experiment" if count == 1 else "experiments"
    lines = [
        f"This run measures {count} {noun}; the grid has {len(expanded.experiments)}, "
        f"{recorded} of them with a record already."
    ]
    lines += _counts_by_family(to_measure, order)
    if expanded.excluded:
        families = Counter(exp.family for exp, _ in expanded.excluded)
        by_family = ", ".join(f"{family} {number}" for family, number in families.items())
        lines.append(
            f"{len(expanded.excluded)} cells are excluded as they cannot run ({by_family}): "
            f"{EXCLUDED_CSV} gives each one's reason once the tables are made, and "
            "`accelbench grid` (with this run's --configfile) lists them now."
        )
    return "\n".join(lines)


def unfinished_message(
    unfinished: Iterable[str],
    stopped: Iterable[str],
    failed: Iterable[str],
    exists: Callable[[str], bool] = lambda path: Path(path).exists(),
) -> str | None:
    """The experiments a run that did not succeed left without a record, by why, or None.

    `unfinished`: the records of the run's jobs that did not finish; `stopped`:
    of the jobs running (or queued on Slurm) when the run stopped, whose processes
    Snakemake cancelled; `failed`: of the jobs that failed. A record written
    anyway (a failure on the last attempt is recorded) is not listed.
    """
    missing = [path for path in sorted(set(unfinished)) if not exists(path)]
    if not missing:
        return None
    running, broken = set(stopped), set(failed) - set(stopped)
    kinds = {
        "cancelled while running or queued": [path for path in missing if path in running],
        "failed without a record (their errors are above)": [
            path for path in missing if path in broken
        ],
        "never started": [path for path in missing if path not in running | broken],
    }
    noun, verb = ("experiment", "has") if len(missing) == 1 else ("experiments", "have")
    lines = [
        f"{len(missing)} {noun} of this run {verb} no record; the same command run again "
        "measures them:"
    ]
    for kind, paths in kinds.items():
        if paths:
            lines.append(f"  {kind} ({len(paths)}):")
            lines += [f"    {path}" for path in paths[:LISTED]]
            if len(paths) > LISTED:
                lines.append(f"    ... and {len(paths) - LISTED} more")
    return "\n".join(lines)


def unfinished_in(workflow: Any) -> str | None:
    """unfinished_message of a Snakemake 9 workflow whose run did not succeed: its DAG's
    jobs not finished, and its scheduler's running (cancelled on Ctrl-C) and failed jobs."""
    scheduler = workflow.scheduler
    return unfinished_message(
        measured_paths(workflow.dag.needrun_jobs()),
        measured_paths(scheduler.running) if scheduler else [],
        measured_paths(scheduler.failed) if scheduler else [],
    )


@dataclass(frozen=True)
class RecordState:
    """What a grid cell's record file says about progress."""

    status: str  # the record's status; "invalid" for a file that is no record
    started: datetime | None = None
    finished: datetime | None = None

    @property
    def wall_s(self) -> float | None:
        """The measuring job's wall time (imports, set-up, warm-up and every run)."""
        if self.started is None or self.finished is None or self.finished < self.started:
            return None
        return (self.finished - self.started).total_seconds()


def _timestamp(value: Any) -> datetime | None:
    """A provenance timestamp (UTC where it names no zone), or None."""
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment and moment.tzinfo is None else moment


def read_state(path: Path) -> RecordState:
    """The status and the provenance timestamps of a record (only those: no validation)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return RecordState("invalid")
    if not isinstance(record, dict) or not isinstance(record.get("status"), str):
        return RecordState("invalid")
    provenance = record.get("provenance")
    provenance = provenance if isinstance(provenance, dict) else {}
    return RecordState(
        record["status"],
        _timestamp(provenance.get("started")),
        _timestamp(provenance.get("finished")),
    )


class RecordReader:
    """read_state of record files, read again only when a file changed (watch mode)."""

    def __init__(self, root: Path):
        self.root = root
        self._seen: dict[str, tuple[tuple[int, int], RecordState]] = {}

    def __call__(self, path: str) -> RecordState | None:
        """The state of the record at `path` (relative to the root); None if there is none."""
        file = self.root / path
        try:
            stat = file.stat()
        except OSError:
            self._seen.pop(path, None)
            return None
        key = (stat.st_mtime_ns, stat.st_size)
        seen = self._seen.get(path)
        if seen is None or seen[0] != key:
            seen = (key, read_state(file))
            self._seen[path] = seen
        return seen[1]


@dataclass(frozen=True)
class Row:
    """One family on one partition: experiments planned and recorded, and their wall times."""

    family: str
    partition: str
    planned: int
    recorded: int
    ok: int
    walls: tuple[float, ...]

    @property
    def left(self) -> int:
        return self.planned - self.recorded

    @property
    def median_wall_s(self) -> float | None:
        return statistics.median(self.walls) if self.walls else None


@dataclass(frozen=True)
class GridProgress:
    rows: tuple[Row, ...]
    run_started: datetime | None
    # Wall times of the records written since the run started: (started, finished).
    this_run: tuple[tuple[datetime, datetime], ...]

    @property
    def planned(self) -> int:
        return sum(row.planned for row in self.rows)

    @property
    def recorded(self) -> int:
        return sum(row.recorded for row in self.rows)

    def left_by_row(self) -> dict[Row, float | None]:
        """Seconds of measuring each row has left: its left experiments at its median wall
        time, else its family's; None for a row with no record of its family to go by."""
        by_family: dict[str, list[float]] = {}
        for row in self.rows:
            by_family.setdefault(row.family, []).extend(row.walls)
        left: dict[Row, float | None] = {}
        for row in self.rows:
            walls = row.walls or by_family[row.family]
            left[row] = row.left * statistics.median(walls) if walls else None
        return left

    def left_s(self) -> tuple[float, list[Row]]:
        """Seconds of measuring left in all, and the rows left that are not counted."""
        by_row = self.left_by_row()
        unknown = [row for row, seconds in by_row.items() if seconds is None and row.left]
        return sum(seconds for seconds in by_row.values() if seconds), unknown

    def pace(self) -> float | None:
        """Experiments measured at a time in this run so far: the records' wall times added up
        over the time since the run started; None before two records of this run exist."""
        if self.run_started is None or len(self.this_run) < 2:
            return None
        span = (max(finished for _, finished in self.this_run) - self.run_started).total_seconds()
        busy = sum((finished - started).total_seconds() for started, finished in self.this_run)
        return busy / span if span > 0 else None


@dataclass
class _Tally:
    """A family's experiments on one partition, counted as grid_progress goes."""

    planned: int = 0
    recorded: int = 0
    ok: int = 0
    walls: list[float] = field(default_factory=list)


def grid_progress(
    expanded: grid.Grid,
    config: Config,
    state_of: Callable[[str], RecordState | None],
    run_started: datetime | None = None,
) -> GridProgress:
    """The grid's experiments by family and partition, with the records written so far."""
    tallies: dict[tuple[str, str], _Tally] = {}
    this_run = []
    for exp in expanded.experiments:
        where = partition(exp.parsed_device, config) or "(no GPU partition)"
        tally = tallies.setdefault((exp.family, where), _Tally())
        tally.planned += 1
        state = state_of(exp.path)
        if state is None:
            continue
        tally.recorded += 1
        tally.ok += state.status == "ok"
        if state.wall_s is not None:
            tally.walls.append(state.wall_s)
            if run_started is not None and state.started >= run_started:
                this_run.append((state.started, state.finished))
    rows = tuple(
        Row(family, where, t.planned, t.recorded, t.ok, tuple(t.walls))
        for (family, where), t in tallies.items()
    )
    return GridProgress(rows, run_started, tuple(this_run))


def duration(seconds: float) -> str:
    """'42 s', '12 min', '3 h 05 min'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 90 else f"{minutes // 60} h {minutes % 60:02d} min"


def render_progress(progress: GridProgress, *, running: bool) -> str:
    """The table of done / planned by family and partition, and the time left.

    `running`: whether a Snakemake run holds the directory now; without one, the
    time left is work for the next run, not an ETA.
    """
    recorded, planned = progress.recorded, progress.planned
    not_ok = sum(row.recorded - row.ok for row in progress.rows)
    lines = [
        f"{recorded} of {planned} experiments have a record"
        + (f" ({not_ok} not ok: tidy.csv or the tables say why)" if not_ok else "")
    ]
    header = ("family", "partition", "done", "planned", "median wall", "left")
    table = [header]
    for row, seconds in progress.left_by_row().items():
        wall = row.median_wall_s
        left = duration(seconds) if seconds is not None else "?"
        table.append(
            (
                row.family,
                row.partition,
                str(row.recorded),
                str(row.planned),
                duration(wall) if wall is not None else "-",
                left if row.left else "done",
            )
        )
    widths = [max(len(cells[i]) for cells in table) for i in range(len(header))]
    for cells in table:
        text = "  ".join(
            cell.ljust(width) if index < 2 else cell.rjust(width)
            for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
        )
        lines.append(f"  {text.rstrip()}")
    lines.append(_time_left(progress, running))
    return "\n".join(lines)


def _time_left(progress: GridProgress, running: bool) -> str:
    if progress.recorded == progress.planned:
        return "Every experiment of the grid has its record."
    left, unknown = progress.left_s()
    gaps = (
        f"; not counted: {', '.join(f'{row.family} on {row.partition}' for row in unknown)}, "
        "with no record of their family yet"
        if unknown
        else ""
    )
    if not running:
        return (
            f"No Snakemake run holds this directory now: about {duration(left)} of measuring "
            f"left for the next one{gaps}."
        )
    pace = progress.pace()
    if pace is None:
        return (
            f"ETA: about {duration(left)}, one experiment at a time (the pace of this run is "
            f"known once it has written two records){gaps}."
        )
    return (
        f"ETA: about {duration(left / pace)} ({duration(left)} of measuring left, at "
        f"{pace:.1f} experiments at a time, the pace of this run so far){gaps}."
    )

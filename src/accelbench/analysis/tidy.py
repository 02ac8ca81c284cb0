"""All result records -> one tidy table, one row per record.

Every table and figure is built from this table, so they all agree. A file
that is not a valid record is reported with its path, never dropped silently,
and never stops the other records from being read. Units travel with the table
in `DataFrame.attrs["units"]` (kept by Parquet), so axis labels cannot drift
from what was measured.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from accelbench import grid
from accelbench.analysis.sizes import size_label
from accelbench.families import FAMILIES
from accelbench.families.base import int_fields
from accelbench.measuring import precision
from accelbench.measuring.settings import Params
from accelbench.measuring.statistics import CI_LEVEL, RERUN_INTERVAL_OPENING
from accelbench.platform import host_cpus
from accelbench.platform.devices import DeviceError, parse_device
from accelbench.platform.provenance import Provenance
from accelbench.records.record import Record, RecordError, load_record

RECORD_COLUMNS = ("id", "experiment", "status", "reason")
# A cell of the tidy table as a record gives it: a text, a number, a flag, or null.
Scalar = str | int | float | bool | None


def _grid_params() -> tuple[str, ...]:
    """Every family's grid parameters (FAMILIES' order): those that name rows first
    (Family.primary), then the others in the order of the result paths."""
    primaries = [family.primary for family in FAMILIES.values() if family.primary]
    params = [
        param.name for family in FAMILIES.values() for param in fields(family.experiment_type)
    ]
    return tuple(dict.fromkeys([*primaries, *params]))


# Grid parameters first; other params follow sorted.
PARAM_ORDER = _grid_params()
DISTRIBUTION_FIELDS = ("median", "q1", "q3", "ci_low", "ci_high", "ci_level", "n")
UNITLESS_FIELDS = ("ci_level", "n")
CHECK_COLUMNS = ("check_passed", "check_relative_error")
# What else the machine did and how precise the measurement ended (record "conditions"):
# busy is true where it stayed above the contention limit after the retries or the host
# slowed at least half its runs (accelbench.measuring.host_speed); the half-width reached
# (a fraction of the median) is the record's. imprecise and its reason are not the
# record's but judged here from all the records (`judged`); null for a record that did
# not run.
CONDITION_COLUMNS = (
    "busy",
    "imprecise",
    "imprecise_reason",
    "reached_half_width",
    "other_cpus",
    "steal_cpus",
    "host_slowed_runs",
    "host_slowdown",
    "host_speed_of_best",
)
# What pairs two records round by round (accelbench.analysis.paired): the measurement of
# the comparison group each was measured in (conditions.group), and the run medians of its
# family's time, in round order (JSON), which that measurement interleaved.
PAIRING_COLUMNS = ("group_measurement", "run_medians")
# What measured it (record "measured_by"): the code, `module:variant`, and the timer.
MEASURED_BY_COLUMNS = ("implementation", "timer")
# Where its unit came from (record "unit"): "builtin", a plugin folder or an entry point,
# and the digest of its source; null for a record of no unit (a roof).
UNIT_COLUMNS = ("unit_origin", "unit_digest")
# How its energy was measured (record "energy"): ok, too_short or unavailable, why not,
# the counters read and the idle baseline; null for a record without energy. The energy
# itself is in metric columns (energy_per_call_median, energy_per_sample_median, ...), each
# with its counter's resolution (energy_per_call_resolution); an energy above idle below
# that resolution has no median, only its bound (energy_per_call_above_idle_upper_bound).
ENERGY_COLUMNS = ("energy_status", "energy_reason", "energy_method", "energy_baseline_w")
PROVENANCE_COLUMNS = (
    "host",
    "cpu_model",
    "cpu_topology",
    "gpu",
    "gpu_count",
    "driver",
    "cuda_runtime",
    "python",
    "git_commit",
    "git_dirty",
    "config_hash",
    "slurm_job_id",
    "slurm_partition",
    "slurm_node",
    "slurm_exclusive",
    "started",
    "finished",
)
TIMESTAMP_COLUMNS = ("started", "finished")
# True or false: boolean also where no record has the flag (every value null).
FLAG_COLUMNS = ("check_passed", "busy", "git_dirty", "slurm_exclusive")
# Grid parameters that are whole numbers (sizes, batches): integers also where every record
# of them is invalid, so an invalid record's cell keeps its number.
INTEGER_PARAMS = tuple(
    dict.fromkeys(
        name for family in FAMILIES.values() for name in int_fields(family.experiment_type)
    )
)
# Library versions follow the provenance columns as `<library>_version`, one column each.
VERSION_SUFFIX = "_version"
CSV_OPTIONS = pa_csv.WriteOptions(quoting_style="needed")
STATUS_TEXT = {
    "oom": "OOM",
    "unavailable": "n/a",
    "failed": "failed",
    "skipped": "skipped",
    "invalid": "invalid record",
}
# The status of a cell whose record file exists but cannot be used (see record_problems).
INVALID = "invalid"

LABEL_FORMATS = {"batch": "batch {}".format, "size": lambda size: size_label(float(size))}
# Reading order of parameter values that have one (others sort alphabetically).
VALUE_ORDER = {"precision": ("fp64", "fp32", "tf32", "bf16", "fp16")}


def flagged(value: Any) -> bool:
    """A boolean cell (busy, above_roof) as a plain bool: null and NA read as false."""
    return False if value is None or value is pd.NA or value != value else bool(value)


@functools.cache
def _metric_names(
    name: str, distribution: bool
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(column names, the metric's fields they hold, columns that carry the unit) of one
    metric; cached because every record repeats the same few metrics."""
    if not distribution:
        return (name,), ("value",), (name,)
    columns = tuple(f"{name}_{field}" for field in DISTRIBUTION_FIELDS)
    with_unit = tuple(
        f"{name}_{field}" for field in DISTRIBUTION_FIELDS if field not in UNITLESS_FIELDS
    )
    return columns, DISTRIBUTION_FIELDS, with_unit


def _provenance_columns(provenance: Provenance) -> dict[str, Scalar]:
    accelerator = provenance.get("accelerator") or {}
    gpus = accelerator.get("gpus") or []
    git = provenance.get("git") or {}
    slurm = provenance.get("slurm") or {}
    return {
        "host": provenance.get("host"),
        "cpu_model": provenance.get("cpu_model"),
        "cpu_topology": host_cpus.describe(provenance.get("cpu_topology")),
        "gpu": gpus[0] if gpus else None,
        "gpu_count": len(gpus),
        "driver": accelerator.get("driver"),
        "cuda_runtime": accelerator.get("cuda_runtime"),
        "python": provenance.get("python"),
        "git_commit": git.get("commit"),
        "git_dirty": git.get("dirty"),
        "config_hash": provenance.get("config_hash"),
        "slurm_job_id": slurm.get("job_id"),
        "slurm_partition": slurm.get("partition"),
        "slurm_node": slurm.get("node"),
        "slurm_exclusive": slurm.get("exclusive"),
        "started": provenance.get("started"),
        "finished": provenance.get("finished"),
    }


@dataclass(frozen=True)
class _Flat:
    row: dict[str, Scalar]  # record fields, check, provenance and <library>_version columns
    params: Params
    measured: dict[str, float | None]  # metric columns
    metrics: dict[str, tuple[str, ...]]  # metric name -> its column names
    units: dict[str, str]  # metric column -> unit
    shape: tuple[str, ...]  # the names of row, params and measured, in order


# The columns of the record's optional sections: (section, ((column, key in it), ...)).
SECTION_COLUMNS = (
    ("check", (("check_passed", "passed"), ("check_relative_error", "relative_error"))),
    ("conditions", tuple(zip(CONDITION_COLUMNS, CONDITION_COLUMNS, strict=True))),
    ("measured_by", tuple(zip(MEASURED_BY_COLUMNS, MEASURED_BY_COLUMNS, strict=True))),
    ("unit", tuple((column, column.removeprefix("unit_")) for column in UNIT_COLUMNS)),
    ("energy", tuple((column, column.removeprefix("energy_")) for column in ENERGY_COLUMNS)),
)


def _flatten(record: Record) -> _Flat:
    """One record as record/check/provenance columns, params, metric columns and units."""
    row: dict[str, Scalar] = {key: record[key] for key in RECORD_COLUMNS}
    for section, columns in SECTION_COLUMNS:
        found = record.get(section) or {}
        for column, key in columns:
            row[column] = found.get(key)
    row.update(_pairing_columns(record))
    row.update(_provenance_columns(record["provenance"]))
    for library, version in (record["provenance"].get("libraries") or {}).items():
        row[library + VERSION_SUFFIX] = version
    measured: dict[str, float | None] = {}
    metrics: dict[str, tuple[str, ...]] = {}
    units: dict[str, str] = {}
    for name, metric in record["metrics"].items():
        columns, held, with_unit = _metric_names(name, "median" in metric)
        for column, field in zip(columns, held, strict=True):
            measured[column] = metric.get(field)
        metrics[name] = columns
        unit = metric["unit"]
        for column in with_unit:
            units[column] = unit
    params = record["params"]
    return _Flat(row, dict(params), measured, metrics, units, (*row, *params, *measured))


def _pairing_columns(record: Record) -> dict[str, str | None]:
    """PAIRING_COLUMNS of one record: none where it was measured alone."""
    group = (record.get("conditions") or {}).get("group") or {}
    family = FAMILIES.get(record["experiment"])
    metric = family.time_metric if family else None
    found = (record.get("series") or {}).get(f"{metric}_run_medians") if group else None
    return {
        "group_measurement": group.get("measurement"),
        "run_medians": json.dumps(found["values"]) if found else None,
    }


def _id_matches_path(record_id: str, path: str) -> bool:
    """A record's id is its path below the results folder, without .json: a record
    copied to another cell's path would otherwise fill that cell with foreign numbers."""

    def names(text: str) -> bool:
        stem = text.removesuffix(".json")
        return stem == record_id or stem.endswith(f"/{record_id}")

    return names(path) or names(Path(path).as_posix())  # pathlib only where needed


def _load(path: str) -> _Flat | str:
    """One file flattened, or what is wrong with it (the message names the file). A
    record that load_record accepts has every key and type _flatten reads."""
    try:
        record = load_record(path)
    except (RecordError, OSError) as err:
        return str(err)
    if not _id_matches_path(record["id"], path):
        return f"{path}: record id {record['id']!r} does not match its path"
    return _flatten(record)


def _coerce(name: str, values: list[Any]) -> pd.Series:
    """Pick a dtype from the values: nullable ints and booleans, floats, timestamps, text."""
    if name in TIMESTAMP_COLUMNS:
        return pd.to_datetime(_text(values), utc=True, format="ISO8601", errors="coerce")
    kinds = set(map(type, values)) - {type(None)}
    if kinds == {bool} or (not kinds and name in FLAG_COLUMNS):
        return pd.Series(values, dtype="boolean")
    if kinds == {int} or (not kinds and name in INTEGER_PARAMS):
        return pd.Series(values, dtype="Int64")
    if kinds and kinds <= {int, float}:
        return pd.Series(values, dtype="float64")  # None becomes NaN
    if kinds <= {str}:
        return _text(values)
    return _text([v if v is None or isinstance(v, str) else json.dumps(v) for v in values])


def _text(values: list[str | None]) -> pd.Series:
    """A text column, through Arrow: a third of the time pandas takes from a list."""
    return pd.Series(pa.array(values, type=pa.large_string()), dtype="str")


def _column_order(
    param_names: set[str], metric_columns: dict[str, dict[str, None]], versions: set[str]
) -> list[str]:
    """Record fields, params (grid ones first), metrics by name, check, provenance.

    The grid's parameters are columns even where no record has them (a grid of
    training only has no `dtype`, an empty grid nothing), so every analysis can
    select them and finds no rows rather than no column.
    """
    params = list(PARAM_ORDER)
    params += sorted(param_names - set(PARAM_ORDER))
    metrics = [column for name in sorted(metric_columns) for column in metric_columns[name]]
    return [
        *RECORD_COLUMNS,
        *params,
        *metrics,
        *CHECK_COLUMNS,
        *CONDITION_COLUMNS,
        *PAIRING_COLUMNS,
        *MEASURED_BY_COLUMNS,
        *UNIT_COLUMNS,
        *ENERGY_COLUMNS,
        *PROVENANCE_COLUMNS,
        *sorted(versions),
    ]


class _Columns:
    """Rows gathered column-wise: rows with the same keys share one block, so building the
    columns is one transpose per block rather than a lookup per cell."""

    def __init__(self) -> None:
        self.blocks: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}

    def add(self, keys: tuple[str, ...], values: tuple[Any, ...]) -> None:
        self.blocks.setdefault(keys, []).append(values)

    def columns(self, names: list[str]) -> dict[str, list[Any]]:
        gathered: dict[str, list[Any]] = {name: [] for name in names}
        for keys, rows in self.blocks.items():
            transposed = dict(zip(keys, zip(*rows, strict=True), strict=True))
            for name, values in gathered.items():
                values.extend(transposed.get(name) or [None] * len(rows))
        return gathered


def _clash(flat: _Flat) -> list[str]:
    """Names used twice across params, metric columns and record fields."""
    params, row, measured = set(flat.params), set(flat.row), set(flat.measured)
    return sorted((params & (row | measured)) | (measured & row))


class _Collection:
    """The records accepted so far, and what a further record must agree with: ids not
    read before, units of the same metric alike. What depends on a record's shape (its
    set of keys) alone is worked out once per shape."""

    def __init__(self) -> None:
        self.gathered = _Columns()
        self.clashes: dict[tuple[str, ...], list[str]] = {}
        self.accepted: set[tuple[str, ...]] = set()
        self.param_names: dict[str, None] = {}
        self.metric_columns: dict[str, dict[str, None]] = {}
        self.versions: set[str] = set()
        self.units: dict[str, str] = {}
        self.seen: dict[str, str] = {}

    def problem(self, path: str, flat: _Flat) -> str | None:
        """Why the record at `path` cannot join the others, or None."""
        clash = self.clashes.get(flat.shape)
        if clash is None:
            clash = self.clashes[flat.shape] = _clash(flat)
        conflicts = []
        if not flat.units.items() <= self.units.items():
            conflicts = [
                f"{column} in {unit!r}, earlier records use {self.units[column]!r}"
                for column, unit in flat.units.items()
                if self.units.get(column, unit) != unit
            ]
        record_id = flat.row["id"]
        if record_id in self.seen:
            return f"{path}: id {record_id!r} already read from {self.seen[record_id]}"
        if clash:
            return f"{path}: columns {clash} named twice (params, metrics, record fields)"
        if conflicts:
            return f"{path}: unit mismatch: {'; '.join(conflicts)}"
        return None

    def accept(self, path: str, flat: _Flat) -> None:
        self.seen[flat.row["id"]] = path
        self.units.update(flat.units)
        if flat.shape not in self.accepted:
            self.accepted.add(flat.shape)
            self.param_names.update(dict.fromkeys(flat.params))
            self.versions.update(name for name in flat.row if name.endswith(VERSION_SUFFIX))
            for name, columns in flat.metrics.items():
                self.metric_columns.setdefault(name, {}).update(dict.fromkeys(columns))
        self.gathered.add(
            flat.shape, (*flat.row.values(), *flat.params.values(), *flat.measured.values())
        )

    def frame(self) -> pd.DataFrame:
        """The accepted records, one row each, by id, with their units and params."""
        columns = _column_order(set(self.param_names), self.metric_columns, self.versions)
        frame = pd.DataFrame(
            {name: _coerce(name, values) for name, values in self.gathered.columns(columns).items()}
        )
        frame = frame.sort_values("id", kind="stable", ignore_index=True)
        frame.attrs["units"] = {
            column: self.units[column] for column in columns if column in self.units
        }
        frame.attrs["params"] = [column for column in columns if column in self.param_names]
        return frame


def collect(
    paths: Iterable[str | os.PathLike[str]],
) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Load every record into one table; returns (table, [(path, problem)]) for the bad files.

    A file is a problem if it is unreadable or not a valid record, if its id
    repeats one already read, if a params key or metric column has the name of
    another column, or if a metric's unit differs from the same metric's unit
    in the records read before it. Files are judged in path order, so the same
    set of files always gives the same table and the same problems. Records
    come in a few shapes (sets of keys); what depends on the shape alone is
    worked out once per shape.
    """
    paths = sorted(str(path) for path in paths)
    collection = _Collection()
    problems: list[tuple[str, str]] = []
    for path, flat in zip(paths, map(_load, paths), strict=True):
        problem = flat if isinstance(flat, str) else collection.problem(path, flat)
        if problem is None:
            collection.accept(path, flat)
        else:
            problems.append((path, problem))
    return judged(collection.frame()), problems


def with_invalid_records(frame: pd.DataFrame, problems: list[tuple[str, str]]) -> pd.DataFrame:
    """`frame` plus a row of status "invalid" for each unusable record of a result path,
    with the parameters its path names, so its table cell says "invalid record" instead
    of vanishing. Files that are not result paths (no cell has the name), and cells
    already in the table, add nothing."""
    rows, seen = [], set(frame["id"])
    for path, problem in problems:
        cell = grid.cell_of_path(path)
        if cell is None:
            continue
        try:
            exp = grid.experiment_of_id(cell[1])
        except grid.GridError:
            continue
        if exp.id not in seen:
            seen.add(exp.id)
            rows.append(
                {"id": exp.id, "experiment": exp.family, "status": INVALID, "reason": problem}
                | asdict(exp)
            )
    if not rows:
        return frame
    added = pd.DataFrame(rows).astype({"id": "str", "status": "str", "reason": "str"})
    combined = pd.concat([frame, added.reindex(columns=frame.columns)], ignore_index=True)
    for column in frame.columns:
        if combined[column].dtype != frame[column].dtype:
            combined[column] = combined[column].astype(frame[column].dtype)
    combined.attrs = frame.attrs
    return combined.sort_values("id", kind="stable", ignore_index=True)


def problems_warning(problems_csv: str | os.PathLike[str], shown: int = 5) -> str | None:
    """The warning a run ends with when some records could not be used; None if all could."""
    path = Path(problems_csv)
    if not path.is_file():
        return None
    problems = pd.read_csv(path)
    if problems.empty:
        return None
    lines = [
        f"WARNING: {len(problems)} result record(s) are invalid; the tables show their "
        f"cells as 'invalid record'. Delete and rerun them. All are listed in {path}:"
    ]
    lines += [f"  {row.problem}" for row in problems.head(shown).itertuples()]
    if len(problems) > shown:
        lines.append(f"  ... and {len(problems) - shown} more")
    return "\n".join(lines)


def interval_widths(frame: pd.DataFrame) -> pd.DataFrame:
    """Each record's widest interval among its family's figures of merit (precise_metrics):
    its relative half-width (`width`, a fraction of the median, the larger side) and its
    `span` (high / low); NaN where it has none."""
    widths, spans = [], []
    for name, family in FAMILIES.items():
        rows = frame[frame["experiment"] == name]
        for metric in family.precise_metrics:
            if rows.empty or f"{metric}_median" not in rows:
                continue
            median, low, high = (
                rows[f"{metric}_{field}"].astype(float) for field in ("median", "ci_low", "ci_high")
            )
            width = (high - median).where(high - median > median - low, median - low) / median
            widths.append(width.where(median.isna() | (median > 0), float("inf")))
            spans.append((high / low).where(low.isna() | (low > 0), float("inf")))
    if not widths:
        return pd.DataFrame({"width": float("nan"), "span": float("nan")}, index=frame.index)
    return pd.DataFrame(
        {
            name: pd.concat(values).groupby(level=0).max().reindex(frame.index)
            for name, values in (("width", widths), ("span", spans))
        }
    )


def device_kinds(frame: pd.DataFrame) -> pd.DataFrame:
    """Each record's device kind (cpu, cuda) and the model it names (the GPU's for a GPU,
    the CPU's for a CPU): the cells whose intervals are held against each other. A GPU
    resolves far finer than the shared CPUs of its host; nodes of one model pool their
    cells, where each alone would measure too few to tell."""
    kinds = {}
    for device in frame["device"].dropna().unique():
        try:
            kinds[device] = parse_device(device).kind
        except DeviceError:
            continue
    kind = frame["device"].map(kinds).astype("object")
    model = frame["gpu"].where(kind != "cpu", frame["cpu_model"]).astype("object")
    return pd.DataFrame({"kind": kind, "model": model.where(model.notna(), "")})


def _intervals(frame: pd.DataFrame) -> pd.DataFrame:
    """The records that ran: their widest interval (`interval_widths`), their device kind
    and model (`device_kinds`) and whether it is a rerun interval (param `interval`); one
    of a single run's jitter says nothing of reruns."""
    ran = frame[frame["status"] == "ok"]
    methods = ran["interval"] if "interval" in ran else pd.Series("", index=ran.index)
    rerun = methods.fillna("").astype(str).str.startswith(RERUN_INTERVAL_OPENING)
    return pd.concat([interval_widths(ran), device_kinds(ran), rerun.rename("rerun")], axis=1)


def _typical(intervals: pd.DataFrame) -> pd.DataFrame:
    grouped = intervals[intervals["rerun"]].groupby(["kind", "model"])["width"]
    found = grouped.agg(typical=precision.typical_width, cells="count").dropna()
    return found.astype({"typical": float})


def resolutions(frame: pd.DataFrame) -> pd.DataFrame:
    """What the machine resolves: the typical relative half-width of the rerun intervals
    of each device kind and model (precision.typical_width over the records that ran),
    and how many cells tell it, by (kind, model); kinds of too few cells are left out."""
    return _typical(_intervals(frame))


def _known(value: Any) -> float | None:
    return None if pd.isna(value) else float(value)


def precision_of(frame: pd.DataFrame) -> pd.DataFrame:
    """Each record that ran, judged by precision.imprecise_reason: its widest interval
    (`width`, `span`), the typical half-width of its device kind and model among these
    records (`typical`, `resolutions`; NaN where too few tell it, and for an interval of
    one run's jitter, which is not held against rerun intervals) and why it is imprecise
    (`reason`; None where it is not)."""
    intervals = _intervals(frame)
    typical = _typical(intervals)["typical"]
    keys = pd.MultiIndex.from_frame(intervals[["kind", "model"]])
    found = typical.reindex(keys).to_numpy() if len(typical) else float("nan")
    intervals["typical"] = pd.Series(found, index=intervals.index).where(intervals["rerun"])
    intervals["reason"] = pd.Series(
        [
            precision.imprecise_reason(row.width, row.span, _known(row.typical))
            if pd.notna(row.width)
            else None
            for row in intervals.itertuples()
        ],
        index=intervals.index,
        dtype="object",
    )
    return intervals


def judged(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with `imprecise` and `imprecise_reason` judged for every record that ran
    (`precision_of`): against the typical interval of its device kind and model among
    these records, not the goal its record was given; the same rule for this run, old
    records and a committed reference."""
    found = precision_of(frame)["reason"].reindex(frame.index)
    marked = frame.copy()
    ran = marked["status"] == "ok"
    marked["imprecise"] = found.notna().astype("boolean").where(ran, pd.NA)
    reasons = [reason if isinstance(reason, str) else None for reason in found]
    marked["imprecise_reason"] = _text(reasons).set_axis(frame.index)
    return marked


def flag_text(row: pd.Series) -> str:
    """Why a record that ran needs a second look: a busy machine, an interval clearly
    wider than its machine allows (`judged`), a low interval level; "" for none."""
    why = []
    if flagged(row.get("busy")):
        slowed, slowdown = row.get("host_slowed_runs"), row.get("host_slowdown")
        host = (
            f" (the host slowed {int(slowed)} of its runs: probe {slowdown:.2f}x its recent speed)"
            if pd.notna(slowed) and slowed and pd.notna(slowdown)
            else ""
        )
        why.append(f"measured while the machine was busy{host}")
    if flagged(row.get("imprecise")):
        reason = row.get("imprecise_reason")
        why.append(reason if pd.notna(reason) and reason else "less precise than it should be")
    if (level := weak_level(row)) is not None:
        why.append(f"its interval has a level of {level:.0%} only (too few samples)")
    return "; ".join(why)


def weak_level(row: pd.Series) -> float | None:
    """The lowest interval level among a record's figures of merit where it is below the
    95% asked (a single run of few samples); None where every one reaches it."""
    family = FAMILIES.get(row.get("experiment"))
    levels = [
        float(row[f"{name}_ci_level"])
        for name in (family.precise_metrics if family else ())
        if pd.notna(row.get(f"{name}_ci_level"))
    ]
    lowest = min(levels, default=None)
    return lowest if lowest is not None and lowest < CI_LEVEL else None


def flagged_warning(parquet: str | os.PathLike[str], shown: int = 10) -> str | None:
    """The note a run ends with when records ran busy or less precisely than asked (their
    cells are marked in the tables); None if none did or there is no table yet."""
    path = Path(parquet)
    if not path.is_file():
        return None
    frame = pd.read_parquet(path)
    ran = frame[frame["status"] == "ok"]
    texts = ran.apply(flag_text, axis=1) if len(ran) else pd.Series(dtype="str")
    marked = ran.assign(why=texts)[texts.astype(bool)] if len(ran) else ran
    if marked.empty:
        return None
    lines = [
        f"NOTE: {len(marked)} of {len(ran)} measured records are flagged busy or imprecise; "
        "tables mark them († busy, ◊ imprecise), figures draw them hollow, and "
        "results/attention.csv lists them:"
    ]
    lines += [f"  {row.id}: {row.why}" for row in marked.head(shown).itertuples()]
    if len(marked) > shown:
        lines.append(f"  ... and {len(marked) - shown} more")
    return "\n".join(lines)


def write(
    frame: pd.DataFrame, parquet_path: str | os.PathLike[str], csv_path: str | os.PathLike[str]
) -> None:
    """Parquet for the analysis (keeps dtypes and units), CSV for reading by eye or elsewhere.

    Both go through one Arrow table; Arrow's CSV writer is several times faster
    than pandas' on a table of 100,000 records. Each file is written under a
    temporary name and renamed, so an interrupted run leaves no partial table.
    """
    table = pa.Table.from_pandas(frame, preserve_index=False)
    for path, writer in (
        (Path(parquet_path), lambda target: pq.write_table(table, target)),
        (Path(csv_path), lambda target: pa_csv.write_csv(table, target, CSV_OPTIONS)),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        writer(partial)
        partial.replace(path)


def device_key(device: str) -> tuple[int, int, int, str]:
    """Natural device order: CPUs before GPUs, one node before several, then by count
    (cpu2 before cpu16 before 2x1cpu)."""
    try:
        parsed = parse_device(device)
    except DeviceError:
        return (2, 0, 0, device)
    return (int(parsed.is_gpu), parsed.nodes, parsed.count, device)


def natural_devices(devices: Iterable[Any]) -> list[str]:
    """The distinct devices in `devices`, in natural order."""
    return sorted({str(device) for device in devices if pd.notna(device)}, key=device_key)


def ordered(name: str, values: Iterable[Any]) -> list[Any]:
    """The distinct values of parameter `name` in reading order: devices naturally,
    precisions from wide to narrow, anything else sorted."""
    present = [value for value in dict.fromkeys(values) if pd.notna(value)]
    if name == "device":
        return natural_devices(present)
    known = VALUE_ORDER.get(name, ())
    rank = {value: index for index, value in enumerate(known)}
    return sorted(present, key=lambda value: (rank.get(value, len(known)), value))


def _sort_key(column: pd.Series) -> pd.Series:
    rank = {value: index for index, value in enumerate(ordered(str(column.name), column))}
    return column.map(rank)


def label_part(name: str, value: Any) -> str:
    """How a parameter value reads in a row label: grid parameters by their value alone
    (or as `LABEL_FORMATS` says), any other parameter as name=value."""
    if name in LABEL_FORMATS:
        return LABEL_FORMATS[name](value)
    if name in PARAM_ORDER:
        return str(value)
    return f"{name}={value}"


def row_label(row: pd.Series, params: list[str]) -> str:
    """A row's label: the first parameter's value, then the others as `label_part` says."""
    primary, *others = params
    parts = [str(row[primary])]
    parts += [label_part(name, row[name]) for name in others if pd.notna(row[name])]
    return ", ".join(parts)


def experiment_rows(
    frame: pd.DataFrame, experiment: str, across: str = "device"
) -> tuple[pd.DataFrame, list[str]]:
    """Rows of one experiment, sorted, with a `label` column; also the constant parameters.

    `across` is the parameter a table spreads over its columns (the device in
    the classic table). The label holds the primary parameter (model or kernel),
    every grid parameter that varies across these rows and, where two records
    would still share a table cell, the other parameters that tell them apart,
    whatever parameters the records carry. The constant grid parameters are
    returned as text so that a caption can state them instead of repeating them
    on every row. The parameters the label is made of are in the rows'
    `attrs["label_params"]`.
    """
    rows = frame[frame["experiment"] == experiment]
    if rows.empty:
        empty = rows.assign(label=pd.Series(dtype="str"))
        empty.attrs["label_params"] = []
        return empty, []
    # Named by the primary parameter always, the secondary ones only where they vary.
    family = FAMILIES[experiment]
    primary = family.primary
    known = [name for name in (*family.secondary, "device") if name in rows.columns]
    others = [name for name in frame.attrs.get("params", []) if name not in (*known, primary)]
    candidates = [name for name in known if name != across]
    varying = [name for name in candidates if rows[name].nunique(dropna=False) > 1]
    # Other parameters (settings such as steps or seed) join the label only where they
    # are needed to tell two records in the same table cell apart.
    cell = [primary, *varying, *([across] if across in rows.columns else [])]
    for name in others:
        if not rows.duplicated(subset=cell).any():
            break
        if name != across and rows[name].nunique(dropna=False) > 1:
            varying.append(name)
            cell.append(name)
    constants = [
        label_part(name, rows[name].dropna().iloc[0])
        for name in known
        if name in candidates and name not in varying and rows[name].notna().any()
    ]
    rows = rows.sort_values([primary, *varying], kind="stable", na_position="last", key=_sort_key)

    params = [primary, *varying]
    labelled = rows.assign(label=rows.apply(row_label, axis=1, params=params).astype("str"))
    labelled.attrs["label_params"] = params
    return labelled, constants


def compared_rows(
    frame: pd.DataFrame, experiment: str, across: str
) -> tuple[pd.DataFrame, list[str]]:
    """`experiment_rows` of only the configurations measured for two or more values of
    `across`, labelled anew: a comparison across precisions says nothing about a model
    measured in one, and parameters that no longer vary move to the caption."""
    rows, _ = experiment_rows(frame, experiment, across)
    if rows.empty or across not in rows.columns:
        return experiment_rows(frame.iloc[:0], experiment, across)
    spread = rows.groupby("label")[across].nunique()
    kept = rows.loc[rows["label"].isin(spread.index[spread > 1]), "id"]
    return experiment_rows(frame[frame["id"].isin(kept)], experiment, across)

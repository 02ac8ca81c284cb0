"""All result records -> one tidy table, one row per record.

Every table and figure is built from this table, so they all agree. A file
that is not a valid record is reported with its path, never dropped silently,
and never stops the other records from being read. Units travel with the table
in `DataFrame.attrs["units"]` (kept by Parquet), so axis labels cannot drift
from what was measured.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from accelbench.devices import DeviceError, parse_device
from accelbench.results import RecordError, load_record

RECORD_COLUMNS = ("id", "experiment", "status", "reason")
# Grid parameters first, in the order of the result paths; other params follow sorted.
PARAM_ORDER = (
    "kernel",
    "model",
    "device",
    "backend",
    "dtype",
    "size",
    "precision",
    "strategy",
    "batch",
)
DISTRIBUTION_FIELDS = ("median", "q1", "q3", "ci_low", "ci_high", "ci_level", "n")
CHECK_COLUMNS = ("check_passed", "check_relative_error")
PROVENANCE_COLUMNS = (
    "host",
    "cpu_model",
    "gpu",
    "git_commit",
    "config_hash",
    "slurm_job_id",
    "slurm_partition",
    "slurm_node",
    "started",
    "finished",
)
TIMESTAMP_COLUMNS = ("started", "finished")
STATUS_TEXT = {"oom": "OOM", "unavailable": "n/a", "failed": "failed", "skipped": "skipped"}

# How each experiment's rows are named in tables and figures: the primary
# parameter always, the secondary ones only where they vary.
PRIMARY = {"train": "model", "kernel": "kernel"}
SECONDARY = {"train": ("precision", "strategy", "batch"), "kernel": ("backend", "dtype", "size")}
LABEL_FORMATS = {"batch": "batch {}", "size": "n={}"}


def _metric_columns(name: str, metric: dict[str, Any]) -> dict[str, Any]:
    if "median" in metric:
        return {f"{name}_{field}": metric.get(field) for field in DISTRIBUTION_FIELDS}
    return {name: metric["value"]}


def _metric_units(name: str, metric: dict[str, Any]) -> dict[str, str]:
    if "median" in metric:
        return {
            f"{name}_{field}": metric["unit"]
            for field in DISTRIBUTION_FIELDS
            if field not in ("n", "ci_level")
        }
    return {name: metric["unit"]}


def _provenance_columns(provenance: dict[str, Any]) -> dict[str, Any]:
    gpus = (provenance.get("accelerator") or {}).get("gpus") or []
    slurm = provenance.get("slurm") or {}
    return {
        "host": provenance.get("host"),
        "cpu_model": provenance.get("cpu_model"),
        "gpu": gpus[0] if gpus else None,
        "git_commit": (provenance.get("git") or {}).get("commit"),
        "config_hash": provenance.get("config_hash"),
        "slurm_job_id": slurm.get("job_id"),
        "slurm_partition": slurm.get("partition"),
        "slurm_node": slurm.get("node"),
        "started": provenance.get("started"),
        "finished": provenance.get("finished"),
    }


def _flatten(
    record: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, dict[str, Any]], dict[str, str]]:
    """One record's (record/check/provenance columns, params, metric columns by metric, units)."""
    row = {key: record[key] for key in RECORD_COLUMNS}
    check = record["check"] or {}
    row["check_passed"] = check.get("passed")
    row["check_relative_error"] = check.get("relative_error")
    row.update(_provenance_columns(record["provenance"]))
    metrics = {name: _metric_columns(name, metric) for name, metric in record["metrics"].items()}
    units: dict[str, str] = {}
    for name, metric in record["metrics"].items():
        units.update(_metric_units(name, metric))
    return row, dict(record["params"]), metrics, units


def _coerce(name: str, values: list[Any]) -> pd.Series:
    """Pick a dtype from the values: nullable ints and booleans, floats, timestamps, text."""
    if name in TIMESTAMP_COLUMNS:
        return pd.to_datetime(
            pd.Series(values, dtype="str"), utc=True, format="ISO8601", errors="coerce"
        )
    present = [value for value in values if value is not None]
    if present and all(isinstance(value, bool) for value in present):
        return pd.Series(values, dtype="boolean")
    if present and all(isinstance(value, int) and not isinstance(value, bool) for value in present):
        return pd.Series(values, dtype="Int64")
    if present and all(
        isinstance(value, int | float) and not isinstance(value, bool) for value in present
    ):
        return pd.Series(
            [float("nan") if value is None else value for value in values], dtype="float64"
        )
    return pd.Series(
        [
            value if value is None or isinstance(value, str) else json.dumps(value)
            for value in values
        ],
        dtype="str",
    )


def _column_order(param_names: set[str], metric_columns: dict[str, dict[str, None]]) -> list[str]:
    """Record fields, params (grid ones first), metrics by name, check, provenance."""
    params = [name for name in PARAM_ORDER if name in param_names]
    params += sorted(param_names - set(PARAM_ORDER))
    metrics = [column for name in sorted(metric_columns) for column in metric_columns[name]]
    return [*RECORD_COLUMNS, *params, *metrics, *CHECK_COLUMNS, *PROVENANCE_COLUMNS]


def collect(
    paths: Iterable[str | os.PathLike[str]],
) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Load every record into one table; returns (table, [(path, problem)]) for the bad files.

    A file is a problem if it is unreadable or not a valid record, if its id
    repeats one already read, if a params key or metric column has the name of
    another column, or if a metric's unit differs from the same metric's unit
    in the records read before it.
    """
    rows: list[dict[str, Any]] = []
    param_names: set[str] = set()
    metric_columns: dict[str, dict[str, None]] = {}
    units: dict[str, str] = {}
    seen: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for path in sorted(str(path) for path in paths):
        try:
            row, params, metrics, record_units = _flatten(load_record(path))
        except (RecordError, OSError, UnicodeDecodeError) as err:
            problems.append((path, str(err)))
            continue
        except (AttributeError, KeyError, TypeError) as err:
            problems.append((path, f"{path}: malformed record ({type(err).__name__}: {err})"))
            continue
        measured = {
            column: value for columns in metrics.values() for column, value in columns.items()
        }
        clash = sorted((set(params) & (set(row) | set(measured))) | (set(measured) & set(row)))
        conflicts = [
            f"{column} in {unit!r}, earlier records use {units[column]!r}"
            for column, unit in record_units.items()
            if units.get(column, unit) != unit
        ]
        if row["id"] in seen:
            problems.append((path, f"{path}: id {row['id']!r} already read from {seen[row['id']]}"))
        elif clash:
            problems.append(
                (path, f"{path}: columns {clash} named twice (params, metrics, record fields)")
            )
        elif conflicts:
            problems.append((path, f"{path}: unit mismatch: {'; '.join(conflicts)}"))
        else:
            seen[row["id"]] = path
            units.update(record_units)
            param_names.update(params)
            for name, columns in metrics.items():
                metric_columns.setdefault(name, {}).update(dict.fromkeys(columns))
            rows.append({**row, **params, **measured})
    columns = _column_order(param_names, metric_columns)
    rows.sort(key=lambda row: row["id"])
    frame = pd.DataFrame({name: _coerce(name, [row.get(name) for row in rows]) for name in columns})
    frame.attrs["units"] = {column: units[column] for column in columns if column in units}
    return frame, problems


def write(
    frame: pd.DataFrame, parquet_path: str | os.PathLike[str], csv_path: str | os.PathLike[str]
) -> None:
    """Parquet for the analysis (keeps dtypes and units), CSV for reading by eye or elsewhere."""
    for path in (parquet_path, csv_path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(parquet_path, index=False)
    frame.to_csv(csv_path, index=False)


def device_key(device: str) -> tuple[int, int, str]:
    """Natural device order: CPUs before GPUs, then by count (cpu2 before cpu16)."""
    try:
        parsed = parse_device(device)
    except DeviceError:
        return (2, 0, device)
    return (int(parsed.is_gpu), parsed.count, device)


def natural_devices(devices: Iterable[Any]) -> list[str]:
    """The distinct devices in `devices`, in natural order."""
    return sorted({str(device) for device in devices if pd.notna(device)}, key=device_key)


def experiment_rows(frame: pd.DataFrame, experiment: str) -> tuple[pd.DataFrame, list[str]]:
    """Rows of one experiment, sorted, with a `label` column; also the constant parameters.

    The label holds the primary parameter (model or kernel) and each secondary
    one that varies across these rows; the constant ones are returned as text
    so that a caption can state them instead of repeating them on every row.
    """
    rows = frame[frame["experiment"] == experiment]
    primary = PRIMARY[experiment]
    secondary = [name for name in SECONDARY[experiment] if name in rows.columns]
    varying = [name for name in secondary if rows[name].nunique(dropna=False) > 1]
    constants = [
        LABEL_FORMATS.get(name, "{}").format(rows[name].iloc[0])
        for name in secondary
        if name not in varying and rows[name].notna().any()
    ]
    if rows.empty:
        return rows.assign(label=pd.Series(dtype="str")), constants
    rows = rows.sort_values([primary, *varying], kind="stable", na_position="last")

    def label(row: pd.Series) -> str:
        parts = [str(row[primary])]
        parts += [
            LABEL_FORMATS.get(name, "{}").format(row[name])
            for name in varying
            if pd.notna(row[name])
        ]
        return ", ".join(parts)

    return rows.assign(label=rows.apply(label, axis=1).astype("str")), constants

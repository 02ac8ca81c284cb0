"""The result record: one JSON file per experiment, written atomically.

Every experiment yields a record, including the ones that could not run, so a
table never loses a cell silently. A crash mid-write never leaves a file that
looks valid: the record is written to a temporary file in the same directory
and renamed over the target only once it is complete.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from accelbench.energy import validate_section as validate_energy

SCHEMA_VERSION = 1
# skipped: deliberately not run (e.g. naive Python above its size limit), with the reason.
STATUSES = ("ok", "unavailable", "oom", "failed", "skipped")
# Optional: per-step values, name -> {"unit": str, "values": [number or null, ...]}
# (e.g. the loss of every training step); metrics hold the summaries.
SERIES_KEY = "series"
# Optional: what else the machine did during the measurement (accelbench.contention),
# with "busy": true where it stayed above the limit after the retries.
CONDITIONS_KEY = "conditions"
# Optional: the raw samples behind the distribution metrics, run by run,
# name -> {"unit": str, "runs": [[number or null, ...], ...]}.
RAW_KEY = "raw"
# Optional: what measured it, {"implementation": "module:variant", "timer": str}.
MEASURED_BY_KEY = "measured_by"
# Optional: the energy of the measured work (accelbench.energy): "ok" with the method, the
# idle baseline and each window, or "too_short"/"unavailable" with the reason.
ENERGY_KEY = "energy"
# Optional, on a "failed" record only: true where the failure was a passing fault (a full
# disk, a process killed from outside other than by the OOM killer; accelbench.outcome), so
# the workflow's next run measures the cell again instead of keeping the record.
TRANSIENT_KEY = "transient"
REQUIRED_KEYS = (
    "schema_version",
    "experiment",
    "id",
    "status",
    "reason",
    "params",
    "metrics",
    "check",
    "provenance",
)


class RecordError(ValueError):
    """A file that is not a valid result record; the message names the file and the defect."""


def make_record(
    *,
    experiment: str,
    experiment_id: str,
    status: str,
    params: dict[str, Any],
    provenance: dict[str, Any],
    metrics: dict[str, Any] | None = None,
    check: dict[str, Any] | None = None,
    reason: str | None = None,
    series: dict[str, Any] | None = None,
    conditions: dict[str, Any] | None = None,
    raw: dict[str, Any] | None = None,
    measured_by: dict[str, str] | None = None,
    energy: dict[str, Any] | None = None,
    transient: bool = False,
) -> dict[str, Any]:
    """Assemble a record and validate it, so an invalid one is never written."""
    record = {
        "schema_version": SCHEMA_VERSION,
        "experiment": experiment,
        "id": experiment_id,
        "status": status,
        "reason": reason,
        "params": params,
        "metrics": metrics or {},
        "check": check,
        "provenance": provenance,
    }
    if series:
        record[SERIES_KEY] = series
    if conditions:
        record[CONDITIONS_KEY] = conditions
    if raw:
        record[RAW_KEY] = raw
    if measured_by:
        record[MEASURED_BY_KEY] = measured_by
    if energy:
        record[ENERGY_KEY] = energy
    if transient:
        record[TRANSIENT_KEY] = True
    validate_record(record)
    return record


def validate_record(record: Any, source: str = "record") -> None:
    """Raise RecordError if `record` breaks the record contract."""
    if not isinstance(record, dict):
        raise RecordError(f"{source}: expected a JSON object, got {type(record).__name__}")
    missing = [key for key in REQUIRED_KEYS if key not in record]
    if missing:
        raise RecordError(f"{source}: missing keys {missing}")
    if record["schema_version"] != SCHEMA_VERSION:
        raise RecordError(
            f"{source}: schema_version {record['schema_version']!r}, expected {SCHEMA_VERSION}"
        )
    status = record["status"]
    if status not in STATUSES:
        raise RecordError(f"{source}: status {status!r} is not one of {list(STATUSES)}")
    if status == "ok":
        if not record["metrics"]:
            raise RecordError(f"{source}: status 'ok' but no metrics")
    elif not record["reason"]:
        raise RecordError(f"{source}: status {status!r} needs a reason")
    for key in ("params", "metrics", "provenance"):
        if not isinstance(record[key], dict):
            raise RecordError(f"{source}: {key!r} must be an object")
    for name, metric in record["metrics"].items():
        if not isinstance(metric, dict) or "unit" not in metric:
            raise RecordError(f"{source}: metric {name!r} must be an object with a 'unit'")
        if "median" not in metric and "value" not in metric:
            raise RecordError(f"{source}: metric {name!r} has neither 'median' nor 'value'")
        for stat, number in metric.items():
            if stat != "unit" and number is not None and not isinstance(number, int | float):
                raise RecordError(f"{source}: metric {name}.{stat} is not a number: {number!r}")
    _validate_series(record.get(SERIES_KEY, {}), source)
    conditions = record.get(CONDITIONS_KEY, {"busy": False})
    if not isinstance(conditions, dict) or not isinstance(conditions.get("busy"), bool):
        raise RecordError(f"{source}: {CONDITIONS_KEY!r} must be an object with a boolean 'busy'")
    _validate_raw(record.get(RAW_KEY, {}), source)
    measured_by = record.get(MEASURED_BY_KEY, {"implementation": "", "timer": ""})
    if not isinstance(measured_by, dict) or not all(
        isinstance(measured_by.get(key), str) for key in ("implementation", "timer")
    ):
        raise RecordError(
            f"{source}: {MEASURED_BY_KEY!r} must be an object with text "
            "'implementation' and 'timer'"
        )
    if ENERGY_KEY in record and (problem := validate_energy(record[ENERGY_KEY])):
        raise RecordError(f"{source}: {ENERGY_KEY!r} {problem}")
    if TRANSIENT_KEY in record and (record[TRANSIENT_KEY] is not True or status != "failed"):
        raise RecordError(f"{source}: {TRANSIENT_KEY!r} is only ever true, on a 'failed' record")


def _validate_raw(raw: Any, source: str) -> None:
    if not isinstance(raw, dict):
        raise RecordError(f"{source}: {RAW_KEY!r} must be an object")
    for name, entry in raw.items():
        if (
            not isinstance(entry, dict)
            or set(entry) != {"unit", "runs"}
            or not isinstance(entry["unit"], str)
            or not isinstance(entry["runs"], list)
            or not all(isinstance(run, list) for run in entry["runs"])
        ):
            raise RecordError(
                f"{source}: raw {name!r} must be an object with a text 'unit' and 'runs', "
                "a list of lists of samples"
            )
        for index, run in enumerate(entry["runs"]):
            if not all(sample is None or _is_number(sample) for sample in run):
                raise RecordError(
                    f"{source}: raw {name}, run {index + 1}: a sample is not a number"
                )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _validate_series(series: Any, source: str) -> None:
    if not isinstance(series, dict):
        raise RecordError(f"{source}: {SERIES_KEY!r} must be an object")
    for name, entry in series.items():
        if not isinstance(entry, dict) or set(entry) != {"unit", "values"}:
            raise RecordError(
                f"{source}: series {name!r} must be an object with 'unit' and 'values'"
            )
        if not isinstance(entry["unit"], str) or not isinstance(entry["values"], list):
            raise RecordError(f"{source}: series {name!r} needs a text 'unit' and a list 'values'")
        for index, number in enumerate(entry["values"]):
            if number is not None and (
                isinstance(number, bool) or not isinstance(number, int | float)
            ):
                raise RecordError(f"{source}: series {name}[{index}] is not a number: {number!r}")


def _finite_or_none(obj: Any) -> Any:
    """JSON has no NaN/Infinity; store them as null so every reader can parse the file."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {key: _finite_or_none(value) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite_or_none(value) for value in obj]
    return obj


def _current_umask() -> int:
    """The process umask (reading it means setting it; it is set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_record(path: str | os.PathLike[str], record: dict[str, Any]) -> Path:
    """Validate and write `record` to `path` atomically (temp file, fsync, rename)."""
    validate_record(record, str(path))
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_finite_or_none(record), indent=2, sort_keys=True, allow_nan=False)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
            handle.flush()
            # mkstemp makes the file 0600, and the mode survives the rename: give it the
            # mode any other new file gets, so colleagues on a shared file system can read it.
            os.fchmod(handle.fileno(), 0o666 & ~_current_umask())
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    if record.get(TRANSIENT_KEY):
        _flag_transient(target)
    return target


def load_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate one record; RecordError names the file and what is wrong."""
    try:
        with open(path, "rb") as handle:  # bytes: json decodes UTF-8 itself, and faster
            record = json.loads(handle.read())
    except json.JSONDecodeError as err:
        raise RecordError(f"{path}: not valid JSON ({err})") from err
    validate_record(record, str(path))
    return record


def retry_flag(path: str | os.PathLike[str]) -> Path:
    """The hidden file beside a record that failed by a passing fault, a second newer than the
    record: the workflow asks for it as the record's input where it exists
    (grid.target_check), so Snakemake measures the experiment again. It stays once the cell
    is measured (older than the new record then): were it removed, Snakemake would see the
    experiment's inputs change and measure it yet again."""
    path = Path(path)
    return path.with_name(f".{path.name}.retry")


def _flag_transient(path: Path) -> None:
    """Give a transient record just written its retry flag (file times move in clock ticks:
    a flag written right after the record could bear the same time)."""
    flag = retry_flag(path)
    flag.touch()
    newer = path.stat().st_mtime_ns + 1_000_000_000
    os.utime(flag, ns=(newer, newer))


# Below results/: previous versions of records that were measured again, one folder per run.
REPLACED_DIR = "replaced"


def ensure_writable(results: Path) -> None:
    """Refuse a run whose results folder cannot be written, before anything is measured,
    in one line (not the traceback of the first write that fails)."""
    try:
        results.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=results):
            pass
    except OSError as err:
        raise OSError(
            err.errno,
            f"cannot write to {results}/ ({err.strerror}): the workflow writes its records, "
            "logs and tables there; make it writable, or run in a checkout you can write to",
        ) from None


def replaced_folder(results: Path) -> Path:
    """The folder of this run's replaced records: results/replaced/<run start>."""
    return results / REPLACED_DIR / time.strftime("%Y-%m-%dT%H%M%S")


def attempt_log(log_file: str | os.PathLike[str], attempt: int | str) -> Path:
    """Where the log of a job's failed attempt is kept, beside the job's log
    (`n64.log` -> `n64.attempt1.log`): Snakemake empties the log before the next attempt.
    `attempt` "*" gives the pattern of them all."""
    log_path = Path(log_file)
    return log_path.with_name(f"{log_path.stem}.attempt{attempt}{log_path.suffix}")


def keep_replaced(
    paths: Iterable[str | os.PathLike[str]], results: Path, archive: Path
) -> list[Path]:
    """Copy each existing file under `results` about to be replaced (the records measured again,
    the logs of their jobs) to `archive`, and move there the logs of their jobs' failed
    attempts (attempt_log). Returns the copies.

    Snakemake removes a job's old output and log before the job runs and again when it
    fails, also when it fails before it ran (a submission Slurm refused), so without this
    copy a valid measurement could be lost for none. Each copy is written whole or not at
    all (temporary file, fsync, rename): a disk that fills meanwhile stops the run with
    the record still in its place, and no truncated copy.
    """
    kept = []
    for path in map(Path, paths):
        if path.is_file():
            kept.append(_archive(path, archive / path.relative_to(results)))
        for attempt in sorted(path.parent.glob(attempt_log(path, "*").name)):
            kept.append(_archive(attempt, archive / attempt.relative_to(results)))
            attempt.unlink()
    return kept


def _archive(path: Path, copy: Path) -> Path:
    """`path` copied to `copy` atomically, with its times."""
    partial = None
    try:
        copy.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(prefix=f".{copy.name}.", suffix=".tmp", dir=copy.parent)
        os.close(fd)
        shutil.copyfile(path, partial)
        with open(partial, "rb") as written:
            os.fsync(written.fileno())
        shutil.copystat(path, partial)
        os.replace(partial, copy)
    except BaseException as err:
        if partial is not None:
            Path(partial).unlink(missing_ok=True)
        if isinstance(err, OSError):
            why = f"cannot keep {path} before it is measured again: {err}"
            raise OSError(err.errno, why) from err
        raise
    return copy

"""Comparing two runs: the cells that changed beyond their confidence intervals.

A cell is one experiment (its id, the same in both runs because it is built
from the parameters) and one measured metric. A change counts only where the
two 95% confidence intervals of the median do not overlap; a change inside
them is noise, however large the medians' difference looks. A regression is
such a change in the bad direction (a time up, a rate such as GFLOP/s down)
that slows the cell by more than the threshold, or a cell that ran before and
now fails or runs out of memory. A cell that ran before and is now missing, or
whose new record is invalid, is lost, and a lost cell is a regression too;
other cells in one run only are listed, not judged. Runs of two different grids
are compared on the cells both have (`common`, `--common`): the others are
counted, not judged. A slowdown beyond the
threshold in a cell that either run measured on a busy machine (its record is
flagged busy: accelbench.measuring.contention) is listed as "slower, busy machine", not
as a regression: the machine, not the code, may have slowed it. An invalid
record is never "unchanged": where the old record did not run it is listed as
"invalid record". A metric that both records ran but only the old one holds is
lost too; a row of a tidy table that says ok but lacks its family's primary
time (results.time_metrics) counts as an invalid record.

The verdicts feed a CI gate: `accelbench compare OLD NEW` exits non-zero when
any cell regressed.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd

from accelbench.analysis import provenance_summary, ratios, tables, tidy
from accelbench.families import FAMILIES, Family
from accelbench.records import record as results

REGRESSION = "regression"
BUSY_SLOWER = "slower, busy machine"
VERDICTS = (
    REGRESSION,  # slower beyond the CIs by more than the threshold; ok -> failed/oom/lost
    BUSY_SLOWER,  # as a regression, but either run was measured on a busy machine
    "slower",  # slower beyond the CIs, by less than the threshold
    "faster",  # faster beyond the CIs
    "now runs",  # did not run before, runs now
    "not run",  # ran before, now unavailable or skipped (another machine, not a defect)
    "status changed",  # did not run in either, for different reasons
    "invalid record",  # invalid in either run, and the old one did not run ok
    "added",  # only in the new run
    "removed",  # only in the old run, where it did not run either
    "unchanged",  # both ran and the CIs overlap, or neither ran, for the same reason
)
BROKEN = ("failed", "oom", tidy.INVALID)
INVALID_RECORD = "invalid record"
STATUS_METRIC = "status"


class Verdict(TypedDict, total=False):
    """One row of the comparison: a cell's verdict on one metric, with both runs' numbers, or
    on its status alone (STATUS_METRIC) where it did not run in both."""

    verdict: str
    id: str
    metric: str
    unit: str | None
    old_status: str | None
    new_status: str | None
    old_median: float
    old_ci_low: float
    old_ci_high: float
    new_median: float
    new_ci_low: float
    new_ci_high: float
    change: float
    slowdown: float
    busy: bool


# The comparison's columns: a Verdict's keys, in order.
COLUMNS = tuple(Verdict.__annotations__)


class CompareError(ValueError):
    """A run that cannot be read; the message names the path and what was expected."""


def load_run(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """A run's tidy table and its invalid records: from the records under a directory (the
    source of truth), else its tidy.parquet, or from a tidy .parquet file itself."""
    path = Path(path)
    if path.is_file() and path.suffix == ".parquet":
        return pd.read_parquet(path), []
    if path.is_dir():
        records = results.record_files(path)
        if records:
            frame, problems = tidy.collect(records)
            return tidy.with_invalid_records(frame, problems), problems
        if (path / "tidy.parquet").is_file():
            return pd.read_parquet(path / "tidy.parquet"), []
        raise CompareError(f"{path}: no result records (*.json) and no tidy.parquet in it")
    if path.exists():
        raise CompareError(f"{path}: expected a result directory or a tidy .parquet file")
    raise CompareError(f"{path}: no such file or directory")


def distribution_metrics(frame: pd.DataFrame) -> list[str]:
    """Metrics with a median and its CI in the table, by name."""
    return sorted(
        column.removesuffix("_median")
        for column in frame.columns
        if column.endswith("_median")
        and {column.replace("_median", "_ci_low"), column.replace("_median", "_ci_high")}
        <= set(frame.columns)
    )


def default_metrics(old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    """The measured times (unit s) of either run: the figures of merit; rates derived from
    them would count the same change twice."""
    units = {**old.attrs.get("units", {}), **new.attrs.get("units", {})}
    found = set(distribution_metrics(old)) | set(distribution_metrics(new))
    return sorted(metric for metric in found if units.get(f"{metric}_median") == "s")


def _numbers(row: pd.Series, side: str, metric: str) -> tuple[float, float, float]:
    return tuple(  # type: ignore[return-value]
        float(row.get(f"{side}_{metric}_{field}", math.nan))
        for field in ("median", "ci_low", "ci_high")
    )


def _status_verdict(old: Any, new: Any) -> str:
    """The verdict of a cell that did not run ok in both runs."""
    if old == "ok" and (pd.isna(new) or new in BROKEN):
        return REGRESSION
    if tidy.INVALID in (old, new):
        return INVALID_RECORD
    if pd.isna(new):
        return "removed"
    if pd.isna(old):
        return "added"
    if old == "ok":
        return "not run"
    if new == "ok":
        return "now runs"
    return "unchanged" if old == new else "status changed"


def _metric_verdict(
    before: tuple[float, float, float],
    after: tuple[float, float, float],
    rate: bool,
    threshold: float,
) -> tuple[str, float, float]:
    """(verdict, relative change of the median, slowdown) of one metric in one cell."""
    (old, old_low, old_high), (new, new_low, new_high) = before, after
    change = new / old - 1 if old else math.nan
    slowdown = (old / new if rate else new / old) - 1 if old and new else math.nan
    if new_low <= old_high and new_high >= old_low:
        return "unchanged", change, slowdown
    if slowdown > 0:
        return (REGRESSION if slowdown > threshold else "slower"), change, slowdown
    return "faster", change, slowdown


def one_run_only(old: pd.DataFrame, new: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The ids of the cells only the old run has, and of those only the new one has."""
    before, after = set(old["id"]), set(new["id"])
    return sorted(before - after), sorted(after - before)


def _checked_metrics(old: pd.DataFrame, new: pd.DataFrame, metrics: list[str] | None) -> list[str]:
    """The metrics to compare (by default those both runs share); an error names any that
    neither run measured with an interval."""
    metrics = default_metrics(old, new) if metrics is None else metrics
    known = set(distribution_metrics(old)) | set(distribution_metrics(new))
    unknown = [metric for metric in metrics if metric not in known]
    if unknown:
        raise CompareError(
            f"metric {', '.join(unknown)} not in either run; "
            f"measured with an interval: {', '.join(sorted(known)) or 'none'}"
        )
    return metrics


def _side(frame: pd.DataFrame, name: str, metrics: list[str]) -> pd.DataFrame:
    """One run's status, busy flag and numbers of `metrics`, by id, prefixed with `name`."""
    wanted = [
        f"{metric}_{field}"
        for metric in metrics
        for field in ("median", "ci_low", "ci_high")
        if f"{metric}_{field}" in frame.columns
    ]
    flags = ["busy"] if "busy" in frame.columns else []
    part = frame[["id", "status", *flags, *wanted]].set_index("id")
    return part.add_prefix(f"{name}_")


def _metric_row(cell: pd.Series, metric: str, unit: str | None, threshold: float) -> Verdict | None:
    """The verdict on one metric of a cell that ran in both runs; None where neither run
    has the metric (not one of this experiment)."""
    old_numbers, new_numbers = _numbers(cell, "old", metric), _numbers(cell, "new", metric)
    had, has = math.isfinite(old_numbers[0]), math.isfinite(new_numbers[0])
    if not (had or has):
        return None
    if had and has:
        verdict, change, slowdown = _metric_verdict(
            old_numbers, new_numbers, ratios.is_rate(unit), threshold
        )
    else:  # measured in one run only: lost, or added
        verdict, change, slowdown = (REGRESSION if had else "added"), math.nan, math.nan
    busy = tidy.flagged(cell.get("old_busy")) or tidy.flagged(cell.get("new_busy"))
    if verdict == REGRESSION and busy:
        verdict = BUSY_SLOWER
    return {
        "verdict": verdict,
        "id": cell["id"],
        "metric": metric,
        "unit": unit,
        "old_status": cell.get("old_status"),
        "new_status": cell.get("new_status"),
        "old_median": old_numbers[0],
        "old_ci_low": old_numbers[1],
        "old_ci_high": old_numbers[2],
        "new_median": new_numbers[0],
        "new_ci_low": new_numbers[1],
        "new_ci_high": new_numbers[2],
        "change": change,
        "slowdown": slowdown,
        "busy": busy,
    }


def _cell_rows(
    cell: pd.Series, metrics: list[str], units: dict[str, str], threshold: float
) -> list[Verdict]:
    """The verdicts on one cell: on its status where it did not run in both runs, else on
    each of its metrics."""
    before, after = cell.get("old_status"), cell.get("new_status")
    if not (before == "ok" and after == "ok"):
        return [
            {
                "verdict": _status_verdict(before, after),
                "id": cell["id"],
                "metric": STATUS_METRIC,
                "old_status": before,
                "new_status": after,
            }
        ]
    rows = [
        _metric_row(cell, metric, units.get(f"{metric}_median"), threshold) for metric in metrics
    ]
    return [row for row in rows if row is not None]


def compare(
    old: pd.DataFrame,
    new: pd.DataFrame,
    metrics: list[str] | None = None,
    threshold: float = 0.1,
    common: bool = False,
) -> pd.DataFrame:
    """One row per cell that was compared, with its verdict (see VERDICTS) and numbers.

    `slowdown` is how much slower the new median is (0.2: takes 20% longer), for
    times new/old - 1 and for rates old/new - 1, so the threshold means the same
    for both; a regression needs it above `threshold` and the CIs apart. With
    `common`, only the cells both runs have are compared (runs of two grids): a
    cell the new run lacks is then left out, not lost.
    """
    if common:
        shared = set(old["id"]) & set(new["id"])
        old, new = _only(old, shared), _only(new, shared)
    if threshold < 0:
        raise CompareError(f"threshold must be >= 0, got {threshold}")
    metrics = _checked_metrics(old, new, metrics)
    units = {**old.attrs.get("units", {}), **new.attrs.get("units", {})}
    old, new = _with_times(old), _with_times(new)
    merged = _side(old, "old", metrics).join(_side(new, "new", metrics), how="outer")
    rows = [
        row
        for _, cell in merged.reset_index().iterrows()
        for row in _cell_rows(cell, metrics, units, threshold)
    ]
    result = pd.DataFrame(rows, columns=list(COLUMNS))
    order = {verdict: index for index, verdict in enumerate(VERDICTS)}
    result = result.sort_values(
        ["verdict", "id", "metric"],
        key=lambda column: column.map(order) if column.name == "verdict" else column,
    )
    return result.reset_index(drop=True)


def _only(frame: pd.DataFrame, ids: set[str]) -> pd.DataFrame:
    kept = frame[frame["id"].isin(ids)]
    kept.attrs = frame.attrs
    return kept


def _with_times(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with each ok row that lacks its family's time (a tidy table read as it is,
    not made from records here) marked as an invalid record that says so."""
    lacking = pd.Series(False, index=frame.index)
    reasons = pd.Series("", index=frame.index)
    for family, name in results.time_metrics().items():
        column = f"{name}_median"
        missing = (frame["experiment"] == family) & (frame["status"] == "ok")
        missing &= frame[column].isna() if column in frame else True
        reasons[missing] = f"status ok, but no {name}"
        lacking |= missing
    if not lacking.any():
        return frame
    marked = frame.assign(status=frame["status"].mask(lacking, tidy.INVALID))
    marked["reason"] = frame["reason"].mask(lacking, reasons)
    marked.attrs = frame.attrs
    return marked


def _side_text(row: pd.Series, side: str) -> str:
    status = row[f"{side}_status"]
    if pd.isna(status) or (row["metric"] != STATUS_METRIC and pd.isna(row[f"{side}_median"])):
        return tables.MISSING
    if row["metric"] == STATUS_METRIC or status != "ok":
        return tidy.STATUS_TEXT.get(status, status)
    unit, factor = tables.readable_unit(
        row["unit"] if isinstance(row["unit"], str) else None,
        [row["old_median"], row["new_median"]],
    )
    numbers = [row[f"{side}_{field}"] / factor for field in ("median", "ci_low", "ci_high")]
    return tables.format_with_ci(*numbers) + (f" {unit}" if unit else "")


def report_text(
    result: pd.DataFrame,
    threshold: float,
    provenance: list[str],
    left_out: tuple[list[str], list[str]] | None = None,
) -> str:
    """The changed cells as a Markdown table, then the counts and what else changed;
    `left_out`: the cells of one run only that --common left out (one_run_only)."""
    listed = result[result["verdict"] != "unchanged"]
    lines = []
    if not listed.empty:
        lines += [
            "| verdict | cell | metric | old, median [95% CI] | new, median [95% CI] | change |",
            "|:---|:---|:---|---:|---:|---:|",
        ]
        for _, row in listed.iterrows():
            change = f"{row['change']:+.1%}" if pd.notna(row["change"]) else ""
            lines.append(
                f"| {row['verdict']} | {row['id']} | {row['metric']} | {_side_text(row, 'old')} "
                f"| {_side_text(row, 'new')} | {change} |"
            )
        lines.append("")
    counts = result["verdict"].value_counts()
    summary = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts) or "nothing"
    lines.append(
        f"{len(result)} cells compared: {summary} "
        f"(regression: slower by more than {threshold:.0%} with the 95% CIs apart, "
        "or ok before and now failed, out of memory, invalid or missing, the cell or one "
        "of its metrics; "
        f"'{BUSY_SLOWER}': as slow, but measured on a busy machine in either run)"
    )
    if left_out and any(left_out):
        only_old, only_new = left_out
        lines.append(
            f"Left out (--common): {len(only_old) + len(only_new)} cells in one run only, "
            f"{len(only_old)} in the old run and {len(only_new)} in the new one."
        )
    if provenance:
        lines += ["", "Changed between the runs:", *(f"- {line}" for line in provenance)]
    return "\n".join(lines) + "\n"


def provenance_changes(old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    """Provenance fields (GPU, driver, libraries, commit, ...) whose values differ, then the
    units both runs measured whose source differs."""
    fields = [(label, column) for label, column in provenance_summary.FIELDS]
    versions = sorted(
        {c for frame in (old, new) for c in frame.columns if c.endswith(tidy.VERSION_SUFFIX)}
    )
    fields += [(column.removesuffix(tidy.VERSION_SUFFIX), column) for column in versions]
    changes = []
    for label, column in fields:
        before = sorted({str(v) for v in old.get(column, pd.Series(dtype=object)).dropna()})
        after = sorted({str(v) for v in new.get(column, pd.Series(dtype=object)).dropna()})
        if before != after:
            changes.append(
                f"{label}: {', '.join(before) or 'none'} -> {', '.join(after) or 'none'}"
            )
    return changes + source_changes(old, new)


def source_changes(old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    """The kernels, workloads and models both runs measured from different source (their
    records' unit digests): a change there may be the code's, not the machine's."""
    changes = []
    for family in FAMILIES.values():
        if family.catalogue is None:
            continue
        before, after = (_digests(frame, family) for frame in (old, new))
        for unit in sorted(before.keys() & after.keys()):
            if before[unit] != after[unit]:
                changes.append(
                    f"source of {family.primary} {unit}: {', '.join(before[unit]) or 'none'} "
                    f"-> {', '.join(after[unit]) or 'none'}"
                )
    return changes


def _digests(frame: pd.DataFrame, family: Family) -> dict[str, list[str]]:
    """unit -> the source digests of its records in a tidy table, for one family."""
    if "unit_digest" not in frame or family.primary not in frame:
        return {}
    rows = frame[frame["experiment"] == family.name]
    return {
        str(unit): sorted({str(digest) for digest in digests.dropna()})
        for unit, digests in rows.groupby(family.primary)["unit_digest"]
    }

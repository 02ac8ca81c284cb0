"""Speedup and scaling efficiency: ratios of measured medians, each with an interval.

The interval of a ratio runs between the ends of the two medians' confidence
intervals (for a/b: [a_low / b_high, a_high / b_low]). Whenever both intervals
hold their medians it holds the ratio, so it is conservative: its level is at
least 1 - (1 - level_a) - (1 - level_b), i.e. 90% for two 95% intervals. That
level is stored with every ratio so captions and footnotes can state it.

Both functions return one row per cell in long form (label, device, status,
reason, numbers), the same shape for tables and figures. A cell whose own
record did not run keeps that record's status and reason; a cell whose
baseline did not run or does not exist gets the status NO_BASELINE and a
reason naming the baseline.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from accelbench.analysis import tidy
from accelbench.devices import DeviceError, parse_device
from accelbench.timing import CI_LEVEL

NO_BASELINE = "no_baseline"
# The level two 95% intervals guarantee for their ratio (see the module docstring).
RATIO_LEVEL = 1 - 2 * (1 - CI_LEVEL)
# The metric each experiment's speedup and scaling are computed from.
TIME_METRIC = {"train": "time_per_batch", "kernel": "time"}
RATE_METRIC = {"train": "throughput", "kernel": "gflops"}
SINGLE_STRATEGY = "single"
CELL_COLUMNS = ("label", "device", "status", "reason", "median", "ci_low", "ci_high", "ci_level")


def is_rate(unit: str | None) -> bool:
    """A rate (GFLOP/s, samples/s) grows as things get faster; a time shrinks."""
    return bool(unit) and unit.endswith("/s")


def _stats(row: pd.Series, metric: str) -> tuple[float, float, float, float]:
    return tuple(  # type: ignore[return-value]
        float(row.get(f"{metric}_{field}", math.nan))
        for field in ("median", "ci_low", "ci_high", "ci_level")
    )


def ratio(numerator: tuple, denominator: tuple) -> tuple[float, float, float, float]:
    """(median, low, high, level) of numerator / denominator from two (median, low, high,
    level) tuples; NaN where a number is missing or a denominator bound is not positive."""
    top, top_low, top_high, top_level = numerator
    bottom, bottom_low, bottom_high, bottom_level = denominator
    if not (bottom > 0 and bottom_low > 0 and bottom_high > 0):
        return (math.nan,) * 4
    level = max(0.0, top_level + bottom_level - 1.0)
    return top / bottom, top_low / bottom_high, top_high / bottom_low, level


def _speedup(row: pd.Series, base: pd.Series, metric: str, rate: bool) -> tuple:
    """How many times faster `row` is than `base`."""
    mine, theirs = _stats(row, metric), _stats(base, metric)
    return ratio(mine, theirs) if rate else ratio(theirs, mine)


def _baseline_problem(base: pd.Series | None, device: str) -> str | None:
    if base is None:
        return f"no record on the baseline {device}"
    if base["status"] != "ok":
        return f"the baseline {device} did not run ({tidy.STATUS_TEXT.get(base['status'])})"
    return None


def _cell(
    label: str,
    device: str,
    row: pd.Series,
    base: pd.Series | None,
    base_device: str,
    metric: str,
    rate: bool,
) -> dict[str, Any]:
    cell: dict[str, Any] = dict.fromkeys(CELL_COLUMNS, math.nan)
    cell.update(label=label, device=device, status=row["status"], reason=row["reason"])
    if row["status"] != "ok":
        return cell
    problem = _baseline_problem(base, base_device)
    if problem:
        cell.update(status=NO_BASELINE, reason=problem)
        return cell
    cell["median"], cell["ci_low"], cell["ci_high"], cell["ci_level"] = _speedup(
        row, base, metric, rate
    )
    return cell


def _metric_of(frame: pd.DataFrame, metric: str) -> tuple[str, bool]:
    """The metric to divide, and whether it is a rate (from its unit in the table)."""
    return metric, is_rate(frame.attrs.get("units", {}).get(f"{metric}_median"))


def speedup(frame: pd.DataFrame, experiment: str, baseline: str) -> tuple[pd.DataFrame, list[str]]:
    """Speedup of every (row, device) over the same row on the `baseline` device.

    Returns (cells, constant parameters for the caption); the baseline's own
    column is left out (it would read 1 everywhere).
    """
    metric, rate = _metric_of(frame, TIME_METRIC[experiment])
    rows, constants = tidy.experiment_rows(frame, experiment)
    by_cell = {(row["label"], row["device"]): row for _, row in rows.iterrows()}
    cells = [
        _cell(label, device, row, by_cell.get((label, baseline)), baseline, metric, rate)
        for (label, device), row in by_cell.items()
        if device != baseline
    ]
    return pd.DataFrame(cells, columns=list(CELL_COLUMNS)), constants


def _device(text: str) -> Any:
    try:
        return parse_device(str(text))
    except DeviceError:
        return None


def scaling(frame: pd.DataFrame, experiment: str = "train") -> tuple[pd.DataFrame, list[str]]:
    """Speedup and parallel efficiency of every record on K devices of a kind (cpuK, cudaK)
    over the same configuration on one device of that kind.

    The baseline is the record with the same parameters on `<kind>1`, with the
    strategy "single" where the strategy is a parameter (DDP on cuda4 against
    one GPU training alone), else with the same strategy. Efficiency is the
    speedup over K: 1 is linear scaling. Throughput (GFLOP/s for kernels) is
    compared, so a strategy that changes the samples per step is still fair.
    Returns (cells with columns kind, count, speedup*, efficiency*, constants).
    """
    metric, rate = _metric_of(frame, RATE_METRIC[experiment])
    rows, constants = tidy.experiment_rows(frame, experiment)
    keys = [name for name in rows.attrs.get("label_params", []) if name != "strategy"]
    has_strategy = "strategy" in rows.columns

    def key(row: pd.Series, strategy: Any) -> tuple:
        return (*(row[name] for name in keys), strategy)

    singles: dict[tuple, pd.Series] = {}
    for _, row in rows.iterrows():
        parsed = _device(row["device"])
        if parsed is not None and parsed.count == 1:
            strategy = row["strategy"] if has_strategy else None
            singles[(parsed.kind, *key(row, strategy))] = row

    cells = []
    for _, row in rows.iterrows():
        parsed = _device(row["device"])
        if parsed is None:
            continue
        strategy = row["strategy"] if has_strategy else None
        base = singles.get((parsed.kind, *key(row, SINGLE_STRATEGY))) if has_strategy else None
        base = base if base is not None else singles.get((parsed.kind, *key(row, strategy)))
        base_device = f"{parsed.kind}1"
        cell = _cell(row["label"], row["device"], row, base, base_device, metric, rate)
        if base is not None and base.name == row.name:  # the baseline itself
            cell.update(median=1.0, ci_low=1.0, ci_high=1.0, ci_level=1.0)
        cell.update(kind=parsed.kind, count=parsed.count)
        cell.update(
            {
                f"efficiency_{field}": cell[field] / parsed.count
                for field in ("median", "ci_low", "ci_high")
            }
        )
        cells.append(cell)
    columns = [
        *CELL_COLUMNS,
        "kind",
        "count",
        "efficiency_median",
        "efficiency_ci_low",
        "efficiency_ci_high",
    ]
    return pd.DataFrame(cells, columns=columns), constants

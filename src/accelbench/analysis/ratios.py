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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from accelbench.analysis import paired, tidy
from accelbench.families import FAMILIES
from accelbench.measuring.statistics import CI_LEVEL
from accelbench.platform.devices import Device, DeviceError, parse_device

NO_BASELINE = "no_baseline"
# The level two 95% intervals guarantee for their ratio (see the module docstring).
RATIO_LEVEL = 1 - 2 * (1 - CI_LEVEL)
# The rate each experiment's scaling is computed from (its speedup from its time,
# Family.time_metric).
RATE_METRIC = {"train": "throughput", "kernel": "gflops"}
SINGLE_STRATEGY = "single"
CELL_COLUMNS = (
    "label",
    "device",
    "status",
    "reason",
    "median",
    "ci_low",
    "ci_high",
    "ci_level",
    "busy",
    "imprecise",
    "paired",
)


def is_rate(unit: str | None) -> bool:
    """A rate (GFLOP/s, samples/s) grows as things get faster; a time shrinks."""
    return bool(unit) and unit.endswith("/s")


def stats(row: pd.Series, metric: str) -> tuple[float, ...]:
    """(median, ci_low, ci_high, ci_level) of `metric` in one tidy row, as `ratio` takes
    them; NaN where absent."""
    return tuple(
        float(row.get(f"{metric}_{field}", math.nan))
        for field in ("median", "ci_low", "ci_high", "ci_level")
    )


def ratio(numerator: tuple[float, ...], denominator: tuple[float, ...]) -> tuple[float, ...]:
    """(median, low, high, level) of numerator / denominator from two (median, low, high,
    level) tuples; NaN where a number is missing or a denominator bound is not positive."""
    top, top_low, top_high, top_level = numerator
    bottom, bottom_low, bottom_high, bottom_level = denominator
    if not (bottom > 0 and bottom_low > 0 and bottom_high > 0):
        return (math.nan,) * 4
    level = max(0.0, top_level + bottom_level - 1.0)
    return top / bottom, top_low / bottom_high, top_high / bottom_low, level


def _speedup(
    row: pd.Series, base: pd.Series, metric: str, rate: bool, pooled: dict[str, float]
) -> tuple[tuple[float, ...], bool]:
    """How many times faster `row` is than `base`, and whether the interval is paired: from
    their ratios round by round where one comparison group's measurement holds both
    (analysis.paired), else from their two intervals."""
    found = paired.time_ratio(base, row, pooled)
    if found is not None:
        return (*found, CI_LEVEL), True
    mine, theirs = stats(row, metric), stats(base, metric)
    return (ratio(mine, theirs) if rate else ratio(theirs, mine)), False


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
    pooled: dict[str, float],
) -> dict[str, Any]:
    cell: dict[str, Any] = dict.fromkeys(CELL_COLUMNS, math.nan)
    cell.update(label=label, device=device, status=row["status"], reason=row["reason"])
    cell["paired"] = False
    if row["status"] != "ok":
        return cell
    problem = _baseline_problem(base, base_device)
    if problem:
        cell.update(status=NO_BASELINE, reason=problem)
        return cell
    numbers, cell["paired"] = _speedup(row, base, metric, rate, pooled)
    cell["median"], cell["ci_low"], cell["ci_high"], cell["ci_level"] = numbers
    cell.update(ratio_flags(row, base))
    return cell


def ratio_flags(row: pd.Series, base: pd.Series) -> dict[str, bool]:
    """The busy and imprecise marks of a ratio of two records: a ratio is as disturbed, and
    as imprecise, as either of its two measurements."""
    return {
        flag: tidy.flagged(row.get(flag)) or tidy.flagged(base.get(flag))
        for flag in ("busy", "imprecise")
    }


def _is_rate(frame: pd.DataFrame, metric: str) -> bool:
    """Whether `metric` is a rate, from its unit in the table."""
    return is_rate(frame.attrs.get("units", {}).get(f"{metric}_median"))


def speedup(frame: pd.DataFrame, experiment: str, baseline: str) -> tuple[pd.DataFrame, list[str]]:
    """Speedup of every (row, device) over the same row on the `baseline` device.

    Returns (cells, constant parameters for the caption); the baseline's own
    column is left out (it would read 1 everywhere).
    """
    metric = FAMILIES[experiment].time_metric
    rate = _is_rate(frame, metric)
    rows, constants = tidy.experiment_rows(frame, experiment)
    by_cell = {(row["label"], row["device"]): row for _, row in rows.iterrows()}
    pooled = paired.pooled_by_kind(frame)
    cells = [
        _cell(label, device, row, by_cell.get((label, baseline)), baseline, metric, rate, pooled)
        for (label, device), row in by_cell.items()
        if device != baseline
    ]
    return pd.DataFrame(cells, columns=list(CELL_COLUMNS)), constants


def _device(text: str) -> Device | None:
    try:
        return parse_device(str(text))
    except DeviceError:
        return None


def _with_strategy(row: pd.Series, strategy: Any) -> pd.Series:
    changed = row.copy()
    changed["strategy"] = strategy
    return changed


def scaling(frame: pd.DataFrame, experiment: str = "train") -> tuple[pd.DataFrame, list[str]]:
    """Speedup and parallel efficiency of every record on K devices of a kind (cpuK, cudaK,
    and N nodes of them, NxKcuda and NxKcpu: N*K devices) over the same configuration on
    one device of that kind.

    The baseline is the record with the same parameters on `<kind>1`, with the
    strategy "single" where the strategy is a parameter (DDP on cuda4 against
    one GPU training alone), else with the same strategy, and with the same
    batch size or, failing that, the batch size over K (for a batch counted
    over all K devices). Efficiency is the speedup over K: 1 is linear scaling.
    Throughput (GFLOP/s for kernels) is compared, so a strategy that changes the
    samples per step is still fair. A cell is labelled after the one-device
    configuration it is compared with (with its own strategy), so DDP on 2 and
    4 GPUs with a batch counted over all devices still make one line.
    Returns (cells with columns kind, count, nodes, speedup*, efficiency*, constants).
    """

    def against_one_device(device: Device) -> tuple[str, int]:
        return f"{device.kind}1", device.units

    return _scaling(frame, experiment, against_one_device, (SINGLE_STRATEGY, None))


def node_scaling(frame: pd.DataFrame, experiment: str = "train") -> tuple[pd.DataFrame, list[str]]:
    """Speedup and efficiency of N nodes (NxKcpu, NxKcuda) over one node of the same K
    devices (cpuK, cudaK): the same configuration, the same strategy where one node can
    run it (else "single": ddp on cpu1 is one process), the same global batch or that
    batch over N. Efficiency is the speedup over N: 1 is linear scaling across nodes.
    Returns (cells with columns kind, count (nodes), per_node, speedup*, efficiency*,
    constants); devices on one node have no cell.
    """

    def against_one_node(device: Device) -> tuple[str, int] | None:
        return (f"{device.kind}{device.count}", device.nodes) if device.nodes > 1 else None

    return _scaling(frame, experiment, against_one_node, (None, SINGLE_STRATEGY))


@dataclass(frozen=True)
class _Configurations:
    """The records of one experiment by device and parameters, to find the configuration a
    row is compared with on another device. `keys` are the parameters that name a
    configuration (the strategy last); `strategies` the baseline strategies to try in
    order (None: the row's own)."""

    keys: list[str]
    by_key: dict[tuple, pd.Series]
    strategies: tuple[str | None, ...]

    @staticmethod
    def key(row: pd.Series, device: str, keys: list[str], **changes: Any) -> tuple:
        return (device, *(changes.get(name, row[name]) for name in keys))

    @classmethod
    def of(
        cls, rows: pd.DataFrame, params: list[str], strategies: tuple[str | None, ...]
    ) -> _Configurations:
        keys = [name for name in params if name != "strategy"]
        if "strategy" in rows.columns:
            keys.append("strategy")
        by_key = {cls.key(row, row["device"], keys): row for _, row in rows.iterrows()}
        return cls(keys, by_key, strategies)

    def baseline_of(self, row: pd.Series, device: str, factor: int) -> pd.Series | None:
        """Same parameters on the baseline device: the strategies in order; the same batch
        first, then batch / factor (a batch size counted over all devices)."""
        tried = [strategy or row["strategy"] for strategy in self.strategies]
        candidates = list(dict.fromkeys(tried)) if "strategy" in self.keys else [None]
        batches = [row["batch"]] if "batch" in self.keys else [None]
        if "batch" in self.keys and pd.notna(row["batch"]) and row["batch"] % factor == 0:
            batches.append(row["batch"] // factor)
        for batch in batches:
            for strategy in candidates:
                changes = {"strategy": strategy} if strategy is not None else {}
                if batch is not None:
                    changes["batch"] = batch
                found = self.by_key.get(self.key(row, device, self.keys, **changes))
                if found is not None:
                    return found
        return None


SCALING_COLUMNS = [
    *CELL_COLUMNS,
    "kind",
    "count",
    "nodes",
    "per_node",
    "efficiency_median",
    "efficiency_ci_low",
    "efficiency_ci_high",
]


def _scaling(
    frame: pd.DataFrame,
    experiment: str,
    baseline_device: Callable[[Device], tuple[str, int] | None],
    strategies: tuple[str | None, ...],
) -> tuple[pd.DataFrame, list[str]]:
    """Cells of every row against its baseline: `baseline_device(device)` gives the device
    a row is compared with and the factor that makes the ideal speedup (None: no cell);
    `strategies` the baseline strategies to try in order (None: the row's own)."""
    metric = RATE_METRIC[experiment]
    rate = _is_rate(frame, metric)
    rows, constants = tidy.experiment_rows(frame, experiment)
    params = rows.attrs.get("label_params", [])
    configurations = _Configurations.of(rows, params, strategies)
    pooled = paired.pooled_by_kind(frame)
    cells = []
    for _, row in rows.iterrows():
        parsed = _device(row["device"])
        against = baseline_device(parsed) if parsed is not None else None
        if against is None:
            continue
        base_device, factor = against
        base = configurations.baseline_of(row, base_device, factor)
        label = row["label"]
        if base is not None and "strategy" in configurations.keys:
            # Named after the configuration it scales (its batch size).
            label = tidy.row_label(_with_strategy(base, row["strategy"]), params)
        cell = _cell(label, row["device"], row, base, base_device, metric, rate, pooled)
        if base is not None and base.name == row.name and row["status"] == "ok":
            cell.update(median=1.0, ci_low=1.0, ci_high=1.0, ci_level=1.0)  # the baseline
        cell.update(kind=parsed.kind, count=factor, nodes=parsed.nodes, per_node=parsed.count)
        cell.update(
            {
                f"efficiency_{field}": cell[field] / factor
                for field in ("median", "ci_low", "ci_high")
            }
        )
        cells.append(cell)
    return pd.DataFrame(cells, columns=SCALING_COLUMNS), constants

"""The comparison tables the workflow writes, built from the tidy table: the classic one
(rows x devices), the same across precisions, speedup over a baseline device, scaling
efficiency over device counts and nodes, and time beside energy. Each builder gathers the
cells and returns the model's (table of display strings, footnotes)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from accelbench.analysis import ratios, tidy
from accelbench.analysis.tables.model import build_table, cell_grid, row_units, shared_unit
from accelbench.analysis.tables.numbers import readable_unit
from accelbench.families import FAMILIES
from accelbench.measuring.energy import NVML_PERIOD_S, RAPL_PERIOD_S
from accelbench.measuring.statistics import CI_LEVEL, RERUN_INTERVAL_OPENING
from accelbench.platform.devices import DeviceError, parse_device

# What each family's time (Family.time_metric) is called in a caption.
TIME_TITLES = {
    "train": "Time per mini-batch",
    "kernel": "Kernel time",
    "datasci": "Data science workload time",
}


def _row_header(experiment: str) -> str:
    """The header of a table's rows: the parameter that names them (Family.primary)."""
    return str(FAMILIES[experiment].primary).capitalize()


RERUN_NOTE = (
    f"Rerun interval: where the median of an independent rerun of the cell (as many runs, "
    f"minutes later) lands {CI_LEVEL:.0%} of the time."
)


def _rerun(rows: pd.DataFrame) -> bool:
    """Whether every record that ran was measured in independent runs (record param
    `interval`: either rerun interval, from the cell's runs alone or with the host's
    spread and drift)."""
    ran = rows[rows["status"] == "ok"]
    methods = set(ran["interval"].dropna()) if "interval" in ran else set()
    return bool(methods) and all(method.startswith(RERUN_INTERVAL_OPENING) for method in methods)


def interval_name(rows: pd.DataFrame) -> str:
    """What the brackets hold: a rerun interval (RERUN_NOTE) where every record that ran
    was measured in independent runs, else the within-run CI."""
    return f"{CI_LEVEL:.0%} {'rerun interval' if _rerun(rows) else 'CI'}"


def _caption(text: str, unit: str | None, interval: str, constants: list[str]) -> str:
    caption = f"{text}{f' ({unit})' if unit else ''}, median [{interval}]"
    return caption + ("; " + ", ".join(constants) if constants else "")


def comparison_table(
    frame: pd.DataFrame, experiment: str = "train", across: str = "device"
) -> tuple[pd.DataFrame, list[str]]:
    """(table of display strings, footnotes): one experiment's metric, rows x `across`.

    Rows are models (train) or kernels, labelled with the parameters that vary;
    columns are the values of `across`: devices in natural order (cpu1, cpu2,
    cpu16, cuda1) for the classic table, precisions for the precision table
    (which keeps only the rows measured in two or more precisions).
    The table's attrs hold `caption`, `best` ([row, column] pairs set in bold)
    and `cells` (one dict per cell with the plain numbers, the CSV's rows).
    """
    metric, title = FAMILIES[experiment].time_metric, TIME_TITLES[experiment]
    if across == "device":
        rows, constants = tidy.experiment_rows(frame, experiment, across)
    else:
        rows, constants = tidy.compared_rows(frame, experiment, across)
    labels = list(dict.fromkeys(rows["label"]))
    columns = tidy.ordered(across, rows[across]) if labels else []
    unit = frame.attrs.get("units", {}).get(f"{metric}_median")
    found = pd.DataFrame(
        {
            "label": rows["label"],
            across: rows[across] if labels else [],
            "status": rows["status"],
            "reason": rows["reason"],
            "busy": rows.get("busy", False),
            "imprecise": rows.get("imprecise", False),
            **{
                field: rows.get(f"{metric}_{field}", pd.Series(math.nan, index=rows.index))
                for field in ("median", "ci_low", "ci_high", "ci_level")
            },
        }
    )
    cells = cell_grid(found, labels, columns, across, unit)
    units = row_units(cells, unit)
    title = title if across == "device" else f"{title} by {across}"
    table, footnotes = build_table(
        cells,
        labels,
        columns,
        row_header=_row_header(experiment),
        column_header=across,
        caption=_caption(title, shared_unit(units), interval_name(rows), constants),
        units=units,
        empty=(
            f"No {experiment} records."
            if across == "device"
            else f"No {experiment} configuration was measured in more than one {across}."
        ),
    )
    return table, footnotes + ([RERUN_NOTE] if labels and _rerun(rows) else [])


def _ratio_table(
    found: pd.DataFrame,
    experiment: str,
    caption: str,
    columns: list[str],
    empty: str,
    ideal: dict[str, float],
) -> tuple[pd.DataFrame, list[str]]:
    labels = list(dict.fromkeys(found["label"]))
    cells = cell_grid(found, labels, columns if labels else [], "device", None)
    return build_table(
        cells,
        labels,
        columns if labels else [],
        row_header=_row_header(experiment),
        column_header="device",
        caption=caption,
        higher_is_better=True,
        expected_level=ratios.RATIO_LEVEL,
        empty=empty,
        ideal=ideal,
    )


def ideal_speedups(devices: list[str], baseline: str) -> dict[str, float]:
    """The most a device can gain over the baseline by its count alone: N / M for N > M
    devices of the same kind (cpu16 over cpu1: 16); none across kinds or for fewer."""
    try:
        base = parse_device(baseline)
    except DeviceError:
        return {}
    ideal = {}
    for device in devices:
        try:
            parsed = parse_device(device)
        except DeviceError:
            continue
        count, base_count = parsed.count * parsed.nodes, base.count * base.nodes
        if parsed.kind == base.kind and count > base_count:
            ideal[device] = count / base_count
    return ideal


def ratio_interval(cells: pd.DataFrame) -> str:
    """What a table of ratios' intervals are, and the cells that differ marked `unpaired`:
    paired where the two cells were measured together (analysis.paired), else from both
    cells' intervals."""
    ran = cells["status"] == "ok"
    paired = cells["paired"].fillna(False).astype(bool) & ran
    unpaired = ran & ~paired
    both = f"interval from both {CI_LEVEL:.0%} CIs, level ≥ {ratios.RATIO_LEVEL:.0%}"
    cells["unpaired"] = unpaired if paired.any() else False
    if not paired.any():
        return both
    paired_text = f"{CI_LEVEL:.0%} interval from the two cells' ratios round by round"
    return paired_text if not unpaired.any() else f"{paired_text} (° {both})"


def speedup_table(
    frame: pd.DataFrame, experiment: str, baseline: str
) -> tuple[pd.DataFrame, list[str]]:
    """How many times faster each device runs each row than the `baseline` device does."""
    cells, constants = ratios.speedup(frame, experiment, baseline)
    title = TIME_TITLES[experiment].lower()
    caption = _caption(
        f"Speedup over {baseline}: {title} on {baseline} / {title} on the device",
        "×",
        ratio_interval(cells),
        constants,
    )
    empty = f"No {experiment} records on a device other than {baseline}."
    devices = tidy.natural_devices(cells["device"])
    return _ratio_table(
        cells, experiment, caption, devices, empty, ideal_speedups(devices, baseline)
    )


def scaling_table(frame: pd.DataFrame, experiment: str = "train") -> tuple[pd.DataFrame, list[str]]:
    """Parallel efficiency on K devices of a kind: speedup over one device of it, over K."""
    cells, constants = ratios.scaling(frame, experiment)
    metric = ratios.RATE_METRIC[experiment]
    return _efficiency_table(
        cells[cells["count"] > 1],
        constants,
        experiment,
        f"Scaling efficiency: {metric} on K devices / (K × {metric} on one; strategy single)",
        f"No {experiment} configuration was measured on more than one device of a kind.",
        "Batch sizes are global mini-batches, split over the K devices. Each row is "
        "named after the one-device run its cells are compared with: the same global "
        "mini-batch, else the global mini-batch / K (the same samples per device); "
        "throughput is compared, so both are fair.",
    )


def node_scaling_table(
    frame: pd.DataFrame, experiment: str = "train"
) -> tuple[pd.DataFrame, list[str]]:
    """Efficiency of N nodes over one node with the same devices: speedup over N."""
    cells, constants = ratios.node_scaling(frame, experiment)
    metric = ratios.RATE_METRIC[experiment]
    return _efficiency_table(
        cells,
        constants,
        experiment,
        f"Scaling across nodes: {metric} on N nodes (NxK) / (N × {metric} on one node "
        f"with the same K devices)",
        f"No {experiment} configuration was measured on more than one node.",
        "Batch sizes are global mini-batches, split over every process of every node; "
        "one node runs the same strategy with the same global mini-batch (else that "
        "mini-batch / N), or 'single' where one node has one device.",
    )


def _efficiency_table(
    cells: pd.DataFrame,
    constants: list[str],
    experiment: str,
    what: str,
    empty: str,
    batches: str,
) -> tuple[pd.DataFrame, list[str]]:
    """Rows x devices of scaling efficiencies (1 = linear), with the batches' footnote."""
    efficiency = cells.drop(columns=["median", "ci_low", "ci_high"]).rename(
        columns=lambda name: name.removeprefix("efficiency_")
    )
    caption = _caption(f"{what}, 1 = linear", None, ratio_interval(efficiency), constants)
    devices = tidy.natural_devices(efficiency["device"])
    table, footnotes = _ratio_table(
        efficiency, experiment, caption, devices, empty, dict.fromkeys(devices, 1.0)
    )
    if not table.empty:
        footnotes.append(batches)
    return table, footnotes


@dataclass(frozen=True)
class EnergySpec:
    """The columns of an energy table: time (the family's) and energy per unit of work,
    side by side."""

    work: str  # "sample" or "call"
    per_batch: bool  # the time is per mini-batch: divided by the batch size
    energy_metric: str


ENERGY_SPECS = {
    "train": EnergySpec("sample", True, "energy_per_sample"),
    "kernel": EnergySpec("call", False, "energy_per_call"),
    "datasci": EnergySpec("call", False, "energy_per_call"),
}
ENERGY_NOTE = (
    "Energy: the devices' energy counters read around a window of repeated work after the "
    "timing (NVML's total-energy counter on GPUs, RAPL on CPUs); above idle: less the idle "
    "power, measured once per job, over the window. A cell without energy says why: "
    "n/a where no counter could be read, too short where the window spanned too few "
    "counter updates. Nothing is estimated. An energy's interval is at least the counter's "
    "resolution wide: what the devices use in one counter update (NVML's every "
    f"{NVML_PERIOD_S:g} s at most, RAPL's every {RAPL_PERIOD_S:g} s) at each end of the "
    "window and of the idle baseline."
)
# The cell status of an energy above idle below its counter's resolution: only its upper
# bound is known (energy.metrics), which the cell shows as "< X".
BELOW_RESOLUTION = "below_resolution"
BELOW_RESOLUTION_NOTE = (
    "< X: the energy above idle is below the counter's resolution, so it is no "
    "measurement; X bounds it from above (the top of its interval, at least the resolution)."
)
TRAIN_ENERGY_NOTE = (
    "Time per sample: time per mini-batch / batch size (the step, batch loading excluded); "
    "the energy window's steps each load their batch."
)


def _quantity_cells(rows: pd.DataFrame, metric: str, scale: pd.Series, energy: bool):
    """Long-form cells of one quantity: the record's status where it did not run, the
    energy status (with its reason) where it ran without energy, BELOW_RESOLUTION with the
    `bound` where only an upper bound is known, else the numbers / scale."""
    fields = ("median", "ci_low", "ci_high", "ci_level")
    bound = rows.get(f"{metric}_upper_bound", pd.Series(math.nan, index=rows.index))
    found = pd.DataFrame(
        {
            "label": rows["label"],
            "status": rows["status"],
            "reason": rows["reason"],
            "busy": rows.get("busy", False),
            "imprecise": rows.get("imprecise", False),
            **{
                field: rows.get(f"{metric}_{field}", pd.Series(math.nan, index=rows.index))
                / (scale if field != "ci_level" else 1.0)
                for field in fields
            },
            "bound": bound / scale,
        }
    )
    if energy:
        # An energy's interval is bounded by its counter's resolution (ENERGY_NOTE), not
        # drawn from samples: it has no level to fall short of.
        found["ci_level"] = math.nan
        bounded = (found["status"] == "ok") & found["bound"].notna()
        found.loc[bounded, "status"] = BELOW_RESOLUTION
        missing = (found["status"] == "ok") & ~found["median"].astype(float).notna()
        status = rows.get("energy_status", pd.Series(None, index=rows.index, dtype="object"))
        reason = rows.get("energy_reason", pd.Series(None, index=rows.index, dtype="object"))
        found.loc[missing, "status"] = (
            status[missing].fillna("unavailable").replace("ok", "unavailable")
        )
        found.loc[missing, "reason"] = reason[missing].fillna(
            "the record has no energy section (measured without it)"
        )
    return found


def energy_table(frame: pd.DataFrame, experiment: str = "train") -> tuple[pd.DataFrame, list[str]]:
    """Time and energy per unit of work side by side, one row per configuration and device:
    time per sample, energy per sample and the same above idle (training), or the same per
    call (kernels), so whether a GPU pays off can be read in joules as well as seconds."""
    spec = ENERGY_SPECS[experiment]
    rows, constants = tidy.experiment_rows(frame, experiment, across="quantity")
    labels = list(dict.fromkeys(rows["label"]))
    units = frame.attrs.get("units", {})
    batch = rows["batch"].astype(float) if spec.per_batch else pd.Series(1.0, index=rows.index)
    one = pd.Series(1.0, index=rows.index)
    quantities = [
        (f"time per {spec.work}", FAMILIES[experiment].time_metric, batch, False),
        (f"energy per {spec.work}", spec.energy_metric, one, True),
        (f"energy per {spec.work} above idle", f"{spec.energy_metric}_above_idle", one, True),
    ]
    cells, columns, bounded = [], [], {}
    for name, metric, scale, is_energy in quantities:
        found = _quantity_cells(rows, metric, scale, is_energy)
        unit, factor = readable_unit(
            units.get(f"{metric}_median") or units.get(f"{metric}_upper_bound"),
            [*found["median"], *found["bound"]],
        )
        numbers = ["median", "ci_low", "ci_high", "bound"]
        found[numbers] = found[numbers] / factor
        column = f"{name} ({unit})" if unit else name
        columns.append(column)
        for index in found.index[found["status"] == BELOW_RESOLUTION]:
            text = _at_most(found.at[index, "bound"])
            bounded[found.at[index, "label"], column] = text
            found.at[index, "reason"] = f"below the counter's resolution: {text} {unit}"
        cells.append(cell_grid(found.assign(quantity=column), labels, [column], "quantity", unit))
    status = rows.get("energy_status", pd.Series(None, index=rows.index, dtype="object"))
    measured = rows[status == "ok"]
    footnotes = [
        f"Energy measured with {method} ({len(group)} record{'s' if len(group) != 1 else ''})"
        for method, group in measured.groupby("energy_method", sort=True)
    ]
    if labels and measured.empty:
        footnotes.append(f"No energy was measured in these {experiment} records (reasons below).")
    table, notes = build_table(
        [cell for part in cells for cell in part],
        labels,
        columns if labels else [],
        row_header=_row_header(experiment),
        column_header="quantity",
        caption=_caption(f"Time and energy per {spec.work}", None, interval_name(rows), constants),
        empty=f"No {experiment} records.",
        best=False,
    )
    for place, text in bounded.items():
        table.loc[place] = text
    extra = [ENERGY_NOTE, *([TRAIN_ENERGY_NOTE] if spec.per_batch else [])] if labels else []
    extra += [RERUN_NOTE] if labels and _rerun(rows) else []
    extra += [BELOW_RESOLUTION_NOTE] if bounded else []
    return table, [*footnotes, *notes, *extra]


def _at_most(bound: float) -> str:
    """`< X`, X the bound rounded up to two significant digits, so that it still bounds."""
    decimals = 1 - math.floor(math.log10(bound))
    rounded = math.ceil(round(bound * 10**decimals, 9)) / 10**decimals
    return f"< {rounded:.{max(decimals, 0)}f}"


def datasci_time_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Time per data science workload and size (rows) on each device (columns), with a
    note naming the library that ran on each device."""
    table, footnotes = comparison_table(frame, "datasci")
    rows = frame[frame["experiment"] == "datasci"]
    libraries = {
        device: ", ".join(sorted(set(rows.loc[rows["device"] == device, "backend"].dropna())))
        for device in tidy.natural_devices(rows["device"])
    }
    if libraries:
        text = "; ".join(f"{device}: {names}" for device, names in libraries.items())
        footnotes = [*footnotes, f"Libraries by device: {text}."]
    return table, footnotes

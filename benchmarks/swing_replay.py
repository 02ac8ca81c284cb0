"""Swing replay: which drift floor would have made the intervals of kept grid runs hold?

The host's drift term (accelbench.measuring.rerun.spread_for) is floored at a quantile of
the standard deviations of its recent cells' log run medians (its swing). This replays
the intervals of the records that `benchmarks/precision_study.py --out DIR` kept, for
several quantiles: cell by cell in the order they were measured, each from its own runs
and the cells of its device kind measured before it (at least five, as the workflow
asks), without the probes' drift, which the records keep only combined. It then counts
the other run's medians inside, both ways (first against rerun, rerun against first), and
prints per study and in all the share inside and the median half-width. `typical` is the
floor of the typical spread alone, as before the swing. The quantile the workflow uses
(rerun.DRIFT_QUANTILE) is marked.

    python benchmarks/swing_replay.py DIR [DIR ...]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from accelbench.measuring import rerun
from accelbench.platform.devices import parse_device
from accelbench.records.record import load_record

QUANTILES = (None, 0.5, 0.75, 0.8, 0.85, 0.9)  # None: the typical spread alone
RUNS = ("first", "rerun")  # the two runs of a kept precision study


@dataclass(frozen=True)
class Cell:
    """One ok record's log run medians, by raw metric; the first is its figure of merit."""

    id: str
    kind: str
    finished: str
    logs: dict[str, list[float]]


def cells_of(results: Path) -> list[Cell]:
    """The ok records under `results` with two or more runs, in the order they ended."""
    cells = []
    for path in sorted(results.rglob("*.json")):
        if "logs" in path.relative_to(results).parts:
            continue
        try:
            record = load_record(path)
        except (OSError, ValueError):
            continue
        if record.get("status") != "ok" or not record.get("raw"):
            continue
        logs = {}
        for name, raw in record["raw"].items():
            medians = [statistics.median(samples) for samples in raw.get("runs", []) if samples]
            if len(medians) >= 2 and min(medians) > 0:
                logs[name] = [math.log(median) for median in medians]
        if logs:
            kind = parse_device(record["params"]["device"]).kind
            cells.append(Cell(record["id"], kind, record["provenance"]["finished"], logs))
    return sorted(cells, key=lambda cell: cell.finished)


def host_spread(kind: str, spreads: rerun.HostSpreads, quantile: float | None):
    """The package's spread for a cell (rerun.spread_for, without the probes' drift) with
    the swing at `quantile`; for None the rule before the swing, the typical spread alone."""
    if quantile is not None:
        return rerun.spread_for(kind, None, spreads, quantile)
    typical = spreads.typical(kind)
    return None if typical is None else rerun.Spread(typical, typical)


def replayed(cells: list[Cell], quantile: float | None) -> dict[tuple[str, str], tuple]:
    """(cell id, metric) -> (median of the log run medians, half-width on the log scale, or
    None where fewer than five earlier cells of its kind could tell the host's spread)."""
    spreads = rerun.HostSpreads([])
    found = {}
    for cell in cells:
        spread = host_spread(cell.kind, spreads, quantile)
        for name, logs in cell.logs.items():
            half = spread.half_width(logs) if spread else None
            found[cell.id, name] = (statistics.median(logs), half)
        spreads.add(cell.kind, next(iter(cell.logs.values())))
    return found


def coverage(runs: list[list[Cell]], quantile: float | None) -> tuple[int, int, list[float]]:
    """(other run's medians inside, medians compared, half-widths as fractions) of a study's
    two runs."""
    first, again = (replayed(cells, quantile) for cells in runs)
    inside = compared = 0
    widths = []
    for mine, other in ((first, again), (again, first)):
        for key, (centre, half) in mine.items():
            if half is None or key not in other:
                continue
            compared += 1
            inside += abs(other[key][0] - centre) <= half
            widths.append(math.expm1(half))
    return inside, compared, widths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("studies", nargs="+", type=Path, help="folders of precision studies")
    args = parser.parse_args()
    missing = [str(s) for s in args.studies if not all((s / run).is_dir() for run in RUNS)]
    if missing:
        parser.error(f"not a kept precision study (no first/ and rerun/): {', '.join(missing)}")
    runs = {study: [cells_of(study / run / "results") for run in RUNS] for study in args.studies}
    print("| floor | study | inside | median half-width |")
    print("|:---|:---|---:|---:|")
    for quantile in QUANTILES:
        name = "typical" if quantile is None else f"swing q{quantile:.2f}"
        if quantile == rerun.DRIFT_QUANTILE:
            name += " (used)"
        total = [0, 0, []]
        for study in args.studies:
            inside, compared, widths = coverage(runs[study], quantile)
            total = [total[0] + inside, total[1] + compared, total[2] + widths]
            print(f"| {name} | {study} | {share(inside, compared)} | {median(widths)} |")
        if len(args.studies) > 1:
            print(f"| {name} | all | {share(total[0], total[1])} | {median(total[2])} |")
    return 0


def share(part: int, whole: int) -> str:
    return f"{part} of {whole} ({part / whole:.0%})" if whole else "none compared"


def median(widths: list[float]) -> str:
    return f"+-{statistics.median(widths):.0%}" if widths else "-"


if __name__ == "__main__":
    sys.exit(main())

"""A host's first cells: the records measured before the host had shown its drift.

A cell's rerun interval takes the host's run-to-run spread and its drift between
measurements from the cells it measured in the last half hour (accelbench.measuring.rerun).
The first cells of a fresh host have no such neighbours: their interval comes from their
own runs alone, taken seconds apart, and knows nothing of what a rerun minutes later meets.
In two precision studies on a noisy 2-core VM, 2 of 12 such rerun medians landed inside
their intervals, against 90 of 100 for the cells measured with the host's word. `make run`
therefore measures them again once the grid has shown the host (`accelbench first-cells`
names them), at the cost of their time once more.
"""

from __future__ import annotations

import os
from pathlib import Path

from accelbench.measuring import rerun
from accelbench.platform.devices import parse_device
from accelbench.records.record import Record, load_record, record_files


def measured_alone(record: Record) -> bool:
    """Whether an ok record of several runs has the interval of its own runs alone (their
    pivot, statistics.RERUN_INTERVAL), not the host's: a record with the host's word keeps
    its spread in its conditions (`host_run_spread`). Read from the conditions, not the
    interval's text, which records of an earlier version word differently."""
    conditions = record.get("conditions") or {}
    runs = conditions.get("runs") or 1
    return record.get("status") == "ok" and runs > 1 and "host_run_spread" not in conditions


def first_cells(
    results: str | os.PathLike[str], spreads: rerun.HostSpreads | None = None
) -> list[Path]:
    """The records under `results` measured alone whose device kind the host now knows
    (`spreads`, by default this host's: rerun.HostSpreads), as paths under `results`.
    Measured again, they get the host's word; a kind it still does not know (a grid with
    too few cells of it, or a run over half an hour ago) would only be measured alone
    again, so it is left. Records that cannot be read are the aggregation's to list."""
    spreads = spreads or rerun.HostSpreads.load()
    found = []
    for path in record_files(results):
        try:
            record = load_record(path)
        except (OSError, ValueError):
            continue
        device = (record.get("params") or {}).get("device")
        if not (isinstance(device, str) and measured_alone(record)):
            continue
        if spreads.typical(parse_device(device).kind) is not None:
            found.append(path)
    return found

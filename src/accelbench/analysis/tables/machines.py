"""The table of several machines: per cell of work they share, its time on each machine and
device (accelbench.analysis.machines), median [interval], each column naming its machine,
device, date and, for a committed reference, its folder and commit."""

from __future__ import annotations

import pandas as pd

from accelbench.analysis import machines
from accelbench.analysis.tables.layout import HEADER_BREAK
from accelbench.analysis.tables.model import (
    MISSING_NOTE,
    build_table,
    cell_grid,
    row_units,
    shared_unit,
)
from accelbench.analysis.tables.numbers import MISSING
from accelbench.families import FAMILIES
from accelbench.measuring.statistics import CI_LEVEL
from accelbench.platform.devices import names_a_gpu

# The CSV: one line per record shown, with what names its column in fields of their own.
CSV_COLUMNS = (
    "row",
    "source",
    "device",
    "host",
    "cpu_model",
    "gpu",
    "date",
    "commit",
    "status",
    "median",
    "ci_low",
    "ci_high",
    "ci_level",
    "unit",
    "busy",
    "imprecise",
    "record",
)
JOIN_NOTE = (
    "Each row: one cell of work (an experiment less its device; a model's options alike) "
    "measured on two or more machines; each column: one machine and device, measured on its "
    "own host at its own date. Two columns of different machines compare two machines, not "
    "a GPU with the CPU beside it."
)
# A dash here is a cell that machine and device did not measure ok, not one of its grid's.
NOT_MEASURED_NOTE = f"{MISSING} not measured on that machine and device (or not ok there)"


def _csv_lines(joined: machines.Joined) -> list[dict]:
    """The CSV's lines: each record shown, its numbers in its own unit."""
    cells = joined.cells
    return [
        {
            "row": row["label"],
            "source": joined.sources[int(row["source"])].name,
            "device": row["device"],
            "host": row["host"],
            "cpu_model": row["cpu_model"],
            "gpu": row["gpu"] if names_a_gpu(row["device"]) else None,
            "date": machines.dates(cells.loc[[index]]),
            "commit": machines.commits(cells.loc[[index]]),
            "status": row["status"],
            "record": row["id"],
            **{name: row[name] for name in (*machines.NUMBERS, "unit", *machines.FLAGS)},
        }
        for index, row in cells.iterrows()
    ]


def _machine_notes(joined: machines.Joined) -> list[str]:
    """One line per source: the machine (with its CPUs' topology) its shown records are of."""
    notes = []
    for position, source in enumerate(joined.sources):
        rows = joined.cells[joined.cells["source"] == position]
        if rows.empty:
            continue
        topology = ", ".join(sorted({str(text) for text in rows["cpu_topology"].dropna()}))
        notes.append(
            f"{machines.source_text(source, rows)}: {machines.machine_text(rows)}"
            + (f"; {topology}" if topology else "")
            + f"; measured {machines.dates(rows)}."
        )
    return notes


def _caption(cells: pd.DataFrame, unit: str | None) -> str:
    """What the numbers are: each family's time, in the table's unit."""
    times = ", ".join(
        f"{FAMILIES[name].time_metric.replace('_', ' ')} ({FAMILIES[name].units_called or name})"
        for name in dict.fromkeys(cells["experiment"])
    )
    return (
        f"Several machines, the cells of work they share: {times} on each machine and device"
        f"{f' ({unit})' if unit else ''}, median [{CI_LEVEL:.0%} CI]"
    )


def machines_table(joined: machines.Joined) -> tuple[pd.DataFrame, list[str]]:
    """(table of display strings, footnotes): a row per shared cell of work, a column per
    machine and device, the fastest in bold where its interval clears the others'."""
    cells = joined.cells
    headers = {
        place: HEADER_BREAK.join(machines.column_lines(joined, *place))
        for place in machines.columns(joined)
    }
    places = zip(cells["source"].astype(int), cells["device"], strict=True)
    found = cells.assign(column=[headers[place] for place in places])
    seconds = str(cells["unit"].iloc[0]) if len(cells) else None
    labels, columns = list(dict.fromkeys(cells["label"])), list(headers.values())
    grid = cell_grid(found, labels, columns, "column", seconds)
    units = row_units(grid, seconds)
    table, notes = build_table(
        grid,
        labels,
        columns,
        row_header="Cell of work",
        column_header="machine and device",
        caption=_caption(cells, shared_unit(units)),
        units=units,
        empty=machines.nothing_shared(joined),
    )
    legend = table.attrs["legend"]
    table.attrs["legend"] = [NOT_MEASURED_NOTE if note == MISSING_NOTE else note for note in legend]
    table.attrs["cells"] = _csv_lines(joined)
    table.attrs["csv_columns"] = CSV_COLUMNS
    left_out = sum(joined.alone.values())
    if left_out:
        notes.append(
            f"Not shown: {left_out} cells of work measured on one machine only "
            f"({machines.counts_text(joined)})."
        )
    notes += [*filter(None, [machines.unlike_text(joined)]), *_machine_notes(joined)]
    return table, [JOIN_NOTE, *notes]

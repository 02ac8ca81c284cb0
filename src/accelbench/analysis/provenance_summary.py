"""Provenance summary: where, on what and with which software the records were measured.

One line per field (host, CPU, its topology, GPU, driver, CUDA, Python, each library,
git commit, config hash, Slurm partition, time span), listing its distinct values
with the number of records that carry each. A table that mixes two library
versions or two GPU models says so at a glance, before anyone compares its
numbers.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from accelbench.analysis import tidy
from accelbench.records.record import STATUSES

# (label, tidy column) of the fields listed, in this order; library versions follow.
FIELDS = (
    ("Host", "host"),
    ("CPU", "cpu_model"),
    ("CPU topology", "cpu_topology"),
    ("GPU", "gpu"),
    ("GPUs per job", "gpu_count"),
    ("NVIDIA driver", "driver"),
    ("CUDA runtime", "cuda_runtime"),
    ("Python", "python"),
    ("Git commit", "git_commit"),
    ("Uncommitted changes", "git_dirty"),
    ("Config hash", "config_hash"),
    ("Slurm partition", "slurm_partition"),
)
# Fields whose values differ by design: a cluster's nodes, and the CPUs each job was given.
VARIED = ("Host", "CPU topology")
NONE = "none"


class SummaryCell(TypedDict):
    """One distinct value of a field, and how many records hold it: a line of the CSV."""

    field: str
    value: str
    records: int


CSV_COLUMNS = tuple(SummaryCell.__annotations__)


def _text(value: Any) -> str:
    if pd.isna(value):
        return NONE
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    return str(value)


def _values(column: pd.Series) -> list[tuple[str, int]]:
    """Distinct values, most frequent first, missing ones as "none"."""
    counts = Counter(_text(value) for value in column)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def _span(frame: pd.DataFrame) -> list[tuple[str, int]]:
    started = frame["started"].dropna() if "started" in frame else pd.Series(dtype=object)
    finished = frame["finished"].dropna() if "finished" in frame else pd.Series(dtype=object)
    if started.empty or finished.empty:
        return [(NONE, len(frame))]
    text = f"{started.min():%Y-%m-%d %H:%M} – {finished.max():%Y-%m-%d %H:%M} UTC"
    return [(text, len(frame))]


def _statuses(frame: pd.DataFrame) -> list[tuple[str, int]]:
    counts = frame["status"].value_counts()
    rank = {status: index for index, status in enumerate(STATUSES)}
    ordered = sorted(counts.items(), key=lambda item: (-item[1], rank.get(item[0], len(rank))))
    return [(tidy.STATUS_TEXT.get(status, status), int(n)) for status, n in ordered]


def summary_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """(table, footnotes) in the shape `tables.write_table` writes: one row per field."""
    fields: list[tuple[str, list[tuple[str, int]]]] = [("Status", _statuses(frame))]
    fields += [(label, _values(frame[column])) for label, column in FIELDS if column in frame]
    libraries = [column for column in frame.columns if column.endswith(tidy.VERSION_SUFFIX)]
    fields += [
        (column.removesuffix(tidy.VERSION_SUFFIX), _values(frame[column])) for column in libraries
    ]
    fields.append(("Measured", _span(frame)))
    text = pd.DataFrame(
        {"Value (records)": ["; ".join(f"{v} ({n})" for v, n in values) for _, values in fields]},
        index=pd.Index([label for label, _ in fields], name="Field", dtype="str"),
        dtype="str",
    )
    cells: list[SummaryCell] = [
        {"field": label, "value": value, "records": n}
        for label, values in fields
        for value, n in values
    ]
    text.attrs = {
        "caption": f"Provenance of the {len(frame)} records: distinct values (records)",
        "best": [],
        "cells": cells,
        "csv_columns": CSV_COLUMNS,
    }
    footnotes = [] if len(frame) else ["No records."]
    mixed = [label for label, values in fields[1:-1] if len(values) > 1 and label not in VARIED]
    if mixed:
        footnotes.append(
            f"More than one value of {', '.join(mixed)}: compare numbers measured with the same "
            "setup (see the tidy table's provenance columns)."
        )
    return text, footnotes

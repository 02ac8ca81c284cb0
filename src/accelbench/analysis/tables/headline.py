"""The first table, the project's answer: per cell of work, the best GPU result against the
best CPU result of the same host (accelbench.analysis.gpu_vs_cpu), as a factor with its
interval, copies excluded and included, beside what ran on each side."""

from __future__ import annotations

import pandas as pd

from accelbench.analysis import gpu_vs_cpu, ratios
from accelbench.analysis.tables.model import build_table, cell_grid, text_cell
from accelbench.measuring.statistics import CI_LEVEL

GPU_COLUMN, CPU_COLUMN = "GPU", "best CPU"
# The CSV: one line per compared cell and copies, with what ran on each side and where.
CSV_COLUMNS = (
    "row",
    "copies",
    "status",
    "median",
    "ci_low",
    "ci_high",
    "ci_level",
    "gpu",
    "cpu",
    gpu_vs_cpu.HOST,
    "gpu_record",
    "cpu_record",
    "busy",
    "imprecise",
    "reason",
)
PAIRING_NOTE = (
    "Each row: the fastest GPU record against the fastest CPU record of the same host (its "
    "host name in the provenance), over the implementations and devices of each side; "
    "records of two hosts are never paired. Copies included: the GPU's end-to-end time "
    "(its inputs copied in and its result out) against the CPU's time."
)


def _implementations(cells: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(row, GPU, CPU) of every row: what ran on each side; the GPU side names a second
    implementation where another one is the fastest with its copies."""
    found = []
    for label, rows in cells.groupby("label", sort=False):
        by_copies = rows.set_index("copies")
        alone, copied = (by_copies.loc[name] for name in gpu_vs_cpu.COPIES)
        gpu = alone["gpu"]
        if copied["status"] == "ok" and copied["gpu"] != gpu:
            gpu = f"{gpu}; {copied['gpu']} with copies"
        found.append((label, gpu, alone["cpu"]))
    return found


def _notes(comparison: gpu_vs_cpu.Comparison) -> list[str]:
    """What a row compares, the CPU's baseline where a row departs from it, and how many GPU
    cells had no CPU counterpart (the summary names them)."""
    notes = [PAIRING_NOTE] if len(comparison.cells) else []
    if comparison.cells["baseline"].fillna("").astype(bool).any():
        notes += [
            f"The CPU side is measured in {name} {value} only: a row in another {name} sets "
            f"that {name} on the GPU against {value} on the CPU."
            for name, value in gpu_vs_cpu.CPU_BASELINE.items()
        ]
    count = len(comparison.unpaired)
    if count:
        notes.append(
            f"Not compared: {count} GPU cell{'s' if count != 1 else ''} without the same cell "
            "on the CPU of the same host (listed in the summary)."
        )
    return notes


def headline_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """(table of display strings, footnotes): per cell of work measured on a GPU and on the
    CPU of its host, what ran on each side and how many times faster the GPU is, copies
    excluded and included. Its CSV holds both records' ids and hosts."""
    comparison = gpu_vs_cpu.compare(frame)
    cells = comparison.cells
    labels = list(dict.fromkeys(cells["label"]))
    copies = list(gpu_vs_cpu.COPIES)
    texts = [
        text_cell(label, column, text)
        for label, gpu, cpu in _implementations(cells)
        for column, text in ((GPU_COLUMN, gpu), (CPU_COLUMN, cpu))
    ]
    # The factors first: a table too wide for the page keeps them beside the rows' names.
    table, notes = build_table(
        cell_grid(cells, labels, copies, "copies", None) + texts,
        labels,
        [*copies, GPU_COLUMN, CPU_COLUMN] if labels else [],
        row_header="Workload",
        column_header="comparison",
        caption=(
            "The GPU against the CPU of the same machine: CPU time / GPU time, the best of "
            "each side (×; above 1 the GPU is faster, below 1 the CPU), median [interval "
            f"from both {CI_LEVEL:.0%} CIs, level ≥ {ratios.RATIO_LEVEL:.0%}]"
        ),
        higher_is_better=True,
        expected_level=ratios.RATIO_LEVEL,
        empty="No cell of work was measured on a GPU and on the CPU of the same host.",
        best=False,
    )
    table.attrs["cells"] = cells.rename(columns={"label": "row"})[list(CSV_COLUMNS)].to_dict(
        "records"
    )
    table.attrs["csv_columns"] = CSV_COLUMNS
    return table, [*notes, *_notes(comparison)]

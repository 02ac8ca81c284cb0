"""Every aggregation works on any subset of the experiment families, including none.

A grid of training only, of kernels only, of data science only, or with nothing left after its
exclusions must still give its tables, figures and summaries (empty ones that
say so), never a KeyError on a column that no record had.
"""

from __future__ import annotations

import pytest

from accelbench.analysis import (
    crossovers,
    outputs,
    provenance_summary,
    style,
    tables,
    tidy,
)
from accelbench.studies.roofline import offload, roofline

from records import KERNELS, TRAIN, datasci_records, write_records

SUBSETS = {
    "none": [],
    "train only": TRAIN,
    "kernels only": KERNELS,
    "data science only": datasci_records(["cpu2", "cuda1"]),
}


@pytest.fixture(params=list(SUBSETS), ids=list(SUBSETS))
def frame(request, tmp_path):
    paths = write_records(tmp_path / "records", SUBSETS[request.param])
    frame, problems = tidy.collect(paths)
    assert problems == []
    return frame


def test_every_table_is_made(frame, tmp_path):
    for name, make in outputs.TABLES.items():
        table, footnotes = make(frame, "cpu1")
        tables.write_table(table, footnotes, tmp_path / name)
        assert (tmp_path / f"{name}.md").read_text(encoding="utf-8").strip()


def test_every_figure_is_drawn(frame, tmp_path):
    for name, draw in outputs.FIGURES.items():
        style.save(draw(frame, "cpu1", style.figure_width(None)), tmp_path / name)
        assert (tmp_path / f"{name}.pdf").read_bytes().startswith(b"%PDF")


def test_roofline_outputs_are_made(frame, tmp_path):
    roofline.roof_table(frame).to_csv(tmp_path / "percent.csv", index=False)
    for flag in (False, True):
        crossovers.crossovers(frame, with_transfer=flag)
    style.save(roofline.roofline_figure(frame), tmp_path / "roofline")
    style.save(crossovers.crossover_figure(frame), tmp_path / "crossover")
    assert (tmp_path / "crossover.png").exists()


def test_offload_and_provenance_are_made(frame, tmp_path):
    numbers = offload.break_even_table(frame)
    offload.write_table(numbers, tmp_path / "offload")
    style.save(offload.figure(frame, numbers), tmp_path / "offload")
    table, footnotes = provenance_summary.summary_table(frame)
    tables.write_table(table, footnotes, tmp_path / "provenance")
    assert (tmp_path / "offload.csv").exists() and (tmp_path / "provenance.md").exists()

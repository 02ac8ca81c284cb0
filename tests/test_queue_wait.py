"""Queue wait per partition and request size, the forecast, the table and the figure.

Numbers are worked out by hand from tests/data/sacct_parsing_cases.txt, and for
jobs of several partitions and per-node memory from
tests/data/sacct_several_partitions_and_gpus.txt and sacct_hand_made_old_slurm.txt.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from accelbench.studies.queue_wait import sacct
from accelbench.studies.queue_wait import wait as queue_wait

from conftest import REPO_ROOT

DATA = REPO_ROOT / "tests" / "data"
CASES = DATA / "sacct_parsing_cases.txt"
SEVERAL = DATA / "sacct_several_partitions_and_gpus.txt"
HAND_MADE = DATA / "sacct_hand_made_old_slurm.txt"
CPU_EDGES = [4, 16, 64]
GB_EDGES = [16, 64, 256]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def parsed() -> sacct.ParsedDump:
    return sacct.read(CASES)


@pytest.fixture(scope="module")
def by_cpu_hours(parsed) -> pd.DataFrame:
    return queue_wait.summarise(parsed.jobs, "cpu_hours", CPU_EDGES, ["medium", "gpu"])


def cell(summary: pd.DataFrame, partition: str, label: str) -> dict:
    rows = summary[(summary["partition"] == partition) & (summary["bin"] == label)]
    assert len(rows) == 1
    return rows.iloc[0].to_dict()


def test_bins_are_half_open():
    assert queue_wait.bin_labels(CPU_EDGES) == ["< 4", "4–16", "16–64", "≥ 64"]
    bins = queue_wait.assign_bins(pd.Series([0.5, 4, 15.99, 16, 64, 1e6, math.nan]), CPU_EDGES)
    assert list(bins.astype(object)[:6]) == ["< 4", "4–16", "4–16", "16–64", "≥ 64", "≥ 64"]
    assert pd.isna(bins.iloc[6])


def test_every_partition_and_bin_is_a_row(by_cpu_hours):
    assert list(by_cpu_hours["partition"]) == ["medium"] * 4 + ["gpu"] * 4
    assert list(by_cpu_hours["bin"]) == queue_wait.bin_labels(CPU_EDGES) * 2


def test_small_medium_jobs(by_cpu_hours):
    # Started in medium with < 4 CPU-hours: 1003 (30 s), 1008+0 (60 s), 1013 (900 s).
    # Quartiles of [30, 60, 900], inclusive method: 45 and 480. Not started: 1010.
    row = cell(by_cpu_hours, "medium", "< 4")
    assert (row["jobs"], row["not_started"]) == (3, 1)
    assert (row["median_s"], row["q1_s"], row["q3_s"]) == (60, 45, 480)
    assert (row["ci_low_s"], row["ci_high_s"], row["ci_level"]) == (30, 900, 0.75)


def test_larger_medium_jobs(by_cpu_hours):
    # 16-64 CPU-hours: 1015 (16, 10 s), 1012 (16, 1800 s), 1006_4 (30, 1200 s);
    # the five pending tasks of 1006_[5-9] ask for 30 CPU-hours each.
    row = cell(by_cpu_hours, "medium", "16–64")
    assert (row["jobs"], row["not_started"], row["median_s"]) == (3, 5, 1200)
    top = cell(by_cpu_hours, "medium", "≥ 64")  # 1001: 2 CPUs x 60 h
    assert (top["jobs"], top["median_s"]) == (1, 300)
    empty = cell(by_cpu_hours, "medium", "4–16")
    assert empty["jobs"] == 0 and empty["not_started"] == 0 and math.isnan(empty["median_s"])


def test_gpu_jobs(by_cpu_hours):
    # < 4 CPU-hours: 1014 (60 s), 1008+1 (60 s), 1011 (600 s), 1002 (7200 s); median 330.
    # Not started: 1007's four pending tasks and 1010, which waits in medium and gpu.
    row = cell(by_cpu_hours, "gpu", "< 4")
    assert (row["jobs"], row["not_started"], row["median_s"]) == (4, 5, 330)


def test_jobs_without_a_size_are_counted_apart(parsed, by_cpu_hours):
    assert by_cpu_hours.attrs["unsized"] == {"medium": 1, "gpu": 1}  # UNLIMITED, Partition_Limit
    by_gb = queue_wait.summarise(parsed.jobs, "gb_hours", GB_EDGES, ["medium", "gpu"])
    assert by_gb.attrs["unsized"] == {"medium": 2, "gpu": 1}  # + 1015 with ReqMem 0
    assert cell(by_gb, "medium", "≥ 256")["jobs"] == 1  # 1001: 7.8 GB x 60 h


def test_jobs_of_several_partitions_count_in_each():
    parsed = sacct.read(SEVERAL)
    summary = queue_wait.summarise(parsed.jobs, "cpu_hours", CPU_EDGES, ["medium", "gpu"])
    # 4001 started after 1200 s, but its line lists gpu,medium: counted in both.
    for partition in ("medium", "gpu"):
        shared = cell(summary, partition, "4–16")
        assert (shared["jobs"], shared["median_s"]) == (1, 1200)
        # 4002 still waits in both (8 CPUs x 4 h); 13 was cancelled while waiting in both.
        assert cell(summary, partition, "16–64")["not_started"] == 1
        assert cell(summary, partition, "< 4")["not_started"] == 1
    # Jobs that sacct names one partition for (12 started in gpu, 14 in medium) count there.
    assert (cell(summary, "gpu", "< 4")["jobs"], cell(summary, "gpu", "< 4")["median_s"]) == (1, 3)
    assert cell(summary, "medium", "< 4")["median_s"] == 6
    assert cell(summary, "gpu", "≥ 64")["jobs"] == 6  # 4003-4008: 8 CPUs x 24 h
    assert cell(summary, "medium", "≥ 64")["jobs"] == 0
    notes = queue_wait.data_notes(parsed, "several.txt", ["medium", "gpu"])
    assert notes[1:] == [
        "Started jobs whose accounting line lists several partitions, not the one they ran "
        "in, counted in each with their wait: medium 1, gpu 1."
    ]


def test_per_node_memory_is_binned_by_gb_hours():
    # 8Gn on 1 and 2 nodes (from ReqTRES), 1Gc x 4 CPUs, 64Gn: all have a size.
    parsed = sacct.read(HAND_MADE)
    by_gb = queue_wait.summarise(parsed.jobs, "gb_hours", GB_EDGES, ["medium", "gpu"])
    assert by_gb.attrs["unsized"] == {"medium": 0, "gpu": 0}
    both = cell(by_gb, "medium", "16–64")  # 5001: 16 GB-hours, 600 s; 5002: 32, 1800 s
    assert (both["jobs"], both["median_s"]) == (2, 1200)
    assert cell(by_gb, "medium", "< 16")["jobs"] == 1  # 5003: 8 GB-hours
    assert cell(by_gb, "gpu", "≥ 256")["jobs"] == 1  # 5004: 64 GB x 24 h


def test_unknown_dimension(parsed):
    with pytest.raises(ValueError, match="dimension 'gpu_hours' is not one of"):
        queue_wait.summarise(parsed.jobs, "gpu_hours", CPU_EDGES, ["medium"])


def test_forecast_uses_the_narrowest_group_with_enough_jobs(parsed):
    request = queue_wait.Request(cpus=1, mem_gb=1.0, hours=1.0)  # 1 CPU-hour, 1 GB-hour
    narrow = queue_wait.forecast(parsed.jobs, "medium", request, CPU_EDGES, GB_EDGES, min_jobs=3)
    assert narrow.basis == "CPU-hours < 4 and GB-hours < 16"
    assert (narrow.jobs, narrow.median_s, narrow.q1_s, narrow.q3_s) == (3, 60, 45, 480)
    assert narrow.enough

    # With 4 needed, both bins have 3: all 7 started medium jobs,
    # [10, 30, 60, 300, 900, 1200, 1800] s, median 300.
    wide = queue_wait.forecast(parsed.jobs, "medium", request, CPU_EDGES, GB_EDGES, min_jobs=4)
    assert wide.basis == "all jobs of the partition"
    assert (wide.jobs, wide.median_s) == (7, 300)
    assert wide.enough

    few = queue_wait.forecast(parsed.jobs, "medium", request, CPU_EDGES, GB_EDGES, min_jobs=50)
    assert few.basis == "all jobs of the partition" and not few.enough


def test_forecast_falls_back_to_the_cpu_hours_bin(parsed):
    # 4 CPUs, 8 GB, 4 h: 16 CPU-hours, 32 GB-hours. Joint bin: 1012 and 1006_4; the
    # 16-64 CPU-hours bin adds 1015, whose memory is unknown.
    request = queue_wait.Request(cpus=4, mem_gb=8.0, hours=4.0)
    result = queue_wait.forecast(parsed.jobs, "medium", request, CPU_EDGES, GB_EDGES, min_jobs=3)
    assert result.basis == "CPU-hours 16–64"
    assert (result.jobs, result.not_started, result.median_s) == (3, 5, 1200)


def test_forecast_for_a_partition_without_jobs(parsed):
    request = queue_wait.Request(cpus=1, mem_gb=1.0, hours=1.0)
    result = queue_wait.forecast(parsed.jobs, "long", request, CPU_EDGES, GB_EDGES, min_jobs=1)
    assert result.basis == "no started job of the partition in the accounting data"
    assert result.jobs == 0 and math.isnan(result.median_s) and not result.enough


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (4.2, "4.2 s"),
        (45, "45 s"),
        (150, "2.5 min"),
        (3600, "60 min"),
        (9000, "2.5 h"),
        (3 * 86400, "3.0 d"),
        (math.nan, "–"),
    ],
)
def test_format_duration(seconds, text):
    assert queue_wait.format_duration(seconds) == text


def test_data_notes_name_partitions_without_jobs(parsed):
    notes = queue_wait.data_notes(parsed, "dump.txt", ["medium", "long"])
    assert notes == [
        "Accounting data: dump.txt (28 lines: 17 job rows, 3 job steps skipped, 9 unreadable).",
        "No job of partition long in the accounting data (it has: gpu, medium).",
    ]


def test_table_in_three_forms(by_cpu_hours, tmp_path):
    paths = queue_wait.write_table(by_cpu_hours, str(tmp_path / "wait"), ["A note."])
    markdown, latex, csv = (path.read_text(encoding="utf-8") for path in paths)
    assert "Table: Queue wait per partition by CPU-hours" in markdown
    assert "| Requested CPU-hours | medium | gpu |" in markdown
    assert "| < 4 | 60 s (45 s – 8.0 min); n = 3 (+1 not started) |" in markdown
    assert "Jobs without a finite time limit, not binned: medium 1, gpu 1" in markdown
    assert markdown.rstrip().endswith("A note.")
    assert r"\toprule" in latex and r"$<$ 4 & 60 s (45 s -- 8.0 min)" in latex
    assert r"$\geq$ 64" in latex and "≥" not in latex
    numbers = pd.read_csv(paths[2])
    assert list(numbers.columns) == [
        "partition",
        "cpu-hours",
        "jobs",
        "not_started",
        *queue_wait.STAT_COLUMNS,
    ]
    assert numbers.loc[0, "median_s"] == 60


def test_figure_files(parsed, by_cpu_hours, tmp_path):
    from accelbench.analysis import style

    by_gb = queue_wait.summarise(parsed.jobs, "gb_hours", GB_EDGES, ["medium", "gpu"])
    fig = queue_wait.figure([by_cpu_hours, by_gb])
    assert [ax.get_xlabel() for ax in fig.axes] == list(queue_wait.DIMENSIONS.values())
    assert fig.axes[0].get_ylabel() == "Queue wait (h)"
    pdf, png = style.save(fig, tmp_path / "queue_wait")
    assert pdf.read_bytes().startswith(b"%PDF") and png.read_bytes().startswith(PNG_MAGIC)


def test_figure_without_started_jobs(tmp_path):
    from accelbench.analysis import style

    empty = queue_wait.summarise(sacct.parse("").jobs, "cpu_hours", CPU_EDGES, ["medium"])
    fig = queue_wait.figure([empty])
    assert fig.axes[0].texts[0].get_text() == "no started jobs"
    pdf, _ = style.save(fig, tmp_path / "empty")
    assert pdf.stat().st_size > 0

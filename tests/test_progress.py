"""How far a run has come: its plan, what an interrupted run left unmeasured, the grid's
records with the time left."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from accelbench import config as workflow_config
from accelbench import grid
from accelbench.run import progress


@pytest.fixture(scope="module")
def default_grid():
    config = workflow_config.load()
    return config, grid.expand(config)


def test_a_run_plan_counts_experiments_by_family_and_device(default_grid):
    _, expanded = default_grid
    kernels = [exp.path for exp in expanded.experiments if exp.family == "kernel"]
    trains = [exp.path for exp in expanded.experiments if exp.family == "train"]
    recorded = set(kernels[:4])
    to_measure = [*kernels[4:], *trains]
    message = progress.plan_message(to_measure, expanded, exists=recorded.__contains__)
    by_device = {
        family: {
            device: sum(
                exp.family == family and exp.device == device and exp.path in to_measure
                for exp in expanded.experiments
            )
            for device in ("cpu1", "cpu2")
        }
        for family in ("kernel", "train")
    }
    lines = message.splitlines()
    assert lines[0] == (
        f"This run measures {len(to_measure)} experiments; the grid has "
        f"{len(expanded.experiments)}, 4 of them with a record already."
    )
    assert lines[1:3] == [
        f"  {family:<6}  cpu1 {by_device[family]['cpu1']}, cpu2 {by_device[family]['cpu2']}"
        for family in ("kernel", "train")
    ]
    # The default grid excludes ddp on cpu1 (one process), with the reason in the CSV.
    assert lines[3] == (
        f"{len(expanded.excluded)} cells are excluded as they cannot run "
        f"(train {len(expanded.excluded)}): results/excluded.csv gives each one's reason once "
        "the tables are made, and `accelbench grid` (with this run's --configfile) lists them now."
    )
    one = progress.plan_message(trains[:1], expanded, exists=lambda path: False)
    assert one.splitlines()[:2] == [
        f"This run measures 1 experiment; the grid has {len(expanded.experiments)}, "
        "0 of them with a record already.",
        f"  train  {grid.cell_of_path(trains[0])[2]['device']} 1",
    ]


PATHS = [f"results/kernels/matmul/cpu1/numpy/float64/n{size}.json" for size in range(10, 24)]


def test_what_an_interrupted_run_left_unmeasured_is_listed_by_why():
    recorded = {PATHS[0]}  # a failure on the last attempt still writes its record
    message = progress.unfinished_message(
        unfinished=PATHS,
        stopped=PATHS[:2],
        failed=PATHS[1:3],
        exists=recorded.__contains__,
    )
    lines = message.splitlines()
    assert lines[:6] == [
        "13 experiments of this run have no record; the same command run again measures them:",
        "  cancelled while running or queued (1):",
        f"    {PATHS[1]}",
        "  failed without a record (their errors are above) (1):",
        f"    {PATHS[2]}",
        "  never started (11):",
    ]
    assert lines[6:] == [f"    {path}" for path in PATHS[3:13]] + ["    ... and 1 more"]
    assert progress.unfinished_message(PATHS[:1], [], [], exists=recorded.__contains__) is None
    alone = progress.unfinished_message(PATHS[1:2], PATHS[1:2], [], exists=lambda path: False)
    assert alone.startswith("1 experiment of this run has no record;")


class Job:
    """Snakemake 9's job as progress reads it: is_group() and its output files."""

    def __init__(self, *output):
        self.output = list(output)

    def is_group(self):
        return False


class GroupJob:
    def __init__(self, *jobs):
        self.jobs = set(jobs)

    def is_group(self):
        return True


def test_the_records_of_jobs_are_their_result_outputs_groups_included():
    jobs = [
        GroupJob(Job(PATHS[1]), Job("results/roofs/cpu1/float64.json")),
        Job(PATHS[0]),
        Job("results/tidy.parquet", "results/tidy.csv"),
    ]
    assert progress.measured_paths(jobs) == [
        PATHS[0],
        PATHS[1],
        "results/roofs/cpu1/float64.json",
    ]


def write(root: Path, path: str, status: str, started: datetime, seconds: float) -> None:
    file = root / path
    file.parent.mkdir(parents=True, exist_ok=True)
    finished = started + timedelta(seconds=seconds)
    provenance = {"started": started.isoformat(), "finished": finished.isoformat()}
    file.write_text(json.dumps({"status": status, "provenance": provenance}))


def test_grid_progress_by_family_and_partition_with_the_time_left(default_grid, tmp_path):
    config, expanded = default_grid
    config = {**config, "slurm": {**config["slurm"], "cpu_partition": "medium"}}
    kernels = [exp.path for exp in expanded.experiments if exp.family == "kernel"]
    trains = [exp.path for exp in expanded.experiments if exp.family == "train"]
    run_started = datetime(2026, 1, 1, 12, tzinfo=UTC)
    earlier = run_started - timedelta(days=1)
    # Before this run: two kernels of 10 s and one of 40 s. In this run: two kernels
    # measured side by side (10 s each, both within the first 10 s), and a failed training.
    write(tmp_path, kernels[0], "ok", earlier, 10)
    write(tmp_path, kernels[1], "ok", earlier, 40)
    write(tmp_path, kernels[2], "ok", earlier, 10)
    write(tmp_path, kernels[3], "ok", run_started, 10)
    write(tmp_path, kernels[4], "ok", run_started, 10)
    write(tmp_path, trains[0], "failed", run_started + timedelta(seconds=2), 6)
    (tmp_path / kernels[5]).write_text("{not json")

    reader = progress.RecordReader(tmp_path)
    found = progress.grid_progress(expanded, config, reader, run_started)
    rows = {row.family: row for row in found.rows}
    assert set(rows) == {"kernel", "roof", "datasci", "train"}
    assert {row.partition for row in found.rows} == {"medium"}
    kernel = rows["kernel"]
    assert (kernel.planned, kernel.recorded, kernel.ok) == (len(kernels), 6, 5)
    assert kernel.median_wall_s == 10  # the unreadable record has no wall time
    assert (rows["train"].recorded, rows["train"].ok, rows["train"].median_wall_s) == (1, 0, 6)
    assert rows["roof"].recorded == rows["datasci"].recorded == 0
    # Roofs and data science have no record of their family to go by.
    left, unknown = found.left_s()
    assert left == (len(kernels) - 6) * 10 + (len(trains) - 1) * 6
    assert {row.family for row in unknown} == {"roof", "datasci"}
    # 26 s of measuring in the 10 s since the run started: 2.6 at a time.
    assert found.pace() == pytest.approx(2.6)

    text = progress.render_progress(found, running=True)
    lines = text.splitlines()
    assert lines[0] == (
        f"7 of {found.planned} experiments have a record (2 not ok: tidy.csv or the tables say why)"
    )
    assert lines[1].split() == ["family", "partition", "done", "planned", "median", "wall", "left"]
    assert lines[2].split() == [
        "kernel",
        "medium",
        "6",
        str(len(kernels)),
        "10",
        "s",
        *progress.duration((len(kernels) - 6) * 10).split(),
    ]
    assert lines[-1] == (
        f"ETA: about {progress.duration(left / 2.6)} ({progress.duration(left)} of measuring "
        "left, at 2.6 experiments at a time, the pace of this run so far); not counted: "
        "roof on medium, datasci on medium, with no record of their family yet."
    )
    assert (
        progress.render_progress(found, running=False)
        .splitlines()[-1]
        .startswith(
            f"No Snakemake run holds this directory now: about {progress.duration(left)} of "
            "measuring left for the next one; not counted:"
        )
    )
    # Before two records of this run exist, one experiment at a time.
    single = progress.grid_progress(expanded, config, reader, run_started + timedelta(hours=1))
    assert single.pace() is None
    assert "one experiment at a time" in progress.render_progress(single, running=True)


def test_a_finished_grid_says_so_and_the_reader_sees_changes(default_grid, tmp_path):
    config, expanded = default_grid
    reader = progress.RecordReader(tmp_path)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for exp in expanded.experiments:
        write(tmp_path, exp.path, "ok", start, 1)
    done = progress.grid_progress(expanded, config, reader)
    assert done.recorded == done.planned
    assert progress.render_progress(done, running=True).endswith(
        "Every experiment of the grid has its record."
    )
    # A record measured again is read again; one removed is no longer counted.
    changed = expanded.experiments[0].path
    write(tmp_path, changed, "failed", start, 100)
    os.utime(tmp_path / changed, ns=(1, 1))
    assert reader(changed).status == "failed" and reader(changed).wall_s == 100
    (tmp_path / changed).unlink()
    assert reader(changed) is None
    assert progress.grid_progress(expanded, config, reader).recorded == done.planned - 1


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (4.2, "4 s"),
        (89, "89 s"),
        (90, "2 min"),
        (89 * 60, "89 min"),
        (3 * 3600 + 300, "3 h 05 min"),
    ],
)
def test_durations_read_at_a_glance(seconds, text):
    assert progress.duration(seconds) == text

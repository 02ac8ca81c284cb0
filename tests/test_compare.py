"""Comparing two runs: planted regressions are found, noise inside the CIs is not."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from accelbench import cli
from accelbench.analysis import compare, tidy

from records import FAILED, NO_GPU, OOM, kernel_record, steps, train_record, write_records

RESNET18 = "train/resnet18/cpu1/fp32/single/bs16"
SLOW_KERNEL = "kernels/matmul/cpu1/torch/float32/n256"
FAST_KERNEL = "kernels/matmul/cpu1/torch/float32/n512"


def times(factor, start=0.50, stride=0.01):
    """Ten samples whose median and 95% CI are `factor` times those of steps(start, stride)."""
    return [factor * sample for sample in steps(start, stride)]


def old_run():
    return [
        train_record("resnet18", "cpu1", samples=times(1.0)),
        train_record("resnet50", "cpu1", samples=times(1.0, 1.0, 0.1)),
        train_record("resnet18", "cuda1", "unavailable", reason=NO_GPU),
        train_record("vgg11", "cuda1", samples=times(1.0, 0.05, 0.001)),
        train_record("vgg11", "cpu2", samples=times(1.0, 2.0, 0.01)),
        train_record("lstm", "cpu2", "failed", reason=FAILED),
        train_record("resnet50", "cpu2", samples=times(1.0)),
        train_record("alexnet", "cuda1", "unavailable", reason=NO_GPU),  # not in the new run
        kernel_record("torch", "cpu1", 256, samples=times(1.0, 2.0e-4, 0.001e-4)),
        kernel_record("torch", "cpu1", 512, samples=times(1.0, 1.6e-3, 0.01e-3)),
    ]


def new_run():
    return [
        train_record("resnet18", "cpu1", samples=times(1.2)),  # planted: 20% slower
        train_record("resnet50", "cpu1", samples=times(1.0, 1.05, 0.1)),  # inside the CI
        train_record("resnet18", "cuda1", "unavailable", reason=NO_GPU),
        train_record("vgg11", "cuda1", "oom", reason=OOM),
        train_record("alexnet", "cpu1", samples=times(1.0)),  # new cell
        train_record("lstm", "cpu2", samples=times(1.0)),
        train_record("resnet50", "cpu2", "unavailable", reason=NO_GPU),
        kernel_record("torch", "cpu1", 256, samples=times(1.05, 2.0e-4, 0.001e-4)),
        kernel_record("torch", "cpu1", 512, samples=times(0.8, 1.6e-3, 0.01e-3)),
    ]


@pytest.fixture
def runs(tmp_path):
    write_records(tmp_path / "old", old_run())
    write_records(tmp_path / "new", new_run())
    return tmp_path / "old", tmp_path / "new"


def verdicts(result):
    return {(row.id, row.metric): row.verdict for row in result.itertuples()}


def test_planted_regression_fails_the_gate(runs, capsys):
    assert cli.main(["compare", *map(str, runs)]) == 1
    out = capsys.readouterr().out
    assert (
        f"| regression | {RESNET18} | time_per_batch | 545 [510, 580] ms "
        "| 654 [612, 696] ms | +20.0% |"
    ) in out
    assert "| regression | train/vgg11/cuda1/fp32/single/bs16 | status | ok | OOM |  |" in out
    assert (
        "| slower | kernels/matmul/cpu1/torch/float32/n256 | time | 200.45 [200.10, 200.80] µs "
        "| 210.47 [210.11, 210.84] µs | +5.0% |"
    ) in out
    assert (
        "11 cells compared: 3 regression, 1 slower, 1 faster, 1 now runs, 1 not run, 1 added, "
        "1 removed, 2 unchanged"
    ) in out


def test_verdicts_of_every_kind_of_cell(runs):
    old, new = (compare.load_run(path)[0] for path in runs)
    result = compare.compare(old, new)
    assert verdicts(result) == {
        (RESNET18, "time_per_batch"): "regression",
        ("train/vgg11/cuda1/fp32/single/bs16", "status"): "regression",
        (SLOW_KERNEL, "time"): "slower",  # 5% slower, CIs apart, under the 10% threshold
        (FAST_KERNEL, "time"): "faster",
        ("train/lstm/cpu2/fp32/single/bs16", "status"): "now runs",
        ("train/resnet50/cpu2/fp32/single/bs16", "status"): "not run",
        ("train/alexnet/cpu1/fp32/single/bs16", "status"): "added",
        ("train/vgg11/cpu2/fp32/single/bs16", "status"): "regression",  # ran, now lost
        ("train/alexnet/cuda1/fp32/single/bs16", "status"): "removed",
        ("train/resnet50/cpu1/fp32/single/bs16", "time_per_batch"): "unchanged",
        ("train/resnet18/cuda1/fp32/single/bs16", "status"): "unchanged",
    }
    regression = result.set_index(["id", "metric"]).loc[(RESNET18, "time_per_batch")]
    assert regression["change"] == pytest.approx(0.2)
    assert regression["slowdown"] == pytest.approx(0.2)
    assert list(result.columns) == list(compare.COLUMNS)
    assert result["verdict"].iloc[0] == "regression"


@pytest.mark.parametrize("damage", ["truncated", "missing"])
def test_a_cell_lost_in_the_new_run_is_a_regression(tmp_path, capsys, damage):
    record = train_record("resnet50", "cpu1", samples=times(1.0, 1.0, 0.1))
    write_records(tmp_path / "old", [record])
    (path,) = write_records(tmp_path / "new", [record])
    if damage == "truncated":
        path.write_text(path.read_text()[:40])
    else:  # the new run has only another cell
        path.unlink()
        write_records(tmp_path / "new", [train_record("fcn", "cpu1", samples=times(1.0))])
    assert cli.main(["compare", str(tmp_path / "old"), str(tmp_path / "new")]) == 1
    out = capsys.readouterr().out
    new_status = "invalid" if damage == "truncated" else ""
    assert f"| regression | {record[0]} | status | ok | {new_status}" in out


def test_a_change_inside_the_interval_passes(tmp_path, capsys):
    write_records(
        tmp_path / "old", [train_record("resnet50", "cpu1", samples=times(1.0, 1.0, 0.1))]
    )
    # Median 1.50 -> 1.60 (+6.7%), but the intervals [1.1, 1.8] and [1.2, 1.9] overlap.
    write_records(
        tmp_path / "new", [train_record("resnet50", "cpu1", samples=times(1.0, 1.1, 0.1))]
    )
    assert cli.main(["compare", str(tmp_path / "old"), str(tmp_path / "new")]) == 0
    assert "1 cells compared: 1 unchanged" in capsys.readouterr().out


def test_the_threshold_decides_what_regresses(runs):
    old, new = (compare.load_run(path)[0] for path in runs)
    strict = verdicts(compare.compare(old, new, threshold=0.01))
    assert strict[SLOW_KERNEL, "time"] == "regression"
    lenient = verdicts(compare.compare(old, new, threshold=0.25))
    assert lenient[RESNET18, "time_per_batch"] == "slower"


def test_a_rate_regresses_when_it_falls(runs):
    old, new = (compare.load_run(path)[0] for path in runs)
    result = compare.compare(old, new, metrics=["gflops"], threshold=0.01)
    assert verdicts(result)[SLOW_KERNEL, "gflops"] == "regression"
    assert verdicts(result)[FAST_KERNEL, "gflops"] == "faster"
    slow = result.set_index(["id", "metric"]).loc[(SLOW_KERNEL, "gflops")]
    assert slow["change"] == pytest.approx(1 / 1.05 - 1)
    assert slow["slowdown"] == pytest.approx(0.05)


def test_runs_from_tidy_tables_and_what_else_changed(runs, tmp_path, capsys):
    old, new = runs
    frame, _ = compare.load_run(new)
    upgraded = frame.assign(torch_version="2.6.0")
    upgraded.attrs = frame.attrs
    only_tidy = tmp_path / "tidy_only"
    tidy.write(upgraded, only_tidy / "tidy.parquet", only_tidy / "tidy.csv")
    csv = tmp_path / "out" / "changes.csv"
    assert cli.main(["compare", str(old), str(only_tidy), "--csv", str(csv)]) == 1
    out = capsys.readouterr().out
    assert "Changed between the runs:\n- torch: 2.5.0 -> 2.6.0" in out
    written = pd.read_csv(csv)
    assert set(written["verdict"]) >= {"regression", "unchanged", "added", "removed"}
    assert compare.load_run(only_tidy / "tidy.parquet")[0]["id"].tolist() == frame["id"].tolist()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nowhere", "nowhere"], "nowhere: no such file or directory"),
        (["{empty}", "{empty}"], "no result records (*.json) and no tidy.parquet in it"),
        (["{old}", "{new}", "--metric", "walltime"], "metric walltime not in either run"),
        (["{old}", "{new}", "--threshold", "-0.1"], "threshold must be >= 0"),
    ],
)
def test_bad_input_exits_2_with_the_reason(runs, tmp_path, capsys, args, message):
    (tmp_path / "empty").mkdir()
    places = {"old": runs[0], "new": runs[1], "empty": tmp_path / "empty"}
    args = [arg.format(**places) for arg in args]
    assert cli.main(["compare", *args]) == 2
    assert message in capsys.readouterr().err


def test_a_slowdown_measured_on_a_busy_machine_is_not_called_a_regression(tmp_path, capsys):
    write_records(tmp_path / "old", [train_record("resnet18", "cpu1", samples=times(1.0))])
    busy = train_record("resnet18", "cpu1", samples=times(1.5))
    busy[1]["conditions"] = {"busy": True, "other_cpus": 1.0}
    write_records(tmp_path / "new", [busy])
    old, new = (compare.load_run(tmp_path / side)[0] for side in ("old", "new"))
    result = compare.compare(old, new)
    row = result[result["metric"] == "time_per_batch"].iloc[0]
    assert row["verdict"] == compare.BUSY_SLOWER and row["busy"]
    assert cli.main(["compare", str(tmp_path / "old"), str(tmp_path / "new")]) == 0
    out = capsys.readouterr().out
    assert "slower, busy machine" in out and "regression" in out  # the legend says why


def test_an_invalid_record_in_either_run_is_listed_never_unchanged(tmp_path, capsys):
    cells = [train_record(model, "cpu1", samples=times(1.0)) for model in ("fcn", "lstm")]
    old_paths = write_records(tmp_path / "old", cells)
    new_paths = write_records(tmp_path / "new", cells)
    for path in (old_paths[0], new_paths[0], old_paths[1]):  # fcn in both, lstm in the old run
        path.write_text(path.read_text().replace('"median": 0.545', '"median": true'))
    old, new = (compare.load_run(tmp_path / side)[0] for side in ("old", "new"))
    assert verdicts(compare.compare(old, new)) == {
        ("train/fcn/cpu1/fp32/single/bs16", "status"): compare.INVALID_RECORD,
        ("train/lstm/cpu1/fp32/single/bs16", "status"): compare.INVALID_RECORD,
    }
    assert cli.main(["compare", str(tmp_path / "old"), str(tmp_path / "new")]) == 0
    captured = capsys.readouterr()
    assert "2 cells compared: 2 invalid record" in captured.out
    assert "| invalid record | train/fcn/cpu1/fp32/single/bs16 | status | invalid record |" in (
        captured.out
    )
    assert "metrics.time_per_batch.median: true is not a number" in captured.err


def test_an_ok_record_without_its_time_is_counted(tmp_path, capsys):
    cell = train_record("fcn", "cpu1", samples=times(1.0))
    write_records(tmp_path / "old", [cell])
    (path,) = write_records(tmp_path / "new", [cell])
    lacking = json.loads(path.read_text())
    del lacking["metrics"]["time_per_batch"]
    path.write_text(json.dumps(lacking))
    assert cli.main(["compare", str(tmp_path / "old"), str(tmp_path / "new")]) == 1
    assert "1 cells compared: 1 regression" in capsys.readouterr().out


def test_a_tidy_table_row_without_its_time_is_counted(tmp_path):
    cells = [train_record(model, "cpu1", samples=times(1.0)) for model in ("fcn", "lstm")]
    old = compare.load_run(write_records(tmp_path / "run", cells)[0].parents[5])[0]
    new = old.copy()
    new.attrs = old.attrs
    fcn, lstm = (new["model"] == model for model in ("fcn", "lstm"))
    new.loc[fcn, "time_per_batch_median"] = float("nan")  # ok, but its time is gone
    new.loc[lstm, "throughput_median"] = float("nan")  # a metric gone
    metrics = ["time_per_batch", "throughput"]
    found = compare.compare(old, new, metrics)
    assert verdicts(found) == {
        ("train/fcn/cpu1/fp32/single/bs16", "status"): compare.REGRESSION,
        ("train/lstm/cpu1/fp32/single/bs16", "time_per_batch"): "unchanged",
        ("train/lstm/cpu1/fp32/single/bs16", "throughput"): compare.REGRESSION,
    }
    text = compare.report_text(found, 0.1, [])
    assert "| regression | train/lstm/cpu1/fp32/single/bs16 | throughput | 29.4 [27.6, 31.4] " in (
        text
    )
    assert "| regression | train/fcn/cpu1/fp32/single/bs16 | status | ok | invalid record |" in (
        text
    )
    back = verdicts(compare.compare(new, old, metrics))
    assert back[("train/lstm/cpu1/fp32/single/bs16", "throughput")] == "added"


def test_a_file_whose_name_is_no_cell_is_listed_without_a_row(tmp_path, capsys):
    cell = train_record("fcn", "cpu1", samples=times(1.0))
    write_records(tmp_path / "old", [cell])
    (path,) = write_records(tmp_path / "new", [cell])
    for name in ("bsabc.json", "bs0.json"):
        (path.parent / name).write_text("{}")
    frame, problems = compare.load_run(tmp_path / "new")
    assert list(frame["id"]) == [cell[0]]
    assert sorted(Path(listed).name for listed, _ in problems) == ["bs0.json", "bsabc.json"]
    assert cli.main(["compare", str(tmp_path / "old"), str(tmp_path / "new")]) == 0
    assert "bsabc.json: 'schema_version' is missing" in capsys.readouterr().err


def test_runs_of_different_grids_compare_on_the_cells_both_have(tmp_path, capsys):
    """A new run of a smaller grid lacks cells the old one had: without --common each is a
    lost cell, a regression; with it they are left out and counted, and the cells both
    runs have are judged as ever."""
    shared = train_record("resnet50", "cpu1", samples=times(1.0, 1.0, 0.1))
    old_only = [train_record(model, "cpu2", samples=times(1.0)) for model in ("fcn", "lstm")]
    write_records(tmp_path / "old", [shared, *old_only])
    new_only = train_record("resnet18", "cpu1", samples=times(1.0))
    write_records(tmp_path / "new", [shared, new_only])
    runs = [str(tmp_path / "old"), str(tmp_path / "new")]

    assert cli.main(["compare", *runs]) == 1
    lost = capsys.readouterr().out
    assert lost.count("| regression |") == 2

    assert cli.main(["compare", *runs, "--common"]) == 0
    out = capsys.readouterr().out
    assert "regression" not in out.split("cells compared")[0]
    assert "1 cells compared: 1 unchanged" in out
    assert (
        "Left out (--common): 3 cells in one run only, 2 in the old run and 1 in the new one."
    ) in out
    # A cell both have that regressed still fails the gate.
    slower = train_record("resnet50", "cpu1", samples=times(2.0, 1.0, 0.1))
    write_records(tmp_path / "new", [slower, new_only])
    assert cli.main(["compare", *runs, "--common"]) == 1
    assert "| regression | train/resnet50/cpu1/fp32/single/bs16 |" in capsys.readouterr().out


def test_a_unit_whose_source_differs_between_the_runs_is_named_among_the_changes():
    old = pd.DataFrame(
        {
            "experiment": ["kernel", "kernel", "train"],
            "kernel": ["axpby", "saxpy", None],
            "model": [None, None, "mlp"],
            "unit_digest": ["a" * 16, "b" * 16, "c" * 16],
        }
    )
    new = old.assign(unit_digest=["d" * 16, "b" * 16, "c" * 16])
    assert compare.source_changes(old, new) == [f"source of kernel axpby: {'a' * 16} -> {'d' * 16}"]
    assert compare.source_changes(old, old) == []
    assert compare.source_changes(old.drop(columns="unit_digest"), new) == []

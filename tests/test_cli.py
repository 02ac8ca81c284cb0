"""The accelbench command line."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from accelbench import cli, grid
from accelbench.job import measurement
from accelbench.records.record import load_record, make_record, write_record
from accelbench.roofs import check as roof_check

from conftest import REPO_ROOT


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)


def test_grid_lists_paths_and_exclusions(tmp_path, capsys):
    extra = tmp_path / "gpu.yaml"
    extra.write_text("kernels:\n  devices: [cpu1, cuda1]\n  backends: [numpy, cupy]\n")
    assert cli.main(["grid", "--configfile", str(extra)]) == 0
    out, err = capsys.readouterr()
    paths = out.split()
    assert "results/kernels/matmul/cpu1/numpy/float32/n128.json" in paths
    assert "results/kernels/matmul/cuda1/cupy/float32/n512.json" in paths
    assert "results/train/resnet18/cpu2/fp32/single/bs16.json" in paths
    assert (
        "excluded results/kernels/matmul/cuda1/numpy/float32/n128.json: "
        "backend 'numpy' runs on cpu devices, not on cuda1" in err
    )
    # 4 matmul cells (the other kernels' backends come from config.yaml's overrides),
    # and ddp on cpu1 for the 3 models of the default grid.
    assert f"{len(paths)} experiments, 7 excluded" in err


def test_grid_reports_bad_names(tmp_path, capsys):
    extra = tmp_path / "bad.yaml"
    extra.write_text("kernels:\n  backends: [fortran]\n")
    assert cli.main(["grid", "--configfile", str(extra)]) == 2
    assert "unknown backend 'fortran'; allowed:" in capsys.readouterr().err


COMMAND = "import sys; from accelbench import cli; sys.exit(cli.main(sys.argv[1:]))"


def test_benchmark_prints_the_table(tmp_path):
    """Tiny sizes: this checks the command and the table, not this machine's speed."""
    small = tmp_path / "small.yaml"
    small.write_text(
        "kernels:\n"
        "  sizes: {matmul: [24], mandelbrot: [12]}\n"
        "  roofs: {gemm_size: {cpu: 32, cuda: 32}, copy_mib: {cpu: 1, cuda: 1}}\n"
        "  samples: 3\n"
    )
    args = ["benchmark", "--configfile", str(small), "--dtype", "float32", "--min-run-time", "0.01"]
    # In an interpreter of its own, as the command's: measuring jax starts JAX's client.
    done = subprocess.run(
        [sys.executable, "-c", COMMAND, *args], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "against this machine's measured roofs" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert [row.split(" | ")[0] for row in rows[1:]] == [
        "| GEMM n=24 float32",
        "| saxpy n=262144 float32",
        "| stencil n=512 float32",
        "| reduction n=262144 float32",
        "| Mandelbrot n=12 float64",
    ]
    assert "GEMM roof" in rows[1] and "memory roof" in rows[2] and "naive Python" in rows[5]
    assert ">= 80%" in rows[1] and ">= 70%" in rows[2] and ">= 100x" in rows[5]


def test_train_runs_the_experiment_a_path_names(workflow_dir, monkeypatch, capsys):
    monkeypatch.chdir(workflow_dir)
    extra = workflow_dir / "config" / "small.yaml"
    extra.write_text(
        "train:\n  steps: 3\n  min_run_time: 0\n  warmup_steps: 1\n  warmup_s: 0\n"
        "  budget_s: 0\n  model_options:\n"
        "    fcn: {input_dim: 16, hidden: [8], classes: 3}\n"
    )
    target = "results/train/fcn/cpu1/fp64/single/bs4.json"
    assert cli.main(["train", target, "--configfile", str(extra)]) == 0
    assert f"{target}: ok" in capsys.readouterr().out
    record = load_record(workflow_dir / target)
    assert record["params"]["options"] == {
        "lr": 0.01,
        "input_dim": 16,
        "hidden": [8],
        "classes": 3,
        "activation": "relu",
    }
    # The default config's three independent runs (no budget for more) of three steps each.
    assert record["metrics"]["time_per_batch"]["runs"] == 3
    assert record["metrics"]["time_per_batch"]["n"] == 9
    assert len(record["series"]["time_per_batch_run_medians"]["values"]) == 3


def test_train_refuses_a_path_that_is_not_an_experiment(workflow_dir, monkeypatch, capsys):
    monkeypatch.chdir(workflow_dir)
    assert cli.main(["train", "results/train/fcn/cpu1/fp32/ddp/bs4.json"]) == 2
    assert "ddp needs at least 2 processes; cpu1 gives one" in capsys.readouterr().err
    assert cli.main(["train", "results/train/fcn.json"]) == 2
    assert "is not a train result path" in capsys.readouterr().err


# --- bad arguments are refused before anything is measured ------------------------------------


@pytest.fixture
def nothing_measured(monkeypatch):
    """Any measurement fails the test: a refusal must come before it."""

    def measured(*args, **kwargs):
        raise AssertionError("measured although the arguments are refused")

    monkeypatch.setattr(roof_check, "measure_roof", measured)
    monkeypatch.setattr(roof_check, "measure_kernel", measured)
    monkeypatch.setattr(measurement, "run", measured)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--samples", "-3", "argument --samples: -3 is not a positive integer"),
        ("--samples", "0", "argument --samples: 0 is not a positive integer"),
        ("--samples", "many", "argument --samples: many is not a positive integer"),
        ("--min-run-time", "nan", "argument --min-run-time: nan is not a positive number of s"),
        ("--min-run-time", "inf", "argument --min-run-time: inf is not a positive number of s"),
        ("--min-run-time", "-1", "argument --min-run-time: -1 is not a positive number of s"),
        ("--min-run-time", "0", "argument --min-run-time: 0 is not a positive number of s"),
    ],
)
def test_benchmark_refuses_a_count_or_a_time_that_makes_no_sense(
    nothing_measured, capsys, option, value, message
):
    with pytest.raises(SystemExit) as exit:
        cli.main(["benchmark", option, value])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


@pytest.mark.parametrize("kernel", ["mandelbrot", "matmul"])
def test_benchmark_refuses_a_config_without_the_sizes_it_measures(
    nothing_measured, tmp_path, capsys, kernel
):
    extra = tmp_path / "empty.yaml"
    extra.write_text(f"kernels:\n  sizes: {{{kernel}: []}}\n")
    assert cli.main(["benchmark", "--configfile", str(extra)]) == 2
    assert capsys.readouterr().err == (
        f"accelbench: {extra}: config key kernels.sizes.{kernel} is empty; the benchmark "
        f"measures {kernel} at its {'largest' if kernel == 'matmul' else 'first'} size\n"
    )


def test_benchmark_takes_the_samples_it_is_given_else_the_configs(monkeypatch, capsys):
    asked = []

    def run(config, dtypes, min_run_time, samples):
        asked.append(samples)
        return []

    monkeypatch.setattr(roof_check, "run", run)
    assert cli.main(["benchmark", "--samples", "7"]) == 0
    assert cli.main(["benchmark"]) == 0
    assert asked == [7, 5]  # config/config.yaml: kernels.samples 5


TRAIN_TARGET = "results/train/fcn/cpu1/fp32/single/bs4.json"


def test_train_keeps_the_record_it_replaces(workflow_dir, monkeypatch, capsys):
    monkeypatch.chdir(workflow_dir)
    exp = grid.parse_path(TRAIN_TARGET, "train")
    old = make_record(
        experiment="train",
        experiment_id=exp.id,
        status="unavailable",
        reason="measured before",
        params=dataclasses.asdict(exp),
        provenance={},
    )
    write_record(TRAIN_TARGET, old)

    def run(exp, settings, path, context):
        write_record(path, {**old, "reason": "measured now"})
        return "unavailable"

    monkeypatch.setattr(measurement, "run", run)
    assert cli.main(["train", TRAIN_TARGET]) == 0
    (kept,) = (workflow_dir / "results" / "replaced").glob("*/train/fcn/cpu1/fp32/single/bs4.json")
    assert load_record(kept)["reason"] == "measured before"
    assert load_record(TRAIN_TARGET)["reason"] == "measured now"


def test_train_refuses_a_directory_as_its_record_before_measuring(
    workflow_dir, monkeypatch, nothing_measured, capsys
):
    monkeypatch.chdir(workflow_dir)
    (workflow_dir / TRAIN_TARGET).mkdir(parents=True)
    assert cli.main(["train", TRAIN_TARGET]) == 2
    assert capsys.readouterr().err == (
        f"accelbench: {TRAIN_TARGET} is a directory; the record is written as a file there\n"
    )

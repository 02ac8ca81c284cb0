"""The worked example (examples/my_benchmarks) through the workflow: a kernel, a data science
step and a model of the user's, beside built-ins, measured, recorded, tabled and drawn as the
built-ins are; an edit of one of them measures its cells again, and only them."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from accelbench.records.record import load_record

from conftest import REPO_ROOT, planned_cells, snakemake

pytestmark = pytest.mark.workflow

# The example's grid, made tiny: merged after its config, which names the folder.
TINY = """\
kernels:
  devices: [cpu1]
  backends: [numpy, torch]
  sizes: {axpby: [1000], saxpy: [1000]}
  overrides:
    saxpy: {devices: [cpu1], backends: [numpy, torch], dtypes: [float32]}
  roofs:
    gemm_size: {cpu: 64, cuda: 64}
    copy_mib: {cpu: 1, cuda: 1}
  min_run_time: 0.02
  samples: 5
  warmup_s: 0.05
  runs: 3
  budget_s: 0
datasci:
  devices: [cpu1]
  backends: [pandas]
  sizes: {latest: [1000], groupby: [1000]}
  min_run_time: 0.02
  warmup_s: 0.05
  budget_s: 0
train:
  devices: [cpu1]
  batch_sizes: {tiny-cnn: [4], resnet18: [], fcn: [4]}
  model_options: {tiny-cnn: {width: 4}}
  steps: 3
  min_run_time: 0
  warmup_steps: 1
  warmup_s: 0
  budget_s: 0
contention:
  retries: 0
  max_host_slowdown: 0
"""
THE_USERS = {
    "kernels": "results/kernels/axpby/cpu1/numpy/float32/n1000.json",
    "datasci": "results/datasci/latest/cpu1/pandas/n1000.json",
    "models": "results/train/tiny-cnn/cpu1/fp32/single/bs4.json",
}


def test_the_worked_example_runs_through_the_workflow_beside_the_built_ins(workflow_dir, tmp_path):
    units = tmp_path / "my_benchmarks"
    shutil.copytree(
        REPO_ROOT / "examples" / "my_benchmarks",
        units,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (tmp_path / "tiny.yaml").write_text(TINY)
    configs = ("--configfile", str(units / "config.yaml"), str(tmp_path / "tiny.yaml"))
    done = snakemake(workflow_dir, "--cores", "2", *configs)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]

    for kind, path in THE_USERS.items():
        record = load_record(workflow_dir / path)
        assert record["status"] == "ok", record["reason"]
        assert record["unit"]["origin"] == str(units)
        assert record["unit"]["files"][0].startswith(f"{units}/{kind}/")
    builtin = load_record(workflow_dir / "results/kernels/saxpy/cpu1/numpy/float32/n1000.json")
    assert builtin["unit"]["origin"] == "builtin"

    tidy = pd.read_parquet(workflow_dir / "results" / "tidy.parquet")
    measured = set(tidy["kernel"].dropna()) | set(tidy["workload"].dropna())
    assert {"axpby", "saxpy", "latest", "groupby"} <= measured
    assert {"tiny-cnn", "fcn"} <= set(tidy["model"].dropna())
    assert (tidy["status"] == "ok").all()
    for table, name in (("kernel_time", "axpby"), ("datasci_time", "latest")):
        assert name in (workflow_dir / "results" / "tables" / f"{table}.md").read_text()
    tables = workflow_dir / "results" / "tables"
    assert "tiny-cnn" in (tables / "train_time_per_batch.md").read_text()
    assert (workflow_dir / "results" / "figures" / "kernel_throughput.pdf").is_file()
    assert "axpby" in (workflow_dir / "results" / "summary.html").read_text()

    # An edited unit is measured again (its digest is in its jobs' params); the rest is kept.
    kernel = units / "kernels" / "axpby.py"
    kernel.write_text(kernel.read_text() + "\n# edited\n")
    again = snakemake(workflow_dir, "-n", "--cores", "2", *configs)
    assert again.returncode == 0, again.stderr[-3000:]
    assert planned_cells(again.stdout + again.stderr) == {"kernel": 2}  # axpby, not saxpy

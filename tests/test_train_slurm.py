"""A ddp experiment run as Slurm tasks (srun), finding its peers from Slurm's environment.

Needs the local Slurm of tools/slurm-local (`make slurm-up`); without it these
tests skip, except in CI (CI=true), where a missing Slurm is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from accelbench.grid import TrainExperiment
from accelbench.results import load_record
from accelbench.train.loop import measure_training

pytestmark = pytest.mark.slurm

TARGET = "results/train/fcn/cpu2/fp32/ddp/bs8.json"
CONFIG = """\
train:
  devices: [cpu2]
  strategies: [ddp]
  batch_sizes:
    fcn: [8]
  steps: 3
  warmup_steps: 1
  model_options:
    fcn: {input_dim: 32, hidden: [16, 16], classes: 4}
"""


@pytest.fixture(scope="module")
def srun():
    done = None
    if shutil.which("sinfo") and shutil.which("srun"):
        done = subprocess.run(
            ["sinfo", "--noheader", "--format=%R %a"], capture_output=True, text=True, timeout=15
        )
    if done is None or done.returncode != 0 or "medium up" not in done.stdout:
        message = "no local Slurm with a medium partition; start one with `make slurm-up` (root)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def test_ddp_as_two_srun_tasks_matches_the_local_launch(srun, workflow_dir):
    (workflow_dir / "config" / "srun.yaml").write_text(CONFIG)
    command = [
        "srun",
        "--partition=medium",
        "--ntasks=2",
        "--cpus-per-task=1",
        "--time=10",
        sys.executable,
        "-m",
        "accelbench.cli",
        "train",
        TARGET,
        "--configfile",
        "config/srun.yaml",
    ]
    env = {**os.environ, "PYTHONPATH": str(workflow_dir / "src")}
    done = subprocess.run(
        command, cwd=workflow_dir, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count(f"{TARGET}: ok") == 2, "every task reports the status"
    record = load_record(workflow_dir / TARGET)
    assert record["status"] == "ok", record["reason"]
    assert record["params"]["launcher"] == "slurm"
    assert record["metrics"]["processes"]["value"] == 2
    assert record["provenance"]["slurm"]["job_id"]
    local = measure_training(
        TrainExperiment("fcn", "cpu2", "fp32", "ddp", 8),
        {
            "seed": 0,
            "steps": 3,
            "warmup_steps": 1,
            "model_options": {"input_dim": 32, "hidden": [16, 16], "classes": 4},
        },
    )
    assert local.params["launcher"] == "torchrun"
    assert record["series"]["loss"]["values"] == pytest.approx(local.series["loss"]["values"])

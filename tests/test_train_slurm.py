"""ddp experiments submitted through the Slurm executor as one Slurm task per process.

The workflow tests need the local Slurm of tools/slurm-local (`make slurm-up`);
without it they skip, except in CI (CI=true), where a missing Slurm is a
failure. The multi-node submission is checked on its sbatch line: one local
node cannot run a two-node job.
"""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from accelbench.families.train import TrainExperiment
from accelbench.records.record import load_record
from accelbench.train.loop import measure_training
from accelbench.train.settings import TrainSettings

from conftest import snakemake

CPU_TARGET = "results/train/fcn/cpu2/fp32/ddp/bs8.json"
GPU_TARGET = "results/train/fcn/cuda2/fp32/ddp/bs8.json"
MULTI_NODE_TARGET = "results/train/fcn/2x2cuda/fp32/ddp/bs8.json"
FCN = {"input_dim": 32, "hidden": [16, 16], "classes": 4}
CONFIG = """\
train:
  devices: [cpu2, cuda2, 2x2cuda]
  strategies: [ddp]
  batch_sizes:
    fcn: [8]
    resnet18: []
    lstm: []
  steps: 3
  min_run_time: 0
  warmup_steps: 1
  warmup_s: 0
  runs: 3
  budget_s: 0
  model_options:
    fcn: {input_dim: 32, hidden: [16, 16], classes: 4}
contention:
  retries: 0
resources:
  train: {mem_mb: 1000, runtime: 5}
slurm:
  cpus_per_gpu: 1
"""
SLURM_ARGS = (
    "--executor",
    "slurm",
    "--slurm-init-seconds-before-status-checks",
    "3",
    "--configfile",
    "config/tasks.yaml",
)


def job_steps(job_id: str) -> dict[str, tuple[int, str]]:
    """Step name -> (tasks, state) of a job, from Slurm's accounting."""
    done = subprocess.run(
        ["sacct", "-j", job_id, "--noheader", "--parsable2", "--format=JobID,NTasks,State"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    steps = {}
    for line in done.stdout.strip().splitlines():
        step, tasks, state = line.split("|")
        if "." in step:
            steps[step.split(".", 1)[1]] = (int(tasks or 0), state.split()[0])
    return steps


@pytest.mark.slurm
def test_ddp_runs_as_two_srun_tasks_and_matches_the_local_launch(slurm, workflow_dir):
    (workflow_dir / "config" / "tasks.yaml").write_text(CONFIG)
    done = snakemake(workflow_dir, CPU_TARGET, GPU_TARGET, *SLURM_ARGS)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    record = load_record(workflow_dir / CPU_TARGET)
    assert record["status"] == "ok", record["reason"]
    # The folder for failed tasks' notes is removed with the job.
    assert not list((workflow_dir / CPU_TARGET).parent.glob(".*"))
    assert record["params"]["launcher"] == "slurm"
    assert record["metrics"]["processes"]["value"] == 2
    slurm_info = record["provenance"]["slurm"]
    assert (slurm_info["partition"], slurm_info["ntasks"], slurm_info["cpus_per_task"]) == (
        "medium",
        2,
        1,
    )
    allocation = slurm_info["allocation"]
    assert (allocation["cpu"], allocation["mem"], allocation["node"]) == ("2", "1000M", "1")
    # The batch step ran the job's script; srun ran the two tasks as step 0.
    steps = job_steps(slurm_info["job_id"])
    assert steps["batch"] == (1, "COMPLETED")
    assert steps["0"] == (2, "COMPLETED")

    local = measure_training(
        TrainExperiment("fcn", "cpu2", "fp32", "ddp", 8),
        TrainSettings(seed=0, steps=3, warmup_steps=1, model_options=FCN),
    )
    assert local.params["launcher"] == "torchrun"
    assert record["series"]["loss"]["values"] == pytest.approx(local.series["loss"]["values"])

    gpu = load_record(workflow_dir / GPU_TARGET)
    slurm_info = gpu["provenance"]["slurm"]
    assert (slurm_info["partition"], slurm_info["ntasks"]) == ("gpu", 2)
    assert slurm_info["allocation"]["gres/gpu"] == "2"
    # Each task sees its node's two (fake) GPUs and would take its own by local rank.
    assert gpu["provenance"]["cuda_visible_devices"] == "0,1"
    import torch

    if not torch.cuda.is_available():
        assert gpu["status"] == "unavailable"
        assert gpu["reason"] == (
            "no CUDA device available to PyTorch in this task (CUDA_VISIBLE_DEVICES='0,1')"
        )


def test_multi_node_experiment_asks_for_nodes_tasks_and_gpus_per_node(workflow_dir, tmp_path):
    """The real executor plugin builds the sbatch line; a stand-in sbatch records it."""
    (workflow_dir / "config" / "tasks.yaml").write_text(CONFIG)
    calls = tmp_path / "sbatch-calls"
    shim = tmp_path / "bin" / "sbatch"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\necho "$*" >> {calls}\necho "stand-in sbatch" >&2\nexit 1\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env_path = f"{shim.parent}:{os.environ['PATH']}"
    done = snakemake(workflow_dir, MULTI_NODE_TARGET, *SLURM_ARGS, extra_env={"PATH": env_path})
    assert done.returncode != 0
    line = calls.read_text()
    for flag in ("-p gpu", "--nodes=2", "--ntasks-per-node=2", "--cpus-per-task=1"):
        assert flag in line, line
    assert "--gpus-per-node=2" in line, line
    # No whole-job GPU count or tasks-per-GPU: those need not put two GPUs on each node.
    assert "--gpus=" not in line and "--ntasks-per-gpu" not in line, line

"""The workflow through the real Slurm executor plugin against a real local Slurm.

The scheduler is the one tools/slurm-local/start.sh starts (`make test` does it
as root). Without it these tests skip, except in CI (CI=true), where a missing
Slurm is a failure: the integration path must really run there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from conftest import snakemake

pytestmark = pytest.mark.slurm

CPU_TARGET = "results/kernels/matmul/cpu1/numpy/float64/n32.json"
GPU_TARGET = "results/kernels/matmul/cuda1/torch/float64/n32.json"


def slurm_partitions() -> set[str]:
    """Partitions the local Slurm answers with, or an empty set if none answers."""
    if not shutil.which("sinfo"):
        return set()
    try:
        done = subprocess.run(
            ["sinfo", "--noheader", "--format=%R %a"], capture_output=True, text=True, timeout=15
        )
    except subprocess.TimeoutExpired:
        return set()
    if done.returncode != 0:
        return set()
    return {line.split()[0] for line in done.stdout.splitlines() if line.endswith(" up")}


@pytest.fixture(scope="module")
def slurm():
    partitions = slurm_partitions()
    if not {"medium", "gpu"} <= partitions:
        message = (
            "no local Slurm with partitions medium and gpu "
            f"(found {sorted(partitions) or 'none'}); start one with `make slurm-up` (as root)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def sacct_partition_and_state(job_id: str) -> tuple[str, str]:
    done = subprocess.run(
        [
            "sacct",
            "-j",
            job_id,
            "--noheader",
            "--allocations",
            "--parsable2",
            "--format=Partition,State",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    partition, state = done.stdout.strip().splitlines()[0].split("|")
    return partition, state


def test_experiments_land_in_their_partitions(slurm, workflow_dir):
    done = snakemake(
        workflow_dir,
        CPU_TARGET,
        GPU_TARGET,
        "--workflow-profile",
        "profiles/slurm",
        "--slurm-init-seconds-before-status-checks",
        "5",
        "--configfile",
        "config/tiny.yaml",
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    cpu = json.loads((workflow_dir / CPU_TARGET).read_text())
    assert cpu["status"] == "ok"
    assert cpu["provenance"]["slurm"]["partition"] == "medium"
    assert cpu["provenance"]["slurm"]["cpus_per_task"] == 1

    gpu = json.loads((workflow_dir / GPU_TARGET).read_text())
    assert gpu["provenance"]["slurm"]["partition"] == "gpu"
    # The job was given one of the node's (fake) GPUs by Slurm's GRES plugin.
    assert gpu["provenance"]["cuda_visible_devices"] in {"0", "1"}
    import torch

    if not torch.cuda.is_available():
        assert gpu["status"] == "unavailable"
        assert "no CUDA device" in gpu["reason"]

    for record in (cpu, gpu):
        job_id = record["provenance"]["slurm"]["job_id"]
        assert job_id.isdigit()
        partition, state = sacct_partition_and_state(job_id)
        assert partition == record["provenance"]["slurm"]["partition"]
        assert state == "COMPLETED"

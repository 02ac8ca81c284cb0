"""Scheduler resources of an experiment, derived from its device.

`cpuN` goes to the CPU partition with N cores; `cudaK` goes to the GPU
partition with K GPUs. Partition names, account, memory and run time come from
the config, so a site adapts the workflow without touching code.
"""

from __future__ import annotations

import getpass
import subprocess
from typing import Any

from accelbench.devices import Device


def partition(device: Device, config: dict[str, Any]) -> str:
    """The partition of `device`; empty for a GPU on a site without one (check_site refuses)."""
    slurm = config["slurm"]
    return (slurm["gpu_partition"] or "") if device.is_gpu else slurm["cpu_partition"]


def cpus_per_task(device: Device, config: dict[str, Any]) -> int:
    """N cores for cpuN; for cudaK, enough host cores to feed K GPUs."""
    return device.count * config["slurm"]["cpus_per_gpu"] if device.is_gpu else device.count


def gpus(device: Device) -> int:
    return device.count if device.is_gpu else 0


def local_threads(device: Device) -> int:
    """Cores a job occupies when run by the local executor (Snakemake `threads`)."""
    return device.count if not device.is_gpu else 1


def scaled(config: dict[str, Any], family: str, key: str, attempt: int) -> int:
    """mem_mb / runtime for a family, grown with the attempt so a retry gets more."""
    return int(config["resources"][family][key]) * attempt


class SiteError(ValueError):
    """The config names a partition or account the cluster does not have."""


def _query(command: list[str]) -> list[str] | None:
    """Lines a Slurm client prints, or None if the client is absent or fails."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def slurm_partitions() -> list[str] | None:
    lines = _query(["sinfo", "--noheader", "--format=%R"])
    return sorted(set(lines)) if lines is not None else None


def slurm_accounts() -> list[str] | None:
    user = getpass.getuser()
    lines = _query(
        ["sacctmgr", "--noheader", "--parsable2", "show", "assoc", f"user={user}", "format=account"]
    )
    return sorted(set(lines)) if lines is not None else None


def check_site(
    config: dict[str, Any],
    *,
    needs_gpu: bool,
    partitions: list[str] | None,
    accounts: list[str] | None,
) -> None:
    """Refuse, before anything is submitted, a config the cluster cannot serve.

    `partitions` / `accounts` are what the cluster reports (None: could not ask,
    then that check is left to sbatch).
    """
    slurm = config["slurm"]
    wanted = {"slurm.cpu_partition": slurm["cpu_partition"]}
    if needs_gpu:
        if not slurm["gpu_partition"]:
            raise SiteError(
                "the grid has GPU experiments (cudaK devices) but this cluster config has no "
                "GPU partition: set slurm.gpu_partition, or remove the cuda devices"
            )
        wanted["slurm.gpu_partition"] = slurm["gpu_partition"]
    if partitions is not None:
        for key, name in wanted.items():
            if name not in partitions:
                raise SiteError(
                    f"config key {key}: partition {name!r} does not exist on this cluster; "
                    f"partitions: {', '.join(partitions)}"
                )
    account = slurm["account"]
    if account and accounts is not None and account not in accounts:
        raise SiteError(
            f"config key slurm.account: account {account!r} is not one of yours; "
            f"accounts: {', '.join(accounts) or 'none'}"
        )


def check_slurm_site(config: dict[str, Any], *, needs_gpu: bool) -> None:
    """check_site against what sinfo and sacctmgr report."""
    check_site(
        config, needs_gpu=needs_gpu, partitions=slurm_partitions(), accounts=slurm_accounts()
    )

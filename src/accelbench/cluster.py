"""Scheduler resources of an experiment, derived from its device.

`cpuN` goes to the CPU partition with N cores; `cudaK` goes to the GPU
partition with K GPUs. Partition names, account, memory and run time come from
the config, so a site adapts the workflow without touching code.
"""

from __future__ import annotations

from typing import Any

from accelbench.devices import Device


def partition(device: Device, config: dict[str, Any]) -> str:
    slurm = config["slurm"]
    return slurm["gpu_partition"] if device.is_gpu else slurm["cpu_partition"]


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

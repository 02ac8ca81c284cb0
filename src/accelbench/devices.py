"""Device specs and availability probes.

A device string names where an experiment runs and how much of it: `cpuN` is
the host CPU with N threads, `cudaK` is K CUDA GPUs in one job. The same string
decides the Slurm partition and resources, so it is parsed in one place.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

DEVICE_PATTERN = re.compile(r"^(?P<kind>cpu|cuda)(?P<count>[1-9][0-9]*)$")
DEVICE_FORMS = "cpuN (N CPU threads, e.g. cpu4) or cudaK (K GPUs, e.g. cuda1)"


class DeviceError(ValueError):
    """A device string that does not follow the grammar."""


@dataclass(frozen=True)
class Device:
    kind: str  # "cpu" or "cuda"
    count: int  # CPU threads or GPUs

    @property
    def name(self) -> str:
        return f"{self.kind}{self.count}"

    @property
    def is_gpu(self) -> bool:
        return self.kind == "cuda"

    def __str__(self) -> str:
        return self.name


def parse_device(text: str) -> Device:
    """Parse `cpuN` / `cudaK`; the error says what the allowed forms are."""
    match = DEVICE_PATTERN.match(text)
    if not match:
        raise DeviceError(f"device {text!r} is malformed: expected {DEVICE_FORMS}")
    return Device(kind=match["kind"], count=int(match["count"]))


def visible_gpu_count() -> int:
    """GPUs the CUDA runtime can use in this process (0 without a driver or a GPU)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def cuda_unavailable_reason(device: Device) -> str | None:
    """Why `device` cannot run here, or None if it can.

    Asked before any GPU work, so a machine without a GPU (or with too few)
    yields an "unavailable" record that says so instead of crashing.
    """
    if not device.is_gpu:
        return None
    visible = visible_gpu_count()
    if visible == 0:
        slurm_gpus = os.environ.get("CUDA_VISIBLE_DEVICES")
        hint = f" (CUDA_VISIBLE_DEVICES={slurm_gpus!r})" if slurm_gpus is not None else ""
        return f"no CUDA device available to PyTorch on this host{hint}"
    if visible < device.count:
        return f"{device.name} needs {device.count} GPUs but only {visible} are visible"
    return None


def usable_cpus() -> int:
    """CPUs this process may run on (respects Slurm's and taskset's affinity masks)."""
    return len(os.sched_getaffinity(0))


@contextmanager
def cpu_threads(device: Device) -> Iterator[int]:
    """Pin every threaded runtime (BLAS/OpenMP, PyTorch, Numba) to the device's thread count.

    On a GPU device the host side keeps one thread per GPU, enough to feed it.
    """
    import numba
    import torch
    from threadpoolctl import threadpool_limits

    threads = device.count if not device.is_gpu else 1
    previous_torch, previous_numba = torch.get_num_threads(), numba.get_num_threads()
    numba_threads = min(threads, numba.config.NUMBA_NUM_THREADS)
    with threadpool_limits(limits=threads):
        torch.set_num_threads(threads)
        numba.set_num_threads(numba_threads)
        try:
            yield threads
        finally:
            torch.set_num_threads(previous_torch)
            numba.set_num_threads(previous_numba)


def slurm_gpu_shortfall(device: Device) -> str | None:
    """Why the Slurm allocation has fewer GPUs than `device` asks for, or None.

    A job submitted for K GPUs that is started with fewer (a resource mapping
    gone wrong) must fail loudly rather than measure something else.
    """
    if not device.is_gpu or "SLURM_JOB_ID" not in os.environ:
        return None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None  # the site does not bind GPUs through this variable; nothing to compare
    granted = len([index for index in visible.split(",") if index.strip()])
    if granted < device.count:
        return (
            f"Slurm gave this job {granted} GPU(s) (CUDA_VISIBLE_DEVICES={visible!r}) but "
            f"{device.name} needs {device.count}: check the job's gpu/gres resources"
        )
    return None

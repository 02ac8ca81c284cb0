"""Device specs and availability probes.

A device string names where an experiment runs and how much of it: `cpuN` is
the host CPU with N threads, `cudaK` is K CUDA GPUs in one job, `NxKcuda` is N
nodes with K GPUs each (one process per GPU) and `NxKcpu` N nodes with K CPU
processes each, both launched as Slurm tasks. The same string decides the Slurm
partition and resources, so it is parsed in one place.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from accelbench.platform import doctor, host_cpus

DEVICE_PATTERN = re.compile(r"^(?P<kind>cpu|cuda)(?P<count>[1-9][0-9]*)$")
MULTI_NODE_PATTERN = re.compile(r"^(?P<nodes>[0-9]+)x(?P<count>[0-9]+)(?P<kind>[a-z]+)$")
DEVICE_FORMS = (
    "cpuN (N CPU threads, e.g. cpu4), cudaK (K GPUs, e.g. cuda1), "
    "NxKcuda (N >= 2 nodes with K GPUs each, e.g. 2x4cuda) "
    "or NxKcpu (N >= 2 nodes with K CPU processes each, e.g. 2x2cpu)"
)


class DeviceError(ValueError):
    """A device string that does not follow the grammar."""


@dataclass(frozen=True)
class Device:
    kind: str  # "cpu" or "cuda"
    count: int  # CPU threads (CPU processes per node on several nodes), or GPUs per node
    nodes: int = 1

    @property
    def name(self) -> str:
        if self.nodes > 1:
            return f"{self.nodes}x{self.count}{self.kind}"
        return f"{self.kind}{self.count}"

    @property
    def is_gpu(self) -> bool:
        return self.kind == "cuda"

    @property
    def gpus(self) -> int:
        """GPUs over all nodes (0 for a CPU device)."""
        return self.units if self.is_gpu else 0

    @property
    def units(self) -> int:
        """GPUs, or CPU threads on one node and CPU processes on several, over all nodes."""
        return self.count * self.nodes

    def __str__(self) -> str:
        return self.name


def parse_device(text: str) -> Device:
    """Parse `cpuN` / `cudaK` / `NxKcuda` / `NxKcpu`; an error says what is wrong and the forms."""
    match = DEVICE_PATTERN.match(text)
    if match:
        return Device(kind=match["kind"], count=int(match["count"]))
    multi = MULTI_NODE_PATTERN.match(text)
    if not multi:
        raise DeviceError(f"device {text!r} is malformed: expected {DEVICE_FORMS}")
    nodes, count, kind = int(multi["nodes"]), int(multi["count"]), multi["kind"]
    if kind not in ("cpu", "cuda"):
        raise DeviceError(f"device {text!r}: the kind is cpu or cuda, not {kind!r}; {DEVICE_FORMS}")
    what = "GPUs" if kind == "cuda" else "CPU processes"
    if count < 1 or str(count) != multi["count"]:
        raise DeviceError(f"device {text!r}: {what} per node must be a positive integer")
    if nodes < 2 or str(nodes) != multi["nodes"]:
        raise DeviceError(
            f"device {text!r}: the node count must be an integer >= 2; "
            f"one node with {count} {what} is {kind}{count}"
        )
    return Device(kind=kind, count=count, nodes=nodes)


def names_a_gpu(text: str) -> bool:
    """Whether a device name (a table's `device` column) is a GPU; False for any other text."""
    try:
        return parse_device(str(text)).is_gpu
    except DeviceError:
        return False


def visible_gpu_count() -> int:
    """GPUs PyTorch can use in this process (0 without a driver or a GPU).

    Asked in a forked child (doctor.visible_gpus): the process asking may go on
    to fork runs or launch ranks, which could not use CUDA had it asked itself.
    """
    return len(doctor.visible_gpus())


def cuda_unavailable_reason(device: Device) -> str | None:
    """Why `device` cannot run here, or None if it can.

    Asked before any GPU work, so a machine without a GPU (or with too few)
    yields an "unavailable" record that says so instead of crashing.
    """
    if not device.is_gpu:
        return None
    visible = visible_gpu_count()
    needed = device.count  # per node: each node's processes see that node's GPUs
    if visible == 0:
        slurm_gpus = os.environ.get("CUDA_VISIBLE_DEVICES")
        hint = f" (CUDA_VISIBLE_DEVICES={slurm_gpus!r})" if slurm_gpus is not None else ""
        return f"no CUDA device available to PyTorch on this host{hint}"
    if visible < needed:
        per_node = " per node" if device.nodes > 1 else ""
        return f"{device.name} needs {needed} GPUs{per_node} but only {visible} are visible"
    return None


def usable_cpus() -> int:
    """CPUs this process may run on (respects Slurm's and taskset's affinity masks)."""
    return len(os.sched_getaffinity(0))


def pinned_cpus(device: Device) -> list[int] | None:
    """The CPUs a measurement of `device` is pinned to (host_cpus.choose_cpus), or None
    where there is nothing to choose: a GPU's host side keeps every CPU it has, Slurm
    places the tasks of several nodes, and a process with no more CPUs than the device's
    threads runs on all of them (Slurm gave the job exactly its CPUs; a smaller host's
    threads share its CPUs, as they always did)."""
    if device.is_gpu or device.nodes > 1:
        return None
    allowed = os.sched_getaffinity(0)
    if len(allowed) <= device.count:
        return None
    return host_cpus.choose_cpus(device.count, allowed, host_cpus.read_topology())


def cpus_used(device: Device) -> list[int]:
    """The CPUs a measurement of `device` runs on: those it is pinned to, else every CPU
    this process may use."""
    return pinned_cpus(device) or sorted(os.sched_getaffinity(0))


@contextmanager
def cpu_threads(device: Device, threads: int | None = None) -> Iterator[int]:
    """Run on the device's CPUs (pinned_cpus) with every threaded runtime (BLAS/OpenMP,
    PyTorch, Numba) at its thread count.

    The CPUs are set first: a runtime starts its pool at the first call that sets or
    even reads its thread count (numba.get_num_threads starts Numba's), and a thread
    starts on its creator's CPUs. `threads` is one process's share where several share
    the device (a ddp rank on cpuN runs one); on a GPU device the host side keeps one
    thread, enough to feed it.
    """
    import numba
    import torch
    from threadpoolctl import threadpool_limits

    if threads is None:
        threads = device.count if not device.is_gpu else 1
    numba_threads = min(threads, numba.config.NUMBA_NUM_THREADS)
    with host_cpus.pinned(pinned_cpus(device)):
        previous_torch, previous_numba = torch.get_num_threads(), numba.get_num_threads()
        try:
            with threadpool_limits(limits=threads):
                torch.set_num_threads(threads)
                numba.set_num_threads(numba_threads)
                yield threads
        finally:
            # After threadpoolctl has restored the OpenMP runtime torch shares: its restore
            # would otherwise set torch's count to whatever OpenMP had before.
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

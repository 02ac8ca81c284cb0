"""A stand-in for torch's CUDA side, for machines without a GPU.

GPUs of given names and compute capabilities, a build carrying given
architectures, and a kernel launch that behaves as CUDA's does: on a GPU the
build has no code for it raises "no kernel image is available", as torch 2.14's
CUDA 13 build does on a V100 that torch.cuda.is_available() still reports.
Every launch is noted (process, device) in a file, so a test sees where a
check ran, whichever process that was.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import torch

CUDA13_ARCHS = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
V100 = ("Tesla V100-SXM2-32GB", (7, 0))
T4 = ("Tesla T4", (7, 5))
A100 = ("NVIDIA A100-SXM4-80GB", (8, 0))
H100 = ("NVIDIA H100 80GB HBM3", (9, 0))


def _has_code(archs, capability) -> bool:
    """A cubin for sm_XY runs on GPUs of major X from minor Y on (these builds carry no PTX)."""
    major, minor = capability
    return any(f"sm_{major}{lower}" in archs for lower in range(minor + 1))


class FakeCuda:
    def __init__(self, gpus, archs):
        self.gpus, self.archs = list(gpus), tuple(archs)

    def get_arch_list(self):
        return list(self.archs)

    def is_available(self):
        return bool(self.gpus)

    def device_count(self):
        return len(self.gpus)

    def get_device_name(self, index):
        return self.gpus[index][0]

    def get_device_capability(self, index):
        return self.gpus[index][1]

    def get_device_properties(self, index):
        return SimpleNamespace(uuid=f"00000000-0000-0000-0000-{index:012d}")


class FakeTorch:
    """torch with `gpus` [(name, capability)] of a build carrying `archs`."""

    float64 = torch.float64

    def __init__(self, gpus, launches: Path, archs=CUDA13_ARCHS, version="2.14.1+cu130"):
        self.__version__ = version
        self.version = SimpleNamespace(cuda="13.0")
        self.cuda = FakeCuda(gpus, archs)
        self.launches = launches

    def launched(self) -> list[tuple[int, str]]:
        """(process id, device) of every kernel launched so far."""
        if not self.launches.exists():
            return []
        lines = self.launches.read_text().splitlines()
        return [(int(pid), device) for pid, device in (line.split() for line in lines)]

    def arange(self, count, dtype, device):
        index = int(device.split(":")[1])
        with self.launches.open("a") as log:
            log.write(f"{os.getpid()} {device}\n")
        if not _has_code(self.cuda.archs, self.cuda.gpus[index][1]):
            raise RuntimeError(
                "CUDA error: no kernel image is available for execution on the device"
            )
        return torch.arange(count, dtype=dtype)

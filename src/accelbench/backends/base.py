"""What a backend is: the library a kernel is written in, and everything that depends on it.

A Backend owns what the rest of the code would otherwise switch on its name: the device
kinds it runs on and why it cannot run here (an "unavailable" record, never a crash), the
imports a job makes before its runs fork, its timer and what waits for its device, its
array adapter, the 16-bit types it computes in, what frees its library's device cache, how
`accelbench check` runs its code on a machine without its device, the distributions a
record names as its version and how `accelbench doctor` inspects its GPU stack.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelbench import dtypes
from accelbench.measuring.timers import Timer
from accelbench.platform.devices import Device

if TYPE_CHECKING:  # NumPy is imported where arrays are made, not where a grid is planned
    from accelbench.backends.arrays import ArrayModule
    from accelbench.platform.doctor import Probe

# Every backend computes in these; 16-bit types only where its library does (half_dtypes).
BASE_DTYPES = dtypes.BASE_DTYPES


class BackendError(ValueError):
    """A backend that is not known, or that lacks what a measurement asks of it."""


@dataclass(frozen=True)
class CheckRun:
    """One verified run `accelbench check` makes of a backend's code on this machine: the
    device it runs on, the stand-in it runs under (NumPy for CuPy), whether it runs in a
    process of its own under the CUDA simulator, what the report says ran, and, where
    it cannot run here, what the report says instead (`missing()`)."""

    label: str
    device: str = "cpu1"
    stand_in: Callable[[], AbstractContextManager] = contextlib.nullcontext
    simulated: bool = False
    missing: Callable[[], str | None] = lambda: None


def _nothing_to_wait_for() -> None:
    """On the CPU every call returns when it is done."""


@dataclass(frozen=True)
class Backend:
    """One backend; `unavailable(device, dtype)` says why it cannot run on `device` (in
    `dtype`, where one is named) here, or None."""

    name: str
    device_kinds: tuple[str, ...]
    timer: Timer
    unavailable: Callable[[Device, str | None], str | None]
    naive: bool = False  # plain interpreted loops: only run up to a configured size
    compiles: bool = False  # its first call compiles (JIT), so it tells nothing of the next
    # The 16-bit types its library computes elementwise kernels in.
    half_dtypes: tuple[str, ...] = ()
    # Returns what waits for the work its calls queued on a GPU (imports its library).
    device_synchronizer: Callable[[], Callable[[], None]] | None = None
    # Returns how array code reaches its device (host to device and back).
    array_module: Callable[[], ArrayModule] | None = None
    # Imports its runs need, made in the job before its runs fork.
    preload: Callable[[], None] | None = None
    # Gives back to the GPU what its library's allocator caches after a freed buffer.
    release_cached_memory: Callable[[], None] | None = None
    check_runs: tuple[CheckRun, ...] = ()
    # The pip distributions whose versions are its version, named in every record's
    # provenance (those not installed as null).
    distributions: tuple[str, ...] = ()
    # How `accelbench doctor` inspects its GPU stack: what it loads, the GPUs it sees, its
    # test kernel (accelbench.platform.doctor); None where it has no GPU stack to inspect.
    probe: Probe | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.timer, Timer):
            raise BackendError(
                f"backend {self.name!r}: its timer is a {type(self.timer).__name__}, not an "
                "accelbench.measuring.timers.Timer (TORCH, CUPY, CUDA_EVENTS or its own)"
            )

    def unavailable_reason(self, device: Device, dtype: str | None = None) -> str | None:
        """Why this backend cannot run on `device` (in `dtype`, where one is named) here,
        or None if it can."""
        return self.unavailable(device, dtype)

    def synchronizer(self, on_gpu: bool) -> Callable[[], None]:
        """What waits for the GPU work this backend's calls queued; BackendError where a
        backend on a GPU names nothing: another library's wait would not wait for it."""
        if not on_gpu:
            return _nothing_to_wait_for
        if self.device_synchronizer is None:
            raise BackendError(f"backend {self.name!r} names nothing that waits for its GPU")
        return self.device_synchronizer()

    def arrays(self) -> ArrayModule:
        """Its array adapter; BackendError for a backend array code cannot run on."""
        if self.array_module is None:
            raise BackendError(f"backend {self.name!r} has no array module")
        return self.array_module()

    def verified_runs(self) -> tuple[CheckRun, ...]:
        """How `accelbench check` runs its code here: its own runs, else one on its first
        device kind."""
        return self.check_runs or (CheckRun(self.name, f"{self.device_kinds[0]}1"),)

    def free_cached_memory(self, device: Device) -> None:
        """Give back to the GPU what a freed buffer left in this library's cache."""
        if device.is_gpu and self.release_cached_memory is not None:
            self.release_cached_memory()

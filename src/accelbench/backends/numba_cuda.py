"""Numba's CUDA target: kernels written as CUDA threads, timed by CUDA events.

Without a GPU its code runs under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1), which
is read at import, so `accelbench check` runs it in a process of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from accelbench.backends.base import Backend, CheckRun
from accelbench.measuring import timers
from accelbench.platform import doctor
from accelbench.platform.devices import Device


def _numba_cuda_reason(device: Device, dtype: str | None) -> str | None:
    try:
        from numba import config, cuda  # noqa: F401
    except ImportError as err:
        return f"Numba's CUDA target is not installed ({err})"
    if refusal := doctor.cuda_simulator_refusal():
        return refusal
    if config.ENABLE_CUDASIM:
        return None  # the test suite's simulator runs no CUDA library: nothing to check
    return doctor.backend_problem("numba-cuda", range(device.count), dtype)


def _synchronizer() -> Callable[[], None]:
    from numba import cuda

    return cuda.synchronize


def _clear_deferred_frees() -> None:
    from numba import cuda

    cuda.current_context().memory_manager.deallocations.clear()


SPEC = Backend(
    "numba-cuda",
    ("cuda",),
    timers.CUDA_EVENTS,
    _numba_cuda_reason,
    compiles=True,
    device_synchronizer=_synchronizer,
    release_cached_memory=_clear_deferred_frees,
    check_runs=(CheckRun("numba-cuda (CUDA simulator)", "cuda1", simulated=True),),
)

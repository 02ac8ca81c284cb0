"""Numba's CUDA target: kernels written as CUDA threads, timed by CUDA events.

Without a GPU its code runs under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1), which
is read at import, so `accelbench check` runs it in a process of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from accelbench.backends.base import Backend, CheckRun
from accelbench.backends.prepared import Prepared
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


def numba_cuda_prepared(host_inputs, launch, out_shape, out_dtype) -> Prepared:
    """Prepared for Numba CUDA kernels: `launch(*device_inputs, out)` starts the kernel(s)."""
    import numpy as np
    from numba import cuda

    host = tuple(np.ascontiguousarray(x) for x in host_inputs)
    inputs = tuple(cuda.to_device(x) for x in host)
    out = cuda.device_array(out_shape, dtype=out_dtype)
    nan_block = np.full(out_shape, np.nan, dtype=out_dtype)
    host_out = np.empty(out_shape, dtype=out_dtype)

    def upload():
        for resident, source in zip(inputs, host, strict=True):
            resident.copy_to_device(source)

    return Prepared(
        run=lambda: launch(*inputs, out),
        fetch=lambda: out.copy_to_host(),
        poison=lambda: out.copy_to_device(nan_block),
        upload=upload,
        download=lambda: out.copy_to_host(host_out),
    )


SPEC = Backend(
    "numba-cuda",
    ("cuda",),
    timers.CUDA_EVENTS,
    _numba_cuda_reason,
    compiles=True,
    device_synchronizer=_synchronizer,
    release_cached_memory=_clear_deferred_frees,
    distributions=("numba-cuda",),
    probe=doctor.probe_numba_cuda,
    check_runs=(CheckRun("numba-cuda (CUDA simulator)", "cuda1", simulated=True),),
)

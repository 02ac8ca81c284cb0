"""Backends: the implementation families a kernel can be written in.

A backend knows which device kinds it runs on and whether it can run here. A
backend that is not present yields a clear reason, which becomes an
"unavailable" record rather than a crash or a missing cell. On a GPU the reason
also covers the installed stack (doctor.backend_problem): a GPU it has no code
for, a precision the GPU only emulates, a test kernel that fails.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from accelbench.platform import doctor
from accelbench.platform.devices import Device, cuda_unavailable_reason


def _numba_reason(device: Device, dtype: str | None) -> str | None:
    try:
        import numba  # noqa: F401
    except ImportError as err:
        return f"Numba is not installed ({err})"
    return None


def _cupy_reason(device: Device, dtype: str | None) -> str | None:
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed (No module named 'cupy')"
    return doctor.backend_problem("cupy", range(device.count), dtype)


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


def _torch_reason(device: Device, dtype: str | None) -> str | None:
    if not device.is_gpu:
        return None
    return cuda_unavailable_reason(device) or doctor.backend_problem(
        "torch", range(device.count), dtype
    )


def _any(device: Device, dtype: str | None) -> None:
    return None


@dataclass(frozen=True)
class Backend:
    name: str
    device_kinds: tuple[str, ...]
    timer: str  # "torch" (torch.utils.benchmark), "cupy" (cupyx.profiler), "cuda-events"
    _reason: Callable[[Device, str | None], str | None]
    naive: bool = False  # plain interpreted loops: only run up to a configured size
    compiles: bool = False  # its first call compiles (JIT), so it tells nothing of the next

    def unavailable_reason(self, device: Device, dtype: str | None = None) -> str | None:
        """Why this backend cannot run on `device` (in `dtype`, where one is named) here,
        or None if it can."""
        return self._reason(device, dtype)


BACKENDS: dict[str, Backend] = {
    backend.name: backend
    for backend in (
        Backend("numpy", ("cpu",), "torch", _any),
        Backend("numba", ("cpu",), "torch", _numba_reason, compiles=True),
        Backend("numba-parallel", ("cpu",), "torch", _numba_reason, compiles=True),
        Backend("torch", ("cpu", "cuda"), "torch", _torch_reason),
        Backend("cupy", ("cuda",), "cupy", _cupy_reason),
        Backend("numba-cuda", ("cuda",), "cuda-events", _numba_cuda_reason, compiles=True),
        Backend("python", ("cpu",), "torch", _any, naive=True),
    )
}


def _library_reason(module: str, label: str, extra: str | None = None) -> Callable:
    """Why a data science library cannot run on a device: not installed (with the extra that
    installs it), or, for a GPU library, no usable CUDA device.

    A RAPIDS library initialises CUDA when imported (it checks the driver and the
    GPUs), so it is imported only after the GPU check, which a child forked from
    a process that has initialised CUDA could not make.
    """
    install = f" (optional extra {extra}; see docs/workloads.md, RAPIDS)" if extra else ""

    def reason(device: Device, dtype: str | None) -> str | None:
        if importlib.util.find_spec(module) is None:
            return f"{label} is not installed{install}: No module named {module!r}"
        if device.is_gpu and (missing := cuda_unavailable_reason(device)):
            return missing
        try:
            importlib.import_module(module)
        except Exception as err:  # a RAPIDS library that finds no CUDA driver fails to import
            return f"{label} cannot load here: {type(err).__name__}: {err}"
        return None

    return reason


def _polars_reason(device: Device, dtype: str | None) -> str | None:
    """polars sizes its thread pool once, from POLARS_MAX_THREADS when it is first imported:
    set here for the device, and checked, since a pool of another size cannot be resized."""
    if "polars" not in sys.modules:
        os.environ["POLARS_MAX_THREADS"] = str(device.count)
    try:
        import polars
    except ModuleNotFoundError as err:
        return f"polars is not installed: {err}"
    if polars.thread_pool_size() != device.count:
        return (
            f"polars' thread pool has {polars.thread_pool_size()} threads, {device.name} needs "
            f"{device.count}: polars was imported before the measurement chose its threads"
        )
    return None


RAPIDS_EXTRA = "rapids-cuda13 or rapids-cuda12, as the CUDA stack"
# The libraries of the data science workloads (accelbench.datasci): CPU ones in the
# default requirements, the RAPIDS ones an optional extra matched to the CUDA stack.
DATASCI_BACKENDS: dict[str, Backend] = {
    backend.name: backend
    for backend in (
        Backend("pandas", ("cpu",), "torch", _library_reason("pandas", "pandas")),
        Backend("polars", ("cpu",), "torch", _polars_reason),
        Backend("sklearn", ("cpu",), "torch", _library_reason("sklearn", "scikit-learn")),
        Backend("networkx", ("cpu",), "torch", _library_reason("networkx", "networkx")),
        Backend("cudf", ("cuda",), "cupy", _library_reason("cudf", "cuDF", RAPIDS_EXTRA)),
        Backend("cuml", ("cuda",), "cupy", _library_reason("cuml", "cuML", RAPIDS_EXTRA)),
        Backend("cugraph", ("cuda",), "cupy", _library_reason("cugraph", "cuGraph", RAPIDS_EXTRA)),
    )
}

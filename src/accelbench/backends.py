"""Backends: the implementation families a kernel can be written in.

A backend knows which device kinds it runs on and whether it can run here. A
backend that is not present yields a clear reason, which becomes an
"unavailable" record rather than a crash or a missing cell.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from accelbench import doctor
from accelbench.devices import Device, cuda_unavailable_reason


def _numba_reason(device: Device) -> str | None:
    try:
        import numba  # noqa: F401
    except ImportError as err:
        return f"Numba is not installed ({err})"
    return None


def _cupy_reason(device: Device) -> str | None:
    try:
        import cupy
    except ImportError as err:
        return f"CuPy is not installed ({err})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # CUDARuntimeError or a missing driver library
        return f"CuPy finds no usable CUDA device ({type(err).__name__}: {err})"
    if count < device.count:
        return f"CuPy sees {count} GPUs, {device.name} needs {device.count}"
    return doctor.backend_problem("cupy")


def _numba_cuda_reason(device: Device) -> str | None:
    try:
        from numba import config, cuda
    except ImportError as err:
        return f"Numba's CUDA target is not installed ({err})"
    if not cuda.is_available():
        return "Numba CUDA finds no CUDA driver or device on this host"
    if len(cuda.gpus) < device.count:
        return f"Numba CUDA sees {len(cuda.gpus)} GPUs, {device.name} needs {device.count}"
    if config.ENABLE_CUDASIM:
        return None  # the simulator runs no CUDA library: nothing for the doctor to check
    return doctor.backend_problem("numba-cuda")


def _torch_reason(device: Device) -> str | None:
    if not device.is_gpu:
        return None
    return cuda_unavailable_reason(device) or doctor.backend_problem("torch")


@dataclass(frozen=True)
class Backend:
    name: str
    device_kinds: tuple[str, ...]
    timer: str  # "torch" (torch.utils.benchmark), "cupy" (cupyx.profiler), "cuda-events"
    _reason: Callable[[Device], str | None]
    naive: bool = False  # plain interpreted loops: only run up to a configured size

    def unavailable_reason(self, device: Device) -> str | None:
        """Why this backend cannot run on `device` here, or None if it can."""
        return self._reason(device)


BACKENDS: dict[str, Backend] = {
    backend.name: backend
    for backend in (
        Backend("numpy", ("cpu",), "torch", lambda device: None),
        Backend("numba", ("cpu",), "torch", _numba_reason),
        Backend("numba-parallel", ("cpu",), "torch", _numba_reason),
        Backend("torch", ("cpu", "cuda"), "torch", _torch_reason),
        Backend("cupy", ("cuda",), "cupy", _cupy_reason),
        Backend("numba-cuda", ("cuda",), "cuda-events", _numba_cuda_reason),
        Backend("python", ("cpu",), "torch", lambda device: None, naive=True),
    )
}


def _library_reason(module: str, label: str, extra: str | None = None) -> Callable:
    """Why a data science library cannot run on a device: not installed (with the extra that
    installs it), or, for a GPU library, no usable CUDA device."""
    install = f" (optional extra {extra}; see README, RAPIDS)" if extra else ""

    def reason(device: Device) -> str | None:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as err:
            return f"{label} is not installed{install}: {err}"
        except Exception as err:  # a RAPIDS library that finds no CUDA driver fails to import
            return f"{label} cannot load here: {type(err).__name__}: {err}"
        return cuda_unavailable_reason(device) if device.is_gpu else None

    return reason


def _polars_reason(device: Device) -> str | None:
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

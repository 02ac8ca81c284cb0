"""The libraries of the data science workloads (accelbench.datasci): CPU ones in the default
requirements, the RAPIDS ones an optional extra matched to the CUDA stack. Each is a
Backend like a kernel's; the RAPIDS ones wait for their GPU as CuPy does."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable

from accelbench.backends import cupy
from accelbench.backends.base import Backend
from accelbench.measuring import timers
from accelbench.platform.devices import Device, cuda_unavailable_reason


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


def _cpu_library(name: str, reason: Callable, distribution: str) -> Backend:
    return Backend(name, ("cpu",), timers.TORCH, reason, distributions=(distribution,))


def _rapids_library(name: str, label: str) -> Backend:
    """A RAPIDS library on CUDA GPUs: a distribution per CUDA stack (cudf-cu12, cudf-cu13)."""
    return Backend(
        name,
        ("cuda",),
        timers.CUPY,
        _library_reason(name, label, RAPIDS_EXTRA),
        device_synchronizer=cupy.synchronizer,
        distributions=(f"{name}-cu12", f"{name}-cu13"),
    )


RAPIDS_EXTRA = "rapids-cuda13 or rapids-cuda12, as the CUDA stack"
DATASCI_BACKENDS: dict[str, Backend] = {
    backend.name: backend
    for backend in (
        _cpu_library("pandas", _library_reason("pandas", "pandas"), "pandas"),
        _cpu_library("polars", _polars_reason, "polars"),
        _cpu_library("sklearn", _library_reason("sklearn", "scikit-learn"), "scikit-learn"),
        _cpu_library("networkx", _library_reason("networkx", "networkx"), "networkx"),
        _rapids_library("cudf", "cuDF"),
        _rapids_library("cuml", "cuML"),
        _rapids_library("cugraph", "cuGraph"),
    )
}

"""Copies: host->device and device->host (pageable and pinned host memory), device->device.

The size n counts elements. A copy does no arithmetic, so these kernels
report bandwidth only: n items for a copy that crosses the host<->device
link once, 2 n items (read and write) for a copy within one memory, the way
STREAM counts its copy. On a CPU device "device" memory is host memory, so
`transfer-d2d` is a host memcpy and the host<->device kernels do not apply.
The result must equal the input exactly.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from accelbench import backends
from accelbench.kernels import (
    HALF_DTYPES,
    ArrayModule,
    KernelSpec,
    Prepared,
    array_implementations,
    array_prepared,
    bind_numba,
    bind_numba_cuda,
    grid_1d,
    host_prepared,
    jit_loop,
    numba_cuda_prepared,
    numba_implementations,
    python_prepared,
    torch_dtype,
    torch_from_host,
    torch_prepared,
    torch_to_host,
)
from accelbench.platform.devices import Device

if TYPE_CHECKING:  # bound on the first compile: kernels.bind_numba
    import numba
    from numba import cuda

HOST_LINK_REASON = (
    "a host<->device copy needs a GPU; on a CPU the copy is transfer-d2d (a host memcpy)"
)


def make_inputs(rng: np.random.Generator, n: int, dtype: np.dtype) -> tuple[np.ndarray, ...]:
    return (rng.standard_normal(n).astype(dtype),)


def reference(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64)


def exact(n: int, dtype: np.dtype) -> float:
    return 0.0


def _without_transfers(prepared: Prepared) -> Prepared:
    """The copy is the measurement: no separate transfer timing around it."""
    return dataclasses.replace(prepared, upload=None, download=None)


# --- device -> device (on a CPU: host memcpy) ---------------------------------------------------


def prepare_d2d_array_module(am: ArrayModule, inputs) -> Prepared:
    xp = am.xp
    prepared = array_prepared(
        am, inputs, lambda x, out: xp.copyto(out, x), inputs[0].shape, inputs[0].dtype
    )
    return _without_transfers(prepared)


def prepare_d2d_torch(inputs, device: Device) -> Prepared:
    prepared = torch_prepared(
        inputs, device, lambda x, out: out.copy_(x), inputs[0].shape, inputs[0].dtype
    )
    return _without_transfers(prepared)


def copy_python(x: list) -> list:
    out = [0.0] * len(x)
    for i in range(len(x)):
        out[i] = x[i]
    return out


def prepare_d2d_python(inputs, device: Device) -> Prepared:
    return python_prepared(inputs, copy_python, inputs[0].shape, inputs[0].dtype)


@cache
def _numba_loop(parallel: bool):
    bind_numba(globals())

    @jit_loop(parallel)
    def copy_loop(x, out):
        for i in numba.prange(x.size):
            out[i] = x[i]

    return copy_loop


def prepare_d2d_numba(inputs, parallel: bool) -> Prepared:
    return host_prepared(inputs, _numba_loop(parallel), inputs[0].shape, inputs[0].dtype)


@cache
def cuda_copy_kernel():
    bind_numba_cuda(globals())

    @cuda.jit(cache=True)
    def copy(x, out):
        for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
            out[i] = x[i]

    return copy


def prepare_d2d_numba_cuda(inputs, device: Device) -> Prepared:
    (x,) = inputs
    kernel = cuda_copy_kernel()
    blocks, threads = grid_1d(x.size)
    prepared = numba_cuda_prepared(
        inputs, lambda x, out: kernel[blocks, threads](x, out), x.shape, x.dtype
    )
    return _without_transfers(prepared)


# --- host <-> device ----------------------------------------------------------------------------


def _host_buffer(am: ArrayModule, x: np.ndarray, pinned: bool) -> np.ndarray:
    host = am.pinned_empty(x.shape, x.dtype) if pinned else np.empty(x.shape, x.dtype)
    host[...] = x
    return host


def prepare_h2d_array_module(am: ArrayModule, inputs, pinned: bool) -> Prepared:
    (x,) = inputs
    host = _host_buffer(am, x, pinned)
    resident = am.xp.empty(x.shape, dtype=x.dtype)
    return Prepared(
        run=lambda: am.upload(resident, host),
        fetch=lambda: am.to_host(resident),
        poison=lambda: resident.fill(am.xp.nan),
    )


def prepare_d2h_array_module(am: ArrayModule, inputs, pinned: bool) -> Prepared:
    (x,) = inputs
    resident = am.to_device(x)
    host = _host_buffer(am, x, pinned)
    return Prepared(
        run=lambda: am.download(host, resident),
        fetch=lambda: host.copy(),
        poison=lambda: host.fill(np.nan),
    )


def _torch_host(x: np.ndarray, pinned: bool):
    import torch

    host = torch.empty(x.shape, dtype=torch_dtype(x.dtype), pin_memory=pinned)
    host.copy_(torch_from_host(x))
    return host


def prepare_h2d_torch(inputs, pinned: bool) -> Prepared:
    import torch

    (x,) = inputs
    host = _torch_host(x, pinned)
    resident = torch.empty(x.shape, dtype=host.dtype, device="cuda:0")
    return Prepared(
        run=lambda: resident.copy_(host),
        fetch=lambda: torch_to_host(resident),
        poison=lambda: resident.fill_(float("nan")),
    )


def prepare_d2h_torch(inputs, pinned: bool) -> Prepared:
    (x,) = inputs
    host = _torch_host(x, pinned)
    resident = host.to("cuda:0", copy=True)
    return Prepared(
        run=lambda: host.copy_(resident),
        fetch=lambda: torch_to_host(host),
        poison=lambda: host.fill_(float("nan")),
    )


def _numba_host(x: np.ndarray, pinned: bool) -> np.ndarray:
    host = cuda.pinned_array(x.shape, dtype=x.dtype) if pinned else np.empty_like(x)
    host[...] = x
    return host


def prepare_h2d_numba_cuda(inputs, pinned: bool) -> Prepared:
    bind_numba_cuda(globals())
    (x,) = inputs
    host = _numba_host(x, pinned)
    resident = cuda.device_array(x.shape, dtype=x.dtype)
    nan_block = np.full(x.shape, np.nan, dtype=x.dtype)
    return Prepared(
        run=lambda: resident.copy_to_device(host),
        fetch=lambda: resident.copy_to_host(),
        poison=lambda: resident.copy_to_device(nan_block),
    )


def prepare_d2h_numba_cuda(inputs, pinned: bool) -> Prepared:
    bind_numba_cuda(globals())
    (x,) = inputs
    resident = cuda.to_device(x)
    host = _numba_host(x, pinned)
    return Prepared(
        run=lambda: resident.copy_to_host(host),
        fetch=lambda: host.copy(),
        poison=lambda: host.fill(np.nan),
    )


def _link_implementations(direction: str, pinned: bool) -> dict:
    array_module = prepare_h2d_array_module if direction == "h2d" else prepare_d2h_array_module
    torch_prepare = prepare_h2d_torch if direction == "h2d" else prepare_d2h_torch
    numba_prepare = prepare_h2d_numba_cuda if direction == "h2d" else prepare_d2h_numba_cuda
    cupy = backends.named("cupy")
    return {
        "torch": lambda inputs, device: torch_prepare(inputs, pinned),
        "cupy": lambda inputs, device: array_module(cupy.arrays(), inputs, pinned),
        "numba-cuda": lambda inputs, device: numba_prepare(inputs, pinned),
    }


def _spec(
    name: str, description: str, crossings: int, implementations: dict, half_dtypes: dict, **extra
):
    return KernelSpec(
        name=name,
        description=description,
        flops=lambda n: 0.0,
        bytes_moved=lambda n, itemsize: float(crossings * n * itemsize),
        make_inputs=make_inputs,
        reference=reference,
        tolerance=exact,
        implementations=implementations,
        error_measure="normwise relative error (an exact copy is 0)",
        half_dtypes=half_dtypes,
        **extra,
    )


def _link_spec(direction: str, pinned: bool) -> KernelSpec:
    source, target = ("host", "device") if direction == "h2d" else ("device", "host")
    memory = "pinned" if pinned else "pageable"
    return _spec(
        f"transfer-{direction}{'-pinned' if pinned else ''}",
        f"copy n elements from {source} to {target}, {memory} host memory",
        1,
        _link_implementations(direction, pinned),
        {"torch": HALF_DTYPES, "cupy": ("float16",)},
        device_kinds=("cuda",),
        device_kinds_reason=HOST_LINK_REASON,
    )


SPECS = (
    _spec(
        "transfer-d2d",
        "copy n elements within device memory (a host memcpy on a CPU)",
        2,
        {
            "python": prepare_d2d_python,
            **array_implementations(prepare_d2d_array_module),
            **numba_implementations(prepare_d2d_numba),
            "torch": prepare_d2d_torch,
            "numba-cuda": prepare_d2d_numba_cuda,
        },
        {"numpy": HALF_DTYPES, "torch": HALF_DTYPES, "cupy": ("float16",)},
        naive_size_limit=1 << 20,
    ),
    *(_link_spec(direction, pinned) for direction in ("h2d", "d2h") for pinned in (False, True)),
)

"""Elementwise a*x + y (saxpy) into a separate output vector of length n.

2 n flops; x and y are read and the output written once, 3 n items. The
inputs are positive, so no cancellation can occur and every implementation,
whatever order it rounds in (one fused pass or NumPy's two passes), stays
within a few units of roundoff of the float64 result, element by element.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from accelbench.kernels import (
    ELEMENTWISE_HALF_DTYPES,
    ArrayModule,
    KernelSpec,
    Prepared,
    array_implementations,
    array_prepared,
    bind_numba,
    bind_numba_cuda,
    grid_1d,
    host_prepared,
    jax_prepared,
    jit_loop,
    numba_cuda_prepared,
    numba_implementations,
    python_prepared,
    torch_prepared,
    unit_roundoff,
)
from accelbench.platform.devices import Device

if TYPE_CHECKING:  # bound on the first compile: kernels.bind_numba
    import numba
    from numba import cuda


def make_inputs(rng: np.random.Generator, n: int, dtype: np.dtype) -> tuple[np.ndarray, ...]:
    a = np.asarray(rng.uniform(0.5, 2.0)).astype(dtype)
    x, y = (rng.uniform(0.5, 1.5, n).astype(dtype) for _ in range(2))
    return a, x, y


def reference(a: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) * x.astype(np.float64) + y.astype(np.float64)


def tolerance(n: int, dtype: np.dtype) -> float:
    return 4.0 * unit_roundoff(dtype)


def prepare_array_module(am: ArrayModule, inputs) -> Prepared:
    """NumPy/CuPy: one multiply into the output, then an in-place add (two passes)."""
    xp = am.xp

    def saxpy(a, x, y, out):
        xp.multiply(x, a, out=out)
        xp.add(out, y, out=out)

    return array_prepared(am, inputs, saxpy, inputs[1].shape, inputs[1].dtype)


def prepare_torch(inputs, device: Device) -> Prepared:
    """One fused pass: torch.add(y, x, alpha=a)."""
    import torch

    alpha = float(inputs[0])
    return torch_prepared(
        inputs,
        device,
        lambda a, x, y, out: torch.add(y, x, alpha=alpha, out=out),
        inputs[1].shape,
        inputs[1].dtype,
    )


def saxpy_jax(a, x, y):
    return a * x + y


def prepare_jax(inputs, device: Device) -> Prepared:
    """One pass, fused by XLA."""
    return jax_prepared(inputs, device, saxpy_jax)


def saxpy_python(a: float, x: list, y: list) -> list:
    out = [0.0] * len(x)
    for i in range(len(x)):
        out[i] = a * x[i] + y[i]
    return out


def prepare_python(inputs, device: Device) -> Prepared:
    return python_prepared(inputs, saxpy_python, inputs[1].shape, inputs[1].dtype)


@cache
def _numba_loop(parallel: bool):
    bind_numba(globals())

    @jit_loop(parallel)
    def saxpy_loop(a, x, y, out):
        alpha = a[0]
        for i in numba.prange(x.size):
            out[i] = alpha * x[i] + y[i]

    return saxpy_loop


def prepare_numba(inputs, parallel: bool) -> Prepared:
    a, x, y = inputs
    return host_prepared((a.reshape(1), x, y), _numba_loop(parallel), x.shape, x.dtype)


@cache
def cuda_kernel():
    """One thread per element, grid-stride so any n fits any grid."""
    bind_numba_cuda(globals())

    @cuda.jit(cache=True)
    def saxpy(a, x, y, out):
        alpha = a[0]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, x.size, stride):
            out[i] = alpha * x[i] + y[i]

    return saxpy


def prepare_numba_cuda(inputs, device: Device) -> Prepared:
    a, x, y = inputs
    kernel = cuda_kernel()
    blocks, threads = grid_1d(x.size)
    return numba_cuda_prepared(
        (a.reshape(1), x, y),
        lambda a, x, y, out: kernel[blocks, threads](a, x, y, out),
        x.shape,
        x.dtype,
    )


SPEC = KernelSpec(
    name="saxpy",
    description="elementwise out = a * x + y, vectors of length n",
    flops=lambda n: 2.0 * n,
    bytes_moved=lambda n, itemsize: 3.0 * n * itemsize,
    make_inputs=make_inputs,
    reference=reference,
    tolerance=tolerance,
    implementations={
        "python": prepare_python,
        **array_implementations(prepare_array_module),
        **numba_implementations(prepare_numba),
        "torch": prepare_torch,
        "jax": prepare_jax,
        "numba-cuda": prepare_numba_cuda,
    },
    half_dtypes=ELEMENTWISE_HALF_DTYPES,
    naive_size_limit=1 << 20,
)

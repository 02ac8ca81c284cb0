"""axpby: out = a * x + b * y over vectors of length n, on five backends.

The kernel `accelbench new kernel` writes has NumPy, CuPy and PyTorch; this one adds
Numba on the CPU (serial and parallel, one loop) and Numba-CUDA on a GPU, the way the
package's own kernels do (accelbench/kernels/saxpy.py). Every implementation computes
into an output buffer on its device; accelbench poisons it, runs once, checks it against
the float64 reference within `tolerance`, times `run`, and checks again.
"""

from __future__ import annotations

from functools import cache

import numba
import numpy as np
from numba import cuda

from accelbench.kernels import (
    KernelSpec,
    Prepared,
    array_implementations,
    array_prepared,
    grid_1d,
    host_prepared,
    jit_loop,
    numba_cuda_prepared,
    torch_prepared,
    unit_roundoff,
)


def make_inputs(rng: np.random.Generator, n: int, dtype: np.dtype) -> tuple[np.ndarray, ...]:
    """Two scalars and two vectors, positive (no cancellation), from `rng` alone."""
    a, b = (np.asarray(rng.uniform(0.5, 2.0)).astype(dtype) for _ in range(2))
    x, y = (rng.uniform(0.5, 1.5, n).astype(dtype) for _ in range(2))
    return a, b, x, y


def reference(a, b, x, y) -> np.ndarray:
    wide = [value.astype(np.float64) for value in (a, b, x, y)]
    return wide[0] * wide[2] + wide[1] * wide[3]


def tolerance(n: int, dtype: np.dtype) -> float:
    """Three roundings of positive numbers per element (two products, one sum; a fused
    multiply-add rounds fewer): a few units of roundoff bound it in any order."""
    return 6.0 * unit_roundoff(dtype)


def prepare_array_module(am, inputs) -> Prepared:
    """NumPy on a CPU, CuPy on a GPU: a multiply into the output, then an add."""
    xp = am.xp

    def axpby(a, b, x, y, out):
        xp.multiply(x, a, out=out)
        out += xp.multiply(y, b)

    return array_prepared(am, inputs, axpby, inputs[2].shape, inputs[2].dtype)


def prepare_torch(inputs, device) -> Prepared:
    """PyTorch on the CPU or GPU 0: a multiply into the output, then a fused add."""
    import torch

    def axpby(a, b, x, y, out):
        torch.mul(x, a, out=out)
        out.addcmul_(y, b)

    return torch_prepared(inputs, device, axpby, inputs[2].shape, inputs[2].dtype)


@cache
def numba_loop(parallel: bool):
    """One loop, compiled serial and parallel (jit_loop keeps their caches apart)."""

    @jit_loop(parallel)
    def axpby(a, b, x, y, out):
        for i in numba.prange(x.size):
            out[i] = a[0] * x[i] + b[0] * y[i]

    return axpby


def prepare_numba(inputs, parallel: bool) -> Prepared:
    a, b, x, y = inputs
    scalars = (a.reshape(1), b.reshape(1))
    return host_prepared((*scalars, x, y), numba_loop(parallel), x.shape, x.dtype)


@cache
def cuda_kernel():
    """One thread per element, striding over what the (capped) grid does not cover.
    Compiled on first use: importing this module needs no GPU. (`cuda` is the module's
    global, which the CUDA simulator replaces where it runs the kernel.)"""

    @cuda.jit(cache=True)
    def axpby(a, b, x, y, out):
        for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
            out[i] = a[0] * x[i] + b[0] * y[i]

    return axpby


def prepare_numba_cuda(inputs, device) -> Prepared:
    a, b, x, y = inputs
    kernel, (blocks, threads) = cuda_kernel(), grid_1d(x.size)
    return numba_cuda_prepared(
        (a.reshape(1), b.reshape(1), x, y),
        lambda *arrays: kernel[blocks, threads](*arrays),
        x.shape,
        x.dtype,
    )


def numba_serial(inputs, device) -> Prepared:
    return prepare_numba(inputs, parallel=False)


def numba_parallel(inputs, device) -> Prepared:
    return prepare_numba(inputs, parallel=True)


SPEC = KernelSpec(
    name="axpby",
    description="out = a * x + b * y, vectors of length n",
    # Two multiplies and an add per element.
    flops=lambda n: 3.0 * n,
    # x and y read, out written: the fewest bytes any implementation moves.
    bytes_moved=lambda n, itemsize: 3.0 * n * itemsize,
    make_inputs=make_inputs,
    reference=reference,
    tolerance=tolerance,
    implementations={
        **array_implementations(prepare_array_module),
        "torch": prepare_torch,
        "numba": numba_serial,
        "numba-parallel": numba_parallel,
        "numba-cuda": prepare_numba_cuda,
    },
    half_dtypes={"torch": ("float16", "bfloat16")},
)

"""Sum of n elements (reduction), returned as a one-element vector.

n - 1 flops (counted as n); the input is read once. The summands are
positive, so the sum has no cancellation and any summation order (pairwise,
blocked, tree, per thread) keeps the relative error below (n - 1) u of the
accumulation type (Higham, Accuracy and Stability, ch. 4). bfloat16 is summed
in float32 by PyTorch, so it adds one final rounding.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from accelbench.kernels import (
    ArrayModule,
    KernelSpec,
    Prepared,
    accumulation_roundoff,
    array_implementations,
    array_prepared,
    bind_numba,
    bind_numba_cuda,
    blocks_for,
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

THREADS_PER_BLOCK = 128  # a power of two: the tree in shared memory halves it
MAX_BLOCKS = 1024


def make_inputs(rng: np.random.Generator, n: int, dtype: np.dtype) -> tuple[np.ndarray, ...]:
    return (rng.uniform(0.5, 1.5, n).astype(dtype),)


def reference(x: np.ndarray) -> np.ndarray:
    return np.sum(x.astype(np.float64), keepdims=True)


def tolerance(n: int, dtype: np.dtype) -> float:
    bound = max(n - 1, 1) * accumulation_roundoff(dtype)
    return bound + unit_roundoff(dtype) if dtype.itemsize == 2 else bound


def prepare_array_module(am: ArrayModule, inputs) -> Prepared:
    xp = am.xp
    return array_prepared(
        am, inputs, lambda x, out: xp.sum(x, keepdims=True, out=out), (1,), inputs[0].dtype
    )


def prepare_torch(inputs, device: Device) -> Prepared:
    import torch

    return torch_prepared(
        inputs,
        device,
        lambda x, out: torch.sum(x, dim=0, keepdim=True, out=out),
        (1,),
        inputs[0].dtype,
    )


def sum_jax(x):
    import jax.numpy as jnp

    return jnp.sum(x, keepdims=True)


def prepare_jax(inputs, device: Device) -> Prepared:
    return jax_prepared(inputs, device, sum_jax)


def sum_python(x: list) -> list:
    total = 0.0
    for value in x:
        total += value
    return [total]


def prepare_python(inputs, device: Device) -> Prepared:
    return python_prepared(inputs, sum_python, (1,), inputs[0].dtype)


@cache
def _numba_loop(parallel: bool):
    """Reassociation allowed, so LLVM keeps several partial sums in vector lanes (as BLAS
    and NumPy's pairwise sum do); without it the loop waits on one add at a time."""
    bind_numba(globals())

    @jit_loop(parallel, fastmath={"reassoc", "nsz"})
    def sum_loop(x, out):
        total = x[0] - x[0]  # zero of the input's type: accumulate in that precision
        for i in numba.prange(x.size):
            total += x[i]
        out[0] = total

    return sum_loop


def prepare_numba(inputs, parallel: bool) -> Prepared:
    return host_prepared(inputs, _numba_loop(parallel), (1,), inputs[0].dtype)


@cache
def cuda_partial_sums(dtype_name: str):
    """Each block sums a grid-strided share of x into one partial, by a tree in shared memory."""
    bind_numba_cuda(globals())
    element = getattr(numba, dtype_name)

    @cuda.jit(cache=True)
    def partial_sums(x, partial):
        shared = cuda.shared.array(THREADS_PER_BLOCK, dtype=element)
        tid = cuda.threadIdx.x
        total = element(0)
        for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
            total += x[i]
        shared[tid] = total
        cuda.syncthreads()
        step = THREADS_PER_BLOCK // 2
        while step > 0:
            if tid < step:
                shared[tid] += shared[tid + step]
            cuda.syncthreads()
            step //= 2
        if tid == 0:
            partial[cuda.blockIdx.x] = shared[0]

    return partial_sums


def prepare_numba_cuda(inputs, device: Device) -> Prepared:
    """Two launches: partial sums per block, then one block sums the partials."""
    (x,) = inputs
    kernel = cuda_partial_sums(x.dtype.name)
    blocks = min(MAX_BLOCKS, blocks_for(x.size, THREADS_PER_BLOCK))
    partial = cuda.device_array(blocks, dtype=x.dtype)

    def launch(x, out):
        kernel[blocks, THREADS_PER_BLOCK](x, partial)
        kernel[1, THREADS_PER_BLOCK](partial, out)

    return numba_cuda_prepared(inputs, launch, (1,), x.dtype)


SPEC = KernelSpec(
    name="reduction",
    description="sum of a vector of length n",
    flops=lambda n: float(n),
    bytes_moved=lambda n, itemsize: float(n * itemsize),
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
    half_dtypes={"torch": ("bfloat16",)},
    naive_size_limit=1 << 20,
)

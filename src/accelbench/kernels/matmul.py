"""Dense matrix multiply C = A @ B with square n x n operands (GEMM).

2 n^3 flops; at least three n x n matrices cross memory once. The error bound
follows the classic forward-error bound of an inner product of length n,
|C - C_hat| <= n u |A||B|, taken normwise with a safety factor; 16-bit types
are accumulated in float32 by the libraries, so they add one final rounding.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from accelbench.kernels import (
    HALF_DTYPES,
    ArrayModule,
    KernelSpec,
    Prepared,
    accumulation_roundoff,
    array_implementations,
    array_prepared,
    bind_numba,
    bind_numba_cuda,
    host_prepared,
    jax_prepared,
    jit_loop,
    numba_cuda_tiled,
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
    return tuple(rng.standard_normal((n, n)).astype(dtype) for _ in range(2))


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) @ b.astype(np.float64)


def tolerance(n: int, dtype: np.dtype) -> float:
    bound = 4.0 * n * accumulation_roundoff(dtype)
    return bound + 4.0 * unit_roundoff(dtype) if dtype.itemsize == 2 else bound


def _shape(inputs) -> tuple[int, int]:
    return inputs[0].shape[0], inputs[1].shape[1]


def prepare_array_module(am: ArrayModule, inputs) -> Prepared:
    """GEMM written against an array module: NumPy on the host, CuPy on a GPU."""
    return array_prepared(
        am, inputs, lambda a, b, out: am.xp.matmul(a, b, out=out), _shape(inputs), inputs[0].dtype
    )


def prepare_torch(inputs, device: Device) -> Prepared:
    import torch

    # float32 means IEEE float32 here: TF32 tensor cores are a separate precision.
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch_prepared(
        inputs,
        device,
        lambda a, b, out: torch.matmul(a, b, out=out),
        _shape(inputs),
        inputs[0].dtype,
    )


def matmul_jax(a, b):
    """IEEE float32 products: JAX's default precision on a GPU is TF32's."""
    import jax

    return jax.numpy.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


def prepare_jax(inputs, device: Device) -> Prepared:
    return jax_prepared(inputs, device, matmul_jax)


def matmul_python(a: list, b: list) -> list:
    """Textbook triple loop over Python lists."""
    n, k, m = len(a), len(b), len(b[0]) if b else 0
    c = [[0.0] * m for _ in range(n)]
    for i in range(n):
        row, a_i = c[i], a[i]
        for p in range(k):
            a_ip, b_p = a_i[p], b[p]
            for j in range(m):
                row[j] += a_ip * b_p[j]
    return c


def prepare_python(inputs, device: Device) -> Prepared:
    return python_prepared(inputs, matmul_python, _shape(inputs), inputs[0].dtype)


@cache
def _numba_loops(parallel: bool):
    """i-p-j loop order: the inner loop streams rows of B and C, so LLVM vectorises it."""
    bind_numba(globals())

    @jit_loop(parallel)
    def matmul_loops(a, b, out):
        n, k = a.shape
        m = b.shape[1]
        for i in numba.prange(n):
            for j in range(m):
                out[i, j] = 0
            for p in range(k):
                a_ip = a[i, p]
                for j in range(m):
                    out[i, j] += a_ip * b[p, j]

    return matmul_loops


def prepare_numba(inputs, parallel: bool) -> Prepared:
    return host_prepared(inputs, _numba_loops(parallel), _shape(inputs), inputs[0].dtype)


TILE = 16


@cache
def cuda_tiled_kernel(dtype_name: str):
    """Shared-memory tiled GEMM: each block computes TILE x TILE tiles of C, striding over
    the tiles the grid does not cover (the loops are the same for every thread of a block,
    so all of them reach each barrier)."""
    bind_numba_cuda(globals())
    element = getattr(numba, dtype_name)

    @cuda.jit(cache=True)
    def matmul_tiled(a, b, out):
        tile_a = cuda.shared.array(shape=(TILE, TILE), dtype=element)
        tile_b = cuda.shared.array(shape=(TILE, TILE), dtype=element)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        n, k = a.shape
        m = b.shape[1]
        for row_tile in range(cuda.blockIdx.y * TILE, n, cuda.gridDim.y * TILE):
            row = row_tile + ty
            for col_tile in range(cuda.blockIdx.x * TILE, m, cuda.gridDim.x * TILE):
                col = col_tile + tx
                acc = element(0)
                for start in range(0, k, TILE):
                    tile_a[ty, tx] = a[row, start + tx] if row < n and start + tx < k else 0
                    tile_b[ty, tx] = b[start + ty, col] if start + ty < k and col < m else 0
                    cuda.syncthreads()
                    for p in range(TILE):
                        acc += tile_a[ty, p] * tile_b[p, tx]
                    cuda.syncthreads()
                if row < n and col < m:
                    out[row, col] = acc

    return matmul_tiled


def prepare_numba_cuda(inputs, device: Device) -> Prepared:
    # Thread (x, y) computes out[y, x]: x runs along a row, over the m columns.
    n, m = _shape(inputs)
    kernel = cuda_tiled_kernel(inputs[0].dtype.name)
    return numba_cuda_tiled(inputs, kernel, (n, m), TILE)


SPEC = KernelSpec(
    name="matmul",
    description="dense matrix multiply C = A @ B, n x n",
    flops=lambda n: 2.0 * n**3,
    bytes_moved=lambda n, itemsize: 3.0 * n * n * itemsize,
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
    half_dtypes={"torch": HALF_DTYPES, "cupy": ("float16",)},
    naive_size_limit=96,
)

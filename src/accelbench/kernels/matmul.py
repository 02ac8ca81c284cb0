"""Dense matrix multiply C = A @ B with square n x n operands (GEMM).

2 n^3 flops; at least three n x n matrices cross memory once. The error bound
follows the classic forward-error bound of an inner product of length n,
|C - C_hat| <= n u |A||B|, taken normwise with a safety factor.
"""

from __future__ import annotations

from functools import cache

import numba
import numpy as np
from numba import cuda  # module level: the CUDA simulator swaps this global in kernels

from accelbench.devices import Device
from accelbench.kernels import KernelSpec, Prepared


def make_inputs(rng: np.random.Generator, n: int, dtype: np.dtype) -> tuple[np.ndarray, ...]:
    return tuple(rng.standard_normal((n, n)).astype(dtype) for _ in range(2))


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) @ b.astype(np.float64)


def tolerance(n: int, dtype: np.dtype) -> float:
    return 4.0 * n * float(np.finfo(dtype).eps)


def prepare_array_module(xp, inputs, to_device, to_host) -> Prepared:
    """GEMM written against an array module: NumPy on the host, CuPy on a GPU."""
    a, b = (to_device(x) for x in inputs)
    out = xp.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
    return Prepared(
        run=lambda: xp.matmul(a, b, out=out),
        fetch=lambda: to_host(out),
        poison=lambda: out.fill(xp.nan),
    )


def prepare_numpy(inputs, device: Device) -> Prepared:
    return prepare_array_module(np, inputs, np.ascontiguousarray, np.array)


def prepare_cupy(inputs, device: Device) -> Prepared:
    import cupy

    return prepare_array_module(cupy, inputs, cupy.asarray, cupy.asnumpy)


def prepare_torch(inputs, device: Device) -> Prepared:
    import torch

    # float32 means IEEE float32 here: TF32 tensor cores are a separate precision.
    torch.backends.cuda.matmul.allow_tf32 = False
    target = torch.device("cuda:0" if device.is_gpu else "cpu")
    a, b = (torch.from_numpy(x).to(target) for x in inputs)
    out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=target)
    return Prepared(
        run=lambda: torch.matmul(a, b, out=out),
        fetch=lambda: out.cpu().numpy().copy(),
        poison=lambda: out.fill_(float("nan")),
    )


@cache
def _numba_loops(parallel: bool):
    """i-p-j loop order: the inner loop streams rows of B and C, so LLVM vectorises it."""

    @numba.njit(parallel=parallel, cache=True)
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


def _prepare_numba(inputs, parallel: bool) -> Prepared:
    a, b = (np.ascontiguousarray(x) for x in inputs)
    out = np.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
    loops = _numba_loops(parallel)
    return Prepared(
        run=lambda: loops(a, b, out), fetch=lambda: out.copy(), poison=lambda: out.fill(np.nan)
    )


def prepare_numba(inputs, device: Device) -> Prepared:
    return _prepare_numba(inputs, parallel=False)


def prepare_numba_parallel(inputs, device: Device) -> Prepared:
    return _prepare_numba(inputs, parallel=True)


TILE = 16


@cache
def cuda_tiled_kernel(dtype_name: str):
    """Shared-memory tiled GEMM: each block computes one TILE x TILE tile of C."""
    element = getattr(numba, dtype_name)

    @cuda.jit
    def matmul_tiled(a, b, out):
        tile_a = cuda.shared.array(shape=(TILE, TILE), dtype=element)
        tile_b = cuda.shared.array(shape=(TILE, TILE), dtype=element)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        col = cuda.blockIdx.x * TILE + tx
        row = cuda.blockIdx.y * TILE + ty
        n, k = a.shape
        m = b.shape[1]
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
    a, b = (cuda.to_device(np.ascontiguousarray(x)) for x in inputs)
    n, m = a.shape[0], b.shape[1]
    out = cuda.device_array((n, m), dtype=a.dtype)
    kernel = cuda_tiled_kernel(np.dtype(a.dtype).name)
    blocks = ((m + TILE - 1) // TILE, (n + TILE - 1) // TILE)
    nan_block = np.full((n, m), np.nan, dtype=a.dtype)
    return Prepared(
        run=lambda: kernel[blocks, (TILE, TILE)](a, b, out),
        fetch=lambda: out.copy_to_host(),
        poison=lambda: out.copy_to_device(nan_block),
    )


SPEC = KernelSpec(
    name="matmul",
    description="dense matrix multiply C = A @ B, n x n",
    flops=lambda n: 2.0 * n**3,
    bytes_moved=lambda n, itemsize: 3.0 * n * n * itemsize,
    make_inputs=make_inputs,
    reference=reference,
    tolerance=tolerance,
    implementations={
        "numpy": prepare_numpy,
        "numba": prepare_numba,
        "numba-parallel": prepare_numba_parallel,
        "torch": prepare_torch,
        "cupy": prepare_cupy,
        "numba-cuda": prepare_numba_cuda,
    },
)

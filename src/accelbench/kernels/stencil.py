"""One Jacobi sweep of the 2-D 5-point stencil on an n x n grid.

Each interior point becomes the mean of its four neighbours; the boundary is
kept (Dirichlet). 4 flops per interior point (three adds, one multiply); the
grid is read once and written once, 2 n^2 items. With positive inputs the
sums cannot cancel, so every implementation stays within a few units of
roundoff of the float64 result, whatever order it adds in.
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

TILE = 16


def make_inputs(rng: np.random.Generator, n: int, dtype: np.dtype) -> tuple[np.ndarray, ...]:
    return (rng.uniform(0.5, 1.5, (n, n)).astype(dtype),)


def sweep_sliced(u, out) -> None:
    """The sweep in slices, for any array library whose views accept in-place ops."""
    out[0], out[-1] = u[0], u[-1]  # the boundary is kept
    out[:, 0], out[:, -1] = u[:, 0], u[:, -1]
    interior = out[1:-1, 1:-1]
    interior[...] = u[:-2, 1:-1]
    interior += u[2:, 1:-1]
    interior += u[1:-1, :-2]
    interior += u[1:-1, 2:]
    interior *= 0.25


def reference(u: np.ndarray) -> np.ndarray:
    u = u.astype(np.float64)
    out = u.copy()
    out[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return out


def tolerance(n: int, dtype: np.dtype) -> float:
    return 8.0 * unit_roundoff(dtype)


def flops(n: int) -> float:
    return 4.0 * max(n - 2, 0) ** 2


def prepare_array_module(am: ArrayModule, inputs) -> Prepared:
    return array_prepared(am, inputs, sweep_sliced, inputs[0].shape, inputs[0].dtype)


def prepare_torch(inputs, device: Device) -> Prepared:
    return torch_prepared(inputs, device, sweep_sliced, inputs[0].shape, inputs[0].dtype)


def sweep_jax(u):
    """The interior replaced out of place (`.at[].set`), the boundary kept."""
    interior = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return u.at[1:-1, 1:-1].set(interior)


def prepare_jax(inputs, device: Device) -> Prepared:
    return jax_prepared(inputs, device, sweep_jax)


def sweep_python(u: list) -> list:
    n = len(u)
    out = [row[:] for row in u]
    for i in range(1, n - 1):
        above, row, below, target = u[i - 1], u[i], u[i + 1], out[i]
        for j in range(1, n - 1):
            target[j] = 0.25 * (above[j] + below[j] + row[j - 1] + row[j + 1])
    return out


def prepare_python(inputs, device: Device) -> Prepared:
    return python_prepared(inputs, sweep_python, inputs[0].shape, inputs[0].dtype)


@cache
def _sweep_row():
    """One interior row on 1-D views: unit-stride loads LLVM vectorises, no 2-D indexing."""
    bind_numba(globals())

    @numba.njit(cache=True, fastmath={"contract"})
    def sweep_row(above, row, below, target, quarter):
        m = row.size
        target[0] = row[0]
        for j in range(1, m - 1):
            target[j] = quarter * ((above[j] + below[j]) + (row[j - 1] + row[j + 1]))
        target[m - 1] = row[m - 1]

    return sweep_row


@cache
def _numba_loops(parallel: bool):
    """Rows spread over threads, each swept on 1-D views; the two boundary rows copied."""
    bind_numba(globals())
    sweep_row = _sweep_row()

    @jit_loop(parallel)
    def sweep_loops(u, out):
        n = u.shape[0]
        quarter = u.dtype.type(0.25)  # a float64 literal would widen float32 sums
        out[0, :] = u[0, :]
        out[n - 1, :] = u[n - 1, :]
        for i in numba.prange(1, n - 1):
            sweep_row(u[i - 1], u[i], u[i + 1], out[i], quarter)

    return sweep_loops


def prepare_numba(inputs, parallel: bool) -> Prepared:
    return host_prepared(inputs, _numba_loops(parallel), inputs[0].shape, inputs[0].dtype)


@cache
def cuda_kernel(dtype_name: str):
    """One thread per grid point, x along a row (coalesced), striding over the points the
    grid does not cover: interior points average, boundary points copy."""
    bind_numba_cuda(globals())
    element = getattr(numba, dtype_name)

    @cuda.jit(cache=True)
    def sweep(u, out):
        first_column, first_row = cuda.grid(2)
        column_stride, row_stride = cuda.gridsize(2)
        n, m = u.shape
        for i in range(first_row, n, row_stride):
            for j in range(first_column, m, column_stride):
                if 0 < i < n - 1 and 0 < j < m - 1:
                    total = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                    out[i, j] = element(0.25) * total
                else:
                    out[i, j] = u[i, j]

    return sweep


def prepare_numba_cuda(inputs, device: Device) -> Prepared:
    kernel = cuda_kernel(inputs[0].dtype.name)
    return numba_cuda_tiled(inputs, kernel, inputs[0].shape, TILE)


SPEC = KernelSpec(
    name="stencil",
    description="one 2-D 5-point Jacobi sweep on an n x n grid",
    flops=flops,
    bytes_moved=lambda n, itemsize: 2.0 * n * n * itemsize,
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
    naive_size_limit=512,
)

"""Mandelbrot set by escape time on an n x n grid, with a fixed iteration cap.

Each pixel iterates z <- z^2 + c from z = 0 until |z|^2 > 4 or MAX_ITER
steps; its value is the number of steps taken. One step is counted as 8 flops
(zr^2, zi^2, their sum for the test, 2 zr zi + ci, zr^2 - zi^2 + cr), and the
flop count is that of the steps the float64 reference takes on the grid, so
GFLOP/s counts useful work only. The view window is shifted by a random
fraction of a pixel for fresh inputs; the shift changes the total step count
by well under 1%. Counts are stored in the compute dtype (exact integers) so
the output can be poisoned with NaN like every other kernel.

Near the set's boundary an orbit is chaotic, so a float32 run may escape a
step earlier or later than the float64 reference on a few pixels; the check
allows a small fraction of pixels to differ.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from accelbench.kernels import (
    ArrayModule,
    KernelSpec,
    Prepared,
    array_implementations,
    array_prepared,
    bind_numba,
    bind_numba_cuda,
    host_prepared,
    jit_loop,
    numba_cuda_tiled,
    numba_implementations,
    python_prepared,
    torch_prepared,
)
from accelbench.platform.devices import Device

if TYPE_CHECKING:  # bound on the first compile: kernels.bind_numba
    import numba
    from numba import cuda

MAX_ITER = 100
REAL_RANGE = (-2.0, 0.5)
IMAG_RANGE = (-1.25, 1.25)
FLOPS_PER_STEP = 8
REFERENCE_BLOCK = 1 << 20  # pixels per block of the reference, to bound its memory
TILE = 16
LANES = 16  # pixels a Numba CPU thread steps at once (vector width)


def coordinates(n: int, shift: tuple[float, float] = (0.5, 0.5)) -> tuple[np.ndarray, np.ndarray]:
    """Real parts (columns) and imaginary parts (rows) of the pixel positions, float64."""
    (re0, re1), (im0, im1) = REAL_RANGE, IMAG_RANGE
    real = re0 + (np.arange(n) + shift[0]) * ((re1 - re0) / n)
    imag = im0 + (np.arange(n) + shift[1]) * ((im1 - im0) / n)
    return real, imag


def make_inputs(rng: np.random.Generator, n: int, dtype: np.dtype) -> tuple[np.ndarray, ...]:
    real, imag = coordinates(n, tuple(rng.uniform(0.0, 1.0, 2)))
    return real.astype(dtype), imag.astype(dtype)


def reference(real: np.ndarray, imag: np.ndarray) -> np.ndarray:
    """Escape counts in float64, iterating only the pixels that have not escaped yet."""
    cr_grid, ci_grid = np.meshgrid(real.astype(np.float64), imag.astype(np.float64))
    counts = np.full(cr_grid.size, float(MAX_ITER))
    for start in range(0, cr_grid.size, REFERENCE_BLOCK):
        index = np.arange(start, min(start + REFERENCE_BLOCK, cr_grid.size))
        cr, ci = cr_grid.ravel()[index], ci_grid.ravel()[index]
        zr, zi = np.zeros_like(cr), np.zeros_like(ci)
        for step in range(MAX_ITER):
            zr2, zi2 = zr * zr, zi * zi
            escaped = zr2 + zi2 > 4.0
            if escaped.any():
                counts[index[escaped]] = step
                stay = ~escaped
                index, cr, ci, zr, zi, zr2, zi2 = (
                    a[stay] for a in (index, cr, ci, zr, zi, zr2, zi2)
                )
            zi = 2.0 * zr * zi + ci
            zr = zr2 - zi2 + cr
    return counts.reshape(cr_grid.shape)


@cache
def steps(n: int) -> int:
    """Iteration steps the reference takes on the unshifted n x n grid."""
    return int(reference(*coordinates(n)).sum())


def flops(n: int) -> float:
    return float(FLOPS_PER_STEP * steps(n))


def mismatch_fraction(result: np.ndarray, reference: np.ndarray) -> float:
    """Fraction of pixels whose count differs from the reference; inf on NaN or shape."""
    if result.shape != reference.shape or not np.all(np.isfinite(result)):
        return float("inf")
    return float(np.mean(result != reference)) if result.size else 0.0


def tolerance(n: int, dtype: np.dtype) -> float:
    """float32 differs on about 0.1% of pixels at any size (measured, n = 64..1024, five
    shifts); float64 only where a device contracts a*b + c into one fused multiply-add."""
    return 0.005 if dtype.itemsize < 8 else 0.001


def escape_masked(xp, real, imag, out) -> None:
    """All pixels step together; escaped ones are frozen by a mask (NumPy, CuPy, PyTorch)."""
    cr, ci = real[None, :], imag[:, None]
    zr = xp.zeros_like(out)
    zi = xp.zeros_like(out)
    out[...] = 0
    for _ in range(MAX_ITER):
        zr2, zi2 = zr * zr, zi * zi
        active = zr2 + zi2 <= 4.0
        out += active
        zi_next = 2.0 * zr * zi + ci
        zr = xp.where(active, zr2 - zi2 + cr, zr)
        zi = xp.where(active, zi_next, zi)


def _shape(inputs) -> tuple[int, int]:
    return inputs[1].shape[0], inputs[0].shape[0]


def prepare_array_module(am: ArrayModule, inputs) -> Prepared:
    xp = am.xp
    return array_prepared(
        am,
        inputs,
        lambda re, im, out: escape_masked(xp, re, im, out),
        _shape(inputs),
        inputs[0].dtype,
    )


def prepare_torch(inputs, device: Device) -> Prepared:
    import torch

    return torch_prepared(
        inputs,
        device,
        lambda re, im, out: escape_masked(torch, re, im, out),
        _shape(inputs),
        inputs[0].dtype,
    )


def escape_python(real: list, imag: list) -> list:
    rows = []
    for ci in imag:
        row = []
        for cr in real:
            zr = zi = 0.0
            step = 0
            while step < MAX_ITER:
                zr2, zi2 = zr * zr, zi * zi
                if zr2 + zi2 > 4.0:
                    break
                zi = 2.0 * zr * zi + ci
                zr = zr2 - zi2 + cr
                step += 1
            row.append(step)
        rows.append(row)
    return rows


def prepare_python(inputs, device: Device) -> Prepared:
    return python_prepared(inputs, escape_python, _shape(inputs), inputs[0].dtype)


@cache
def _numba_loops(parallel: bool):
    """LANES pixels of a row step together, escaped ones frozen by a select, so the inner
    loop has no branch and LLVM vectorises it; a block stops when all its pixels escaped."""
    bind_numba(globals())

    @jit_loop(parallel)
    def escape_lanes(real, imag, out):
        two, four = real.dtype.type(2.0), real.dtype.type(4.0)
        cols = real.size
        for i in numba.prange(imag.size):
            ci = imag[i]
            zr, zi = np.empty(LANES, real.dtype), np.empty(LANES, real.dtype)
            cr, count = np.empty(LANES, real.dtype), np.empty(LANES, real.dtype)
            for start in range(0, cols, LANES):
                for lane in range(LANES):
                    cr[lane] = real[min(start + lane, cols - 1)]
                    zr[lane] = zi[lane] = count[lane] = 0
                for _ in range(MAX_ITER):
                    active = 0
                    for lane in range(LANES):
                        a, b = zr[lane], zi[lane]
                        a2, b2 = a * a, b * b
                        inside = a2 + b2 <= four
                        count[lane] += inside
                        active += inside
                        zi[lane] = two * a * b + ci if inside else b
                        zr[lane] = a2 - b2 + cr[lane] if inside else a
                    if active == 0:
                        break
                for lane in range(min(LANES, cols - start)):
                    out[i, start + lane] = count[lane]

    return escape_lanes


def prepare_numba(inputs, parallel: bool) -> Prepared:
    return host_prepared(inputs, _numba_loops(parallel), _shape(inputs), inputs[0].dtype)


@cache
def cuda_kernel(dtype_name: str):
    """One thread per pixel, x along a row (coalesced), striding over the pixels the grid
    does not cover."""
    bind_numba_cuda(globals())
    element = getattr(numba, dtype_name)

    @cuda.jit(cache=True)
    def escape(real, imag, out):
        first_column, first_row = cuda.grid(2)
        column_stride, row_stride = cuda.gridsize(2)
        for i in range(first_row, imag.size, row_stride):
            ci = imag[i]
            for j in range(first_column, real.size, column_stride):
                cr = real[j]
                zr = zi = element(0)
                step = 0
                while step < MAX_ITER:
                    zr2, zi2 = zr * zr, zi * zi
                    if zr2 + zi2 > element(4.0):
                        break
                    zi = element(2.0) * zr * zi + ci
                    zr = zr2 - zi2 + cr
                    step += 1
                out[i, j] = step

    return escape


def prepare_numba_cuda(inputs, device: Device) -> Prepared:
    # Thread (x, y) computes out[y, x] (and the pixels a grid's width and height on).
    kernel = cuda_kernel(inputs[0].dtype.name)
    return numba_cuda_tiled(inputs, kernel, _shape(inputs), TILE)


SPEC = KernelSpec(
    name="mandelbrot",
    description=f"Mandelbrot escape counts on an n x n grid, at most {MAX_ITER} steps",
    flops=flops,
    bytes_moved=lambda n, itemsize: float((n * n + 2 * n) * itemsize),
    make_inputs=make_inputs,
    reference=reference,
    tolerance=tolerance,
    implementations={
        "python": prepare_python,
        **array_implementations(prepare_array_module),
        **numba_implementations(prepare_numba),
        "torch": prepare_torch,
        "numba-cuda": prepare_numba_cuda,
    },
    error=mismatch_fraction,
    error_measure="fraction of pixels whose escape count differs",
    naive_size_limit=256,
)

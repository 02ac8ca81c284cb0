"""Complex discrete Fourier transforms: 1-D of length n (`fft1d`), 2-D of n x n (`fft2d`).

5 N log2 N flops for N points (the usual count for a radix-2 FFT); the
complex input is read and the complex output written once. Libraries
(pocketfft in NumPy, PyTorch's, cuFFT) are compared with hand-written
Numba FFTs: iterative radix-2 Cooley-Tukey for powers of two and
Bluestein's chirp-z algorithm (three power-of-two FFTs) for any other n, with
twiddle factors and the chirp computed once in float64 when the plan is made,
as FFT libraries do. Naive Python is the O(n^2) direct transform. FFT error
grows like log2 N units of roundoff (normwise); Bluestein's detour adds a
constant factor.
"""

from __future__ import annotations

import dataclasses
import math
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from accelbench.backends.arrays import NUMPY
from accelbench.kernels import (
    ArrayModule,
    KernelSpec,
    Prepared,
    array_implementations,
    array_prepared,
    bind_numba,
    bind_numba_cuda,
    grid_2d,
    grid_rows,
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


def complex_dtype(dtype: np.dtype) -> np.dtype:
    return np.result_type(dtype, np.complex64)


def make_inputs_of(dims: int):
    def make_inputs(rng: np.random.Generator, n: int, dtype: np.dtype) -> tuple[np.ndarray, ...]:
        shape = (n,) * dims
        x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        return (x.astype(complex_dtype(dtype)),)

    return make_inputs


def reference(x: np.ndarray) -> np.ndarray:
    return np.fft.fftn(x.astype(np.complex128))


def tolerance_of(dims: int):
    def tolerance(n: int, dtype: np.dtype) -> float:
        points = n**dims
        return 4.0 * max(math.log2(points), 1.0) * unit_roundoff(dtype)

    return tolerance


# --- libraries ----------------------------------------------------------------------------------


def prepare_numpy(inputs, device: Device) -> Prepared:
    (x,) = inputs
    return array_prepared(NUMPY, inputs, lambda x, out: np.fft.fftn(x, out=out), x.shape, x.dtype)


def prepare_array_module(am: ArrayModule, inputs) -> Prepared:
    """CuPy's FFT has no `out`: the result is copied into the output buffer."""
    (x,) = inputs

    def transform(x, out):
        out[...] = am.xp.fft.fftn(x)

    return array_prepared(am, inputs, transform, x.shape, x.dtype)


def prepare_torch(inputs, device: Device) -> Prepared:
    import torch

    (x,) = inputs
    return torch_prepared(
        inputs, device, lambda x, out: torch.fft.fftn(x, out=out), x.shape, x.dtype
    )


def fft_jax(x):
    import jax.numpy as jnp

    return jnp.fft.fftn(x)


def prepare_jax(inputs, device: Device) -> Prepared:
    return jax_prepared(inputs, device, fft_jax)


# --- naive Python: the direct transform ----------------------------------------------------------


def dft_python(x: list) -> list:
    n = len(x)
    roots = [
        complex(math.cos(-2 * math.pi * k / n), math.sin(-2 * math.pi * k / n)) for k in range(n)
    ]
    out = []
    for k in range(n):
        total = 0j
        for j in range(n):
            total += x[j] * roots[(j * k) % n]
        out.append(total)
    return out


def dft2_python(x: list) -> list:
    rows = [dft_python(row) for row in x]
    columns = [dft_python(list(column)) for column in zip(*rows, strict=True)]
    return [list(row) for row in zip(*columns, strict=True)]


def prepare_python_of(dims: int):
    def prepare_python(inputs, device: Device) -> Prepared:
        (x,) = inputs
        return python_prepared(inputs, dft_python if dims == 1 else dft2_python, x.shape, x.dtype)

    return prepare_python


# --- the plan shared by the Numba CPU and CUDA FFTs ----------------------------------------------


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything about a length-n transform that does not depend on the data.

    For a power of two the work length m is n; otherwise m is the power of two
    >= 2n - 1 that Bluestein's convolution needs, with `pre` (chirp), `post`
    (chirp / m) and `kernel` (FFT of the conjugate chirp) in the data's dtype.
    """

    n: int
    m: int
    permutation: np.ndarray  # bit reversal of 0..m-1
    twiddles: np.ndarray  # exp(-2 pi i k / m), k < m / 2
    pre: np.ndarray
    post: np.ndarray
    kernel: np.ndarray

    @property
    def bluestein(self) -> bool:
        return self.m != self.n


def make_plan(n: int, dtype: np.dtype) -> Plan:
    m = n if n & (n - 1) == 0 else 1 << (2 * n - 1).bit_length()
    bits = m.bit_length() - 1
    index = np.arange(m)
    permutation = np.zeros(m, dtype=np.int64)
    for bit in range(bits):
        permutation |= ((index >> bit) & 1) << (bits - 1 - bit)
    twiddles = np.exp(-2j * np.pi * np.arange(max(m // 2, 1)) / m).astype(dtype)
    if m == n:
        empty = np.zeros(1, dtype=dtype)
        return Plan(n, m, permutation, twiddles, empty, empty, empty)
    k = np.arange(n)
    chirp = np.exp(-1j * np.pi * ((k * k) % (2 * n)) / n)
    b = np.zeros(m, dtype=np.complex128)
    b[:n] = np.conj(chirp)
    b[m - n + 1 :] = np.conj(chirp[1:])[::-1]
    return Plan(
        n,
        m,
        permutation,
        twiddles,
        chirp.astype(dtype),
        (chirp / m).astype(dtype),
        np.fft.fft(b).astype(dtype),
    )


# --- Numba on the CPU ----------------------------------------------------------------------------


@cache
def _numba_fft(parallel: bool):
    """A length-n transform of one row; with `parallel` the butterflies of each stage are
    spread over threads (1-D), without it the caller parallelises over rows (2-D)."""
    bind_numba(globals())

    @jit_loop(parallel)
    def radix2(src, dst, permutation, twiddles):
        m = dst.size
        for i in numba.prange(m):
            dst[permutation[i]] = src[i]
        half = 1
        while half < m:
            stride = m // (2 * half)
            for b in numba.prange(m // 2):
                group = b // half
                k = b - group * half
                i = group * 2 * half + k
                t = twiddles[k * stride] * dst[i + half]
                dst[i + half] = dst[i] - t
                dst[i] = dst[i] + t
            half *= 2

    @jit_loop(parallel)
    def transform(x, out, permutation, twiddles, pre, post, kernel, work, spare):
        n, m = x.size, work.size
        if n == m:
            radix2(x, out, permutation, twiddles)
            return
        for k in numba.prange(m):
            spare[k] = x[k] * pre[k] if k < n else 0
        radix2(spare, work, permutation, twiddles)
        for k in numba.prange(m):
            work[k] = (work[k] * kernel[k]).conjugate()
        radix2(work, spare, permutation, twiddles)
        for k in numba.prange(n):
            out[k] = spare[k].conjugate() * post[k]

    return transform


@cache
def _numba_fft_rows():
    """Transform every row, rows spread over threads (each row serial)."""
    bind_numba(globals())
    row_transform = _numba_fft(False)

    @numba.njit(parallel=True, cache=True)
    def rows(x, out, permutation, twiddles, pre, post, kernel, work, spare):
        for r in numba.prange(x.shape[0]):
            row_transform(x[r], out[r], permutation, twiddles, pre, post, kernel, work[r], spare[r])

    return rows


@cache
def _numba_fft_rows_serial():
    bind_numba(globals())
    row_transform = _numba_fft(False)

    @numba.njit(cache=True)
    def rows(x, out, permutation, twiddles, pre, post, kernel, work, spare):
        for r in range(x.shape[0]):
            row_transform(x[r], out[r], permutation, twiddles, pre, post, kernel, work[r], spare[r])

    return rows


def prepare_numba_of(dims: int):
    def prepare(inputs, parallel: bool) -> Prepared:
        (x,) = inputs
        n = x.shape[0]
        plan = make_plan(n, x.dtype)
        tables = (plan.permutation, plan.twiddles, plan.pre, plan.post, plan.kernel)
        if dims == 1:
            work, spare = (np.empty(plan.m, dtype=x.dtype) for _ in range(2))
            transform = _numba_fft(parallel)

            def run(x, out):
                transform(x, out, *tables, work, spare)

        else:
            work, spare = (np.empty((n, plan.m), dtype=x.dtype) for _ in range(2))
            rows = _numba_fft_rows() if parallel else _numba_fft_rows_serial()
            turned = np.empty_like(x)
            middle = np.empty_like(x)

            def run(x, out):
                rows(x, middle, *tables, work, spare)
                turned[...] = middle.T
                rows(turned, middle, *tables, work, spare)
                out[...] = middle.T

        return host_prepared(inputs, run, x.shape, x.dtype)

    return prepare


# --- Numba CUDA ----------------------------------------------------------------------------------

TILE = 16  # the transpose's blocks are TILE x TILE threads


@cache
def cuda_kernels():
    """Every kernel works on a batch of rows, x along a row and y over the rows, each
    striding over the elements and rows its grid does not cover."""
    bind_numba_cuda(globals())

    @cuda.jit(cache=True)
    def permute(src, dst, permutation):
        for row in range(cuda.blockIdx.y, dst.shape[0], cuda.gridDim.y):
            for i in range(cuda.grid(1), dst.shape[1], cuda.gridsize(1)):
                dst[row, permutation[i]] = src[row, i]

    @cuda.jit(cache=True)
    def stage(a, twiddles, half, stride):
        for row in range(cuda.blockIdx.y, a.shape[0], cuda.gridDim.y):
            for b in range(cuda.grid(1), a.shape[1] // 2, cuda.gridsize(1)):
                group = b // half
                k = b - group * half
                i = group * 2 * half + k
                t = twiddles[k * stride] * a[row, i + half]
                a[row, i + half] = a[row, i] - t
                a[row, i] = a[row, i] + t

    @cuda.jit(cache=True)
    def chirp_in(x, pre, spare):
        for row in range(cuda.blockIdx.y, spare.shape[0], cuda.gridDim.y):
            for k in range(cuda.grid(1), spare.shape[1], cuda.gridsize(1)):
                spare[row, k] = x[row, k] * pre[k] if k < x.shape[1] else 0

    @cuda.jit(cache=True)
    def convolve(work, kernel):
        for row in range(cuda.blockIdx.y, work.shape[0], cuda.gridDim.y):
            for k in range(cuda.grid(1), work.shape[1], cuda.gridsize(1)):
                work[row, k] = (work[row, k] * kernel[k]).conjugate()

    @cuda.jit(cache=True)
    def chirp_out(spare, post, out):
        for row in range(cuda.blockIdx.y, out.shape[0], cuda.gridDim.y):
            for k in range(cuda.grid(1), out.shape[1], cuda.gridsize(1)):
                out[row, k] = spare[row, k].conjugate() * post[k]

    @cuda.jit(cache=True)
    def transpose(src, dst):
        first_column, first_row = cuda.grid(2)
        column_stride, row_stride = cuda.gridsize(2)
        for i in range(first_row, src.shape[0], row_stride):
            for j in range(first_column, src.shape[1], column_stride):
                dst[j, i] = src[i, j]

    return permute, stage, chirp_in, convolve, chirp_out, transpose


def _cuda_rows_transform(plan: Plan, rows: int, dtype: np.dtype):
    """Launch sequence transforming each of `rows` rows of length n, on device buffers."""
    permute, stage, chirp_in, convolve, chirp_out, _ = cuda_kernels()
    tables = {
        name: cuda.to_device(getattr(plan, name))
        for name in ("permutation", "twiddles", "pre", "post", "kernel")
    }
    work, spare = (cuda.device_array((rows, plan.m), dtype=dtype) for _ in range(2))

    def radix2(src, dst):
        blocks, threads = grid_rows(plan.m, rows)
        permute[blocks, threads](src, dst, tables["permutation"])
        half = 1
        while half < plan.m:
            blocks, threads = grid_rows(plan.m // 2, rows)
            stage[blocks, threads](dst, tables["twiddles"], half, plan.m // (2 * half))
            half *= 2

    def transform(x, out):
        if not plan.bluestein:
            radix2(x, out)
            return
        blocks, threads = grid_rows(plan.m, rows)
        chirp_in[blocks, threads](x, tables["pre"], spare)
        radix2(spare, work)
        convolve[blocks, threads](work, tables["kernel"])
        radix2(work, spare)
        blocks, threads = grid_rows(plan.n, rows)
        chirp_out[blocks, threads](spare, tables["post"], out)

    return transform


def prepare_numba_cuda_of(dims: int):
    def prepare(inputs, device: Device) -> Prepared:
        (x,) = inputs
        n = x.shape[0]
        plan = make_plan(n, x.dtype)
        rows = 1 if dims == 1 else n
        transform = _cuda_rows_transform(plan, rows, x.dtype)
        if dims == 1:
            prepared = numba_cuda_prepared((x.reshape(1, n),), transform, (1, n), x.dtype)
            return dataclasses.replace(
                prepared,
                fetch=lambda: prepared.fetch().reshape(n),
                download=lambda: prepared.download().reshape(n),
            )
        transpose = cuda_kernels()[5]
        middle, turned = (cuda.device_array((n, n), dtype=x.dtype) for _ in range(2))
        blocks, threads = grid_2d(n, n, TILE)

        def launch(x, out):
            transform(x, middle)
            transpose[blocks, threads](middle, turned)
            transform(turned, middle)
            transpose[blocks, threads](middle, out)

        return numba_cuda_prepared(inputs, launch, x.shape, x.dtype)

    return prepare


def _spec(dims: int) -> KernelSpec:
    name = f"fft{dims}d"
    shape = "n" if dims == 1 else "n x n"
    return KernelSpec(
        name=name,
        description=f"complex {dims}-D discrete Fourier transform, {shape} points",
        flops=lambda n: 5.0 * n**dims * math.log2(n**dims) if n > 1 else 0.0,
        bytes_moved=lambda n, itemsize: 2.0 * n**dims * 2 * itemsize,
        make_inputs=make_inputs_of(dims),
        reference=reference,
        tolerance=tolerance_of(dims),
        implementations={
            "python": prepare_python_of(dims),
            **array_implementations(prepare_array_module),
            "numpy": prepare_numpy,
            **numba_implementations(prepare_numba_of(dims)),
            "torch": prepare_torch,
            "jax": prepare_jax,
            "numba-cuda": prepare_numba_cuda_of(dims),
        },
        output_dtype=complex_dtype,
        naive_size_limit=2048 if dims == 1 else 64,
    )


SPECS = (_spec(1), _spec(2))

"""Kernel benchmarks: one module per kernel, each declaring a `SPEC` (or `SPECS`).

A kernel declares what it computes and how to judge it, in the spirit of a
ReFrame test: its flop and byte counts as functions of size, an input maker,
a float64 reference, an error measure with its bound, and the backends it implements:
a mapping from each backend's name (accelbench.backends) to its `prepare` function;
the grid excludes the other backends, saying why. `prepare` moves the inputs to the
device and returns a `Prepared` whose `run` computes into a device-resident output
buffer (JAX, whose arrays are never written in place, into a result it keeps there);
transfers stay outside `run` and are timed on their own (`upload`, `download`).
A library's own adapter (torch_prepared, jax_prepared, numba_cuda_prepared) lives in its
backend's module; kernels import it from here with the rest of what a kernel is written with.
"""

from __future__ import annotations

import types
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelbench import registry
from accelbench.backends import BASE_DTYPES, Backend, builtin_half_dtypes, catalogue
from accelbench.backends.arrays import ArrayModule
from accelbench.backends.jax import jax_prepared as jax_prepared
from accelbench.backends.numba_cuda import numba_cuda_prepared
from accelbench.backends.prepared import Prepared
from accelbench.backends.torch import torch_dtype as torch_dtype
from accelbench.backends.torch import torch_from_host as torch_from_host
from accelbench.backends.torch import torch_prepared as torch_prepared
from accelbench.backends.torch import torch_to_host as torch_to_host
from accelbench.dtypes import HALF_DTYPES as HALF_DTYPES
from accelbench.dtypes import host_dtype as host_dtype
from accelbench.measuring import placement
from accelbench.measuring.checking import relative_error as relative_error
from accelbench.platform.devices import Device


def unit_roundoff(dtype: np.dtype) -> float:
    """Machine epsilon of a floating dtype, bfloat16 included."""
    import ml_dtypes

    return float(ml_dtypes.finfo(dtype).eps)


def accumulation_roundoff(dtype: np.dtype) -> float:
    """Epsilon of the type sums are accumulated in: float32 for 16-bit types (as every
    library does), the dtype itself otherwise."""
    return unit_roundoff(np.dtype(np.float32) if dtype.itemsize == 2 else dtype)


Prepare = Callable[[tuple[np.ndarray, ...], Device], Prepared]


@dataclass(frozen=True)
class KernelSpec:
    name: str
    description: str
    flops: Callable[[int], float]  # floating-point operations for problem size n
    bytes_moved: Callable[[int, int], float]  # minimum bytes for size n and item size
    make_inputs: Callable[[np.random.Generator, int, np.dtype], tuple[np.ndarray, ...]]
    reference: Callable[..., np.ndarray]  # float64 NumPy result from the same inputs
    tolerance: Callable[[int, np.dtype], float]  # bound on `error`
    implementations: dict[str, Prepare] = field(default_factory=dict)
    # How a result is compared with the reference, and what the number means.
    error: Callable[[np.ndarray, np.ndarray], float] = relative_error
    error_measure: str = "normwise relative error"
    output_dtype: Callable[[np.dtype], np.dtype] = lambda dtype: dtype
    # backend -> 16-bit dtypes it computes this kernel in (float64/float32 always).
    half_dtypes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    device_kinds: tuple[str, ...] = ("cpu", "cuda")
    device_kinds_reason: str = ""
    naive_size_limit: int = 0  # default largest n for naive Python loops (config overrides)

    def dtypes(self, backend: str) -> tuple[str, ...]:
        """The dtypes `backend` computes this kernel in."""
        return BASE_DTYPES + self.half_dtypes.get(backend, ())


# The 16-bit types the array libraries compute elementwise kernels in.
ELEMENTWISE_HALF_DTYPES = builtin_half_dtypes()


def bind_numba(namespace: MutableMapping[str, types.ModuleType]) -> None:
    """Make `numba` a global of the kernel module whose `globals()` is given, on its first
    compile: Numba resolves `numba.prange` in a jitted loop through the loop's globals.
    Not at import, so that reading the catalogue (every Snakemake process, every job on a
    cluster) costs no Numba import, about a second of CPU."""
    import numba

    namespace["numba"] = numba


def bind_numba_cuda(namespace: MutableMapping[str, types.ModuleType]) -> None:
    """`bind_numba`, and `cuda` (numba.cuda) as a global too: the CUDA simulator swaps the
    module global `cuda` in a kernel's globals for its own, which a local name would miss."""
    bind_numba(namespace)
    from numba import cuda

    namespace["cuda"] = cuda


def jit_loop(parallel: bool, **options) -> Callable[[Callable], Callable]:
    """numba.njit(parallel=..., cache=True) for a loop compiled both serial and parallel.

    Numba keys its on-disk cache by the function's module, qualified name, line
    and bytecode, not by `parallel`: the two variants of one function would load
    each other's machine code, and `numba-parallel` would silently run on one
    thread. Each variant is compiled from a copy of the function named after it.
    """

    def compile_variant(function: Callable) -> Callable:
        variant = types.FunctionType(
            function.__code__,
            function.__globals__,
            function.__name__,
            function.__defaults__,
            function.__closure__,
        )
        variant.__qualname__ = f"{function.__qualname__}_{'parallel' if parallel else 'serial'}"
        import numba

        return numba.njit(parallel=parallel, cache=True, **options)(variant)

    return compile_variant


def kernels() -> dict[str, KernelSpec]:
    """All registered kernels by name: the package's, the user's (accelbench.registry)."""
    return registry.specs("kernels")


def array_implementations(
    array_module: Callable[[ArrayModule, Any], Prepared],
) -> dict[str, Prepare]:
    """Array code written once against the module it is given (`array_module(xp, inputs)`),
    on every backend with an array module (NumPy's, CuPy's, an installed backend's); each
    carries the code's module, which a record names as the code that measured it."""

    def on(backend: Backend) -> Prepare:
        def prepare(inputs, device: Device) -> Prepared:
            return array_module(backend.arrays(), inputs)

        prepare.__module__ = array_module.__module__
        return prepare

    return {name: on(each) for name, each in catalogue().items() if each.array_module}


def numba_implementations(numba_loop: Callable[[Any, bool], Prepared]) -> dict[str, Prepare]:
    """Numba's serial and parallel backends of one loop (`numba_loop(inputs, parallel)`),
    each carrying the loop's module."""

    def numba_serial(inputs, device: Device) -> Prepared:
        return numba_loop(inputs, False)

    def numba_parallel(inputs, device: Device) -> Prepared:
        return numba_loop(inputs, True)

    numba_serial.__module__ = numba_parallel.__module__ = numba_loop.__module__
    return {"numba": numba_serial, "numba-parallel": numba_parallel}


def array_prepared(
    am: ArrayModule,
    host_inputs: tuple[np.ndarray, ...],
    run_into: Callable[..., object],
    out_shape: tuple[int, ...],
    out_dtype: np.dtype,
) -> Prepared:
    """Prepared for array code: inputs on the device, `run_into(*inputs, out)` fills `out`.

    Each device input has its host input's shape (a 0-d scalar stays 0-d), since a
    later `upload` copies the host array in, and CuPy's copy refuses any other shape."""
    inputs = tuple(am.to_device(np.asarray(x, order="C")) for x in host_inputs)
    out = am.allocate(out_shape, out_dtype)
    upload = download = None
    if am.upload is not None:
        host_out = np.empty(out_shape, dtype=out_dtype)

        def upload():
            for device, host in zip(inputs, host_inputs, strict=True):
                am.upload(device, host)

        def download():
            am.download(host_out, out)
            return host_out

    return Prepared(
        run=lambda: run_into(*inputs, out),
        fetch=lambda: am.to_host(out),
        poison=lambda: out.fill(am.xp.nan),
        upload=upload,
        download=download,
    )


def host_prepared(host_inputs, run_into, out_shape, out_dtype) -> Prepared:
    """Prepared for code that runs on host arrays (naive Python, Numba on the CPU): the
    inputs as placed for this run (kernels.measure.check_kernel), the output placed here."""
    inputs = tuple(np.ascontiguousarray(x) for x in host_inputs)
    out = placement.empty(out_shape, out_dtype)
    return Prepared(
        run=lambda: run_into(*inputs, out),
        fetch=lambda: out.copy(),
        poison=lambda: out.fill(np.nan),
    )


def python_prepared(host_inputs, compute, out_shape, out_dtype) -> Prepared:
    """Prepared for naive Python: inputs as Python lists, `compute(*lists)` returns the
    result as (nested) lists or a number, stored into a NumPy output buffer."""
    lists = tuple(np.asarray(x).tolist() for x in host_inputs)
    out = np.empty(out_shape, dtype=out_dtype)

    def run():
        out[...] = compute(*lists)

    return Prepared(run=run, fetch=lambda: out.copy(), poison=lambda: out.fill(np.nan))


THREADS_PER_BLOCK = 256
# Blocks per grid dimension. CUDA allows at most 65535 in y and z; x is capped there too,
# enough blocks to fill any GPU. Every kernel strides over what its grid leaves uncovered,
# so the cap is read at each launch: tests lower it to see each kernel still cover its range.
MAX_GRID_BLOCKS = 65535


def blocks_for(length: int, threads: int) -> int:
    """Blocks of `threads` covering `length` items, at most MAX_GRID_BLOCKS (at least one)."""
    return max(1, min(MAX_GRID_BLOCKS, (length + threads - 1) // threads))


def grid_1d(length: int) -> tuple[int, int]:
    """(blocks, threads per block) for a grid-stride loop over `length` items.

    Short vectors get one short block (fewer idle threads, and far fewer for the
    CUDA simulator to emulate)."""
    threads = max(1, min(THREADS_PER_BLOCK, length))
    return blocks_for(length, threads), threads


def grid_rows(length: int, rows: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(blocks, threads) for kernels over `rows` rows of `length` items: x strides along a
    row, y over the rows."""
    blocks, threads = grid_1d(length)
    return (blocks, min(rows, MAX_GRID_BLOCKS)), (threads, 1)


def grid_2d(columns: int, rows: int, tile: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(blocks, threads) of tile x tile blocks over a rows x columns array: x runs along a
    row (the column index), so neighbouring threads touch neighbouring addresses."""
    return (blocks_for(columns, tile), blocks_for(rows, tile)), (tile, tile)


def numba_cuda_tiled(host_inputs, kernel, out_shape: tuple[int, int], tile: int):
    """Prepared for a 2-D kernel on tile x tile blocks over an output of `out_shape` (rows,
    columns); the kernel strides over the blocks the capped grid leaves uncovered."""
    blocks, threads = grid_2d(out_shape[1], out_shape[0], tile)
    return numba_cuda_prepared(
        host_inputs,
        lambda *arrays: kernel[blocks, threads](*arrays),
        out_shape,
        host_inputs[0].dtype,
    )

"""Kernel benchmarks: one module per kernel, each declaring a `SPEC` (or `SPECS`).

A kernel declares what it computes and how to judge it, in the spirit of a
ReFrame test: its flop and byte counts as functions of size, an input maker,
a float64 reference, an error measure with its bound, and the backends it implements:
a mapping from each backend's name (accelbench.backends) to its `prepare` function;
the grid excludes the other backends, saying why. `prepare` moves the inputs to the
device and returns a `Prepared` whose `run` computes into a device-resident output
buffer (JAX, whose arrays are never written in place, into a result it keeps there);
transfers stay outside `run` and are timed on their own (`upload`, `download`).
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelbench import registry
from accelbench.backends import BASE_DTYPES, Backend, builtin_half_dtypes, catalogue
from accelbench.backends.arrays import ArrayModule
from accelbench.dtypes import HALF_DTYPES as HALF_DTYPES
from accelbench.dtypes import host_dtype
from accelbench.measuring import placement
from accelbench.platform.devices import Device


def unit_roundoff(dtype: np.dtype) -> float:
    """Machine epsilon of a floating dtype, bfloat16 included."""
    import ml_dtypes

    return float(ml_dtypes.finfo(dtype).eps)


def accumulation_roundoff(dtype: np.dtype) -> float:
    """Epsilon of the type sums are accumulated in: float32 for 16-bit types (as every
    library does), the dtype itself otherwise."""
    return unit_roundoff(np.dtype(np.float32) if dtype.itemsize == 2 else dtype)


@dataclass(frozen=True)
class Prepared:
    """A kernel ready to run on one backend: inputs resident, output allocated."""

    run: Callable[[], object]  # compute into the output buffer (no transfer)
    fetch: Callable[[], np.ndarray]  # copy the output to the host, synchronised
    poison: Callable[[], object]  # fill the output with NaN so a no-op cannot pass the check
    # GPU backends: copy the host inputs into the resident device inputs, and the
    # output into a host buffer (returned), so transfer and end-to-end time can be measured.
    upload: Callable[[], object] | None = None
    download: Callable[[], object] | None = None


Prepare = Callable[[tuple[np.ndarray, ...], Device], Prepared]


def relative_error(result: np.ndarray, reference: np.ndarray) -> float:
    """Normwise relative error max|result - reference| / max|reference|; inf on NaN or shape."""
    if result.shape != reference.shape:
        return float("inf")
    if np.iscomplexobj(result) or np.iscomplexobj(reference):
        diff = np.abs(result.astype(np.complex128) - reference)
        scale = float(np.max(np.abs(reference), initial=0.0)) or 1.0
    else:
        # One pass that widens as it subtracts, then in place: the roofs check arrays of
        # tens of millions of elements, where temporaries cost more than the kernel.
        diff = np.subtract(result, reference, dtype=np.float64)
        np.abs(diff, out=diff)
        scale = max(float(np.max(reference, initial=0.0)), -float(np.min(reference, initial=0.0)))
        scale = scale or 1.0
    worst = float(np.max(diff, initial=0.0))  # NaN and inf propagate into the maximum
    return worst / scale if math.isfinite(worst) else float("inf")


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


def bind_numba(namespace: dict[str, Any]) -> None:
    """Make `numba` a global of the kernel module whose `globals()` is given, on its first
    compile: Numba resolves `numba.prange` in a jitted loop through the loop's globals.
    Not at import, so that reading the catalogue (every Snakemake process, every job on a
    cluster) costs no Numba import, about a second of CPU."""
    import numba

    namespace["numba"] = numba


def bind_numba_cuda(namespace: dict[str, Any]) -> None:
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


def torch_dtype(dtype: np.dtype):
    import torch

    return torch.bfloat16 if dtype.name == "bfloat16" else getattr(torch, dtype.name)


def torch_from_host(x: np.ndarray):
    """A CPU tensor sharing `x`'s memory; bfloat16 goes through its 16-bit pattern."""
    import torch

    if x.dtype.name == "bfloat16":
        return torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(x)


def torch_to_host(t) -> np.ndarray:
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(host_dtype("bfloat16")).copy()
    return t.numpy().copy()


def torch_prepared(host_inputs, device: Device, run_into, out_shape, out_dtype) -> Prepared:
    """Prepared for PyTorch code on the CPU or, for a cudaK device, on GPU 0. On the CPU
    the tensors share the inputs as placed for this run (kernels.measure.check_kernel) and an
    output placed here (accelbench.measuring.placement)."""
    import torch

    host = tuple(torch_from_host(np.ascontiguousarray(x)) for x in host_inputs)
    if device.is_gpu:
        inputs = tuple(t.to("cuda:0", copy=True) for t in host)
        out = torch.empty(out_shape, dtype=torch_dtype(np.dtype(out_dtype)), device="cuda:0")
    else:
        inputs = host
        out = torch_from_host(placement.empty(out_shape, out_dtype))
    upload = download = None
    if device.is_gpu:
        host_out = torch.empty(out_shape, dtype=out.dtype)

        def upload():
            for resident, source in zip(inputs, host, strict=True):
                resident.copy_(source)

        def download():
            return host_out.copy_(out)

    return Prepared(
        run=lambda: run_into(*inputs, out),
        fetch=lambda: torch_to_host(out),
        poison=lambda: out.fill_(float("nan")),
        upload=upload,
        download=download,
    )


def jax_prepared(host_inputs, device: Device, compute: Callable[..., Any]) -> Prepared:
    """Prepared for JAX code: `compute(*inputs)` returns the result (a JAX array is never
    written in place), compiled by jax.jit, on the CPU or, for a cudaK device, on GPU 0.

    The inputs are put on the device once, here. Each run keeps its result on the device
    and waits for it: JAX dispatches asynchronously, so a call that returned may not have
    computed yet (accelbench.backends.jax). `poison` replaces the result with NaN. On a GPU,
    `upload` puts fresh copies of the host inputs there and `download` copies the result
    to JAX's CPU device: a JAX array keeps the host copy it was first read into, so reading
    it again would copy nothing.
    """
    from accelbench.backends import jax as jax_backend

    jax = jax_backend.started(None if device.is_gpu else device.count)
    target = jax.devices("cuda" if device.is_gpu else "cpu")[0]
    host = tuple(np.ascontiguousarray(x) for x in host_inputs)
    inputs = [jax.device_put(x, target) for x in host]
    function = jax.jit(compute)
    shape = jax.eval_shape(function, *inputs)
    held = []

    def run():
        held[:] = [function(*inputs).block_until_ready()]

    def poison():
        held[:] = [jax.device_put(np.full(shape.shape, np.nan, shape.dtype), target)]

    upload = download = None
    if device.is_gpu:
        cpu = jax.devices("cpu")[0]

        def upload():
            inputs[:] = [jax.device_put(x, target) for x in host]
            jax.block_until_ready(inputs)

        def download():
            return jax.device_put(held[0], cpu).block_until_ready()

    poison()
    return Prepared(
        run=run,
        fetch=lambda: np.array(held[0]),
        poison=poison,
        upload=upload,
        download=download,
    )


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


def numba_cuda_prepared(host_inputs, launch, out_shape, out_dtype) -> Prepared:
    """Prepared for Numba CUDA kernels: `launch(*device_inputs, out)` starts the kernel(s)."""
    from numba import cuda

    host = tuple(np.ascontiguousarray(x) for x in host_inputs)
    inputs = tuple(cuda.to_device(x) for x in host)
    out = cuda.device_array(out_shape, dtype=out_dtype)
    nan_block = np.full(out_shape, np.nan, dtype=out_dtype)
    host_out = np.empty(out_shape, dtype=out_dtype)

    def upload():
        for resident, source in zip(inputs, host, strict=True):
            resident.copy_to_device(source)

    return Prepared(
        run=lambda: launch(*inputs, out),
        fetch=lambda: out.copy_to_host(),
        poison=lambda: out.copy_to_device(nan_block),
        upload=upload,
        download=lambda: out.copy_to_host(host_out),
    )

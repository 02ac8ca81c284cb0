"""The STREAM kernels (McCalpin) and a read: the memory-bandwidth roof of a device.

copy c = a, scale c = s*a, add c = a + b, triad c = a + s*b, each over arrays
far larger than the last-level cache, counted as STREAM counts them: the words
read plus the words written (2, 2, 3 and 3 per element; no write-allocate
traffic). The four all write an array, and a CPU reads each written line
before it writes it, so they move a third to a half more than they count; a
kernel that only reads (a sum, a reduction) runs faster than any of them.
`read`, s = sum(a) (1 word per element), is the fifth kernel, so that the
roof bounds read-only kernels too. Every implementation uses all the threads
the device has: Numba `prange` loops and PyTorch's intra-op threads on a CPU,
CuPy and PyTorch on a GPU. The roof is the best of them. In 16 bits the candidates
are the backends that compute elementwise in 16 bits (PyTorch; CuPy in float16):
Numba has no 16-bit arithmetic on the CPU. NumPy, which runs one
thread, is not a candidate: a roof that one thread can reach is not the
machine's.

They are KernelSpecs like the grid's kernels, so they are checked against the
float64 reference and timed by the same code, but they are not grid kernels:
only roofs.py measures them.
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
    host_prepared,
    torch_prepared,
    unit_roundoff,
)
from accelbench.kernels.reduction import tolerance as sum_tolerance
from accelbench.platform.devices import Device

if TYPE_CHECKING:  # bound on the first compile: kernels.bind_numba
    import numba

# op -> (arrays read, arrays written, flops per element)
OPS = {
    "copy": (1, 1, 0),
    "scale": (1, 1, 1),
    "add": (2, 1, 1),
    "triad": (2, 1, 2),
    "read": (1, 0, 1),
}
BACKENDS = ("torch", "numba-parallel", "cupy")


def _inputs(op: str):
    reads, _, _ = OPS[op]

    def make_inputs(rng: np.random.Generator, n: int, dtype: np.dtype):
        scalar = np.asarray(rng.uniform(0.5, 2.0)).astype(dtype).reshape(1)
        arrays = tuple(rng.uniform(0.5, 1.5, n).astype(dtype) for _ in range(reads))
        return (scalar, *arrays)

    return make_inputs


def _reference(op: str):
    def reference(s, a, b=None):
        s, a = float(s[0]), a.astype(np.float64)
        if op == "copy":
            return a.copy()
        if op == "read":
            return a.sum(keepdims=True)
        if op == "scale":
            return s * a
        b = b.astype(np.float64)
        return a + b if op == "add" else a + s * b

    return reference


def _array_code(op: str, xp):
    """c = op(...) in NumPy/CuPy with `out=`, so no temporary array is made."""

    def run(s, a, *rest):
        out = rest[-1]
        if op == "copy":
            xp.copyto(out, a)
        elif op == "read":
            xp.sum(a, keepdims=True, dtype=out.dtype, out=out)
        elif op == "scale":
            xp.multiply(a, s[0], out=out)
        elif op == "add":
            xp.add(a, rest[0], out=out)
        else:  # triad, in two passes: NumPy and CuPy have no fused multiply-add into out
            xp.multiply(rest[0], s[0], out=out)
            xp.add(out, a, out=out)

    return run


def _torch_code(op: str, alpha: float):
    """c = op(...) with `out=`; the triad fused in one pass (torch.add's alpha)."""
    import torch

    def run(s, a, *rest):
        out = rest[-1]
        if op == "copy":
            out.copy_(a)
        elif op == "read":
            torch.sum(a, 0, keepdim=True, dtype=out.dtype, out=out)
        elif op == "scale":
            torch.mul(a, s[0], out=out)
        elif op == "add":
            torch.add(a, rest[0], out=out)
        else:
            torch.add(a, rest[0], alpha=alpha, out=out)

    return run


@cache
def _numba_loop(op: str):
    bind_numba(globals())
    if op == "copy":

        @numba.njit(parallel=True, cache=True)
        def copy(s, a, c):
            for i in numba.prange(a.size):
                c[i] = a[i]

        return copy
    if op == "read":
        # Reassociation lets LLVM keep partial sums in vector lanes, as the reduction
        # kernel does; a strict sum waits on one add at a time and never reaches memory speed.
        @numba.njit(parallel=True, cache=True, fastmath={"reassoc", "nsz"})
        def read(s, a, c):
            total = a[0] - a[0]  # zero of the input's type
            for i in numba.prange(a.size):
                total += a[i]
            c[0] = total

        return read
    if op == "scale":

        @numba.njit(parallel=True, cache=True)
        def scale(s, a, c):
            factor = s[0]
            for i in numba.prange(a.size):
                c[i] = factor * a[i]

        return scale
    if op == "add":

        @numba.njit(parallel=True, cache=True)
        def add(s, a, b, c):
            for i in numba.prange(a.size):
                c[i] = a[i] + b[i]

        return add

    @numba.njit(parallel=True, cache=True)
    def triad(s, a, b, c):
        factor = s[0]
        for i in numba.prange(a.size):
            c[i] = a[i] + factor * b[i]

    return triad


def _implementations(op: str):
    def array_version(am: ArrayModule, inputs) -> Prepared:
        return array_prepared(
            am, inputs, _array_code(op, am.xp), out_shape(op, inputs), out_dtype(op, inputs)
        )

    def torch_version(inputs, device: Device) -> Prepared:
        code = _torch_code(op, float(inputs[0][0]))
        return torch_prepared(inputs, device, code, out_shape(op, inputs), out_dtype(op, inputs))

    def numba_version(inputs, device: Device) -> Prepared:
        return host_prepared(inputs, _numba_loop(op), out_shape(op, inputs), out_dtype(op, inputs))

    return {
        **array_implementations(array_version),
        "torch": torch_version,
        "numba-parallel": numba_version,
    }


def out_shape(op: str, inputs) -> tuple[int, ...]:
    """The read's sum is one value; the other kernels write an array like their input."""
    return (1,) if op == "read" else inputs[1].shape


def output_dtype(op: str, dtype: np.dtype) -> np.dtype:
    """The read sums 16-bit arrays into float32, as the libraries accumulate them: n values
    near 1 overflow float16 beyond n = 65504, and the bandwidth counts only the reads."""
    return np.dtype(np.float32) if op == "read" and dtype.itemsize == 2 else dtype


def out_dtype(op: str, inputs) -> np.dtype:
    return output_dtype(op, inputs[1].dtype)


def _spec(op: str) -> KernelSpec:
    reads, writes, flops_per_element = OPS[op]
    return KernelSpec(
        name=f"stream-{op}",
        description=f"STREAM {op} over arrays beyond the last-level cache",
        flops=lambda n: float(flops_per_element * n),
        bytes_moved=lambda n, itemsize: float((reads + writes) * n * itemsize),
        make_inputs=_inputs(op),
        reference=_reference(op),
        # A sum's roundoff grows with n (the reduction kernel's bound); the rest round once.
        tolerance=sum_tolerance if op == "read" else lambda n, dtype: 2.0 * unit_roundoff(dtype),
        output_dtype=lambda dtype: output_dtype(op, dtype),
        implementations=_implementations(op),
        # Bandwidth in the dtype of the roof, where a backend moves 16-bit arrays (on a
        # GPU the 16-bit roof bounds tensor-core GEMMs and 16-bit memory-bound kernels).
        half_dtypes=ELEMENTWISE_HALF_DTYPES,
    )


SPECS = {f"stream-{op}": _spec(op) for op in OPS}

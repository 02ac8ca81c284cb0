"""Where a run's host arrays start in memory: at a cache-line offset within a page drawn
for each run, so that a measurement's runs meet as many placements as separate
processes would.

The same kernel on the same data can run twice as fast in one process as in another
because of where its arrays happen to start (Numba's matmul, float32, n=128, one
thread: 99 us with its two inputs 1088 bytes apart within a page, 205 us with them 0 or
448 bytes apart): when two access streams agree in their low 12 address bits, the
core's loads wait on stores they only seem to depend on (4K aliasing), and where the
page boundaries fall decides the TLB's share. A forked run inherits its parent's heap,
so every run of a measurement used to get the parent's placement, the runs agreed to
0.1%, and an independent rerun (another process, another placement) landed 77% away,
outside the interval. Drawing the placement per run puts that spread inside the
measurement, where the rerun interval sees it: the "measurement bias" of Mytkowicz et
al. (ASPLOS 2009), randomised as Stabilizer does (Curtsinger and Berger, ASPLOS 2013).

Only the arrays a kernel is handed and writes into are placed; what a library
allocates inside a call (a BLAS's packing buffers, NumPy's temporaries) stays its own.
"""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np

CACHE_LINE = 64  # bytes: every offset keeps AVX-512 loads aligned
PAGE = 4096  # bytes: the span the low address bits that alias cover


def offset() -> int:
    """A fresh offset within a page, in whole cache lines (from the OS's entropy, so that
    runs forked from one parent draw their own)."""
    return CACHE_LINE * secrets.randbelow(PAGE // CACHE_LINE)


def empty(shape: tuple[int, ...] | int, dtype: Any) -> np.ndarray:
    """An uninitialised C-ordered array that starts `offset()` bytes into a page."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    block = np.empty(nbytes + 2 * PAGE, dtype=np.uint8)
    start = -block.ctypes.data % PAGE + offset()
    return block[start : start + nbytes].view(dtype).reshape(shape)


def copy(x: Any) -> Any:
    """`x` copied into a freshly placed array (anything but a NumPy array as it is)."""
    if not isinstance(x, np.ndarray):
        return x
    placed = empty(x.shape, x.dtype)
    placed[...] = x
    return placed

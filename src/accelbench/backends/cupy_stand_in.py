"""NumPy playing CuPy: the test double that runs CuPy's code path on a machine without CuPy.

`accelbench check` and the tests run a kernel's CuPy code on NUMPY_AS_DEVICE, whose copies
in and out refuse what CuPy's refuse, so the transfer path of GPU array code runs here as
strictly as on a GPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from accelbench.backends.arrays import ArrayModule


def cupy_set(device: np.ndarray, host: Any) -> None:
    """`device.set(host)` by CuPy's rules (cupy/_core/core.pyx, `ndarray.set`): a NumPy
    array of the device array's dtype and shape exactly, into a contiguous device array.
    np.copyto would broadcast and cast where CuPy raises; these raise what CuPy raises."""
    if not isinstance(host, np.ndarray):
        raise TypeError("Only numpy.ndarray can be set to cupy.ndarray")
    if device.dtype != host.dtype:
        raise TypeError(f"{host.dtype} array cannot be set to {device.dtype} array")
    if device.shape != host.shape:
        raise ValueError(f"Shape mismatch. Old shape: {device.shape}, new shape: {host.shape}")
    if not (device.flags.c_contiguous or device.flags.f_contiguous):
        raise RuntimeError("Cannot set to non-contiguous array")
    np.copyto(device, host)


def cupy_get(host: Any, device: np.ndarray) -> np.ndarray:
    """`device.get(out=host)` by CuPy's rules (`ndarray.get`): `out` a NumPy array of the
    device array's dtype and shape exactly, C- or Fortran-contiguous; returns `out`."""
    if not isinstance(host, np.ndarray):
        raise TypeError("Only numpy.ndarray can be obtained from cupy.ndarray")
    if device.dtype != host.dtype:
        raise TypeError(f"{host.dtype} array cannot be obtained from {device.dtype} array")
    if device.shape != host.shape:
        raise ValueError(
            f"Shape mismatch. Expected shape: {device.shape}, actual shape: {host.shape}"
        )
    if not (host.flags.c_contiguous or host.flags.f_contiguous):
        raise RuntimeError("`out` cannot be specified when copying to non-contiguous ndarray")
    np.copyto(host, device)
    return host


NUMPY_AS_DEVICE = ArrayModule(np, np.array, np.array, cupy_set, cupy_get)

# The array module CuPy's code path gets while numpy_playing_cupy holds (None: CuPy's own).
_standing_in: ArrayModule | None = None


def current() -> ArrayModule | None:
    """NUMPY_AS_DEVICE while numpy_playing_cupy holds, else None."""
    return _standing_in


@contextlib.contextmanager
def numpy_playing_cupy() -> Iterator[None]:
    """Within the block, the CuPy backend's array module is NUMPY_AS_DEVICE."""
    global _standing_in
    _standing_in = NUMPY_AS_DEVICE
    try:
        yield
    finally:
        _standing_in = None

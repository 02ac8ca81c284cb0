"""How array code reaches its device: the array adapter a backend hands to code written
once against the array module it is given (NumPy on the host, CuPy on a GPU)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelbench.measuring import placement


@dataclass(frozen=True)
class ArrayModule:
    """How array code reaches its device: NumPy on the host, CuPy on a GPU.

    `upload(device_array, host_array)` and `download(host_array, device_array)`
    copy into existing buffers; they are None where device and host are one memory.
    `pinned_empty(shape, dtype)` allocates page-locked host memory; `empty(shape, dtype)`
    allocates on the device (None: the module's own `xp.empty`).
    """

    xp: Any
    to_device: Callable[[np.ndarray], Any]
    to_host: Callable[[Any], np.ndarray]
    upload: Callable[[Any, np.ndarray], object] | None = None
    download: Callable[[np.ndarray, Any], object] | None = None
    pinned_empty: Callable[[tuple[int, ...], np.dtype], np.ndarray] = np.empty
    empty: Callable[[tuple[int, ...], np.dtype], Any] | None = None

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return (self.empty or self.xp.empty)(shape, dtype=dtype)


# On the host, each run places its arrays afresh (accelbench.measuring.placement).
NUMPY = ArrayModule(np, placement.copy, np.array, empty=placement.empty)

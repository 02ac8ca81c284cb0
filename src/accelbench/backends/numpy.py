"""NumPy on the host: array code written once, run with NumPy as its array module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.backends.base import Backend
from accelbench.measuring import timers
from accelbench.platform.devices import Device

if TYPE_CHECKING:
    from accelbench.backends.arrays import ArrayModule


def _numpy_arrays() -> ArrayModule:
    """NumPy's array module, imported when arrays are made (planning a grid needs none)."""
    from accelbench.backends.arrays import NUMPY

    return NUMPY


def always_available(device: Device, dtype: str | None) -> None:
    """A backend of the default requirements, on the host: nothing to miss."""
    return None


SPEC = Backend(
    "numpy",
    ("cpu",),
    timers.TORCH,
    always_available,
    half_dtypes=("float16",),
    array_module=_numpy_arrays,
    distributions=("numpy",),
)

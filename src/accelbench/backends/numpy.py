"""NumPy on the host: array code written once, run with NumPy as its array module."""

from __future__ import annotations

from accelbench.backends.arrays import NUMPY
from accelbench.backends.base import Backend
from accelbench.measuring import timers
from accelbench.platform.devices import Device


def always_available(device: Device, dtype: str | None) -> None:
    """A backend of the default requirements, on the host: nothing to miss."""
    return None


SPEC = Backend(
    "numpy",
    ("cpu",),
    timers.TORCH,
    always_available,
    half_dtypes=("float16",),
    array_module=lambda: NUMPY,
)

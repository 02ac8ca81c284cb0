"""Numba on the CPU: one loop compiled serial (`numba`) and parallel (`numba-parallel`)."""

from __future__ import annotations

from accelbench.backends.base import Backend
from accelbench.measuring import timers
from accelbench.platform.devices import Device


def _numba_reason(device: Device, dtype: str | None) -> str | None:
    try:
        import numba  # noqa: F401
    except ImportError as err:
        return f"Numba is not installed ({err})"
    return None


def numba_compiler() -> None:
    """Have Numba load its CPU target (its typing and lowering registries import NumPy's
    linear algebra and SciPy: half a second at the first compile or cache load of a
    process) by compiling a trivial function; compiling starts no thread pool."""
    import numba

    numba.njit(lambda value: value + 1)(1)


SPECS = tuple(
    Backend(
        name,
        ("cpu",),
        timers.TORCH,
        _numba_reason,
        compiles=True,
        preload=numba_compiler,
        distributions=("numba",),
    )
    for name in ("numba", "numba-parallel")
)

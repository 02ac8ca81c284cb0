"""CuPy on CUDA GPUs: the array code NumPy runs on the host, with CuPy as its array module.

Without CuPy, its code path runs on NumPy standing in (accelbench.backends.cupy_stand_in).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from accelbench.backends.base import Backend, CheckRun
from accelbench.measuring import timers
from accelbench.platform import doctor
from accelbench.platform.devices import Device

if TYPE_CHECKING:
    from accelbench.backends.arrays import ArrayModule


def _cupy_reason(device: Device, dtype: str | None) -> str | None:
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed (No module named 'cupy')"
    return doctor.backend_problem("cupy", range(device.count), dtype)


def synchronizer() -> Callable[[], None]:
    """CuPy's wait for its device (also the RAPIDS libraries', which share its stream)."""
    import cupy

    return cupy.cuda.runtime.deviceSynchronize


def array_module() -> ArrayModule:
    """CuPy's array module, or NumPy's standing in while numpy_playing_cupy holds."""
    from accelbench.backends import cupy_stand_in
    from accelbench.backends.arrays import ArrayModule

    if (stand_in := cupy_stand_in.current()) is not None:
        return stand_in
    import cupy
    import cupyx

    return ArrayModule(
        cupy,
        cupy.asarray,
        cupy.asnumpy,
        lambda device, host: device.set(host),
        lambda host, device: device.get(out=host),
        cupyx.empty_pinned,
    )


def _import_cupy() -> None:
    """Import CuPy and its timer where it is installed (0.2 s a run; asks the driver nothing)."""
    if importlib.util.find_spec("cupy"):
        import cupy  # noqa: F401
        import cupyx.profiler  # noqa: F401


@contextmanager
def _numpy_standing_in() -> Iterator[None]:
    """cupy_stand_in.numpy_playing_cupy, imported when `accelbench check` runs it."""
    from accelbench.backends import cupy_stand_in

    with cupy_stand_in.numpy_playing_cupy():
        yield


def _free_pools() -> None:
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    cupy.get_default_pinned_memory_pool().free_all_blocks()


SPEC = Backend(
    "cupy",
    ("cuda",),
    timers.CUPY,
    _cupy_reason,
    half_dtypes=("float16",),
    device_synchronizer=synchronizer,
    array_module=array_module,
    preload=_import_cupy,
    release_cached_memory=_free_pools,
    distributions=("cupy-cuda12x", "cupy-cuda13x"),
    probe=doctor.probe_cupy,
    check_runs=(
        CheckRun(
            "cupy (NumPy standing in for CuPy)",
            "cuda1",
            stand_in=_numpy_standing_in,
        ),
    ),
)

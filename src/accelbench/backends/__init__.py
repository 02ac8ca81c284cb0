"""Backends: the libraries a kernel is written in, one module each (accelbench.backends.base).

The catalogue holds the package's backends, in the order of BUILTIN (each module declares
`SPEC`, or `SPECS` where one module declares closely related backends, as Numba's serial
and parallel loops), then those of installed packages: entry points of the group
`accelbench.backends`, each naming a module that declares backends, or a Backend itself.
It is made once per process, when first asked for. A backend whose name another has
taken is refused naming both; an unknown name is refused naming the known ones, so no
measurement falls back to another backend's timer or synchronisation.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING

from accelbench import registry
from accelbench.backends.base import BASE_DTYPES, Backend, BackendError, CheckRun

if TYPE_CHECKING:
    from accelbench.platform.doctor import Probe

__all__ = [
    "BASE_DTYPES",
    "Backend",
    "BackendError",
    "CheckRun",
    "catalogue",
    "distributions",
    "named",
    "probes",
]

GROUP = "accelbench.backends"
# The package's backend modules, in the order the catalogue lists them.
BUILTIN = ("numpy", "numba", "torch", "cupy", "numba_cuda", "python", "jax")


@functools.cache
def catalogue() -> dict[str, Backend]:
    """name -> Backend: the package's, then the entry points'."""
    found: dict[str, Backend] = {}
    origins: dict[str, str] = {}
    for declared, origin in _discovered():
        if declared.name in found:
            raise registry.PluginError(
                f"backend {declared.name!r} is declared twice: by {origins[declared.name]} "
                f"and by {origin}; a result path names a backend by its name alone"
            )
        found[declared.name], origins[declared.name] = declared, origin
    return found


def named(name: str) -> Backend:
    """The backend called `name`; BackendError naming the known ones where none is."""
    known = catalogue()
    if name not in known:
        raise BackendError(f"unknown backend {name!r}; the known backends: {', '.join(known)}")
    return known[name]


def distributions() -> tuple[str, ...]:
    """The distributions whose versions are the backends' (the catalogue's, then the data
    science libraries'), each once: the libraries a record's provenance names."""
    from accelbench.backends.libraries import DATASCI_BACKENDS

    declared = (*catalogue().values(), *DATASCI_BACKENDS.values())
    return tuple(dict.fromkeys(name for each in declared for name in each.distributions))


def probes() -> dict[str, Probe]:
    """backend -> how `accelbench doctor` inspects its GPU stack, for the catalogue's
    backends that have one, installed ones included."""
    return {name: each.probe for name, each in catalogue().items() if each.probe is not None}


def builtin_half_dtypes() -> dict[str, tuple[str, ...]]:
    """backend -> the 16-bit types it computes elementwise kernels in, for the package's
    backends that compute in any (what a built-in elementwise kernel declares)."""
    declared = (_declared(importlib.import_module(f"{__name__}.{name}")) for name in BUILTIN)
    return {each.name: each.half_dtypes for found in declared for each in found if each.half_dtypes}


def _discovered() -> Iterator[tuple[Backend, str]]:
    for name in BUILTIN:
        module = importlib.import_module(f"{__name__}.{name}")
        yield from ((each, module.__file__) for each in _declared(module))
    points = importlib.metadata.entry_points(group=GROUP)
    for point in sorted(points, key=lambda point: (point.name, point.value)):
        dist = f" of {point.dist.name} {point.dist.version}" if point.dist else ""
        origin = f"entry point {point.name} = {point.value}{dist}"
        try:
            loaded = point.load()
        except Exception as err:
            raise registry.PluginError(
                f"{origin}: cannot be loaded: {type(err).__name__}: {err}"
            ) from err
        found = _declared(loaded) if isinstance(loaded, ModuleType) else [loaded]
        for each in found:
            if not isinstance(each, Backend):
                raise registry.PluginError(
                    f"{origin}: declares a {type(each).__name__}, not an "
                    "accelbench.backends.Backend"
                )
            yield each, origin


def _declared(module: ModuleType) -> list:
    """What a module declares: SPECS, then SPEC."""
    single = getattr(module, "SPEC", None)
    return [*getattr(module, "SPECS", ()), *([single] if single is not None else [])]

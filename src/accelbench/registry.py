"""Plug-in discovery: each module in a package declares one benchmark unit.

Kernels and models are found by scanning their package, so adding one is one
new module and no edits elsewhere. A module opts in by defining `SPEC`.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from types import ModuleType
from typing import Any


@cache
def discover(package_name: str) -> dict[str, Any]:
    """Map name -> SPEC for every module of `package_name` that defines SPEC."""
    package: ModuleType = importlib.import_module(package_name)
    specs: dict[str, Any] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package_name}.{info.name}")
        spec = getattr(module, "SPEC", None)
        if spec is not None:
            if spec.name in specs:
                raise RuntimeError(f"{package_name}: two modules declare {spec.name!r}")
            specs[spec.name] = spec
    return dict(sorted(specs.items()))

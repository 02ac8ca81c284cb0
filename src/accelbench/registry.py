"""Plug-in discovery: each module in a package declares one benchmark unit.

Kernels are found by scanning their package, so adding one is one new module
and no edits elsewhere. A module opts in by defining `SPEC`, or
`SPECS` when it declares a family of closely related units (e.g. the
transfer directions) that share their code.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from types import ModuleType
from typing import Any


@cache
def discover(package_name: str) -> dict[str, Any]:
    """Map name -> spec for every SPEC (and each of SPECS) in the modules of `package_name`."""
    package: ModuleType = importlib.import_module(package_name)
    specs: dict[str, Any] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package_name}.{info.name}")
        single = getattr(module, "SPEC", None)
        for spec in (*getattr(module, "SPECS", ()), *([single] if single is not None else [])):
            if spec.name in specs:
                raise RuntimeError(f"{package_name}: two modules declare {spec.name!r}")
            specs[spec.name] = spec
    return dict(sorted(specs.items()))

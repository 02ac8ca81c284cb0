"""Kernel benchmarks: one module per kernel, each declaring a `SPEC`.

A kernel declares what it computes and how to judge it, in the spirit of a
ReFrame test: its flop and byte counts as functions of size, an input maker,
a float64 reference, an error bound, and one `prepare` function per backend.
`prepare` moves the inputs to the device and returns a `Prepared` whose `run`
computes into a device-resident output buffer; transfers stay outside `run`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from accelbench.devices import Device
from accelbench.registry import discover


@dataclass(frozen=True)
class Prepared:
    """A kernel ready to run on one backend: inputs resident, output allocated."""

    run: Callable[[], object]  # compute into the output buffer (no transfer)
    fetch: Callable[[], np.ndarray]  # copy the output to the host, synchronised
    poison: Callable[[], object]  # fill the output with NaN so a no-op cannot pass the check


Prepare = Callable[[tuple[np.ndarray, ...], Device], Prepared]


@dataclass(frozen=True)
class KernelSpec:
    name: str
    description: str
    flops: Callable[[int], float]  # floating-point operations for problem size n
    bytes_moved: Callable[[int, int], float]  # minimum bytes for size n and item size
    make_inputs: Callable[[np.random.Generator, int, np.dtype], tuple[np.ndarray, ...]]
    reference: Callable[..., np.ndarray]  # float64 NumPy result from the same inputs
    tolerance: Callable[[int, np.dtype], float]  # bound on the normwise relative error
    implementations: dict[str, Prepare] = field(default_factory=dict)


def kernels() -> dict[str, KernelSpec]:
    """All registered kernels by name."""
    return discover(__name__)


def relative_error(result: np.ndarray, reference: np.ndarray) -> float:
    """Normwise relative error max|result - reference| / max|reference|; inf on NaN or shape."""
    if result.shape != reference.shape:
        return float("inf")
    diff = np.abs(result.astype(np.float64) - reference)
    if not np.all(np.isfinite(diff)):
        return float("inf")
    scale = float(np.max(np.abs(reference))) or 1.0
    return float(np.max(diff)) / scale

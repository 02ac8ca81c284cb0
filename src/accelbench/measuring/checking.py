"""Whether a prepared call computes the right thing: its result against a float64 reference.

Shared by every family that measures a prepared call (kernels, roofs, data science
workloads) and by `accelbench check`: the check runs before the timing and again after
it, so that the timed code is known to compute what it claims, in the type it was asked.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from accelbench.measuring.sections import CheckSection

if TYPE_CHECKING:
    from accelbench.backends.prepared import Prepared


def relative_error(result: np.ndarray, reference: np.ndarray) -> float:
    """Normwise relative error max|result - reference| / max|reference|; inf on NaN or shape."""
    if result.shape != reference.shape:
        return float("inf")
    if np.iscomplexobj(result) or np.iscomplexobj(reference):
        diff = np.abs(result.astype(np.complex128) - reference)
        scale = float(np.max(np.abs(reference), initial=0.0)) or 1.0
    else:
        # One pass that widens as it subtracts, then in place: the roofs check arrays of
        # tens of millions of elements, where temporaries cost more than the kernel.
        diff = np.subtract(result, reference, dtype=np.float64)
        np.abs(diff, out=diff)
        scale = max(float(np.max(reference, initial=0.0)), -float(np.min(reference, initial=0.0)))
        scale = scale or 1.0
    worst = float(np.max(diff, initial=0.0))  # NaN and inf propagate into the maximum
    return worst / scale if math.isfinite(worst) else float("inf")


def check_against_reference(
    prepared: Prepared,
    reference: np.ndarray,
    tolerance: float,
    error=relative_error,
    measure: str = "normwise relative error",
    reference_name: str = "numpy float64",
    dtype: np.dtype | None = None,
) -> CheckSection:
    """Poison the output, run once, compare with the reference (a kernel's: float64 NumPy).

    A result in another dtype than `dtype` (where given) fails whatever its error: a
    kernel asked for float32 that computes in float64 would pass the check and time the
    wrong arithmetic.
    """
    prepared.poison()
    prepared.run()
    result = prepared.fetch()
    found = error(result, reference)
    check: CheckSection = {
        "passed": found <= tolerance,
        "relative_error": found,
        "tolerance": tolerance,
        "measure": measure,
        "reference": reference_name,
    }
    if dtype is not None and np.asarray(result).dtype != dtype:
        check.update(passed=False, output_dtype=str(np.asarray(result).dtype), dtype=str(dtype))
    return check


def mismatch(check: CheckSection) -> str:
    """Why a check failed, in one line."""
    if "output_dtype" in check:
        return f"result in {check['output_dtype']}, not in {check['dtype']} as asked"
    reference = "float64" if check["reference"] == "numpy float64" else check["reference"]
    return (
        f"result differs from the {reference} reference: {check['measure']} "
        f"{check['relative_error']:.3g} > tolerance {check['tolerance']:.3g}"
    )

"""The dtypes a kernel computes in, declared once: the grid's choices, the config schema's
enum, the backends' common types and the 16-bit ones all derive from this module.

It imports nothing at module level: a grid is planned without NumPy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# Every dtype a kernel cell may name, widest first (the config schema's kernel_dtypes).
DTYPES = ("float64", "float32", "float16", "bfloat16")
# The 16-bit types: a kernel computes in them only where its backend's library does
# (Backend.half_dtypes, KernelSpec.half_dtypes); the tensor cores' types on a GPU.
HALF_DTYPES = ("float16", "bfloat16")
# What every backend computes in.
BASE_DTYPES = tuple(name for name in DTYPES if name not in HALF_DTYPES)


def host_dtype(name: str) -> np.dtype:
    """The NumPy dtype of a dtype name; bfloat16 comes from ml_dtypes (NumPy has none)."""
    import numpy as np

    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)

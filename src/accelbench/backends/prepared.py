"""What a backend's adapter hands a measurement: code ready to run on the backend's device.

Each backend module makes these for the code written in its library (torch_prepared,
jax_prepared, numba_cuda_prepared); accelbench.kernels declares what the code computes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # NumPy is imported where arrays are made, not where a grid is planned
    import numpy as np


@dataclass(frozen=True)
class Prepared:
    """A kernel ready to run on one backend: inputs resident, output allocated."""

    run: Callable[[], object]  # compute into the output buffer (no transfer)
    fetch: Callable[[], np.ndarray]  # copy the output to the host, synchronised
    poison: Callable[[], object]  # fill the output with NaN so a no-op cannot pass the check
    # GPU backends: copy the host inputs into the resident device inputs, and the
    # output into a host buffer (returned), so transfer and end-to-end time can be measured.
    upload: Callable[[], object] | None = None
    download: Callable[[], object] | None = None

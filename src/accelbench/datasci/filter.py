"""Filter and arithmetic: the rows with x > 0.5 and y < 0.5, and x * y + z on them.

The kept rows must be pandas' exactly. The values are in [0, 1), so x * y + z
has no cancellation: its relative error is at most 2u in float64 (one rounding
fewer where a GPU fuses the multiply and add), and the check allows 4u.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accelbench.datasci import (
    WorkloadSpec,
    cudf_library,
    frame_error,
    implementations,
    pandas_library,
)


def make_inputs(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame]:
    values = rng.uniform(0, 1, (3, n))
    return (pd.DataFrame({"id": np.arange(n), "x": values[0], "y": values[1], "z": values[2]}),)


def compute(df, frame):
    kept = frame[(frame["x"] > 0.5) & (frame["y"] < 0.5)]
    return kept.assign(w=kept["x"] * kept["y"] + kept["z"])


def reference(frame: pd.DataFrame) -> pd.DataFrame:
    return compute(pd, frame)


SPEC = WorkloadSpec(
    name="filter",
    description="filter of n rows on two conditions, then x * y + z",
    item="rows",
    make_inputs=make_inputs,
    reference=reference,
    error=frame_error(by="id"),
    tolerance=lambda n: 4 * float(np.finfo(np.float64).eps),
    error_measure="normwise relative error of the float columns; rows identical to pandas",
    reference_name="pandas",
    implementations=implementations(
        ("pandas", pandas_library, compute), ("cudf", cudf_library, compute)
    ),
)

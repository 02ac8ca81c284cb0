"""Sort of n rows by an integer key, ties broken by a float column.

The float values are distinct (drawn at random), so the sorted order is unique
and must equal pandas' exactly, the row id moving with its row.
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
    return (
        pd.DataFrame(
            {"id": np.arange(n), "key": rng.integers(0, 1000, n), "x": rng.uniform(0, 1, n)}
        ),
    )


def compute(df, frame):
    return frame.sort_values(["key", "x"]).reset_index(drop=True)


def reference(frame: pd.DataFrame) -> pd.DataFrame:
    return compute(pd, frame)


SPEC = WorkloadSpec(
    name="sort",
    description="sort of n rows by an integer key and a float column",
    item="rows",
    make_inputs=make_inputs,
    reference=reference,
    error=frame_error(),
    tolerance=lambda n: 0.0,
    error_measure="identical to pandas, row order included (0: equal; inf: any value differs)",
    reference_name="pandas",
    implementations=implementations(
        ("pandas", pandas_library, compute), ("cudf", cudf_library, compute)
    ),
)

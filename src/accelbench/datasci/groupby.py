"""Group-by aggregation: sum, maximum and count of two integer columns per key.

n rows, n/100 keys. The values are integers, so the aggregation has one right
answer whatever order a library sums in: the result must equal pandas' exactly.
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
    keys = max(1, n // 100)
    return (
        pd.DataFrame(
            {
                "key": rng.integers(0, keys, n),
                "a": rng.integers(0, 1000, n),
                "b": rng.integers(-1000, 1000, n),
            }
        ),
    )


def compute(df, frame):
    grouped = frame.groupby("key", sort=True).agg({"a": ["sum", "count"], "b": "max"})
    grouped.columns = ["a_sum", "rows", "b_max"]
    return grouped.reset_index()


def reference(frame: pd.DataFrame) -> pd.DataFrame:
    return compute(pd, frame)


SPEC = WorkloadSpec(
    name="groupby",
    description="group-by of n rows on n/100 keys: sum, count and max",
    item="rows",
    make_inputs=make_inputs,
    reference=reference,
    error=frame_error(),
    tolerance=lambda n: 0.0,
    error_measure="identical to pandas (0: equal; inf: any value differs)",
    reference_name="pandas",
    implementations=implementations(
        ("pandas", pandas_library, compute), ("cudf", cudf_library, compute)
    ),
)

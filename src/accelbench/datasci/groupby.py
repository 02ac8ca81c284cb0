"""Group-by aggregation: sum, maximum and count of two integer columns per key.

n rows, n/100 keys. The values are integers, so the aggregation has one right
answer whatever order a library sums in: the result must equal pandas' exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accelbench.datasci import dataframe_workload


def make_inputs(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame]:
    keys = max(1, n // 100)
    columns = {"key": (0, keys), "a": (0, 1000), "b": (-1000, 1000)}
    return (pd.DataFrame({name: rng.integers(*bounds, n) for name, bounds in columns.items()}),)


def on_polars(pl, frame):
    grouped = frame.group_by("key").agg(
        pl.col("a").sum().alias("a_sum"), pl.len().alias("rows"), pl.col("b").max().alias("b_max")
    )
    return grouped.sort("key")


def compute(df, frame):
    grouped = frame.groupby("key", sort=True).agg({"a": ["sum", "count"], "b": "max"})
    grouped.columns = ["a_sum", "rows", "b_max"]
    return grouped.reset_index()


SPEC = dataframe_workload(
    "groupby",
    "group-by of n rows on n/100 keys: sum, count and max",
    make_inputs,
    compute,
    on_polars=on_polars,
)

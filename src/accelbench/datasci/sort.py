"""Sort of n rows by an integer key, ties broken by a float column.

The float values are distinct (drawn at random), so the sorted order is unique
and must equal pandas' exactly, row order included, the row id moving with its row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accelbench.datasci import dataframe_workload


def make_inputs(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame]:
    keys, values = rng.integers(0, 1000, n), rng.uniform(0, 1, n)
    return (pd.DataFrame({"id": np.arange(n), "key": keys, "x": values}),)


def on_polars(pl, frame):
    return frame.sort(["key", "x"])


def compute(df, frame):
    return frame.sort_values(["key", "x"]).reset_index(drop=True)


SPEC = dataframe_workload(
    "sort",
    "sort of n rows by an integer key and a float column",
    make_inputs,
    compute,
    on_polars=on_polars,
)

"""Inner join of n rows with a table of n/10 keys (a fact table and its dimension).

Every row finds its key once, so the result has n rows; its row order is not
specified, so the check sorts by row id and then wants pandas' result exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accelbench.datasci import dataframe_workload, frame_error


def make_inputs(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    keys = max(1, n // 10)
    facts = pd.DataFrame(
        {"id": np.arange(n), "key": rng.integers(0, keys, n), "x": rng.uniform(0, 1, n)}
    )
    dimension = pd.DataFrame({"key": rng.permutation(keys), "y": rng.uniform(0, 1, keys)})
    return facts, dimension


def on_polars(pl, facts, dimension):
    return facts.join(dimension, on="key", how="inner")


def compute(df, facts, dimension):
    return facts.merge(dimension, on="key", how="inner")


SPEC = dataframe_workload(
    "join",
    "inner join of n rows with n/10 keys",
    make_inputs,
    compute,
    on_polars=on_polars,
    error=frame_error(by="id"),
    error_measure="identical to pandas after sorting by row id (0: equal; inf: any differs)",
)

"""latest: the last event of each key, as a log is deduplicated before analysis.

n rows of events (a key of n/10 values, a time and a value), in time order; the result is
one row per key, its last event. pandas and cuDF run `compute`, polars `on_polars`;
pandas' result is the reference. Every value is an integer, so the result has one right
answer whatever a library does inside: it must equal pandas' exactly, once the rows are
put in key order (a library may return them in any).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accelbench.datasci import dataframe_workload, frame_error


def make_inputs(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame]:
    keys = max(1, n // 10)
    frame = pd.DataFrame(
        {"key": rng.integers(0, keys, n), "time": np.arange(n), "value": rng.integers(0, 1000, n)}
    )
    return (frame,)


def compute(df, frame):
    return frame.drop_duplicates("key", keep="last")


def on_polars(pl, frame):
    return frame.unique(subset="key", keep="last", maintain_order=True)


SPEC = dataframe_workload(
    "latest",
    "the last of n events of each of n/10 keys",
    make_inputs,
    compute,
    on_polars=on_polars,
    error=frame_error(by="key"),
)

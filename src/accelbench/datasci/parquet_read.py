"""Parquet read: n rows of five columns (integers and floats) from one file into a frame.

The file is written once, before any timing, with pandas (pyarrow, snappy);
each call reads it whole, from the page cache after the first (a warm read:
the storage is not what is measured). cuDF decodes on the GPU, so its result
lies in device memory; copying it back is its transfer. The frame must equal
pandas' exactly.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from accelbench.datasci import StoredFrame, dataframe_workload


def make_inputs(rng: np.random.Generator, n: int) -> tuple[StoredFrame]:
    frame = pd.DataFrame(
        {
            "id": np.arange(n),
            "key": rng.integers(0, 1000, n),
            "x": rng.uniform(0, 1, n),
            "y": rng.standard_normal(n),
            "count": rng.integers(0, 2**31, n, dtype=np.int32),
        }
    )
    folder = tempfile.TemporaryDirectory(prefix="accelbench-parquet-")
    path = str(Path(folder.name) / "table.parquet")
    frame.to_parquet(path, index=False)
    return (StoredFrame(folder, path),)


def on_polars(pl, stored: StoredFrame):
    return pl.read_parquet(stored.path)


def compute(df, stored: StoredFrame):
    return df.read_parquet(stored.path)


SPEC = dataframe_workload(
    "parquet_read",
    "read of a Parquet file of n rows, 5 columns",
    make_inputs,
    compute,
    on_polars=on_polars,
)

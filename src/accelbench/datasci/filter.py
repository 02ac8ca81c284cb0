"""Filter and arithmetic: the rows with x > 0.5 and y < 0.5, and x * y + z on them.

The kept rows must be pandas' exactly. The values are in [0, 1), so x * y + z
has no cancellation: its relative error is at most 2u in float64 (one rounding
fewer where a GPU fuses the multiply and add), and the check allows 4u.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accelbench.datasci import dataframe_workload, frame_error


def make_inputs(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame]:
    x, y, z = rng.uniform(0, 1, (3, n))
    return (pd.DataFrame({"id": np.arange(n), "x": x, "y": y, "z": z}),)


def on_polars(pl, frame):
    kept = frame.filter((pl.col("x") > 0.5) & (pl.col("y") < 0.5))
    return kept.with_columns(w=pl.col("x") * pl.col("y") + pl.col("z"))


def compute(df, frame):
    kept = frame[(frame["x"] > 0.5) & (frame["y"] < 0.5)]
    return kept.assign(w=kept["x"] * kept["y"] + kept["z"])


SPEC = dataframe_workload(
    "filter",
    "filter of n rows on two conditions, then x * y + z",
    make_inputs,
    compute,
    on_polars=on_polars,
    error=frame_error(by="id"),
    tolerance=4 * float(np.finfo(np.float64).eps),
    error_measure="normwise relative error of the float columns; rows identical to pandas",
)

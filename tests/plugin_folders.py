"""Folders of a user's own units (accelbench.registry), written by tests: a kernel whose run
and result each test chooses, a data science step, a model."""

from __future__ import annotations

import textwrap
from pathlib import Path

# Twice a vector on NumPy; `run` fills `out` from `x`, `fetch` returns the result.
KERNEL = """\
import time

import numpy as np

from accelbench.kernels import KernelSpec, Prepared


def make_inputs(rng, n, dtype):
    return (rng.uniform(0.5, 1.5, n).astype(dtype),)


def prepare_numpy(inputs, device):
    (x,) = inputs
    out = np.empty_like(x)

    def run():
        {run}

    return Prepared(run=run, fetch=lambda: {fetch}, poison=lambda: out.fill(np.nan))


SPEC = KernelSpec(
    name={name!r},
    description="twice a vector",
    flops=lambda n: float(n),
    bytes_moved=lambda n, itemsize: 2.0 * n * itemsize,
    make_inputs=make_inputs,
    reference=lambda x: 2.0 * x.astype(np.float64),
    tolerance=lambda n, dtype: 0.0,
    implementations={{"numpy": prepare_numpy}},
    device_kinds=("cpu",),
)
"""
TWICE = "np.multiply(x, 2, out=out)"

WORKLOAD = """\
import numpy as np
import pandas as pd

from accelbench.datasci import dataframe_workload


def make_inputs(rng, n):
    return (pd.DataFrame({{"x": rng.uniform(0, 1, n)}}),)


def compute(df, frame):
    {compute}


def on_polars(pl, frame):
    return frame.select(pl.col("x").clip(0.25, 0.75))


SPEC = dataframe_workload(
    {name!r}, "clip a column", make_inputs, compute, on_polars=on_polars, tolerance=1e-12
)
"""
CLIP = 'return frame[["x"]].clip(0.25, 0.75)'

MODEL = """\
import torch

from accelbench.train.models import ModelSpec

SPEC = ModelSpec(
    name={name!r},
    family="fcn",
    description="a linear classifier of 4 features",
    default_batch=8,
    options={{"lr": 0.1}},
)


def build(options):
    return torch.nn.Linear(4, 2)


def make_batch(generator, batch, options):
    features = torch.randn(batch, 4, generator=generator)
    return features, (features[:, 0] > 0).long()


def loss():
    {loss}
"""
CROSS_ENTROPY = "return torch.nn.CrossEntropyLoss()"


def write_unit(folder: Path, kind: str, module: str, source: str) -> Path:
    """Write `source` as module `module` of `kind` ("kernels", "datasci", "models") in the
    plugin folder `folder`; returns its file."""
    path = folder / kind / f"{module}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


def kernel(folder: Path, name: str, run: str = TWICE, fetch: str = "out.copy()") -> Path:
    return write_unit(folder, "kernels", name, KERNEL.format(name=name, run=run, fetch=fetch))


def workload(folder: Path, name: str, compute: str = CLIP) -> Path:
    return write_unit(folder, "datasci", name, WORKLOAD.format(name=name, compute=compute))


def model(folder: Path, name: str, loss: str = CROSS_ENTROPY) -> Path:
    return write_unit(folder, "models", name, MODEL.format(name=name, loss=loss))

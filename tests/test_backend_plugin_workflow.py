"""A backend of an installed package, through the workflow: named in the config beside a
built-in, its cells are planned, grouped with the built-in's, measured by its own timer,
recorded and tabled as the built-ins' are."""

from __future__ import annotations

import pandas as pd
import pytest

from accelbench.records.record import load_record

from conftest import snakemake
from plugin_backends import TWIN, install

pytestmark = pytest.mark.workflow

# Over the suite's tiny grid (config/tiny.yaml): saxpy alone, on numpy and the package's
# numpy-twin, and no training cell.
GRID = """\
kernels:
  backends: [numpy, numpy-twin]
  dtypes: [float32]
  sizes: {matmul: []}
  overrides: {saxpy: {devices: [cpu1], backends: [numpy, numpy-twin], dtypes: [float32]}}
train:
  batch_sizes: {resnet18: []}
"""
RECORDS = "results/kernels/saxpy/cpu1/{backend}/float32/n1000.json"


def test_a_backend_installed_through_its_entry_point_is_measured_by_the_workflow(
    workflow_dir, tmp_path
):
    site = tmp_path / "site"
    install(site, "twinbackend", "0.1", TWIN, "twin")
    (tmp_path / "grid.yaml").write_text(GRID)

    done = snakemake(
        workflow_dir,
        "--cores",
        "2",
        "--configfile",
        "config/tiny.yaml",
        str(tmp_path / "grid.yaml"),
        extra_env={"PYTHONPATH": str(site)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]

    twin = load_record(workflow_dir / RECORDS.format(backend="numpy-twin"))
    builtin = load_record(workflow_dir / RECORDS.format(backend="numpy"))
    assert twin["status"] == "ok", twin["reason"]
    assert twin["check"]["passed"] is True
    assert twin["measured_by"]["timer"] == "the twin's own timer"
    # Measured in the same rounds as the built-in, so their ratio is paired.
    assert (
        twin["conditions"]["group"]["measurement"]
        == (builtin["conditions"]["group"]["measurement"])
    )
    tidy = pd.read_parquet(workflow_dir / "results" / "tidy.parquet")
    assert set(tidy["backend"].dropna()) == {"numpy", "numpy-twin"}  # and the roof
    assert "numpy-twin" in (workflow_dir / "results" / "tables" / "kernel_time.md").read_text()

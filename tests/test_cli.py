"""The accelbench command line."""

from __future__ import annotations

import pytest

from accelbench import cli

from conftest import REPO_ROOT


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)


def test_grid_lists_paths_and_exclusions(tmp_path, capsys):
    extra = tmp_path / "gpu.yaml"
    extra.write_text("kernels:\n  devices: [cpu1, cuda1]\n  backends: [numpy, cupy]\n")
    assert cli.main(["grid", "--configfile", str(extra)]) == 0
    out, err = capsys.readouterr()
    paths = out.split()
    assert "results/kernels/matmul/cpu1/numpy/float64/n128.json" in paths
    assert "results/kernels/matmul/cuda1/cupy/float32/n512.json" in paths
    assert "results/train/resnet18/cpu2/fp32/single/bs16.json" in paths
    assert (
        "excluded results/kernels/matmul/cuda1/numpy/float64/n128.json: "
        "backend 'numpy' runs on cpu devices, not on cuda1" in err
    )
    # 8 kernel cells, and ddp on cpu1 for the 3 models of the default grid.
    assert f"{len(paths)} experiments, 11 excluded" in err


def test_grid_reports_bad_names(tmp_path, capsys):
    extra = tmp_path / "bad.yaml"
    extra.write_text("kernels:\n  backends: [fortran]\n")
    assert cli.main(["grid", "--configfile", str(extra)]) == 2
    assert "unknown backend 'fortran'; allowed:" in capsys.readouterr().err

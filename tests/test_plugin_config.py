"""plugins.paths: the folders of the user's own units, found from the config file that names
them, checked before anything runs, and handed to the jobs as absolute folders."""

from __future__ import annotations

import pytest

from accelbench import cli, registry
from accelbench import config as workflow_config

import plugin_folders

ONLY_TWICE = """\
plugins:
  paths: [{path}]
kernels:
  devices: [cpu1]
  backends: [numpy]
  dtypes: [float64]
  sizes: {{twice: [64], matmul: [], mandelbrot: [], saxpy: [], reduction: [], stencil: [],
          fft1d: [], fft2d: [], transfer-d2d: []}}
datasci: {{devices: []}}
train: {{devices: []}}
"""


@pytest.fixture(autouse=True)
def only_built_ins_after():
    yield
    registry.use_plugins([])


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working directory that is neither the checkout nor the config's folder."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def test_a_relative_plugin_path_is_relative_to_the_config_file_that_names_it(
    tmp_path, elsewhere, capsys
):
    plugin_folders.kernel(tmp_path / "study" / "units", "twice")
    config = tmp_path / "study" / "twice.yaml"
    config.write_text(ONLY_TWICE.format(path="units"))
    assert cli.main(["grid", "--configfile", str(config)]) == 0
    assert capsys.readouterr().out.split() == [
        "results/kernels/twice/cpu1/numpy/float64/n64.json",
        "results/roofs/cpu1/float64.json",
    ]
    loaded = workflow_config.load([config])
    assert loaded["plugins"]["paths"] == [str(tmp_path / "study" / "units")]


def test_a_unit_of_a_folder_the_config_does_not_name_is_refused_by_its_key(tmp_path, capsys):
    plugin_folders.kernel(tmp_path / "units", "twice")
    config = tmp_path / "twice.yaml"
    config.write_text(ONLY_TWICE.format(path="[]").replace("paths: [[]]", "paths: []"))
    assert cli.main(["grid", "--configfile", str(config)]) == 2
    assert f"{config}: config key kernels.sizes: unknown kernel 'twice'" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda folder: None, "is no folder"),
        (lambda folder: (folder / "kernel").mkdir(parents=True), "holds none of kernels/"),
    ],
)
def test_a_plugin_path_that_is_no_folder_of_units_is_refused_naming_key_and_file(
    tmp_path, capsys, make, problem
):
    make(tmp_path / "units")
    config = tmp_path / "twice.yaml"
    config.write_text("plugins: {paths: [units]}\n")
    assert cli.main(["grid", "--configfile", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"accelbench: {config}: config key plugins.paths: units ")
    assert problem in err


def test_a_unit_that_fails_to_import_stops_the_config_naming_its_file(tmp_path, capsys):
    file = plugin_folders.write_unit(tmp_path / "units", "kernels", "twice", "1 / 0\n")
    config = tmp_path / "twice.yaml"
    config.write_text(ONLY_TWICE.format(path="units"))
    assert cli.main(["grid", "--configfile", str(config)]) == 2
    assert capsys.readouterr().err == (
        f"accelbench: {file}, line 1: cannot be imported: ZeroDivisionError: division by zero\n"
    )

"""The package as a user installs it: a wheel that carries its workflow, run from anywhere."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import accelbench
from accelbench import cli
from accelbench import config as workflow_config
from accelbench.run import launch

from conftest import REPO_ROOT, TINY_CONFIG, WORKFLOW_PARTS

# Over the tests' tiny grid: one kernel cell (and the roof of its device), enough for
# records, tables and figures, small enough for CI.
ONE_CELL_CONFIG = """\
kernels:
  backends: [numpy]
  sizes:
    saxpy: []
train:
  devices: []
"""
PROJECT_FILES = (
    *("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "CITATION.cff", "src"),
)


def build_wheel(destination: Path) -> Path:
    """A wheel of this checkout, built from a copy so the checkout gets no build/ folder."""
    source = destination / "source"
    source.mkdir(parents=True)
    for part in dict.fromkeys((*PROJECT_FILES, *WORKFLOW_PARTS)):
        if (REPO_ROOT / part).is_dir():
            shutil.copytree(
                REPO_ROOT / part, source / part, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(REPO_ROOT / part, source / part)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w"]
        + [str(destination / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = (destination / "dist").glob("accelbench-*.whl")
    return wheel


def venv_with_project_packages(destination: Path) -> Path:
    """A fresh venv that sees this venv's installed packages but not its accelbench.

    A .pth line adds this venv's site-packages to the path without running the .pth
    files there, so the editable install of the checkout stays out.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", destination], check=True)
    (new_site,) = destination.glob("lib/python*/site-packages")
    (new_site / "project-packages.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return destination


def clean_env() -> dict[str, str]:
    """The environment without what would lead to the checkout instead of the wheel."""
    return {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", workflow_config.WORKFLOW_ENV)
    }


@pytest.mark.workflow
def test_an_installed_wheel_runs_a_grid_from_another_directory(tmp_path):
    wheel = build_wheel(tmp_path / "build")
    assert wheel.name == f"accelbench-{accelbench.__version__}-py3-none-any.whl"
    venv = venv_with_project_packages(tmp_path / "venv")
    python, command = venv / "bin" / "python", venv / "bin" / "accelbench"
    env = clean_env()
    installed = subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", "--ignore-installed", wheel],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "tiny.yaml").write_text(TINY_CONFIG)
    (elsewhere / "one-cell.yaml").write_text(ONE_CELL_CONFIG)

    def accelbench_here(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [command, *args], cwd=elsewhere, capture_output=True, text=True, env=env, timeout=600
        )

    version = accelbench_here("--version")
    assert version.stdout.strip() == f"accelbench {accelbench.__version__}"
    with zipfile.ZipFile(wheel) as built:
        metadata = built.read(f"accelbench-{accelbench.__version__}.dist-info/METADATA").decode()
        assert f"accelbench-{accelbench.__version__}.dist-info/licenses/LICENSE" in built.namelist()
    assert "License-Expression: BSD-3-Clause" in metadata
    site_packages = next(venv.glob("lib/python*/site-packages"))
    imported = subprocess.run(
        [python, "-c", "import accelbench; print(accelbench.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=elsewhere,
    )
    assert Path(imported.stdout.strip()) == site_packages / "accelbench" / "__init__.py"
    workflow = Path(accelbench_here("workflow-path").stdout.strip())
    assert workflow == site_packages / "accelbench" / "workflow"
    assert {path.name for path in workflow.iterdir()} >= {*WORKFLOW_PARTS} - {"src"}

    done = accelbench_here("run", "--cores", "2", "--configfile", "tiny.yaml", "one-cell.yaml")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = elsewhere / "results"
    record = json.loads((results / "kernels/matmul/cpu1/numpy/float64/n32.json").read_text())
    assert record["status"] == "ok", record.get("reason")
    assert (results / "tables" / "kernel_time.md").is_file()
    assert (results / "figures" / "kernel_throughput.pdf").is_file()
    assert (results / "tidy.parquet").is_file()
    assert not (workflow / "results").exists() and not (workflow / ".snakemake").exists()


def test_run_hands_snakemake_its_own_options_and_this_packages_snakefile(tmp_path):
    command = launch.snakemake_command(["--cores", "2", "--directory", "other"], tmp_path)
    assert command[:3] == [sys.executable, "-m", "snakemake"]
    assert command[3:7] == [
        "--snakefile",
        str(workflow_config.workflow_root() / "Snakefile"),
        "--directory",
        str(tmp_path),
    ]
    # The user's options come last: their --directory wins.
    assert command[7:] == ["--cores", "2", "--directory", "other"]


def test_run_takes_options_that_accelbench_does_not_know_and_other_commands_refuse_them(
    monkeypatch, capsys
):
    taken = []
    monkeypatch.setattr(launch.os, "execv", lambda path, args: taken.append(args))
    cli.main(["run", "-n", "--configfile=config/mysite.yaml", "results/x.json"])
    assert taken[0][-3:] == ["-n", "--configfile=config/mysite.yaml", "results/x.json"]
    with pytest.raises(SystemExit):
        cli.main(["grid", "-n"])
    assert "unrecognized arguments: -n" in capsys.readouterr().err


def test_run_names_a_target_swallowed_by_configfile_before_snakemake_stops_on_it(
    monkeypatch, capsys
):
    """`--configfile FILE TARGET` gives Snakemake TARGET as a second config file; where the
    record does not exist yet, Snakemake stops with a FileNotFoundError traceback before the
    workflow is read. accelbench run says what to write instead, and starts nothing."""
    taken = []
    monkeypatch.setattr(launch.os, "execv", lambda path, args: taken.append(args))
    target = "results/kernels/matmul/cpu4/numpy/float32/n256.json"
    assert cli.main(["run", "--configfile", "config/mysite.yaml", target, "--cores", "2"]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"accelbench: --configfile took the result {target} as a config file")
    assert "Write --configfile=config/mysite.yaml (one file per option)" in said
    assert taken == []
    assert workflow_config.configfile_arguments(
        ["-n", "--configfile", "a.yaml", "b.yaml", "--cores", "2", "t.json", "--configfiles=c.yaml"]
    ) == ["a.yaml", "b.yaml", "c.yaml"]
    # Given twice, Snakemake would read only the last.
    assert cli.main(["run", "--configfile=a.yaml", "--configfile=b.yaml"]) == 2
    assert "--configfile is given 2 times" in capsys.readouterr().err
    assert taken == []


def test_version_is_the_packages_version(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.strip() == f"accelbench {accelbench.__version__}"


def test_the_workflow_a_wheel_carries_comes_before_a_checkout_above_it(tmp_path, monkeypatch):
    checkout = tmp_path / "checkout"
    package = checkout / ".venv" / "lib" / "python3.11" / "site-packages" / "accelbench"
    for root in (checkout, package / "workflow"):
        (root / "config").mkdir(parents=True)
        (root / "Snakefile").write_text("")
        (root / "config" / "config.yaml").write_text("")
    monkeypatch.delenv(workflow_config.WORKFLOW_ENV, raising=False)
    monkeypatch.setattr(workflow_config, "__file__", str(package / "config.py"))
    assert workflow_config.workflow_root() == package / "workflow"
    shutil.rmtree(package / "workflow")
    assert workflow_config.workflow_root() == checkout


def test_the_licence_and_the_citation_agree_with_the_package():
    """An OSI licence, named by SPDX in pyproject.toml, and a CITATION.cff of this version."""
    import tomllib

    import yaml

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "BSD-3-Clause"
    assert (REPO_ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License")
    citation = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    assert citation["license"] == project["license"]
    assert citation["version"] == accelbench.__version__
    assert citation["title"].startswith("accelbench") and citation["authors"]

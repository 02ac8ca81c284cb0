"""tools/gpu-check: the one command a lent GPU machine runs, on this CPU machine up to the
GPU calls. Its image's python is a venv itself (as on the GPU machines lent so far), whose
packages a new venv must still see; what the image lacks comes from carried wheels; the
check's logs and whatever reference it wrote come back in one archive."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import REPO_ROOT, WORKFLOW_PARTS

CHECKOUT_PARTS = (
    *WORKFLOW_PARTS,
    *("tools", "benchmarks", "Makefile", "pyproject.toml", "setup.py", "README.md", "MANIFEST.in"),
    *("requirements-cuda13.lock", "requirements-cuda12.lock", "requirements-cuda12.txt"),
)


def checkout(destination: Path) -> Path:
    destination.mkdir()
    for part in CHECKOUT_PARTS:
        source = REPO_ROOT / part
        if source.is_dir():
            ignored = shutil.ignore_patterns("__pycache__", "*.egg-info")
            shutil.copytree(source, destination / part, ignore=ignored)
        elif source.exists():
            shutil.copy2(source, destination / part)
    (destination / "results").mkdir(exist_ok=True)
    return destination


def carried_wheel(folder: Path) -> Path:
    """A wheel of a package no environment here has, as a carried one would be."""
    folder.mkdir(parents=True)
    wheel = folder / "carried_probe-1.0-py3-none-any.whl"
    info = "carried_probe-1.0.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("carried_probe.py", "CARRIED = True\n")
        archive.writestr(
            f"{info}/METADATA", "Metadata-Version: 2.1\nName: carried-probe\nVersion: 1.0\n"
        )
        archive.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        archive.writestr(f"{info}/RECORD", "")
    return folder


def run(command: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=900
    )


@pytest.mark.workflow
def test_the_device_script_installs_over_an_image_venv_and_packs_what_the_check_left(tmp_path):
    repo = checkout(tmp_path / "repo")
    wheels = carried_wheel(tmp_path / "wheels")
    # This environment stands for the GPU image: a venv, with torch, pandas and pytest.
    installed = run(["tools/gpu-check/install.sh", str(wheels)], repo, PYTHON=sys.executable)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "accelbench 0.1.0 | numpy" in installed.stdout
    python = repo / ".venv" / "bin" / "python"
    seen = run(
        [
            str(python),
            "-c",
            "import accelbench, carried_probe, torch, pandas\nprint(accelbench.__file__)",
        ],
        repo,
    )
    assert seen.returncode == 0, seen.stderr
    assert seen.stdout.strip() == str(repo / "src" / "accelbench" / "__init__.py")
    # A machine whose nvidia-smi lists a GPU that its driver cannot reach: the check runs
    # until a step fails (this copy has no tests to run), and the logs come back packed.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(
        "#!/bin/sh\n"
        '[ "$1" = -L ] && { echo "GPU 0: Stand-in (UUID: GPU-0)"; exit 0; }\n'
        'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the driver"\n'
        "exit 9\n"
    )
    (bin_dir / "nvidia-smi").chmod(0o755)
    out = tmp_path / "out"
    done = run(
        ["tools/gpu-check/run.sh", str(tmp_path / "no-wheels"), str(out)],
        repo,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        BUDGET_S="400",
        DDP_STRESS_LAUNCHES="2",
    )
    assert done.returncode != 0, done.stdout
    assert "no reference/<gpu>/ was written" in done.stdout
    [archive] = out.glob("gpu-check-*.tar.gz")
    with tarfile.open(archive) as packed:
        names = set(packed.getnames())
    logs = "results/gpu-check-logs"
    assert {
        f"{logs}/steps.txt",
        f"{logs}/make.txt",
        f"{logs}/gpu-check/doctor.txt",
        f"{logs}/ddp-stress.txt",
    } <= names
    assert "0 hung" in (repo / logs / "ddp-stress.txt").read_text()
    made = (repo / logs / "make.txt").read_text()
    assert made.index("gpu-check: the doctor") < made.index("gpu-check: the GPU tests")
    assert "No NVIDIA GPU" in (repo / logs / "gpu-check" / "doctor.txt").read_text()

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
    *("LICENSE", "CITATION.cff"),
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


def device_script(repo: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """tools/gpu-check/run.sh without wheels, archiving into tmp_path/out, with the
    stand-in commands of tmp_path/bin first on the PATH."""
    script = ["tools/gpu-check/run.sh", str(tmp_path / "no-wheels"), str(tmp_path / "out")]
    return run(script, repo, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}", **env)


def stand_in(tmp_path: Path, name: str, script: str) -> None:
    """A command of that name in tmp_path/bin, running this shell script."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    (tmp_path / "bin" / name).write_text("#!/bin/sh\n" + script)
    (tmp_path / "bin" / name).chmod(0o755)


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
    stand_in(
        tmp_path,
        "nvidia-smi",
        '[ "$1" = -L ] && { echo "GPU 0: Stand-in (UUID: GPU-0)"; exit 0; }\n'
        'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the driver"\n'
        "exit 9\n",
    )
    # A reference committed before (another GPU's) is not this check's.
    (repo / "reference" / "other-gpu").mkdir(parents=True)
    (repo / "reference" / "other-gpu" / "acceptance.md").write_text("judged before\n")
    done = device_script(repo, tmp_path, BUDGET_S="400", DDP_STRESS_LAUNCHES="1")
    assert done.returncode != 0, done.stdout
    assert "no reference/<gpu>/ was written" in done.stdout
    [archive] = (tmp_path / "out").glob("gpu-check-*.tar.gz")
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
    assert made.index("gpu-check: the doctor") < made.index("gpu-check: the grid")
    assert "make gpu-tests" not in (repo / logs / "steps.txt").read_text()
    assert "No NVIDIA GPU" in (repo / logs / "gpu-check" / "doctor.txt").read_text()
    # Again with RESUME=1, as on the same machine after a check that ran out of time: the
    # venv, the doctor that passed and the stress that ended are kept.
    doctor_output = (repo / "results" / "gpu-check" / "doctor.txt").stat().st_mtime_ns
    resumed = device_script(repo, tmp_path, BUDGET_S="400", RESUME="1")
    steps = (repo / logs / "steps.txt").read_text().split("resuming")
    assert len(steps) == 2, resumed.stdout
    assert "make gpu-check GPU_RESUME=1" in steps[1] and "DDP stress" not in steps[1]
    assert (repo / "results" / "gpu-check" / "doctor.txt").stat().st_mtime_ns == doctor_output
    assert (repo / logs / "make.txt").read_text().count("gpu-check: the doctor") == 2


@pytest.mark.parametrize(
    ("stopped", "status"),
    [("exec sleep 60", 124), ("trap '' TERM; sleep 60", 137)],
    ids=["ends-on-term", "killed-after-the-grace"],
)
def test_a_check_cut_by_its_time_is_judged_on_the_records_it_made(tmp_path, stopped, status):
    """`make` stands in: a check that outlasts what the budget leaves it is stopped (killed
    if it outlasts the grace too, as a snakemake waiting for its jobs did), and the verdict
    (make gpu-verdict) still judges and keeps what was measured."""
    repo = checkout(tmp_path / "repo")
    stand_in(
        tmp_path,
        "make",
        'echo "make $*" >> "$MAKE_CALLS"\n'
        f'[ "$1" = gpu-check ] && {{ {stopped}; }}\n'
        "mkdir -p reference/stand-in-gpu && echo judged > reference/stand-in-gpu/acceptance.md\n",
    )
    calls = tmp_path / "make-calls.txt"
    done = device_script(
        repo,
        tmp_path,
        MAKE_CALLS=str(calls),
        BUDGET_S="76",  # 4 s for the check, 2 for the GPU tests, 70 for what follows
        DDP_STRESS_S="0",
        GPU_TESTS_S="2",
        STOP_GRACE_S="1",
    )
    assert done.returncode == status, done.stdout + done.stderr
    assert calls.read_text().splitlines() == [
        "make gpu-check CUDA=13",
        "make gpu-verdict CUDA=13",
        "make gpu-tests CUDA=13",
    ]
    assert "out of time: the verdict on the records made" in done.stdout
    [archive] = (tmp_path / "out").glob("gpu-check-stand-in-gpu.tar.gz")
    with tarfile.open(archive) as packed:
        assert "reference/stand-in-gpu/acceptance.md" in packed.getnames()


def test_a_resumed_check_lifts_the_lock_its_stopped_workflow_left():
    """A snakemake killed with the check leaves its lock, and the next one would refuse the
    directory; a check that is not resumed has nothing to unlock."""

    def planned(*extra: str) -> list[str]:
        made = run(["make", "-n", "gpu-check", "BIN=.venv/bin", *extra], REPO_ROOT)
        assert made.returncode == 0, made.stderr
        return [line for line in made.stdout.splitlines() if "snakemake" in line]

    resumed = planned("GPU_RESUME=1")
    assert "--unlock" in resumed[0] and "--cores all" in resumed[1]
    assert not any("--unlock" in line for line in planned())

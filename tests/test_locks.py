"""The locks of the two CUDA stacks match pyproject.toml and hash every pin (tools/lock.py)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys

import pytest

from conftest import REPO_ROOT

# tools/ is no package: the lock tool is loaded from its file (and registered, as its
# dataclasses need).
_spec = importlib.util.spec_from_file_location("lock_tool", REPO_ROOT / "tools" / "lock.py")
lock = sys.modules["lock_tool"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lock)


@pytest.mark.parametrize("stack", lock.STACKS, ids=lambda stack: f"cuda{stack.cuda}")
def test_each_lock_matches_pyproject_and_hashes_every_pin(stack):
    assert lock.problems(stack) == []
    entries = lock.pinned(stack.lock)
    assert all(hashes for _, hashes in entries.values())
    # The GPU backends of the stack are locked; torch's CUDA 12 build is not (another index).
    assert f"cupy-cuda{stack.cuda}x" in entries
    assert ("torch" in entries) == (stack.off_pypi is None)


@pytest.fixture
def project_copy(tmp_path, monkeypatch):
    """pyproject.toml, the locks and requirements-cuda12.txt in a folder of their own."""
    for name in ("pyproject.toml", "requirements-cuda12.txt", *(s.lock.name for s in lock.STACKS)):
        shutil.copy2(REPO_ROOT / name, tmp_path / name)
    monkeypatch.setattr(lock, "ROOT", tmp_path)
    monkeypatch.setattr(lock, "PYPROJECT", tmp_path / "pyproject.toml")
    return tmp_path


def test_a_dependency_added_without_a_new_lock_is_named(project_copy):
    pyproject = project_copy / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"polars",', '"polars",\n    "xarray",'))
    found = lock.problems(lock.Stack("13"))
    assert any("made from other inputs" in problem for problem in found), found
    assert "requirements-cuda13.lock: xarray (pyproject.toml) is not pinned" in found


def test_a_pin_without_a_hash_or_outside_the_requirement_is_named(project_copy):
    path = project_copy / "requirements-cuda13.lock"
    text = path.read_text()
    text = re.sub(r"(pytest==\S*) \\\n( +--hash=sha256:\w+( \\)?\n)+", r"\1\n", text)
    text = text.replace("snakemake==9.27.1", "snakemake==8.30.0")
    path.write_text(text)
    found = lock.problems(lock.Stack("13"))
    assert "requirements-cuda13.lock: pytest==9.2.0 has no hash" in found
    assert "requirements-cuda13.lock: snakemake==8.30.0 does not satisfy snakemake>=9" in found


def test_an_unpinned_line_is_named(project_copy):
    path = project_copy / "requirements-cuda13.lock"
    path.write_text(path.read_text() + "ruff>=0.1\n")
    assert lock.problems(lock.Stack("13")) == [
        "requirements-cuda13.lock: 'ruff>=0.1' is not pinned with =="
    ]


def test_a_cuda12_lock_holding_what_comes_from_the_pytorch_index_is_named(project_copy):
    stack = lock.Stack("12", off_pypi=project_copy / "requirements-cuda12.txt")
    path = stack.lock
    path.write_text(path.read_text() + "torch==2.14.1 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    assert lock.problems(stack) == [
        "requirements-cuda12.lock: torch==2.14.1+cu126 comes from another index but is locked"
    ]

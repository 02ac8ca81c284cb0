"""The locks of the two CUDA stacks: made by uv from pyproject.toml, checked without a network.

    python tools/lock.py            # (re)make both locks; needs `uv` on PATH and PyPI
    python tools/lock.py --check    # each lock matches its inputs and hashes every pin

A lock pins, with hashes, everything `pip install --require-hashes -r LOCK` installs
for Python 3.11 on x86_64 Linux: the package's dependencies, its CUDA extra and its
dependency groups `test`, `build` and `docs`. uv keeps the versions an existing lock pins
(pass --upgrade to let them move). The CUDA 12 stack's torch builds come from the
PyTorch wheel index (requirements-cuda12.txt), which is not PyPI; they are resolved
and installed where that stack is installed, without hashes, and the lock says so.

The header records a digest of the inputs, so a change of pyproject.toml's lists
that is not followed by a new lock fails the check.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
GROUPS = ("test", "build", "docs")
PYTHON_VERSION = "3.11"
PLATFORM = "x86_64-manylinux_2_28"
DIGEST_LINE = "# inputs sha256: "


@dataclass(frozen=True)
class Stack:
    cuda: str
    # Requirements from another index: left out of the lock, installed after it.
    off_pypi: Path | None = None

    @property
    def lock(self) -> Path:
        return ROOT / f"requirements-cuda{self.cuda}.lock"

    @property
    def extra(self) -> str:
        return f"cuda{self.cuda}"


STACKS = (Stack("13"), Stack("12", off_pypi=ROOT / "requirements-cuda12.txt"))


def requirement_lines(path: Path) -> list[str]:
    """The requirement lines of a requirements file (no comments, options or blanks)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def direct_requirements(stack: Stack) -> list[Requirement]:
    """What pyproject.toml asks for on this stack, less what comes from another index."""
    project = tomllib.loads(PYPROJECT.read_text())
    listed = [
        *project["project"]["dependencies"],
        *project["project"]["optional-dependencies"][stack.extra],
        *(line for group in GROUPS for line in project["dependency-groups"][group]),
    ]
    off_pypi = {Requirement(line).name for line in off_pypi_lines(stack)}
    requirements = [Requirement(line) for line in listed]
    return [
        req
        for req in requirements
        if canonicalize_name(req.name) not in {canonicalize_name(n) for n in off_pypi}
    ]


def off_pypi_lines(stack: Stack) -> list[str]:
    return requirement_lines(stack.off_pypi) if stack.off_pypi else []


def inputs_digest(stack: Stack) -> str:
    inputs = {
        "requirements": sorted(map(str, direct_requirements(stack))),
        "off_pypi": off_pypi_lines(stack),
        "python": PYTHON_VERSION,
        "platform": PLATFORM,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def header(stack: Stack) -> str:
    lines = [
        f"# The CUDA {stack.cuda} stack, locked for Python {PYTHON_VERSION} on {PLATFORM}.",
        "# Made by `make lock` (tools/lock.py, uv) from pyproject.toml: dependencies,",
        f"# extra {stack.extra}, groups {', '.join(GROUPS)}. Do not edit by hand.",
    ]
    if stack.off_pypi:
        lines += [
            f"# Not in this lock, and not hashed ({stack.off_pypi.name}):",
            *(f"#   {line}" for line in off_pypi_lines(stack)),
            "# and what they need (the CUDA runtime wheels, triton, sympy, ...): torch's",
            "# CUDA 12 builds come from the PyTorch wheel index, which the machine making",
            "# this lock cannot reach, and their exact CUDA wheel pins are in their metadata",
            f"# there. `make CUDA={stack.cuda} venv` resolves and installs them after this lock.",
        ]
    return "\n".join([*lines, f"{DIGEST_LINE}{inputs_digest(stack)}", ""])


def compile_lock(stack: Stack, upgrade: bool) -> None:
    command = [
        "uv",
        "pip",
        "compile",
        "pyproject.toml",
        "--extra",
        stack.extra,
        *(option for group in GROUPS for option in ("--group", group)),
        "--generate-hashes",
        "--python-version",
        PYTHON_VERSION,
        "--python-platform",
        PLATFORM,
        "--no-header",
        "--quiet",
        "--output-file",
        stack.lock.name,
    ]
    if stack.off_pypi:
        command += ["--excludes", stack.off_pypi.name]
    if upgrade:
        command.append("--upgrade")
    # uv reads the existing lock as the versions to keep, so the header goes on afterwards.
    subprocess.run(command, cwd=ROOT, check=True)
    body = stack.lock.read_text()
    shown = " ".join(part for part in command if part not in ("--no-header", "--quiet"))
    stack.lock.write_text(f"{header(stack)}#    {shown}\n{body}")


def pinned(lock: Path) -> dict[str, tuple[str, list[str]]]:
    """{name: (version, hashes)} of a lock; a line that pins no version is an error."""
    text = lock.read_text()
    entries = {}
    for block in re.split(r"\n(?=\S)", text):
        first = block.splitlines()[0].rstrip(" \\")
        if not first or first.startswith("#"):
            continue
        try:
            req = Requirement(first)
        except InvalidRequirement as err:
            raise ValueError(f"{lock.name}: cannot read {first!r}: {err}") from None
        versions = [spec.version for spec in req.specifier if spec.operator == "=="]
        if len(versions) != 1:
            raise ValueError(f"{lock.name}: {first!r} is not pinned with ==")
        entries[canonicalize_name(req.name)] = (
            versions[0],
            re.findall(r"--hash=sha256:([0-9a-f]{64})", block),
        )
    return entries


def problems(stack: Stack) -> list[str]:
    """Why the stack's lock does not match its inputs (empty when it does)."""
    if not stack.lock.is_file():
        return [f"{stack.lock.name} is missing: run `make lock`"]
    found = []
    if f"{DIGEST_LINE}{inputs_digest(stack)}\n" not in stack.lock.read_text():
        found.append(
            f"{stack.lock.name} was made from other inputs than pyproject.toml's "
            f"lists{' and ' + stack.off_pypi.name if stack.off_pypi else ''}: run `make lock`"
        )
    try:
        entries = pinned(stack.lock)
    except ValueError as err:
        return [*found, str(err)]
    found += [
        f"{stack.lock.name}: {name}=={version} has no hash"
        for name, (version, hashes) in entries.items()
        if not hashes
    ]
    for req in direct_requirements(stack):
        name = canonicalize_name(req.name)
        if name not in entries:
            found.append(f"{stack.lock.name}: {req} (pyproject.toml) is not pinned")
        elif not req.specifier.contains(entries[name][0], prereleases=True):
            found.append(f"{stack.lock.name}: {name}=={entries[name][0]} does not satisfy {req}")
    for line in off_pypi_lines(stack):
        if canonicalize_name(Requirement(line).name) in entries:
            found.append(f"{stack.lock.name}: {line} comes from another index but is locked")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="check the locks; change nothing")
    parser.add_argument("--upgrade", action="store_true", help="let pinned versions move")
    args = parser.parse_args(argv)
    if not args.check:
        for stack in STACKS:
            compile_lock(stack, args.upgrade)
    found = [problem for stack in STACKS for problem in problems(stack)]
    for problem in found:
        print(problem, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

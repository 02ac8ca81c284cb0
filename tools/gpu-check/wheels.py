"""The wheels a PyTorch GPU image lacks for `make gpu-check`, for carrying to a GPU machine
that has no index to install from (tools/gpu-check/install.sh installs them there).

Resolved with pip for the image's Python (`--python-version`, default 3.12) against the
CUDA 13 lock's versions: Snakemake with its Slurm executor, jsonschema, jsonschema-rs, the
lock's NumPy (Numba 0.68 breaks on NumPy 2.5, which such images have) and setuptools (the
package's licence is an SPDX expression, which setuptools reads from 77 on), with everything
they need except what the image has (IMAGE_HAS) and PuLP, which only Snakemake's MILP
scheduler imports (profiles/default chooses the greedy one). A package PyPI has only as source is
built here into a wheel first. About 34 MB.

    python tools/gpu-check/wheels.py [--out .whl] [--python-version 3.12]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WANTED = ("snakemake", "snakemake-executor-plugin-slurm", "jsonschema", "jsonschema-rs", "numpy",
          "setuptools")  # fmt: skip
# In the PyTorch GPU image lent so far (Python 3.12, torch 2.11+cu130), checked there.
IMAGE_HAS = {
    "attrs", "jinja2", "markupsafe", "packaging", "pandas", "psutil", "python-dateutil",
    "pyyaml", "typing-extensions",
}  # fmt: skip
NOT_NEEDED = {"pulp"}
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64")  # fmt: skip


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".whl")
    parser.add_argument("--python-version", default="3.12")
    args = parser.parse_args(argv)
    lock = ROOT / "requirements-cuda13.lock"
    pins = [line.split()[0] for line in lock.read_text().splitlines() if "==" in line.split(" ")[0]]
    wanted = [next((pin for pin in pins if pin.split("==")[0] == name), name) for name in WANTED]
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        (scratch / "constraints.txt").write_text("\n".join(pins) + "\n")
        # Packages without a wheel on PyPI, built here (pure Python): connection_pool.
        built = scratch / "built"
        pip(
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(built),
            *[p for p in pins if p.startswith("connection")],
        )
        report = scratch / "report.json"
        target = ["--python-version", args.python_version, "--implementation", "cp"]
        target += [option for platform in PLATFORMS for option in ("--platform", platform)]
        pip("install", "--quiet", "--dry-run", "--ignore-installed", "--report", str(report),
            "--only-binary=:all:", "--find-links", str(built), "--target", str(scratch / "t"),
            "-c", str(scratch / "constraints.txt"), *target, *wanted)  # fmt: skip
        args.out.mkdir(parents=True, exist_ok=True)
        for item in json.loads(report.read_text())["install"]:
            name = item["metadata"]["name"].lower().replace("_", "-")
            if name in IMAGE_HAS | NOT_NEEDED:
                continue
            url = item["download_info"]["url"]
            destination = args.out / url.rsplit("/", 1)[-1]
            if url.startswith("file://"):
                destination.write_bytes(Path(url.removeprefix("file://")).read_bytes())
            elif not destination.exists():
                urllib.request.urlretrieve(url, destination)
            print(destination.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())

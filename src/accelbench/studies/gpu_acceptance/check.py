"""`accelbench gpu-check`: judge the records of the GPU grid and keep them as a reference.

The last step of `make gpu-check` (docs/gpu-acceptance.md): after the doctor, the
GPU tests and the workflow run of config/gpu.yaml, the grid's records are judged
(studies.gpu_acceptance.acceptance) and everything a reader needs to trust or compare them goes to
`reference/<gpu>/`, to be committed: the records, the tables and figures, the
provenance, the tidy table, the doctor's and the GPU tests' output, and the verdict
(acceptance.md, acceptance.json). The folder is replaced as a whole, so it never
mixes two runs.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from accelbench import grid
from accelbench.families.base import Config
from accelbench.studies.gpu_acceptance import acceptance

REFERENCE_DIR = "reference"
# Made by the workflow's aggregation: folders and files kept as they are.
AGGREGATES = (
    "tables",
    "figures",
    "provenance.md",
    "provenance.tex",
    "provenance.csv",
    "provenance.html",
    "config.yaml",
    "tidy.csv",
    "summary.html",
    "excluded.csv",
    "record_problems.csv",
)
# Where `make gpu-check` keeps the doctor's and the GPU tests' output, below results/.
CHECK_LOGS = "gpu-check"


def reference_name(gpu: str) -> str:
    """A folder name for a board: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"."""
    return re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")


def write_reference(
    verdict: acceptance.Verdict, paths: list[str], root: Path, destination: Path
) -> Path:
    """Copy the grid's records and the run's aggregates below `root` into `destination`,
    with the verdict beside them; the folder is built aside and then put in place."""
    results = root / grid.RESULTS_DIR
    partial = destination.with_name(f".{destination.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    for path in paths:
        source = root / path
        if source.is_file():
            target = partial / "records" / Path(path).relative_to(grid.RESULTS_DIR)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    for name in (*AGGREGATES, CHECK_LOGS):
        source = results / name
        if source.is_dir():
            shutil.copytree(source, partial / name)
        elif source.is_file():
            shutil.copy2(source, partial / name)
    partial.mkdir(parents=True, exist_ok=True)
    (partial / "acceptance.md").write_text(acceptance.render(verdict), encoding="utf-8")
    (partial / "acceptance.json").write_text(
        json.dumps(acceptance.as_json(verdict), indent=1, default=str) + "\n", encoding="utf-8"
    )
    shutil.rmtree(destination, ignore_errors=True)
    partial.rename(destination)
    return destination


def run(config: Config, root: Path) -> tuple[acceptance.Verdict, Path | None]:
    """Judge the records `config`'s grid has below `root`; keep them in
    `root/reference/<gpu>/` when a GPU ran (without one there is nothing to keep)."""
    paths = grid.expand(config).paths
    verdict = acceptance.evaluate(paths, root)
    if verdict.gpu is None:
        return verdict, None
    destination = root / REFERENCE_DIR / reference_name(verdict.gpu)
    return verdict, write_reference(verdict, paths, root, destination)

"""Redraw a committed reference from its records: the tables, figures, summary, tidy table
and provenance of `reference/<gpu>/` made again by this version's analysis.

The records stay as they were measured and the verdict (acceptance.md, acceptance.json)
as it was judged at the reference's commit: only what the analysis draws from them is
replaced, so a reference measured once keeps up with how tables and figures are drawn.
The workflow runs in a scratch folder on a copy of the records with the reference's own
config, Snakemake told to judge the records by their times alone (`--rerun-triggers
mtime`): it makes the aggregates and measures nothing. Should the config plan a cell the
reference has no record of, nothing is redrawn and the missing records are named.

    python -m accelbench.studies.gpu_acceptance.redraw reference/nvidia-h200 [--cores N]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from accelbench import grid
from accelbench.run import launch
from accelbench.studies.gpu_acceptance.check import AGGREGATES

# The reference's own config is what the grid was measured under: it stays.
REDRAWN = tuple(name for name in AGGREGATES if name != "config.yaml")


class RedrawError(RuntimeError):
    """A reference that cannot be redrawn: what is missing, named."""


def _snakemake(work: Path, cores: int, *extra: str) -> subprocess.CompletedProcess[str]:
    arguments = ["--cores", str(cores), "--configfile", str(work / "config.yaml")]
    command = launch.snakemake_command(
        [*arguments, "--rerun-triggers", "mtime", "--config", "cuda_stack=13", *extra], work
    )
    return subprocess.run(command, cwd=work, capture_output=True, text=True, check=False)


def measured_jobs(plan: str) -> dict[str, int]:
    """The measuring jobs (an experiment family's rule, or a comparison group's) a dry
    run's job stats list, by rule."""
    stats = plan.split("Job stats:", 1)[1] if "Job stats:" in plan else ""
    found = dict(re.findall(r"^(\w+)\s+(\d+)$", stats, re.MULTILINE))
    return {
        rule: int(count)
        for rule, count in found.items()
        if grid.measuring_family(rule) and int(count)
    }


def redraw(reference: Path, cores: int = 2) -> list[str]:
    """Make `reference`'s aggregates anew from its records; returns what was replaced."""
    for needed in ("records", "config.yaml"):
        if not (reference / needed).exists():
            raise RedrawError(f"{reference} has no {needed}: it is not a committed reference")
    with tempfile.TemporaryDirectory(prefix="redraw-") as scratch:
        work = Path(scratch)
        shutil.copytree(reference / "records", work / grid.RESULTS_DIR)
        shutil.copy2(reference / "config.yaml", work / "config.yaml")
        # One time for every record: a roof whose input is another roof (families.roof) is
        # not older than it, whatever times the checkout gave the files.
        for record in (work / grid.RESULTS_DIR).rglob("*.json"):
            os.utime(record, (0, 0))
        plan = _snakemake(work, cores, "--dry-run")
        if plan.returncode != 0:
            raise RedrawError(
                f"the workflow cannot plan {reference}'s grid:\n{plan.stderr[-3000:]}"
            )
        if missing := measured_jobs(plan.stdout + plan.stderr):
            counts = ", ".join(f"{count} for {rule}" for rule, count in missing.items())
            raise RedrawError(
                f"{reference}'s config plans cells it has no record of ({counts}): redrawing "
                "would measure them here"
            )
        done = _snakemake(work, cores)
        if done.returncode != 0:
            raise RedrawError(f"drawing {reference} failed:\n{done.stderr[-3000:]}")
        replaced = []
        for name in REDRAWN:
            made, kept = work / grid.RESULTS_DIR / name, reference / name
            if kept.is_dir():
                shutil.rmtree(kept)
            else:
                kept.unlink(missing_ok=True)
            if made.is_dir():
                shutil.copytree(made, kept)
            elif made.is_file():
                shutil.copy2(made, kept)
            else:
                continue
            replaced.append(name)
    return replaced


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reference", type=Path, help="a committed reference/<gpu>/ folder")
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args(argv)
    try:
        replaced = redraw(args.reference, args.cores)
    except RedrawError as err:
        print(f"accelbench: {err}", file=sys.stderr)
        return 1
    print(f"{args.reference}: redrawn {', '.join(replaced)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

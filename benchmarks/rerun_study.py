"""Rerun study: do the intervals of the records cover what a rerun measures?

Measures the same cells three times, each exactly as the workflow does (a
supervised child process per experiment, the configured independent runs and
the contention guard):

  A  on a quiet machine: the intervals under test;
  B  on a quiet machine, a rerun: the fraction of B's medians inside A's
     intervals is the coverage (target >= 90%);
  C  with a CPU-burning process on every core, started between B and C: every
     record of C should come out flagged busy (target: all).

Cells: kernels of several kinds (compute-bound GEMM on one and two threads,
memory-bound saxpy, stencil and reduction, Mandelbrot), a roof, and training
cells of each kind of model (CNN, MLP, LSTM, and a ddp run). Prints one table
per pass and the two figures of merit; `--out` keeps the records and a JSON
summary. Takes about 10 minutes on 2 cores with the default config.

    python benchmarks/rerun_study.py [--configfile FILE] [--out DIR] [--cells N]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from accelbench import config as workflow_config
from accelbench import grid
from accelbench.families import FAMILIES
from accelbench.families.base import Experiment
from accelbench.job import supervisor
from accelbench.job.context import JobContext
from accelbench.measuring.settings import RunSettings
from accelbench.platform import provenance
from accelbench.records.record import load_record

CELLS = (
    "results/kernels/matmul/cpu1/numpy/float64/n512.json",
    "results/kernels/matmul/cpu2/torch/float32/n512.json",
    "results/kernels/saxpy/cpu2/numba-parallel/float32/n1000000.json",
    "results/kernels/stencil/cpu2/numba-parallel/float32/n1024.json",
    "results/kernels/reduction/cpu2/numpy/float32/n1000000.json",
    "results/kernels/mandelbrot/cpu2/numba-parallel/float64/n128.json",
    "results/roofs/cpu2/float32.json",
    "results/train/resnet18/cpu1/fp32/single/bs16.json",
    "results/train/fcn/cpu2/fp32/single/bs64.json",
    "results/train/lstm/cpu1/fp32/single/bs32.json",
    "results/train/fcn/cpu2/fp32/ddp/bs64.json",
)
# The figure of merit of each family: the metric a table shows.
METRICS = {
    "kernel": ("time",),
    "train": ("time_per_batch",),
    "roof": ("peak_gflops", "memory_bandwidth"),
}
BURN = "while True: pass"


def experiment_and_settings(path: str, config: dict) -> tuple[Experiment, RunSettings]:
    family, _, wildcards = grid.cell_of_path(path)
    exp = FAMILIES[family].parse(wildcards, config)
    return exp, FAMILIES[family].settings(config, wildcards)


def measure_pass(name: str, cells: list[str], config: dict, folder: Path) -> dict[str, dict]:
    """Every cell measured once, as the workflow's job would; path -> record."""
    records = {}
    for path in cells:
        exp, settings = experiment_and_settings(path, config)
        output = folder / name / path
        started = time.perf_counter()
        supervisor.run_supervised(
            exp,
            settings,
            str(output),
            context=JobContext.of(provenance.config_hash(config)),
            attempt=1,
            max_attempts=1,
            time_limit=1800,
        )
        records[path] = load_record(output)
        print(f"  {name} {path}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return records


def figures(record: dict) -> dict[str, dict]:
    return {
        metric: record["metrics"][metric]
        for metric in METRICS[record["experiment"]]
        if metric in record["metrics"]
    }


def start_burners(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(count)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", action="append", default=[])
    parser.add_argument("--out", help="keep the records and summary.json here")
    parser.add_argument("--cells", type=int, default=len(CELLS), help="first N cells only")
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    config = workflow_config.load(args.configfile)
    cells = list(CELLS[: args.cells])
    folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="rerun-study-"))

    print("pass A (quiet)", file=sys.stderr)
    first = measure_pass("A", cells, config, folder)
    print("pass B (quiet rerun)", file=sys.stderr)
    rerun = measure_pass("B", cells, config, folder)
    print(f"pass C ({args.burners} CPU-burning processes)", file=sys.stderr)
    burners = start_burners(args.burners)
    try:
        busy = measure_pass("C", cells, config, folder)
    finally:
        for burner in burners:
            burner.send_signal(signal.SIGKILL)
            burner.wait()

    rows, inside, compared = [], 0, 0
    for path in cells:
        a, b, c = first[path], rerun[path], busy[path]
        for metric, stats in figures(a).items():
            if a["status"] != "ok" or b["status"] != "ok":
                rows.append((path, metric, a["status"], b["status"], None, c["conditions"]))
                continue
            landed = stats["ci_low"] <= b["metrics"][metric]["median"] <= stats["ci_high"]
            inside += landed
            compared += 1
            rows.append((path, metric, stats, b["metrics"][metric], landed, c))
    flagged = sum(bool((busy[path].get("conditions") or {}).get("busy")) for path in cells)

    print(
        "| cell | metric | A: median [interval] | B: median | B in A | A, B busy "
        "| C: other CPUs | C busy |"
    )
    print("|:---|:---|---:|---:|:---:|:---:|---:|:---:|")
    for path, metric, stats, again, landed, c in rows:
        if landed is None:
            print(f"| {path} | {metric} | {stats} | {again} | – | | | |")
            continue
        quiet_busy = f"{first[path]['conditions']['busy']}, {rerun[path]['conditions']['busy']}"
        print(
            f"| {path.removeprefix('results/')} | {metric} | {stats['median']:.4g} "
            f"[{stats['ci_low']:.4g}, {stats['ci_high']:.4g}] {stats['unit']} "
            f"| {again['median']:.4g} | {'yes' if landed else 'NO'} | {quiet_busy} "
            f"| {c['conditions']['other_cpus']:.2f} | {c['conditions']['busy']} |"
        )
    coverage = inside / compared if compared else float("nan")
    print()
    print(
        f"Reruns inside the first run's interval: {inside} of {compared} "
        f"({coverage:.0%}; target >= 90%)"
    )
    print(f"Busy-run records flagged: {flagged} of {len(cells)} (target: all)")
    summary = {
        "cells": cells,
        "coverage": coverage,
        "inside": inside,
        "compared": compared,
        "flagged": flagged,
        "busy_records": len(cells),
        "config": {key: config[key] for key in ("kernels", "train") if key in config},
    }
    (folder / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print(f"Records and summary.json: {folder}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

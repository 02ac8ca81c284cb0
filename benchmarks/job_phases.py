"""Job phases: where a grid's wall time went, job by job and phase by phase, from its logs.

Each experiment job logs what it did before its runs (imports, the GPU questions, the
idle energy baseline, the cell's inputs and reference) and each kernel run its phases
(context, check, timing, transfers, energy, recheck); accelbench.measuring.phases. This reads the
job logs below `--results` and prints, per kind of job (family, device kind, and for
kernels whether the cell is large), how many there were, the median job, its phases and
their share; then every phase summed over all jobs, and the jobs' total. With
`--configfile`, it predicts the wall time of that grid's jobs from those medians (each
planned cell at the median of its kind, or of its family and device kind where no job
of its kind was measured), plus Snakemake's own gap between jobs.

    python benchmarks/job_phases.py [--results results] [--configfile CONFIG ...]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from accelbench import config as workflow_config
from accelbench import grid

STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
PHASES = re.compile(r": (?:before its runs|the run's phases): (.*), [\d.]+ s in all$")
LAP = re.compile(r"^(.*) ([\d.]+) s$")
# A cell of at least this many elements streams through memory (2^22: beyond every L2).
LARGE = 1 << 22
# Snakemake's own time between one job's end and the next one's start (H100 host: 0.3 s).
GAP_S = 0.4


def kind_of(experiment_id: str) -> tuple[str, str, str]:
    """(family, device kind, what tells its jobs apart) of a record id: a kernel cell's size
    class (kernels/saxpy/cuda1/... -> ("kernels", "cuda", "large")), a model, or nothing."""
    family, *parts = experiment_id.split("/")
    device = parts[0] if family == "roofs" else parts[1]
    detail = parts[0] if family in ("train", "datasci") else ""
    if family == "kernels":
        elements = int(parts[-1].removeprefix("n"))
        elements *= elements if parts[0] in ("matmul", "stencil", "fft2d", "mandelbrot") else 1
        detail = "large" if elements >= LARGE else "small"
    return family, re.sub(r"\d+", "", device), detail


def read_job(log: Path) -> tuple[float, dict[str, float]]:
    """(wall seconds from the job's first to its last line, seconds per phase)."""
    stamps, phases = [], defaultdict(float)
    for line in log.read_text(errors="replace").splitlines():
        if found := STAMP.match(line):
            stamps.append(datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f"))
        if found := PHASES.search(line):
            for lap in found.group(1).split(", "):
                if named := LAP.match(lap):
                    phases[named.group(1)] += float(named.group(2))
    wall = (stamps[-1] - stamps[0]).total_seconds() if len(stamps) > 1 else 0.0
    return wall, dict(phases)


def read_jobs(results: Path) -> dict[str, tuple[float, dict[str, float]]]:
    """The experiment jobs' logs below `results/logs` (not the aggregation's or the fork
    server's), by record id."""
    logs = results / "logs"
    return {
        str(log.relative_to(logs).with_suffix("")): read_job(log)
        for log in sorted(logs.rglob("*.log"))
        if grid.cell_of_path(f"{grid.RESULTS_DIR}/{log.relative_to(logs).with_suffix('.json')}")
    }


def summarise(jobs: dict[str, tuple[float, dict[str, float]]]) -> dict[tuple, float]:
    """Print the medians per kind and the phase totals; return the median job per kind."""
    by_kind: dict[tuple, list[tuple[float, dict[str, float]]]] = defaultdict(list)
    for experiment_id, job in jobs.items():
        by_kind[kind_of(experiment_id)].append(job)
    medians = {}
    print(f"{'kind of job':28} {'jobs':>4} {'median':>8}  median phases (s)")
    for kind, found in sorted(by_kind.items()):
        walls = [wall for wall, _ in found]
        medians[kind] = statistics.median(walls)
        names = sorted({name for _, phases in found for name in phases})
        phase_text = ", ".join(
            f"{name} {statistics.median(phases.get(name, 0.0) for _, phases in found):.2f}"
            for name in names
        )
        name = "/".join(filter(None, kind))
        print(f"{name:28} {len(found):4} {medians[kind]:7.1f}s  {phase_text}")
    totals: dict[str, float] = defaultdict(float)
    for _, phases in jobs.values():
        for name, seconds in phases.items():
            totals[name] += seconds
    wall = sum(wall for wall, _ in jobs.values())
    print(f"\n{len(jobs)} jobs, {wall:.0f} s of job wall time; by phase:")
    for name, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        print(f"  {name:22} {seconds:7.1f} s  {100 * seconds / wall:5.1f}%")
    return medians


def predict(configfiles: list[str], medians: dict[tuple, float]) -> float:
    """The predicted wall time of the jobs of the grid of `configfiles`."""
    experiments = grid.expand(workflow_config.load(configfiles)).experiments
    by_family: dict[tuple, list[float]] = defaultdict(list)
    for (family, device, _), seconds in medians.items():
        by_family[(family, device)].append(seconds)
    total, unknown = 0.0, []
    counts: dict[tuple, int] = defaultdict(int)
    for exp in experiments:
        kind = kind_of(exp.id)
        counts[kind] += 1
        if kind in medians:
            total += medians[kind] + GAP_S
        elif kind[:2] in by_family:
            total += statistics.median(by_family[kind[:2]]) + GAP_S
        else:
            unknown.append(exp.id)
    print(f"\n{' '.join(configfiles)}: {len(experiments)} jobs")
    for kind, count in sorted(counts.items()):
        print(f"  {'/'.join(filter(None, kind)):28} {count:4}")
    print(f"predicted: {total:.0f} s of jobs ({total / 60:.1f} min), Snakemake's gaps included")
    if unknown:
        print(f"  and {len(unknown)} jobs of kinds never measured, e.g. {unknown[0]}")
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--configfile", nargs="+", default=[])
    args = parser.parse_args(argv)
    jobs = read_jobs(args.results)
    if not jobs:
        print(f"no job logs below {args.results / 'logs'}")
        return 1
    medians = summarise(jobs)
    if args.configfile:
        predict(args.configfile, medians)
    return 0


if __name__ == "__main__":
    sys.exit(main())

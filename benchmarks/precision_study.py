"""Precision study: what a user of the default grid meets on this machine, and does an
independent rerun confirm it?

Runs the workflow twice, each time from scratch in a fresh copy of this checkout's
workflow, as `make run` does on a fresh clone (the grid, the host's first cells again once
it has shown its drift, then the report; the second run needs no report), and prints
every figure the targets are stated in, for a noisy shared machine such as a cloud VM (no
quiet one needed):

  - the wall time of the first run, grid and report: at most 240 s (the default grid
    on 2 cores; judged only without --configfile);
  - the rerun's medians inside the first run's intervals: at least 90%;
  - records flagged busy: at most 20% on an idle machine; with `--load N` (N processes
    spinning on the same CPUs during both runs), at least 90%;
  - records more than twice as wide as their device kind's typical record (the median
    half-width of the run's records of that kind) without a mark (busy or imprecise):
    none: the host's own yardstick, as the tables mark;
  - regressions `accelbench compare FIRST RERUN` reports: none (idle only);
  - rows of the kernel time and speedup tables whose best and runner-up medians
    differ by more than 10% that name a winner in bold: most of them (over half);
  - the ratio cells of the tables (speedups, scaling efficiencies): those of cells
    measured together (paired) at most x/1.10 wide at the median, and the rerun's ratio
    medians inside the first run's paired intervals: at least 90%; beside them the same
    figures for the ratio cells whose interval spans the two cells' own (unpaired);

and, without a target, the share of records within +-5%, the share flagged imprecise, the
half-widths (median, 90th percentile) and each rerun median outside the first run's
interval (how far it moved against how wide the interval was). Exits 1 when a target is
missed. The records
say how busy the machine was (`conditions.other_cpus`) and how fast the host ran
(`conditions.host_speed_of_best`), and so does this study. `--configfile` merges a
smaller grid over the default one, to try the study on a few cells. `--cpus 2,3` runs
both runs on those CPUs only (Snakemake and every job it starts). What a host keeps
between measurements (its probes and its cells' spreads) starts empty in a temporary
folder of the study's own: the first run meets the host as a fresh machine does, the
rerun what the first left, and nothing measured here before counts.

    python benchmarks/precision_study.py [--configfile FILE ...] [--cores N] [--cpus LIST]
                                         [--load N] [--out DIR]
    python benchmarks/precision_study.py --judge [--load N] --out DIR   (kept runs, again)
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from accelbench.analysis import compare, tables, tidy
from accelbench.families import FAMILIES
from accelbench.measuring import precision, statistics
from accelbench.measuring.rerun import LEAST_CELLS, HostSpreads, spreads_file
from accelbench.platform.devices import parse_device
from accelbench.records.record import load_record, record_files
from accelbench.run.first_cells import first_cells, measured_alone

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKFLOW_PARTS = ("Snakefile", "workflow", "config", "scripts", "src", "profiles", "envs")
PRECISE = 0.05  # half-width, as a fraction of the median
COVERAGE = 0.90
IDLE_BUSY_SHARE = 0.20
LOADED_BUSY_SHARE = 0.90
BOLD_SHARE = 0.50
CLEAR_DIFFERENCE = 1.10  # best and runner-up medians a factor apart
MAKE_RUN_S = 240.0
# The tables whose cells are ratios of two cells, and the widest paired interval wanted
# at the median, as the factor x/ it spans each side of the ratio.
RATIO_TABLES = ("kernel_speedup", "train_speedup", "train_scaling")
PAIRED_FACTOR = 1.10
WALL_FILE = "wall_s.txt"  # beside a run's results: its wall time, for --judge


@dataclass(frozen=True)
class Target:
    """One figure of the study and whether it met its target (None: not judged)."""

    name: str
    found: str
    wanted: str
    met: bool | None


def fresh_copy(destination: Path) -> Path:
    """This checkout's workflow without results, as a fresh clone has it."""
    destination.mkdir(parents=True)
    for part in WORKFLOW_PARTS:
        source = REPO_ROOT / part
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(source, destination / part, ignore=ignore)
        else:
            shutil.copy2(source, destination / part)
    return destination


def snakemake(folder: Path, host: Path, *args: str, cpus: set[int] | None = None) -> None:
    """Snakemake of this environment in `folder`, on `cpus` only where given (its jobs
    inherit the affinity), keeping what a host keeps between measurements (its probes and
    its cells' spreads, in the temporary folder) in `host`; its console goes to ours."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "TMPDIR": str(host),
    }
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    command = [sys.executable, "-m", "snakemake", *args]
    done = subprocess.run(command, cwd=folder, env=env, preexec_fn=pin)
    if done.returncode:
        raise SystemExit(f"snakemake {' '.join(args)} in {folder} failed ({done.returncode})")


def run_workflow(
    folder: Path,
    host: Path,
    cores: int,
    configfiles: list[str],
    report: bool,
    cpus: set[int] | None = None,
) -> float:
    """The grid (and the report) in a fresh copy at `folder`, on `cpus` only where given,
    with the host's kept measurements in `host`; returns the wall time (s)."""
    fresh_copy(folder)
    extra = ["--configfile", *configfiles] if configfiles else []
    started = time.perf_counter()
    # As `make run` does: the records, the host's first cells again now that it has shown
    # its drift, and then the aggregation, once.
    snakemake(folder, host, "--cores", str(cores), *extra, "--omit-from", "tidy", cpus=cpus)
    spreads = HostSpreads.load(host / spreads_file().name)
    again = [str(path.relative_to(folder)) for path in first_cells(folder / "results", spreads)]
    forcerun = ["--forcerun", *again] if again else []
    snakemake(folder, host, "--cores", str(cores), *extra, *forcerun, cpus=cpus)
    if report:
        snakemake(folder, host, "--report", "results/report.html", *extra, cpus=cpus)
    wall_s = time.perf_counter() - started
    (folder / WALL_FILE).write_text(f"{wall_s}\n")
    return wall_s


def load_run(folder: Path) -> pd.DataFrame:
    """A run's tidy table (whose conditions include the runs the host slowed), with the
    runs each record took (its conditions; the tidy `runs` is the least asked) and whether
    its interval had the host's word (`host_known`: its recent cells' spread and drift,
    accelbench.measuring.rerun) or came from its own runs alone, as a host's first cells'."""
    frame, problems = compare.load_run(folder / "results")
    if problems:
        raise SystemExit(f"invalid records in {folder}: {problems[:3]}")
    runs, host_known = {}, {}
    for path in record_files(folder / "results"):
        record = load_record(path)
        runs[record["id"]] = (record.get("conditions") or {}).get("runs")
        host_known[record["id"]] = not measured_alone(record)
    return frame.assign(runs=frame["id"].map(runs), host_known=frame["id"].map(host_known))


def figure_columns(row: pd.Series) -> list[str]:
    """The figure-of-merit metrics of a record's family that it has."""
    family = FAMILIES.get(row["experiment"])
    names = family.precise_metrics if family else ()
    return [name for name in names if pd.notna(row.get(f"{name}_median"))]


def widest(row: pd.Series) -> float:
    """The widest relative half-width among a record's figures of merit."""
    return max(
        (
            statistics.relative_half_width(
                {part: row[f"{name}_{part}"] for part in ("median", "ci_low", "ci_high")}
            )
            for name in figure_columns(row)
        ),
        default=math.nan,
    )


def marked(row: pd.Series) -> bool:
    return tidy.flagged(row.get("busy")) or tidy.flagged(row.get("imprecise"))


def beyond_typical(ran: pd.DataFrame, widths: pd.Series) -> pd.Series:
    """Whether each record is more than precision.MARGIN times as wide as the median of its
    device kind's records in this run (kinds of fewer than rerun.LEAST_CELLS: never)."""
    kinds = ran["device"].map(lambda device: parse_device(str(device)).kind)
    typical = widths.groupby(kinds).transform(
        lambda group: group.median() if group.notna().sum() >= LEAST_CELLS else math.nan
    )
    return widths > precision.MARGIN * typical


@dataclass
class Coverage:
    """The rerun's medians against the first run's intervals: in all, and of the intervals
    made from a cell's own runs alone (`alone_`: the cells a host measures before it knows
    its spread and drift), with a line for each median outside."""

    inside: int = 0
    compared: int = 0
    alone_inside: int = 0
    alone_compared: int = 0
    outside: list[str] = field(default_factory=list)


def coverage(first: pd.DataFrame, rerun: pd.DataFrame) -> Coverage:
    """How many rerun medians landed inside the first run's intervals, and for each one
    outside how far the rerun moved against how wide the interval was."""
    again = rerun[rerun["status"] == "ok"].set_index("id")
    found = Coverage()
    for _, row in first[first["status"] == "ok"].iterrows():
        if row["id"] not in again.index:
            continue
        alone = not row.get("host_known", True)
        for name in figure_columns(row):
            median = again.loc[row["id"]].get(f"{name}_median")
            if pd.isna(median):
                continue
            low, high, centre = (row[f"{name}_{part}"] for part in ("ci_low", "ci_high", "median"))
            inside = low <= median <= high
            found.compared += 1
            found.inside += inside
            found.alone_compared += alone
            found.alone_inside += alone and inside
            if not inside:
                found.outside.append(
                    f"{row['id']} {name}: rerun {median / centre:.2f}x the first median, "
                    f"interval {low / centre:.2f}x to {high / centre:.2f}x"
                    + (" (from its own runs alone)" if alone else "")
                )
    return found


def clear_rows(table: pd.DataFrame, higher_is_better: bool) -> tuple[int, int]:
    """(rows with a bold winner, rows whose best and runner-up medians differ by more than
    CLEAR_DIFFERENCE) of a table built by accelbench.analysis.tables."""
    cells = pd.DataFrame(table.attrs.get("cells", []))
    bold = clear = 0
    if cells.empty:
        return 0, 0
    for _, row in cells[np.isfinite(cells["median"].astype(float))].groupby("row"):
        medians = sorted(row["median"].astype(float), reverse=higher_is_better)
        if len(medians) < 2:
            continue
        best, runner_up = medians[0], medians[1]
        ratio = best / runner_up if higher_is_better else runner_up / best
        if ratio > CLEAR_DIFFERENCE:
            clear += 1
            bold += bool(row["best"].any())
    return bold, clear


def contention_text(frame: pd.DataFrame) -> str:
    ran = frame[frame["status"] == "ok"]
    others = ran["other_cpus"].astype(float) if "other_cpus" in ran else pd.Series(dtype=float)
    busy = int(ran["busy"].map(tidy.flagged).sum()) if "busy" in ran else 0
    if others.dropna().empty:
        return "no contention recorded"
    slowed = ran["host_slowed_runs"].fillna(0).astype(int)
    runs = ran["runs"].fillna(1).astype(int)
    return (
        f"other CPUs median {others.median():.2f}, max {others.max():.2f}; "
        f"{busy} of {len(ran)} records busy; the host slowed {int(slowed.sum())} of "
        f"{int(runs.sum())} runs, at least half the runs of {int((2 * slowed >= runs).sum())} "
        "records"
    )


def share(part: int, whole: int) -> str:
    return f"{part} of {whole} ({part / whole:.0%})" if whole else f"{part} of 0"


def ratio_cells(folder: Path) -> pd.DataFrame:
    """The measured ratio cells of a run's tables (RATIO_TABLES), one row each: its table,
    row and column, median, interval, whether paired, and the factor x/ the interval
    spans each side (the geometric mean of high/median and median/low)."""
    found = []
    for name in RATIO_TABLES:
        path = folder / "results" / "tables" / f"{name}.csv"
        if path.is_file():
            table = pd.read_csv(path)
            found.append(table[table["status"] == "ok"].assign(table=name))
    if not found:
        return pd.DataFrame(columns=["table", "row", "device", "median", "ci_low", "ci_high"])
    cells = pd.concat(found, ignore_index=True)
    cells = cells[(cells["ci_low"] > 0) & (cells["ci_high"] > 0)]
    return cells.assign(
        paired=~cells["unpaired"].map(tidy.flagged),
        factor=np.sqrt(cells["ci_high"] / cells["ci_low"]),
    )


def ratio_figures(first: pd.DataFrame, rerun: pd.DataFrame) -> dict[bool, tuple[str, int, int]]:
    """For paired and unpaired ratio cells: (half-widths, rerun medians inside, compared)."""
    keys = ["table", "row", "device"]
    joined = first.merge(rerun[[*keys, "median"]], on=keys, suffixes=("", "_rerun"))
    inside = (joined["median_rerun"] >= joined["ci_low"]) & (
        joined["median_rerun"] <= joined["ci_high"]
    )
    figures = {}
    for paired in (True, False):
        factors = first.loc[first["paired"] == paired, "factor"]
        widths = (
            f"{len(factors)} cells, median x/{factors.median():.2f}, "
            f"90th percentile x/{factors.quantile(0.9):.2f}"
            if len(factors)
            else "no cells"
        )
        mine = joined["paired"] == paired
        figures[paired] = (widths, int((inside & mine).sum()), int(mine.sum()))
    return figures


def study(
    first: pd.DataFrame,
    rerun: pd.DataFrame,
    ratios: tuple[pd.DataFrame, pd.DataFrame],
    wall_s: float,
    judged_time: bool,
    loaded: bool,
):
    ran = first[first["status"] == "ok"]
    widths = ran.apply(widest, axis=1) if len(ran) else pd.Series(dtype=float)
    measured = widths.dropna()
    unmarked_wide = (
        ran[beyond_typical(ran, widths) & ~ran.apply(marked, axis=1)] if len(ran) else ran
    )
    busy = int(ran["busy"].map(tidy.flagged).sum()) if "busy" in ran else 0
    covered = coverage(first, rerun)
    inside, compared = covered.inside, covered.compared
    verdicts = compare.compare(first, rerun)
    regressions = verdicts[verdicts["verdict"] == compare.REGRESSION]
    kernel_time, _ = tables.comparison_table(first, "kernel")
    speedup, _ = tables.speedup_table(first, "kernel", "cpu1")
    bold_time, clear_time = clear_rows(kernel_time, higher_is_better=False)
    bold_speedup, clear_speedup = clear_rows(speedup, higher_is_better=True)
    bold, clear = bold_time + bold_speedup, clear_time + clear_speedup
    busy_wanted = f">= {LOADED_BUSY_SHARE:.0%}" if loaded else f"<= {IDLE_BUSY_SHARE:.0%}"
    busy_met = (
        busy >= LOADED_BUSY_SHARE * len(ran) if loaded else busy <= IDLE_BUSY_SHARE * len(ran)
    )
    targets = [
        Target(
            "wall time of the first run (grid and report)",
            f"{wall_s:.0f} s",
            f"<= {MAKE_RUN_S:.0f} s",
            wall_s <= MAKE_RUN_S if judged_time and not loaded else None,
        ),
        Target(
            "rerun medians inside the first run's intervals",
            share(inside, compared),
            f">= {COVERAGE:.0%}",
            (bool(compared) and inside >= COVERAGE * compared) if not loaded else None,
        ),
        Target(
            f"records flagged busy{' (planted load)' if loaded else ''}",
            share(busy, len(ran)),
            busy_wanted,
            bool(len(ran)) and busy_met,
        ),
        Target(
            f"records over {precision.MARGIN:g} times their kind's typical width, unmarked",
            f"{len(unmarked_wide)}"
            + (f" ({', '.join(unmarked_wide['id'])})" if len(unmarked_wide) else ""),
            "0",
            unmarked_wide.empty,
        ),
        Target(
            "`accelbench compare` regressions",
            f"{len(regressions)}"
            + (f" ({', '.join(regressions['id'])})" if len(regressions) else ""),
            "0",
            regressions.empty if not loaded else None,
        ),
        Target(
            f"kernel time/speedup rows with medians {CLEAR_DIFFERENCE - 1:.0%} apart "
            "that name a bold winner",
            f"{share(bold, clear)} (time table {bold_time} of {clear_time}, "
            f"speedup table {bold_speedup} of {clear_speedup})",
            f"> {BOLD_SHARE:.0%}",
            bool(clear) and bold > BOLD_SHARE * clear,
        ),
    ]
    by_pairing = ratio_figures(*ratios)
    paired_widths, paired_inside, paired_compared = by_pairing[True]
    paired = ratios[0][ratios[0]["paired"]]["factor"]
    targets += [
        Target(
            "paired ratio cells' interval at the median",
            paired_widths,
            f"<= x/{PAIRED_FACTOR:.2f}",
            (not paired.empty and paired.median() <= PAIRED_FACTOR) if not loaded else None,
        ),
        Target(
            "rerun ratio medians inside the first run's paired intervals",
            share(paired_inside, paired_compared),
            f">= {COVERAGE:.0%}",
            (bool(paired_compared) and paired_inside >= COVERAGE * paired_compared)
            if not loaded
            else None,
        ),
    ]
    imprecise = int(ran["imprecise"].map(tidy.flagged).sum()) if "imprecise" in ran else 0
    figures = [
        f"records within +-{PRECISE:.0%}: {share(int((measured <= PRECISE).sum()), len(measured))}",
        f"records flagged imprecise: {share(imprecise, len(ran))}",
        "half-widths of the figures of merit: "
        + (
            f"median +-{measured.median():.1%}, 90th percentile +-{measured.quantile(0.9):.1%}"
            if len(measured)
            else "none"
        ),
    ]
    figures.append(
        "rerun medians inside intervals from a cell's own runs alone (the host's first "
        f"cells): {share(covered.alone_inside, covered.alone_compared)}; with the host's "
        "spread and drift: "
        + share(covered.inside - covered.alone_inside, compared - covered.alone_compared)
    )
    unpaired_widths, unpaired_inside, unpaired_compared = by_pairing[False]
    figures.append(
        f"unpaired ratio cells: {unpaired_widths}; rerun ratio medians inside: "
        f"{share(unpaired_inside, unpaired_compared)}"
    )
    figures += [f"rerun outside: {line}" for line in covered.outside]
    return targets, widths, figures


def planted_load(count: int, cpus: set[int]) -> list[subprocess.Popen]:
    """`count` processes that spin on `cpus` until stopped: another user's load."""
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    return [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=pin)
        for _ in range(count)
    ]


def silent_slurm_controller() -> str | None:
    """A warning where `scontrol` is installed but no controller answers it: importing
    snakemake-executor-plugin-slurm asks it, so every Snakemake start then waits about 9 s,
    which a fresh machine (no Slurm) or a cluster (a controller) does not."""
    if not shutil.which("scontrol"):
        return None
    try:
        subprocess.run(["scontrol", "show", "config"], capture_output=True, timeout=2, check=True)
    except (subprocess.TimeoutExpired, subprocess.CalledProcessError):
        return (
            "warning: scontrol is installed but no Slurm controller answers it, so each "
            "Snakemake start waits about 9 s, counted in the wall time "
            "(tools/slurm-local/start.sh starts the local one)"
        )
    return None


def cpu_list(text: str) -> set[int]:
    """CPUs as taskset lists them: 2,3 or 2-3 or 0,4-5."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            first, _, last = part.partition("-")
            low, high = int(first), int(last or first)
            if high < low:
                raise ValueError(part)
            cpus.update(range(low, high + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a CPU list such as 2,3 or 2-3: {text!r}") from None
    if not cpus:
        raise argparse.ArgumentTypeError("no CPUs")
    return cpus


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--configfile", action="append", default=[], help="merged over the default grid"
    )
    parser.add_argument("--cores", type=int, help="default: the CPUs it runs on")
    parser.add_argument(
        "--cpus",
        type=cpu_list,
        help="run on these CPUs only, e.g. 2,3 or 2-3 (default: those this process may use)",
    )
    parser.add_argument("--out", type=Path, help="keep both runs here (default: a temporary one)")
    parser.add_argument(
        "--load", type=int, default=0, help="processes spinning on the same CPUs during both runs"
    )
    parser.add_argument(
        "--judge",
        action="store_true",
        help="run nothing: judge the two runs an earlier study kept in --out",
    )
    args = parser.parse_args()
    if args.judge and not args.out:
        parser.error("--judge needs --out, the folder of the runs to judge")
    cpus = args.cpus or os.sched_getaffinity(0)
    unknown = cpus - os.sched_getaffinity(0)
    if unknown:
        parser.error(f"--cpus: this process may not use CPU {', '.join(map(str, sorted(unknown)))}")
    cores = args.cores or len(cpus)
    folder = args.out or Path(tempfile.mkdtemp(prefix="precision-study-"))
    configfiles = [str(Path(path).resolve()) for path in args.configfile]
    if args.judge:
        wall_s = float((folder / "first" / WALL_FILE).read_text())
    else:
        listed = ",".join(map(str, sorted(cpus)))
        on = f" on CPUs {listed}, {cores} core{'s' * (cores != 1)}" if args.cpus else ""
        if warning := silent_slurm_controller():
            print(warning, file=sys.stderr)
        # Short: the fork server's socket lies in it.
        host = Path(tempfile.mkdtemp(prefix="ab-host-"))
        load = planted_load(args.load, cpus)
        try:
            print(f"first run in {folder / 'first'}{on}", file=sys.stderr)
            wall_s = run_workflow(
                folder / "first", host, cores, configfiles, report=True, cpus=args.cpus
            )
            print(f"rerun in {folder / 'rerun'}{on}", file=sys.stderr)
            run_workflow(folder / "rerun", host, cores, configfiles, report=False, cpus=args.cpus)
        finally:
            for process in load:
                process.kill()
            shutil.rmtree(host, ignore_errors=True)
    first, rerun = load_run(folder / "first"), load_run(folder / "rerun")
    ratios = ratio_cells(folder / "first"), ratio_cells(folder / "rerun")
    targets, widths, figures = study(
        first, rerun, ratios, wall_s, judged_time=not configfiles, loaded=args.load > 0
    )

    print("| record | figure of merit +- | runs | marks |")
    print("|:---|---:|---:|:---|")
    shown = first.loc[widths.index].assign(width=widths).sort_values("width", ascending=False)
    for _, row in shown.iterrows():
        marks = ", ".join(flag for flag in ("busy", "imprecise") if tidy.flagged(row.get(flag)))
        runs = "" if pd.isna(row["runs"]) else f"{int(row['runs'])}"
        print(f"| {row['id']} | {row['width']:.1%} | {runs} | {marks} |")
    print()
    print(f"contention, first run: {contention_text(first)}")
    print(f"contention, rerun:     {contention_text(rerun)}")
    for figure in figures:
        print(figure)
    for target in targets:
        verdict = {True: "met", False: "MISSED", None: "not judged here"}[target.met]
        print(f"{target.name}: {target.found} (target {target.wanted}): {verdict}")
    print(f"records of both runs: {folder}", file=sys.stderr)
    return 1 if any(target.met is False for target in targets) else 0


if __name__ == "__main__":
    sys.exit(main())

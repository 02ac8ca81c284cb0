"""Benchmark: how far apart the runs of one kernel fall when each run places its arrays
afresh (accelbench.measuring.placement), against runs that all inherit their parent's placement.

For each of several parent processes, forks `--runs` runs of one kernel cell the way a
measurement does (after measurement.preload, inputs checked against the reference),
times each with its own median of short blocks, and prints every run's time. With
`inherited`, placement is switched off, so every run of a parent meets the parent's
heap; with `per-run`, each run draws its own. The figure to read is the spread: the
ratio of the slowest to the fastest run median, within each parent and across all of
them. Placement per run is working when the spread within a parent is about the spread
across parents: the runs of one measurement then see what separate processes see.
Exits 1 when a run fails its reference check (it would then time a wrong result).

    python benchmarks/placement_spread.py [--cell matmul/numba/float32/128/cpu1]
        [--parents 3] [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import sys
import time

import numpy as np

from accelbench.families import FAMILIES
from accelbench.job import measurement
from accelbench.kernels import host_dtype, kernels, measure
from accelbench.measuring import placement
from accelbench.platform.devices import cpu_threads, parse_device


def run_median(cell: str) -> float:
    """One run: the kernel checked, then the median of seven blocks of about 30 ms (s per call)."""
    kernel, backend, dtype, size, device = cell.split("/")
    dev = parse_device(device)
    with cpu_threads(dev):
        checked = measure.check_kernel(
            kernels()[kernel], backend, dev, host_dtype(dtype), int(size), 0
        )
        if not isinstance(checked, measure.Checked):
            raise SystemExit(f"{cell}: {checked.reason}")
        run = checked.prepared.run
        started, calls = time.perf_counter(), 0
        while time.perf_counter() - started < 0.2:
            run()
            calls += 1
        number = max(1, calls // 7)
        blocks = []
        for _ in range(7):
            started = time.perf_counter()
            for _ in range(number):
                run()
            blocks.append((time.perf_counter() - started) / number)
    return statistics.median(blocks)


def forked_runs(cell: str, runs: int) -> list[float]:
    """`runs` run medians, each in a child forked from this process."""
    medians = []
    for _ in range(runs):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            with os.fdopen(write, "wb") as pipe:
                pickle.dump(run_median(cell), pipe)
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(pid, 0)
        if not data or os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{cell}: a run failed (exit {os.waitstatus_to_exitcode(status)})")
        medians.append(pickle.loads(data))
    return medians


def inherit_placement() -> None:
    """Every array where the allocator puts it, as before runs placed their own."""
    placement.copy = lambda x: np.array(x) if isinstance(x, np.ndarray) else x
    placement.empty = lambda shape, dtype: np.empty(shape, dtype)


def parent(cell: str, runs: int, mode: str) -> list[float]:
    """One parent process (forked from this one, so that each parent has a heap history of
    its own), its runs' medians."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        np.empty(int.from_bytes(os.urandom(2), "little") * 8)  # a heap history of its own
        if mode == "inherited":
            inherit_placement()
        with os.fdopen(write, "wb") as pipe:
            pickle.dump(forked_runs(cell, runs), pipe)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    if not data:
        raise SystemExit(f"{cell}: a parent process failed")
    return pickle.loads(data)


def spread(values: list[float]) -> float:
    return max(values) / min(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cell", default="matmul/numba/float32/128/cpu1")
    parser.add_argument("--parents", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    measurement.preload(FAMILIES["kernel"])
    print(f"{args.cell}: run medians in us, {args.runs} runs per parent process")
    for mode in ("inherited", "per-run"):
        every, within = [], []
        for index in range(args.parents):
            medians = parent(args.cell, args.runs, mode)
            every += medians
            within.append(spread(medians))
            shown = " ".join(f"{1e6 * m:6.1f}" for m in medians)
            print(f"  {mode:9s} parent {index + 1}: {shown}")
        print(
            f"  {mode:9s} slowest/fastest run: within a parent at most {max(within):.2f}, "
            f"across parents {spread(every):.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

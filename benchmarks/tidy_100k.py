"""Benchmark: aggregate 100,000 synthetic valid records into the tidy table.

Prints the time of `tidy.collect` (read, validate, flatten) and of `tidy.write`
(Parquet + CSV) separately and together, wall-clock and CPU; the target is under
20 s on the development machine (2 cores). The CPU time is the figure to trust
when other work shares the machine. The records are written once into a temporary
directory, each at the path its id names (as the workflow writes them), shaped
like the ones experiments write (same keys, statistics, conditions and
provenance, pretty-printed JSON), half kernel and half training records with a
few non-ok statuses among them. Every record must be read: the benchmark fails
(exit status 1) when any is rejected, since it would then time the rejections.

    python benchmarks/tidy_100k.py [--records N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path

from accelbench.analysis import tidy
from accelbench.families.kernel import KernelExperiment
from accelbench.families.train import TrainExperiment
from accelbench.measuring.statistics import rate_from_time, summarize, value
from accelbench.records.record import make_record

STATUSES = ("ok",) * 17 + ("unavailable", "oom", "failed")


def _provenance(rng: random.Random, device: str) -> dict:
    return {
        "host": f"node{rng.randrange(64):02d}",
        "platform": "Linux-6.1.0-x86_64-with-glibc2.36",
        "cpu_model": "AMD EPYC 7763 64-Core Processor",
        "cpu_count": 128,
        "usable_cpus": 16,
        "python": "3.11.9",
        "libraries": {"numpy": "2.4.6", "torch": "2.14.1", "numba": "0.68.1"},
        "accelerator": {
            "cuda_runtime": "12.8",
            "cudnn": 91000,
            "gpus": ["NVIDIA H100 80GB HBM3"] if device.startswith("cuda") else [],
            "driver": "570.86",
        },
        "cuda_visible_devices": None,
        "git": {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": False},
        "config_hash": "0123456789abcdef",
        "slurm": {"job_id": str(rng.randrange(10**6)), "partition": "gpu", "node": "node01"},
        "seed": 0,
        "started": "2024-05-01T12:00:00.000+00:00",
        "finished": "2024-05-01T12:00:05.000+00:00",
    }


def _conditions(rng: random.Random) -> dict:
    """What the machine did and how precise the measurement ended, as measure_watched keeps."""
    reached = rng.uniform(0.005, 0.08)
    return {
        "busy": rng.random() < 0.02,
        "other_cpus": rng.uniform(0.0, 0.3),
        "steal_cpus": 0.0,
        "runs": rng.randint(3, 12),
        "reached_half_width": reached,
        "half_width_target": 0.05,
        "imprecise": reached > 0.05,
        "imprecise_reason": "time budget of 10 s spent after 12 runs" if reached > 0.05 else None,
    }


def _record(index: int, rng: random.Random) -> dict:
    status = rng.choice(STATUSES)
    samples = [rng.uniform(1e-3, 2e-3) for _ in range(10)]
    time_stats = summarize(samples, "s")
    device = rng.choice(("cpu1", "cpu2", "cpu4", "cpu16", "cuda1", "cuda4"))
    if index % 2:
        params = {
            "kernel": rng.choice(("matmul", "saxpy", "stencil", "fft1d")),
            "device": device,
            "backend": rng.choice(("numpy", "numba", "torch", "cupy")),
            "dtype": rng.choice(("float32", "float64")),
            "size": index + 1,
            "seed": 0,
            "min_run_time": 0.3,
            "samples": 10,
        }
        metrics = {
            "time": time_stats,
            "gflops": rate_from_time(time_stats, 2.0, "GFLOP/s"),
            "bandwidth": rate_from_time(time_stats, 0.5, "GB/s"),
            "arithmetic_intensity": value(4.0, "flop/byte"),
            "first_call_time": value(0.01, "s"),
            "threads": value(1, "threads"),
        }
        check = {"passed": True, "relative_error": 1e-7, "tolerance": 1e-4, "reference": "numpy"}
        experiment, exp_id = "kernel", KernelExperiment(**grid_params(KernelExperiment, params)).id
    else:
        params = {
            "model": rng.choice(("resnet18", "resnet50", "alexnet", "lstm")),
            "device": device,
            "precision": rng.choice(("fp32", "bf16")),
            "strategy": "single",
            "batch": index + 1,
            "steps": 20,
            "warmup_steps": 3,
            "image_size": 64,
            "seed": 0,
        }
        metrics = {
            "time_per_batch": time_stats,
            "throughput": rate_from_time(time_stats, 16, "samples/s"),
            "peak_memory": value(123456789, "bytes"),
            "loss_first": value(2.5, "loss"),
            "loss_last": value(2.1, "loss"),
            "parameters": value(11_000_000, "count"),
        }
        check = None
        experiment, exp_id = "train", TrainExperiment(**grid_params(TrainExperiment, params)).id
    ok = status == "ok"
    return make_record(
        experiment=experiment,
        experiment_id=exp_id,
        status=status,
        params=params,
        provenance=_provenance(rng, device),
        metrics=metrics if ok else None,
        check=check if ok else None,
        reason=None if ok else "synthetic reason",
        conditions=_conditions(rng) if ok else None,
    )


def grid_params(kind: type, params: dict) -> dict:
    """The params that name a cell of `kind` (its result path)."""
    return {field.name: params[field.name] for field in fields(kind)}


def write_records(root: Path, count: int) -> list[Path]:
    """`count` record files at their result paths under `root` (no fsync: setup, not
    measured); every size and batch differs, so no two share a cell."""
    rng = random.Random(0)
    paths = []
    for index in range(count):
        record = _record(index, rng)
        path = root / f"{record['id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(record, indent=2, sort_keys=True, allow_nan=False)
        path.write_text(text + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="write the records here and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="accelbench-tidy-") as scratch:
        root = args.keep or Path(scratch)
        started = time.perf_counter()
        paths = write_records(root / "records", args.records)
        print(f"wrote {len(paths)} records in {time.perf_counter() - started:.1f} s (setup)")
        load = os.getloadavg()[0]

        started, cpu = time.perf_counter(), time.process_time()
        frame, problems = tidy.collect(paths)
        collected, collected_cpu = time.perf_counter() - started, time.process_time() - cpu
        tidy.write(frame, root / "tidy.parquet", root / "tidy.csv")
        total, total_cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"load average before: {load:.1f} (other work on the machine slows the wall time)")
    print(
        f"tidy.collect: {collected:.2f} s wall, {collected_cpu:.2f} s CPU "
        f"({len(frame)} rows x {len(frame.columns)} columns, {len(problems)} invalid)"
    )
    print(
        f"tidy.write:   {total - collected:.2f} s wall, {total_cpu - collected_cpu:.2f} s CPU "
        "(Parquet + CSV)"
    )
    print(
        f"total:        {total:.2f} s wall, {total_cpu:.2f} s CPU for {args.records} records "
        "(target < 20 s)"
    )
    if problems:
        print(f"FAILED: {len(problems)} of {args.records} records were rejected, e.g.:")
        for _, problem in problems[:3]:
            print(f"  {problem}")
        return 1
    if len(frame) != args.records:
        print(f"FAILED: {len(frame)} rows for {args.records} records")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A grid's records planted without measuring: one plausible record per planned experiment.

Tables, figures, the summary and the report are built from these by the real rules, so
that tests of paper-ready output (LaTeX, the browser) see the files a grid makes, at the
cost of the aggregation alone. Times follow a simple model (work over a rate that grows
with the threads, a GPU far faster), spread 1% from sample to sample; energy as in
records.with_energy. Nothing here is a measurement.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from accelbench import config as accelbench_config
from accelbench import grid
from accelbench.datasci import workloads
from accelbench.families.datasci import DatasciExperiment
from accelbench.families.kernel import KernelExperiment
from accelbench.families.roof import RoofExperiment
from accelbench.families.train import TrainExperiment
from accelbench.kernels import kernels
from accelbench.measuring.statistics import rate_from_time, summarize, value
from accelbench.platform.devices import parse_device
from accelbench.records.record import make_record, write_record
from accelbench.studies.shi2016 import paper as shi2016_paper

from records import device_record, scaled, train_record, with_energy

# Work per second of one CPU thread, and how much faster a GPU is.
FLOPS_PER_THREAD = 5e9
BYTES_PER_THREAD = 4e9
GPU_FACTOR = 40.0
OVERHEAD_S = {"python": 1e-3, "cpu": 5e-6, "cuda": 2e-5}


def _speed(device: str) -> float:
    """Units of one CPU thread a device is worth (threads scale at 0.8 power)."""
    parsed = parse_device(device)
    return GPU_FACTOR * parsed.units if parsed.is_gpu else parsed.units**0.8


def kernel(exp: KernelExperiment) -> tuple[str, dict]:
    spec = kernels()[exp.kernel]
    itemsize = np.dtype(exp.dtype if exp.dtype != "bfloat16" else "float16").itemsize
    flops, moved = spec.flops(exp.size), spec.bytes_moved(exp.size, itemsize)
    kind = "python" if exp.backend == "python" else parse_device(exp.device).kind
    seconds = OVERHEAD_S[kind] + max(flops / FLOPS_PER_THREAD, moved / BYTES_PER_THREAD) / (
        _speed(exp.device) * (0.01 if kind == "python" else 1.0)
    )
    time = summarize(scaled(seconds, 1.0), "s")
    metrics = {
        "time": time,
        "gflops": rate_from_time(time, flops / 1e9, "GFLOP/s"),
        "bandwidth": rate_from_time(time, moved / 1e9, "GB/s"),
        "arithmetic_intensity": value(flops / moved if moved else 0.0, "flop/byte"),
        "first_call_time": value(10 * seconds, "s"),
        "threads": value(parse_device(exp.device).units, "threads"),
    }
    params = {
        "kernel": exp.kernel,
        "device": exp.device,
        "backend": exp.backend,
        "dtype": exp.dtype,
        "size": exp.size,
        "seed": 0,
        "min_run_time": 0.1,
        "samples": 10,
    }
    check = {"passed": True, "relative_error": 1e-7, "tolerance": 1e-4, "reference": "numpy"}
    return device_record("kernel", exp.id, "ok", params, metrics, check, None)


def roof(exp: RoofExperiment) -> tuple[str, dict]:
    speed = _speed(exp.device)
    one = summarize(scaled(1.0, 1.0), "s")
    metrics = {
        "peak_gflops": rate_from_time(one, FLOPS_PER_THREAD / 1e9 * speed, "GFLOP/s"),
        "memory_bandwidth": rate_from_time(one, BYTES_PER_THREAD / 1e9 * speed, "GB/s"),
    }
    if parse_device(exp.device).is_gpu:
        metrics["h2d_bandwidth"] = rate_from_time(one, 25.0, "GB/s")
        metrics["d2h_bandwidth"] = rate_from_time(one, 20.0, "GB/s")
    params = {"device": exp.device, "dtype": exp.dtype, "gemm_size": 1024}
    return exp.id, make_record(
        experiment="roof",
        experiment_id=exp.id,
        status="ok",
        params=params,
        provenance={},
        metrics=metrics,
    )


def datasci(exp: DatasciExperiment) -> tuple[str, dict]:
    item = workloads()[exp.workload].item
    seconds = OVERHEAD_S[parse_device(exp.device).kind] + 2e-7 * exp.size / _speed(exp.device)
    time = summarize(scaled(seconds, 1.0), "s")
    metrics = {"time": time, "item_throughput": rate_from_time(time, exp.size, "items/s")}
    params = {
        "workload": exp.workload,
        "device": exp.device,
        "backend": exp.backend,
        "size": exp.size,
        "seed": 0,
        "min_run_time": 0.1,
        "samples": 10,
        "item": item,
    }
    check = {"passed": True, "relative_error": 0.0, "tolerance": 0.0, "reference": "pandas"}
    return device_record("datasci", exp.id, "ok", params, metrics, check, None)


def train(exp: TrainExperiment) -> tuple[str, dict]:
    seconds = 0.02 * exp.batch / _speed(exp.device)
    exp_id, record = train_record(
        exp.model,
        exp.device,
        samples=scaled(seconds, 1.0),
        precision=exp.precision,
        strategy=exp.strategy,
        batch=exp.batch,
    )
    paper = next(
        (network for network in shi2016_paper.NETWORKS if network.model == exp.model), None
    )
    if paper is not None and paper.batch == exp.batch:
        record["params"]["options"] = dict(paper.options)
    return exp_id, record


MAKERS = {"kernel": kernel, "roof": roof, "datasci": datasci, "train": train}


def plant(results: Path, configfiles: list[Path]) -> list[str]:
    """Write one planted record for every experiment the config files plan, under
    `results` (the workflow's results/); returns their ids."""
    planned = grid.expand(accelbench_config.load(configfiles)).experiments
    made = [MAKERS[exp.family](exp) for exp in planned]
    roofs = [made for exp, made in zip(planned, made, strict=True) if exp.family == "roof"]
    timed = [made for exp, made in zip(planned, made, strict=True) if exp.family != "roof"]
    records = [*roofs, *with_energy(timed, unreadable=())]  # roofs measure no energy
    for exp_id, record in records:
        write_record(results / f"{exp_id}.json", record)
    return [exp_id for exp_id, _ in records]

"""The cluster-analysis rules in the workflow: what is planned when, and real local runs.

The queue-wait part needs Slurm or a sacct dump, so the default target leaves
it out; the real query against a running Slurm is in test_cluster_slurm.py.
"""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest

from accelbench.measuring.statistics import rate_from_time, summarize, value
from accelbench.records.record import make_record, write_record

from conftest import REPO_ROOT, snakemake

pytestmark = pytest.mark.workflow

DUMP = REPO_ROOT / "tests" / "data" / "sacct_parsing_cases.txt"
QUEUE_TABLE = "results/tables/queue_wait_cpu_hours.md"
OFFLOAD_TABLE = "results/tables/offload_break_even.md"
# A grid whose records the test writes itself, so no benchmark runs.
RECORDS_CONFIG = """\
kernels:
  devices: [cpu1, cuda1]
  backends: [numpy, torch]
  dtypes: [float64]
  sizes:
    matmul: [64, 256]
    saxpy: []
    mandelbrot: []
    reduction: []
    stencil: []
    fft1d: []
    fft2d: []
    transfer-d2d: []
train:
  devices: [cpu1]
  batch_sizes:
    resnet18: [2]
    fcn: []
    lstm: []
datasci:
  devices: []
"""


def plan(workflow_dir, *targets, config=None) -> dict[str, int]:
    """The 'Job stats' table of a dry run (tiny grid, plus `config`) as {rule: count}."""
    configs = ["config/tiny.yaml", *([config] if config else [])]
    done = snakemake(workflow_dir, "-n", *targets, "--configfile", *configs)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    stats = (done.stdout + done.stderr).split("Job stats:", 1)[1]
    return {
        name: int(count)
        for name, count in re.findall(r"^(\w+)\s+(\d+)$", stats, flags=re.MULTILINE)
    }


def write_config(workflow_dir, name, text):
    (workflow_dir / "config" / name).write_text(text)
    return f"config/{name}"


def test_default_target_has_the_offload_analysis_where_kernels_run_on_a_gpu_and_no_sacct(
    workflow_dir,
):
    jobs = plan(workflow_dir, config=write_config(workflow_dir, "gpu.yaml", RECORDS_CONFIG))
    assert jobs["offload_break_even"] == jobs["kernel_crossover"] == 1
    assert "queue_wait" not in jobs and "sacct_query" not in jobs
    # The tiny grid's kernels run on a CPU only: nothing to offload, no crossover.
    jobs = plan(workflow_dir)
    assert "offload_break_even" not in jobs and "kernel_crossover" not in jobs


def test_queue_wait_on_demand_queries_sacct(workflow_dir):
    config = write_config(workflow_dir, "q.yaml", "cluster_analysis:\n  queue_wait: true\n")
    jobs = plan(workflow_dir, config=config)
    assert jobs["sacct_query"] == jobs["queue_wait"] == 1
    # Named as a target, without the switch: the same two jobs, nothing else.
    assert plan(workflow_dir, QUEUE_TABLE) == {"sacct_query": 1, "queue_wait": 1, "total": 2}


def test_queue_wait_from_a_dump_needs_no_sacct(workflow_dir):
    shutil.copy(DUMP, workflow_dir / "dump.txt")
    config = write_config(
        workflow_dir, "q.yaml", "cluster_analysis:\n  queue_wait: true\n  sacct_dump: dump.txt\n"
    )
    jobs = plan(workflow_dir, config=config)
    assert jobs["queue_wait"] == 1 and "sacct_query" not in jobs


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "cluster_analysis:\n  cpu_hour_bins: [16, 4]\n",
            "config key cluster_analysis.cpu_hour_bins: bin edges must increase, got [16, 4]",
        ),
        ("cluster_analysis:\n  sinse: now\n", "'sinse' is not one of ['queue_wait', 'sacct_dump'"),
    ],
)
def test_bad_cluster_config_stops_before_any_job(workflow_dir, text, message):
    done = snakemake(workflow_dir, "-n", "--configfile", write_config(workflow_dir, "b.yaml", text))
    assert done.returncode != 0
    assert message in done.stdout + done.stderr


def test_queue_wait_run_from_the_shipped_dump(workflow_dir):
    shutil.copy(DUMP, workflow_dir / "dump.txt")
    config = write_config(workflow_dir, "q.yaml", "cluster_analysis:\n  sacct_dump: dump.txt\n")
    done = snakemake(workflow_dir, QUEUE_TABLE, "--cores", "1", "--configfile", config)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = workflow_dir / "results"
    table = (results / "tables" / "queue_wait_cpu_hours.md").read_text(encoding="utf-8")
    assert "| < 4 | 60 s (45 s – 8.0 min); n = 3 (+1 not started) |" in table
    assert "dump.txt (28 lines: 17 job rows, 3 job steps skipped, 9 unreadable)" in table
    # One header rule per tabular (a table wider than the page is split into several).
    latex = (results / "tables" / "queue_wait_gb_hours.tex").read_text()
    assert latex.count(r"\midrule") == latex.count(r"\begin{tabular}") >= 1
    for suffix in (".pdf", ".png"):
        assert (results / "figures" / f"queue_wait{suffix}").stat().st_size > 0
    assert len(pd.read_csv(results / "cluster" / "sacct_jobs.csv")) == 17
    assert list(pd.read_csv(results / "cluster" / "sacct_problems.csv")["line"]) == list(
        range(21, 30)
    )
    log = (results / "logs" / "cluster" / "queue_wait.log").read_text()
    assert "line 22 unreadable (memory 'lots' is not a Slurm size" in log


def kernel_record(device, backend, n):
    flops, nbytes = 2.0 * n**3, 24.0 * n**2
    seconds = flops / (1e12 if device == "cuda1" else 1e11)
    time = summarize([seconds] * 5, "s")
    metrics = {
        "time": time,
        "gflops": rate_from_time(time, flops / 1e9, "GFLOP/s"),
        "arithmetic_intensity": value(flops / nbytes, "flop/byte"),
    }
    if device == "cuda1":
        metrics["end_to_end_time"] = summarize([seconds + nbytes / 1e10] * 5, "s")
    return make_record(
        experiment="kernel",
        experiment_id=f"kernels/matmul/{device}/{backend}/float64/n{n}",
        status="ok",
        params={"kernel": "matmul", "device": device, "backend": backend, "dtype": "float64"}
        | {"size": n},
        metrics=metrics,
        check={"passed": True},
        provenance={},
    )


def roof_record(device):
    """A measured roof; on the GPU with 10 GB/s each way, the bandwidth of the hand case."""
    peak = 1000.0 if device == "cuda1" else 100.0
    metrics = {
        "peak_gflops": summarize([peak] * 5, "GFLOP/s"),
        "memory_bandwidth": summarize([peak / 10] * 5, "GB/s"),
    }
    if device == "cuda1":
        metrics |= {
            name: summarize([10.0] * 5, "GB/s") for name in ("h2d_bandwidth", "d2h_bandwidth")
        }
    return make_record(
        experiment="roof",
        experiment_id=f"roofs/{device}/float64",
        status="ok",
        params={"device": device, "dtype": "float64"},
        metrics=metrics,
        provenance={},
    )


def test_offload_run_on_fixed_records(workflow_dir):
    config = write_config(workflow_dir, "records.yaml", RECORDS_CONFIG)
    for device, backend in (("cpu1", "numpy"), ("cpu1", "torch"), ("cuda1", "torch")):
        for n in (64, 256):
            record = kernel_record(device, backend, n)
            write_record(workflow_dir / "results" / f"{record['id']}.json", record)
    for device in ("cpu1", "cuda1"):
        record = roof_record(device)
        write_record(workflow_dir / "results" / f"{record['id']}.json", record)
    train = make_record(
        experiment="train",
        experiment_id="train/resnet18/cpu1/fp32/single/bs2",
        status="ok",
        params={"model": "resnet18", "device": "cpu1", "precision": "fp32", "strategy": "single"}
        | {"batch": 2},
        metrics={"time_per_batch": summarize([0.1] * 3, "s")},
        provenance={},
    )
    write_record(workflow_dir / "results" / f"{train['id']}.json", train)

    done = snakemake(workflow_dir, OFFLOAD_TABLE, "--cores", "1", "--configfile", config)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    said = done.stdout + done.stderr
    for rule in ("kernel_benchmark", "roof_benchmark", "train_benchmark", "datasci_benchmark"):
        assert rule not in said  # nothing was measured, one cell at a time
    assert "compared_" not in said  # or as a comparison group
    table = (workflow_dir / OFFLOAD_TABLE).read_text(encoding="utf-8")
    assert "| matmul | float64 | cuda1 | cpu1 numpy | 100 | 1,000 |" in table
    assert "No overlap of copy and compute" in table
    # W = 10 GB/s from the planted roof: I* = 100 * 1000 / (10 * (1000 - 100)) = 11.1.
    assert "| 10 |" in table and "11.1" in table
    figure = workflow_dir / "results" / "figures" / "offload_break_even.pdf"
    assert figure.read_bytes().startswith(b"%PDF")

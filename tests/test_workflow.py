"""The Snakemake workflow itself: planning, bad input, and a real local run of a tiny grid."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from accelbench import grid
from accelbench.analysis import fillable

from conftest import planned_cells, planned_jobs, snakemake
from refusals import BAD_CONFIGS, BAD_TARGETS

pytestmark = pytest.mark.workflow

KERNEL_TARGET = "results/kernels/matmul/cpu1/numpy/float64/n32.json"
# The comparison group that measures KERNEL_TARGET with its other backend.
MATMUL_GROUP = grid.group_rule("kernel/cpu/matmul/float64/32")
TRAIN_TARGET = "results/train/resnet18/cpu1/fp32/single/bs2.json"


def test_default_grid_plans_every_cell(workflow_dir):
    done = snakemake(workflow_dir, "-n")
    assert done.returncode == 0, done.stderr
    jobs = planned_jobs(done.stdout + done.stderr)
    # config/config.yaml: matmul on 2 devices x 5 backends x 2 sizes (float32), the other
    # kernels on a few cells each (see its overrides), jax on reduction; roofs for 2 devices
    # in float32; 3 models x (single on cpu1 and cpu2, ddp on cpu2); 9 data science cells.
    assert planned_cells(done.stdout + done.stderr) == {
        "kernel": 20 + 18 + 1,
        "roof": 2,
        "train": 9,
        "datasci": 9,
    }
    # The cells a table row compares, measured together: each set in one job.
    assert jobs[grid.group_rule("kernel/cpu/matmul/float32/512")] == 1
    assert jobs["roof_benchmark"] == 2
    assert jobs["tidy"] == jobs["tables"] == jobs["figures"] == jobs["provenance"] == 1
    assert jobs["roofline"] == 1
    # CPU only: no GPU to offload to or cross over with.
    assert "kernel_crossover" not in jobs and "offload_break_even" not in jobs


@pytest.mark.parametrize(
    "target",
    [
        KERNEL_TARGET,
        TRAIN_TARGET,
        "results/kernels/matmul/cuda1/cupy/float32/n4096.json",
        "results/kernels/transfer-h2d-pinned/cuda1/torch/bfloat16/n1048576.json",
        "results/roofs/cuda1/float16.json",
        "results/datasci/pagerank/cuda1/cugraph/n1000000.json",
    ],
)
def test_one_result_path_plans_exactly_one_job(workflow_dir, target):
    done = snakemake(workflow_dir, "-n", target)
    assert done.returncode == 0, done.stderr
    jobs = planned_jobs(done.stdout + done.stderr)
    assert jobs.pop("total") == 1
    assert sum(jobs.values()) == 1


# Each way a target is refused, once through Snakemake: a part no catalogue knows (the rule's
# input function), a cell the grid excludes (the same, with the config) and a path of no
# record's shape (the Snakefile's target check). Every message: tests/test_grid.py.
@pytest.mark.parametrize(
    ("target", "message"),
    [BAD_TARGETS[kind] for kind in ("unknown kernel", "CPU backend on a GPU", "misspelt family")],
)
def test_bad_target_names_the_wrong_part(workflow_dir, target, message):
    done = snakemake(workflow_dir, "-n", target)
    assert done.returncode != 0
    assert message in done.stdout + done.stderr
    assert not (workflow_dir / "results").exists()


def test_an_absolute_target_is_told_the_path_to_name(workflow_dir):
    target = workflow_dir / KERNEL_TARGET
    done = snakemake(workflow_dir, "-n", str(target))
    assert done.returncode != 0
    assert f"name targets relative to the workflow's folder {workflow_dir}: {KERNEL_TARGET}" in (
        done.stdout + done.stderr
    )


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "results/train/alexnet/cpu1/fp32/single/bs4.json",
            "alexnet needs image_size >= 63 (its poolings); the config gives 32",
        ),
        (
            "results/train/resnet50/cpu2/fp32/ddp/bs2.json",
            "resnet50's BatchNorm would normalise over 1 value per channel (1 sample per process",
        ),
    ],
)
def test_a_target_the_config_makes_impossible_is_refused(workflow_dir, target, message):
    done = snakemake(workflow_dir, "-n", target, "--configfile", "config/tiny.yaml")
    assert done.returncode != 0
    assert message in done.stdout + done.stderr


# Each check of the config once through Snakemake: the schema, the names the package
# knows, and a value's bounds with the file that set it named. Every message:
# tests/test_config.py.
@pytest.mark.parametrize(
    ("config", "message"),
    [BAD_CONFIGS[kind] for kind in ("unknown key", "unknown backend", "below its minimum")],
)
def test_bad_config_stops_before_any_job(workflow_dir, config, message):
    (workflow_dir / "config" / "bad.yaml").write_text(config)
    done = snakemake(workflow_dir, "-n", "--configfile", "config/bad.yaml")
    assert done.returncode != 0
    assert message in done.stdout + done.stderr


def test_lint_is_clean(workflow_dir):
    done = snakemake(workflow_dir, "--lint")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Congratulations, your workflow is in a good condition!" in done.stdout + done.stderr


def test_a_grid_with_multi_node_devices_asks_for_the_node_scaling_outputs(workflow_dir):
    (workflow_dir / "config" / "nodes.yaml").write_text(
        "train:\n  devices: [cpu2, 2x2cpu]\n  strategies: [ddp]\n"
        "  batch_sizes: {fcn: [8], resnet18: []}\n"
    )
    done = snakemake(workflow_dir, "-n", "--configfile", "config/tiny.yaml", "config/nodes.yaml")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    planned = set(re.findall(r"results/\w+/train_node_scaling\.\w+", done.stdout))
    assert planned == {
        *(f"results/tables/train_node_scaling.{ext}" for ext in ("md", "tex", "csv", "html")),
        *(f"results/figures/train_node_scaling.{ext}" for ext in ("pdf", "png")),
    }


def test_local_run_of_tiny_grid_end_to_end(workflow_dir):
    done = snakemake(
        workflow_dir,
        "--cores",
        "2",
        "--configfile",
        "config/tiny.yaml",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = workflow_dir / "results"
    records = sorted(results.glob("kernels/**/*.json")) + sorted(results.glob("train/**/*.json"))
    records += sorted(results.glob("roofs/**/*.json"))
    assert len(records) == 5
    for path in records:
        record = json.loads(path.read_text())
        assert record["status"] == "ok", (path, record["reason"])
        assert record["provenance"]["config_hash"]
    # Every measuring process came from the run's pre-imported fork server, none was refused:
    # the tiny grid's matmul on numpy and torch is a comparison group, measured by one job;
    # its saxpy, its roof and its model alone.
    logs = sorted((results / "logs").glob("[gkrt]*/**/*.log"))
    assert len(logs) == 4
    for log in logs:
        assert "forked by the fork server" in log.read_text(encoding="utf-8"), log

    tidy = pd.read_parquet(results / "tidy.parquet")
    assert sorted(tidy["id"]) == sorted(
        str(p.relative_to(results)).removesuffix(".json") for p in records
    )
    assert len(pd.read_csv(results / "tidy.csv")) == 5
    percent = pd.read_csv(results / "tables" / "kernel_roof_percent.csv")
    assert sorted(percent["kernel"]) == ["matmul", "matmul", "saxpy"]
    assert (percent["roof_percent"] > 0).all()
    assert set(percent["roof_bound"]) <= {"peak_gflops", "memory_bandwidth"}

    table = (results / "tables" / "train_time_per_batch.md").read_text()
    assert "| resnet18 |" in table and "cpu1" in table
    assert "\\toprule" in (results / "tables" / "kernel_time.tex").read_text()
    # Energy: measured where this machine lets a counter be read, else the reason.
    for path in records[:4]:
        found = json.loads(path.read_text())["energy"]
        assert found["status"] == "ok" or found["reason"], path
    assert "Time and energy per sample" in (results / "tables" / "train_energy.md").read_text(
        encoding="utf-8"
    )
    # Only what one CPU device can show: matmul over its sizes and on its roof; nothing to
    # compare with another device, another precision, more threads, GPUs or nodes, and the
    # energy of matmul's two sizes only where this host's counters can be read.
    made = {path.stem for path in results.glob("figures/*.pdf")}
    readable = "cpu" in fillable.Counters.here({}).kinds
    assert made == {"kernel_throughput", "roofline", *(["kernel_energy"] if readable else [])}
    for stem in made:
        assert (results / "figures" / f"{stem}.png").read_bytes().startswith(b"\x89PNG")
    tables = {path.stem for path in results.glob("tables/*.md")}
    assert tables == {"train_time_per_batch", "train_energy", "kernel_time", "kernel_energy"}
    assert "| Status | ok (5) |" in (results / "provenance.md").read_text(encoding="utf-8")
    assert "baseline_device: cpu1" in (results / "config.yaml").read_text(encoding="utf-8")

    # The README's command, without the run's --configfile: the report is of the run last
    # started here, with its config (results/logs/run_config.yaml), not of the default grid.
    report = snakemake(workflow_dir, "--report", "results/report.html")
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-3000:]
    assert "does not exist" not in report.stdout + report.stderr
    page = (results / "report.html").read_text(encoding="utf-8")
    for item in (
        *(f"{stem}.html" for stem in ("train_time_per_batch", "train_energy", "kernel_time")),
        *(f"{stem}.png" for stem in ("roofline", "kernel_throughput")),
        "provenance.html",
        "config.yaml",
        "summary.html",
        "kernel_roof_percent.csv",
    ):
        assert item in page, item
    assert "Time per mini-batch" in page  # a caption
    assert "Kernel time per call, by backend and device" in page  # an item's title
    assert "Fastest backend per kernel and device" in (results / "summary.html").read_text(
        encoding="utf-8"
    )
    # The description renders the config; the report JSON writes its line breaks as \n.
    assert "Speedups are over cpu1" in " ".join(page.replace("\\n", " ").split())

    again = snakemake(workflow_dir, "-n", "--configfile", "config/tiny.yaml")
    assert again.returncode == 0
    assert "Nothing to be done" in again.stdout + again.stderr
    assert "NOTE" not in again.stderr
    # Any other command given no --configfile plans the default grid, and says so.
    default = snakemake(workflow_dir, "-n")
    assert default.returncode == 0, default.stderr[-3000:]
    assert (
        "NOTE: the run last started here had another config (results/logs/run_config.yaml "
        "holds it, the files it came from named at its top)"
    ) in default.stderr
    assert grid.group_rule("kernel/cpu/matmul/float32/512") in default.stdout + default.stderr
    # Modules are not loaded without --sdm env-modules: other ones re-measure nothing
    # (only the provenance, which holds the config as run, is rebuilt).
    (workflow_dir / "config" / "modules.yaml").write_text("slurm:\n  modules: [cuda/12.4]\n")
    modules = snakemake(
        workflow_dir, "-n", "--configfile", "config/tiny.yaml", "config/modules.yaml"
    )
    assert modules.returncode == 0, modules.stdout[-3000:] + modules.stderr[-3000:]
    assert "_benchmark" not in modules.stdout + modules.stderr
    assert "compared_" not in modules.stdout + modules.stderr
    assert re.search(r"^provenance\s+1$", modules.stdout + modules.stderr, re.MULTILINE)

    # A deleted record is measured again by the default target, with the cells of its
    # comparison group, although the tidy table made from it is still there (and newer than
    # every other record).
    (results / "kernels" / "matmul" / "cpu1" / "torch" / "float64" / "n32.json").unlink()
    planned = snakemake(workflow_dir, "-n", "--configfile", "config/tiny.yaml")
    assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr[-3000:]
    plan = planned.stdout + planned.stderr
    assert re.search(rf"^{MATMUL_GROUP}\s+1$", plan, re.MULTILINE), plan
    assert "n32.json" in plan

    # Records damaged after the run, one cut short and one whose median is true: their
    # cells say so and the run ends with a warning.
    damaged = results / "kernels" / "saxpy" / "cpu1" / "numpy" / "float64" / "n1000.json"
    damaged.write_text(damaged.read_text()[:100])
    lying = results / "train" / "resnet18" / "cpu1" / "fp32" / "single" / "bs2.json"
    record = json.loads(lying.read_text())
    record["metrics"]["time_per_batch"]["median"] = True
    lying.write_text(json.dumps(record))
    # And a record measured again on request: its previous version is kept.
    forced = results / "kernels" / "matmul" / "cpu1" / "numpy" / "float64" / "n32.json"
    previous = forced.read_text()
    rerun = snakemake(
        workflow_dir,
        "--cores",
        "2",
        f"--forcerun={forced.relative_to(workflow_dir)}",
        "--configfile",
        "config/tiny.yaml",
    )
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    (kept,) = (results / "replaced").glob("*/kernels/matmul/cpu1/numpy/float64/n32.json")
    assert kept.read_text() == previous != forced.read_text()
    assert "WARNING: 2 result record(s) are invalid" in rerun.stderr
    where = lying.relative_to(workflow_dir)
    assert f"{where}: metrics.time_per_batch.median: true is not a number" in rerun.stderr
    assert "invalid record (a)" in (results / "tables" / "kernel_time.md").read_text()
    assert "invalid record (a)" in (results / "tables" / "train_time_per_batch.md").read_text()
    problems = pd.read_csv(results / "record_problems.csv")
    assert sorted(problems["path"]) == [
        str(damaged.relative_to(workflow_dir)),
        str(lying.relative_to(workflow_dir)),
    ]
    # The run used the project's settings (profiles/default, loaded by Snakemake itself).
    assert "does not use the project's settings" not in rerun.stderr


NOTHING_TO_RUN = """\
kernels:
  sizes: {matmul: [], saxpy: []}
train:
  batch_sizes: {resnet18: []}
"""


def test_a_grid_with_no_experiments_still_aggregates(workflow_dir):
    """Also run without the project's profile: the run works and says, at its start and
    end, which settings it lacks."""
    (workflow_dir / "config" / "nothing.yaml").write_text(NOTHING_TO_RUN)
    done = snakemake(
        workflow_dir,
        "--workflow-profile",
        "none",
        "--cores",
        "2",
        "--configfile",
        "config/tiny.yaml",
        "config/nothing.yaml",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = workflow_dir / "results"
    assert len(pd.read_csv(results / "tidy.csv")) == 0
    assert done.stderr.count("this run does not use the project's settings") == 2
    assert "benchmark_slots=1: experiments run side by side" in done.stderr
    assert "keep-going" in done.stderr and "group-components" not in done.stderr
    # Nothing planned, nothing to show: no table or figure is made.
    assert not list(results.glob("figures/*")) and not list(results.glob("tables/*"))
    assert (results / "provenance.md").exists()
    # Nothing measured: no fork server was started, nor waited for.
    assert not (results / "logs" / "fork_server.log").exists()


def test_a_target_swallowed_by_configfile_is_named(workflow_dir):
    record = workflow_dir / KERNEL_TARGET
    record.parent.mkdir(parents=True)
    record.write_text('{"status": "ok"}')
    done = snakemake(workflow_dir, "-n", "--configfile", "config/tiny.yaml", KERNEL_TARGET)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert f"--configfile took the result {record}" in said
    assert "Write --configfile=config/mysite.yaml" in said
    # Twice --configfile=: Snakemake would read only the last one.
    twice = snakemake(
        workflow_dir, "-n", "--configfile=config/tiny.yaml", "--configfile=config/config.yaml"
    )
    assert twice.returncode != 0
    assert "--configfile is given 2 times" in twice.stdout + twice.stderr
    # The form the README gives: one file per option, targets anywhere.
    record.unlink()
    planned = snakemake(workflow_dir, "-n", "--configfile=config/tiny.yaml", KERNEL_TARGET)
    assert planned.returncode == 0, planned.stderr[-3000:]
    said = planned.stdout + planned.stderr
    assert re.search(rf"^{MATMUL_GROUP}\s+1$", said, re.MULTILINE)


def test_run_from_a_subdirectory_uses_the_checkout(workflow_dir):
    """`-s ../Snakefile` from results/: the default config loads and nothing lands in results/."""
    below = workflow_dir / "results"
    below.mkdir()
    done = snakemake(below, "-n", "-s", "../Snakefile", "--configfile=../config/tiny.yaml")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "kernel_benchmark" in done.stdout + done.stderr
    assert list(below.iterdir()) == []


def test_a_run_says_what_it_measures_and_ctrl_c_names_what_it_left_unmeasured(workflow_dir):
    """Before anything starts: the experiments by family and device. Ctrl-C while the
    training runs: the training named as cancelled, the experiments after it as never
    started, the records written kept and not listed."""
    log = workflow_dir / "interrupted.log"
    # A training that lasts, so that the interrupt finds it running however late a loaded
    # machine lets this test read the job's log.
    (workflow_dir / "config" / "long_training.yaml").write_text("train:\n  min_run_time: 5\n")
    job_log = workflow_dir / "results/logs/train/resnet18/cpu1/fp32/single/bs2.log"
    with log.open("w") as output:
        run = subprocess.Popen(
            [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile"]
            + ["config/tiny.yaml", "config/long_training.yaml"],
            cwd=workflow_dir,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 600
        # Once the job's supervisor runs: a Ctrl-C that comes before Snakemake has started
        # the job's script reaches only Snakemake, which then waits for the job to end
        # instead of cancelling it.
        while (
            "attempt 1 of" not in (job_log.read_text() if job_log.exists() else "")
            and time.monotonic() < deadline
            and run.poll() is None
        ):
            time.sleep(0.1)
        assert run.poll() is None, (
            "the run ended before its training started: " + (log.read_text()[-2000:])
        )
        # As Ctrl-C at a terminal: to the whole foreground process group.
        os.killpg(run.pid, signal.SIGINT)

        # Under load Snakemake has lost it: the training died of it and was run again, and
        # Snakemake never said it was terminating. A user then presses Ctrl-C again.
        def not_stopping() -> bool:
            return run.poll() is None and "Terminating processes on user" not in log.read_text()

        again = time.monotonic() + 10
        while not_stopping() and time.monotonic() < again:
            time.sleep(0.1)
        if not_stopping():
            os.killpg(run.pid, signal.SIGINT)
        assert run.wait(timeout=120) != 0
    said = log.read_text()
    assert (
        "This run measures 5 experiments; the grid has 5, 0 of them with a record already.\n"
        "  kernel  cpu1 3\n  roof    cpu1 1\n  train   cpu1 1\n"
    ) in said
    records = {
        str(path.relative_to(workflow_dir)) for path in workflow_dir.glob("results/**/*.json")
    }
    assert TRAIN_TARGET not in records
    missing = 4 - len(records)  # the experiments after the training never started
    unfinished = said.split("Terminating processes on user request", 1)[1]
    assert (
        f"{missing + 1} experiment{'s' if missing else ''} of this run "
        f"{'have' if missing else 'has'} no record; the same command run again measures them:\n"
        f"  cancelled while running or queued (1):\n    {TRAIN_TARGET}\n"
    ) in unfinished, unfinished
    assert (f"  never started ({missing}):" in unfinished) == (missing > 0)
    assert not any(record in unfinished for record in records)
    assert "At least one job did not complete successfully" in unfinished

"""The workflow through the real Slurm executor plugin against a real local Slurm.

The scheduler is the one tools/slurm-local/start.sh starts (`make test` does it
as root). Without it these tests skip, except in CI (CI=true), where a missing
Slurm is a failure: the integration path must really run there.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from accelbench import grid
from accelbench.records.record import load_record

from conftest import REPO_ROOT, copy_workflow, snakemake

pytestmark = pytest.mark.slurm

CPU_TARGET = "results/kernels/matmul/cpu1/numpy/float64/n32.json"
# The comparison group that measures CPU_TARGET with its backends (accelbench.grid).
CPU_TARGET_RULE = grid.group_rule("kernel/cpu/matmul/float64/32")
GPU_TARGET = "results/kernels/matmul/cuda1/torch/float64/n32.json"
SLURM_ARGS = (
    "--executor",
    "slurm",
    "--slurm-init-seconds-before-status-checks",
    "3",
)
SUBMITTED = re.compile(r"submitted with SLURM jobid (\d+) \(log: (\S+)\)")

# 2 short kernel experiments and their roof on one device (a batch's experiments run
# one after another, 10 to 20 s each here), and one training experiment that fails for
# real, which the grid cannot know beforehand: the LSTM finds a Penn Treebank corpus
# under data_dir, but the file is damaged (not UTF-8). The README's target is one of them.
BATCH_CONFIG = """\
retries: 1
datasci:
  devices: []
kernels:
  devices: [cpu1]
  backends: [numpy, torch]
  dtypes: [float32]
  sizes:
    matmul: [16]
    saxpy: []
    mandelbrot: []
    reduction: []
    stencil: []
    fft1d: []
    fft2d: []
    transfer-d2d: []
  roofs:
    gemm_size: {cpu: 32, cuda: 32}
    copy_mib: {cpu: 1, cuda: 1}
  min_run_time: 0.01
  samples: 3
  warmup_s: 0.05
  runs: 3
  budget_s: 0
train:
  devices: [cpu1]
  precisions: [fp32]
  batch_sizes:
    resnet18: []
    fcn: []
    lstm: [4]
  strategies: [single]
  steps: 3
  min_run_time: 0
  warmup_steps: 1
  warmup_s: 0
  runs: 3
  budget_s: 0
  image_size: 32
  data_dir: data
contention:
  retries: 0
resources:
  kernels: {mem_mb: 1000, runtime: 5}
  train: {mem_mb: 2000, runtime: 5}
slurm:
  cpus_per_gpu: 1
"""


def readme_cluster_commands() -> list[list[str]]:
    """The commands of the README's section "On a Slurm cluster" (which docs/slurm.md
    shows too), as a user types them."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## On a Slurm cluster\n")[1].split("\n## ")[0]
    block = section.split("```bash\n")[1].split("```")[0]
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


# What the README's commands are, by what the tests below do with each (the tests write
# their own tiny grid as config/mysite.yaml instead of copying the example).
SETUP, ACTIVATE, COPY, WHOLE_RUN, RERUN_ONE, STATUS = readme_cluster_commands()
# Status checks every few seconds: the tests' jobs take seconds, a cluster's minutes.
QUICK_CHECKS = ("--slurm-init-seconds-before-status-checks", "3")


def test_the_readme_commands_are_the_ones_tested():
    assert SETUP == ["make", "venv"]
    assert ACTIVATE == ["source", ".venv/bin/activate"]
    assert COPY == ["cp", "config/site-example.yaml", "config/mysite.yaml"]
    assert WHOLE_RUN == ["snakemake", "--executor", "slurm", "--configfile=config/mysite.yaml"]
    assert RERUN_ONE[:-1] == WHOLE_RUN and RERUN_ONE[-1].startswith("results/kernels/")
    assert STATUS[:2] == ["accelbench", "status"]


def activated() -> dict[str, str]:
    """This Python's bin first on PATH, as after `source .venv/bin/activate`."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def start_snakemake(directory: Path, args: tuple[str, ...], log: Path) -> subprocess.Popen:
    """Snakemake in the background, its output in `log`: for the tests that signal it."""
    with log.open("w") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "snakemake", *args],
            cwd=directory,
            env=activated(),
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def submissions(output: str) -> list[tuple[str, str]]:
    """(Slurm job id, Snakemake's log path) of every sbatch call Snakemake reported."""
    return SUBMITTED.findall(output)


def sacct_states(job_ids: list[str]) -> dict[str, tuple[str, str]]:
    """Job id -> (partition, state) as Slurm's accounting has it."""
    done = subprocess.run(
        [
            "sacct",
            "--jobs",
            ",".join(job_ids),
            "--noheader",
            "--allocations",
            "--parsable2",
            "--format=JobID,Partition,State",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    rows = [line.split("|") for line in done.stdout.strip().splitlines()]
    return {job: (partition, state.split()[0]) for job, partition, state in rows}


def test_experiments_land_in_their_partitions(slurm, workflow_dir):
    done = snakemake(
        workflow_dir, CPU_TARGET, GPU_TARGET, *SLURM_ARGS, "--configfile", "config/tiny.yaml"
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    cpu = json.loads((workflow_dir / CPU_TARGET).read_text())
    assert cpu["status"] == "ok"
    assert cpu["provenance"]["slurm"]["partition"] == "medium"
    assert cpu["provenance"]["slurm"]["cpus_per_task"] == 1
    # What Slurm granted: the rule's cores and memory (config resources.kernels.mem_mb).
    allocation = cpu["provenance"]["slurm"]["allocation"]
    assert (allocation["cpu"], allocation["mem"]) == ("1", "2000M")

    gpu = json.loads((workflow_dir / GPU_TARGET).read_text())
    assert gpu["provenance"]["slurm"]["partition"] == "gpu"
    # The job was given one of the node's (fake) GPUs by Slurm's GRES plugin.
    assert gpu["provenance"]["cuda_visible_devices"] in {"0", "1"}
    assert gpu["provenance"]["slurm"]["allocation"]["gres/gpu"] == "1"
    import torch

    if not torch.cuda.is_available():
        assert gpu["status"] == "unavailable"
        assert "no CUDA device" in gpu["reason"]

    states = sacct_states([r["provenance"]["slurm"]["job_id"] for r in (cpu, gpu)])
    for record in (cpu, gpu):
        slurm_info = record["provenance"]["slurm"]
        assert states[slurm_info["job_id"]] == (slurm_info["partition"], "COMPLETED")


@pytest.fixture(scope="module")
def batch_run(slurm, tmp_path_factory):
    """The whole workflow on BATCH_CONFIG through Slurm: grouped kernels, one failing job."""
    directory = copy_workflow(tmp_path_factory.mktemp("batch"))
    (directory / "config" / "mysite.yaml").write_text(BATCH_CONFIG)
    corpus = directory / "data" / "ptb" / "ptb.train.txt"
    corpus.parent.mkdir(parents=True)
    corpus.write_bytes(b"the cat \xff\xfe sat\n")
    done = snakemake(directory, *WHOLE_RUN[1:], *QUICK_CHECKS)
    return directory, done


def test_short_kernel_experiments_share_a_handful_of_submissions(batch_run):
    directory, done = batch_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # The plain command got the project's settings (profiles/default) by itself.
    assert "does not use the project's settings" not in done.stdout + done.stderr
    # The config names no account: the jobs name the user's default one, so the Slurm
    # plugin neither guesses one nor warns.
    assert "SLURM account" not in done.stdout + done.stderr
    jobs = submissions(done.stdout + done.stderr)
    kernel_jobs = [job for job, log in jobs if "group_kernels_cpu1" in log]
    records = list((directory / "results" / "kernels").glob("**/*.json"))
    assert len(records) == 2
    assert len(kernel_jobs) == 1, jobs  # 2 experiments and a roof, batches of up to 25
    assert all(state == ("medium", "COMPLETED") for state in sacct_states(kernel_jobs).values())
    job_ids = {load_record(path)["provenance"]["slurm"]["job_id"] for path in records}
    assert job_ids <= set(kernel_jobs)


def test_failing_job_is_retried_reported_and_shown_in_the_aggregate(batch_run):
    directory, done = batch_run
    output = done.stdout + done.stderr
    assert "Error in rule train_benchmark" in output  # the first attempt failed, as reported
    train_jobs = [job for job, log in submissions(output) if "rule_train_benchmark" in log]
    assert len(train_jobs) == 2
    states = sacct_states(train_jobs)
    assert sorted(state for _, state in states.values()) == ["COMPLETED", "FAILED"]

    tidy = pd.read_parquet(directory / "results" / "tidy.parquet")
    assert len(tidy) == 2 + 1 + 1  # kernels, their roof (one dtype on cpu1), training
    failed = tidy[tidy["status"] == "failed"]
    assert list(failed["id"]) == ["train/lstm/cpu1/fp32/single/bs4"]
    assert "UnicodeDecodeError" in failed["reason"].iloc[0]
    table = (directory / "results" / "tables" / "train_time_per_batch.md").read_text()
    assert "failed" in table


def test_status_shows_the_runs_jobs_and_every_log_stays(batch_run):
    directory, done = batch_run
    output = done.stdout + done.stderr
    shown = subprocess.run(
        STATUS, cwd=directory, env=activated(), capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    run_id = re.search(r"SLURM run ID: (\S+)", output).group(1)
    report = shown.stdout
    assert report.startswith(f"Run {run_id} in "), report
    assert re.search(r"^  kernel_benchmark +2 completed$", report, re.MULTILINE), report
    assert re.search(r"^  train_benchmark +1 completed$", report, re.MULTILINE), report
    # The lstm's failed first attempt, resubmitted, with the log that holds its error.
    assert "Earlier attempts, resubmitted (1):" in report
    assert "train/lstm/cpu1/fp32/single/bs4" in report
    # Logs of successful jobs are kept (profiles/default), so every printed path opens.
    for _, log in submissions(output):
        assert Path(log).is_file(), log
    # Below the jobs, the grid of the run's own config: every experiment has its record.
    assert (
        "Progress of the grid of results/logs/run_config.yaml, the config of the run last "
        "started here:\n4 of 4 experiments have a record (1 not ok: tidy.csv or the tables "
        "say why)\n"
    ) in report, report
    assert re.search(r"^  kernel +medium +2 +2 +\d+ s +done$", report, re.MULTILINE), report
    assert report.endswith("Every experiment of the grid has its record.\n"), report


def test_deleting_one_record_resubmits_exactly_one_job(batch_run):
    directory, _ = batch_run
    target = RERUN_ONE[-1]
    (directory / target).unlink()
    # Status through squeue this time, for sites without accounting.
    done = snakemake(directory, *RERUN_ONE[1:], *QUICK_CHECKS, "--slurm-status-command", "squeue")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(submissions(done.stdout + done.stderr)) == 1
    record = load_record(directory / target)
    assert record["status"] == "ok"
    # Measured with the site config's settings, not the defaults.
    assert (record["params"]["samples"], record["params"]["min_run_time"]) == (3, 0.01)


@pytest.mark.parametrize(
    ("slurm_config", "message"),
    [
        (
            "slurm:\n  cpu_partition: nosuch\n",
            "config key slurm.cpu_partition: partition 'nosuch' does not exist on this cluster; "
            "partitions: gpu, medium",
        ),
        (
            "slurm:\n  account: nosuch\n",
            "config key slurm.account: account 'nosuch' is not one of yours",
        ),
    ],
)
def test_unknown_partition_or_account_stops_before_submission(
    slurm, workflow_dir, slurm_config, message
):
    (workflow_dir / "config" / "site.yaml").write_text(slurm_config)
    done = snakemake(
        workflow_dir,
        CPU_TARGET,
        *SLURM_ARGS,
        "--configfile",
        "config/tiny.yaml",
        "config/site.yaml",
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert message in output
    assert submissions(output) == []


# Four short training experiments and nothing else.
FOUR_TRAININGS = (
    "train:\n  devices: [cpu1]\n  batch_sizes:\n    resnet18: []\n"
    "    fcn: [2, 3, 4, 5]\n    lstm: []\n"
    "  steps: 3\n  image_size: 32\nkernels:\n  devices: []\n"
)


def test_terminated_run_resumes_without_corrupt_or_repeated_records(slurm, workflow_dir):
    (workflow_dir / "config" / "resume.yaml").write_text(FOUR_TRAININGS)
    # One job at a time, so that the stop comes while some experiments are not yet
    # submitted; SIGTERM asks Snakemake to stop: running jobs finish, no new ones start.
    # Status checks come 3 s after the last one that found a job finished, and 10 s
    # later after each that found none; a stopping run waits out the current pause.
    args = (
        *SLURM_ARGS,
        "--configfile",
        "config/tiny.yaml",
        "config/resume.yaml",
        "--until",
        "train_benchmark",
    )
    log = workflow_dir / "stopped-run.log"
    run = start_snakemake(workflow_dir, (*args, "--jobs", "1"), log)
    records = workflow_dir / "results" / "train"
    deadline = time.monotonic() + 240
    while not list(records.glob("**/*.json")) and time.monotonic() < deadline:
        time.sleep(1)
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=180) != 0
    finished = {path: path.stat().st_mtime_ns for path in records.glob("**/*.json")}
    assert 1 <= len(finished) < 4, log.read_text()[-3000:]
    for path in finished:
        load_record(path)  # complete and valid, never half-written

    # The resumed run submits what is left at once.
    done = snakemake(workflow_dir, *args)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(list(records.glob("**/*.json"))) == 4
    for path, mtime in finished.items():
        assert path.stat().st_mtime_ns == mtime  # not measured again
    assert len(submissions(done.stdout + done.stderr)) == 4 - len(finished)


def queued(job_ids: list[str]) -> list[str]:
    """The jobs among `job_ids` that are still waiting or running."""
    done = subprocess.run(
        ["squeue", "--noheader", "--states=PENDING,RUNNING", "--format=%i %T"]
        + ["--jobs", ",".join(job_ids)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.stdout.split()[::2]


def test_ctrl_c_cancels_the_runs_jobs_and_a_second_one_cannot_cut_that_short(slurm, workflow_dir):
    (workflow_dir / "config" / "interrupt.yaml").write_text(FOUR_TRAININGS)
    args = (
        *SLURM_ARGS,
        "--configfile",
        "config/tiny.yaml",
        "config/interrupt.yaml",
        "--until",
        "train_benchmark",
    )
    log = workflow_dir / "interrupted-run.log"
    run = start_snakemake(workflow_dir, args, log)
    deadline = time.monotonic() + 120
    job_ids: list[str] = []
    while len(job_ids) < 4 and time.monotonic() < deadline:
        time.sleep(0.5)
        job_ids = [job for job, _ in submissions(log.read_text())]
    assert len(job_ids) == 4, log.read_text()[-3000:]
    # As a user at a terminal: Ctrl-C, then impatiently again.
    run.send_signal(signal.SIGINT)
    time.sleep(0.2)
    run.send_signal(signal.SIGINT)
    assert run.wait(timeout=120) != 0
    said = log.read_text()
    assert "Terminating processes on user request" in said
    assert "Traceback" not in said and "KeyboardInterrupt" not in said, said[-3000:]
    deadline = time.monotonic() + 30
    while queued(job_ids) and time.monotonic() < deadline:
        time.sleep(1)
    assert queued(job_ids) == []
    # No record, or a complete one: a cancelled experiment writes nothing.
    for path in (workflow_dir / "results" / "train").glob("**/*.json"):
        assert load_record(path)["status"] == "ok"
    # The run names the experiments it cancelled, by path: those without a record.
    cancelled = sorted(
        f"results/train/fcn/cpu1/fp32/single/bs{batch}.json"
        for batch in (2, 3, 4, 5)
        if not (workflow_dir / f"results/train/fcn/cpu1/fp32/single/bs{batch}.json").exists()
    )
    if cancelled:
        listed = "".join(f"    {path}\n" for path in cancelled)
        assert f"  cancelled while running or queued ({len(cancelled)}):\n{listed}" in said


def test_a_refused_batch_says_why_and_keeps_the_record_it_replaced(slurm, workflow_dir):
    """Memory no node has, set on the command line where the site check does not look:
    sbatch refuses the kernels_cpu1 batch at submission."""
    (workflow_dir / "config" / "mysite.yaml").write_text("train:\n  batch_sizes: {resnet18: []}\n")
    record = workflow_dir / CPU_TARGET
    record.parent.mkdir(parents=True)
    record.write_text('{"an earlier": "measurement"}')
    done = snakemake(
        workflow_dir,
        *SLURM_ARGS,
        "--configfile",
        "config/tiny.yaml",
        "config/mysite.yaml",
        f"--forcerun={CPU_TARGET}",
        f"--set-resources={CPU_TARGET_RULE}:mem_mb=90000000",
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert submissions(output) == []
    # sbatch's own words, for the batch, not "message: None" only.
    said = (
        "Error in group kernels_cpu1: SLURM sbatch failed. The error message was "
        "'sbatch: error: Memory specification can not be satisfied\n"
        "sbatch: error: Batch job submission failed: Requested node configuration is not "
        "available'"
    )
    assert said in output, output[-3000:]
    (kept,) = (workflow_dir / "results" / "replaced").glob(
        f"*/{CPU_TARGET.removeprefix('results/')}"
    )
    assert kept.read_text() == '{"an earlier": "measurement"}'

"""Experiments across two hosts: node1 and node2 of the local Slurm (tools/slurm-local).

Each node's slurmd runs in its own network namespace with its own address, so
srun places tasks on two hosts and rank 0's address, the rendezvous and the gloo
connections all go over the network between them. Without that cluster the
tests skip, except in CI (CI=true), where they fail.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_train_parallel import TINY, assert_as_accurate_as, tiny_settings
from test_train_slurm import CONFIG as ONE_NODE_CONFIG
from test_train_slurm import FCN, SLURM_ARGS

from accelbench.families.train import TrainExperiment
from accelbench.records.record import load_record
from accelbench.train.loop import measure_training, train_process
from accelbench.train.models import models, resolve_options
from accelbench.train.settings import TrainSettings

from conftest import MULTINODE_PARTITION, snakemake

# The one-node ddp test's grid on the namespace nodes' partition; a failure is recorded.
CONFIG = (
    ONE_NODE_CONFIG.replace("devices: [cpu2, cuda2, 2x2cuda]", "devices: [2x1cpu, 2x2cpu, 2x2cuda]")
    + f"  cpu_partition: {MULTINODE_PARTITION}\n  gpu_partition: {MULTINODE_PARTITION}\n"
    + "retries: 0\n"
)


def target(device: str, batch: int = 8) -> str:
    return f"results/train/fcn/{device}/fp32/ddp/bs{batch}.json"


def step_nodes(job_id: str) -> dict[str, tuple[int, str, str]]:
    """Step name -> (tasks, node list, state) of a job, from Slurm's accounting."""
    done = subprocess.run(
        [
            "sacct",
            "-j",
            job_id,
            "--noheader",
            "--parsable2",
            "--format=JobID,NTasks,NodeList,State",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    steps = {}
    for line in done.stdout.strip().splitlines():
        step, tasks, nodes, state = line.split("|")
        steps[step.split(".", 1)[1] if "." in step else "job"] = (
            int(tasks or 0),
            nodes,
            state.split()[0],
        )
    return steps


@pytest.fixture
def nodes_workflow(workflow_dir, two_nodes):
    (workflow_dir / "config" / "tasks.yaml").write_text(CONFIG)
    return workflow_dir


@pytest.mark.slurm
def test_ddp_over_two_nodes_runs_on_both_and_matches_the_local_launch(nodes_workflow):
    done = snakemake(nodes_workflow, target("2x1cpu"), target("2x2cpu"), *SLURM_ARGS)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    for device, per_node in (("2x1cpu", 1), ("2x2cpu", 2)):
        record = load_record(nodes_workflow / target(device))
        assert record["status"] == "ok", record["reason"]
        processes = 2 * per_node
        assert record["metrics"]["processes"]["value"] == processes
        assert record["metrics"]["nodes"]["value"] == 2
        # Every rank says where it ran: the first half on node1, the rest on node2.
        assert record["params"]["hosts"] == ["node1"] * per_node + ["node2"] * per_node
        assert record["params"]["launcher"] == "slurm"
        slurm_info = record["provenance"]["slurm"]
        assert (slurm_info["partition"], slurm_info["nodes"], slurm_info["ntasks"]) == (
            MULTINODE_PARTITION,
            2,
            processes,
        )
        assert slurm_info["allocation"]["node"] == "2"
        steps = step_nodes(slurm_info["job_id"])
        assert steps["job"][1] == "node[1-2]"
        assert steps["batch"][1] == "node1"  # the job's script, which started the tasks
        assert steps["0"] == (processes, "node[1-2]", "COMPLETED")

        # The same processes on one host give the same losses: the hosts changed nothing.
        local = measure_training(
            TrainExperiment("fcn", f"cpu{processes}", "fp32", "ddp", 8),
            TrainSettings(seed=0, steps=3, warmup_steps=1, model_options=FCN),
        )
        assert local.params["hosts"] == [local.params["hosts"][0]] * processes
        assert record["series"]["loss"]["values"] == pytest.approx(local.series["loss"]["values"])


WORKER = """\
import sys
import torch
from accelbench.families.train import TrainExperiment
from accelbench.platform import ranks
from accelbench.train.loop import train_process
from accelbench.train.settings import TrainSettings

settings, out = TrainSettings.from_params(eval(sys.argv[1])), sys.argv[2]
rendezvous = ranks.from_environment()
exp = TrainExperiment("fcn", "2x1cpu", "fp32", "ddp", 4)
result = train_process(exp, settings, rendezvous, keep_state=True)
if rendezvous.rank == 0:
    torch.save({"state": result["state"], "losses": result["losses"],
                "hosts": result["hosts"]}, out)
"""


@pytest.mark.slurm
def test_two_hosts_train_the_parameters_one_process_trains_on_the_global_batch(two_nodes, tmp_path):
    """The equivalence test of tests/test_train_parallel.py, with the ranks on two hosts."""
    settings = tiny_settings("fcn", steps=2, warmup=0)
    out = tmp_path / "state.pt"
    done = subprocess.run(
        [
            "srun",
            f"--partition={MULTINODE_PARTITION}",
            "--nodes=2",
            "--ntasks-per-node=1",
            "--kill-on-bad-exit=1",
            "--time=5",
            sys.executable,
            "-c",
            WORKER,
            repr(settings.as_params()),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    saved = torch.load(out)
    assert saved["hosts"] == ["node1", "node2"]
    single, exact = (
        train_process(
            TrainExperiment("fcn", "cpu1", precision, "single", 4),
            settings,
            keep_state=True,
        )
        for precision in ("fp32", "fp64")
    )
    initial = models()["fcn"].build(resolve_options(models()["fcn"], TINY["fcn"]))
    moved = 0
    for name, tensor in single["state"].items():
        assert_as_accurate_as(saved["state"][name], tensor, exact["state"][name], name)
        moved += not torch.equal(tensor, initial.state_dict()[name])
    assert moved, "two optimiser steps must move the parameters"


def task_process(rank: int, node: str, workdir: Path) -> int | None:
    """The pid of the measuring process of task `rank` on `node` that runs in `workdir`."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes().split(b"\0")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if (
            b"accelbench.job.measuring_process" in command
            and cwd == str(workdir)
            and f"SLURM_PROCID={rank}".encode() in environ
            and f"SLURMD_NODENAME={node}".encode() in environ
        ):
            return int(proc.name)
    return None


@pytest.mark.slurm
def test_a_task_killed_on_node2_fails_the_experiment_at_once_with_its_own_end(nodes_workflow):
    """Killed mid-training, task 2 leaves no error; its peers lose their connection. The
    record names task 2 as srun saw it end, within seconds, not after a collective
    time-out of the others, and marks the kill as a fault the next run measures again."""
    config = nodes_workflow / "config" / "tasks.yaml"
    config.write_text(config.read_text().replace("steps: 3", "steps: 200000"))
    path = target("2x2cpu")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    run = subprocess.Popen(
        [sys.executable, "-m", "snakemake", path, *SLURM_ARGS],
        cwd=nodes_workflow,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while (victim := task_process(2, "node2", nodes_workflow)) is None:
            assert run.poll() is None, run.stdout.read()[-3000:]
            assert time.monotonic() < deadline, "task 2 never started on node2"
            time.sleep(0.5)
        # Past the imports and the rendezvous: the four ranks are in their training loop.
        while task_process(0, "node1", nodes_workflow) is None:
            time.sleep(0.5)
        time.sleep(10)
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        record_path = nodes_workflow / path
        while not record_path.exists():
            assert time.monotonic() - killed < 60, "no record a minute after the kill"
            time.sleep(0.2)
        recorded_after = time.monotonic() - killed
        output, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:  # Ctrl-C: Snakemake cancels the run's jobs
            run.send_signal(signal.SIGINT)
            run.wait(60)
    assert recorded_after < 20, recorded_after
    record = load_record(record_path)
    # A kill that Slurm does not report as out of memory is a passing fault: measured again.
    assert record["status"] == "failed"
    assert record["transient"] is True
    assert record["reason"].startswith(
        "rank 2 on node2: Killed (as srun reports it; the task wrote no error of its own)"
    ), record["reason"]
    assert run.returncode == 0, output[-3000:]  # the last attempt's failure is a record


@pytest.mark.slurm
def test_a_two_node_gpu_experiment_asks_for_gpus_per_node_and_fails_cleanly_without_them(
    nodes_workflow,
):
    done = snakemake(nodes_workflow, target("2x2cuda"), *SLURM_ARGS)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = load_record(nodes_workflow / target("2x2cuda"))
    slurm_info = record["provenance"]["slurm"]
    assert (slurm_info["nodes"], slurm_info["ntasks"]) == (2, 4)
    assert slurm_info["allocation"]["gres/gpu"] == "4"  # two (fake) GPUs on each node
    steps = step_nodes(slurm_info["job_id"])
    assert steps["0"][:2] == (4, "node[1-2]")
    if not torch.cuda.is_available():
        assert record["status"] == "unavailable"
        assert record["reason"] == (
            "no CUDA device available to PyTorch in this task (CUDA_VISIBLE_DEVICES='0,1')"
        )

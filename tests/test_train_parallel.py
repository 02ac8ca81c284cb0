"""Parallel training: device grammar, exclusions, rendezvous, DDP/FSDP/pipeline on CPU, precisions.

DDP and FSDP run for real with gloo in 2 local processes and must give the
parameters one process gets on the same global batch; the pipeline split runs
on CPU stages and must give the unsplit model's outputs and gradients.
DataParallel needs GPUs (it has no CPU mode): its replicas' precision is checked here with
a CPU stand-in for torch's parallel_apply, the rest by the gpu tests.
"""

from __future__ import annotations

import copy
import importlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from accelbench.families.train import TrainExperiment
from accelbench.job import measurement, supervisor
from accelbench.job.context import JobContext
from accelbench.measuring.outcome import of_error
from accelbench.measuring.settings import ContentionSettings
from accelbench.platform import processes, ranks
from accelbench.platform.devices import Device, DeviceError, parse_device
from accelbench.records.record import load_record
from accelbench.train import cpu_support, distributed, strategies
from accelbench.train.cells import exclusion as train_exclusion
from accelbench.train.loop import measure_training, train_process
from accelbench.train.models import models, resolve_options
from accelbench.train.pipeline import Pipeline, balanced_split, layer_costs
from accelbench.train.session import AUTOCAST_DTYPES
from accelbench.train.settings import TrainSettings

HAS_GPU = torch.cuda.is_available()
NO_GPU_REASON = "no CUDA GPU present (torch.cuda.is_available() is False)"
TINY = {name: dict(spec.tiny_options) for name, spec in models().items()}


CONTEXT = JobContext("t")


def tiny_settings(model: str, steps: int = 3, warmup: int = 1, **extra) -> TrainSettings:
    return TrainSettings(
        seed=0, steps=steps, warmup_steps=warmup, model_options=TINY[model], **extra
    )


# Device grammar ---------------------------------------------------------------------------


def test_multi_node_device_round_trips():
    device = parse_device("2x4cuda")
    assert device == Device("cuda", 4, nodes=2)
    assert device.name == "2x4cuda" and device.gpus == 8 and device.is_gpu
    assert parse_device("cuda4").gpus == 4 and parse_device("cpu4").gpus == 0
    cpus = parse_device("2x2cpu")
    assert cpus == Device("cpu", 2, nodes=2)
    assert (cpus.name, cpus.gpus, cpus.units, cpus.is_gpu) == ("2x2cpu", 0, 4, False)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1x4cuda", "the node count must be an integer >= 2; one node with 4 GPUs is cuda4"),
        ("1x2cpu", "the node count must be an integer >= 2; one node with 2 CPU processes is cpu2"),
        ("2x0cpu", "CPU processes per node must be a positive integer"),
        ("02x4cuda", "the node count must be an integer >= 2"),
        ("2x0cuda", "GPUs per node must be a positive integer"),
        ("2x4gpu", "the kind is cpu or cuda, not 'gpu'"),
        ("4cuda", "is malformed: expected cpuN"),
    ],
)
def test_bad_multi_node_devices_say_what_is_wrong(text, message):
    with pytest.raises(DeviceError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_device(text)


# Exclusions ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "device", "strategy", "batch", "reason"),
    [
        ("resnet18", "cpu4", "dp", 16, "DataParallel replicates the model across GPUs; a CPU"),
        ("resnet18", "cuda1", "dp", 16, "dp needs at least 2 GPUs; cuda1 has one (use 'single')"),
        ("resnet18", "2x4cuda", "dp", 16, "dp runs in one process on one node; 2x4cuda spans 2"),
        ("resnet18", "cpu4", "pipeline", 16, "a pipeline splits layers across GPUs; a CPU is one"),
        ("resnet18", "cuda1", "pipeline", 16, "pipeline needs at least 2 GPUs"),
        ("gcn", "cuda2", "pipeline", 16, "the model declares no layer sequence to split"),
        ("resnet18", "cpu1", "ddp", 16, "ddp needs at least 2 processes; cpu1 gives one"),
        ("resnet18", "cuda1", "fsdp", 16, "fsdp needs at least 2 processes; cuda1 gives one"),
        ("resnet18", "cpu3", "ddp", 16, "batch 16 does not split evenly over 3 processes"),
        ("resnet18", "2x4cuda", "fsdp", 12, "batch 12 does not split evenly over 8 processes"),
        ("resnet18", "2x4cuda", "single", 16, "strategy 'single' uses one GPU; 2x4cuda asks for 8"),
        ("fcn", "2x2cpu", "single", 16, "strategy 'single' runs one process on one node; 2x2cpu"),
        ("fcn", "2x2cpu", "dp", 16, "DataParallel replicates the model across GPUs; a CPU"),
        ("fcn", "2x2cpu", "ddp", 6, "batch 6 does not split evenly over 4 processes"),
    ],
)
def test_strategy_exclusions_give_the_reason(model, device, strategy, batch, reason):
    assert reason in train_exclusion(TrainExperiment(model, device, "fp32", strategy, batch))


@pytest.mark.parametrize(
    ("model", "device", "strategy", "processes", "threads"),
    [
        ("resnet18", "cpu4", "single", 1, 4),
        ("resnet18", "cpu4", "ddp", 4, 1),
        ("dcgan", "cpu2", "fsdp", 2, 1),
        ("resnet18", "cuda1", "single", 1, 1),
        ("resnet18", "cuda4", "dp", 1, 1),
        ("resnet18", "cuda4", "pipeline", 1, 1),
        ("resnet18", "cuda4", "ddp", 4, 1),
        ("gcn", "2x4cuda", "fsdp", 8, 1),
        ("fcn", "2x2cpu", "ddp", 4, 1),
        ("fcn", "4x1cpu", "fsdp", 4, 1),
    ],
)
def test_allowed_cells_and_their_processes(model, device, strategy, processes, threads):
    exp = TrainExperiment(model, device, "fp32", strategy, 16)
    assert train_exclusion(exp) is None
    parsed = parse_device(device)
    assert strategies.process_count(strategy, parsed) == processes
    assert strategies.threads_per_process(strategy, parsed) == threads


# Rendezvous ----------------------------------------------------------------------------------

SLURM_STEP = {
    "SLURM_JOB_ID": "4711",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "3",
    "SLURM_LOCALID": "1",
    "SLURM_NTASKS": "4",
    "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_JOB_NODELIST": "gpu[07-08]",
}


def test_rendezvous_from_slurm_tasks():
    rendezvous = ranks.from_environment(SLURM_STEP)
    assert rendezvous == ranks.Rendezvous(3, 4, 1, "gpu07", 20000 + 4711, "slurm")
    assert not rendezvous.is_primary


def test_slurm_master_address_and_port_can_be_given():
    env = {**SLURM_STEP, "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29500"}
    rendezvous = ranks.from_environment(env)
    assert (rendezvous.master_addr, rendezvous.master_port) == ("10.0.0.5", 29500)


def test_a_batch_script_or_a_single_task_is_not_a_launched_rank():
    batch_script = {key: value for key, value in SLURM_STEP.items() if "STEP" not in key}
    assert ranks.from_environment(batch_script) is None
    one_task = {**SLURM_STEP, "SLURM_STEP_NUM_TASKS": "1", "SLURM_PROCID": "0"}
    assert ranks.from_environment(one_task) is None
    assert ranks.from_environment({}) is None


def test_rendezvous_from_torchrun():
    env = {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29400",
        "TORCHELASTIC_RUN_ID": "x",
        **SLURM_STEP,  # torchrun inside a Slurm step: torchrun's ranks are the processes
    }
    assert ranks.from_environment(env) == ranks.Rendezvous(1, 2, 1, "127.0.0.1", 29400, "torchrun")


def test_malformed_slurm_variables_are_named():
    with pytest.raises(ranks.LaunchError, match="SLURM_PROCID is 'x'; expected an integer"):
        ranks.from_environment({**SLURM_STEP, "SLURM_PROCID": "x"})


@pytest.mark.parametrize(
    ("nodelist", "host"),
    [
        ("node1", "node1"),
        ("node1,node2", "node1"),
        ("gpu[03-05,9],cpu1", "gpu03"),
        ("rack[1-2]-n[007-009]", "rack1-n007"),
        ("a[10],b[1-3]", "a10"),
    ],
)
def test_first_host_of_a_slurm_hostlist(nodelist, host):
    assert ranks.first_host(nodelist) == host


def test_jobs_get_different_ports_and_tasks_the_same():
    assert ranks.slurm_port("12") == ranks.slurm_port("12")
    assert ranks.slurm_port("12") != ranks.slurm_port("13")
    assert all(20000 <= ranks.slurm_port(str(job)) < 40000 for job in (0, 19999, 10**9))


def test_ranks_sharing_a_gpu_are_named():
    assert distributed.shared_gpus(["n1/GPU-a", "n1/GPU-b", "n2/GPU-a", "n2/GPU-c"]) is None
    assert (
        distributed.shared_gpus(["n1/GPU-a", "n1/GPU-a", "n1/GPU-b", "n1/GPU-b"])
        == "ranks 0, 1 on n1/GPU-a; ranks 2, 3 on n1/GPU-b"
    )


def test_only_rank_zero_writes_the_record(monkeypatch, tmp_path):
    for key, value in {**SLURM_STEP, "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "1"}.items():
        monkeypatch.setenv(key, value)
    exp = TrainExperiment("fcn", "cpu1", "fp32", "single", 4)
    output = tmp_path / "record.json"
    assert measurement.run(exp, tiny_settings("fcn"), str(output), context=CONTEXT) == "ok"
    assert not output.exists()
    monkeypatch.setenv("SLURM_PROCID", "0")
    assert measurement.run(exp, tiny_settings("fcn"), str(output), context=CONTEXT) == "ok"
    assert load_record(output)["status"] == "ok"


def test_a_launched_group_of_the_wrong_size_fails_clearly(monkeypatch, tmp_path):
    for key, value in SLURM_STEP.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SLURM_PROCID", "0")
    exp = TrainExperiment("fcn", "cpu2", "fp32", "ddp", 4)
    measurement.run(exp, tiny_settings("fcn"), str(tmp_path / "record.json"), context=CONTEXT)
    record = load_record(tmp_path / "record.json")
    assert record["status"] == "failed"
    assert "launched as 4 processes (slurm); cpu2 with ddp needs 2" in record["reason"]


def test_multi_node_without_slurm_tasks_is_unavailable():
    exp = TrainExperiment("fcn", "2x2cuda", "fp32", "ddp", 4)
    outcome = measure_training(exp, tiny_settings("fcn"))
    assert outcome.status == "unavailable"
    assert outcome.reason.startswith(
        "2x2cuda runs as 4 Slurm tasks over 2 nodes: run it under Slurm "
        "(snakemake --executor slurm results/train/fcn/2x2cuda/fp32/ddp/bs4.json)"
    )
    assert "srun --ntasks=4 accelbench train" in outcome.reason


def fake_torchrun(monkeypatch, run):
    """Replace the torchrun subprocess (only: provenance runs git through subprocess too)."""
    real = distributed.subprocess.run

    def dispatch(command, **kwargs):
        if "torch.distributed.run" in command:
            return run(command, **kwargs)
        return real(command, **kwargs)

    monkeypatch.setattr(distributed.subprocess, "run", dispatch)


def test_failed_rank_is_reported_with_its_error(monkeypatch, tmp_path):
    def torchrun(command, env, capture_output, text, preexec_fn):
        result = command[-1]
        with open(f"{result}.rank1.error", "w") as error:
            message = "CUDA out of memory. Tried to allocate 8 GiB"
            json.dump({"type": "OutOfMemoryError", "message": message}, error)
        return type("Done", (), {"returncode": 1, "stdout": "", "stderr": "worker 1 failed"})()

    fake_torchrun(monkeypatch, torchrun)
    exp = TrainExperiment("fcn", "cpu2", "fp32", "ddp", 4)
    measurement.run(exp, tiny_settings("fcn"), str(tmp_path / "record.json"), context=CONTEXT)
    record = load_record(tmp_path / "record.json")
    assert record["status"] == "oom"
    assert record["reason"] == (
        "LaunchError: rank 1: OutOfMemoryError: CUDA out of memory. Tried to allocate 8 GiB"
    )


def test_a_rank_that_cannot_run_the_precision_makes_the_record_unavailable(monkeypatch):
    def torchrun(command, env, capture_output, text, preexec_fn):
        with open(f"{command[-1]}.rank0.error", "w") as error:
            json.dump({"type": "Unavailable", "message": "no float16 LSTM here"}, error)
        return type("Done", (), {"returncode": 1, "stdout": "", "stderr": ""})()

    fake_torchrun(monkeypatch, torchrun)
    outcome = measure_training(TrainExperiment("lstm", "cpu2", "fp16", "ddp", 4), TrainSettings())
    assert (outcome.status, outcome.reason) == ("unavailable", "no float16 LSTM here")


def test_torchrun_that_dies_without_a_result_is_a_failure(monkeypatch):
    def torchrun(command, env, capture_output, text, preexec_fn):
        assert command[1:4] == ["-m", "torch.distributed.run", "--standalone"]
        assert "--nproc-per-node=2" in command and env["OMP_NUM_THREADS"] == "1"
        return type("Done", (), {"returncode": -9, "stdout": "", "stderr": "Killed"})()

    fake_torchrun(monkeypatch, torchrun)
    with pytest.raises(ranks.LaunchError, match="torchrun exited with status -9: Killed"):
        distributed.launch_local({}, processes=2, threads_per_process=1)


def _rank_that_fails_on_rank_1(rendezvous):
    """No torch work: forking from the test process is safe for it."""
    if rendezvous.rank == 1:
        raise ValueError("rank 1 cannot go on")
    time.sleep(60)  # rank 0 would wait in a collective for the failed rank
    return {}


def test_a_failed_forked_rank_stops_the_others_and_names_its_error():
    started = time.monotonic()
    with pytest.raises(ranks.LaunchError, match="rank 1: ValueError: rank 1 cannot go on"):
        distributed.launch_forked(_rank_that_fails_on_rank_1, processes=2)
    assert time.monotonic() - started < 20


def test_a_killed_forked_rank_is_named():
    def killed(rendezvous):
        if rendezvous.rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)
        return {}

    with pytest.raises(ranks.LaunchError, match="rank 1 was killed by SIGKILL"):
        distributed.launch_forked(killed, processes=2)


def test_ranks_fork_only_where_the_process_allows_it(monkeypatch):
    launched = []
    monkeypatch.setattr(distributed, "launch_forked", lambda *args: launched.append("fork"))
    monkeypatch.setattr(distributed, "launch_local", lambda *args: launched.append("torchrun"))
    monkeypatch.setattr(distributed, "os_threads", lambda: 1)
    distributed.launch(None, {}, 2, 1, on_gpus=False)
    with ranks.ranks_may_fork():
        distributed.launch(None, {}, 2, 1, on_gpus=False)
        distributed.launch(None, {}, 2, 1, on_gpus=True)  # CUDA cannot be used after a fork
    assert launched == ["torchrun", "fork", "torchrun"]


def _launcher_chosen_here(with_another_thread: bool) -> list[str]:
    """In a process of its own (one thread, forked): how launch() starts CPU ranks."""
    chosen = []
    distributed.launch_forked = lambda *args: chosen.append("fork")
    distributed.launch_local = lambda *args: chosen.append("torchrun")
    done = threading.Event()
    if with_another_thread:
        threading.Thread(target=done.wait).start()
    with ranks.ranks_may_fork():
        distributed.launch(None, {}, 2, 1, on_gpus=False)
    done.set()
    return chosen


def test_ranks_are_forked_only_from_a_process_that_runs_a_single_thread():
    assert processes.call_in_fork(_launcher_chosen_here, False) == ["fork"]
    assert processes.call_in_fork(_launcher_chosen_here, True) == ["torchrun"]


# Run by a new interpreter (this test process may have initialised CUDA, which a forked
# rank cannot then use): a DDP cell whose forked ranks note the gloo workers they run
# before and after destroy_process_group, one line per rank.
NOTE_GLOO_WORKERS = """\
import os
import sys
from pathlib import Path

import torch.distributed as dist

from accelbench.families.train import TrainExperiment
from accelbench.platform import processes, ranks
from accelbench.train.loop import measure_training
from accelbench.train.settings import TrainSettings

notes = Path(sys.argv[1])


def gloo_workers():
    tasks = os.listdir("/proc/self/task")
    names = [Path(f"/proc/self/task/{task}/comm").read_text().strip() for task in tasks]
    return names.count("pt_gloo_runloop")


destroy = dist.destroy_process_group


def noted(*args, **kwargs):
    before = gloo_workers()
    destroy(*args, **kwargs)
    with notes.open("a") as file:
        file.write(f"{before} {gloo_workers()}\\n")


def train():
    settings = TrainSettings(seed=0, steps=3, warmup_steps=1, runs=2)
    with ranks.ranks_may_fork():
        outcome = measure_training(TrainExperiment("fcn", "cpu2", "fp32", "ddp", 8), settings)
    return outcome.status, outcome.reason, outcome.params.get("launcher")


dist.destroy_process_group = noted
print(*processes.call_in_fork(train))
"""


def test_a_ranks_gloo_workers_end_in_destroy_process_group(tmp_path):
    """Not later, when the frame that holds the last run's model is dropped: the workers
    would then be joined while the rank holds the GIL, and one that is releasing a
    collective's tensor waits for the GIL for good (forked ranks hung so on a 16-CPU host)."""
    script, notes = tmp_path / "note_gloo_workers.py", tmp_path / "gloo-workers"
    script.write_text(NOTE_GLOO_WORKERS)
    ended = subprocess.run(
        [sys.executable, str(script), str(notes)], capture_output=True, text=True, timeout=120
    )
    assert ended.returncode == 0, ended.stderr
    assert ended.stdout.split() == ["ok", "None", "fork"]
    counts = [tuple(map(int, line.split())) for line in notes.read_text().splitlines()]
    assert len(counts) == 2  # one line per rank
    assert all(before >= 1 and after == 0 for before, after in counts), counts


def _join_and_tell(rendezvous):
    """Join the group and leave: gloo's messages only, no torch computation (its OpenMP pool
    may run in this test process), so forking from here is safe for it."""
    import torch.distributed as dist

    distributed.init_process_group(rendezvous, "gloo")
    ranks: list = [None, None]
    dist.all_gather_object(ranks, rendezvous.rank)
    dist.destroy_process_group()
    return {
        "ranks": ranks,
        "port": rendezvous.master_port,
        "store": rendezvous.store_file,
        "interface": os.environ["GLOO_SOCKET_IFNAME"],
    }


def test_forked_ranks_meet_in_a_file_of_their_own_not_on_a_port(monkeypatch):
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    met = distributed.launch_forked(_join_and_tell, processes=2)
    assert met["ranks"] == [0, 1]
    assert met["port"] == 0
    assert Path(met["store"]).parent.name.startswith("accelbench-ddp-")
    assert Path(met["store"]).is_relative_to(tempfile.gettempdir())
    assert not Path(met["store"]).parent.exists()  # gone with the launch
    assert met["interface"] == "lo"  # one host: loopback, no look-up of the host's name


def _rank_1_never_joins(rendezvous):
    if rendezvous.rank == 1:
        time.sleep(60)
    distributed.init_process_group(rendezvous, "gloo")
    return {}


def test_a_rank_that_never_joins_times_out_before_the_deadline_as_a_passing_fault(monkeypatch):
    monkeypatch.setattr(distributed, "PROCESS_GROUP_FLOOR", timedelta(seconds=2))
    monkeypatch.setenv(processes.DEADLINE_VARIABLE, str(time.time() + 10))
    started = time.monotonic()
    with pytest.raises(
        distributed.PeersTimedOut,
        match=r"^rank 0: the rendezvous of 2 processes \(waiting up to 2 s\) timed out: ",
    ) as raised:
        distributed.launch_forked(_rank_1_never_joins, processes=2)
    assert time.monotonic() - started < 20
    outcome = of_error(raised.value)
    assert (outcome.status, outcome.transient) == ("failed", True)
    assert outcome.reason.endswith("a passing fault: the next run measures it again")


@pytest.mark.parametrize(
    ("left", "timeout"),
    [(None, 600), (3600, 3580), (600, 580), (30, 60), (-5, 60)],
)
def test_ranks_wait_for_their_peers_until_shortly_before_the_jobs_deadline(
    monkeypatch, left, timeout
):
    if left is None:  # outside a supervised job
        monkeypatch.delenv(processes.DEADLINE_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(processes.DEADLINE_VARIABLE, str(time.time() + left))
    assert distributed.process_group_timeout().total_seconds() == pytest.approx(timeout, abs=1)


@pytest.mark.parametrize(
    ("message", "timed_out"),
    [
        ("Wait timeout", True),  # FileStore
        ("Timed out after 61 seconds waiting for clients. 1/2 clients joined.", True),  # TCPStore
        (
            "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting "
            "3000ms for recv operation to complete",
            True,
        ),
        ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, ...)", True),
        ("Connection reset by peer", False),
        ("Expected more than 1 value per channel when training", False),
    ],
)
def test_a_wait_for_peers_that_ran_out_of_time_is_told_from_other_errors(message, timed_out):
    hung = distributed.peers_timed_out(RuntimeError(message), "a collective of the processes")
    assert (hung is not None) == timed_out
    if hung:
        assert str(hung) == f"a collective of the processes timed out: RuntimeError: {message}"


# Every fork in a process started from here, noted with its caller and the threads the
# process ran at that moment.
FORKS_NOTED = """\
import os, sys

_fork = os.fork


def fork():
    with open(os.environ["FORK_NOTES"], "a") as notes:
        threads = len(os.listdir("/proc/self/task"))
        notes.write(f"{sys._getframe(1).f_code.co_name} {threads}\\n")
    return _fork()


os.fork = fork
"""


def plant_in_children(tmp_path, monkeypatch, code: str) -> None:
    """Processes started from here run `code` as they start (sitecustomize); this one does not."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(code)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), *sys.path]))


def test_a_supervised_ddp_experiment_forks_its_ranks_from_a_single_threaded_process(
    tmp_path, monkeypatch
):
    """The measuring process of a job has started no thread pool, and each run's process
    runs one thread: the runs fork their ranks."""
    plant_in_children(tmp_path, monkeypatch, FORKS_NOTED)
    notes = tmp_path / "forks"
    monkeypatch.setenv("FORK_NOTES", str(notes))
    exp = TrainExperiment("fcn", "cpu2", "fp32", "ddp", 8)
    output = tmp_path / "ddp.json"
    # Measured once, even where other load would have it measured again.
    settings = tiny_settings("fcn", runs=2, contention=ContentionSettings(retries=0))
    supervisor.run_supervised(
        exp, settings, str(output), context=CONTEXT, attempt=1, max_attempts=1, time_limit=300
    )
    record = load_record(output)
    assert record["status"] == "ok", record["reason"]
    assert record["params"]["launcher"] == "fork"
    forks = [line.split() for line in notes.read_text().splitlines()]
    ranks_forked_with = [int(threads) for caller, threads in forks if caller == "launch_forked"]
    assert ranks_forked_with == [1] * 4  # 2 runs of 2 ranks, each from a one-thread process
    assert record["metrics"]["processes"]["value"] == 2
    assert record["metrics"]["time_per_batch"]["runs"] == 2
    single = measure_training(
        TrainExperiment("fcn", "cpu1", "fp32", "single", 8), tiny_settings("fcn")
    )
    torch.testing.assert_close(
        torch.tensor(record["series"]["loss"]["values"]),
        torch.tensor(single.series["loss"]["values"]),
    )


# A planted hang for a process started from here: rank 1 of a group never joins it.
RANK_1_NEVER_JOINS = """\
import time

import accelbench.train.loop as loop

_train_process = loop.train_process


def rank_1_never_joins(exp, settings, rendezvous, *args, **kwargs):
    while rendezvous.rank == 1:
        time.sleep(1)
    return _train_process(exp, settings, rendezvous, *args, **kwargs)


loop.train_process = rank_1_never_joins
"""


@pytest.mark.waits
def test_a_ddp_job_whose_rank_never_joins_ends_transient_with_every_processs_stacks(
    tmp_path, monkeypatch
):
    plant_in_children(tmp_path, monkeypatch, RANK_1_NEVER_JOINS)
    exp = TrainExperiment("fcn", "cpu2", "fp32", "ddp", 8)
    output, log_file = tmp_path / "ddp.json", tmp_path / "ddp.log"
    settings = tiny_settings("fcn", runs=2)
    supervisor.run_supervised(
        exp,
        settings,
        str(output),
        context=CONTEXT,
        attempt=1,
        max_attempts=1,
        time_limit=30,
        log_file=str(log_file),
    )
    record = load_record(output)
    assert (record["status"], record["transient"]) == ("failed", True)
    assert "exceeded the job's time limit: stopped after 30 s" in record["reason"]
    log = log_file.read_text()
    assert log.count("Current thread 0x") == 4  # the measuring process, its run, both ranks
    assert "in rank_1_never_joins" in log
    assert "in init_process_group" in log  # rank 0, waiting at the rendezvous


# Pipeline ------------------------------------------------------------------------------------


def test_balanced_split_minimises_the_slowest_stage():
    costs = [5.0, 1.0, 1.0, 1.0, 4.0, 2.0, 2.0]
    for stages in range(1, len(costs) + 1):
        bounds = balanced_split(costs, stages)
        assert bounds[0] == 0 and bounds[-1] == len(costs) and len(bounds) == stages + 1
        assert all(a < b for a, b in itertools.pairwise(bounds))
        slowest = max(sum(costs[a:b]) for a, b in itertools.pairwise(bounds))
        best = min(
            max(sum(costs[a:b]) for a, b in itertools.pairwise((0, *cuts, len(costs))))
            for cuts in itertools.combinations(range(1, len(costs)), stages - 1)
        )
        assert slowest == best
    with pytest.raises(ValueError, match="cannot split 7 layers into 8 non-empty stages"):
        balanced_split(costs, 8)


@pytest.mark.parametrize("name", ["fcn", "resnet56", "gpt"])
def test_pipeline_on_cpu_stages_matches_the_unsplit_model(name):
    spec = models()[name]
    options = resolve_options(spec, TINY[name])
    torch.manual_seed(0)
    reference = spec.build(options)
    split = copy.deepcopy(reference)
    inputs, targets = spec.make_batch(torch.Generator().manual_seed(0), 6, options)
    layers = spec.layers(split)
    cpu = torch.device("cpu")
    pipeline = Pipeline(layers, [cpu] * 3, microbatches=3, costs=layer_costs(layers, inputs))
    assert len(pipeline.stages) == 3
    reference.eval(), pipeline.eval()
    with torch.no_grad():
        torch.testing.assert_close(pipeline(inputs), reference(inputs))
    if any(isinstance(m, torch.nn.BatchNorm2d) for m in reference.modules()):
        return  # in training mode BatchNorm sees micro-batches (as in GPipe): not comparable
    reference.train(), pipeline.train()
    criterion = spec.loss()
    expected = reference(inputs)
    output = pipeline(inputs)
    torch.testing.assert_close(output, expected)
    criterion(expected, targets).backward()
    criterion(output, targets).backward()
    for a, b in zip(reference.parameters(), split.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad)


def test_pipeline_stages_follow_the_layer_costs():
    spec = models()["fcn"]
    options = resolve_options(spec, {"input_dim": 64, "hidden": [64, 4, 4], "classes": 4})
    # Layers: Linear(64, 64), ReLU, Linear(64, 4), ReLU, Linear(4, 4), ReLU, Linear(4, 4).
    model = spec.build(options)
    inputs, _ = spec.make_batch(torch.Generator().manual_seed(0), 2, options)
    layers = spec.layers(model)
    pipeline = Pipeline(layers, [torch.device("cpu")] * 2, 2, layer_costs(layers, inputs))
    # The first layer holds most of the work: it is a stage of its own.
    assert pipeline.boundaries == [0, 1, 7]


# DDP and FSDP with gloo in 2 processes ---------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Models without BatchNorm (whose statistics are per process under DDP) and without
# attention: a key bias gets a gradient that is zero up to rounding, which Adam's
# normalisation turns into a full-size step of either sign.
SCENARIOS = [("fcn", "ddp"), ("fcn", "fsdp"), ("lstm", "fsdp"), ("autoencoder", "ddp")]
GLOBAL_BATCH = 4


def _rank_worker(rank: int, ports: list[int], queue) -> None:
    for (model, strategy), port in zip(SCENARIOS, ports, strict=True):
        rendezvous = ranks.Rendezvous(rank, 2, rank, "127.0.0.1", port, "spawn")
        exp = TrainExperiment(model, "cpu2", "fp32", strategy, GLOBAL_BATCH)
        settings = tiny_settings(model, steps=2, warmup=0)
        result = train_process(exp, settings, rendezvous, keep_state=True)
        if rank == 0:  # as NumPy: torch would share tensors that vanish with this process
            state = {name: tensor.numpy() for name, tensor in result["state"].items()}
            queue.put((model, strategy, state, result["losses"], result["processes"]))


@pytest.fixture(scope="module")
def two_process_runs():
    """Each scenario trained by 2 gloo processes (spawned here, one free port each)."""
    context = mp.get_context("spawn")
    queue = context.SimpleQueue()
    ports = [free_port() for _ in SCENARIOS]
    mp.start_processes(_rank_worker, args=(ports, queue), nprocs=2, start_method="spawn")
    results = {}
    while not queue.empty():
        model, strategy, state, losses, processes = queue.get()
        state = {name: torch.from_numpy(array) for name, array in state.items()}
        results[model, strategy] = (state, losses, processes)
    return results


def assert_as_accurate_as(candidate, baseline, exact, what: str) -> None:
    """`candidate` is no further from the float64 `exact` result than float32 rounding allows.

    Two processes add the same gradient terms in another order than one process does,
    so their float32 parameters differ in the last bits, and an optimiser such as Adam
    can magnify that where a gradient is nearly zero. What cannot differ is accuracy:
    measured against the same training run in float64, the distributed result must be
    about as close as the one-process float32 result is (a factor 4 in norm for the
    other order of rounding), up to the float32 representation of the parameters
    themselves. No bound here depends on the CPU the test happens to run on.
    """
    exact = exact.double()
    baseline_error = torch.linalg.vector_norm(baseline.double() - exact)
    candidate_error = torch.linalg.vector_norm(candidate.double() - exact)
    representation = torch.finfo(torch.float32).eps * torch.linalg.vector_norm(exact)
    bound = 4 * baseline_error + representation
    assert candidate_error <= bound, (
        f"{what}: distance to the float64 result {candidate_error:.3g} exceeds {bound:.3g} "
        f"(one float32 process: {baseline_error:.3g})"
    )


@pytest.mark.parametrize(("model", "strategy"), SCENARIOS)
def test_two_processes_match_one_on_the_same_global_batch(model, strategy, two_process_runs):
    state, losses, processes = two_process_runs[model, strategy]
    assert processes == 2
    settings = tiny_settings(model, steps=2, warmup=0)
    single, exact = (
        train_process(
            TrainExperiment(model, "cpu1", precision, "single", GLOBAL_BATCH),
            settings,
            keep_state=True,
        )
        for precision in ("fp32", "fp64")
    )
    initial = models()[model].build(resolve_options(models()[model], TINY[model]))
    assert state.keys() == single["state"].keys() == exact["state"].keys()
    moved = 0
    for name, tensor in single["state"].items():
        assert_as_accurate_as(state[name], tensor, exact["state"][name], name)
        moved += not torch.equal(tensor, initial.state_dict()[name])
    assert moved, "two optimiser steps must move the parameters"
    # The group's loss is the mean over processes: the loss of the whole batch.
    assert_as_accurate_as(
        torch.tensor(losses), torch.tensor(single["losses"]), torch.tensor(exact["losses"]), "loss"
    )


def test_ddp_experiment_launches_its_processes_with_torchrun(tmp_path):
    exp = TrainExperiment("fcn", "cpu2", "fp32", "ddp", 8)
    output = tmp_path / "ddp.json"
    assert measurement.run(exp, tiny_settings("fcn"), str(output), context=CONTEXT) == "ok"
    record = load_record(output)
    metrics = record["metrics"]
    assert metrics["processes"]["value"] == 2 and metrics["threads"]["value"] == 1
    assert metrics["time_per_batch"]["n"] == 3
    assert record["params"]["strategy"] == "ddp"
    single = measure_training(
        TrainExperiment("fcn", "cpu1", "fp32", "single", 8), tiny_settings("fcn")
    )
    torch.testing.assert_close(
        torch.tensor(record["series"]["loss"]["values"]),
        torch.tensor(single.series["loss"]["values"]),
    )
    json.dumps(record)  # plain JSON all through


def test_ddp_ranks_warm_up_measure_and_add_runs_alike(tmp_path):
    """Every process decides on the same combined step times and rank 0's run count, so
    the group warms up, measures and repeats in step (a rank that ran one more step or
    run than its peer would hang the group in a collective)."""
    exp = TrainExperiment("fcn", "cpu2", "fp32", "ddp", 8)
    output = tmp_path / "ddp.json"
    settings = tiny_settings(
        "fcn", warmup_s=0.3, min_run_time=0.1, runs=3, half_width=1e-6, budget_s=3.0
    )
    assert measurement.run(exp, settings, str(output), context=CONTEXT) == "ok"
    record = load_record(output)
    runs = record["conditions"]["runs"]
    assert runs >= 3 and record["conditions"]["imprecise"] is True
    measured = record["raw"]["time_per_batch"]["runs"]
    assert len(measured) == runs == len(record["series"]["warmup_s"]["values"])
    assert all(len(steps) >= 3 and sum(steps) >= 0.1 for steps in measured)


# Precisions, compile, channels-last on the CPU ----------------------------------------------


@pytest.mark.parametrize("precision", ["fp64", "bf16", "fp16"])
@pytest.mark.parametrize("model", ["fcn", "lstm", "bert", "autoencoder", "dcgan", "gcn"])
def test_cpu_precisions(model, precision):
    outcome = measure_training(
        TrainExperiment(model, "cpu1", precision, "single", 4), tiny_settings(model)
    )
    missing = cpu_support.lstm_unsupported(AUTOCAST_DTYPES.get(precision, torch.float32))
    if model == "lstm" and missing:
        # This CPU's oneDNN has no LSTM kernel in this precision: the record says why.
        assert (outcome.status, outcome.reason) == ("unavailable", missing)
        return
    assert outcome.status == "ok", outcome.reason
    assert all(torch.isfinite(torch.tensor(outcome.series["loss"]["values"])))


AVX2_ONLY = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma f16c"
AVX512_BF16 = AVX2_ONLY + " avx512f avx512bw avx512vl avx512dq avx512_bf16"


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_an_lstm_precision_the_cpu_lacks_is_unavailable_naming_the_feature(monkeypatch, precision):
    monkeypatch.setenv(cpu_support.FORCED_FLAGS_ENV, AVX2_ONLY)
    cpu_support.cpu_flags.cache_clear()
    try:
        outcome = measure_training(
            TrainExperiment("lstm", "cpu1", precision, "single", 4), tiny_settings("lstm")
        )
    finally:
        cpu_support.cpu_flags.cache_clear()
    assert outcome.status == "unavailable"
    needed = "AVX-512 (avx512f" if precision == "bf16" else "AVX512-FP16 (avx512_fp16)"
    assert needed in outcome.reason and "lacks" in outcome.reason


def test_a_simulated_cpu_with_the_feature_allows_the_lstm_precision(monkeypatch):
    monkeypatch.setenv(cpu_support.FORCED_FLAGS_ENV, AVX512_BF16)
    cpu_support.cpu_flags.cache_clear()
    try:
        assert cpu_support.lstm_unsupported(torch.bfloat16) is None
        assert "avx512_fp16" in cpu_support.lstm_unsupported(torch.float16)
    finally:
        cpu_support.cpu_flags.cache_clear()


def test_the_lstm_probe_agrees_with_a_real_bf16_lstm_on_this_cpu():
    lstm = torch.nn.LSTM(8, 8, batch_first=True)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lstm(torch.randn(2, 5, 8))
        runs = True
    except RuntimeError:
        runs = False
    assert (cpu_support.lstm_probe(torch.bfloat16) is None) == runs


def threaded_apply(modules, inputs, kwargs_tup=None, devices=None):
    """torch's parallel_apply on the CPU: each replica in a thread of its own, re-entering
    autocast with `enabled` only (torch 2.14, nn/parallel/parallel_apply.py); a new
    thread starts from the default autocast dtype, bfloat16 on the CPU (float16 on CUDA)."""
    enabled = torch.is_autocast_enabled("cpu")
    kwargs_tup = kwargs_tup or [{}] * len(modules)
    results = {}

    def worker(index, module, args, kwargs):
        with torch.amp.autocast("cpu", enabled=enabled):
            results[index] = module(*args, **kwargs)

    threads = [
        threading.Thread(target=worker, args=(index, *call))
        for index, call in enumerate(zip(modules, inputs, kwargs_tup, strict=True))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [results[index] for index in range(len(modules))]


class DtypeProbe(torch.nn.Module):
    """A linear layer that notes the autocast dtype its forward runs under."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.seen = []

    def forward(self, x):
        self.seen.append(torch.get_autocast_dtype("cpu"))
        return self.linear(x)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_data_parallel_replicas_compute_in_the_configured_precision(monkeypatch, dtype):
    # The module (torch.nn.parallel.data_parallel is also the name of a function there).
    data_parallel = importlib.import_module("torch.nn.parallel.data_parallel")
    monkeypatch.setattr(data_parallel, "parallel_apply", threaded_apply)
    probe = DtypeProbe()
    gpus = (torch.device("cuda", 0), torch.device("cuda", 1))
    place = strategies.Placement(torch.device("cpu"), torch.device("cpu"), gpus)
    spec = models()["fcn"]
    (wrapped,) = strategies.wrap("dp", spec, probe, place, 1, None)
    assert isinstance(wrapped, torch.nn.DataParallel)
    # What DataParallel sets up on a machine with two GPUs (it has no CPU mode).
    wrapped.device_ids, wrapped.src_device_obj = [0, 1], torch.device("cpu")
    replicas = [probe, copy.deepcopy(probe)]
    with torch.autocast("cpu", dtype=dtype):
        outputs = wrapped.parallel_apply(replicas, [(torch.ones(2, 4),)] * 2, [{}, {}])
    assert [replica.seen for replica in replicas] == [[dtype], [dtype]]
    assert [output.dtype for output in outputs] == [dtype, dtype]


def test_fp64_trains_in_double_precision(monkeypatch):
    from accelbench.train import session

    seen = []
    original = session.Session.train_step

    def spy(self, inputs, targets):
        seen.append((inputs.dtype, next(self.model.parameters()).dtype))
        return original(self, inputs, targets)

    monkeypatch.setattr(session.Session, "train_step", spy)
    outcome = measure_training(
        TrainExperiment("fcn", "cpu1", "fp64", "single", 4), tiny_settings("fcn")
    )
    assert outcome.status == "ok"
    assert set(seen) == {(torch.float64, torch.float64)}


def test_channels_last_and_compile_are_recorded_settings(tmp_path):
    exp = TrainExperiment("resnet56", "cpu1", "fp32", "single", 4)
    settings = tiny_settings("resnet56", channels_last=True, compile="aot_eager")
    output = tmp_path / "record.json"
    assert measurement.run(exp, settings, str(output), context=CONTEXT) == "ok", load_record(
        output
    )["reason"]
    params = load_record(output)["params"]
    assert params["channels_last"] is True and params["compile"] == "aot_eager"


def test_compile_with_a_strategy_it_is_not_applied_to_is_unavailable():
    exp = TrainExperiment("fcn", "cpu2", "fp32", "fsdp", 4)
    outcome = measure_training(exp, tiny_settings("fcn", compile="inductor"))
    assert outcome.status == "unavailable"
    assert "torch.compile is applied with strategies single, ddp" in outcome.reason


# On GPUs (run wherever one is present) -------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason=NO_GPU_REASON)
@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16", "bf16", "fp64"])
@pytest.mark.parametrize("model", ["resnet56", "lstm", "gpt", "dcgan", "gcn"])
def test_gpu_precisions(model, precision):
    outcome = measure_training(
        TrainExperiment(model, "cuda1", precision, "single", 8), tiny_settings(model)
    )
    if precision == "bf16" and not torch.cuda.is_bf16_supported():
        assert outcome.status == "unavailable" and "bfloat16" in outcome.reason
        return
    assert outcome.status == "ok", outcome.reason
    assert "peak_gpu_memory" in outcome.metrics
    assert all(torch.isfinite(torch.tensor(outcome.series["loss"]["values"])))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason=NO_GPU_REASON)
@pytest.mark.parametrize("strategy", ["dp", "ddp", "fsdp", "pipeline"])
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_gpu_strategies_on_two_gpus(strategy, precision):
    exp = TrainExperiment("gpt", "cuda2", precision, strategy, 8)
    assert train_exclusion(exp) is None
    outcome = measure_training(exp, tiny_settings("gpt"))
    if torch.cuda.device_count() < 2:
        assert outcome.status == "unavailable"
        assert "cuda2 needs 2 GPUs but only 1 are visible" in outcome.reason
        return
    assert outcome.status == "ok", outcome.reason
    expected = 2 if strategy in ("ddp", "fsdp") else 1
    assert outcome.metrics["processes"]["value"] == expected
    single = measure_training(
        TrainExperiment("gpt", "cuda1", precision, "single", 8), tiny_settings("gpt")
    )
    first = outcome.series["loss"]["values"][0]
    assert first == pytest.approx(single.series["loss"]["values"][0], rel=2e-2)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="DataParallel's replicas need 2 GPUs")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_data_parallel_replicas_on_two_gpus_compute_in_the_configured_precision(dtype):
    codes = {torch.float16: 16, torch.bfloat16: 17}

    class CudaDtypeProbe(torch.nn.Linear):
        """Returns, beside its output, the autocast dtype its replica's thread computed in."""

        def forward(self, x):
            seen = codes[torch.get_autocast_dtype("cuda")]
            return super().forward(x), torch.tensor([seen], device=x.device)

    gpus = (torch.device("cuda", 0), torch.device("cuda", 1))
    place = strategies.Placement(gpus[0], gpus[0], gpus)
    (wrapped,) = strategies.wrap("dp", models()["fcn"], CudaDtypeProbe(4, 4), place, 1, None)
    with torch.autocast("cuda", dtype=dtype):
        output, seen = wrapped(torch.ones(4, 4, device=gpus[0]))
    assert output.dtype == dtype
    assert seen.tolist() == [codes[dtype]] * 2  # one per replica

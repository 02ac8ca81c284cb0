"""A passing fault keeps its cause and is measured again; a failure of the configuration stays.

A full disk, a process killed from outside (other than by the OOM killer) or one
that died without a word gives a "failed" record marked transient, with the real
cause; only the OOM killer's own count makes a killed process "oom".
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import faulthandler
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.grid import experiment_of_id, group_rule
from accelbench.job import fork_server, measurement, supervisor
from accelbench.job.context import JobContext
from accelbench.measuring.outcome import RetryableFailure
from accelbench.measuring.statistics import summarize
from accelbench.platform import processes
from accelbench.records import record as results
from accelbench.records.record import RecordError, load_record, make_record

from conftest import planned_jobs, snakemake

KERNEL = KernelExperiment("matmul", "cpu1", "numpy", "float64", 8)
SETTINGS = KernelSettings(min_run_time=0.01, samples=3)
SLOW = dataclasses.replace(SETTINGS, min_run_time=120.0)
CONTEXT = JobContext("t")


def measuring_with(monkeypatch, measure) -> None:
    monkeypatch.setattr("accelbench.kernels.measure.measure_kernel", measure)


# --- errors inside the measurement -------------------------------------------------------------


def test_a_full_disk_during_the_measurement_is_a_passing_fault_with_its_cause(
    monkeypatch, tmp_path
):
    def measure(exp, settings):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/scratch/cache.bin")

    measuring_with(monkeypatch, measure)
    out = tmp_path / "r.json"
    assert measurement.run(KERNEL, SETTINGS, str(out), context=CONTEXT) == "failed"
    record = load_record(out)
    assert record["transient"] is True
    assert "OSError: [Errno 28] No space left on device: '/scratch/cache.bin'" in record["reason"]
    assert "the next run measures it again" in record["reason"]
    flag = results.retry_flag(out)
    assert flag.name == ".r.json.retry"
    assert flag.stat().st_mtime > out.stat().st_mtime  # newer: Snakemake measures it again


def test_an_error_of_the_configuration_is_not_transient(monkeypatch, tmp_path):
    def measure(exp, settings):
        raise ValueError("shapes (8,8) and (9,9) not aligned")

    measuring_with(monkeypatch, measure)
    out = tmp_path / "r.json"
    measurement.run(KERNEL, SETTINGS, str(out), context=CONTEXT)
    record = load_record(out)
    assert record["status"] == "failed"
    assert "transient" not in record
    assert not results.retry_flag(out).exists()


# --- a forked run that dies -------------------------------------------------------------------


@pytest.fixture
def cgroup(monkeypatch, tmp_path):
    """A cgroup v2 memory cgroup of this process, with the OOM killer's counter at 0."""
    root = tmp_path / "sys-fs-cgroup"
    events = root / "job" / "memory.events"
    events.parent.mkdir(parents=True)
    events.write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\noom_group_kill 0\n")
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text("0::/job\n")
    monkeypatch.setattr(processes, "PROC_CGROUP", proc)
    monkeypatch.setattr(processes, "CGROUP_ROOT", root)
    return events


def run_forked(monkeypatch, measure):
    measuring_with(monkeypatch, measure)
    return measurement.in_fresh_process(measure, KERNEL, SETTINGS)


def killed_by(signum: int, oom_kill: Path | None = None):
    def measure(exp, settings):
        if oom_kill is not None:  # as the kernel does: count the kill, then send SIGKILL
            oom_kill.write_text(oom_kill.read_text().replace("oom_kill 0", "oom_kill 1"))
        # The fork inherits pytest's fatal-error handler, which would print the crash's
        # "Fatal Python error" and stack to the suite's output as if the suite had crashed.
        faulthandler.disable()
        os.kill(os.getpid(), signum)
        time.sleep(10)

    return measure


def test_a_run_killed_by_sigkill_without_the_oom_killer_is_a_passing_fault(monkeypatch, cgroup):
    outcome = run_forked(monkeypatch, killed_by(signal.SIGKILL))
    assert outcome.status == "failed"
    assert outcome.transient
    assert "the run's process was killed by SIGKILL, not by the OOM killer" in outcome.reason
    assert f"{cgroup} counted none" in outcome.reason
    assert "out of memory" not in outcome.reason


def test_a_run_the_oom_killer_killed_is_oom(monkeypatch, cgroup):
    outcome = run_forked(monkeypatch, killed_by(signal.SIGKILL, oom_kill=cgroup))
    assert outcome.status == "oom"
    assert not outcome.transient
    assert outcome.reason == (
        f"the run's process was killed by SIGKILL by the OOM killer ({cgroup} counted "
        "1 OOM kill meanwhile)"
    )


def test_without_an_oom_counter_a_kill_is_not_called_oom(monkeypatch, tmp_path):
    monkeypatch.setattr(processes, "PROC_CGROUP", tmp_path / "no-such-file")
    outcome = run_forked(monkeypatch, killed_by(signal.SIGKILL))
    assert (outcome.status, outcome.transient) == ("failed", True)
    assert "no OOM-kill counter readable here" in outcome.reason


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_run_stopped_by_another_signal_is_a_passing_fault(monkeypatch, cgroup, signum):
    outcome = run_forked(monkeypatch, killed_by(signum))
    assert (outcome.status, outcome.transient) == ("failed", True)
    assert f"was killed by {signal.Signals(signum).name}" in outcome.reason


@pytest.mark.parametrize("signum", [signal.SIGSEGV, signal.SIGABRT])
def test_a_run_that_crashes_is_the_configurations_failure(monkeypatch, cgroup, signum):
    outcome = run_forked(monkeypatch, killed_by(signum))
    assert (outcome.status, outcome.transient) == ("failed", False)
    assert outcome.reason == f"the run's process was killed by {signal.Signals(signum).name}"


# --- where the OOM killer's count is read -----------------------------------------------------


@pytest.mark.parametrize(
    ("proc_cgroup", "counter", "text"),
    [
        ("0::/user.slice/job\n", "user.slice/job/memory.events", "oom 2\noom_kill 2\n"),
        (  # hybrid: cgroup v2 mounted at unified/, no v1 memory controller
            "1:name=systemd:/\n0::/job\n",
            "unified/job/memory.events",
            "oom_kill 2\n",
        ),
        (  # cgroup v1 memory controller (this kind of container, older clusters)
            "4:memory:/slurm/uid_1/job_7\n0::/\n",
            "memory/slurm/uid_1/job_7/memory.oom_control",
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        ),
    ],
)
def test_the_oom_kill_count_is_read_from_the_processs_memory_cgroup(
    monkeypatch, tmp_path, proc_cgroup, counter, text
):
    (tmp_path / "cgroup").write_text(proc_cgroup)
    file = tmp_path / "fs" / counter
    file.parent.mkdir(parents=True)
    file.write_text(text)
    monkeypatch.setattr(processes, "PROC_CGROUP", tmp_path / "cgroup")
    monkeypatch.setattr(processes, "CGROUP_ROOT", tmp_path / "fs")
    kills = processes.OomKills.read()
    assert (kills.file, kills.count) == (file, 2)
    assert kills.since() == 0
    file.write_text(text.replace("oom_kill 2", "oom_kill 5"))
    assert kills.since() == 3


# --- the supervised measuring process --------------------------------------------------------


def _children_measuring() -> list[int]:
    """This process's children that run accelbench.job.measuring_process."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == os.getpid() and b"accelbench.job.measuring_process" in cmdline:
                found.append(int(entry.name))
    return found


def _kill_the_child_when_it_starts() -> threading.Thread:
    def kill():
        for _ in range(600):
            children = _children_measuring()
            if children:
                time.sleep(0.5)
                os.kill(children[0], signal.SIGKILL)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


def test_a_measuring_process_killed_from_outside_is_recorded_as_a_passing_fault(tmp_path):
    out = tmp_path / "r.json"
    killer = _kill_the_child_when_it_starts()
    supervisor.run_supervised(
        KERNEL, SLOW, str(out), context=CONTEXT, attempt=1, max_attempts=1, time_limit=300
    )
    killer.join()
    record = load_record(out)
    assert record["status"] == "failed"
    assert record["transient"] is True
    assert record["reason"].startswith("the measuring process was killed by SIGKILL, ")
    assert "the next run measures it again" in record["reason"]


# A process that writes its stacks when asked, as every process of a job does; it waits forever.
ANSWERS_FOR_ITS_STACKS = """\
import faulthandler, signal, sys
faulthandler.register(signal.SIGUSR1, all_threads=True)
print("ready", flush=True)
sys.stdin.read()
"""


def test_only_the_processes_that_answer_are_asked_for_their_stacks(tmp_path):
    """A process without a handler (torchrun's agent, a shell) would die of SIGUSR1."""
    stderr = tmp_path / "stderr"
    with open(stderr, "w") as errors:
        waiting = subprocess.Popen(
            [sys.executable, "-c", ANSWERS_FOR_ITS_STACKS],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    shell = subprocess.Popen(["sleep", "60"])
    try:
        assert waiting.stdout.readline() == "ready\n"
        assert processes.process_tree(os.getpid())[0] == os.getpid()
        assert {waiting.pid, shell.pid} <= set(processes.process_tree(os.getpid()))
        assert processes.ask_for_stacks(waiting.pid) == [waiting.pid]
        assert processes.ask_for_stacks(shell.pid) == []
        assert waiting.poll() is None and shell.poll() is None
        assert 'File "<string>", line 4 in <module>' in stderr.read_text()
    finally:
        waiting.kill()
        shell.kill()
        waiting.wait()
        shell.wait()


# Fault injection for a process of its own: its records cannot be renamed into place.
FULL_DISK = """\
import errno, os

_replace = os.replace


def replace(source, target, *args, **kwargs):
    if str(target).endswith(".json"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(source))
    return _replace(source, target, *args, **kwargs)


os.replace = replace
"""


# A planted hang for a process of its own: the kernel's measurement never returns.
HANG = """\
import time

import accelbench.kernels.measure


def sleep_forever_in_the_measurement(exp, settings):
    while True:
        time.sleep(1)


accelbench.kernels.measure.measure_kernel = sleep_forever_in_the_measurement
"""


def plant_in_children(tmp_path, monkeypatch, code: str) -> None:
    """Processes started from here (and a fork server started from here) run `code` as they
    start (sitecustomize); this process does not."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(code)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), *sys.path]))
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)  # a job's environment is fixed


@pytest.fixture
def full_disk_for_children(tmp_path, monkeypatch):
    """Processes started from here find their disk full when they write a record."""
    plant_in_children(tmp_path, monkeypatch, FULL_DISK)


@contextlib.contextmanager
def started_as(how: str, tmp_path):
    """A job's measuring process started as a new interpreter, or by a fork server."""
    if how == "fork server":
        fork_server.start(tmp_path / "fork_server.log")
        try:
            yield how
        finally:
            fork_server.stop()
    else:
        yield how


START_PATHS = ["own interpreter", "fork server"]


@pytest.fixture(params=START_PATHS)
def start_path(request, full_disk_for_children, tmp_path):
    with started_as(request.param, tmp_path) as how:
        yield how


@pytest.fixture(params=START_PATHS)
def hanging_start_path(request, tmp_path, monkeypatch):
    """The measuring processes started from here hang in the kernel's measurement."""
    plant_in_children(tmp_path, monkeypatch, HANG)
    with started_as(request.param, tmp_path) as how:
        yield how


def test_a_full_disk_when_the_record_is_written_keeps_its_cause(
    tmp_path, start_path, monkeypatch, caplog
):
    monkeypatch.delenv("PYTEST_CURRENT_TEST")  # set again for the test's call: a job has none
    out = tmp_path / "results" / "r.json"
    with caplog.at_level(logging.INFO, logger="accelbench.job.supervisor"):
        supervisor.run_supervised(
            KERNEL, SETTINGS, str(out), context=CONTEXT, attempt=2, max_attempts=2, time_limit=300
        )
    served = "forked by the fork server" in caplog.text
    assert served is (start_path == "fork server")
    record = load_record(out)
    assert record["status"] == "failed"
    assert record["transient"] is True
    assert record["reason"].startswith(
        "outside the measurement: OSError: [Errno 28] No space left on device: "
    )
    assert "exited with code" not in record["reason"]


@pytest.fixture
def job_log(tmp_path):
    """The job's log, which the supervisor writes to as in a rule's script (run_experiment.py)."""
    log_file = tmp_path / "logs" / "n8.log"
    log_file.parent.mkdir()
    handler = logging.FileHandler(log_file)
    logging.getLogger("accelbench").addHandler(handler)
    yield log_file
    logging.getLogger("accelbench").removeHandler(handler)
    handler.close()


def test_the_log_of_a_failed_attempt_is_kept_beside_its_retry(
    tmp_path, full_disk_for_children, job_log
):
    out = tmp_path / "results" / "n8.json"
    log_file = job_log
    with pytest.raises(RetryableFailure, match="No space left on device"):
        supervisor.run_supervised(
            KERNEL,
            SETTINGS,
            str(out),
            context=CONTEXT,
            attempt=1,
            max_attempts=2,
            time_limit=300,
            log_file=str(log_file),
        )
    kept = tmp_path / "logs" / "n8.attempt1.log"
    assert "No space left on device" in kept.read_text()
    assert "attempt 1 of 2 failed" in kept.read_text()
    assert not out.exists()


@pytest.mark.waits
def test_a_hung_measurement_leaves_every_processs_stacks_in_the_log_and_is_measured_again(
    tmp_path, hanging_start_path, job_log, caplog, monkeypatch
):
    monkeypatch.delenv("PYTEST_CURRENT_TEST")  # set again for the test's call: a job has none
    out = tmp_path / "results" / "n8.json"
    # Room for a fresh interpreter's imports on a loaded 2-core host before its run forks
    # (a fork server has made them before): both processes must be hanging when it comes.
    limit = 40 if hanging_start_path == "own interpreter" else 20
    with caplog.at_level(logging.INFO, logger="accelbench.job"):
        supervisor.run_supervised(
            KERNEL,
            dataclasses.replace(SETTINGS, runs=2),  # each run its own process: two processes hang
            str(out),
            context=CONTEXT,
            attempt=2,
            max_attempts=2,
            time_limit=limit,
            log_file=str(job_log),
        )
    record = load_record(out)
    assert record["status"] == "failed"
    assert record["transient"] is True
    assert record["reason"].startswith(
        f"exceeded the job's time limit: stopped after {limit} s, its processes' stacks are in the "
        "job's log; a passing fault"
    )
    assert results.retry_flag(out).stat().st_mtime > out.stat().st_mtime
    served = "forked by the fork server" in caplog.text
    assert served == (hanging_start_path == "fork server")
    text = job_log.read_text()
    assert text.count("the Python stacks of process") == 2
    assert "in sleep_forever_in_the_measurement" in text  # the run
    assert "in call_in_fork" in text  # the measuring process, waiting for its run


# --- the record's mark --------------------------------------------------------------------------


def record_of(status: str, reason: str | None, **extra) -> dict:
    return make_record(
        experiment="kernel",
        experiment_id=KERNEL.id,
        status=status,
        reason=reason,
        params=dataclasses.asdict(KERNEL),
        provenance={},
        metrics={"time": summarize([1.0], "s")} if status == "ok" else None,
        **extra,
    )


def test_only_a_failed_record_can_be_transient():
    assert record_of("failed", "disk full", transient=True)["transient"] is True
    assert "transient" not in record_of("failed", "wrong result")
    for status, reason in (("ok", None), ("oom", "too big"), ("unavailable", "no GPU")):
        with pytest.raises(RecordError, match=r"is not \"failed\" \(only a failed record is a"):
            results.validate_record({**record_of(status, reason), "transient": True})
    with pytest.raises(RecordError, match="transient: false is not true"):
        results.validate_record({**record_of("failed", "r"), "transient": False})


# --- the workflow measures a transient record again --------------------------------------------

TRANSIENT_TARGET = "results/kernels/matmul/cpu1/numpy/float64/n32.json"
FAILED_TARGET = "results/kernels/saxpy/cpu1/numpy/float64/n1000.json"


def plant(workflow_dir: Path, target: str, reason: str, transient: bool) -> None:
    exp_id = target.removeprefix("results/").removesuffix(".json")
    record = make_record(
        experiment="kernel",
        experiment_id=exp_id,
        status="failed",
        reason=reason,
        params=dataclasses.asdict(experiment_of_id(exp_id)),
        provenance={},
        transient=transient,
    )
    results.write_record(workflow_dir / target, record)


@pytest.mark.workflow
def test_the_workflow_measures_a_transient_record_again_and_keeps_a_failed_one(workflow_dir):
    plant(workflow_dir, TRANSIENT_TARGET, "OSError: [Errno 28] No space left on device", True)
    plant(workflow_dir, FAILED_TARGET, "wrong result", False)
    targets = [TRANSIENT_TARGET, FAILED_TARGET, "--configfile=config/tiny.yaml"]
    planned = snakemake(workflow_dir, "-n", *targets)
    assert planned.returncode == 0, planned.stderr
    jobs = planned_jobs(planned.stdout + planned.stderr)
    # Both targets are cells of one comparison group (numpy and torch), measured by one job.
    assert jobs == {group_rule("kernel/cpu/matmul/float64/32"): 1, "total": 1}
    done = snakemake(workflow_dir, "--cores", "2", *targets)
    assert done.returncode == 0, done.stdout + done.stderr
    assert load_record(workflow_dir / TRANSIENT_TARGET)["status"] == "ok"
    assert load_record(workflow_dir / FAILED_TARGET)["reason"] == "wrong result"
    flag = results.retry_flag(workflow_dir / TRANSIENT_TARGET)
    assert flag.stat().st_mtime < (workflow_dir / TRANSIENT_TARGET).stat().st_mtime
    (kept,) = (workflow_dir / "results" / results.REPLACED_DIR).glob("*/kernels/matmul/*/*/*/*")
    assert load_record(kept)["transient"] is True
    again = snakemake(workflow_dir, "-n", *targets)
    assert "Nothing to be done" in again.stdout + again.stderr

"""The pre-imported fork server: jobs get a fresh measuring process without paying the imports."""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, replace

import pytest

from accelbench.families.base import experiment_type_name
from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.job import fork_server, supervisor
from accelbench.job.context import JobContext
from accelbench.records.record import load_record

KERNEL = KernelExperiment("matmul", "cpu1", "numpy", "float64", 8)
SETTINGS = KernelSettings(min_run_time=0.01, samples=3, runs=2)
SLOW = replace(SETTINGS, min_run_time=120.0)
CONTEXT = JobContext("t")


# pytest names the running test in the environment; jobs of one run share it unchanged.
CURRENT_TEST = "PYTEST_CURRENT_TEST"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log_file = tmp_path_factory.mktemp("server") / "fork_server.log"
    os.environ.pop(CURRENT_TEST, None)
    fork_server.start(log_file)
    yield fork_server._server
    fork_server.stop()


def _payload(output, settings=SETTINGS, log_file=None):
    return {
        "experiment_type": experiment_type_name(KERNEL),
        "experiment": asdict(KERNEL),
        "settings": settings.as_params(),
        "context": CONTEXT.as_payload(),
        "output": str(output),
        "final": True,
        "log_file": log_file,
        "failure_dir": None,
        "deadline": time.time() + 600,
    }


def _as_a_job(monkeypatch):
    monkeypatch.delenv(CURRENT_TEST, raising=False)


def _parent_of(pid: int) -> int:
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_start_and_stop(tmp_path, monkeypatch):
    """Before the tests that share one server (the module's fixture): one server at a time,
    pre-imported for the families named; stopped, it removes its own folder, nothing else."""
    monkeypatch.chdir(tmp_path)
    fork_server.start("logs/fork_server.log", ["kernel"])
    address = os.environ[fork_server.ADDRESS_VARIABLE]
    assert os.path.exists(address)
    with pytest.raises(RuntimeError, match="already running"):
        fork_server.start("logs/fork_server.log")
    fork_server.stop()
    assert not os.path.exists(os.path.dirname(address))
    assert fork_server.ADDRESS_VARIABLE not in os.environ
    assert (tmp_path / "logs" / "fork_server.log").exists()


# Set by imports the server makes (scikit-learn, polars), not by a job's environment.
SET_AT_IMPORT = ("KMP_INIT_AT_FORK", "_RJEM_MALLOC_CONF")


def test_variables_the_imports_set_do_not_make_jobs_differ(tmp_path, monkeypatch):
    """A job's environment is compared with the server's before its imports: a job's own
    process would set the same variables when it imports the same libraries."""
    _as_a_job(monkeypatch)
    for name in SET_AT_IMPORT:
        monkeypatch.delenv(name, raising=False)
    fork_server.start(tmp_path / "fork_server.log")
    try:
        output = tmp_path / "r.json"
        child = fork_server.request(_payload(output))
        assert child is not None
        assert child.wait(120) == 0
    finally:
        fork_server.stop()
    assert load_record(output)["status"] == "ok"


def test_set_by_names_what_a_step_added_or_changed():
    before = {"PATH": "/bin", "A": "1"}
    assert fork_server.set_by(before, {"PATH": "/bin", "A": "2", "B": "x"}) == {"A": "2", "B": "x"}


def test_a_job_matches_whether_or_not_it_made_the_imports_and_its_own_value_differs():
    """Polars appends to _RJEM_MALLOC_CONF; scikit-learn sets KMP_INIT_AT_FORK if unset."""
    before = {"PATH": "/bin", "_RJEM_MALLOC_CONF": "a"}
    server = {"PATH": "/bin", "_RJEM_MALLOC_CONF": "a,a", "KMP_INIT_AT_FORK": "FALSE"}
    imported = fork_server.set_by(before, server)
    for job in (before, server):
        after = fork_server.after_imports(job, before, imported)
        assert fork_server.differing_variables(server, after) == []
    own = {**before, "KMP_INIT_AT_FORK": "TRUE"}
    after = fork_server.after_imports(own, before, imported)
    assert fork_server.differing_variables(server, after) == ["KMP_INIT_AT_FORK"]


def test_only_variables_read_per_job_may_differ():
    server = {"PATH": "/bin", "OMP_NUM_THREADS": "2", "NUMBA_NUM_THREADS": "2"}
    job = {"PATH": "/bin", "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "2", "TMPDIR": "/t"}
    assert fork_server.differing_variables(server, job) == []
    # Run from an activated virtual environment, whose prompt the job's shell drops.
    assert fork_server.differing_variables({**server, "PS1": "(.venv) $ "}, job) == []
    job["NUMBA_NUM_THREADS"] = "1"
    job["CUDA_VISIBLE_DEVICES"] = "0"
    assert fork_server.differing_variables(server, job) == [
        "CUDA_VISIBLE_DEVICES",
        "NUMBA_NUM_THREADS",
    ]


def test_the_server_forks_the_measuring_process_and_reports_its_exit(server, tmp_path, monkeypatch):
    _as_a_job(monkeypatch)
    output = tmp_path / "r.json"
    child = fork_server.request(_payload(output))
    assert child is not None
    assert _parent_of(child.pid) == server.pid
    assert child.wait(120) == 0
    record = load_record(output)
    assert record["status"] == "ok"
    assert record["metrics"]["time"]["runs"] == 2  # the runs still fork from the served process
    assert record["check"]["passed"]


def test_a_supervised_job_uses_the_server_and_writes_its_record(
    server, tmp_path, caplog, monkeypatch
):
    _as_a_job(monkeypatch)
    output = tmp_path / "r.json"
    with caplog.at_level(logging.INFO, logger="accelbench.job.supervisor"):
        supervisor.run_supervised(
            KERNEL,
            SETTINGS,
            str(output),
            context=CONTEXT,
            attempt=1,
            max_attempts=1,
            time_limit=120,
        )
    assert "forked by the fork server" in caplog.text
    assert load_record(output)["status"] == "ok"


def test_the_time_limit_stops_a_served_process_and_is_recorded(
    server, tmp_path, caplog, monkeypatch
):
    _as_a_job(monkeypatch)
    output = tmp_path / "r.json"
    with caplog.at_level(logging.INFO, logger="accelbench.job.supervisor"):
        supervisor.run_supervised(
            KERNEL, SLOW, str(output), context=CONTEXT, attempt=1, max_attempts=1, time_limit=3
        )
    served = [line for line in caplog.messages if "forked by the fork server" in line]
    pid = int(served[0].split("measuring process ")[1].split()[0])
    assert not _alive(pid)
    record = json.loads(output.read_text())
    assert record["status"] == "failed"
    assert "exceeded the job's time limit: stopped after 3 s" in record["reason"]


def test_a_supervisor_that_goes_away_takes_its_process_with_it(server, tmp_path, monkeypatch):
    _as_a_job(monkeypatch)
    child = fork_server.request(_payload(tmp_path / "r.json", settings=SLOW))
    assert _alive(child.pid)
    child._connection.close()  # as when the job's process is killed
    deadline = time.monotonic() + 10
    while _alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child.pid)
    assert not (tmp_path / "r.json").exists()


def test_a_variable_read_by_a_library_the_server_never_imported_may_differ():
    server = {"PATH": "/bin"}
    job = {"PATH": "/bin", "_RJEM_MALLOC_CONF": "dirty_decay_ms:500"}
    assert fork_server.differing_variables(server, job) == []
    assert fork_server.differing_variables(server, job, imported={"polars"}) == [
        "_RJEM_MALLOC_CONF"
    ]


def test_a_job_whose_environment_differs_starts_its_own_process(server, monkeypatch):
    _as_a_job(monkeypatch)
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")  # read when Numba is imported
    assert fork_server.request(_payload("unused.json")) is None


def test_without_a_server_jobs_start_their_own_process(monkeypatch, tmp_path, caplog):
    monkeypatch.delenv(fork_server.ADDRESS_VARIABLE, raising=False)
    assert fork_server.request(_payload("unused.json")) is None
    output = tmp_path / "r.json"
    with caplog.at_level(logging.INFO, logger="accelbench.job.supervisor"):
        supervisor.run_supervised(
            KERNEL,
            SETTINGS,
            str(output),
            context=CONTEXT,
            attempt=1,
            max_attempts=1,
            time_limit=120,
        )
    assert "forked by the fork server" not in caplog.text
    assert load_record(output)["status"] == "ok"

"""Nothing is left behind: no truncated archive copy, no temporary folder, no orphan script."""

from __future__ import annotations

import ast
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelbench.job import fork_server
from accelbench.records import record as results

RECORD = Path("kernels/saxpy/cpu1/numpy/float64/n8.json")


@pytest.fixture
def a_record(tmp_path) -> Path:
    record = tmp_path / "results" / RECORD
    record.parent.mkdir(parents=True)
    record.write_text('{"status": "ok", "padding": "' + "x" * 100_000 + '"}')
    return record


def disk_filling_after(monkeypatch, limit: int) -> None:
    """The disk fills once `limit` bytes have been copied (os.sendfile, shutil's fast copy)."""

    def sendfile(out_fd, in_fd, offset, count):
        written = os.lseek(out_fd, 0, os.SEEK_CUR)
        if written >= limit:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        os.lseek(in_fd, written, os.SEEK_SET)
        return os.write(out_fd, os.read(in_fd, min(count, limit - written)))

    monkeypatch.setattr(os, "sendfile", sendfile)


def test_a_disk_that_fills_while_a_record_is_archived_leaves_no_truncated_copy(
    monkeypatch, tmp_path, a_record
):
    root, archive = tmp_path / "results", tmp_path / "results" / "replaced" / "run"
    disk_filling_after(monkeypatch, 4096)
    with pytest.raises(OSError, match=f"cannot keep {a_record} before it is measured again"):
        results.keep_replaced([a_record], root, archive)
    assert not (archive / RECORD).exists()
    assert [path for path in archive.rglob("*") if path.is_file()] == []
    assert a_record.read_text().startswith('{"status": "ok"')


def test_an_archived_record_is_complete_and_keeps_its_time(tmp_path, a_record):
    root, archive = tmp_path / "results", tmp_path / "results" / "replaced" / "run"
    os.utime(a_record, (1_700_000_000, 1_700_000_000))
    (kept,) = results.keep_replaced([a_record], root, archive)
    assert kept.read_bytes() == a_record.read_bytes()
    assert kept.stat().st_mtime == 1_700_000_000
    assert [path.name for path in kept.parent.iterdir()] == ["n8.json"]


def test_the_logs_of_a_job_measured_again_go_with_its_record(tmp_path, a_record):
    root, archive = tmp_path / "results", tmp_path / "results" / "replaced" / "run"
    logs = root / "logs" / "kernels" / "saxpy"
    logs.mkdir(parents=True)
    (logs / "n8.log").write_text("last attempt")
    (logs / "n8.attempt1.log").write_text("first attempt: killed")
    (logs / "n16.attempt1.log").write_text("another experiment")
    kept = results.keep_replaced([a_record, logs / "n8.log"], root, archive)
    assert sorted(path.relative_to(archive).as_posix() for path in kept) == [
        "kernels/saxpy/cpu1/numpy/float64/n8.json",
        "logs/kernels/saxpy/n8.attempt1.log",
        "logs/kernels/saxpy/n8.log",
    ]
    # Snakemake removes the job's log itself; an attempt's log would stay and mislead.
    assert (logs / "n8.log").exists() and not (logs / "n8.attempt1.log").exists()
    assert (logs / "n16.attempt1.log").exists()


# --- the fork server's folder ------------------------------------------------------------------


@pytest.fixture
def temporary_folder(monkeypatch) -> Iterator[Path]:
    """The folder tempfile puts things in, here a fresh one to look into (short: a socket's
    path must stay within 108 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="t"))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    shutil.rmtree(folder)


def test_a_fork_server_that_does_not_start_leaves_no_folder(
    monkeypatch, tmp_path, temporary_folder
):
    monkeypatch.setattr(fork_server.sys, "executable", "/bin/false")
    with pytest.raises(RuntimeError, match="the fork server did not start"):
        fork_server.start(tmp_path / "fork_server.log")
    assert list(temporary_folder.iterdir()) == []
    assert fork_server._server is None


def test_a_fork_server_whose_log_cannot_be_written_leaves_no_folder(tmp_path, temporary_folder):
    log_file = tmp_path / "results"
    log_file.write_text("a file where the logs folder should be")
    with pytest.raises(OSError):
        fork_server.start(log_file / "logs" / "fork_server.log")
    assert list(temporary_folder.iterdir()) == []


def test_a_fork_server_stopped_by_its_parents_death_removes_its_folder(tmp_path, temporary_folder):
    fork_server.start(tmp_path / "fork_server.log")
    server = fork_server._server
    (folder,) = temporary_folder.iterdir()
    try:
        # What PR_SET_PDEATHSIG sends it when the Snakemake that started it dies.
        server.send_signal(signal.SIGTERM)
        server.wait(30)
        assert not folder.exists()
    finally:
        fork_server.stop()
    assert list(temporary_folder.iterdir()) == []


# --- rule scripts die with Snakemake -----------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
# The core's rule scripts and the studies' (src/accelbench/studies/*/scripts/).
SCRIPTS = sorted(
    [*(ROOT / "scripts").glob("*.py"), *(ROOT / "src/accelbench/studies").glob("*/scripts/*.py")]
)

SLEEPING_RULE = """\
localrules: sleep

rule sleep:
    output: "slept.txt"
    script: "sleep.py"
"""
SLEEPING_SCRIPT = """\
import os
import time

from accelbench.platform.processes import die_with_parent

die_with_parent()
with open("script.pid", "w") as pid:
    pid.write(str(os.getpid()))
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"


def test_a_rule_script_dies_with_the_snakemake_that_was_killed(tmp_path):
    """Snakemake runs a `script:` as its own child (bash execs it), so PR_SET_PDEATHSIG set
    in the script ends it when Snakemake is killed, even by SIGKILL."""
    (tmp_path / "Snakefile").write_text(SLEEPING_RULE)
    (tmp_path / "sleep.py").write_text(SLEEPING_SCRIPT)
    workflow = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--cores", "1"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        pid_file = tmp_path / "script.pid"
        for _ in range(1200):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.05)
        script = int(pid_file.read_text())
        assert _alive(script)
    finally:
        workflow.kill()
        workflow.wait()
    for _ in range(100):
        if not _alive(script):
            break
        time.sleep(0.05)
    assert not _alive(script)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_every_rule_script_dies_with_its_parent(script):
    """The call is made at the script's top level, before it does its work."""
    calls = [
        node.value.func
        for node in ast.parse(script.read_text()).body
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
    ]
    assert any(getattr(call, "id", None) == "die_with_parent" for call in calls)


# --- a results folder that cannot be written ---------------------------------------------------


def test_a_results_folder_that_cannot_be_written_is_refused_in_one_line(tmp_path):
    blocked = tmp_path / "results"
    blocked.write_text("a file where the results folder should be")
    with pytest.raises(OSError, match=f"cannot write to {blocked}/ ") as error:
        results.ensure_writable(blocked)
    assert "the workflow writes its records, logs and tables there" in str(error.value)
    writable = tmp_path / "fresh" / "results"
    results.ensure_writable(writable)
    assert writable.is_dir() and list(writable.iterdir()) == []


def _without_root_privilege() -> list[str]:
    """A command prefix under which permissions hold: root ignores them unless it drops
    CAP_DAC_OVERRIDE."""
    if os.geteuid() != 0:
        return []
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}"]


@pytest.mark.workflow
def test_a_run_into_a_read_only_results_folder_says_so_before_any_job(workflow_dir):
    (workflow_dir / "results").mkdir()
    (workflow_dir / "results").chmod(0o555)
    done = subprocess.run(
        [
            *_without_root_privilege(),
            sys.executable,
            "-m",
            "snakemake",
            "--cores",
            "1",
            "--configfile=config/tiny.yaml",
            "results/kernels/matmul/cpu1/numpy/float64/n32.json",
        ],
        cwd=workflow_dir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "cannot write to results/ (Permission denied)" in output
    assert "pathlib.py" not in output  # the first write that failed, as it was before
    assert not (workflow_dir / "results" / "kernels").exists()

"""Helpers for the processes the measurement forks and starts: their lifetime and their end.

A leaf module: the fork server, the supervisor, the runs, the forked ranks and
the GPU checks all tie a child to its parent and describe how a child ended the
same way. A process stopped for running too long first writes its Python stacks
to the job's log (STACKS_SIGNAL), so that a hang says where it waited.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import logging
import os
import pickle
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
# Signals a process raises against itself when its own code goes wrong (a segfault in a
# native library, an abort): the same configuration crashes the same way next time. Any
# other signal came from outside (a user, the scheduler, the OOM killer), a passing fault.
CRASH_SIGNALS = frozenset(
    {
        signal.SIGSEGV,
        signal.SIGBUS,
        signal.SIGILL,
        signal.SIGFPE,
        signal.SIGABRT,
        signal.SIGSYS,
        signal.SIGTRAP,
    }
)
# Where the kernel says which cgroups a process is in, and where their files are.
PROC_CGROUP = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")
# The signal that asks a process of the job for the Python stacks of all its threads.
STACKS_SIGNAL = signal.SIGUSR1
# How long each process is given to write them before the next one is asked, so that the
# dumps do not interleave in the shared log: faulthandler writes from the signal handler
# itself, in milliseconds, even while another thread holds the GIL.
STACKS_PAUSE_S = 0.2
# The variable that carries the job's deadline (Unix time, seconds) to every process of
# the job: the time its supervisor stops it (accelbench.job.supervisor).
DEADLINE_VARIABLE = "ACCELBENCH_DEADLINE"
# The variable that names the job's log file to the processes the job starts as new
# interpreters (torchrun's workers), whose output their launcher captures until they end.
STACKS_FILE_VARIABLE = "ACCELBENCH_STACKS_FILE"


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """Have the kernel send `signum` to this process when its parent dies (PR_SET_PDEATHSIG).

    A child then never outlives a job stopped at its time limit or cancelled.
    """
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signum)


def time_left() -> float | None:
    """Seconds until the job's supervisor stops this job; None outside a supervised job."""
    deadline = os.environ.get(DEADLINE_VARIABLE)
    return None if deadline is None else float(deadline) - time.time()


def dump_stacks_on_request(stream) -> None:
    """Have this process, and every process it forks, write the Python stacks of all its
    threads to `stream` (the job's log) when STACKS_SIGNAL arrives (ask_for_stacks)."""
    faulthandler.register(STACKS_SIGNAL, file=stream, all_threads=True)


def dump_stacks_into_the_job_log() -> None:
    """dump_stacks_on_request in a process the job started as a new interpreter: into the
    job's log file (STACKS_FILE_VARIABLE) where there is one, else to stderr."""
    path = os.environ.get(STACKS_FILE_VARIABLE)
    # Open for the process's life: faulthandler writes to it whenever asked.
    dump_stacks_on_request(open(path, "a") if path else sys.stderr)  # noqa: SIM115


def process_tree(root: int) -> list[int]:
    """`root` and its living descendants, each parent before its children (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    tree, waiting = [], [root]
    while waiting:
        pid = waiting.pop(0)
        tree.append(pid)
        waiting.extend(sorted(children.get(pid, [])))
    return tree


def catches(pid: int, signum: int) -> bool:
    """Whether process `pid` handles `signum` (its SigCgt mask): only such a process may be sent
    a signal whose default action would end it (torchrun's agent does not handle SIGUSR1)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def ask_for_stacks(root: int) -> list[int]:
    """Have `root` and its descendants that handle STACKS_SIGNAL (dump_stacks_on_request) write
    their stacks, one after the other; the processes asked.

    A launcher in the tree that handles the signal passes it on: srun to its tasks.
    """
    asked = []
    for pid in process_tree(root):
        if not catches(pid, STACKS_SIGNAL):
            continue
        log.warning("the Python stacks of process %d follow (most recent call first)", pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, STACKS_SIGNAL)
            asked.append(pid)
            time.sleep(STACKS_PAUSE_S)
    return asked


def exit_text(code: int, plural: bool = False) -> str:
    """How a process ended, from its exit code as subprocess gives it (negative: a signal)."""
    if code >= 0:
        return f"exited with code {code}"
    return f"{'were' if plural else 'was'} killed by {signal.Signals(-code).name}"


class ChildFailed(RuntimeError):
    """A call made in a forked child that raised, or whose child died without answering."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code  # the dead child's exit code (negative: its signal); None if it raised


def call_in_fork(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)`, computed in a child forked for it and pickled back.

    Whatever the call leaves behind (allocations, thread pools, a CUDA context,
    an initialised driver) ends with the child. An exception in the child, or
    its death, raises ChildFailed here with what happened.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_end)
        code = 1
        try:
            die_with_parent()
            try:
                answer = (True, function(*args))
            except Exception as err:  # the caller learns what it was
                answer = (False, f"{type(err).__name__}: {err}")
            with os.fdopen(write_end, "wb") as pipe:
                pickle.dump(answer, pipe)
            code = 0
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            logging.shutdown()
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        sent = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not sent:
        code = os.waitstatus_to_exitcode(status)
        raise ChildFailed(f"the process computing {function.__name__} {exit_text(code)}", code)
    answered, answer = pickle.loads(sent)
    if not answered:
        raise ChildFailed(f"{function.__name__} raised in its process: {answer}")
    return answer


def crashed(code: int) -> bool:
    """Whether a process with this exit code (negative: a signal) crashed by its own fault."""
    return code < 0 and -code in CRASH_SIGNALS


@dataclass(frozen=True)
class OomKills:
    """How many processes the OOM killer has killed in this process's memory cgroup.

    The kernel counts every kill of a process of the cgroup, by its own memory limit
    (a Slurm job's) or by the host running out of memory, before it sends SIGKILL:
    the cgroup v2 `memory.events` and cgroup v1 `memory.oom_control` files, key
    `oom_kill`. Read before a child starts and after it ended, a rise says the
    OOM killer was at work; a SIGKILL without one came from someone else. A machine
    whose counter cannot be read (no memory controller) gives no evidence either way.
    """

    file: Path | None
    count: int | None

    @classmethod
    def read(cls) -> OomKills:
        for file in _memory_event_files():
            count = _oom_kill_count(file)
            if count is not None:
                return cls(file, count)
        return cls(None, None)

    def since(self) -> int | None:
        """Kills counted since this reading; None where the counter cannot be read."""
        if self.file is None:
            return None
        count = _oom_kill_count(self.file)
        return None if count is None else count - self.count


def _memory_event_files() -> list[Path]:
    """The OOM-kill counters of this process's memory cgroup, v2 first (pure or hybrid)."""
    try:
        lines = PROC_CGROUP.read_text().splitlines()
    except OSError:
        return []
    files = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if controllers == "":
            files += [
                CGROUP_ROOT / relative / "memory.events",
                CGROUP_ROOT / "unified" / relative / "memory.events",
            ]
        elif "memory" in controllers.split(","):
            files.append(CGROUP_ROOT / "memory" / relative / "memory.oom_control")
    return files


def _oom_kill_count(file: Path) -> int | None:
    try:
        text = file.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return int(value)
    return None

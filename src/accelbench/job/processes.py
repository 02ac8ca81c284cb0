"""Helpers for the processes the measurement forks and starts: their lifetime and their end.

A leaf module: the fork server, the supervisor, the runs, the forked ranks and
the GPU checks all tie a child to its parent and describe how a child ended the
same way.
"""

from __future__ import annotations

import ctypes
import logging
import os
import pickle
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

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


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """Have the kernel send `signum` to this process when its parent dies (PR_SET_PDEATHSIG).

    A child then never outlives a job stopped at its time limit or cancelled.
    """
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signum)


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

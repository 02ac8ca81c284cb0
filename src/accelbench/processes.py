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
from typing import Any, TypeVar

T = TypeVar("T")

_PR_SET_PDEATHSIG = 1
# A process killed by SIGKILL that nobody meant to stop was most likely the OOM killer's.
OOM_HINT = " (the usual sign of the host running out of memory)"


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

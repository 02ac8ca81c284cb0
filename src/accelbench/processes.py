"""Helpers for the processes the measurement forks and starts: their lifetime and their end.

A leaf module: the fork server, the supervisor, the runs and the forked ranks
all tie a child to its parent and describe how a child ended the same way.
"""

from __future__ import annotations

import ctypes
import signal

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

"""Questions to CUDA asked in a forked child, so that the asking process stays fork-safe.

A process that has asked the CUDA driver anything (even torch.cuda.is_available()
or torch.cuda.get_arch_list()) cannot fork a child that uses CUDA: torch refuses
in the child ("Cannot re-initialize CUDA in forked subprocess"), CuPy and
Numba-CUDA fail at their first call. And a process that has run a kernel holds a
CUDA context on that GPU until it ends, which in EXCLUSIVE_PROCESS mode keeps
every other process off it. The fork server, each job's measuring process and a
process that launches a job's ranks fork or start processes that use the GPUs,
so what they need to know (how many GPUs, which, whether a backend can run a
kernel on them) is asked in a child of their own, and ends with it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

from accelbench.platform.processes import call_in_fork

T = TypeVar("T")

BAD_FORK = (
    "this process was forked from one that had already initialised CUDA, so CUDA cannot "
    "start in it and the GPU experiment cannot run; whatever initialised CUDA in the parent "
    "(the fork server, the job's measuring process or `accelbench doctor` after the imports) "
    "must leave it to the processes it forks"
)


class CudaForkError(RuntimeError):
    """This process is a child of one that had initialised CUDA: it cannot use CUDA."""


def in_bad_fork() -> bool:
    """Whether torch knows this process to be a child of one that had initialised CUDA.

    Only torch keeps that flag; without torch imported there is nothing to tell,
    and nothing of torch's to have initialised CUDA before the fork either.
    """
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda._is_in_bad_fork())


def _answer(question: Callable[..., T], args: tuple) -> tuple[bool, T | None]:
    """(False, None) in a bad fork, else (True, the answer): runs in the child."""
    if in_bad_fork():
        return False, None
    return True, question(*args)


def ask(question: Callable[..., T], *args: Any) -> T:
    """`question(*args)` answered in a forked child, or here if this process has itself
    initialised CUDA already (its children cannot use CUDA, while it still can).

    Raises CudaForkError in a process that cannot use CUDA at all: one forked from a
    process that had initialised it. That would otherwise turn every GPU experiment
    of a job into an "unavailable" record, silently.
    """
    if in_bad_fork():
        raise CudaForkError(BAD_FORK)
    forked, answer = call_in_fork(_answer, question, args)
    return answer if forked else question(*args)


def children_can_use_cuda() -> bool:
    """Whether a child forked from this process could use CUDA: not once this process has
    initialised it (the child then knows itself to be in a bad fork)."""
    return not call_in_fork(in_bad_fork)

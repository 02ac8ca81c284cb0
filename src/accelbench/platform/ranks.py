"""Where this process stands in a launched group of processes: its rank and rendezvous.

A process started by torchrun or as one of several srun tasks is one rank of a group:
every rank measures and rank 0 writes the record (is_primary_process). Read from the
environment alone, so that the job chain (accelbench.job) and the training code
(accelbench.train.distributed, which starts and joins the groups) ask alike; see
accelbench.train.distributed for how the ranks find each other.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

SLURM_PORT_BASE = 20000
SLURM_PORT_RANGE = 20000  # ports 20000-39999: above the well-known, below the ephemeral range


class LaunchError(RuntimeError):
    """A distributed run that could not start or whose processes failed; says which and why."""


@dataclass(frozen=True)
class Rendezvous:
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    launcher: str  # "slurm", "torchrun", "fork" or "none" (one process)
    store_file: str | None = None  # where forked ranks meet instead of rank 0's address

    @property
    def is_primary(self) -> bool:
        return self.rank == 0


SINGLE_PROCESS = Rendezvous(0, 1, 0, "127.0.0.1", 0, "none")


def first_host(nodelist: str) -> str:
    """The first host of a Slurm hostlist: 'gpu[03-05,9],cpu1' -> 'gpu03', 'a[1-2]-b7' -> 'a1-b7'.

    Parsed here rather than with `scontrol show hostnames`, which is not on every compute node.
    """
    depth, end = 0, len(nodelist)
    for index, char in enumerate(nodelist):
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            end = index
            break
    first = nodelist[:end].strip()
    if not first:
        raise LaunchError(f"SLURM_JOB_NODELIST {nodelist!r} names no host")
    # Each bracket group's first entry: the start of its first range, zero padding kept.
    return re.sub(r"\[([^\],-]+)[^\]]*\]", r"\1", first)


def slurm_port(job_id: str) -> int:
    """A port every task of a job derives alike, different between concurrent jobs."""
    return SLURM_PORT_BASE + int(job_id) % SLURM_PORT_RANGE


def _integer(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        raise LaunchError(f"{name} is {env.get(name)!r}; expected an integer") from None


def from_environment(env: Mapping[str, str] | None = None) -> Rendezvous | None:
    """The rendezvous of a process started by torchrun or as one of several srun tasks.

    None for a process that was started alone (it launches its group itself).
    """
    env = os.environ if env is None else env
    if "TORCHELASTIC_RUN_ID" in env or {"RANK", "WORLD_SIZE", "MASTER_ADDR"} <= set(env):
        world = _integer(env, "WORLD_SIZE")
        if world < 2:
            return None
        return Rendezvous(
            rank=_integer(env, "RANK"),
            world_size=world,
            local_rank=_integer(env, "LOCAL_RANK") if "LOCAL_RANK" in env else 0,
            master_addr=env["MASTER_ADDR"],
            master_port=_integer(env, "MASTER_PORT"),
            launcher="torchrun",
        )
    if "SLURM_STEP_ID" not in env or "SLURM_PROCID" not in env:
        return None
    world = _integer(
        env, "SLURM_STEP_NUM_TASKS" if "SLURM_STEP_NUM_TASKS" in env else "SLURM_NTASKS"
    )
    if world < 2:
        return None
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if "MASTER_ADDR" in env:
        address = env["MASTER_ADDR"]
    elif nodelist:
        address = first_host(nodelist)
    else:
        raise LaunchError("a Slurm task without SLURM_JOB_NODELIST or MASTER_ADDR")
    port = (
        _integer(env, "MASTER_PORT")
        if "MASTER_PORT" in env
        else slurm_port(str(_integer(env, "SLURM_JOB_ID")))
    )
    return Rendezvous(
        rank=_integer(env, "SLURM_PROCID"),
        world_size=world,
        local_rank=_integer(env, "SLURM_LOCALID"),
        master_addr=address,
        master_port=port,
        launcher="slurm",
    )


def is_primary_process() -> bool:
    """False in every process of a launched group but rank 0 (which writes the record)."""
    rendezvous = from_environment()
    return rendezvous is None or rendezvous.is_primary


# Set while this process may fork ranks: it has imported torch but started no thread
# pool (OpenMP cannot be forked once it runs). The measurement sets it in each run's own process.
_forking_is_safe = False


@contextlib.contextmanager
def ranks_may_fork(allowed: bool = True) -> Iterator[None]:
    """Let accelbench.train.distributed.launch fork CPU ranks from this process while the
    block runs."""
    global _forking_is_safe
    previous, _forking_is_safe = _forking_is_safe, allowed
    try:
        yield
    finally:
        _forking_is_safe = previous


def forking_is_safe() -> bool:
    """Whether a ranks_may_fork block that allowed it is running."""
    return _forking_is_safe

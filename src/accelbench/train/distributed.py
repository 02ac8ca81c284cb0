"""Starting the processes of a ddp/fsdp experiment and finding the others: the rendezvous.

Each process needs its rank, the world size, its local rank (which GPU) and the
address of rank 0. Three ways to get there, one code path after:

- Slurm tasks (`srun --ntasks=P accelbench train PATH`, one task per GPU or
  per CPU process, possibly over several nodes): rank, world size and local
  rank from SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID, rank 0's address is
  the first host of SLURM_JOB_NODELIST, the port is derived from the job id
  (MASTER_ADDR / MASTER_PORT, when set, take precedence). Only a job step
  started by srun counts: the batch script of a multi-task job is not a task.
- torchrun: its RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT.
- Neither (a local run, or a Slurm job with one task): the experiment starts
  its own processes on this node. On CPUs, from a process that has started no
  thread pool and runs a single thread (each run's own process, see
  accelbench.job.measurement), it forks them: each rank is a process of its own
  without the seconds a new interpreter spends importing torch, and the ranks
  meet in a file (FileStore), not on a port another process could take first.
  Otherwise (GPUs: a forked process cannot use CUDA its parent initialised; a
  process with other threads, one of which could hold a lock at the fork) it
  starts them with torchrun (`python -m torch.distributed.run --standalone`),
  which then takes the path above. Either way one rank that fails stops the
  others at once, after they wrote their stacks into the job's log.

The backend is gloo on CPUs and NCCL on GPUs. A rank waits for its peers until
shortly before the job's deadline (process_group_timeout); one that waited that
long raises PeersTimedOut, a passing fault that the next run measures again.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from accelbench.measuring.outcome import Hung
from accelbench.platform import ranks
from accelbench.platform.processes import ask_for_stacks, die_with_parent, exit_text, time_left
from accelbench.platform.ranks import (
    LaunchError,
    Rendezvous,
)
from accelbench.train.models import Unavailable

log = logging.getLogger(__name__)

# How long a rank waits for its peers (at the rendezvous, in a collective) outside a
# supervised job; a supervised one waits until shortly before the job's deadline.
PROCESS_GROUP_TIMEOUT = timedelta(minutes=10)
# The least it waits: the tasks of a Slurm job start on several nodes, each importing torch
# from a shared file system, and the rendezvous must outwait the slowest.
PROCESS_GROUP_FLOOR = timedelta(minutes=1)
# How long before the job's deadline a rank gives up: time to say why, for its peers'
# stacks and for the record, before the supervisor stops the job.
DEADLINE_MARGIN = timedelta(seconds=20)


class PeersTimedOut(LaunchError, Hung):
    """A rank that waited for its peers past the process group's timeout."""


def process_group_timeout() -> timedelta:
    """How long a rank waits for its peers: until DEADLINE_MARGIN before the job's deadline,
    at least PROCESS_GROUP_FLOOR; PROCESS_GROUP_TIMEOUT outside a supervised job."""
    left = time_left()
    if left is None:
        return PROCESS_GROUP_TIMEOUT
    return max(PROCESS_GROUP_FLOOR, timedelta(seconds=left) - DEADLINE_MARGIN)


def peers_timed_out(err: RuntimeError, what: str) -> PeersTimedOut | None:
    """PeersTimedOut for an error of torch.distributed that says a wait for peers ran out of
    time (a store's "Wait timeout" or "Timed out after ... waiting for clients", gloo's "Timed
    out waiting ... for recv", NCCL's watchdog's "collective operation timeout"), else None."""
    text = str(err).lower()
    if "timed out" in text or "timeout" in text:
        return PeersTimedOut(f"{what} timed out: {type(err).__name__}: {err}")
    return None


def init_process_group(rendezvous: Rendezvous, backend: str, device=None) -> None:
    """Join the group, through the rendezvous's file (forked ranks) or rank 0's address."""
    import torch.distributed as dist

    timeout = process_group_timeout()
    if rendezvous.store_file:
        store = dist.FileStore(rendezvous.store_file, rendezvous.world_size)
        store.set_timeout(timeout)
        meeting = {"store": store}
    else:
        meeting = {"init_method": f"tcp://{rendezvous.master_addr}:{rendezvous.master_port}"}
    try:
        dist.init_process_group(
            backend,
            **meeting,
            rank=rendezvous.rank,
            world_size=rendezvous.world_size,
            timeout=timeout,
            device_id=device if backend == "nccl" else None,
        )
    except RuntimeError as err:
        waited = (
            f"the rendezvous of {rendezvous.world_size} processes "
            f"(waiting up to {timeout.total_seconds():.0f} s)"
        )
        hung = peers_timed_out(err, waited)
        if hung is None:
            raise
        raise hung from err


def shared_gpus(identities: list[str]) -> str | None:
    """Which ranks share a GPU, given each rank's "host/GPU UUID", or None if none do."""
    ranks_by_gpu: dict[str, list[int]] = {}
    for rank, identity in enumerate(identities):
        ranks_by_gpu.setdefault(identity, []).append(rank)
    shared = [
        f"ranks {', '.join(map(str, ranks))} on {identity}"
        for identity, ranks in ranks_by_gpu.items()
        if len(ranks) > 1
    ]
    return "; ".join(shared) or None


def check_distinct_gpus(device) -> int:
    """Fail loudly if two ranks drive the same GPU; return the number of GPUs in the group.

    A job given fewer GPUs than it has tasks (a GRES mapping gone wrong, or
    every task bound to the same device) would otherwise time several ranks on
    one GPU and report it as a multi-GPU result.
    """
    import torch
    import torch.distributed as dist

    identity = f"{socket.gethostname()}/{torch.cuda.get_device_properties(device).uuid}"
    identities: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(identities, identity)
    shared = shared_gpus(identities)
    if shared:
        raise LaunchError(
            f"GPUs are shared between ranks ({shared}): the job needs one GPU per task; "
            "check the job's GPU request and binding"
        )
    return len(identities)


def run_rank(train: Callable[[], dict[str, Any]], rank: int, result_path: Path) -> int:
    """Body of one launched rank: rank 0 writes the result; a failed rank writes why and fails.

    The error file (RESULT.rank<N>.error: the exception's type and message) lets
    the launching process say which rank failed and why.
    """
    try:
        result = train()
    except Exception as err:  # the launcher reports it; the traceback goes to the log
        traceback.print_exc()
        error = Path(f"{result_path}.rank{rank}.error")
        error.write_text(json.dumps({"type": type(err).__name__, "message": str(err)}))
        return 1
    if rank == 0:
        partial = Path(f"{result_path}.part")
        partial.write_text(json.dumps(result))
        partial.rename(result_path)
    return 0


def _result(result_path: Path, failed: bool, what_happened: str) -> dict[str, Any]:
    """Rank 0's result; LaunchError (or models.Unavailable) with the first failed rank's reason."""
    errors = sorted(result_path.parent.glob(f"{result_path.name}.rank*.error"))
    if errors:
        rank = errors[0].name.removeprefix(f"{result_path.name}.rank").removesuffix(".error")
        error = json.loads(errors[0].read_text())
        if error["type"] == Unavailable.__name__:
            raise Unavailable(error["message"])
        if error["type"] == PeersTimedOut.__name__:
            raise PeersTimedOut(f"rank {rank}: {error['message']}")
        raise LaunchError(f"rank {rank}: {error['type']}: {error['message']}")
    if failed or not result_path.exists():
        raise LaunchError(what_happened)
    return json.loads(result_path.read_text())


def launch(
    train: Callable[[Rendezvous], dict[str, Any]],
    request: dict[str, Any],
    processes: int,
    threads_per_process: int,
    on_gpus: bool,
) -> dict[str, Any]:
    """Run the experiment's ranks on this node: forked on CPUs where safe, else under torchrun.

    Safe is a process that started no thread pool (ranks_may_fork) and runs no other
    thread now: a thread that holds a lock (in malloc, OpenMP, gloo) at the fork leaves
    it held for good in the ranks, which then hang on it.
    `train(rendezvous)` is one rank's work (forked ranks call it); `request` is the
    same as JSON for accelbench.train.worker (torchrun's ranks).
    """
    if ranks.forking_is_safe() and not on_gpus:
        threads = os_threads()
        if threads == 1:
            return launch_forked(train, processes)
        log.info("%d threads run in this process: its ranks start under torchrun", threads)
    return launch_local(request, processes, threads_per_process)


def os_threads() -> int:
    """The threads of this process as the kernel counts them, a native library's pool
    (OpenBLAS, OpenMP, gloo) included, which Python's threading does not list."""
    return len(os.listdir("/proc/self/task"))


def _wait_for_ranks(pids: list[int]) -> dict[int, int]:
    """Exit codes by rank; once one rank fails, the others write their stacks into the log and
    are killed (they would wait for it)."""
    codes: dict[int, int] = {}
    while len(codes) < len(pids):
        for rank, pid in enumerate(pids):
            if rank in codes:
                continue
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                codes[rank] = os.waitstatus_to_exitcode(status)
        if any(code != 0 for code in codes.values()):
            for rank, pid in enumerate(pids):
                if rank not in codes:
                    ask_for_stacks(pid)
                    os.kill(pid, signal.SIGKILL)
                    codes[rank] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        time.sleep(0.01)
    return codes


def launch_forked(train: Callable[[Rendezvous], dict[str, Any]], processes: int) -> dict[str, Any]:
    """Run `train` as `processes` ranks forked from this process (gloo over loopback), which
    meet in a file of their own.

    Each rank pins its own thread count (train_process), as the environment read
    at import time no longer can.
    """
    with tempfile.TemporaryDirectory(prefix="accelbench-ddp-") as folder:
        result_path = Path(folder) / "result.json"
        store_file = str(Path(folder) / "rendezvous")
        log.info("forking %d ranks (rendezvous in %s)", processes, store_file)
        sys.stdout.flush()
        sys.stderr.flush()
        pids = []
        for rank in range(processes):
            pid = os.fork()
            if pid == 0:  # a rank
                code = 1
                try:
                    die_with_parent()
                    # All on this host, gloo needs loopback only; left to itself, every rank
                    # would resolve the host's name (a DNS query where /etc/hosts lacks it).
                    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
                    rendezvous = Rendezvous(
                        rank, processes, rank, "127.0.0.1", 0, "fork", store_file
                    )
                    code = run_rank(functools.partial(train, rendezvous), rank, result_path)
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    logging.shutdown()
                    os._exit(code)
            pids.append(pid)
        codes = _wait_for_ranks(pids)
        failed = {rank: code for rank, code in codes.items() if code != 0}
        what = "; ".join(f"rank {rank} {exit_text(code)}" for rank, code in failed.items())
        return _result(result_path, bool(failed), what)


def launch_local(
    request: dict[str, Any], processes: int, threads_per_process: int
) -> dict[str, Any]:
    """Run accelbench.train.worker in `processes` local processes under torchrun.

    Returns rank 0's result; a failed rank raises LaunchError with its reason
    (the text of its exception, so an out-of-memory error still reads as one),
    or models.Unavailable if the model cannot run in this precision here.
    """
    env = {**os.environ, "OMP_NUM_THREADS": str(threads_per_process)}
    with tempfile.TemporaryDirectory(prefix="accelbench-ddp-") as folder:
        request_file, result_file = Path(folder) / "request.json", Path(folder) / "result.json"
        request_file.write_text(json.dumps(request))
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={processes}",
            "--max-restarts=0",
            "-m",
            "accelbench.train.worker",
            str(request_file),
            str(result_file),
        ]
        log.info("launching %d processes: %s", processes, " ".join(command))
        # Tied to this process: torchrun would outlive it (a job stopped at its time limit,
        # or cancelled) with its ranks; on SIGTERM it stops them.
        done = subprocess.run(
            command,
            env=env,
            capture_output=True,
            text=True,
            preexec_fn=functools.partial(die_with_parent, signal.SIGTERM),
        )
        for stream in (done.stdout, done.stderr):
            if stream.strip():
                log.info("torchrun output:\n%s", stream[-20000:])
        tail = (done.stderr or done.stdout)[-2000:]
        what = f"torchrun exited with status {done.returncode}: {tail}"
        return _result(result_file, done.returncode != 0, what)

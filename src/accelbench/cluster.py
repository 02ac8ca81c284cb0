"""Scheduler resources of an experiment, derived from its device.

`cpuN` goes to the CPU partition with N cores; `cudaK` goes to the GPU
partition with K GPUs. Partition names, account, memory and run time come from
the config, so a site adapts the workflow without touching code.

An experiment of several processes (ddp/fsdp) runs on Slurm as one task per
process: the job asks for nodes x tasks per node (and the node's GPUs), and
the job's script starts the tasks with srun, which hands each its rank.
"""

from __future__ import annotations

import getpass
import shlex
import subprocess
from dataclasses import dataclass
from typing import Any

from accelbench.devices import Device
from accelbench.train.strategies import process_count


def partition(device: Device, config: dict[str, Any]) -> str:
    """The partition of `device`; empty for a GPU on a site without one (check_site refuses)."""
    slurm = config["slurm"]
    return (slurm["gpu_partition"] or "") if device.is_gpu else slurm["cpu_partition"]


def cpus_per_task(device: Device, config: dict[str, Any]) -> int:
    """N cores for cpuN; for cudaK, enough host cores to feed K GPUs."""
    return device.count * config["slurm"]["cpus_per_gpu"] if device.is_gpu else device.count


def gpus(device: Device) -> int:
    return device.count if device.is_gpu else 0


def local_threads(device: Device) -> int:
    """Cores a job occupies when run by the local executor (Snakemake `threads`)."""
    return device.count if not device.is_gpu else 1


def scaled(config: dict[str, Any], family: str, key: str, attempt: int) -> int:
    """mem_mb / runtime for a family, grown with the attempt so a retry gets more."""
    return int(config["resources"][family][key]) * attempt


@dataclass(frozen=True)
class TaskLayout:
    """One Slurm task per process of a multi-process experiment, spread evenly over nodes."""

    nodes: int
    tasks_per_node: int
    cpus_per_task: int
    gpus_per_node: int

    @property
    def tasks(self) -> int:
        return self.nodes * self.tasks_per_node


def task_layout(device: Device, strategy: str, config: dict[str, Any]) -> TaskLayout | None:
    """The Slurm tasks of an experiment, or None for one that runs as one process.

    A GPU task drives one GPU with slurm.cpus_per_gpu cores; a CPU process of
    ddp/fsdp on cpuN is one core.
    """
    processes = process_count(strategy, device)
    if processes < 2:
        return None
    return TaskLayout(
        nodes=device.nodes,
        tasks_per_node=processes // device.nodes,
        cpus_per_task=config["slurm"]["cpus_per_gpu"] if device.is_gpu else 1,
        gpus_per_node=device.count if device.is_gpu else 0,
    )


def task_resources(layout: TaskLayout, config: dict[str, Any]) -> dict[str, Any]:
    """Resources snakemake-executor-plugin-slurm turns into the sbatch line of a task job.

    `mpi` makes the plugin run the job's script in the batch step (not under
    `srun -n1`), so the script can srun the tasks. GPUs are asked per node
    (--gpus-per-node in slurm_extra) rather than with the plugin's `gpu`, which
    would add --ntasks-per-gpu and need not place K GPUs on each node.
    """
    resources: dict[str, Any] = {
        "mpi": "srun",
        "nodes": layout.nodes,
        "cpus_per_task": layout.cpus_per_task,
    }
    # The plugin refuses tasks_per_node=1 for such jobs; N nodes x 1 task is `tasks`.
    if layout.tasks_per_node > 1:
        resources["tasks_per_node"] = layout.tasks_per_node
    else:
        resources["tasks"] = layout.tasks
    if layout.gpus_per_node:
        model = config["slurm"]["gpu_model"]
        gpus = f"{model}:{layout.gpus_per_node}" if model else str(layout.gpus_per_node)
        # The plugin appends slurm_extra unquoted to a shell command line.
        resources["slurm_extra"] = f"--gpus-per-node={shlex.quote(gpus)}"
    return resources


def env_modules(config: dict[str, Any]) -> list[str]:
    """slurm.modules for a rule's `envmodules:`, each quoted for the shell.

    Snakemake joins them unquoted into `module load ...; <job command>`; the
    schema already refuses shell characters, and quoting keeps it that way.
    """
    return [shlex.quote(name) for name in config["slurm"]["modules"]]


def srun_command(layout: TaskLayout) -> list[str]:
    """srun starting the tasks in the job's allocation; one failed task stops the others.

    Every count is explicit: Snakemake clears the job's SLURM_* task settings
    from the environment the script runs in. Each task sees its node's GPUs
    and picks its own by local rank.
    """
    return [
        "srun",
        f"--nodes={layout.nodes}",
        f"--ntasks={layout.tasks}",
        f"--ntasks-per-node={layout.tasks_per_node}",
        f"--cpus-per-task={layout.cpus_per_task}",
        "--kill-on-bad-exit=1",
    ]


def task_launcher(
    device: Device, strategy: str, config: dict[str, Any], *, slurm_tasks: bool
) -> list[str] | None:
    """srun for a job submitted as several Slurm tasks; None for one that runs one process."""
    layout = task_layout(device, strategy, config) if slurm_tasks else None
    return srun_command(layout) if layout else None


# Every placement resource job_resources may give; a rule declares each, None where absent.
JOB_RESOURCE_KEYS = (
    "slurm_partition",
    "cpus_per_task",
    "gpu",
    "gpu_model",
    "mpi",
    "nodes",
    "tasks",
    "tasks_per_node",
    "slurm_extra",
)


def job_resources(
    device: Device, strategy: str, config: dict[str, Any], *, slurm_tasks: bool
) -> dict[str, Any]:
    """Partition, cores and GPUs of one experiment's job; with `slurm_tasks`, its task layout.

    `slurm_tasks` is true under the Slurm executor: there a multi-process
    experiment becomes a job of one task per process. Run locally, the
    experiment starts its processes itself.
    """
    resources: dict[str, Any] = {"slurm_partition": partition(device, config)}
    layout = task_layout(device, strategy, config) if slurm_tasks else None
    if layout is not None:
        resources.update(task_resources(layout, config))
    else:
        resources["cpus_per_task"] = cpus_per_task(device, config)
        resources["gpu"] = gpus(device)
        if device.is_gpu and config["slurm"]["gpu_model"]:
            resources["gpu_model"] = config["slurm"]["gpu_model"]
    if config["slurm"].get("exclusive"):
        # Whole nodes: no other job shares the node's cores, caches and memory bandwidth.
        extra = resources.get("slurm_extra")
        resources["slurm_extra"] = f"{extra} --exclusive" if extra else "--exclusive"
    return resources


class SiteError(ValueError):
    """The config names a partition or account the cluster does not have."""


def _query(command: list[str]) -> list[str] | None:
    """Lines a Slurm client prints, or None if the client is absent or fails."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def slurm_partitions() -> list[str] | None:
    lines = _query(["sinfo", "--noheader", "--format=%R"])
    return sorted(set(lines)) if lines is not None else None


def slurm_accounts() -> list[str] | None:
    user = getpass.getuser()
    lines = _query(
        ["sacctmgr", "--noheader", "--parsable2", "show", "assoc", f"user={user}", "format=account"]
    )
    return sorted(set(lines)) if lines is not None else None


def check_site(
    config: dict[str, Any],
    *,
    needs_gpu: bool,
    partitions: list[str] | None,
    accounts: list[str] | None,
) -> None:
    """Refuse, before anything is submitted, a config the cluster cannot serve.

    `partitions` / `accounts` are what the cluster reports (None: could not ask,
    then that check is left to sbatch).
    """
    slurm = config["slurm"]
    wanted = {"slurm.cpu_partition": slurm["cpu_partition"]}
    if needs_gpu:
        if not slurm["gpu_partition"]:
            raise SiteError(
                "the grid has GPU experiments (cudaK devices) but this cluster config has no "
                "GPU partition: set slurm.gpu_partition, or remove the cuda devices"
            )
        wanted["slurm.gpu_partition"] = slurm["gpu_partition"]
    if partitions is not None:
        for key, name in wanted.items():
            if name not in partitions:
                raise SiteError(
                    f"config key {key}: partition {name!r} does not exist on this cluster; "
                    f"partitions: {', '.join(partitions)}"
                )
    account = slurm["account"]
    if account and accounts is not None and account not in accounts:
        raise SiteError(
            f"config key slurm.account: account {account!r} is not one of yours; "
            f"accounts: {', '.join(accounts) or 'none'}"
        )


def check_slurm_site(config: dict[str, Any], *, needs_gpu: bool) -> None:
    """check_site against what sinfo and sacctmgr report."""
    check_site(
        config, needs_gpu=needs_gpu, partitions=slurm_partitions(), accounts=slurm_accounts()
    )

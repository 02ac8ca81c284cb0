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
import re
import shlex
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from accelbench.config import partition
from accelbench.families.base import Config, family_of
from accelbench.platform.devices import Device, parse_device
from accelbench.platform.gpu_support import STACKS
from accelbench.train.strategies import process_count


def cpus_per_task(device: Device, config: Config) -> int:
    """N cores for cpuN; for cudaK, enough host cores to feed K GPUs."""
    return device.count * config["slurm"]["cpus_per_gpu"] if device.is_gpu else device.count


def gpus(device: Device) -> int:
    return device.count if device.is_gpu else 0


def local_threads(device: Device) -> int:
    """Cores a job occupies when run by the local executor (Snakemake `threads`)."""
    return device.count if not device.is_gpu else 1


def scaled(config: Config, family: str, key: str, attempt: int) -> int:
    """mem_mb / runtime for a family, grown with the attempt so a retry gets more."""
    return int(config["resources"][family][key]) * attempt


def group_device(devices: Iterable[Device]) -> Device:
    """The device a comparison group's job asks for (accelbench.grid.ComparisonGroup): its
    largest cell's, so that every cell gets what it needs (a group holds one kind of
    device; each run is then pinned to its own cell's CPUs)."""
    return max(devices, key=lambda device: (device.gpus, device.count))


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


def task_layout(device: Device, strategy: str, config: Config) -> TaskLayout | None:
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


class JobResources(TypedDict, total=False):
    """The placement resources of one experiment's job, as snakemake-executor-plugin-slurm
    names them; a job has those its device and task layout need (job_resources)."""

    slurm_partition: str
    cpus_per_task: int
    gpu: int
    gpu_model: str
    mpi: str
    nodes: int
    tasks: int
    tasks_per_node: int
    slurm_extra: str


# Every placement resource job_resources may give; a rule declares each, None where absent.
JOB_RESOURCE_KEYS = tuple(JobResources.__annotations__)


def task_resources(layout: TaskLayout, config: Config) -> JobResources:
    """Resources snakemake-executor-plugin-slurm turns into the sbatch line of a task job.

    `mpi` makes the plugin run the job's script in the batch step (not under
    `srun -n1`), so the script can srun the tasks. GPUs are asked per node
    (--gpus-per-node in slurm_extra) rather than with the plugin's `gpu`, which
    would add --ntasks-per-gpu and need not place K GPUs on each node.
    """
    resources: JobResources = {
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


def env_modules(config: Config) -> list[str]:
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
    device: Device, strategy: str, config: Config, *, slurm_tasks: bool
) -> list[str] | None:
    """srun for a job submitted as several Slurm tasks; None for one that runs one process."""
    layout = task_layout(device, strategy, config) if slurm_tasks else None
    return srun_command(layout) if layout else None


def job_resources(
    device: Device, strategy: str, config: Config, *, slurm_tasks: bool
) -> JobResources:
    """Partition, cores and GPUs of one experiment's job; with `slurm_tasks`, its task layout.

    `slurm_tasks` is true under the Slurm executor: there a multi-process
    experiment becomes a job of one task per process. Run locally, the
    experiment starts its processes itself.
    """
    resources: JobResources = {"slurm_partition": partition(device, config)}
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
    """The config asks for what the cluster does not have or the user may not use: every
    problem found, so that one run names them all instead of one per attempt."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        if len(self.problems) == 1:
            message = self.problems[0]
        else:
            listed = "".join(f"\n  - {problem}" for problem in self.problems)
            message = f"{len(self.problems)} problems in the config for this cluster:{listed}"
        super().__init__(message)


@dataclass(frozen=True)
class PartitionNodes:
    """What the nodes of one partition offer, as sinfo reports it."""

    has_gpus: bool = False
    gpu_types: frozenset[str] = frozenset()  # "a100" of Gres gpu:a100:4; untyped gpu:4 adds none
    features: frozenset[str] = frozenset()


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


def gres_gpus(gres: str) -> tuple[int, set[str]]:
    """GPUs per node in a sinfo Gres field, and their types: gpu:a100:4(S:0-1),gpu:2 -> 6, a100."""
    count, types = 0, set()
    # Socket lists such as (S:0-1) may hold commas; "(null)" is no Gres at all.
    for entry in re.sub(r"\([^)]*\)", "", gres).split(","):
        name, *rest = entry.strip().split(":")
        if name == "gpu" and rest:
            count += int(rest[-1]) if rest[-1].isdigit() else 1
            if len(rest) > 1:
                types.add(rest[0])
    return count, types


def parse_partition_nodes(lines: list[str]) -> dict[str, PartitionNodes]:
    """`sinfo --format=%R|%G|%f` lines (one per partition and node kind), merged per partition."""
    merged: dict[str, PartitionNodes] = {}
    for line in lines:
        name, gres, features = line.split("|")
        gpus_per_node, types = gres_gpus(gres)
        offered = {feature for feature in features.split(",") if feature and feature != "(null)"}
        seen = merged.get(name, PartitionNodes())
        merged[name] = PartitionNodes(
            has_gpus=seen.has_gpus or gpus_per_node > 0,
            gpu_types=seen.gpu_types | types,
            features=seen.features | offered,
        )
    return merged


def slurm_partition_nodes() -> dict[str, PartitionNodes] | None:
    lines = _query(["sinfo", "--noheader", "--format=%R|%G|%f"])
    return parse_partition_nodes(lines) if lines is not None else None


def slurm_associations() -> dict[str, list[str]] | None:
    """The user's accounts, each with the QOS its associations may use."""
    user = getpass.getuser()
    lines = _query(
        [
            "sacctmgr",
            "--noheader",
            "--parsable2",
            "show",
            "assoc",
            f"user={user}",
            "format=account,qos",
        ]
    )
    if lines is None:
        return None
    qos: dict[str, set[str]] = {}
    for line in lines:
        account, names = line.split("|")
        qos.setdefault(account, set()).update(name for name in names.split(",") if name)
    return {account: sorted(names) for account, names in sorted(qos.items())}


def constraint_features(constraint: str) -> list[str]:
    """Feature names of a --constraint expression: "[a*2&b]|c" -> a, b, c."""
    names = re.split(r"[&|,\[\]()!]+", re.sub(r"\*\d+", "", constraint))
    return list(dict.fromkeys(name for name in names if name))


def _listed(names: Iterable[str]) -> str:
    return ", ".join(sorted(names)) or "none"


def site_problems(
    config: Config,
    *,
    needs_gpu: bool,
    partitions: list[str] | None,
    associations: dict[str, list[str]] | None,
    nodes: dict[str, PartitionNodes] | None,
) -> list[str]:
    """What in the config the cluster cannot serve, each problem naming its key.

    The arguments are what the cluster reports: its partitions, the user's
    accounts with the QOS each may use, and what each partition's nodes offer.
    None: could not ask, then that check is left to sbatch.
    """
    slurm = config["slurm"]
    problems: list[str] = []
    wanted = {"slurm.cpu_partition": slurm["cpu_partition"]}
    if needs_gpu:
        if not slurm["gpu_partition"]:
            problems.append(
                "the grid has GPU experiments (cudaK devices) but this cluster config has no "
                "GPU partition: set slurm.gpu_partition, or remove the cuda devices"
            )
        else:
            wanted["slurm.gpu_partition"] = slurm["gpu_partition"]
    if partitions is not None:
        problems += [
            f"config key {key}: partition {name!r} does not exist on this cluster; "
            f"partitions: {', '.join(partitions)}"
            for key, name in wanted.items()
            if name not in partitions
        ]
    if nodes is not None:
        if "slurm.gpu_partition" in wanted:
            problems += _gpu_problems(slurm, nodes.get(slurm["gpu_partition"]))
        problems += _constraint_problems(slurm["constraint"], wanted, nodes)
    if associations is not None:
        problems += _account_and_qos_problems(slurm["account"], slurm["qos"], associations)
    return problems


def _gpu_problems(slurm: Config, offer: PartitionNodes | None) -> list[str]:
    """GPU jobs ask --gpus=K or --gpus=MODEL:K; Slurm refuses either when no node can match it."""
    if offer is None:
        return []
    partition_name, model = slurm["gpu_partition"], slurm["gpu_model"]
    if not offer.has_gpus:
        return [
            f"config key slurm.gpu_partition: the nodes of partition {partition_name!r} have no "
            "GPUs (no gpu in sinfo's Gres), so no GPU experiment can run there"
        ]
    if not model or model in offer.gpu_types:
        return []
    if offer.gpu_types:
        return [
            f"config key slurm.gpu_model: GPU model {model!r} is on no node of partition "
            f"{partition_name!r}; its GPU models: {_listed(offer.gpu_types)}"
        ]
    return [
        f"config key slurm.gpu_model: the nodes of partition {partition_name!r} declare their "
        f"GPUs without a model (Gres gpu:N), so Slurm refuses --gpus={model}:K there; "
        "leave slurm.gpu_model empty"
    ]


def _constraint_problems(
    constraint: str, wanted: dict[str, str], nodes: dict[str, PartitionNodes]
) -> list[str]:
    """sbatch refuses a feature no node has, even one alternative of a|b.

    Without alternatives, every feature must also be on a node of each
    partition the experiments use, or no job there could be placed.
    """
    features = constraint_features(constraint)
    everywhere = set().union(*(offer.features for offer in nodes.values()))
    unknown = [feature for feature in features if feature not in everywhere]
    problems = [
        f"config key slurm.constraint: feature {feature!r} is on no node of this "
        f"cluster; features: {_listed(everywhere)}"
        for feature in unknown
    ]
    if "|" in constraint:
        return problems
    for key, name in wanted.items():
        offered = nodes[name].features if name in nodes else everywhere
        problems += [
            f"config key slurm.constraint: feature {feature!r} is on no node of "
            f"partition {name!r} ({key}); its features: {_listed(offered)}"
            for feature in features
            if feature not in offered and feature not in unknown
        ]
    return problems


def _account_and_qos_problems(
    account: str, qos: str, associations: dict[str, list[str]]
) -> list[str]:
    if account and account not in associations:
        return [
            f"config key slurm.account: account {account!r} is not one of yours; "
            f"accounts: {_listed(associations)}"
        ]
    if not qos:
        return []
    # Without slurm.account the job runs under the default account: any of them may be it.
    accounts = [account] if account else list(associations)
    allowed = set().union(*(associations[name] for name in accounts))
    # No QOS listed says nothing about what is allowed: left to sbatch.
    if allowed and qos not in allowed:
        whose = f"account {account!r}" if account else "your accounts"
        return [
            f"config key slurm.qos: QOS {qos!r} is not one {whose} may use; QOS: {_listed(allowed)}"
        ]
    return []


STACK_NAMES = frozenset(stack.name for stack in STACKS)
# A module of the CUDA toolkit, as sites name them: cuda/12.4, CUDA/12.4.0, cudatoolkit/11.8.
CUDA_MODULE = re.compile(r"^cuda(?:toolkit)?[/-](\d+)", re.IGNORECASE)


def module_problems(config: Config) -> list[str]:
    """A CUDA module of another major version than the configured stack (cuda_stack).

    Loaded, it puts its libraries on the search path, where the CUDA 12 builds of
    CuPy and Numba-CUDA take whatever major version they find first: the stack's
    libraries and the module's would mix in one process.
    """
    stack = int(config["cuda_stack"])
    problems = []
    for name in config["slurm"]["modules"]:
        match = CUDA_MODULE.match(name)
        if match and int(match[1]) != stack:
            problems.append(
                f"config key slurm.modules: module {name!r} loads CUDA {match[1]}, but the "
                f"config's cuda_stack is {stack}: the two CUDA versions would mix in one "
                f"process; load a CUDA {stack} module or none (the stack's wheels bring "
                f"their own CUDA libraries)"
                + (f", or set cuda_stack: {match[1]}" if match[1] in STACK_NAMES else "")
            )
    return problems


@dataclass(frozen=True)
class PartitionLimits:
    """The largest job one partition can start: its biggest node and its time limit."""

    memory_mb: int
    cpus: int
    gpus: int
    time_minutes: float | None  # None: no limit


@dataclass(frozen=True)
class JobShape:
    """One kind of job the grid submits, as far as partition limits are concerned."""

    what: str
    family: str  # the config's resources.{family}
    partition: str
    cpus_per_node: int
    gpus_per_node: int
    batch: int  # experiments run one after another in one submission


def slurm_minutes(limit: str) -> float | None:
    """A Slurm time limit in minutes (None: infinite).

    Slurm writes minutes[:seconds], hours:minutes:seconds or
    days-hours[:minutes[:seconds]].
    """
    if limit.lower() in ("infinite", "unlimited"):
        return None
    days, _, clock = limit.rpartition("-")
    fields = [float(field) for field in clock.split(":")]
    if days or len(fields) == 3:
        hours, minutes, seconds = [*fields, 0.0, 0.0][:3]
    else:
        hours, (minutes, seconds) = 0.0, [*fields, 0.0][:2]
    return (float(days or 0) * 24 + hours) * 60 + minutes + seconds / 60


def parse_partition_limits(lines: list[str]) -> dict[str, PartitionLimits]:
    """`sinfo --format=%R|%m|%c|%l|%G` lines (one per partition and node kind) -> limits."""
    limits: dict[str, PartitionLimits] = {}
    for line in lines:
        name, memory, cpus, time_limit, gres = line.split("|")
        gpus, _ = gres_gpus(gres)
        node = PartitionLimits(
            int(memory.rstrip("+")), int(cpus.rstrip("+")), gpus, slurm_minutes(time_limit)
        )
        seen = limits.get(name, node)
        limits[name] = PartitionLimits(
            max(seen.memory_mb, node.memory_mb),
            max(seen.cpus, node.cpus),
            max(seen.gpus, node.gpus),
            node.time_minutes,
        )
    return limits


def slurm_partition_limits() -> dict[str, PartitionLimits] | None:
    lines = _query(["sinfo", "--noheader", "--format=%R|%m|%c|%l|%G"])
    return parse_partition_limits(lines) if lines is not None else None


def job_shapes(experiments: Iterable[Any], config: Config, batch_size: int) -> list[JobShape]:
    """The kinds of jobs `experiments` become on Slurm: batches per device of the families
    whose declaration says `batched` (kernels, roofs, data science), and one job per device
    and strategy of the others (training)."""
    batched: dict[str, int] = {}
    shapes: dict[tuple[str, str], JobShape] = {}
    for exp in experiments:
        if family_of(exp).batched:
            batched[exp.device] = batched.get(exp.device, 0) + 1
            continue
        device = exp.parsed_device
        layout = task_layout(device, exp.strategy, config)
        cpus, gpus_wanted = (
            (layout.tasks_per_node * layout.cpus_per_task, layout.gpus_per_node)
            if layout
            else (cpus_per_task(device, config), gpus(device))
        )
        what = f"training jobs on {exp.device} ({exp.strategy})"
        shapes[(exp.device, exp.strategy)] = JobShape(
            what, "train", partition(device, config), cpus, gpus_wanted, 1
        )
    for name, count in batched.items():
        device = parse_device(name)
        batch = min(batch_size, count)
        shapes[(name, "batch")] = JobShape(
            f"kernel batches on {name} ({batch} experiments each)",
            "kernels",
            partition(device, config),
            cpus_per_task(device, config),
            gpus(device),
            batch,
        )
    return list(shapes.values())


def limit_problems(
    config: Config, shapes: list[JobShape], limits: dict[str, PartitionLimits]
) -> list[str]:
    """Jobs no node or time limit of their partition can take, up to the last retry.

    sbatch would refuse them at submission, when no record can say why; a retry
    asks for the memory and run time times its attempt number, and a batch
    asks for the run time of all its experiments.
    """
    attempts = config["retries"] + 1
    problems = []
    for shape in shapes:
        limit = limits.get(shape.partition)
        if limit is None:
            continue
        key = f"resources.{shape.family}"
        memory = scaled(config, shape.family, "mem_mb", attempts)
        if memory > limit.memory_mb:
            problems.append(
                f"config key {key}.mem_mb: {shape.what} would ask for {memory} MB on attempt "
                f"{attempts} (mem_mb x attempt), more than any node of partition "
                f"{shape.partition!r} has ({limit.memory_mb} MB); lower it or retries"
            )
        minutes = scaled(config, shape.family, "runtime", attempts) * shape.batch
        if limit.time_minutes is not None and minutes > limit.time_minutes:
            problems.append(
                f"config key {key}.runtime: {shape.what} would ask for {minutes} min on attempt "
                f"{attempts} (runtime x attempt x experiments per batch), more than the time "
                f"limit of partition {shape.partition!r} ({limit.time_minutes:g} min)"
            )
        if shape.cpus_per_node > limit.cpus:
            problems.append(
                f"{shape.what} need {shape.cpus_per_node} cores on one node; the nodes of "
                f"partition {shape.partition!r} have at most {limit.cpus} (config key "
                "slurm.cpus_per_gpu for GPU experiments, else the device)"
            )
        if shape.gpus_per_node > limit.gpus:
            problems.append(
                f"{shape.what} need {shape.gpus_per_node} GPUs on one node; the nodes of "
                f"partition {shape.partition!r} have at most {limit.gpus}"
            )
    return problems


def check_slurm_site(
    config: Config, *, needs_gpu: bool, shapes: list[JobShape], modules_loaded: bool
) -> None:
    """Refuse, before anything is submitted, a config the cluster cannot serve, naming every
    problem at once: site_problems and limit_problems against what sinfo and sacctmgr
    report, and module_problems where the modules are loaded (--sdm env-modules)."""
    problems = site_problems(
        config,
        needs_gpu=needs_gpu,
        partitions=slurm_partitions(),
        associations=slurm_associations(),
        nodes=slurm_partition_nodes(),
    )
    limits = slurm_partition_limits()
    if limits is not None:
        problems += limit_problems(config, shapes, limits)
    if modules_loaded:
        problems += module_problems(config)
    if problems:
        raise SiteError(problems)


def submission_account(config: Config) -> str | None:
    """The account every job is submitted under: slurm.account, else the user's default
    account as sacctmgr has it (None where it cannot be asked).

    Given no account, snakemake-executor-plugin-slurm 2.8.0 warns "No SLURM account
    given, trying to guess", takes the account of the user's most recent job from
    sacct (not necessarily the default one sbatch would use) and, on a cluster
    without accounts, warns "Unable to guess SLURM account". The default account
    is what sbatch uses without -A, so naming it changes nothing but the noise.
    """
    if config["slurm"]["account"]:
        return config["slurm"]["account"]
    lines = _query(
        [
            "sacctmgr",
            "--noheader",
            "--parsable2",
            "show",
            "user",
            getpass.getuser(),
            "format=defaultaccount",
        ]
    )
    return default_account(lines)


def default_account(lines: list[str] | None) -> str | None:
    """The default account in `sacctmgr --parsable2 show user NAME format=defaultaccount`."""
    accounts = [line.strip() for line in lines or [] if line.strip()]
    return accounts[0] if accounts else None

"""Where and with what a record was measured: machine, accelerator, software, run context.

A number without its provenance cannot be compared with another one, so every
record carries the host, CPU and GPU models, the CPUs' layout (sockets, NUMA nodes,
cores, SMT), library versions, the BLAS loaded and the build of the Python that measured
it, git commit, config hash and, under Slurm, the job id, partition and node.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import sysconfig
from collections.abc import Iterable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypedDict

from accelbench.platform import doctor, host_cpus
from accelbench.platform.devices import usable_cpus

# What a record names besides its backends' distributions (accelbench.backends.distributions,
# which the job passes in): the training's torchvision and the workflow's Snakemake.
OTHER_LIBRARIES = ("torchvision", "snakemake")
# Record key -> the variables that hold it, the first one set wins: in an srun task
# started from a job script without the job's SLURM_JOB_NUM_NODES, the step's count.
SLURM_VARIABLES = {
    "job_id": ("SLURM_JOB_ID",),
    "partition": ("SLURM_JOB_PARTITION",),
    "node": ("SLURMD_NODENAME",),
    "cpus_per_task": ("SLURM_CPUS_PER_TASK",),
    "job_gpus": ("SLURM_JOB_GPUS",),
    "ntasks": ("SLURM_NTASKS",),
    "nodes": ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"),
    "tasks_per_node": ("SLURM_TASKS_PER_NODE",),
    "mem_per_node_mb": ("SLURM_MEM_PER_NODE",),
}
SLURM_INTEGERS = {"cpus_per_task", "ntasks", "nodes", "mem_per_node_mb"}
# Where Linux lists what a process has mapped: its shared libraries among them.
PROC_MAPS = Path("/proc/self/maps")
# The keys of python_build: which build (text), and how it was built (true, false or null).
PYTHON_BUILD_TEXTS = ("implementation", "build", "built", "compiler", "executable")
PYTHON_BUILD_FLAGS = (
    "configured_shared",
    "configured_optimizations",
    "configured_lto",
    "libpython_loaded",
)


class CpuTopology(TypedDict):
    """cpu_topology: the host's CPU layout (host_cpus.Topology.record), null where sysfs
    does not tell, and the CPUs this process may use."""

    sockets: int | None
    numa_nodes: dict[str, list[int]] | None
    cores: int | None
    logical_cpus: int | None
    threads_per_core: int | None
    smt_active: bool | None
    usable: list[int]


class PythonBuild(TypedDict):
    """python_build: which build of Python measured (texts), and how it was built (flags)."""

    implementation: str
    build: str
    built: str
    compiler: str
    executable: str | None
    configured_shared: bool | None
    configured_optimizations: bool | None
    configured_lto: bool | None
    libpython_loaded: bool | None


class BlasLibrary(TypedDict):
    """One BLAS library loaded in the process, as threadpoolctl describes it."""

    internal_api: str
    prefix: str | None
    filepath: str | None
    version: str | None
    architecture: str | None
    threading_layer: str | None
    num_threads: int | None


class GitState(TypedDict):
    commit: str | None
    dirty: bool | None


class Accelerator(TypedDict):
    """The GPUs as PyTorch sees them, and the CUDA, cuDNN and driver versions."""

    cuda_runtime: str | None
    cudnn: int | None
    gpus: list[str]
    uuids: list[str]
    driver: str | None


class SlurmContext(TypedDict):
    """The Slurm job: its SLURM_VARIABLES (integers where Slurm gives one), its allocation
    and whether it had its nodes to itself, from the controller."""

    job_id: str | None
    partition: str | None
    node: str | None
    cpus_per_task: int | str | None
    job_gpus: str | None
    ntasks: int | str | None
    nodes: int | str | None
    tasks_per_node: str | None
    mem_per_node_mb: int | str | None
    allocation: dict[str, str] | None
    exclusive: bool | None


class Provenance(TypedDict):
    """A record's provenance (the record schema's provenance section)."""

    host: str
    platform: str
    cpu_model: str
    cpu_count: int | None
    usable_cpus: int
    cpu_topology: CpuTopology
    python: str
    python_build: PythonBuild
    libraries: dict[str, str | None]
    blas: list[BlasLibrary] | None
    accelerator: Accelerator
    cuda_visible_devices: str | None
    git: GitState
    config_hash: str
    slurm: SlurmContext | None
    modules: list[str]
    seed: int
    started: str
    finished: str


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def config_hash(config: dict[str, Any]) -> str:
    """Stable short hash of the configuration a record was made under."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def library_versions(distributions: Iterable[str]) -> dict[str, str | None]:
    """Each distribution's installed version, null where it is not installed; the
    OTHER_LIBRARIES too."""
    versions: dict[str, str | None] = {}
    for name in dict.fromkeys((*distributions, *OTHER_LIBRARIES)):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def python_build(maps: Path = PROC_MAPS) -> PythonBuild:
    """Which build of Python this is: two builds of 3.11 on one machine ran a plain Python
    loop 35% apart (docs/install.md), so the naive-Python numbers are the interpreter's.

    `configured_*` read the build's configure arguments (CONFIG_ARGS) and Py_ENABLE_SHARED;
    a distribution may build otherwise than those say: Debian's /usr/bin/python3.11 is
    linked statically and optimised by Debian's own build rules, while its sysconfig
    describes the shared libpython built beside it (--enable-shared, no
    --enable-optimizations). So
    `libpython_loaded` says whether this process runs on a shared libpython (from
    `maps`, /proc/self/maps; null where unreadable), and `executable` which binary it is.
    """
    arguments = sysconfig.get_config_var("CONFIG_ARGS")
    flags = shlex.split(arguments) if isinstance(arguments, str) else None
    shared = sysconfig.get_config_var("Py_ENABLE_SHARED")
    try:
        libpython = "libpython" in maps.read_text()
    except OSError:
        libpython = None
    build, built = platform.python_build()
    return PythonBuild(
        implementation=platform.python_implementation(),
        build=build,
        built=built,
        compiler=platform.python_compiler(),
        executable=os.path.realpath(sys.executable) if sys.executable else None,
        configured_shared=None if shared is None else bool(shared),
        configured_optimizations=None if flags is None else "--enable-optimizations" in flags,
        configured_lto=None
        if flags is None
        else any(flag.startswith("--with-lto") and flag != "--with-lto=no" for flag in flags),
        libpython_loaded=libpython,
    )


def blas_libraries() -> list[BlasLibrary] | None:
    """The BLAS libraries loaded in this process (threadpoolctl), as they were when the runs
    ended: which one (openblas, mkl, blis...), its version, the CPU architecture it chose and
    its threads (what the process had: each run sets its own to its device's CPUs). None
    where threadpoolctl cannot tell."""
    try:
        from threadpoolctl import threadpool_info

        pools = threadpool_info()
    except Exception:  # a library threadpoolctl cannot read must not lose the record
        return None
    return [
        BlasLibrary(
            internal_api=pool["internal_api"],
            prefix=pool.get("prefix"),
            # Whose copy it is: NumPy and SciPy wheels each bring an OpenBLAS of their own.
            filepath=pool.get("filepath"),
            version=pool.get("version"),
            architecture=pool.get("architecture"),
            threading_layer=pool.get("threading_layer"),
            num_threads=pool.get("num_threads"),
        )
        for pool in pools
        if pool.get("user_api") == "blas"
    ]


def git_state(directory: str = ".") -> GitState:
    """Commit and whether the tree had uncommitted changes (a dirty tree is not reproducible)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=directory, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return GitState(commit=commit, dirty=bool(status) if status is not None else None)


def gpu_info() -> Accelerator:
    """GPU models, driver and CUDA versions as PyTorch sees them; empty lists without a GPU.

    `uuids` are the CUDA devices' UUIDs in CUDA's order, as torch writes them (NVML and
    nvidia-smi put "GPU-" or "MIG-" before the same text): which board NVML measured
    the energy of can be checked against the one the experiment ran on. The GPUs
    are asked in a forked child (doctor.visible_gpus): this process may be one
    that forks runs.
    """
    import torch

    gpus = doctor.visible_gpus()
    info = Accelerator(
        cuda_runtime=torch.version.cuda,
        cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        gpus=[gpu.name for gpu in gpus],
        uuids=[gpu.uuid for gpu in gpus],
        driver=None,
    )
    if gpus:
        try:
            done = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            info["driver"] = done.stdout.splitlines()[0].strip() if done.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired, IndexError):
            info["driver"] = None
    return info


def parse_tres(job_line: str) -> dict[str, str] | None:
    """The TRES of `scontrol show job -o` output: {"cpu": "2", "mem": "4000M", "gres/gpu": "1"}."""
    for field in job_line.split():
        if field.startswith("TRES="):
            tres = {}
            for item in field.removeprefix("TRES=").split(","):
                key, sep, value = item.partition("=")
                if sep:
                    tres[key] = value
            return tres
    return None


def parse_exclusive(job_line: str) -> bool | None:
    """Whether the job had its nodes to itself: `scontrol show job` says OverSubscribe=NO
    for an --exclusive job; None where the field is absent."""
    for field in job_line.split():
        if field.startswith("OverSubscribe="):
            return field.removeprefix("OverSubscribe=") == "NO"
    return None


def _scontrol_job(job_id: str) -> str | None:
    """The job's line from the controller: a job step's environment lacks the job's memory
    and, under Snakemake, most of its other SLURM_* settings."""
    try:
        done = subprocess.run(
            ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=15
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _slurm_value(key: str) -> int | str | None:
    """The first of the variables of `key` that is set; an integer for SLURM_INTEGERS."""
    text = next((os.environ[name] for name in SLURM_VARIABLES[key] if name in os.environ), None)
    return int(text) if key in SLURM_INTEGERS and text and text.isdigit() else text


def slurm_context() -> SlurmContext | None:
    """The Slurm job this process runs in, or None outside Slurm."""
    if "SLURM_JOB_ID" not in os.environ:
        return None
    line = _scontrol_job(os.environ["SLURM_JOB_ID"])
    return SlurmContext(
        **{key: _slurm_value(key) for key in SLURM_VARIABLES},
        allocation=parse_tres(line) if line is not None else None,
        # Whether other jobs could share the node while this one was measured.
        exclusive=parse_exclusive(line) if line is not None else None,
    )


def loaded_modules() -> list[str]:
    """Environment modules loaded for this job (`module load`, e.g. by --sdm env-modules)."""
    return [name for name in os.environ.get("LOADEDMODULES", "").split(":") if name]


def collect(*, seed: int, config_digest: str, started: str, libraries: Iterable[str]) -> Provenance:
    """Everything about the run context, with the versions of the distributions
    `libraries` (the backends', accelbench.backends.distributions); called once the
    measurement is over."""
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable_cpus(),
        "cpu_topology": host_cpus.topology_record(),
        "python": platform.python_version(),
        "python_build": python_build(),
        "libraries": library_versions(libraries),
        "blas": blas_libraries(),
        "accelerator": gpu_info(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "git": git_state(),
        "config_hash": config_digest,
        "slurm": slurm_context(),
        "modules": loaded_modules(),
        "seed": seed,
        "started": started,
        "finished": now(),
    }

"""Shared fixtures: a private copy of the workflow per test, and a tiny grid."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKFLOW_PARTS = ("Snakefile", "workflow", "config", "scripts", "src", "profiles", "envs")
# The suite runs Numba-CUDA kernels under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) and
# says so here, for itself and every process it starts; anywhere else a measurement refuses
# the simulator (doctor.cuda_simulator_refusal).
os.environ["ACCELBENCH_ALLOW_CUDA_SIMULATOR"] = "1"
# The suite runs more workers than a 2-core machine has cores: OpenMP threads that spin after
# each parallel region (libgomp's default) burn the cores another test waits for. Passive
# ones sleep: 33 s less CPU for the suite on 2 cores. Set before torch loads libgomp.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The smallest grid that still has every stage: three kernel cells, one roof, one training
# cell. Config files merge key by key, so the default grid's other kernels get no sizes.
TINY_CONFIG = """\
kernels:
  devices: [cpu1]
  backends: [numpy, torch]
  dtypes: [float64]
  sizes:
    matmul: [32]
    saxpy: [1000]
    mandelbrot: []
    reduction: []
    stencil: []
    fft1d: []
    fft2d: []
    transfer-d2d: []
  overrides:
    saxpy: {devices: [cpu1], backends: [numpy], dtypes: [float64]}
  roofs:
    gemm_size: {cpu: 64, cuda: 64}
    copy_mib: {cpu: 1, cuda: 1}
  min_run_time: 0.02
  samples: 5
  warmup_s: 0.05
  runs: 3
  budget_s: 0          # exactly three runs: a test's time does not depend on the machine
# No data science cells (tests/test_datascience.py runs its own).
datasci:
  devices: []
train:
  devices: [cpu1]
  precisions: [fp32]
  strategies: [single]
  batch_sizes:
    resnet18: [2]
    fcn: []
    lstm: []
  steps: 3
  min_run_time: 0
  warmup_steps: 1
  warmup_s: 0
  runs: 3
  budget_s: 0
  image_size: 32
slurm:
  cpus_per_gpu: 1
# Tests run experiments side by side (Slurm jobs on one node): record contention, never
# wait; and no host probe, which the tests beside would slow (tests/test_host_speed.py).
contention:
  retries: 0
  max_host_slowdown: 0
"""


def measure_once_however_busy() -> None:
    """Experiments measured in a test never wait for a quiet machine (the suite runs tests
    side by side): a busy measurement is flagged, not repeated after a pause. The tests of
    the retry set contention.retries themselves. Settings built without a contention
    section take the arguments' defaults of ContentionSettings, so those change here,
    before any test module builds its settings."""
    from accelbench.measuring.settings import ContentionSettings

    quiet = dataclasses.replace(ContentionSettings(), retries=0)
    ContentionSettings.__init__.__defaults__ = dataclasses.astuple(quiet)


measure_once_however_busy()


@pytest.fixture(autouse=True)
def host_files_of_its_own(tmp_path_factory, monkeypatch):
    """Each test, and every process it starts, keeps what a host keeps for the measurements
    that follow (its probes, its cells' spreads, its idle energy: in the temporary folder)
    to itself: what another test measured must not widen or narrow its intervals."""
    monkeypatch.setenv("TMPDIR", str(tmp_path_factory.mktemp("host")))
    monkeypatch.setattr(tempfile, "tempdir", None)


@pytest.fixture(autouse=True)
def no_gpu_answers_kept():
    """Each test asks the GPUs afresh: a process keeps what its GPU checks found (doctor.inspected),
    and tests stand in for different GPUs."""
    from accelbench.platform import doctor

    doctor.inspected.cache_clear()
    yield
    doctor.inspected.cache_clear()


# JAX clients a test left started in this process, each reported once (by that test).
_JAX_CLIENTS_REPORTED: set[object] = set()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    """A job never starts JAX's client in a process its runs fork from (XLA's threads do not
    survive a fork), and a test may not either: the tests after it in this worker fork runs
    from this process, and one that asks for another thread count would find it taken. A
    test that runs JAX starts it in a child (platform.processes.call_in_fork, a subprocess).
    Checked once the test's fixtures are undone (a monkeypatched client is not one)."""
    result = yield
    started = getattr(sys.modules.get("accelbench.backends.jax"), "_started", None)
    here = started is not None and started.pid == os.getpid()
    if here and started not in _JAX_CLIENTS_REPORTED:
        _JAX_CLIENTS_REPORTED.add(started)
        pytest.fail("this test started JAX's client in the test process; start it in a child")
    return result


def copy_workflow(destination: Path) -> Path:
    """A copy of the workflow (no results) with config/tiny.yaml, so tests never touch results/."""
    for part in WORKFLOW_PARTS:
        source = REPO_ROOT / part
        if source.is_dir():
            shutil.copytree(
                source, destination / part, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(source, destination / part)
    (destination / "config" / "tiny.yaml").write_text(TINY_CONFIG)
    return destination


@pytest.fixture
def workflow_dir(tmp_path: Path) -> Path:
    return copy_workflow(tmp_path)


def snakemake(
    directory: Path, *args: str, timeout: float = 600, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run this environment's Snakemake in `directory`; output merged for assertions."""
    base = {**os.environ, **(extra_env or {})}
    env = {**base, "PATH": f"{Path(sys.executable).parent}:{base.get('PATH', '')}"}
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def planned_cells(output: str) -> dict[str, int]:
    """The records a dry run plans to write, by family: a comparison group's job writes
    several (accelbench.job.group), one cell's job one."""
    from accelbench import grid

    counts: dict[str, int] = {}
    for line in output.splitlines():
        if line.strip().startswith("output:"):
            for path in line.strip().removeprefix("output:").split(","):
                found = grid.cell_of_path(path.strip())
                if found:
                    counts[found[0]] = counts.get(found[0], 0) + 1
    return counts


def planned_jobs(output: str) -> dict[str, int]:
    """The 'Job stats' table of a dry run as {rule: count}."""
    stats = output.split("Job stats:", 1)[1]
    return {
        name: int(count)
        for name, count in re.findall(r"^(\w+)\s+(\d+)$", stats, flags=re.MULTILINE)
    }


@pytest.fixture(scope="session")
def slurm():
    """The local Slurm of tools/slurm-local with partitions medium and gpu.

    Without it the test skips, except in CI (CI=true), where a missing Slurm is
    a failure: the integration path must really run there.
    """
    from accelbench.slurm import resources as cluster

    partitions = cluster.slurm_partitions() or []
    if not {"medium", "gpu"} <= set(partitions):
        message = (
            f"no local Slurm with partitions medium and gpu (found {partitions or 'none'}); "
            "start one with `make slurm-up` (as root)"
        )
        missing(message)


def missing(message: str) -> None:
    """Skip a test whose local cluster is missing, except in CI (CI=true), where it fails."""
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


MULTINODE_PARTITION = "multinode"


@pytest.fixture(scope="session")
def two_nodes(slurm) -> list[str]:
    """node1 and node2 of the local Slurm: each slurmd in its own network namespace, so a
    job's tasks run on two hosts that reach each other only over their private bridge."""
    done = subprocess.run(
        ["sinfo", "--noheader", f"--partition={MULTINODE_PARTITION}", "--format=%n %t"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    nodes = dict(line.split() for line in done.stdout.splitlines() if line.strip())
    usable = sorted(name for name, state in nodes.items() if state in ("idle", "mix", "alloc"))
    if usable != ["node1", "node2"]:
        missing(
            f"no two-node partition {MULTINODE_PARTITION} with node1 and node2 up "
            f"(found {nodes or 'none'}); start it with `make slurm-up` (as root)"
        )
    return usable


# The modules with tests on the local Slurm. Under pytest-xdist (`make test` runs `-n`) they
# are one work unit: they run one after another in one worker, which mostly waits for the
# scheduler while the other workers' tests use the cores. In two units side by side, two
# workers waited at once, and with a third waiting out a time limit both cores were idle
# for up to 20 s. One of the largest units, it is handed out first: its chain of waits
# (about 400 s) starts with the run.
SLURM_MODULES = (
    "tests/test_cluster_slurm.py",
    "tests/test_env_modules.py",
    "tests/test_run_status.py",
    "tests/test_train_slurm.py",
    "tests/test_multinode_slurm.py",
    "tests/test_slurm.py",
)


# Tests that share one costly module-scoped fixture, by module or by test function (all its
# parameters): under pytest-xdist each entry is one work unit, so that the fixture is built
# once, in one worker, not once in every worker that gets one of its tests.
SHARED_FIXTURES = {
    "tests/test_paper_ready.py": "the planted grids (made)",
    "tests/test_figure_review.py": "every figure of the planted grids, drawn (drawn)",
    "tests/test_fork_server.py": "a fork server for the kernel jobs (server)",
    "tests/test_plugin_jobs.py": "a fork server for the users' units (server)",
    "tests/test_kernels.py": "the CUDA simulator's runs (simulator_report, capped_grid_cases)",
    "tests/test_train_parallel.py::test_two_processes_match_one_on_the_same_global_batch": (
        "two gloo processes' runs"
    ),
}


# Tests that train a model in this process on one CPU. Such a measurement is pinned to the
# lowest CPU it may use (host_cpus.choose_cpus), the same one in every worker: run side by
# side, they took three times as long as alone and left the other core idle for the
# suite's last 35 s. One work unit, so that they run one after another while the other
# workers' tests use the other core; one of the largest, so handed out among the first.
ONE_CPU_TRAINING = (
    "tests/test_train.py",
    "tests/test_train_data.py",
    "tests/test_train_models.py",
    "tests/test_train_parallel.py::test_cpu_precisions",
)


# Where the tests that read the machine's load (marker `quiet`) live: `make test` runs this
# module alone, after the others, and collects nothing else for it (collecting the whole
# suite to select them took 7 s).
QUIET_MODULE = "tests/test_contention.py"


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config, items):
    """The longest tests of one work unit each first: those that wait out a time limit
    (marker `waits`) and the end-to-end runs (marker `workflow`), so that the workers end
    together on short tests instead of one of them alone on a long one (a wait at the end
    left both cores idle for 20 s). pytest-xdist hands out the units of several tests (the
    Slurm tests, ONE_CPU_TRAINING, SHARED_FIXTURES) before them, the largest first, and
    the units of one test in this order. A test on the cluster outside SLURM_MODULES is
    refused (it would share the cluster), and so is a test marked quiet outside
    QUIET_MODULE (it would never run)."""
    for item in items:
        if item.get_closest_marker("quiet") and _module(item.nodeid) != QUIET_MODULE:
            raise pytest.UsageError(
                f"{item.nodeid} is marked quiet: move it to {QUIET_MODULE}, the module "
                "`make test` runs alone"
            )
        on_slurm = "slurm" in item.fixturenames or item.get_closest_marker("slurm")
        if on_slurm and _module(item.nodeid) not in SLURM_MODULES:
            raise pytest.UsageError(
                f"{item.nodeid} uses the local Slurm: add its module to "
                "SLURM_MODULES in tests/conftest.py"
            )
    items.sort(  # stable
        key=lambda item: not any(map(item.get_closest_marker, ("waits", "workflow")))
    )


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: `-p no:xdist` runs without it
def pytest_xdist_make_scheduler(config, log):
    """Each test is a work unit of its own, except the Slurm modules' tests (one unit), the
    tests that train on one pinned CPU (ONE_CPU_TRAINING, one unit) and the tests that share
    a costly fixture (SHARED_FIXTURES)."""
    from xdist.scheduler import LoadScopeScheduling

    class SlurmTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module, function = _module(nodeid), nodeid.split("[", 1)[0]
            if module in SLURM_MODULES:
                return "the tests on the local Slurm (SLURM_MODULES)"
            if module in ONE_CPU_TRAINING or function in ONE_CPU_TRAINING:
                return "training on one pinned CPU (ONE_CPU_TRAINING)"
            return SHARED_FIXTURES.get(function) or SHARED_FIXTURES.get(module, nodeid)

    return SlurmTogether(config, log)

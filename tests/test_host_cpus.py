"""The host's CPU layout read from sysfs (planted trees stand for big hosts, virtual machines
and containers), the CPUs a cpuN measurement is pinned to, and the pinning itself, in this
process and in a run forked for a measurement (accelbench.platform.host_cpus,
devices.cpu_threads)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.measuring import host_speed, statistics
from accelbench.platform import devices, host_cpus
from accelbench.platform.devices import parse_device
from accelbench.records.record import load_record


def plant(root, sockets, *, nodes=None, smt_active=None, online=None):
    """A sysfs tree below `root`: `sockets` lists each socket's cores, each core its CPUs;
    `nodes` maps a NUMA node to its CPU list (None: no node directory, as on many VMs)."""
    for package, cores in enumerate(sockets):
        for core in cores:
            for cpu in core:
                topology = root / "cpu" / f"cpu{cpu}" / "topology"
                topology.mkdir(parents=True)
                (topology / "physical_package_id").write_text(f"{package}\n")
                (topology / "thread_siblings_list").write_text(
                    host_cpus.format_cpu_list(core) + "\n"
                )
    every = [cpu for cores in sockets for core in cores for cpu in core]
    (root / "cpu" / "online").write_text((online or host_cpus.format_cpu_list(every)) + "\n")
    if smt_active is not None:
        (root / "cpu" / "smt").mkdir()
        (root / "cpu" / "smt" / "active").write_text(smt_active + "\n")
    for node, cpus in (nodes or {}).items():
        (root / "node" / f"node{node}").mkdir(parents=True)
        (root / "node" / f"node{node}" / "cpulist").write_text(cpus + "\n")
    return host_cpus.read_topology(root)


@pytest.fixture
def two_sockets(tmp_path):
    """2 sockets x 8 cores x 2 SMT threads, one NUMA node each, numbered as Intel's are:
    socket 0 holds CPUs 0-7 and their siblings 16-23."""
    sockets = [
        [(8 * socket + core, 16 + 8 * socket + core) for core in range(8)] for socket in (0, 1)
    ]
    return plant(tmp_path, sockets, nodes={0: "0-7,16-23", 1: "8-15,24-31"}, smt_active="1")


@pytest.fixture
def sixteen(tmp_path):
    """16 CPUs of 8 cores on 1 socket, siblings numbered (0,8), (1,9), ..."""
    return plant(tmp_path, [[(core, core + 8) for core in range(8)]], nodes={0: "0-15"})


def test_a_cpu_list_reads_and_writes_as_linux_writes_it():
    assert host_cpus.parse_cpu_list("0-3,8-11,16\n") == {0, 1, 2, 3, 8, 9, 10, 11, 16}
    assert host_cpus.parse_cpu_list("") == frozenset()
    assert host_cpus.format_cpu_list([16, 0, 1, 2, 3, 9, 8]) == "0-3,8-9,16"


def test_a_two_socket_host_is_read_with_its_numa_nodes_cores_and_smt_siblings(two_sockets):
    found = two_sockets.record(range(8))
    assert found == {
        "sockets": 2,
        "numa_nodes": {"0": [*range(8), *range(16, 24)], "1": [*range(8, 16), *range(24, 32)]},
        "cores": 16,
        "logical_cpus": 32,
        "threads_per_core": 2,
        "smt_active": True,
        "usable": list(range(8)),
    }
    assert host_cpus.describe(found) == (
        "2 sockets, 2 NUMA nodes, 16 cores x 2 threads (SMT on), 8 of 32 CPUs usable"
    )


def test_one_socket_of_eight_cores_with_two_threads_each_reads_so_in_one_line(sixteen):
    assert host_cpus.describe(sixteen.record(range(16))) == (
        "1 socket, 1 NUMA node, 8 cores x 2 threads (SMT on), 16 CPUs usable"
    )


def test_the_lent_h100_machine_shows_its_16_vcpus_as_cores_without_smt(tmp_path):
    """As its sysfs read (Firecracker on KVM): the host's SMT siblings are not visible."""
    found = plant(tmp_path, [[(cpu,) for cpu in range(16)]], nodes={0: "0-15"}, smt_active="0")
    assert host_cpus.describe(found.record(range(16))) == (
        "1 socket, 1 NUMA node, 16 cores x 1 thread (SMT off), 16 CPUs usable"
    )
    assert host_cpus.choose_cpus(4, set(range(16)), found) == [0, 1, 2, 3]


def test_a_vm_without_node_directories_has_unknown_numa_nodes(tmp_path):
    found = plant(tmp_path, [[(0,), (1,)]]).record([0, 1])
    assert found["numa_nodes"] is None and found["sockets"] == 1
    assert found["smt_active"] is False  # no smt directory: no core has a second thread online
    assert host_cpus.describe(found) == (
        "1 socket, NUMA nodes unknown, 2 cores x 1 thread (SMT off), 2 CPUs usable"
    )


def test_a_vm_that_hides_its_sockets_has_them_unknown_and_its_cores_still_counted(tmp_path):
    plant(tmp_path, [[(0,), (1,)]])
    for cpu in (0, 1):
        (tmp_path / "cpu" / f"cpu{cpu}" / "topology" / "physical_package_id").write_text("\n")
    host_cpus.read_topology.cache_clear()  # read once per process: read it again here
    found = host_cpus.read_topology(tmp_path)
    assert found.sockets is None and found.cores == 2


def test_a_host_with_smt_turned_off_counts_one_online_thread_per_core(tmp_path):
    found = plant(tmp_path, [[(0,), (1,), (2,), (3,)]], smt_active="0", online="0-3")
    assert found.threads_per_core == 1 and found.smt_active is False and found.cores == 4


def test_a_container_without_topology_says_unknown_instead_of_failing(tmp_path):
    topology = host_cpus.read_topology(tmp_path)
    found = topology.record([0, 1, 2, 3])
    assert found == {
        "sockets": None,
        "numa_nodes": None,
        "cores": None,
        "logical_cpus": None,
        "threads_per_core": None,
        "smt_active": None,
        "usable": [0, 1, 2, 3],
    }
    assert host_cpus.describe(found) == (
        "sockets unknown, NUMA nodes unknown, cores unknown, 4 CPUs usable"
    )
    assert host_cpus.choose_cpus(2, {3, 1, 2, 0}, topology) == [0, 1]


def test_cpu4_takes_one_cpu_of_four_cores_and_siblings_only_once_every_core_is_taken(sixteen):
    every = set(range(16))
    assert host_cpus.choose_cpus(4, every, sixteen) == [0, 1, 2, 3]
    assert host_cpus.choose_cpus(8, every, sixteen) == list(range(8))
    assert host_cpus.choose_cpus(10, every, sixteen) == [*range(8), 8, 9]


def test_siblings_numbered_side_by_side_are_skipped_the_same_way(tmp_path):
    topology = plant(tmp_path, [[(2 * core, 2 * core + 1) for core in range(8)]])
    assert host_cpus.choose_cpus(4, set(range(16)), topology) == [0, 2, 4, 6]


def test_cpu8_on_two_numa_nodes_stays_in_node_0(two_sockets):
    every = set(range(32))
    assert host_cpus.choose_cpus(8, every, two_sockets) == list(range(8))
    # 16 threads fit node 0 with its siblings: memory stays near rather than cores spread.
    assert host_cpus.choose_cpus(16, every, two_sockets) == [*range(8), *range(16, 24)]
    assert host_cpus.choose_cpus(20, every, two_sockets) == [*range(12), *range(16, 24)]


def test_a_node_that_cannot_hold_the_threads_gives_way_to_one_that_can(two_sockets):
    allowed = {0, 1, *range(8, 16), *range(24, 32)}
    assert host_cpus.choose_cpus(8, allowed, two_sockets) == list(range(8, 16))


def test_the_cpus_are_chosen_from_the_usable_subset(sixteen):
    assert host_cpus.choose_cpus(4, set(range(4, 16)), sixteen) == [4, 5, 6, 7]
    # Core 2 has both threads usable, cores 0, 1 and 3 one each: one per core first.
    assert host_cpus.choose_cpus(4, {2, 3, 8, 9, 10}, sixteen) == [2, 3, 8, 9]


def usable(monkeypatch, cpus, topology):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(cpus))
    monkeypatch.setattr(host_cpus, "read_topology", lambda: topology)


def test_a_cpu_device_is_pinned_only_where_there_is_a_choice(monkeypatch, sixteen):
    usable(monkeypatch, range(16), sixteen)
    assert devices.pinned_cpus(parse_device("cpu4")) == [0, 1, 2, 3]
    assert devices.cpus_used(parse_device("cpu4")) == [0, 1, 2, 3]
    assert devices.pinned_cpus(parse_device("cpu16")) is None
    # Slurm gave the job exactly its CPUs: nothing to choose.
    usable(monkeypatch, [4, 5, 12, 13], sixteen)
    assert devices.pinned_cpus(parse_device("cpu4")) is None
    assert devices.cpus_used(parse_device("cpu4")) == [4, 5, 12, 13]
    # Fewer CPUs than threads: the threads share them, as they always did.
    assert devices.pinned_cpus(parse_device("cpu8")) is None


def test_a_gpu_host_side_and_a_multi_node_device_are_never_pinned(monkeypatch, sixteen):
    usable(monkeypatch, range(16), sixteen)
    assert devices.pinned_cpus(parse_device("cuda1")) is None
    assert devices.cpus_used(parse_device("cuda1")) == list(range(16))
    assert devices.pinned_cpus(parse_device("2x2cpu")) is None


two_cpus = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="pinning to one CPU of one changes nothing"
)


def affinity(thread: threading.Thread) -> set[int]:
    return os.sched_getaffinity(thread.native_id)


@two_cpus
def test_pinning_moves_every_thread_and_puts_each_back_after():
    outside = os.sched_getaffinity(0)
    target = {min(outside)}
    release = threading.Event()
    earlier = threading.Thread(target=release.wait)
    earlier.start()
    try:
        with host_cpus.pinned(target):
            later = threading.Thread(target=release.wait)
            later.start()
            assert os.sched_getaffinity(0) == target
            assert affinity(earlier) == target and affinity(later) == target
        assert os.sched_getaffinity(0) == outside
        assert affinity(earlier) == outside and affinity(later) == outside
    finally:
        release.set()


def threads_of_a_measurement(device: str) -> tuple[list[int] | None, list[list[int]]]:
    """In a forked run: the CPUs chosen, and the CPUs of every thread of the process once a
    Numba parallel loop and a torch matmul have started their pools."""
    import numba
    import numpy as np
    import torch

    @numba.njit(parallel=True)
    def total(values):
        result = 0.0
        for index in numba.prange(values.size):
            result += values[index]
        return result

    with devices.cpu_threads(parse_device(device)):
        total(np.ones(100_000))
        torch.ones(256, 256) @ torch.ones(256, 256)
        threads = os.listdir("/proc/self/task")
        masks = [sorted(os.sched_getaffinity(int(thread))) for thread in threads]
    return devices.pinned_cpus(parse_device(device)), masks


# Forks the run as the measuring process does, from a process that has started no thread
# pool: this one may have (GNU OpenMP cannot be forked, and Numba stops a child that tries).
FORKED_RUN = (
    "import json; from accelbench.platform.processes import call_in_fork; "
    "from test_host_cpus import threads_of_a_measurement; "
    "print(json.dumps(call_in_fork(threads_of_a_measurement, 'cpu1')))"
)


@two_cpus
def test_a_forked_cpu1_measurement_runs_every_thread_on_the_one_cpu_chosen():
    outside = os.sched_getaffinity(0)
    done = subprocess.run(
        [sys.executable, "-c", FORKED_RUN],
        cwd=Path(__file__).parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    chosen, masks = json.loads(done.stdout.splitlines()[-1])
    assert chosen is not None and len(chosen) == 1
    assert len(masks) > 1  # Numba's pool at least
    assert all(mask == chosen for mask in masks)
    assert os.sched_getaffinity(0) == outside


@two_cpus
def test_a_record_names_the_cpus_its_runs_ran_on_and_the_probe_times_them(monkeypatch, tmp_path):
    def measure(exp, settings):
        with devices.cpu_threads(exp.parsed_device):
            seen = sorted(os.sched_getaffinity(0))
        return measurement.Outcome(
            "ok",
            metrics={"time": statistics.summarize([1e-3, 1e-3], "s")},
            params={"affinity_in_run": seen},
        )

    probed = []
    monkeypatch.setattr("accelbench.kernels.measure.measure_kernel", measure)
    monkeypatch.setattr(host_speed, "history_file", lambda: tmp_path / "host-speed.json")
    monkeypatch.setattr(host_speed, "probe", lambda cpus=None: probed.append(cpus) or 1e-3)
    settings = KernelSettings(runs=2, half_width=0.5, budget_s=0)
    exp = KernelExperiment("saxpy", "cpu1", "numpy", "float32", 1000)
    output = tmp_path / "record.json"
    context = JobContext("t")
    status = measurement.run(exp, settings, str(output), context=context, fresh_processes=True)
    assert status == "ok"
    record = load_record(output)
    chosen = devices.pinned_cpus(parse_device("cpu1"))
    assert record["params"]["affinity_in_run"] == chosen
    assert record["conditions"]["cpus_used"] == chosen
    assert probed and all(cpus == chosen for cpus in probed)
    assert record["provenance"]["cpu_topology"]["usable"] == sorted(os.sched_getaffinity(0))

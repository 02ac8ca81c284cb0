"""The host's CPUs: how they are laid out (sockets, NUMA nodes, cores, SMT), and which of
them a measurement of N threads runs on.

A GPU node is a big host (16 to 128 cores, often two sockets), and its CPU cells are the
other half of every GPU-vs-CPU speedup. A cpu4 cell whose four threads float over 16
cores is not four cores' worth of CPU: the scheduler moves them between cores, sockets
and the SMT siblings of one core from run to run. So a cell of N threads is pinned to N
CPUs chosen here, and every record carries the layout it was measured on.

The layout is read from Linux's sysfs under a root that tests replace with a planted
tree. Where sysfs lacks a part (a container, a virtual machine without NUMA nodes), that
part is unknown (null in the record), never a guess and never a crash. So are the clocks
and frequency governors of the CPUs a measurement ran on (ClockWatch), which the record
keeps beside its numbers.
"""

from __future__ import annotations

import functools
import os
import statistics
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

SYSFS = Path("/sys/devices/system")
CPUINFO = Path("/proc/cpuinfo")
# Where a CPU's clock was read: cpufreq's scaling_cur_freq, or /proc/cpuinfo's "cpu MHz".
CLOCK_SOURCES = ("cpufreq", "cpuinfo")


class Figure(TypedDict):
    """A figure's min, median and max over its samples (a CPU's clock, a GPU's power), and
    where it came from where it may come from more than one place."""

    min: float
    median: float
    max: float
    samples: int
    source: NotRequired[str]


class CpuClock(TypedDict):
    """The record's `conditions.cpu_clock` (ClockWatch.record); None where the machine did
    not tell, with the reason in `unreadable`."""

    cpus: list[int]
    mhz: Figure | None
    sources: list[str]
    governors: list[str] | None
    unreadable: dict[str, str]  # field -> why it is None


class CpuTopology(TypedDict):
    """The provenance's `cpu_topology` (Topology.record): every key, None where sysfs does
    not tell."""

    sockets: int | None
    numa_nodes: dict[str, list[int]] | None  # node -> its CPUs
    cores: int | None
    logical_cpus: int | None
    threads_per_core: int | None
    smt_active: bool | None
    usable: list[int]


def parse_cpu_list(text: str) -> frozenset[int]:
    """The CPUs of a list as Linux writes it: "0-3,8-11", "5", or "" for none."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            first, _, last = part.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
    return frozenset(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """`cpus` as Linux writes a CPU list: runs of consecutive CPUs as ranges, "0-3,8"."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _cpu_list(path: Path) -> frozenset[int] | None:
    text = _read(path)
    try:
        return None if text is None else parse_cpu_list(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class Topology:
    """The online CPUs as sysfs describes them; a part sysfs lacks is empty."""

    online: frozenset[int]
    packages: dict[int, int]  # CPU -> its socket (physical package)
    siblings: dict[int, frozenset[int]]  # CPU -> the online CPUs of its physical core, itself too
    numa_nodes: dict[int, frozenset[int]]  # NUMA node -> its CPUs
    smt_active: bool | None  # whether SMT siblings are online (cpu/smt/active)

    @property
    def sockets(self) -> int | None:
        return len(set(self.packages.values())) or None

    @property
    def cores(self) -> int | None:
        return len(set(self.siblings.values())) or None

    @property
    def threads_per_core(self) -> int | None:
        return max(map(len, self.siblings.values()), default=None)

    def record(self, usable: Iterable[int]) -> CpuTopology:
        """The provenance's `cpu_topology`, with `usable`, the CPUs the process may use."""
        return {
            "sockets": self.sockets,
            "numa_nodes": {str(node): sorted(cpus) for node, cpus in self.numa_nodes.items()}
            or None,
            "cores": self.cores,
            "logical_cpus": len(self.online) or None,
            "threads_per_core": self.threads_per_core,
            "smt_active": self.smt_active,
            "usable": sorted(usable),
        }


@functools.cache
def read_topology(root: Path = SYSFS) -> Topology:
    """The CPU layout below `root` (Linux: /sys/devices/system), read once per process."""
    cpu_dir = root / "cpu"
    online = _cpu_list(cpu_dir / "online")
    packages: dict[int, int] = {}
    siblings: dict[int, frozenset[int]] = {}
    for topology in cpu_dir.glob("cpu[0-9]*/topology"):
        cpu = int(topology.parent.name.removeprefix("cpu"))
        package = _read(topology / "physical_package_id") or ""
        core = _cpu_list(topology / "thread_siblings_list")
        if (online is not None and cpu not in online) or core is None:
            continue  # an offline CPU, or one whose place sysfs does not tell
        with suppress(ValueError):  # a socket sysfs does not tell is left unknown
            packages[cpu] = int(package)
        siblings[cpu] = core
    numa_nodes = {}
    for node in (root / "node").glob("node[0-9]*"):
        cpus = _cpu_list(node / "cpulist")
        if cpus is not None:
            numa_nodes[int(node.name.removeprefix("node"))] = cpus
    smt = _read(cpu_dir / "smt" / "active")
    threads_per_core = max(map(len, siblings.values()), default=None)
    if smt in ("0", "1"):
        smt_active: bool | None = smt == "1"
    else:  # no smt directory (an older kernel): siblings are online where a core has two
        smt_active = None if threads_per_core is None else threads_per_core > 1
    return Topology(
        online=online if online is not None else frozenset(siblings),
        packages=packages,
        siblings=siblings,
        numa_nodes=dict(sorted(numa_nodes.items())),
        smt_active=smt_active,
    )


def topology_record() -> CpuTopology:
    """This host's layout and the CPUs this process may use, for the provenance."""
    return read_topology().record(os.sched_getaffinity(0))


def _counted(count: int | None, what: str) -> str:
    if count is None:
        return f"{what}s unknown"
    return f"{count} {what}{'' if count == 1 else 's'}"


def describe(topology: CpuTopology | None) -> str | None:
    """A record's `cpu_topology` in one line: "1 socket, 1 NUMA node, 8 cores x 2 threads
    (SMT on), 16 CPUs usable"; "8 of 32 CPUs usable" where the process had fewer."""
    if not topology:
        return None
    nodes, cores = topology["numa_nodes"], _counted(topology["cores"], "core")
    if topology["cores"] is not None:
        smt = {True: " (SMT on)", False: " (SMT off)"}.get(topology["smt_active"], "")
        cores += f" x {_counted(topology['threads_per_core'], 'thread')}{smt}"
    usable, logical = len(topology["usable"]), topology["logical_cpus"]
    of = f"{usable} of {logical} CPUs" if logical and logical != usable else _counted(usable, "CPU")
    return ", ".join(
        (
            _counted(topology["sockets"], "socket"),
            _counted(None if nodes is None else len(nodes), "NUMA node"),
            cores,
            f"{of} usable",
        )
    )


def cpuinfo_mhz(text: str) -> dict[int, float]:
    """Each processor's "cpu MHz" in /proc/cpuinfo's `text`, by its number (x86 writes it;
    other architectures may not)."""
    found: dict[int, float] = {}
    processor = None
    for line in text.splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        with suppress(ValueError):
            if key == "processor":
                processor = int(value)
            elif key == "cpu MHz" and processor is not None:
                found[processor] = float(value)
    return found


class ClockWatch:
    """The clocks and frequency governors of the CPUs a measurement runs on (`cpus`), read
    after each of its runs (`poll`); `record` is the record's `conditions.cpu_clock`.

    A clock is cpufreq's scaling_cur_freq (the kernel's estimate over its last scheduler
    ticks, so a reading right after a run still shows the run), else /proc/cpuinfo's
    "cpu MHz", which in a virtual machine is often the host's nominal clock and never
    moves. A virtual machine usually has no cpufreq at all, and then no governor: the
    record says null and why (`unreadable`). conditions.cpu_mhz and conditions.governor
    (accelbench.measuring.contention) stay beside it: the mean of every CPU and cpu0's
    governor, read once at the end.
    """

    def __init__(self, cpus: Iterable[int], root: Path = SYSFS, cpuinfo: Path = CPUINFO) -> None:
        self.cpus = sorted(cpus)
        self.root = root
        self.cpuinfo = cpuinfo
        self.mhz: list[float] = []
        self.sources: set[str] = set()
        self.governors: set[str] = set()

    def _cpufreq(self, cpu: int, name: str) -> Path:
        return self.root / "cpu" / f"cpu{cpu}" / "cpufreq" / name

    def poll(self) -> None:
        governors = [_read(self._cpufreq(cpu, "scaling_governor")) for cpu in self.cpus]
        self.governors.update(governor for governor in governors if governor)
        khz = [_read(self._cpufreq(cpu, "scaling_cur_freq")) for cpu in self.cpus]
        if self.cpus and all(text and text.isdigit() for text in khz):
            self.mhz.extend(int(text) / 1000 for text in khz)
            self.sources.add("cpufreq")
            return
        listed = cpuinfo_mhz(_read(self.cpuinfo) or "")
        if self.cpus and all(cpu in listed for cpu in self.cpus):
            self.mhz.extend(listed[cpu] for cpu in self.cpus)
            self.sources.add("cpuinfo")

    def record(self) -> CpuClock:
        unreadable = {}
        if not self.governors:
            unreadable["governors"] = (
                f"no {self._cpufreq(self.cpus[0] if self.cpus else 0, 'scaling_governor')}: "
                "no cpufreq driver here (usual in a virtual machine)"
            )
        if not self.mhz:
            unreadable["mhz"] = (
                'neither cpufreq\'s scaling_cur_freq nor a "cpu MHz" line of '
                f"{self.cpuinfo} for each of CPUs {format_cpu_list(self.cpus)}"
            )
        return {
            "cpus": self.cpus,
            "mhz": {
                "min": min(self.mhz),
                "median": statistics.median(self.mhz),
                "max": max(self.mhz),
                "samples": len(self.mhz),
            }
            if self.mhz
            else None,
            # Both where cpufreq stopped answering between runs: then cpuinfo stood in.
            "sources": sorted(self.sources),
            "governors": sorted(self.governors) or None,
            "unreadable": unreadable,
        }


def choose_cpus(count: int, allowed: Collection[int], topology: Topology) -> list[int]:
    """`count` of the `allowed` CPUs for a measurement of `count` threads, sorted.

    Within one NUMA node (one socket where the nodes are unknown) if one holds them all,
    so that memory stays near; one CPU per physical core before the second thread of any
    core of the node, since two SMT siblings share one core's units; lowest numbers first.
    Deterministic: every run of a cell, and the process that probes the host for it,
    choose the same CPUs.
    """
    node_of = {cpu: node for node, cpus in topology.numa_nodes.items() for cpu in cpus}
    domains: dict[tuple[int, int], list[int]] = {}
    for cpu in sorted(allowed):
        domain = (node_of.get(cpu, -1), topology.packages.get(cpu, -1))
        domains.setdefault(domain, []).append(cpu)
    order = sorted(domains, key=lambda domain: (len(domains[domain]) < count, domain))
    ranked = [cpu for domain in order for cpu in _cores_first(domains[domain], topology)]
    return sorted(ranked[:count])


def _cores_first(cpus: list[int], topology: Topology) -> list[int]:
    """`cpus` ordered by how many of them share the CPU's core with a lower number: every
    core's first CPU, then every core's second."""
    present = set(cpus)

    def sibling_rank(cpu: int) -> int:
        core = topology.siblings.get(cpu, ())
        return sum(1 for other in core if other < cpu and other in present)

    return sorted(cpus, key=lambda cpu: (sibling_rank(cpu), cpu))


def _threads() -> list[int]:
    return [int(name) for name in os.listdir("/proc/self/task")]


def _set_affinity(thread: int, cpus: Collection[int]) -> None:
    with suppress(ProcessLookupError):  # the thread ended meanwhile
        os.sched_setaffinity(thread, cpus)


@contextmanager
def pinned(cpus: Collection[int] | None) -> Iterator[None]:
    """Every thread of this process on `cpus` (None: left where it is) until the block
    ends, then each thread back on its own CPUs, and one started inside on the CPUs the
    caller had.

    Affinity is a thread's, and a new thread inherits its creator's: a thread pool
    (OpenMP, OpenBLAS, Numba) started inside the block runs on `cpus`. Threads that
    already run are moved too, or a pool an earlier measurement in this process started
    would go on using every CPU, or the CPUs of that measurement.
    """
    if cpus is None:
        yield
        return
    outside = os.sched_getaffinity(0)
    before = {}
    for thread in _threads():
        with suppress(ProcessLookupError):
            before[thread] = os.sched_getaffinity(thread)
    for thread in before:
        _set_affinity(thread, cpus)
    try:
        yield
    finally:
        for thread in _threads():
            _set_affinity(thread, before.get(thread, outside))

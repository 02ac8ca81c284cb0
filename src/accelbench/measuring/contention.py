"""What else the machine was doing while an experiment was measured.

A measurement shares the machine with whatever else runs there, and a busy
neighbour inflates every sample of a run alike, so no within-run statistic can
reveal it. This module reads it from the kernel instead: between a start and a
stop snapshot, the CPU time every process used (/proc/stat) less the CPU time of
this process, its descendants, the other tasks of the same Slurm job and the
processes that started it (the workflow engine, recorded apart), is the CPU time
others took; hypervisor steal time is counted with it. Divided by the
wall time it is "other CPUs": 1.0 means one core was busy elsewhere throughout.

Load average, CPU clock and governor are recorded beside it where the machine
exposes them (a virtual machine often does not: they are then null).
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

from accelbench.measuring.sections import ConditionsSection

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")
CPUFREQ = Path("/sys/devices/system/cpu")


def _system_seconds() -> tuple[float, float]:
    """(busy, steal) CPU seconds of all CPUs since boot, from /proc/stat's first line.

    Busy is user + nice + system + irq + softirq (guest time is inside user).
    """
    fields = PROC.joinpath("stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(value) for value in fields]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (ticks + [0] * 8)[:8]
    return (user + nice + system + irq + softirq) / CLOCK_TICKS, steal / CLOCK_TICKS


def _processes() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds of it and its waited-for children), every live process."""
    table = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = entry.joinpath("stat").read_text()
        except OSError:  # ended while the table was read
            continue
        # The command name may hold spaces and parentheses: fields follow the last ')'.
        fields = text[text.rindex(")") + 2 :].split()
        utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
        table[int(entry.name)] = (int(fields[1]), (utime + stime + cutime + cstime) / CLOCK_TICKS)
    return table


def _slurm_job_of(pid: int) -> str | None:
    try:
        environ = PROC.joinpath(str(pid), "environ").read_bytes()
    except OSError:
        return None
    for item in environ.split(b"\0"):
        if item.startswith(b"SLURM_JOB_ID="):
            return item.split(b"=", 1)[1].decode(errors="replace")
    return None


def _own_seconds() -> float:
    """CPU seconds of this process and of every descendant it has waited for."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


class _Ours:
    """Which live processes count as this measurement's own: descendants, same Slurm job;
    and which run it (its ancestors below init: the supervisor, Snakemake, the shell)."""

    def __init__(self, table: dict[int, tuple[int, float]]) -> None:
        self.root = os.getpid()
        self.job = os.environ.get("SLURM_JOB_ID")
        self.job_of: dict[int, str | None] = {}  # pid -> its Slurm job, read once per pid
        self.ancestors: set[int] = set()
        parent = table.get(self.root, (0, 0.0))[0]
        while parent > 1 and parent in table and parent not in self.ancestors:
            self.ancestors.add(parent)
            parent = table[parent][0]

    def workflow_seconds(self, table: dict[int, tuple[int, float]]) -> dict[int, float]:
        """CPU seconds of each live ancestor (the workflow engine that started this job)."""
        return {pid: table[pid][1] for pid in self.ancestors if pid in table}

    def seconds(self, table: dict[int, tuple[int, float]]) -> dict[int, tuple[float, bool]]:
        """(CPU seconds, is a descendant) of each live process of ours, this one excluded."""
        ours: dict[int, tuple[float, bool]] = {}
        for pid in table:
            if pid == self.root:
                continue
            ancestor, seen = table[pid][0], 0
            while ancestor not in (0, 1, self.root) and ancestor in table and seen < 256:
                ancestor, seen = table[ancestor][0], seen + 1
            descendant = ancestor == self.root
            if descendant or self._same_job(pid):
                ours[pid] = (table[pid][1], descendant)
        return ours

    def _same_job(self, pid: int) -> bool:
        if not self.job:
            return False
        if pid not in self.job_of:
            self.job_of[pid] = _slurm_job_of(pid)
        return self.job_of[pid] == self.job


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_clock() -> tuple[float | None, str | None]:
    """(mean current CPU clock in MHz, cpu0's frequency governor); None where not exposed."""
    readings = [_read(path) for path in sorted(CPUFREQ.glob("cpu[0-9]*/cpufreq/scaling_cur_freq"))]
    khz = [float(text) for text in readings if text and text.isdigit()]
    if khz:
        mhz: float | None = sum(khz) / len(khz) / 1000.0
    else:
        cpuinfo = _read(PROC / "cpuinfo") or ""
        values = [
            float(line.split(":", 1)[1])
            for line in cpuinfo.splitlines()
            if line.startswith("cpu MHz")
        ]
        mhz = sum(values) / len(values) if values else None
    return mhz, _read(CPUFREQ / "cpu0" / "cpufreq" / "scaling_governor")


@dataclass(frozen=True)
class Conditions:
    """What the machine did during one measurement window."""

    window_s: float
    other_cpus: float  # CPU time of other processes per second of wall time
    workflow_cpus: float  # the same, of the processes that started this one (not contention)
    steal_cpus: float  # hypervisor steal time per second of wall time
    load_average_1m: float
    cpus_online: int
    cpu_mhz: float | None
    governor: str | None
    # The least CPU use the kernel's counters resolve in this window: they count whole
    # clock ticks, so each CPU's reading may be off by up to one tick.
    resolution_cpus: float

    @property
    def contention(self) -> float:
        """CPUs taken from this measurement: other processes plus steal."""
        return self.other_cpus + self.steal_cpus

    def busier_than(self, max_other_cpus: float) -> bool:
        """Contention above the limit by more than the counters' resolution.

        A window of a few clock ticks cannot tell one stray tick of a daemon
        from a busy neighbour; calling that busy would only retry at random.
        """
        return self.contention - self.resolution_cpus > max_other_cpus

    def as_record(self) -> ConditionsSection:
        return {
            "window_s": self.window_s,
            "other_cpus": self.other_cpus,
            "workflow_cpus": self.workflow_cpus,
            "steal_cpus": self.steal_cpus,
            "load_average_1m": self.load_average_1m,
            "cpus_online": self.cpus_online,
            "cpu_mhz": self.cpu_mhz,
            "governor": self.governor,
            "resolution_cpus": self.resolution_cpus,
        }


class Watch:
    """Start at construction, `stop()` at the end of the window: the Conditions seen.

    The processes that started this one (Snakemake, the job's supervisor) are
    counted apart as `workflow_cpus`: run locally, Snakemake does its
    bookkeeping on a core the experiment leaves free, which no pause avoids.
    """

    def __init__(self) -> None:
        self._ours = _Ours(_processes())
        self._start = self._snapshot()

    def _snapshot(self):
        table = _processes()
        busy, steal = _system_seconds()
        workflow = sum(self._ours.workflow_seconds(table).values())
        return time.perf_counter(), busy, steal, _own_seconds(), self._ours.seconds(table), workflow

    def stop(self) -> Conditions:
        wall0, busy0, steal0, own0, tree0, workflow0 = self._start
        wall1, busy1, steal1, own1, tree1, workflow1 = self._snapshot()
        window = max(wall1 - wall0, 1e-9)
        # A live process of ours counts from the start snapshot, or from its birth.
        tree = sum(seconds - tree0.get(pid, (0.0, True))[0] for pid, (seconds, _) in tree1.items())
        # Descendants that ended were waited for: their whole time is in own1 now, and
        # what they had used by the start is in tree0. (Tasks of the same job that ended
        # are not: what they used after the start is lost, counted as other.)
        ended = sum(
            seconds
            for pid, (seconds, descendant) in tree0.items()
            if descendant and pid not in tree1
        )
        ours = (own1 - own0) + tree - ended
        workflow = max(0.0, workflow1 - workflow0)
        other = max(0.0, (busy1 - busy0) - ours - workflow)
        mhz, governor = cpu_clock()
        cpus = os.cpu_count() or 1
        return Conditions(
            window_s=window,
            other_cpus=other / window,
            workflow_cpus=workflow / window,
            steal_cpus=max(0.0, steal1 - steal0) / window,
            load_average_1m=os.getloadavg()[0],
            cpus_online=cpus,
            cpu_mhz=mhz,
            governor=governor,
            resolution_cpus=cpus / (CLOCK_TICKS * window),
        )

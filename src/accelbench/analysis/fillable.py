"""What a grid plans, as the tables and figures need it: the default target asks only for
those its grid can fill (each output's condition: accelbench.analysis.outputs).

Decided from the planned grid before anything runs, so that a CPU-only grid asks
for no GPU-scaling figure and no CPU/GPU crossover: an output with nothing to show
is not made (a study says the same of its outputs in its NEEDS, accelbench.studies).
A planned cell can still fail to run; the outputs that are made mark such cells.
An energy figure is asked for only where some planned device's counters can be read:
a GPU's (NVML), or a CPU's where this host's RAPL counters open (Linux lets only root
read them since 5.10, and a virtual machine has none) (`Counters`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from accelbench.analysis import crossovers
from accelbench.analysis.gpu_vs_cpu import is_cpu_baseline
from accelbench.families import FAMILIES
from accelbench.grid import Grid
from accelbench.measuring import energy
from accelbench.platform.devices import Device, parse_device


@dataclass(frozen=True)
class Counters:
    """The device kinds whose energy counters a run can read, and why each other kind's
    cannot."""

    kinds: frozenset[str]
    why_not: dict[str, str]

    @classmethod
    def here(cls, config: Mapping) -> Counters:
        """A GPU's counter (NVML) wherever energy is measured; a CPU's where this host's
        RAPL counters open (the jobs of a local run read the same ones)."""
        if not (config.get("energy") or {}).get("enabled", True):
            off = "energy is not measured (energy.enabled: false)"
            return cls(frozenset(), {"cpu": off, "cuda": off})
        try:
            energy.rapl_meter()
        except energy.EnergyUnavailable as err:
            return cls(frozenset({"cuda"}), {"cpu": str(err)})
        return cls(frozenset({"cpu", "cuda"}), {})


def _work_cell(exp: Any) -> tuple[str, str, str | None, str, str, int]:
    """(family, kernel or workload, its variant (a kernel's dtype) or None, backend, device,
    size) of a kernel or data science experiment."""
    variant = crossovers.variant(exp.family)
    return (
        exp.family,
        getattr(exp, FAMILIES[exp.family].primary),
        getattr(exp, variant) if variant else None,
        exp.backend,
        exp.device,
        exp.size,
    )


@dataclass(frozen=True)
class Planned:
    """What a grid plans, as the outputs need it: devices per family, precisions, the device
    kinds of each kernel, data science workload and model configuration, whether roofs are
    measured, every training and work cell (what a figure compares), and the energy
    counters a run can read (`Counters`)."""

    train_devices: frozenset[str]
    precisions: frozenset[str]
    kernel_devices: frozenset[str]
    datasci_devices: frozenset[str]
    # kernel or workload -> device kinds it runs on
    work_kinds: dict[tuple[str, str], frozenset[str]]
    roofs: bool
    # (model, batch, precision, strategy) of every training experiment
    train_configurations: frozenset[tuple[str, int, str, str]]
    # (model, batch, strategy) -> the kinds of device it trains on: a GPU in any precision,
    # a CPU in its baseline one (what the GPU is compared with)
    train_kinds: dict[tuple[str, int, str], frozenset[str]]
    # (model, batch, precision, strategy, device) of every training experiment
    train_cells: frozenset[tuple[str, int, str, str, str]] = frozenset()
    # `_work_cell` of every kernel and data science experiment
    work_cells: frozenset[tuple[str, str, str | None, str, str, int]] = frozenset()
    counters: Counters = Counters(frozenset(), {})

    @classmethod
    def of(cls, grid: Grid, counters: Counters | None = None) -> Planned:
        train = [exp for exp in grid.experiments if exp.family == "train"]
        kernels = [exp for exp in grid.experiments if exp.family == "kernel"]
        datasci = [exp for exp in grid.experiments if exp.family == "datasci"]
        kinds: dict[tuple[str, str], set[str]] = {}
        for exp in kernels:
            kinds.setdefault(("kernel", exp.kernel), set()).add(exp.parsed_device.kind)
        for exp in datasci:
            kinds.setdefault(("datasci", exp.workload), set()).add(exp.parsed_device.kind)
        trained: dict[tuple[str, int, str], set[str]] = {}
        for exp in train:
            if exp.parsed_device.is_gpu or is_cpu_baseline(asdict(exp)):
                configuration = (exp.model, exp.batch, exp.strategy)
                trained.setdefault(configuration, set()).add(exp.parsed_device.kind)
        return cls(
            train_devices=frozenset(exp.device for exp in train),
            precisions=frozenset(exp.precision for exp in train),
            kernel_devices=frozenset(exp.device for exp in kernels),
            datasci_devices=frozenset(exp.device for exp in datasci),
            work_kinds={work: frozenset(found) for work, found in kinds.items()},
            roofs=any(exp.family == "roof" for exp in grid.experiments),
            train_configurations=frozenset(
                (exp.model, exp.batch, exp.precision, exp.strategy) for exp in train
            ),
            train_kinds={key: frozenset(found) for key, found in trained.items()},
            train_cells=frozenset(
                (exp.model, exp.batch, exp.precision, exp.strategy, exp.device) for exp in train
            ),
            work_cells=frozenset(_work_cell(exp) for exp in [*kernels, *datasci]),
            counters=counters or Counters(frozenset(), {}),
        )

    def scales(self, kind: str, nodes: Callable[[Device], bool]) -> bool:
        """Some training device of `kind` with more than one unit (and `nodes`) has the
        one-unit device it is compared with (`kind`1) in the grid."""
        parsed = [parse_device(name) for name in self.train_devices]
        return f"{kind}1" in self.train_devices and any(
            device.kind == kind and device.units > 1 and nodes(device) for device in parsed
        )

    @property
    def runs_on_cpu_and_gpu(self) -> bool:
        """Some kernel or data science workload is planned on both a CPU and a GPU."""
        return any({"cpu", "cuda"} <= kinds for kinds in self.work_kinds.values())

    @property
    def compares_gpu_with_cpu(self) -> bool:
        """Some cell is planned on a GPU and on a CPU to set it against: a kernel or workload,
        or a model's configuration (on the CPU in its baseline precision). Whether the two
        run on one host, as the comparison asks, only the records tell."""
        trains = any({"cpu", "cuda"} <= kinds for kinds in self.train_kinds.values())
        return self.runs_on_cpu_and_gpu or trains

    def compares(self, parameter: str) -> bool:
        """Some training configuration is planned for two values of `parameter` (device or
        precision), the rest alike."""
        names = ("model", "batch", "precision", "strategy", "device")
        place = names.index(parameter)
        found: dict[tuple, set[str]] = {}
        for cell in self.train_cells:
            found.setdefault(cell[:place] + cell[place + 1 :], set()).add(cell[place])
        return any(len(values) > 1 for values in found.values())

    def beside_kind_of(self, baseline: str) -> bool:
        """The baseline and a training device not of its kind on one node (whose speedups
        over it the scaling figures draw) are planned."""
        kind = parse_device(baseline).kind
        others = [parse_device(name) for name in self.train_devices if name != baseline]
        return baseline in self.train_devices and any(
            (device.kind, device.nodes) != (kind, 1) for device in others
        )

    @property
    def sizes_on_both_sides(self) -> bool:
        """Some kernel (in a dtype) or workload is planned at two sizes on both a CPU and a
        GPU: a curve of the GPU's speedup over the CPU."""
        sizes: dict[tuple, dict[str, set[int]]] = {}
        for family, name, variant, _, device, size in self.work_cells:
            kind = parse_device(device).kind
            sizes.setdefault((family, name, variant), {}).setdefault(kind, set()).add(size)
        return any(
            len(kinds.get("cpu", set()) & kinds.get("cuda", set())) > 1 for kinds in sizes.values()
        )

    def energy_cells(self, family: str) -> dict[str, int]:
        """Per model (kernel, workload) of `family`: its cells planned on devices whose
        energy counters can be read."""
        if family == "train":
            cells = [(model, device) for model, _, _, _, device in self.train_cells]
        else:
            cells = [(cell[1], cell[4]) for cell in self.work_cells if cell[0] == family]
        found: dict[str, int] = {}
        for name, device in cells:
            if parse_device(device).kind in self.counters.kinds:
                found[name] = found.get(name, 0) + 1
        return found

    def measures_energy(self, devices: frozenset[str]) -> bool:
        """Some of `devices` is of a kind whose energy counters can be read."""
        return any(parse_device(name).kind in self.counters.kinds for name in devices)

    def energy_why_not(self, devices: frozenset[str]) -> str:
        """Why none of `devices` gets its energy read."""
        kinds = sorted({parse_device(name).kind for name in devices})
        return "; ".join(
            f"{'GPU' if kind == 'cuda' else 'CPU'} counters: {self.counters.why_not.get(kind, '')}"
            for kind in kinds
        )

"""Which tables and figures a grid can fill: the default target asks for those only.

Decided from the planned grid before anything runs, so that a CPU-only grid asks
for no GPU-scaling figure and no CPU/GPU crossover: an output with nothing to show
is not made (a study says the same of its outputs in its NEEDS, accelbench.studies).
A planned cell can still fail to run; the outputs that are made mark such cells.
Energy outputs are asked for wherever their family runs: whether a counter can be
read is known only where it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

from accelbench.analysis.gpu_vs_cpu import is_cpu_baseline
from accelbench.grid import Grid
from accelbench.platform.devices import Device, parse_device


@dataclass(frozen=True)
class Planned:
    """What a grid plans, as the outputs need it: devices per family, precisions, the device
    kinds of each kernel, data science workload and model configuration, whether roofs are
    measured."""

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

    @classmethod
    def of(cls, grid: Grid) -> Planned:
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


def _one_node(device: Device) -> bool:
    return device.nodes == 1


def _besides(devices: frozenset[str], baseline: str) -> bool:
    return baseline in devices and len(devices) > 1


# Whether a planned grid (and the speedups' baseline device) fills an output.
Need = Callable[[Planned, str], bool]
# Output name (a table's or figure's file stem) -> whether the planned grid fills it.
NEEDS: dict[str, Need] = {
    "gpu_vs_cpu": lambda plan, baseline: plan.compares_gpu_with_cpu,
    "train_time_per_batch": lambda plan, baseline: bool(plan.train_devices),
    "train_energy": lambda plan, baseline: bool(plan.train_devices),
    "train_speedup": lambda plan, baseline: _besides(plan.train_devices, baseline),
    "train_precision": lambda plan, baseline: len(plan.precisions) > 1,
    "train_scaling": lambda plan, baseline: any(
        plan.scales(kind, lambda device: True) for kind in ("cpu", "cuda")
    ),
    "train_thread_scaling": lambda plan, baseline: plan.scales("cpu", _one_node),
    "train_gpu_scaling": lambda plan, baseline: plan.scales("cuda", _one_node),
    "train_node_scaling": lambda plan, baseline: any(
        parse_device(name).nodes > 1 for name in plan.train_devices
    ),
    "kernel_time": lambda plan, baseline: bool(plan.kernel_devices),
    "kernel_throughput": lambda plan, baseline: bool(plan.kernel_devices),
    "kernel_energy": lambda plan, baseline: bool(plan.kernel_devices),
    "kernel_speedup": lambda plan, baseline: _besides(plan.kernel_devices, baseline),
    "kernel_crossover": lambda plan, baseline: plan.runs_on_cpu_and_gpu,
    "datasci_time": lambda plan, baseline: bool(plan.datasci_devices),
    "datasci_throughput": lambda plan, baseline: bool(plan.datasci_devices),
    "datasci_energy": lambda plan, baseline: bool(plan.datasci_devices),
}


def fills(name: str, plan: Planned, baseline: str, needs: Mapping[str, Need] | None = None) -> bool:
    """Whether the planned grid has what output `name` shows (`baseline`: the speedups'
    device), by the core's NEEDS or a study's (`needs`); a name no output has is an error."""
    return (NEEDS if needs is None else needs)[name](plan, baseline)

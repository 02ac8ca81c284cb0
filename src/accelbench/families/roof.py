"""The roof family: the measured ceilings of one device in one dtype (accelbench.roofs.measure).

Roofs bound kernels, so the grid has one for each device and dtype its kernels run in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.families import kernel
from accelbench.families.base import (
    RESULTS_DIR,
    Config,
    Expanded,
    Experiment,
    Family,
    GridError,
    Wildcards,
    choice,
    device_name,
)

PATTERN = RESULTS_DIR + "/roofs/{device}/{dtype}.json"
# What an ok roof record holds: its ceilings, and a GPU's transfer ceilings besides.
CEILINGS = ("peak_gflops", "memory_bandwidth")
GPU_CEILINGS = ("h2d_bandwidth", "d2h_bandwidth")


@dataclass(frozen=True)
class RoofExperiment(Experiment):
    """The measured ceilings of one device in one dtype: peak GEMM and copy bandwidth."""

    device: str
    dtype: str

    family = "roof"
    pattern = PATTERN


def parse(wildcards: Wildcards, config: Config | None = None) -> RoofExperiment:
    """Wildcards of a roof result path -> experiment; GridError says which part is wrong.

    Roofs bound kernels, so they exist for the devices kernels run on: a CPU or one GPU.
    """
    exp = RoofExperiment(
        device=device_name(wildcards["device"]),
        dtype=choice("dtype", wildcards["dtype"], kernel.DTYPES),
    )
    device = exp.parsed_device
    if device.nodes > 1 or (device.is_gpu and device.gpus != 1):
        asks = f"spans {device.nodes} nodes" if device.nodes > 1 else f"asks for {device.gpus} GPUs"
        raise GridError(
            f"{exp.path} is excluded from the grid: roofs bound kernels, which run on one "
            f"node's CPU or on one GPU; {exp.device} {asks}"
        )
    return exp


def expand(config: Config, planned: tuple[Experiment, ...] = ()) -> Expanded:
    """One roof per device and dtype of the kernel experiments planned before it."""
    roofs = dict.fromkeys(
        RoofExperiment(exp.device, exp.dtype) for exp in planned if exp.family == "kernel"
    )
    return Expanded(tuple(roofs))


def validate(config: Config) -> None:
    """Roofs have no names of their own in the config: the kernels' are checked there."""


def settings(config: Config, wildcards: Wildcards | None = None) -> dict[str, Any]:
    """The settings of every roof experiment: the kernels' timing, and the roof sizes."""
    timing = kernel.settings(config)
    del timing["naive_size_limit"], timing["energy"]
    return {**timing, "roofs": config["kernels"]["roofs"]}


FAMILY = Family(
    name="roof",
    experiment_type=RoofExperiment,
    rule="roof_benchmark",
    resources="kernels",
    parse=parse,
    expand=expand,
    validate=validate,
    settings=settings,
    measure="accelbench.roofs.measure:measure_roof",
    later_runs="accelbench.roofs.measure:later_runs",
    # The kernels' imports: a roof measures with their code.
    preload="accelbench.kernels.measure:preload",
    record_params="accelbench.roofs.measure:roof_sizes",
    unrecorded_settings=("roofs",),
    measures_energy=False,
    figures_of_merit=CEILINGS,
    ceilings=CEILINGS,
    gpu_ceilings=GPU_CEILINGS,
)

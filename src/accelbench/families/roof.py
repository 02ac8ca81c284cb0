"""The roof family: the measured ceilings of one device in one dtype (accelbench.roofs.measure).

Roofs bound kernels, so the grid has one for each device and dtype its kernels run in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
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
from accelbench.measuring.settings import TimedSettings

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


# The dtype whose roof searches every candidate of the byte ceilings (SEARCH_SOURCE).
SEARCH_DTYPE = "float32"


def search_source(config: Config, device: str, dtype: str) -> str | None:
    """The record whose winners a roof times for its byte ceilings (memory bandwidth, the
    host links) instead of searching every candidate again: the same device's float32 roof,
    where the grid plans one. Bytes move at the rate of the memory and the link whatever
    their type, so the search need not be repeated per dtype (on an H200 a roof's search
    took 55 s of its 70)."""
    if dtype == SEARCH_DTYPE:
        return None
    planned = any(
        exp.device == device and exp.dtype == SEARCH_DTYPE for exp in kernel.expand(config).kept
    )
    return RoofExperiment(device, SEARCH_DTYPE).path if planned else None


@dataclass(frozen=True)
class RoofSettings(TimedSettings):
    """The settings of a roof: the kernels' timing, the roof sizes per device kind
    (`gemm_size`, `copy_mib`), and the record whose byte ceilings' winners it times instead
    of searching (search_source). `roof_search`, each ceiling's winner of the first run,
    is what later_runs sets for the runs after it."""

    roofs: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    search_from: str | None = None
    roof_search: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    PARAMS = (
        "seed",
        "min_run_time",
        "samples",
        "warmup_s",
        "runs",
        "half_width",
        "budget_s",
        "max_call_s",
        "contention",
        "roofs",
        "search_from",
    )


def settings(config: Config, wildcards: Wildcards) -> RoofSettings:
    """The settings of one roof (`wildcards`): the kernels' timing, the roof sizes and the
    record its byte ceilings' search comes from."""
    kernels = kernel.settings(config)
    # A roof measures no energy: its windows take the defaults, which it never opens.
    timing = {f.name: getattr(kernels, f.name) for f in fields(TimedSettings) if f.name != "energy"}
    return RoofSettings(
        **timing,
        roofs=config["kernels"]["roofs"],
        search_from=search_source(config, wildcards["device"], wildcards["dtype"]),
    )


FAMILY = Family(
    name="roof",
    experiment_type=RoofExperiment,
    rule="roof_benchmark",
    resources="kernels",
    parse=parse,
    expand=expand,
    validate=validate,
    settings=settings,
    settings_type=RoofSettings,
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

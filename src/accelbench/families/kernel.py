"""The kernel family: one kernel on one backend, device, dtype and size (accelbench.kernels)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelbench import backends, dtypes, registry
from accelbench.families.base import (
    RESULTS_DIR,
    Config,
    Expanded,
    Experiment,
    Family,
    Wildcards,
    check_devices,
    choice,
    device_name,
    named_choice,
    one_device_exclusion,
    per_unit_axes,
    positive_int,
    raise_if_excluded,
)
from accelbench.measuring.settings import TimedSettings

PATTERN = RESULTS_DIR + "/kernels/{kernel}/{device}/{backend}/{dtype}/n{size}.json"
DTYPES = dtypes.DTYPES


@dataclass(frozen=True)
class KernelExperiment(Experiment):
    kernel: str
    device: str
    backend: str
    dtype: str
    size: int

    family = "kernel"
    pattern = PATTERN


def kernel_specs() -> dict[str, Any]:
    """The registered kernels (imported on first use: they import Numba)."""
    from accelbench.kernels import kernels

    return kernels()


def exclusion(exp: KernelExperiment) -> str | None:
    """Why this kernel experiment makes no sense, or None if it does."""
    kinds = backends.named(exp.backend).device_kinds
    if reason := one_device_exclusion(exp, exp.backend, kinds, "kernels"):
        return reason
    spec = kernel_specs()[exp.kernel]
    if exp.parsed_device.kind not in spec.device_kinds:
        why = f": {spec.device_kinds_reason}" if spec.device_kinds_reason else ""
        return (
            f"kernel {exp.kernel!r} runs on {'/'.join(spec.device_kinds)} devices only, "
            f"not on {exp.device}{why}"
        )
    if exp.backend not in spec.implementations:
        return f"kernel {exp.kernel!r} has no {exp.backend!r} implementation"
    if exp.dtype not in spec.dtypes(exp.backend):
        return (
            f"kernel {exp.kernel!r} on backend {exp.backend!r} computes in "
            f"{', '.join(spec.dtypes(exp.backend))} only, not in {exp.dtype}"
        )
    return None


def parse(wildcards: Wildcards, config: Config | None = None) -> KernelExperiment:
    """Wildcards of a kernel result path -> experiment; GridError says which part is wrong."""
    exp = KernelExperiment(
        kernel=choice("kernel", wildcards["kernel"], kernel_specs()),
        device=device_name(wildcards["device"]),
        backend=choice("backend", wildcards["backend"], backends.catalogue()),
        dtype=choice("dtype", wildcards["dtype"], DTYPES),
        size=positive_int("size", wildcards["size"]),
    )
    return raise_if_excluded(exp, exclusion(exp))


def expand(config: Config, planned: tuple[Experiment, ...] = ()) -> Expanded:
    """Each kernel's sizes over the devices, backends and dtypes (its overrides applied)."""
    section = config["kernels"]
    candidates = [
        KernelExperiment(kernel, device, backend, dtype, int(size))
        for kernel, sizes in section["sizes"].items()
        for device, backend, dtype, size in itertools.product(
            *(per_unit_axes(section, kernel)[axis] for axis in ("devices", "backends", "dtypes")),
            sizes,
        )
    ]
    return Expanded.judged(candidates, exclusion)


def validate(config: Config) -> None:
    """Kernel and backend names and devices of the `kernels` section, by their config key."""
    section = config["kernels"]
    for kernel in section["sizes"]:
        named_choice("kernels.sizes", kernel, "kernel", kernel_specs())
    for kernel, axes in section.get("overrides", {}).items():
        named_choice("kernels.overrides", kernel, "kernel", kernel_specs())
        for backend in axes.get("backends", []):
            named_choice(
                f"kernels.overrides.{kernel}.backends", backend, "backend", backends.catalogue()
            )
        check_devices(f"kernels.overrides.{kernel}.devices", axes.get("devices", []))
    for kernel in section.get("naive_size_limit", {}):
        named_choice("kernels.naive_size_limit", kernel, "kernel", kernel_specs())
    for backend in section["backends"]:
        named_choice("kernels.backends", backend, "backend", backends.catalogue())
    check_devices("kernels.devices", section["devices"])


@dataclass(frozen=True)
class KernelSettings(TimedSettings):
    """The settings of a kernel experiment: the timing, the size above which a naive
    backend's kernel is not run (per kernel; else its spec's), and the digest of the
    kernel's source where it is the user's (registry.source_digest: an edit reruns it)."""

    naive_size_limit: Mapping[str, int] = field(default_factory=dict)
    source_digest: str | None = None

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
        "energy",
        "naive_size_limit",
        "source_digest",
    )
    OPTIONAL = ("source_digest",)


def settings(config: Config, wildcards: Wildcards | None = None) -> KernelSettings:
    """The settings of every kernel experiment (a rule's params: a change reruns them), and,
    given a kernel's wildcards, its source's where it is the user's."""
    section = config["kernels"]
    source = {} if wildcards is None else registry.source_digest("kernels", wildcards["kernel"])
    return KernelSettings.from_params(
        {
            "seed": config["seed"],
            "min_run_time": section["min_run_time"],
            "samples": section["samples"],
            "warmup_s": section["warmup_s"],
            "runs": section["runs"],
            "half_width": section["half_width"],
            "budget_s": section["budget_s"],
            "max_call_s": section["max_call_s"],
            "contention": config.get("contention"),
            "energy": config.get("energy"),
            "naive_size_limit": section.get("naive_size_limit", {}),
            **source,
        }
    )


FAMILY = Family(
    name="kernel",
    experiment_type=KernelExperiment,
    rule="kernel_benchmark",
    resources="kernels",
    parse=parse,
    expand=expand,
    validate=validate,
    settings=settings,
    settings_type=KernelSettings,
    measure="accelbench.kernels.measure:measure_kernel",
    later_runs="accelbench.kernels.measure:later_runs",
    prepare="accelbench.kernels.measure:prepare_kernel",
    preload="accelbench.kernels.measure:preload",
    record_params="accelbench.kernels.measure:record_params",
    unrecorded_settings=("naive_size_limit",),
    units_key="kernels.sizes",
    units_called="kernels",
    primary="kernel",
    catalogue="kernels",
    secondary=("backend", "dtype", "size"),
    time_metric="time",
    compared_over=("backend", "device"),
)

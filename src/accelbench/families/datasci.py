"""The data science family: one workload on one library, device and size n (accelbench.datasci)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from accelbench import registry
from accelbench.backends.libraries import DATASCI_BACKENDS
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

PATTERN = RESULTS_DIR + "/datasci/{workload}/{device}/{backend}/n{size}.json"


@dataclass(frozen=True)
class DatasciExperiment(Experiment):
    """One data science workload (accelbench.datasci) on one library, device and size n."""

    workload: str
    device: str
    backend: str
    size: int

    family = "datasci"
    pattern = PATTERN


def workload_specs() -> dict[str, Any]:
    """The registered workloads (imported on first use: they import the kernels, Numba)."""
    from accelbench.datasci import workloads

    return workloads()


def exclusion(exp: DatasciExperiment) -> str | None:
    """Why this data science experiment makes no sense, or None if it does."""
    spec = workload_specs()[exp.workload]
    if exp.backend not in spec.implementations:
        return (
            f"workload {exp.workload!r} has no {exp.backend!r} implementation "
            f"(it has {', '.join(spec.implementations)})"
        )
    kinds = DATASCI_BACKENDS[exp.backend].device_kinds
    return one_device_exclusion(exp, exp.backend, kinds, "data science workloads")


def parse(wildcards: Wildcards, config: Config | None = None) -> DatasciExperiment:
    """Wildcards of a data science result path -> experiment; GridError says which part is wrong."""
    exp = DatasciExperiment(
        workload=choice("workload", wildcards["workload"], workload_specs()),
        device=device_name(wildcards["device"]),
        backend=choice("backend", wildcards["backend"], DATASCI_BACKENDS),
        size=positive_int("size", wildcards["size"]),
    )
    return raise_if_excluded(exp, exclusion(exp))


def expand(config: Config, planned: tuple[Experiment, ...] = ()) -> Expanded:
    """Each workload on the configured backends it has.

    A backend the workload has no code for is passed over silently (one list of
    backends serves dataframes, ML and graphs); any other exclusion is kept with
    its reason, like a GPU library on a CPU device.
    """
    section = config.get("datasci") or {}
    candidates = []
    for workload, sizes in section.get("sizes", {}).items():
        axes = per_unit_axes(section, workload)
        backends = [b for b in axes["backends"] if b in workload_specs()[workload].implementations]
        for device, backend, size in itertools.product(axes["devices"], backends, sizes):
            candidates.append(DatasciExperiment(workload, device, backend, int(size)))
    return Expanded.judged(candidates, exclusion)


def validate(config: Config) -> None:
    """Workload names, backends and devices of the `datasci` section, by their config key."""
    section = config.get("datasci") or {}
    sections = [("datasci", section)]
    for workload in section.get("sizes", {}):
        named_choice("datasci.sizes", workload, "workload", workload_specs())
    for workload, axes in section.get("overrides", {}).items():
        named_choice("datasci.overrides", workload, "workload", workload_specs())
        sections.append((f"datasci.overrides.{workload}", axes))
    for key, axes in sections:
        for backend in axes.get("backends", []):
            named_choice(f"{key}.backends", backend, "backend", DATASCI_BACKENDS)
        check_devices(f"{key}.devices", axes.get("devices", []))


@dataclass(frozen=True)
class DatasciSettings(TimedSettings):
    """The settings of a data science experiment: the timing, and the digest of the
    workload's source where it is the user's (registry.source_digest: an edit reruns it).
    Its energy windows take the defaults: the config's `energy` is not among its params."""

    source_digest: str | None = None

    PARAMS = (
        "seed",
        "min_run_time",
        "samples",
        "warmup_s",
        "runs",
        "half_width",
        "budget_s",
        "contention",
        "source_digest",
    )
    OPTIONAL = ("source_digest",)


def settings(config: Config, wildcards: Wildcards | None = None) -> DatasciSettings:
    """The settings of every data science experiment (a rule's params: a change reruns them),
    and, given a workload's wildcards, its source's where it is the user's."""
    section = config.get("datasci") or {}
    source = {} if wildcards is None else registry.source_digest("datasci", wildcards["workload"])
    return DatasciSettings.from_params(
        {
            "seed": config["seed"],
            "min_run_time": section.get("min_run_time", 0.3),
            "samples": section.get("samples", 10),
            "warmup_s": section.get("warmup_s", 1.0),
            "runs": section.get("runs", 3),
            "half_width": section.get("half_width", 0.05),
            "budget_s": section.get("budget_s", 10.0),
            "contention": config.get("contention"),
            **source,
        }
    )


FAMILY = Family(
    name="datasci",
    experiment_type=DatasciExperiment,
    rule="datasci_benchmark",
    resources="datasci",
    parse=parse,
    expand=expand,
    validate=validate,
    settings=settings,
    settings_type=DatasciSettings,
    measure="accelbench.datasci.measure:measure_datasci",
    preload="accelbench.datasci.measure:preload",
    units_key="datasci.sizes",
    units_called="workloads",
    primary="workload",
    catalogue="datasci",
    # Its library follows from the device kind (pandas on a CPU, cuDF on a GPU), so one
    # row spans CPU and GPU columns.
    secondary=("size",),
    time_metric="time",
    compared_over=("backend", "device"),
)

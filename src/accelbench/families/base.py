"""What an experiment family declares, and the checks the declarations share.

A family (kernels, training, roofs, data science) is one kind of experiment: the
parameters of one cell, the result path they name, which cells make sense, how
its settings come from the config, the rule that runs it and the function that
measures it. Everything else — the grid, the target checks, the tidy table, the
record schema, the measuring dispatch, the run's bookkeeping — iterates over the
registered families (accelbench.families.FAMILIES).

A declaration imports no torch or Numba: the Snakefile reads every family each
time it is parsed, and so does each job. The measuring code is named by its
module and function and imported only by the process that measures.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from accelbench.measuring.settings import Params, RunSettings
from accelbench.platform.devices import Device, DeviceError, parse_device

RESULTS_DIR = "results"
# One path segment per wildcard; the values are checked by each family's parse, so
# that a bad target gets a message naming the wrong part, not "no rule to produce".
WILDCARD_CONSTRAINT = r"[^/]+"
POSITIVE_INT = re.compile(r"^[1-9][0-9]*$")

Config = Mapping[str, Any]
Wildcards = Mapping[str, Any]


class GridError(ValueError):
    """An experiment (from config or from a target path) that is invalid or excluded."""


class Experiment:
    """One cell of a family: a frozen dataclass of its grid parameters.

    The parameters name the result path (the family's `pattern`, one wildcard per
    field) and parse back from it; the record's id is that path below results/.
    """

    family: ClassVar[str]
    pattern: ClassVar[str]

    @property
    def path(self) -> str:
        return self.pattern.format(**asdict(self))  # type: ignore[call-overload]

    @property
    def id(self) -> str:
        return self.path.removeprefix(RESULTS_DIR + "/").removesuffix(".json")

    @functools.cached_property
    def parsed_device(self) -> Device:
        """The device the experiment runs on, parsed once and carried with it."""
        return parse_device(self.device)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Expanded:
    """The experiments a config asks for in one family: kept, and excluded with the reason."""

    kept: tuple[Experiment, ...]
    excluded: tuple[tuple[Experiment, str], ...] = ()

    @classmethod
    def judged(
        cls, candidates: Iterable[Experiment], exclusion: Callable[[Any], str | None]
    ) -> Expanded:
        """Candidates split by `exclusion` (the reason a cell makes no sense, or None)."""
        kept, excluded = [], []
        for exp in candidates:
            reason = exclusion(exp)
            if reason:
                excluded.append((exp, reason))
            else:
                kept.append(exp)
        return cls(tuple(kept), tuple(excluded))


@dataclass(frozen=True)
class Family:
    """Everything about one experiment family that the workflow needs to know.

    `parse` turns a result path's wildcards (and the config) into the experiment,
    raising GridError that names the wrong part or the reason it is excluded;
    `expand` gives the experiments the config asks for (told what the families
    registered before it kept: a roof follows its kernels without planning them
    again); `validate` checks the names in its config section the schema cannot
    know; `settings` are its typed settings (`settings_type`), whose `as_params` are the
    rule's params (a change re-measures the family's records), read back once where a
    job starts (`settings_type.from_params`) and handed down the job chain. `measure`,
    `later_runs`, `prepare`, `preload` and `record_params` are "module:function" names,
    imported where a run measures: the job chain (accelbench.job) asks the declaration,
    and imports no family's code itself.

    Building a declaration registers it under its name (family_of): the module that
    declares an experiment type declares its family, so a process that holds an
    experiment finds its family without importing every declaration.
    """

    name: str  # the record's `experiment`
    experiment_type: type[Experiment]
    rule: str  # the Snakemake rule that measures one experiment
    resources: str  # the cluster.resources section that sizes its jobs
    parse: Callable[[Wildcards, Config | None], Experiment]
    expand: Callable[[Config, tuple[Experiment, ...]], Expanded]
    validate: Callable[[Config], None]
    settings: Callable[[Config, Wildcards], RunSettings]
    settings_type: type[RunSettings]
    measure: str
    # The settings of runs 2..R: (exp, settings, run 1's outcome) (roofs time run 1's winners).
    later_runs: str | None = None
    # What a job computes once, before it forks its runs, which inherit it: (exp, settings).
    prepare: str | None = None
    # Whether its runs measure energy after their timing (then the job measures the idle
    # baseline once, before the first run).
    measures_energy: bool = True
    # The parameter that names its rows in tables and figures, and the ones that join
    # the label where they vary; a family without rows of its own (roofs) has none.
    primary: str | None = None
    # The catalogue (accelbench.registry) of the units its `primary` parameter names: a
    # record names where its unit came from and the digest of its source.
    catalogue: str | None = None
    secondary: tuple[str, ...] = ()
    # The metric an "ok" record cannot lack: its tables and comparisons are built on it.
    time_metric: str | None = None
    # The metrics whose rerun intervals decide when a measurement is precise enough
    # (accelbench.measuring.precision): what its tables show. By default its time.
    figures_of_merit: tuple[str, ...] = ()
    # The metrics an "ok" record of a family without a time (roofs) holds, each in its
    # metrics or named with its reason in its check's `unmeasured`; and those an ok
    # record of a GPU holds besides.
    ceilings: tuple[str, ...] = ()
    gpu_ceilings: tuple[str, ...] = ()
    # What a job imports before it forks its runs, so that each run starts without the
    # imports' cost (the fork server imports every family's once): no arguments; it must
    # ask the CUDA driver nothing.
    preload: str | None = None
    # The record's parameters that come from the settings beyond the settings themselves:
    # (exp, settings) -> dict (a naive kernel's size limit, a roof's sizes).
    record_params: str | None = None
    # Settings the record's parameters leave out (its record_params says what counts).
    unrecorded_settings: tuple[str, ...] = ()
    # Whether its measuring function repeats its runs itself (training, inside the
    # processes it launched: a launched rank cannot fork alone, its peers would wait
    # for it). Forked, each run's process then measures one run; launched, or where
    # runs may not fork, the one call measures them all.
    repeats_runs_itself: bool = False
    # Whether its experiments on one device share Slurm submissions (batches of
    # experiments run one after another); else each is a job of its own.
    batched: bool = True
    # The config key whose names are its units (its grid's rows: "kernels.sizes"), and
    # what they are called in a warning ("kernels"); None for a family without units.
    units_key: str | None = None
    units_called: str | None = None
    # The parameters a row of its comparison tables sets side by side (a kernel's backends
    # and its CPU's thread counts): experiments that differ in them alone, on one kind of
    # device, are a comparison group, measured by one job in interleaved rounds
    # (accelbench.grid.comparison_groups); empty: each is measured alone (roofs).
    compared_over: tuple[str, ...] = ()
    # Which of its experiments may join a group: one process on one node (a distributed
    # training run launches its own processes, as Slurm tasks on a cluster).
    groupable: Callable[[Experiment], bool] = field(default=lambda exp: True)

    def __post_init__(self) -> None:
        _DECLARED[self.name] = self

    @property
    def precise_metrics(self) -> tuple[str, ...]:
        return self.figures_of_merit or ((self.time_metric,) if self.time_metric else ())

    @property
    def pattern(self) -> str:
        return self.experiment_type.pattern

    def measuring_function(self) -> Callable[..., Any]:
        return _imported(self.measure)

    def later_runs_function(self) -> Callable[..., Any] | None:
        return _imported(self.later_runs) if self.later_runs else None

    def prepare_function(self) -> Callable[..., Any] | None:
        return _imported(self.prepare) if self.prepare else None

    def preload_function(self) -> Callable[[], None] | None:
        return _imported(self.preload) if self.preload else None

    def params_of(self, exp: Experiment, settings: RunSettings) -> Params:
        """What `record_params` adds to the record's parameters (nothing without one)."""
        return _imported(self.record_params)(exp, settings) if self.record_params else {}


# Every declaration built, by its name (the last built of a name counts).
_DECLARED: dict[str, Family] = {}


def family_of(exp: Experiment) -> Family:
    """The declaration of `exp`'s family: its type's module built it on import."""
    return _DECLARED[exp.family]


def experiment_type_name(exp: Experiment) -> str:
    """Where `exp`'s type is declared, "module:name": what a process told of an experiment
    imports to build it again (experiment_from)."""
    kind = type(exp)
    return f"{kind.__module__}:{kind.__qualname__}"


def experiment_from(type_name: str, parameters: Mapping[str, Any]) -> Experiment:
    """The experiment of the type named "module:name" with these parameters; importing the
    type's module registers its family."""
    return _imported(type_name)(**parameters)


def _imported(name: str) -> Callable[..., Any]:
    module, function = name.split(":")
    return getattr(importlib.import_module(module), function)


def choice(part: str, value: str, allowed: Iterable[str]) -> str:
    """`value` if it is one of `allowed`, else GridError naming the part and the choices."""
    allowed = list(allowed)
    if value not in allowed:
        raise GridError(f"{part} {value!r} is not known; allowed: {', '.join(allowed)}")
    return value


def positive_int(part: str, value: str | int) -> int:
    if not POSITIVE_INT.match(str(value)):
        raise GridError(f"{part} {value!r} must be a positive integer")
    return int(value)


def device_name(value: str) -> str:
    """The device's one spelling; GridError says what is wrong with it."""
    try:
        return parse_device(value).name
    except DeviceError as err:
        raise GridError(str(err)) from None


def raise_if_excluded(exp: Experiment, reason: str | None) -> Experiment:
    if reason:
        raise GridError(f"{exp.path} is excluded from the grid: {reason}")
    return exp


def one_device_exclusion(
    exp: Experiment, backend: str, device_kinds: tuple[str, ...], what: str
) -> str | None:
    """Why an experiment that runs on one CPU or one GPU (`what`: "kernels") cannot run on
    its device with `backend`, or None if it can."""
    device = exp.parsed_device
    if device.kind not in device_kinds:
        return f"backend {backend!r} runs on {'/'.join(device_kinds)} devices, not on {exp.device}"
    if device.nodes > 1:
        return f"{what} run on one node; {exp.device} spans {device.nodes}"
    if device.is_gpu and device.gpus != 1:
        return f"{what} run on one GPU; {exp.device} asks for {device.gpus}"
    return None


def named_choice(key: str, value: str, what: str, allowed: Iterable[str]) -> None:
    """A name in the config that must be one of `allowed`; GridError names its key."""
    allowed = list(allowed)
    if value not in allowed:
        raise GridError(
            f"config key {key}: unknown {what} {value!r}; allowed: {', '.join(allowed)}"
        )


def check_devices(key: str, devices: Iterable[str]) -> None:
    """Device strings in the config; GridError names their key."""
    for device in devices:
        try:
            parse_device(device)
        except DeviceError as err:
            raise GridError(f"config key {key}: {err}") from None


def per_unit_axes(section: Config, unit: str) -> dict[str, Any]:
    """A section's axes (devices, backends, dtypes) with one unit's overrides applied."""
    return {**section, **section.get("overrides", {}).get(unit, {})}


@functools.cache
def int_fields(kind: type[Experiment]) -> tuple[str, ...]:
    """The parameters of an experiment type that are whole numbers (sizes, batches)."""
    return tuple(field.name for field in fields(kind) if field.type == "int")


def from_parts(
    kind: type[Experiment], parts: Mapping[str, str], number: Callable[[str, str], int]
) -> Experiment:
    """An experiment of `kind` from the parts of its result path; `number` reads the
    whole-number ones (sizes, batches) by their name and text."""
    numbers = int_fields(kind)
    return kind(
        **{name: number(name, value) if name in numbers else value for name, value in parts.items()}
    )

"""Experiment ids <-> wildcards <-> result paths, grid expansion and validity rules.

The result path is the interface: it is fully determined by an experiment's
parameters and parses back into them. Combinations that make no sense are
excluded from the grid with a stated reason, and naming such a path as a
target fails before any job starts with that same reason.
"""

from __future__ import annotations

import difflib
import itertools
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from accelbench.devices import DeviceError, parse_device
from accelbench.train.strategies import STRATEGY_NAMES

RESULTS_DIR = "results"
KERNEL_PATTERN = RESULTS_DIR + "/kernels/{kernel}/{device}/{backend}/{dtype}/n{size}.json"
TRAIN_PATTERN = RESULTS_DIR + "/train/{model}/{device}/{precision}/{strategy}/bs{batch}.json"
ROOF_PATTERN = RESULTS_DIR + "/roofs/{device}/{dtype}.json"
DATASCI_PATTERN = RESULTS_DIR + "/datasci/{workload}/{device}/{backend}/n{size}.json"
# One path segment per wildcard; the values are checked by parse_* so that a bad
# target gets a message naming the wrong part, not "no rule to produce".
WILDCARD_CONSTRAINT = r"[^/]+"

KERNEL_DTYPES = ("float64", "float32", "float16", "bfloat16")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp64")
STRATEGIES = STRATEGY_NAMES
POSITIVE_INT = re.compile(r"^[1-9][0-9]*$")


class GridError(ValueError):
    """An experiment (from config or from a target path) that is invalid or excluded."""


@dataclass(frozen=True)
class KernelExperiment:
    kernel: str
    device: str
    backend: str
    dtype: str
    size: int

    family = "kernel"
    pattern = KERNEL_PATTERN

    @property
    def path(self) -> str:
        return KERNEL_PATTERN.format(**asdict(self))

    @property
    def id(self) -> str:
        return self.path.removeprefix(RESULTS_DIR + "/").removesuffix(".json")


@dataclass(frozen=True)
class TrainExperiment:
    model: str
    device: str
    precision: str
    strategy: str
    batch: int

    family = "train"
    pattern = TRAIN_PATTERN

    @property
    def path(self) -> str:
        return TRAIN_PATTERN.format(**asdict(self))

    @property
    def id(self) -> str:
        return self.path.removeprefix(RESULTS_DIR + "/").removesuffix(".json")


@dataclass(frozen=True)
class RoofExperiment:
    """The measured ceilings of one device in one dtype: peak GEMM and copy bandwidth."""

    device: str
    dtype: str

    family = "roof"
    pattern = ROOF_PATTERN

    @property
    def path(self) -> str:
        return ROOF_PATTERN.format(**asdict(self))

    @property
    def id(self) -> str:
        return self.path.removeprefix(RESULTS_DIR + "/").removesuffix(".json")


@dataclass(frozen=True)
class DatasciExperiment:
    """One data science workload (accelbench.datasci) on one library, device and size n."""

    workload: str
    device: str
    backend: str
    size: int

    family = "datasci"
    pattern = DATASCI_PATTERN

    @property
    def path(self) -> str:
        return DATASCI_PATTERN.format(**asdict(self))

    @property
    def id(self) -> str:
        return self.path.removeprefix(RESULTS_DIR + "/").removesuffix(".json")


Experiment = KernelExperiment | TrainExperiment | RoofExperiment | DatasciExperiment
# Every experiment type; each names its family and its result path pattern.
EXPERIMENT_TYPES: tuple[type[Experiment], ...] = (
    KernelExperiment,
    TrainExperiment,
    RoofExperiment,
    DatasciExperiment,
)


def kernel_names() -> list[str]:
    from accelbench.kernels import kernels

    return list(kernels())


def workload_names() -> list[str]:
    from accelbench.datasci import workloads

    return list(workloads())


def model_names() -> list[str]:
    from accelbench.train.models import models

    return list(models())


def _choice(part: str, value: str, allowed: list[str] | tuple[str, ...]) -> str:
    if value not in allowed:
        raise GridError(f"{part} {value!r} is not known; allowed: {', '.join(allowed)}")
    return value


def _positive_int(part: str, value: str | int) -> int:
    if not POSITIVE_INT.match(str(value)):
        raise GridError(f"{part} {value!r} must be a positive integer")
    return int(value)


def _device(value: str) -> str:
    try:
        return parse_device(value).name
    except DeviceError as err:
        raise GridError(str(err)) from None


def kernel_exclusion(exp: KernelExperiment) -> str | None:
    """Why this kernel experiment makes no sense, or None if it does."""
    from accelbench.backends import BACKENDS
    from accelbench.kernels import kernels

    device = parse_device(exp.device)
    backend = BACKENDS[exp.backend]
    if device.kind not in backend.device_kinds:
        return (
            f"backend {exp.backend!r} runs on {'/'.join(backend.device_kinds)} devices, "
            f"not on {exp.device}"
        )
    if device.nodes > 1:
        return f"kernels run on one node; {exp.device} spans {device.nodes}"
    if device.is_gpu and device.gpus != 1:
        return f"kernels run on one GPU; {exp.device} asks for {device.gpus}"
    spec = kernels()[exp.kernel]
    if device.kind not in spec.device_kinds:
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


def datasci_exclusion(exp: DatasciExperiment) -> str | None:
    """Why this data science experiment makes no sense, or None if it does."""
    from accelbench.backends import DATASCI_BACKENDS
    from accelbench.datasci import workloads

    device = parse_device(exp.device)
    spec = workloads()[exp.workload]
    if exp.backend not in spec.implementations:
        return (
            f"workload {exp.workload!r} has no {exp.backend!r} implementation "
            f"(it has {', '.join(spec.implementations)})"
        )
    backend = DATASCI_BACKENDS[exp.backend]
    if device.kind not in backend.device_kinds:
        return (
            f"backend {exp.backend!r} runs on {'/'.join(backend.device_kinds)} devices, "
            f"not on {exp.device}"
        )
    if device.nodes > 1:
        return f"data science workloads run on one node; {exp.device} spans {device.nodes}"
    if device.is_gpu and device.gpus != 1:
        return f"data science workloads run on one GPU; {exp.device} asks for {device.gpus}"
    return None


def train_exclusion(
    exp: TrainExperiment, train_config: Mapping[str, Any] | None = None
) -> str | None:
    """Why this training experiment makes no sense, or None if it does.

    With the config's `train` section it also knows the input size and the
    micro-batches, so a model whose layers cannot take the configured image, or a
    BatchNorm model left with one sample per process, is excluded before any job.
    """
    from accelbench.train.models import batch_norm_values, models, resolve_options
    from accelbench.train.strategies import exclusion, process_count

    device = parse_device(exp.device)
    if exp.precision == "tf32" and not device.is_gpu:
        return "tf32 is a CUDA tensor-core mode; it does not exist on the CPU"
    spec = models()[exp.model]
    reason = exclusion(exp.strategy, device, exp.batch, spec.splittable)
    if reason or train_config is None:
        return reason
    options = resolve_options(
        spec, train_config.get("model_options", {}).get(exp.model), train_config.get("image_size")
    )
    if spec.min_image_size and options.get("image_size", spec.min_image_size) < spec.min_image_size:
        return (
            f"{exp.model} needs image_size >= {spec.min_image_size} (its poolings); "
            f"the config gives {options['image_size']}"
        )
    parts, what = _batch_parts(exp, device, train_config, process_count)
    samples = exp.batch // parts
    if samples < 2:  # only then can a BatchNorm see a single value: ask (one forward pass)
        values = batch_norm_values(spec, options, samples)
        if values is not None and values < 2:
            return (
                f"{exp.model}'s BatchNorm would normalise over {values} value per channel "
                f"({samples} sample per {what} at its smallest feature map, batch {exp.batch}"
                f"{f' split {parts} ways' if parts > 1 else ''}); training needs at least 2"
            )
    return None


def _batch_parts(exp: TrainExperiment, device, train_config, process_count) -> tuple[int, str]:
    """Into how many pieces a strategy cuts the mini-batch, and what one piece is."""
    if exp.strategy in ("ddp", "fsdp"):
        return process_count(exp.strategy, device), "process"
    if exp.strategy == "dp":
        return device.count, "GPU replica"
    if exp.strategy == "pipeline":
        return train_config.get("pipeline_microbatches", 4), "micro-batch"
    return 1, "mini-batch"


def parse_kernel(wildcards: dict[str, Any]) -> KernelExperiment:
    """Wildcards of a kernel result path -> experiment; GridError says which part is wrong."""
    from accelbench.backends import BACKENDS

    exp = KernelExperiment(
        kernel=_choice("kernel", wildcards["kernel"], kernel_names()),
        device=_device(wildcards["device"]),
        backend=_choice("backend", wildcards["backend"], list(BACKENDS)),
        dtype=_choice("dtype", wildcards["dtype"], KERNEL_DTYPES),
        size=_positive_int("size", wildcards["size"]),
    )
    _raise_if_excluded(exp, kernel_exclusion(exp))
    return exp


def parse_datasci(wildcards: dict[str, Any]) -> DatasciExperiment:
    """Wildcards of a data science result path -> experiment; GridError says which part is wrong."""
    from accelbench.backends import DATASCI_BACKENDS

    exp = DatasciExperiment(
        workload=_choice("workload", wildcards["workload"], workload_names()),
        device=_device(wildcards["device"]),
        backend=_choice("backend", wildcards["backend"], list(DATASCI_BACKENDS)),
        size=_positive_int("size", wildcards["size"]),
    )
    _raise_if_excluded(exp, datasci_exclusion(exp))
    return exp


def parse_train(
    wildcards: dict[str, Any], train_config: Mapping[str, Any] | None = None
) -> TrainExperiment:
    """Wildcards of a training result path -> experiment; GridError says which part is wrong."""
    exp = TrainExperiment(
        model=_choice("model", wildcards["model"], model_names()),
        device=_device(wildcards["device"]),
        precision=_choice("precision", wildcards["precision"], PRECISIONS),
        strategy=_choice("strategy", wildcards["strategy"], STRATEGIES),
        batch=_positive_int("batch size", wildcards["batch"]),
    )
    _raise_if_excluded(exp, train_exclusion(exp, train_config))
    return exp


def parse_roof(wildcards: dict[str, Any]) -> RoofExperiment:
    """Wildcards of a roof result path -> experiment; GridError says which part is wrong.

    Roofs bound kernels, so they exist for the devices kernels run on: a CPU or one GPU.
    """
    exp = RoofExperiment(
        device=_device(wildcards["device"]),
        dtype=_choice("dtype", wildcards["dtype"], KERNEL_DTYPES),
    )
    device = parse_device(exp.device)
    if device.nodes > 1 or (device.is_gpu and device.gpus != 1):
        asks = f"spans {device.nodes} nodes" if device.nodes > 1 else f"asks for {device.gpus} GPUs"
        raise GridError(
            f"{exp.path} is excluded from the grid: roofs bound kernels, which run on one "
            f"node's CPU or on one GPU; {exp.device} {asks}"
        )
    return exp


def retry_flag(path: str | os.PathLike[str]) -> Path:
    """The hidden file beside a record that failed by a passing fault, a second newer than the
    record: the workflow asks for it as the record's input where it exists
    (target_check), so Snakemake measures the experiment again. It stays once the cell
    is measured (older than the new record then): were it removed, Snakemake would see the
    experiment's inputs change and measure it yet again."""
    path = Path(path)
    return path.with_name(f".{path.name}.retry")


def target_check(family: str, train_config: Mapping[str, Any] | None = None):
    """A rule's input function that parses its target path and asks for no input but the
    record's retry flag, where a record there once failed by a passing fault.

    Snakemake evaluates it while planning, so a wrong part of a path named as a
    target stops the run before any job starts, with GridError naming the part;
    and a transient record, older than its flag (retry_flag), is measured again.
    """
    parse = {
        "kernel": parse_kernel,
        "roof": parse_roof,
        "datasci": parse_datasci,
        "train": lambda wildcards: parse_train(wildcards, train_config),
    }[family]

    def check(wildcards) -> list[str]:
        exp = parse(dict(wildcards.items()))
        flag = retry_flag(exp.path)
        return [str(flag)] if flag.exists() else []

    return check


def planned_experiment(wildcards: Mapping[str, str]) -> Experiment:
    """The experiment a job's output path names, from wildcards its rule's input function
    (target_check) already parsed in the Snakemake that planned the job.

    The fields are only converted, not checked against the kernel, workload and model
    catalogues again: importing them (Numba among them) would cost every job's script
    half a second or more.
    """
    kind = next(
        (kind for key, kind in _NAMING_WILDCARD.items() if key in wildcards), RoofExperiment
    )
    return kind(
        **{
            field.name: int(wildcards[field.name]) if field.type == "int" else wildcards[field.name]
            for field in fields(kind)
        }
    )


# The wildcard that tells a family's output paths apart (roofs have none of these).
_NAMING_WILDCARD = {
    "kernel": KernelExperiment,
    "workload": DatasciExperiment,
    "model": TrainExperiment,
}


def parse_train_path(path: str) -> TrainExperiment:
    """A training result path -> its experiment (GridError names a wrong part)."""
    pattern = re.escape(TRAIN_PATTERN).replace(r"\{", "{").replace(r"\}", "}")
    regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", pattern)
    match = re.fullmatch(regex, str(path).removeprefix("./"))
    if not match:
        raise GridError(f"{path} is not a training result path ({TRAIN_PATTERN})")
    return parse_train(match.groupdict())


def _path_regex(pattern: str) -> re.Pattern[str]:
    """A result pattern below results/ as a regex matching the end of a path."""
    below = re.escape(pattern.removeprefix(RESULTS_DIR + "/"))
    below = below.replace(r"\{", "{").replace(r"\}", "}")
    return re.compile(r"(?:^|/)" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", below) + "$")


_PATH_REGEXES = {kind: _path_regex(kind.pattern) for kind in EXPERIMENT_TYPES}


def cell_of_path(path: str) -> tuple[str, str, dict[str, str]] | None:
    """(family, id, parameters) a result path stands for, read from the path alone;
    None if it is not a result path. Used for records that cannot be read themselves."""
    text = str(path).replace("\\", "/")
    for kind, regex in _PATH_REGEXES.items():
        match = regex.search(text)
        if match:
            record_id = match.group(0).lstrip("/").removesuffix(".json")
            return kind.family, record_id, match.groupdict()
    return None


# Every record's path pattern, by the part after results/ that names its family.
RECORD_PATTERNS = {
    pattern.split("/")[1]: pattern
    for pattern in (KERNEL_PATTERN, TRAIN_PATTERN, ROOF_PATTERN, DATASCI_PATTERN)
}


def unmade_target_reason(target: str, workdir: str) -> str | None:
    """What is wrong with a target no rule makes: an absolute path (Snakemake matches targets
    relative to the workflow's folder), or a path below results/ of no record's shape,
    naming the part that is wrong. None for a target elsewhere: Snakemake's message stands.
    """
    path = Path(target)
    if not path.is_absolute():
        return _record_shape_problem(os.path.normpath(target))
    try:
        relative = path.resolve().relative_to(Path(workdir).resolve()).as_posix()
    except ValueError:
        return f"{target} is outside the workflow's folder {workdir}, where every target lies"
    hint = f"{target}: name targets relative to the workflow's folder {workdir}: {relative}"
    problem = _record_shape_problem(relative)
    return f"{hint}; {problem}" if problem else hint


def check_targets(targets: Iterable[str], made: Callable[[str], bool], workdir: str) -> None:
    """Refuse the first target no rule makes (`made` says which do) with what is wrong with
    it (unmade_target_reason), before Snakemake says only "No rule to produce"."""
    for target in targets:
        if not made(target) and (reason := unmade_target_reason(target, workdir)):
            raise GridError(reason)


def _record_shape_problem(path: str) -> str | None:
    """The part of `path`, below results/, that no record path has there."""
    parts = path.split("/")
    if len(parts) < 2 or parts[0] != RESULTS_DIR:
        return None
    pattern = RECORD_PATTERNS.get(parts[1])
    if pattern is None:
        close = difflib.get_close_matches(parts[1], RECORD_PATTERNS, n=1)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        return (
            f"{path}: no result is named {parts[1]!r}{guess}; records are "
            f"{', '.join(RECORD_PATTERNS.values())}"
        )
    shapes = pattern.split("/")
    family = parts[1].removesuffix("s")
    if len(parts) != len(shapes):
        return f"{path} has {len(parts)} parts; a {family} record has {len(shapes)}: {pattern}"
    for number, (part, shape) in enumerate(zip(parts, shapes, strict=True), start=1):
        regex = "[^/]+".join(map(re.escape, re.split(r"\{\w+\}", shape)))
        if not re.fullmatch(regex, part):
            return f"{path}: part {number}, {part!r}, must read {shape!r} ({pattern})"
    return None


def experiment_of_id(record_id: str) -> Experiment:
    """The experiment a record id (its result path below results/, without .json) names.

    Only the form is checked (sizes and batches positive integers, the device
    well-formed: the grammar has one spelling per device), not the catalogues of kernels,
    models and workloads: reading 100,000 records must not import them.
    GridError names the part that is wrong.
    """
    for kind, regex in _PATH_REGEXES.items():
        match = regex.fullmatch(f"{record_id}.json")
        if match:
            parts = match.groupdict()
            exp = kind(
                **{
                    field.name: _positive_int(field.name, parts[field.name])
                    if field.type == "int"
                    else parts[field.name]
                    for field in fields(kind)
                }
            )
            _device(exp.device)
            return exp
    shapes = ", ".join(kind.pattern.removeprefix(RESULTS_DIR + "/") for kind in EXPERIMENT_TYPES)
    raise GridError(f"{record_id!r} is not a result path below results/ ({shapes}, less .json)")


def _raise_if_excluded(
    exp: KernelExperiment | TrainExperiment | DatasciExperiment, reason: str | None
) -> None:
    if reason:
        raise GridError(f"{exp.path} is excluded from the grid: {reason}")


@dataclass(frozen=True)
class Grid:
    experiments: tuple[Experiment, ...]
    excluded: tuple[tuple[KernelExperiment | TrainExperiment | DatasciExperiment, str], ...]

    @property
    def paths(self) -> list[str]:
        return [exp.path for exp in self.experiments]


def expand(config: dict[str, Any]) -> Grid:
    """Every experiment the config asks for, split into runnable and excluded-with-reason."""
    candidates: list[KernelExperiment | TrainExperiment] = []
    kernels_cfg = config["kernels"]
    for kernel, sizes in kernels_cfg["sizes"].items():
        axes = {**kernels_cfg, **kernels_cfg.get("overrides", {}).get(kernel, {})}
        for device, backend, dtype, size in itertools.product(
            axes["devices"], axes["backends"], axes["dtypes"], sizes
        ):
            candidates.append(KernelExperiment(kernel, device, backend, dtype, int(size)))
    train_cfg = config["train"]
    for model, batches in train_cfg["batch_sizes"].items():
        for device, precision, strategy, batch in itertools.product(
            train_cfg["devices"], train_cfg["precisions"], train_cfg["strategies"], batches
        ):
            candidates.append(TrainExperiment(model, device, precision, strategy, int(batch)))
    kept, excluded = [], []
    for exp in candidates:
        reason = (
            kernel_exclusion(exp)
            if isinstance(exp, KernelExperiment)
            else train_exclusion(exp, train_cfg)
        )
        if reason:
            excluded.append((exp, reason))
        else:
            kept.append(exp)
    roofs = dict.fromkeys(
        RoofExperiment(exp.device, exp.dtype) for exp in kept if isinstance(exp, KernelExperiment)
    )
    datasci, datasci_excluded = _expand_datasci(config.get("datasci") or {})
    return Grid((*kept, *roofs, *datasci), (*excluded, *datasci_excluded))


def _expand_datasci(datasci_cfg: dict[str, Any]):
    """The data science experiments: each workload on the configured backends it has.

    A backend the workload has no code for is passed over silently (one list of
    backends serves dataframes, ML and graphs); any other exclusion is kept with
    its reason, like a GPU library on a CPU device.
    """
    from accelbench.datasci import workloads

    kept, excluded = [], []
    for workload, sizes in datasci_cfg.get("sizes", {}).items():
        axes = {**datasci_cfg, **datasci_cfg.get("overrides", {}).get(workload, {})}
        backends = [b for b in axes["backends"] if b in workloads()[workload].implementations]
        for device, backend, size in itertools.product(axes["devices"], backends, sizes):
            exp = DatasciExperiment(workload, device, backend, int(size))
            reason = datasci_exclusion(exp)
            if reason:
                excluded.append((exp, reason))
            else:
                kept.append(exp)
    return kept, excluded


def validate_config(config: dict[str, Any]) -> None:
    """Names the schema cannot know (registered kernels, backends, models) and device strings.

    Runs when the Snakefile is parsed, so a bad name stops the run before any job.
    """
    from accelbench.backends import BACKENDS

    kernels_cfg, train_cfg = config["kernels"], config["train"]
    for kernel in kernels_cfg["sizes"]:
        _named_choice("kernels.sizes", kernel, "kernel", kernel_names())
    for kernel, axes in kernels_cfg.get("overrides", {}).items():
        _named_choice("kernels.overrides", kernel, "kernel", kernel_names())
        for backend in axes.get("backends", []):
            _named_choice(
                f"kernels.overrides.{kernel}.backends", backend, "backend", list(BACKENDS)
            )
        for device in axes.get("devices", []):
            try:
                parse_device(device)
            except DeviceError as err:
                raise GridError(f"config key kernels.overrides.{kernel}.devices: {err}") from None
    for kernel in kernels_cfg.get("naive_size_limit", {}):
        _named_choice("kernels.naive_size_limit", kernel, "kernel", kernel_names())
    for backend in kernels_cfg["backends"]:
        _named_choice("kernels.backends", backend, "backend", list(BACKENDS))
    for model in train_cfg["batch_sizes"]:
        _named_choice("train.batch_sizes", model, "model", model_names())
    _validate_datasci(config.get("datasci") or {})
    for key, devices in (
        ("kernels.devices", kernels_cfg["devices"]),
        ("train.devices", train_cfg["devices"]),
    ):
        for device in devices:
            try:
                parse_device(device)
            except DeviceError as err:
                raise GridError(f"config key {key}: {err}") from None
    from accelbench.train import settings

    try:
        settings.validate(config)
    except ValueError as err:
        message = str(err)
        raise GridError(
            f"config key {message}" if message.startswith("train.") else message
        ) from None


def _validate_datasci(datasci_cfg: dict[str, Any]) -> None:
    """Workload names, backends and devices of the `datasci` section, by their config key."""
    from accelbench.backends import DATASCI_BACKENDS

    sections = [("datasci", datasci_cfg)]
    for workload in datasci_cfg.get("sizes", {}):
        _named_choice("datasci.sizes", workload, "workload", workload_names())
    for workload, axes in datasci_cfg.get("overrides", {}).items():
        _named_choice("datasci.overrides", workload, "workload", workload_names())
        sections.append((f"datasci.overrides.{workload}", axes))
    for key, axes in sections:
        for backend in axes.get("backends", []):
            _named_choice(f"{key}.backends", backend, "backend", list(DATASCI_BACKENDS))
        for device in axes.get("devices", []):
            try:
                parse_device(device)
            except DeviceError as err:
                raise GridError(f"config key {key}.devices: {err}") from None


def _named_choice(key: str, value: str, what: str, allowed: list[str]) -> None:
    if value not in allowed:
        raise GridError(
            f"config key {key}: unknown {what} {value!r}; allowed: {', '.join(allowed)}"
        )

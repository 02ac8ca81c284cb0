"""The training family: one model trained on one device, precision, strategy and batch size
(accelbench.train)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from accelbench import registry
from accelbench.families.base import (
    RESULTS_DIR,
    Config,
    Expanded,
    Experiment,
    Family,
    GridError,
    Wildcards,
    check_devices,
    choice,
    device_name,
    named_choice,
    positive_int,
    raise_if_excluded,
)
from accelbench.platform.devices import Device
from accelbench.train import settings as train_settings
from accelbench.train import strategies
from accelbench.train.models import batch_norm_values, models, resolve_options

PATTERN = RESULTS_DIR + "/train/{model}/{device}/{precision}/{strategy}/bs{batch}.json"
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp64")


@dataclass(frozen=True)
class TrainExperiment(Experiment):
    model: str
    device: str
    precision: str
    strategy: str
    batch: int

    family = "train"
    pattern = PATTERN


def exclusion(exp: TrainExperiment, train_config: Config | None = None) -> str | None:
    """Why this training experiment makes no sense, or None if it does.

    With the config's `train` section it also knows the input size and the
    micro-batches, so a model whose layers cannot take the configured image, or a
    BatchNorm model left with one sample per process, is excluded before any job.
    """
    device = exp.parsed_device
    if exp.precision == "tf32" and not device.is_gpu:
        return "tf32 is a CUDA tensor-core mode; it does not exist on the CPU"
    spec = models()[exp.model]
    reason = strategies.exclusion(exp.strategy, device, exp.batch, spec.splittable)
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
    parts, what = _batch_parts(exp, device, train_config)
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


def _batch_parts(exp: TrainExperiment, device: Device, train_config: Config) -> tuple[int, str]:
    """Into how many pieces a strategy cuts the mini-batch, and what one piece is."""
    if exp.strategy in ("ddp", "fsdp"):
        return strategies.process_count(exp.strategy, device), "process"
    if exp.strategy == "dp":
        return device.count, "GPU replica"
    if exp.strategy == "pipeline":
        return train_config.get("pipeline_microbatches", 4), "micro-batch"
    return 1, "mini-batch"


def parse(wildcards: Wildcards, config: Config | None = None) -> TrainExperiment:
    """Wildcards of a training result path -> experiment; GridError says which part is wrong.

    With the config, the exclusions that depend on its `train` section apply too.
    """
    exp = TrainExperiment(
        model=choice("model", wildcards["model"], models()),
        device=device_name(wildcards["device"]),
        precision=choice("precision", wildcards["precision"], PRECISIONS),
        strategy=choice("strategy", wildcards["strategy"], strategies.STRATEGY_NAMES),
        batch=positive_int("batch size", wildcards["batch"]),
    )
    section = config["train"] if config is not None else None
    return raise_if_excluded(exp, exclusion(exp, section))


def expand(config: Config, planned: tuple[Experiment, ...] = ()) -> Expanded:
    """Each model's batch sizes over the devices, precisions and strategies."""
    section = config["train"]
    candidates = [
        TrainExperiment(model, device, precision, strategy, int(batch))
        for model, batches in section["batch_sizes"].items()
        for device, precision, strategy, batch in itertools.product(
            section["devices"], section["precisions"], section["strategies"], batches
        )
    ]
    return Expanded.judged(candidates, lambda exp: exclusion(exp, section))


def validate(config: Config) -> None:
    """Model names, devices and model options of the `train` section, by their config key."""
    section = config["train"]
    for model in section["batch_sizes"]:
        named_choice("train.batch_sizes", model, "model", models())
    check_devices("train.devices", section["devices"])
    try:
        train_settings.validate(config)
    except ValueError as err:
        message = str(err)
        raise GridError(
            f"config key {message}" if message.startswith("train.") else message
        ) from None


def settings(config: Config, wildcards: Wildcards) -> dict[str, Any]:
    """The settings of one model's experiments (its own options only, so others do not rerun
    it), and its source's where it is the user's."""
    model = wildcards["model"]
    return {**train_settings.for_model(config, model), **registry.source_digest("models", model)}


FAMILY = Family(
    name="train",
    experiment_type=TrainExperiment,
    rule="train_benchmark",
    resources="train",
    parse=parse,
    expand=expand,
    validate=validate,
    settings=settings,
    measure="accelbench.train.loop:measure_training",
    later_runs="accelbench.train.loop:later_runs",
    preload="accelbench.train.loop:preload",
    repeats_runs_itself=True,
    batched=False,
    units_key="train.batch_sizes",
    units_called="models",
    primary="model",
    catalogue="models",
    secondary=("precision", "strategy", "batch"),
    time_metric=train_settings.TIME_METRIC,
)

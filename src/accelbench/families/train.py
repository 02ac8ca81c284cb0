"""The training family: one model trained on one device, precision, strategy and batch size
(accelbench.train)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

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
from accelbench.platform.devices import parse_device
from accelbench.train import settings as train_settings
from accelbench.train import strategies
from accelbench.train.cells import exclusion
from accelbench.train.models import models

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


def device_precisions(section: Config, device: str) -> list[str]:
    """The precisions a device trains in: the config's list for every device, or, where
    `train.precisions` maps device kinds to lists, its kind's (a GPU in four precisions
    beside its host CPU in fp32 alone, its baseline)."""
    precisions = section["precisions"]
    if isinstance(precisions, Mapping):
        return list(precisions.get(parse_device(device).kind, []))
    return list(precisions)


def expand(config: Config, planned: tuple[Experiment, ...] = ()) -> Expanded:
    """Each model's batch sizes over the devices, their precisions and the strategies."""
    section = config["train"]
    candidates = [
        TrainExperiment(model, device, precision, strategy, int(batch))
        for model, batches in section["batch_sizes"].items()
        for device in section["devices"]
        for precision, strategy, batch in itertools.product(
            device_precisions(section, device), section["strategies"], batches
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


def settings(config: Config, wildcards: Wildcards) -> train_settings.TrainSettings:
    """The settings of one model's experiments (its own options only, so others do not rerun
    it), and its source's where it is the user's."""
    model = wildcards["model"]
    return train_settings.TrainSettings.from_params(
        {**train_settings.for_model(config, model), **registry.source_digest("models", model)}
    )


__all__ = ["FAMILY", "PATTERN", "PRECISIONS", "TrainExperiment"]


FAMILY = Family(
    name="train",
    experiment_type=TrainExperiment,
    rule="train_benchmark",
    resources="train",
    parse=parse,
    expand=expand,
    validate=validate,
    settings=settings,
    settings_type=train_settings.TrainSettings,
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
    compared_over=("precision", "device"),
    # One process on one node: a distributed strategy launches its own (Slurm tasks).
    groupable=lambda exp: exp.strategy == "single",
)

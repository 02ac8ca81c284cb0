"""A training experiment as the training code sees it, and which ones make sense.

The training family's declaration (accelbench.families.train) names the experiment
type and plans the grid with `exclusion`; the training code reads an experiment through
TrainCell and imports no declaration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from accelbench.platform.devices import Device
from accelbench.train import strategies
from accelbench.train.models import batch_norm_values, models, resolve_options


class TrainCell(Protocol):
    """What the training code reads of an experiment of the training family
    (accelbench.families.train.TrainExperiment)."""

    model: str
    device: str
    precision: str
    strategy: str
    batch: int

    @property
    def id(self) -> str: ...

    @property
    def parsed_device(self) -> Device: ...


def exclusion(exp: TrainCell, train_config: Mapping[str, Any] | None = None) -> str | None:
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


def _batch_parts(
    exp: TrainCell, device: Device, train_config: Mapping[str, Any]
) -> tuple[int, str]:
    """Into how many pieces a strategy cuts the mini-batch, and what one piece is."""
    if exp.strategy in ("ddp", "fsdp"):
        return strategies.process_count(exp.strategy, device), "process"
    if exp.strategy == "dp":
        return device.count, "GPU replica"
    if exp.strategy == "pipeline":
        return train_config.get("pipeline_microbatches", 4), "micro-batch"
    return 1, "mini-batch"

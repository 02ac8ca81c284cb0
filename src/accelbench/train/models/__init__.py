"""Model registry: one module per model, each declaring a `SPEC`.

A model declares how to build it, how to make a deterministic, learnable
synthetic batch, its loss and optimiser, its size options with their defaults,
and, where it has them, its real dataset and its layer sequence, so the
training loop and the parallel strategies need to know nothing about any
particular network.

A batch is a pair `(inputs, targets)`; each of the two is a tensor or a tuple
of tensors whose first dimension is the sample, so every strategy can split a
batch without knowing the model. A model whose training step is not "loss of
the model's output, backward, optimiser step" (the GAN) supplies its own step.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accelbench.registry import discover

Options = Mapping[str, Any]


def sgd(params, lr: float):
    """SGD with momentum 0.9, as in the reference benchmarks of image classifiers."""
    import torch

    return torch.optim.SGD(params, lr=lr, momentum=0.9)


def adam(params, lr: float):
    import torch

    return torch.optim.Adam(params, lr=lr)


def whole_model(model) -> list:
    return [model]


def call(module, inputs):
    """Apply `module` to one batch's inputs: a tuple is spread into arguments."""
    return module(*inputs) if isinstance(inputs, tuple) else module(inputs)


@dataclass
class Step:
    """What one training step works with: the modules, optimisers and mixed precision.

    `parts` are the modules the strategy wrapped (one per optimiser); `autocast`
    returns a fresh autocast context; `scaler` is the GradScaler (a no-op unless
    fp16), which is stepped per optimiser and updated once per step.
    """

    parts: list
    optimizers: list
    criterion: Any
    autocast: Callable[[], Any]
    scaler: Any


def new_step(spec: ModelSpec, parts: list, lr: float, autocast=None, scaler=None) -> Step:
    """A step with a fresh optimiser per part; full precision unless autocast/scaler are given."""
    import contextlib

    import torch

    return Step(
        parts=parts,
        optimizers=[spec.optimizer(part.parameters(), lr) for part in parts],
        criterion=spec.loss(),
        autocast=autocast or contextlib.nullcontext,
        scaler=scaler or torch.amp.GradScaler("cpu", enabled=False),
    )


def supervised_step(step: Step, inputs, targets):
    """loss(model(inputs), targets), backward, one optimiser step; returns the detached loss."""
    (model,), (optimizer,) = step.parts, step.optimizers
    optimizer.zero_grad(set_to_none=True)
    with step.autocast():
        loss = step.criterion(call(model, inputs), targets)
    step.scaler.scale(loss).backward()
    step.scaler.step(optimizer)
    step.scaler.update()
    return loss.detach()


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str  # "cnn", "fcn", "rnn", "transformer", "autoencoder", "gan", "gnn"
    description: str
    build: Callable[[Options], Any]  # options -> torch.nn.Module
    make_batch: Callable[[Any, int, Options], tuple[Any, Any]]  # (generator, batch, options)
    loss: Callable[[], Any]  # -> loss module
    default_batch: int
    # Size options and their defaults (every model has `lr`, its learning rate);
    # train.model_options overrides them per model.
    options: Mapping[str, Any] = field(default_factory=dict)
    # The smallest options that still run every layer: smoke tests and quick checks.
    tiny_options: Mapping[str, Any] = field(default_factory=dict)
    # ImageNet-type networks take their `image_size` option from train.image_size;
    # the smallest image their layers accept (the grid excludes smaller ones).
    follows_image_size: bool = False
    min_image_size: int | None = None
    optimizer: Callable[[Any, float], Any] = sgd  # (parameters, lr) -> optimiser
    train_step: Callable[[Step, Any, Any], Any] = supervised_step
    # The modules that get their own optimiser and are wrapped by the strategy.
    parts: Callable[[Any], list] = whole_model
    # Blocks whose composition is the forward pass: the pipeline splits them into
    # stages, FSDP shards each one. None: the model cannot be split.
    layers: Callable[[Any], list] | None = None
    # Real dataset (a name in accelbench.train.datasets.DATASETS) used when present on
    # disk, and how to turn it into samples of this model's batch format:
    # (dataset folder, options, seed) -> torch Dataset, or data.DataMismatch.
    dataset: str | None = None
    real_data: Callable[[Any, Options, int], Any] | None = None


class Unavailable(RuntimeError):
    """This model cannot run in this precision on this device; recorded as "unavailable"."""


class OptionError(ValueError):
    """A model option that does not exist or has the wrong type; names the key and the allowed."""


def resolve_options(
    spec: ModelSpec, overrides: Options | None = None, image_size: int | None = None
) -> dict[str, Any]:
    """The model's options: its defaults, train.image_size if it follows it, then overrides."""
    options = dict(spec.options)
    if spec.follows_image_size and image_size is not None:
        options["image_size"] = image_size
    for key, value in (overrides or {}).items():
        where = f"train.model_options.{spec.name}.{key}"
        if key not in spec.options:
            allowed = ", ".join(spec.options) or "none"
            raise OptionError(f"{where}: unknown option; allowed: {allowed}")
        default = spec.options[key]
        if not _same_kind(value, default):
            raise OptionError(
                f"{where}: {value!r} is a {type(value).__name__}, "
                f"expected a {type(default).__name__} like the default {default!r}"
            )
        options[key] = value
    return options


def _same_kind(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, int | float)
    if isinstance(default, list):
        return isinstance(value, list) and all(
            not default or _same_kind(item, default[0]) for item in value
        )
    return isinstance(value, type(default))


@functools.cache
def _batch_norm_values_per_sample(name: str, options_json: str) -> int | None:
    """The fewest values per channel one sample gives any BatchNorm of the model (its
    smallest feature map), from one forward pass; None if the model has no BatchNorm or
    its forward pass is not how it trains."""
    import torch
    from torch.nn.modules.batchnorm import _BatchNorm

    spec, options = models()[name], json.loads(options_json)
    model = spec.build(options)
    norms = [module for module in model.modules() if isinstance(module, _BatchNorm)]
    if not norms:
        return None
    seen: list[int] = []

    def record(_, args) -> None:
        sample = args[0][0]  # (channels, ...) of the first sample
        seen.append(sample.numel() // len(sample))

    hooks = [norm.register_forward_pre_hook(record) for norm in norms]
    inputs, _ = spec.make_batch(torch.Generator().manual_seed(0), 1, options)
    try:
        with torch.no_grad():
            call(model.eval(), inputs)
    except Exception:  # a model whose forward is not its training step (the GAN)
        return None  # not knowable here: the experiment runs and its record tells
    finally:
        for hook in hooks:
            hook.remove()
    return min(seen) if seen else None


def batch_norm_values(spec: ModelSpec, options: Options, samples: int) -> int | None:
    """Values per channel the smallest BatchNorm of the model sees in a batch of `samples`
    (training needs at least 2); None if the model has no BatchNorm."""
    per_sample = _batch_norm_values_per_sample(spec.name, json.dumps(options, sort_keys=True))
    return None if per_sample is None else per_sample * samples


def models() -> dict[str, ModelSpec]:
    """All registered models by name."""
    return discover(__name__)

"""Model registry: the catalogue of models, and one module per model with its network.

The catalogue (`MODELS`, below) holds what the workflow plans with: the
model's name and family, its size options with their defaults, whether its
layers can be split into stages, the smallest image it accepts and its real
dataset. It imports nothing heavy, so planning a grid of experiments never
imports torch. The network itself lives in `accelbench.train.models.<module>`,
imported on first use: how to build it, how to make a deterministic,
learnable synthetic batch, its loss, and where they differ from the defaults,
its optimiser, training step, parts and layer sequence, and how to read its
real dataset. So the training loop and the parallel strategies need to know
nothing about any particular network. A model of the user's declares its entry as the
SPEC of its own module, beside its network (accelbench.registry); models() holds both.

A batch is a pair `(inputs, targets)`; each of the two is a tensor or a tuple
of tensors whose first dimension is the sample, so every strategy can split a
batch without knowing the model. A model whose training step is not "loss of
the model's output, backward, optimiser step" (the GAN) supplies its own step.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from accelbench import registry

# A model option's value: a size, rate, flag or name, or a list of sizes (fcn's `hidden`).
OptionValue = bool | int | float | str | list[int]
# A model's options by name: its defaults, train.model_options' overrides, or resolved.
Options = Mapping[str, OptionValue]


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


# What a model's module provides, with the default where it may leave a name out
# (REQUIRED: it must define it). Each is read from the module on first use.
REQUIRED = object()
IMPLEMENTED: dict[str, Any] = {
    "build": REQUIRED,  # options -> torch.nn.Module
    "make_batch": REQUIRED,  # (generator, batch, options) -> (inputs, targets)
    "loss": REQUIRED,  # () -> loss module
    "optimizer": sgd,  # (parameters, lr) -> optimiser
    "train_step": supervised_step,  # (Step, inputs, targets) -> detached loss
    "parts": whole_model,  # model -> the modules that get their own optimiser
    # model -> blocks whose composition is the forward pass: the pipeline splits them
    # into stages, FSDP shards each one. Only for models the catalogue marks splittable.
    "layers": None,
    # (dataset folder, options, seed) -> torch Dataset, or data.DataMismatch
    "real_data": None,
}


@dataclass(frozen=True)
class ModelSpec:
    """A catalogue entry; `spec.build`, `spec.loss`, ... come from its module (IMPLEMENTED)."""

    name: str
    family: str  # "cnn", "fcn", "rnn", "transformer", "autoencoder", "gan", "gnn"
    description: str
    default_batch: int
    # Size options and their defaults (every model has `lr`, its learning rate);
    # train.model_options overrides them per model.
    options: Options = field(default_factory=dict)
    # The smallest options that still run every layer: smoke tests and quick checks.
    tiny_options: Options = field(default_factory=dict)
    # ImageNet-type networks take their `image_size` option from train.image_size;
    # the smallest image their layers accept (the grid excludes smaller ones).
    follows_image_size: bool = False
    min_image_size: int | None = None
    # Its module defines `layers`: the pipeline and FSDP strategies can split it.
    splittable: bool = False
    # Real dataset (a name in accelbench.train.datasets.DATASETS) used when present on
    # disk; the module's `real_data` turns it into samples of this model's batch format.
    dataset: str | None = None
    # The module with its network, when models share one (they differ in options only);
    # a dotted name is a module of the user's (accelbench.registry fills it in).
    module: str | None = None

    @property
    def module_name(self) -> str:
        """The module with this model's network: accelbench.train.models.<module or name>,
        or the module of the user's that declares it."""
        if self.module and "." in self.module:
            return self.module
        return f"{__name__}.{self.module or self.name}"

    @property
    def implementation(self) -> ModuleType:
        return importlib.import_module(self.module_name)

    def __getattr__(self, attribute: str) -> Any:
        if attribute not in IMPLEMENTED:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {attribute!r}")
        default = IMPLEMENTED[attribute]
        if default is REQUIRED:
            return getattr(self.implementation, attribute)
        return getattr(self.implementation, attribute, default)


class Unavailable(RuntimeError):
    """This model cannot run in this precision on this device; recorded as "unavailable"."""


class OptionError(ValueError):
    """A model option that does not exist or has the wrong type; names the key and the allowed."""


def resolve_options(
    spec: ModelSpec, overrides: Options | None = None, image_size: int | None = None
) -> dict[str, OptionValue]:
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


def _same_kind(value: OptionValue, default: OptionValue) -> bool:
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
    # First on the meta device (no weights): a large model without BatchNorm (FCN-S's
    # 118 M parameters) is answered at once, without drawing from the global generator.
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        if not any(isinstance(module, _BatchNorm) for module in spec.build(options).modules()):
            return None
    model = spec.build(options)
    norms = [module for module in model.modules() if isinstance(module, _BatchNorm)]
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


MNIST_FEATURES = 28 * 28
# Sizes of the BERT- and GPT-style models: small by default, tiny for the tests.
TRANSFORMER_OPTIONS = {
    "lr": 0.001,
    "vocab": 1000,
    "dim": 128,
    "heads": 4,
    "layers": 2,
    "ff": 512,
    "seq_len": 64,
}
TRANSFORMER_TINY_OPTIONS = {
    "lr": 0.01,
    "vocab": 16,
    "dim": 8,
    "heads": 2,
    "layers": 2,
    "ff": 16,
    "seq_len": 8,
}


def _transformer(name: str, description: str) -> ModelSpec:
    return ModelSpec(
        name=name,
        family="transformer",
        description=description,
        default_batch=16,
        options=dict(TRANSFORMER_OPTIONS),
        tiny_options=dict(TRANSFORMER_TINY_OPTIONS),
        splittable=True,
        dataset="ptb",
    )


def _torchvision_resnet(depth: int, lr: float) -> ModelSpec:
    return ModelSpec(
        name=f"resnet{depth}",
        family="cnn",
        description=f"torchvision ResNet-{depth} (ImageNet layout), 10 classes",
        default_batch=16,
        options={"lr": lr, "depth": depth, "image_size": 64, "classes": 10},
        tiny_options={"image_size": 32},
        follows_image_size=True,
        splittable=True,
        module="resnet",
    )


def _fully_connected(
    name: str,
    description: str,
    default_batch: int,
    options: Options,
    activation: str = "relu",
    dataset: str | None = None,
) -> ModelSpec:
    """A network of accelbench.train.models.fcn: its sizes and activation are options."""
    return ModelSpec(
        name=name,
        family="fcn",
        description=description,
        default_batch=default_batch,
        options={**options, "activation": activation},
        tiny_options={"input_dim": 32, "hidden": [16, 16], "classes": 4},
        splittable=True,
        dataset=dataset,
        module="fcn",
    )


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="alexnet",
            family="cnn",
            description="torchvision AlexNet (single tower), 10 classes",
            default_batch=16,
            options={"lr": 0.01, "image_size": 64, "classes": 10, "dropout": 0.5},
            tiny_options={"image_size": 64, "dropout": 0.0},
            follows_image_size=True,
            min_image_size=63,  # its three stride-2 poolings
            splittable=True,
        ),
        ModelSpec(
            name="alexnet-r",
            family="cnn",
            description=(
                "AlexNet-R of Shi et al. (2016): cuda-convnet's CIFAR-10 network "
                "(layers-18pct) without LRN, 32 x 32"
            ),
            default_batch=1024,
            options={"lr": 0.01, "image_size": 32, "classes": 10},
            tiny_options={"image_size": 16, "classes": 4},
            min_image_size=15,  # its three stride-2 poolings
            splittable=True,
            dataset="cifar10",
            module="alexnet_cifar",
        ),
        ModelSpec(
            name="alexnet-s",
            family="cnn",
            description=(
                "AlexNet-S of Shi et al. (2016): the one-GPU AlexNet "
                "(96-256-384-384-256 convolutions), 224 x 224, 1000 classes"
            ),
            default_batch=16,
            options={"lr": 0.01, "image_size": 224, "classes": 1000},
            tiny_options={"image_size": 64, "classes": 4},
            follows_image_size=True,
            min_image_size=63,  # its stride-4 convolution and three stride-2 poolings
            splittable=True,
            module="alexnet_owt",
        ),
        ModelSpec(
            name="autoencoder",
            family="autoencoder",
            description="convolutional denoising autoencoder, MSE reconstruction",
            default_batch=32,
            options={"lr": 0.001, "image_size": 28, "channels": 1, "width": 32, "noise": 0.5},
            tiny_options={"lr": 0.01, "image_size": 8, "width": 8},
            splittable=True,
            dataset="mnist",
        ),
        _transformer("bert", "BERT-style Transformer encoder, masked language model"),
        ModelSpec(
            name="dcgan",
            family="gan",
            description="DCGAN, discriminator and generator updated every step",
            default_batch=32,
            options={"lr": 0.0002, "image_size": 32, "channels": 3, "latent": 64, "width": 32},
            tiny_options={"image_size": 16, "latent": 4, "width": 4},
            dataset="cifar10",
        ),
        _fully_connected(
            "fcn",
            "fully connected network, ReLU, MNIST-sized by default",
            64,
            {"lr": 0.01, "input_dim": MNIST_FEATURES, "hidden": [1024, 1024, 1024], "classes": 10},
            dataset="mnist",
        ),
        _fully_connected(
            "fcn-r",
            "FCN-R of Shi et al. (2016): MNIST 784 -> 2048 -> 4096 -> 1024 -> 10, sigmoid",
            1024,
            {"lr": 0.05, "input_dim": MNIST_FEATURES, "hidden": [2048, 4096, 1024], "classes": 10},
            activation="sigmoid",
            dataset="mnist",
        ),
        _fully_connected(
            "fcn-s",
            "FCN-S of Shi et al. (2016): 26752 -> 3 x 2048 -> 26752, sigmoid",
            64,
            {"lr": 0.01, "input_dim": 26752, "hidden": [2048, 2048, 2048], "classes": 26752},
            activation="sigmoid",
        ),
        ModelSpec(
            name="gcn",
            family="gnn",
            description="graph convolutional network on a sparse adjacency, graph classification",
            default_batch=32,
            options={
                "lr": 0.005,
                "nodes": 64,
                "degree": 4,
                "features": 32,
                "hidden": 64,
                "layers": 2,
                "classes": 4,
            },
            tiny_options={"nodes": 8, "degree": 2, "features": 4, "hidden": 8, "classes": 2},
        ),
        _transformer("gpt", "GPT-style decoder-only Transformer, next-token prediction"),
        ModelSpec(
            name="lstm",
            family="rnn",
            description="LSTM language model (next-token prediction)",
            default_batch=32,
            options={
                "lr": 0.002,
                "vocab": 1000,
                "embed": 128,
                "hidden": 256,
                "layers": 2,
                "seq_len": 32,
            },
            tiny_options={
                "lr": 0.01,
                "vocab": 16,
                "embed": 16,
                "hidden": 16,
                "layers": 2,
                "seq_len": 6,
            },
            splittable=True,
            dataset="ptb",
        ),
        _torchvision_resnet(18, lr=0.01),
        # lr 0.01 (fine for ResNet-18) makes this deeper network diverge at batch 16.
        _torchvision_resnet(50, lr=0.001),
        ModelSpec(
            name="resnet56",
            family="cnn",
            description="CIFAR ResNet-56 (He et al. 2016, option A shortcuts), 10 classes",
            default_batch=16,
            options={"lr": 0.1, "depth": 56, "width": 16, "image_size": 32, "classes": 10},
            tiny_options={"lr": 0.05, "depth": 8, "width": 4},
            splittable=True,
            dataset="cifar10",
        ),
    )
}


def models() -> dict[str, ModelSpec]:
    """All models by name: the catalogue above, the user's (accelbench.registry)."""
    return registry.specs("models")

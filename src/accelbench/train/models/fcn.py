"""A fully connected network (as FCN-S / FCN-R in Shi et al. 2016).

Linear layers with an activation between them; `hidden` lists the hidden
widths and `activation` names the nonlinearity (ACTIVATIONS: "relu", the
default, or "sigmoid" as in Shi et al.). The `fcn` entry is MNIST-sized (784
inputs, 10 classes, ReLU) and trains on MNIST when it is present. The catalogue
entries `fcn-s` and `fcn-r` are Shi et al.'s FCN-S (26752 inputs and outputs,
three 2048-wide sigmoid layers; dlbench synthetic/experiments/torch/fc/
ffn26752bm.lua) and FCN-R (MNIST, 2048-4096-1024 sigmoid layers; dlbench
tools/torch/Models/ffn5.lua): the same network with other options. Their
LogSoftMax and ClassNLLCriterion are the cross-entropy loss here.
"""

from __future__ import annotations

from torch import nn

from accelbench.train import data
from accelbench.train.models import MNIST_FEATURES, Options
from accelbench.train.nets import sequential_layers
from accelbench.train.synthetic import labelled_samples

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid}


def activation(name: str) -> type[nn.Module]:
    """The activation module class for option `activation`; ValueError for an unknown one."""
    if name not in ACTIVATIONS:
        raise ValueError(f"fcn option activation: {name!r} is not one of {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def build(options: Options) -> nn.Sequential:
    nonlinearity = activation(options["activation"])
    widths = [options["input_dim"], *options["hidden"]]
    layers: list[nn.Module] = []
    for width_in, width_out in zip(widths, widths[1:], strict=False):
        layers += [nn.Linear(width_in, width_out), nonlinearity()]
    layers.append(nn.Linear(widths[-1], options["classes"]))
    return nn.Sequential(*layers)


def make_batch(generator, batch: int, options: Options):
    return labelled_samples(generator, batch, options["classes"], (options["input_dim"],))


def real_data(root, options: Options, seed: int):
    if options["input_dim"] != MNIST_FEATURES or options["classes"] != 10:
        raise data.DataMismatch(
            f"MNIST has {MNIST_FEATURES} features and 10 classes; the options ask for "
            f"{options['input_dim']} and {options['classes']}"
        )
    return data.mnist(root, flatten=True)


loss = nn.CrossEntropyLoss
layers = sequential_layers

"""A fully connected network (as FCN-S / FCN-R in Shi et al. 2016).

Linear layers with ReLU between them; `hidden` lists the hidden widths. The
default is MNIST-sized (784 inputs, 10 classes) and trains on MNIST when it is
present; Shi et al.'s FCN-S (26752 inputs and outputs, 2048-wide hidden layers)
is a matter of options (config/cluster.yaml).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from accelbench.train import data
from accelbench.train.models import MNIST_FEATURES
from accelbench.train.nets import sequential_layers
from accelbench.train.synthetic import labelled_samples


def build(options: dict[str, Any]) -> nn.Sequential:
    widths = [options["input_dim"], *options["hidden"]]
    layers: list[nn.Module] = []
    for width_in, width_out in zip(widths, widths[1:], strict=False):
        layers += [nn.Linear(width_in, width_out), nn.ReLU()]
    layers.append(nn.Linear(widths[-1], options["classes"]))
    return nn.Sequential(*layers)


def make_batch(generator, batch: int, options: dict[str, Any]):
    return labelled_samples(generator, batch, options["classes"], (options["input_dim"],))


def real_data(root, options: dict[str, Any], seed: int):
    if options["input_dim"] != MNIST_FEATURES or options["classes"] != 10:
        raise data.DataMismatch(
            f"MNIST has {MNIST_FEATURES} features and 10 classes; the options ask for "
            f"{options['input_dim']} and {options['classes']}"
        )
    return data.mnist(root, flatten=True)


loss = nn.CrossEntropyLoss
layers = sequential_layers

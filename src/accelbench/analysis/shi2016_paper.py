"""Shi et al. (2016), the paper the training tables follow: its networks and published times.

Shi, Wang, Xu and Chu timed seven networks at fixed batch sizes on CPUs (by
thread count) and GPUs (Table 7: seconds per mini-batch). Each network is a
catalogue model here at the paper's batch size and options; the models follow
the authors' Torch scripts (github.com/hclhkbu/dlbench), and `NETWORKS` says for
each where it differs. `PUBLISHED` holds the paper's values transcribed so far;
a cell not in it is "not transcribed", never estimated. No heavy imports: the
grid's planning asks which networks it holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Any

CITATION = (
    "S. Shi, Q. Wang, P. Xu and X. Chu, Benchmarking State-of-the-Art Deep Learning "
    "Software Tools, arXiv:1608.07249 (2016), Table 7, Torch"
)
PRECISION, STRATEGY = "fp32", "single"
# How every faithful network's training step differs from the paper's scripts.
MOMENTUM = "SGD with momentum 0.9 where the paper's script steps plain SGD"


@dataclass(frozen=True)
class Network:
    """One of the paper's networks as a catalogue model: the options that make it the
    paper's network (its learning rate aside), and how the model here differs."""

    name: str
    model: str
    batch: int
    options: Mapping[str, Any]
    faithful: bool  # the same layers and shapes as the paper's Torch network
    differs: str


NETWORKS = (
    Network(
        "FCN-S",
        "fcn-s",
        64,
        {"input_dim": 26752, "hidden": [2048, 2048, 2048], "classes": 26752},
        True,
        MOMENTUM,
    ),
    Network(
        "AlexNet-S",
        "alexnet-s",
        16,
        {"image_size": 224, "classes": 1000},
        True,
        MOMENTUM,
    ),
    Network(
        "ResNet-50",
        "resnet50",
        16,
        {"image_size": 224, "classes": 1000},
        True,
        "torchvision's ResNet-50, the layout of fb.resnet.torch that the paper ran",
    ),
    Network(
        "FCN-R",
        "fcn-r",
        1024,
        {"input_dim": 784, "hidden": [2048, 4096, 1024], "classes": 10},
        True,
        MOMENTUM,
    ),
    Network(
        "AlexNet-R",
        "alexnet-r",
        1024,
        {"image_size": 32, "classes": 10},
        True,
        MOMENTUM,
    ),
    Network(
        "ResNet-56",
        "resnet56",
        128,
        {"depth": 56, "width": 16, "classes": 10},
        False,
        "stand-in: He et al.'s block (ReLU after the addition); the paper's Torch network "
        "puts batch normalisation after the addition",
    ),
    Network(
        "LSTM",
        "lstm",
        128,
        {"vocab": 10000, "embed": 256, "hidden": 256, "layers": 2, "seq_len": 32},
        False,
        "stand-in: the same two 256-unit LSTM layers over 32 steps of the Penn Treebank "
        "vocabulary, trained with Adam where the paper's script uses SGD with gradient "
        "clipping",
    ),
)


@dataclass(frozen=True)
class Published:
    """One cell of the paper's table: seconds per mini-batch on a platform."""

    network: str
    platform: str
    threads: int | None  # CPU threads; None on a GPU
    seconds: float


PUBLISHED = (
    Published("ResNet-50", "CPU", 1, 13.18),
    Published("ResNet-50", "CPU", 2, 7.50),
)


def differing_options(network: Network, options: Mapping[str, Any]) -> dict[str, Any]:
    """The paper's options that a record's `options` lack: {key: the paper's value}."""
    return {key: value for key, value in network.options.items() if options.get(key) != value}


def planned(configurations: Set[tuple[str, int, str, str]]) -> bool:
    """Whether some (model, batch, precision, strategy) planned is one of the networks."""
    return any(
        (network.model, network.batch, PRECISION, STRATEGY) in configurations
        for network in NETWORKS
    )

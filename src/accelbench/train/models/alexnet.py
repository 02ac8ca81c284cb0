"""torchvision AlexNet for image classification, at a configurable input size.

The single-tower AlexNet of torchvision (as AlexNet-S in Shi et al. 2016 at
224 x 224). Its three stride-2 poolings need an image of at least 63 pixels.
"""

from __future__ import annotations

from typing import Any

from accelbench.train.models import ModelSpec
from accelbench.train.nets import check_image_size
from accelbench.train.synthetic import labelled_samples

MIN_IMAGE_SIZE = 63


def build(options: dict[str, Any]):
    import torchvision

    check_image_size("alexnet", options["image_size"], MIN_IMAGE_SIZE)
    return torchvision.models.alexnet(
        weights=None, num_classes=options["classes"], dropout=options["dropout"]
    )


def make_batch(generator, batch: int, options: dict[str, Any]):
    size = options["image_size"]
    return labelled_samples(generator, batch, options["classes"], (3, size, size))


def loss():
    import torch

    return torch.nn.CrossEntropyLoss()


def layers(model):
    import torch

    return [*model.features, model.avgpool, torch.nn.Flatten(1), *model.classifier]


SPEC = ModelSpec(
    name="alexnet",
    family="cnn",
    description="torchvision AlexNet (single tower), 10 classes",
    build=build,
    make_batch=make_batch,
    loss=loss,
    default_batch=16,
    options={"lr": 0.01, "image_size": 64, "classes": 10, "dropout": 0.5},
    tiny_options={"image_size": 64, "dropout": 0.0},
    follows_image_size=True,
    layers=layers,
)

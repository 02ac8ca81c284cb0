"""torchvision AlexNet for image classification, at a configurable input size.

The single-tower AlexNet of torchvision (as AlexNet-S in Shi et al. 2016 at
224 x 224). Its three stride-2 poolings need an image of at least 63 pixels.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from accelbench.train.models import ModelSpec
from accelbench.train.nets import check_image_size
from accelbench.train.synthetic import image_batch

MIN_IMAGE_SIZE = 63


def build(options: dict[str, Any]):
    import torchvision

    check_image_size("alexnet", options["image_size"], MIN_IMAGE_SIZE)
    return torchvision.models.alexnet(
        weights=None, num_classes=options["classes"], dropout=options["dropout"]
    )


def layers(model):
    import torch

    return [*model.features, model.avgpool, torch.nn.Flatten(1), *model.classifier]


SPEC = ModelSpec(
    name="alexnet",
    family="cnn",
    description="torchvision AlexNet (single tower), 10 classes",
    build=build,
    make_batch=image_batch,
    loss=nn.CrossEntropyLoss,
    default_batch=16,
    options={"lr": 0.01, "image_size": 64, "classes": 10, "dropout": 0.5},
    tiny_options={"image_size": 64, "dropout": 0.0},
    follows_image_size=True,
    min_image_size=MIN_IMAGE_SIZE,
    layers=layers,
)

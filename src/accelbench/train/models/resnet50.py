"""torchvision ResNet-50 for image classification, at a configurable input size.

The network of Shi et al.'s (2016) time-per-mini-batch table (batch 16 at
224 x 224 there); the default grid uses a smaller image so a CPU run is short.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from accelbench.train.models import ModelSpec
from accelbench.train.nets import torchvision_resnet_layers
from accelbench.train.synthetic import image_batch


def build(options: dict[str, Any]):
    import torchvision

    return torchvision.models.resnet50(weights=None, num_classes=options["classes"])


SPEC = ModelSpec(
    name="resnet50",
    family="cnn",
    description="torchvision ResNet-50 (ImageNet layout), 10 classes",
    build=build,
    make_batch=image_batch,
    loss=nn.CrossEntropyLoss,
    default_batch=16,
    # lr 0.01 (fine for ResNet-18) makes this deeper network diverge at batch 16.
    options={"lr": 0.001, "image_size": 64, "classes": 10},
    tiny_options={"image_size": 32},
    follows_image_size=True,
    layers=torchvision_resnet_layers,
)

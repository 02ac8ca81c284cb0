"""torchvision ResNet-18 for image classification, at a configurable input size.

At 224 x 224 it is the ImageNet network; the default grid uses a smaller image
so a CPU run takes seconds, with the same layers and the same code path.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from accelbench.train.models import ModelSpec
from accelbench.train.nets import torchvision_resnet_layers
from accelbench.train.synthetic import image_batch


def build(options: dict[str, Any]):
    import torchvision

    return torchvision.models.resnet18(weights=None, num_classes=options["classes"])


SPEC = ModelSpec(
    name="resnet18",
    family="cnn",
    description="torchvision ResNet-18 (ImageNet layout), 10 classes",
    build=build,
    make_batch=image_batch,
    loss=nn.CrossEntropyLoss,
    default_batch=16,
    options={"lr": 0.01, "image_size": 64, "classes": 10},
    tiny_options={"image_size": 32},
    follows_image_size=True,
    layers=torchvision_resnet_layers,
)

"""torchvision ResNet-18 for image classification, at a configurable input size.

At 224 x 224 it is the ImageNet network; the default grid uses a smaller image
so a CPU run takes seconds, with the same layers and the same code path.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from accelbench.train.nets import torchvision_resnet_layers
from accelbench.train.synthetic import image_batch


def build(options: dict[str, Any]):
    import torchvision

    return torchvision.models.resnet18(weights=None, num_classes=options["classes"])


make_batch = image_batch
loss = nn.CrossEntropyLoss
layers = torchvision_resnet_layers

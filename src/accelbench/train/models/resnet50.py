"""torchvision ResNet-50 for image classification, at a configurable input size.

The network of Shi et al.'s (2016) time-per-mini-batch table (batch 16 at
224 x 224 there); the default grid uses a smaller image so a CPU run is short.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from accelbench.train.nets import torchvision_resnet_layers
from accelbench.train.synthetic import image_batch


def build(options: dict[str, Any]):
    import torchvision

    return torchvision.models.resnet50(weights=None, num_classes=options["classes"])


make_batch = image_batch
loss = nn.CrossEntropyLoss
layers = torchvision_resnet_layers

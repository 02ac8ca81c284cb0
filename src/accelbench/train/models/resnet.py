"""torchvision ResNets (ImageNet layout) for image classification, at a configurable input size.

ResNet-18 and ResNet-50 (the network of Shi et al.'s (2016) time-per-mini-batch
table, batch 16 at 224 x 224 there) differ only in depth, the `depth` option.
At 224 x 224 they are the ImageNet networks; the default grid uses a smaller
image so a CPU run is short, with the same layers and the same code path.
"""

from __future__ import annotations

from torch import nn

from accelbench.train.models import Options
from accelbench.train.nets import torchvision_resnet_layers
from accelbench.train.synthetic import image_batch

DEPTHS = (18, 34, 50, 101, 152)  # the ResNets torchvision builds


def build(options: Options):
    import torchvision

    depth = options["depth"]
    if depth not in DEPTHS:
        allowed = ", ".join(map(str, DEPTHS))
        raise ValueError(f"torchvision ResNet: depth must be one of {allowed}; got {depth}")
    return torchvision.models.get_model(
        f"resnet{depth}", weights=None, num_classes=options["classes"]
    )


make_batch = image_batch
loss = nn.CrossEntropyLoss
layers = torchvision_resnet_layers

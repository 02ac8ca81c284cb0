"""torchvision AlexNet for image classification, at a configurable input size.

The single-tower AlexNet of torchvision (as AlexNet-S in Shi et al. 2016 at
224 x 224). Its three stride-2 poolings need an image of at least 63 pixels.
"""

from __future__ import annotations

from torch import nn

from accelbench.train.models import MODELS, Options
from accelbench.train.nets import check_image_size
from accelbench.train.synthetic import image_batch


def build(options: Options):
    import torchvision

    check_image_size("alexnet", options["image_size"], MODELS["alexnet"].min_image_size)
    return torchvision.models.alexnet(
        weights=None, num_classes=options["classes"], dropout=options["dropout"]
    )


def layers(model):
    import torch

    return [*model.features, model.avgpool, torch.nn.Flatten(1), *model.classifier]


make_batch = image_batch
loss = nn.CrossEntropyLoss

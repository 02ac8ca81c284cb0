"""torchvision ResNet-18 for image classification, at a configurable input size.

At 224 x 224 it is the ImageNet network; the default grid uses a smaller image
so a CPU run takes seconds, with the same layers and the same code path.
"""

from __future__ import annotations

from typing import Any

from accelbench.train.models import ModelSpec

NUM_CLASSES = 10


def build(options: dict[str, Any]):
    import torchvision

    return torchvision.models.resnet18(weights=None, num_classes=NUM_CLASSES)


def make_batch(generator, batch: int, options: dict[str, Any]):
    import torch

    size = options["image_size"]
    images = torch.randn(batch, 3, size, size, generator=generator)
    labels = torch.randint(0, NUM_CLASSES, (batch,), generator=generator)
    return images, labels


def loss():
    import torch

    return torch.nn.CrossEntropyLoss()


SPEC = ModelSpec(
    name="resnet18",
    family="cnn",
    description="torchvision ResNet-18, 10 classes",
    build=build,
    make_batch=make_batch,
    loss=loss,
    default_batch=16,
)

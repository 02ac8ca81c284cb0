"""tiny-cnn: two convolutions and a linear classifier, on synthetic images.

Its SPEC is what planning reads (no torch imported); the functions below are what
training calls: the network, one seeded batch (class templates plus noise, so it
learns), the loss, and the blocks the pipeline and FSDP strategies split it into.
"""

from __future__ import annotations

from accelbench.train.models import ModelSpec

SPEC = ModelSpec(
    name="tiny-cnn",
    family="cnn",
    description="two 3x3 convolutions with pooling, then a linear classifier",
    default_batch=32,
    options={"lr": 0.01, "image_size": 32, "width": 16, "classes": 10},
    tiny_options={"image_size": 8, "width": 4, "classes": 2},
    # Takes the grid's train.image_size, and needs two halvings to leave a pixel.
    follows_image_size=True,
    min_image_size=4,
    splittable=True,
)


def build(options):
    from torch import nn

    width, pixels = options["width"], (options["image_size"] // 4) ** 2
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(2 * width * pixels, options["classes"]),
    )


def make_batch(generator, batch: int, options):
    from accelbench.train.synthetic import image_batch

    return image_batch(generator, batch, options)


def loss():
    from torch import nn

    return nn.CrossEntropyLoss()


def layers(model):
    return list(model)

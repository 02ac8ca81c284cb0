"""AlexNet-R of Shi et al. (2016): cuda-convnet's CIFAR-10 network as in dlbench.

As defined in dlbench tools/torch/Models/alexnet.lua: cuda-convnet's
layers-18pct without its local response normalisation, three 5 x 5
convolutions (32, 32, 64 channels, padding 2) with ReLUs, two 3 x 3 stride-2
max-poolings and a 3 x 3 stride-2 average pooling (floor rounding, as Torch's),
and one linear layer: 32 -> 15 -> 7 -> 3 pixels, so 64 * 3 * 3 = 576 features
at CIFAR-10's 32 x 32 and 85 098 parameters at 10 classes. The Lua's
LogSoftMax with ClassNLLCriterion is the cross-entropy loss. The model keeps
its own image_size (32, not train.image_size); the linear layer's input is
computed from it, so other sizes work down to 15 pixels (one pixel left after
the last pooling). Trained on CIFAR-10 when it is present under train.data_dir.
"""

from __future__ import annotations

from torch import nn

from accelbench.train import data
from accelbench.train.models import MODELS, Options
from accelbench.train.nets import check_image_size, sequential_layers
from accelbench.train.synthetic import image_batch


def pooled(size: int) -> int:
    """Side of a feature map after a 3 x 3 stride-2 pooling (floor rounding)."""
    return (size - 3) // 2 + 1


def build(options: Options) -> nn.Sequential:
    size = options["image_size"]
    check_image_size("alexnet-r", size, MODELS["alexnet-r"].min_image_size)
    side = pooled(pooled(pooled(size)))  # 3 at 32 x 32
    return nn.Sequential(
        nn.Conv2d(3, 32, 5, padding=2),
        nn.MaxPool2d(3, 2),
        nn.ReLU(),
        nn.Conv2d(32, 32, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(3, 2),
        nn.Conv2d(32, 64, 5, padding=2),
        nn.ReLU(),
        nn.AvgPool2d(3, 2),
        nn.Flatten(1),
        nn.Linear(64 * side * side, options["classes"]),
    )


real_data = data.cifar10_classes
make_batch = image_batch
loss = nn.CrossEntropyLoss
layers = sequential_layers

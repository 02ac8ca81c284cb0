"""AlexNet-S of Shi et al. (2016): the one-GPU AlexNet of dlbench's alexnet.lua.

As defined in dlbench synthetic/experiments/torch/cnn/alexnet/alexnet.lua:
cuda-convnet2's layers-imagenet-1gpu.cfg, the AlexNet of Krizhevsky's "One
weird trick" paper (arXiv:1404.5997), with 96-256-384-384-256 convolutions
(torchvision's AlexNet has 64-192-384-256-256), ReLUs, three 3 x 3 stride-2
max-poolings, and a 4096-4096 classifier without dropout. The Lua's
Threshold(0, 1e-6) is a ReLU and its LogSoftMax with ClassNLLCriterion is the
cross-entropy loss. At 224 x 224 the features are 256 x 6 x 6; an adaptive
average pooling to 6 x 6 (as in torchvision, the identity at 224) lets other
image sizes down to 63 pixels, where the last pooling still leaves one pixel,
reach the fixed 256 * 6 * 6 -> 4096 linear layer. 62.4 M parameters at 1000
classes.
"""

from __future__ import annotations

from torch import nn

from accelbench.train.models import MODELS, Options
from accelbench.train.nets import check_image_size, sequential_layers
from accelbench.train.synthetic import image_batch


def build(options: Options) -> nn.Sequential:
    check_image_size("alexnet-s", options["image_size"], MODELS["alexnet-s"].min_image_size)
    return nn.Sequential(
        nn.Conv2d(3, 96, 11, stride=4, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(3, 2),
        nn.Conv2d(96, 256, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(3, 2),
        nn.Conv2d(256, 384, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(384, 384, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(384, 256, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(3, 2),
        nn.AdaptiveAvgPool2d((6, 6)),
        nn.Flatten(1),
        nn.Linear(256 * 6 * 6, 4096),
        nn.ReLU(),
        nn.Linear(4096, 4096),
        nn.ReLU(),
        nn.Linear(4096, options["classes"]),
    )


make_batch = image_batch
loss = nn.CrossEntropyLoss
layers = sequential_layers

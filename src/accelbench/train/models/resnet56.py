"""ResNet-56 for CIFAR-10 (He et al. 2016, section 4.2), as in Shi et al.'s table.

Three stages of n basic blocks with 16, 32 and 64 channels (depth 6n + 2),
identity shortcuts that subsample and zero-pad where the shape changes
(option A), global average pooling and one linear layer: 0.85 M parameters at
depth 56. Trained on CIFAR-10 when it is present under train.data_dir.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.train import data
from accelbench.train.models import Options
from accelbench.train.nets import sequential_layers
from accelbench.train.synthetic import image_batch


class BasicBlock(nn.Module):
    def __init__(self, channels_in: int, channels_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels_out)
        self.conv2 = nn.Conv2d(channels_out, channels_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels_out)
        self.stride = stride
        self.pad = channels_out - channels_in

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1 and self.pad == 0:
            return x
        x = x[:, :, :: self.stride, :: self.stride]
        return F.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


def build(options: Options) -> nn.Sequential:
    depth, width = options["depth"], options["width"]
    if depth < 8 or (depth - 2) % 6:
        raise ValueError(
            f"resnet56: depth must be 6n + 2 with n >= 1 (8, 14, 20, ..., 56); got {depth}"
        )
    per_stage = (depth - 2) // 6
    blocks: list[nn.Module] = [
        nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
    ]
    channels = width
    for stage in range(3):
        out = width * 2**stage
        for index in range(per_stage):
            stride = 2 if stage > 0 and index == 0 else 1
            blocks.append(BasicBlock(channels, out, stride))
            channels = out
    blocks.append(
        nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(channels, options["classes"])
        )
    )
    model = nn.Sequential(*blocks)
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
    return model


real_data = data.cifar10_classes
make_batch = image_batch
loss = nn.CrossEntropyLoss
layers = sequential_layers

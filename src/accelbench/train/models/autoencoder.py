"""A convolutional denoising autoencoder: reconstruct the clean image from a noisy one.

Two stride-2 convolutions down to a quarter of the resolution, two transposed
convolutions back up, mean squared error against the clean image. MNIST-sized
by default (1 x 28 x 28) and trained on MNIST when it is present; otherwise on
synthetic images (noisy class patterns) with Gaussian noise of std `noise`.
"""

from __future__ import annotations

import torch
from torch import nn

from accelbench.train import data
from accelbench.train.models import Options, adam
from accelbench.train.nets import sequential_layers
from accelbench.train.synthetic import labelled_samples

PATTERNS = 10  # distinct image classes the synthetic clean images vary around


def build(options: Options) -> nn.Sequential:
    size, channels, width = options["image_size"], options["channels"], options["width"]
    if size % 4:
        raise ValueError(f"autoencoder: image_size must be a multiple of 4; got {size}")
    return nn.Sequential(
        nn.Conv2d(channels, width, 3, 2, 1),
        nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, 2, 1),
        nn.ReLU(),
        nn.ConvTranspose2d(2 * width, width, 3, 2, 1, output_padding=1),
        nn.ReLU(),
        nn.ConvTranspose2d(width, channels, 3, 2, 1, output_padding=1),
    )


def make_batch(generator, batch: int, options: Options):
    size, channels = options["image_size"], options["channels"]
    clean, _ = labelled_samples(generator, batch, PATTERNS, (channels, size, size), noise=0.3)
    noisy = clean + options["noise"] * torch.randn(clean.shape, generator=generator)
    return noisy, clean


def real_data(root, options: Options, seed: int):
    if options["channels"] != 1 or options["image_size"] != 28:
        raise data.DataMismatch(
            f"MNIST images are 1 x 28 x 28; the options ask for "
            f"{options['channels']} x {options['image_size']} x {options['image_size']}"
        )
    noise = options["noise"]

    def noisy_pair(index, sample, generator):
        clean = sample[0]
        return clean + noise * torch.randn(clean.shape, generator=generator), clean

    return data.PerSample(data.mnist(root), seed, noisy_pair)


loss = nn.MSELoss
optimizer = adam
layers = sequential_layers

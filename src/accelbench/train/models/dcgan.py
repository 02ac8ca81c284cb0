"""A DCGAN (Radford et al. 2016): one training step updates the discriminator, then the generator.

Generator: transposed convolutions from a latent vector up to the image
(BatchNorm, ReLU, tanh output); discriminator: strided convolutions down to one
logit (BatchNorm, LeakyReLU). The image side is a power of two >= 16. Its own
step (`gan_step`) trains both with Adam (lr 2e-4, beta1 0.5, as in the paper), so the strategy
wraps generator and discriminator separately and each has its own optimiser.
The recorded loss is the discriminator's. Trains on CIFAR-10 when present.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from accelbench.train import data
from accelbench.train.models import Options, Step
from accelbench.train.synthetic import labelled_samples

PATTERNS = 10  # distinct image classes the synthetic "real" images vary around


class DCGAN(nn.Module):
    """Holds both networks; sampling an image is the generator's forward."""

    def __init__(self, options: Options):
        super().__init__()
        size, latent = options["image_size"], options["latent"]
        channels, width = options["channels"], options["width"]
        ups = int(math.log2(size)) - 2
        if size < 16 or 2 ** (ups + 2) != size:
            raise ValueError(f"dcgan: image_size must be a power of two >= 16; got {size}")
        top = width * 2 ** (ups - 1)
        generator: list[nn.Module] = [
            nn.Unflatten(1, (latent, 1, 1)),
            nn.ConvTranspose2d(latent, top, 4, 1, 0, bias=False),
            nn.BatchNorm2d(top),
            nn.ReLU(),
        ]
        for level in range(ups - 1):
            wide = top // 2**level
            generator += [
                nn.ConvTranspose2d(wide, wide // 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(wide // 2),
                nn.ReLU(),
            ]
        generator += [nn.ConvTranspose2d(width, channels, 4, 2, 1, bias=False), nn.Tanh()]
        discriminator: list[nn.Module] = [
            nn.Conv2d(channels, width, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2),
        ]
        for level in range(ups - 1):
            wide = width * 2**level
            discriminator += [
                nn.Conv2d(wide, 2 * wide, 4, 2, 1, bias=False),
                nn.BatchNorm2d(2 * wide),
                nn.LeakyReLU(0.2),
            ]
        discriminator += [nn.Conv2d(top, 1, 4, 1, 0, bias=False), nn.Flatten(0)]
        self.generator = nn.Sequential(*generator)
        self.discriminator = nn.Sequential(*discriminator)
        for module in self.modules():
            if isinstance(module, nn.Conv2d | nn.ConvTranspose2d):
                nn.init.normal_(module.weight, 0.0, 0.02)
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.normal_(module.weight, 1.0, 0.02)
                nn.init.zeros_(module.bias)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        return self.generator(latent)


def gan_step(step: Step, real: torch.Tensor, latent: torch.Tensor) -> torch.Tensor:
    """Discriminator on real and generated images, then the generator against it."""
    generator, discriminator = step.parts
    generator_optimizer, discriminator_optimizer = step.optimizers
    count = real.shape[0]
    discriminator_optimizer.zero_grad(set_to_none=True)
    with step.autocast():
        fake = generator(latent)
        # One forward over real and fake together: DDP allows one forward per backward.
        logits = discriminator(torch.cat([real, fake.detach().to(real.dtype)]))
        labels = torch.cat([logits.new_ones(count), logits.new_zeros(count)])
        discriminator_loss = step.criterion(logits, labels)
    step.scaler.scale(discriminator_loss).backward()
    step.scaler.step(discriminator_optimizer)
    generator_optimizer.zero_grad(set_to_none=True)
    with step.autocast():
        logits = discriminator(fake)
        generator_loss = step.criterion(logits, logits.new_ones(count))
    step.scaler.scale(generator_loss).backward()
    step.scaler.step(generator_optimizer)
    step.scaler.update()
    return discriminator_loss.detach()


def make_batch(generator, batch: int, options: Options):
    size, channels = options["image_size"], options["channels"]
    patterns, _ = labelled_samples(generator, batch, PATTERNS, (channels, size, size), noise=0.3)
    return torch.tanh(patterns), torch.randn(batch, options["latent"], generator=generator)


def real_data(root, options: Options, seed: int):
    if options["channels"] != 3:
        raise data.DataMismatch(
            f"CIFAR-10 images have 3 channels; channels is {options['channels']}"
        )
    latent = options["latent"]

    def with_latent(index, sample, generator):
        return sample[0], torch.randn(latent, generator=generator)

    return data.PerSample(data.cifar10(root, options["image_size"]), seed, with_latent)


def optimizer(params, lr: float):
    return torch.optim.Adam(params, lr=lr, betas=(0.5, 0.999))


def parts(model: DCGAN) -> list[nn.Module]:
    return [model.generator, model.discriminator]


build = DCGAN
loss = nn.BCEWithLogitsLoss
train_step = gan_step

"""Where training batches come from: a synthetic pool, or a real dataset on disk.

Synthetic data is the default: a few deterministic batches (the model's own
learnable task) made before the loop and cycled. A model that names a real
dataset uses it instead when the dataset is present under `train.data_dir`
(accelbench.train.datasets: what each dataset is and how it is fetched). Each
batch is drawn on the host and moved to the device by the loop, which times
that separately from the step.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from accelbench.train.datasets import PTB_FILE
from accelbench.train.models import Options

log = logging.getLogger(__name__)

UNKNOWN_WORD = "<unk>"
END_OF_SENTENCE = "<eos>"


class DataMismatch(ValueError):
    """A dataset that does not fit a model's options (then the model trains on synthetic data)."""


# Loading ---------------------------------------------------------------------------------


def cifar10(root: Path, image_size: int, value_range: tuple[float, float] = (-1.0, 1.0)):
    """CIFAR-10 images (3, image_size, image_size) scaled to `value_range`, with labels."""
    import torchvision
    from torchvision.transforms import v2

    low, high = value_range
    steps = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
    if image_size != 32:
        steps.append(v2.Resize((image_size, image_size), antialias=True))
    steps.append(v2.Normalize([-low / (high - low)] * 3, [1.0 / (high - low)] * 3))
    return torchvision.datasets.CIFAR10(root, train=True, transform=v2.Compose(steps))


def cifar10_classes(root: Path, options: dict, seed: int):
    """CIFAR-10 for a classifier of `options["classes"]` classes at its image size: the
    `real_data` of the CIFAR networks (the seed is unused: no per-sample randomness)."""
    if options["classes"] != 10:
        raise DataMismatch(f"CIFAR-10 has 10 classes; classes is {options['classes']}")
    return cifar10(root, options["image_size"])


def mnist(root: Path, flatten: bool = False):
    """MNIST digits as (1, 28, 28) floats in [0, 1] (or 784-vectors), with labels."""
    import torchvision
    from torchvision.transforms import v2

    steps = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
    if flatten:
        steps.append(v2.Lambda(lambda image: image.reshape(-1)))
    return torchvision.datasets.MNIST(root, train=True, transform=v2.Compose(steps))


def ptb_tokens(root: Path, vocab: int) -> torch.Tensor:
    """The corpus as token ids: the vocab-2 most frequent words, <unk> (1) for the rest.

    Id 0 is kept free (the mask token of the masked-language-model task), as in
    the synthetic token chain.
    """
    words = []
    for line in (root / PTB_FILE).read_text(encoding="utf-8").splitlines():
        words.extend(line.split() + [END_OF_SENTENCE])
    frequent = [word for word, _ in Counter(words).most_common() if word != UNKNOWN_WORD]
    ids = {word: index + 2 for index, word in enumerate(frequent[: vocab - 2])}
    return torch.tensor([ids.get(word, 1) for word in words], dtype=torch.long)


class TokenWindows(torch.utils.data.Dataset):
    """Consecutive windows of `length` tokens from a corpus, each turned into a sample by `task`."""

    def __init__(self, tokens: torch.Tensor, length: int, task: Callable[[int, torch.Tensor], Any]):
        if len(tokens) < length:
            raise ValueError(
                f"the corpus has {len(tokens)} tokens, fewer than one window ({length})"
            )
        self.tokens, self.length, self.task = tokens, length, task

    def __len__(self) -> int:
        return len(self.tokens) // self.length

    def __getitem__(self, index: int):
        start = index * self.length
        return self.task(index, self.tokens[start : start + self.length])


class PerSample(torch.utils.data.Dataset):
    """A dataset whose samples are remade by `make(index, sample, generator)`.

    The generator is seeded from (seed, index), so random parts of a sample
    (denoising noise, a GAN's latent vector) are the same wherever it is drawn.
    """

    def __init__(self, base, seed: int, make: Callable[[int, Any, torch.Generator], Any]):
        self.base, self.seed, self.make = base, seed, make

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, index: int):
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        return self.make(index, self.base[index], generator)


# Sources of batches ----------------------------------------------------------------------


def shard(obj, rank: int, world_size: int):
    """This process's contiguous share of a batch (tensors or nested tuples, split on dim 0)."""
    if isinstance(obj, tuple | list):
        return tuple(shard(item, rank, world_size) for item in obj)
    size = obj.shape[0] // world_size
    return obj[rank * size : (rank + 1) * size]


def _as_tuples(obj):
    """DataLoader's collate turns tuples into lists; batches here are tuples."""
    if isinstance(obj, tuple | list):
        return tuple(_as_tuples(item) for item in obj)
    return obj


class SyntheticSource:
    """A pool of synthetic global batches, cycled; each process takes its share of each."""

    def __init__(self, pool: list, rank: int = 0, world_size: int = 1):
        self.batches = [shard(batch, rank, world_size) for batch in pool]
        self.index = 0

    def next(self):
        batch = self.batches[self.index % len(self.batches)]
        self.index += 1
        return batch


class LoaderSource:
    """Batches from a DataLoader over a real dataset, epoch after epoch, in seeded order."""

    def __init__(self, dataset, batch: int, seed: int, rank: int = 0, world_size: int = 1):
        per_process = batch // world_size
        if len(dataset) < batch:
            raise ValueError(
                f"the dataset has {len(dataset)} samples, fewer than one batch ({batch})"
            )
        sampler = None
        if world_size > 1:
            sampler = torch.utils.data.DistributedSampler(
                dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed, drop_last=True
            )
        self.sampler = sampler
        self.loader = torch.utils.data.DataLoader(
            dataset,
            batch_size=per_process,
            shuffle=sampler is None,
            sampler=sampler,
            drop_last=True,
            generator=torch.Generator().manual_seed(seed),
        )
        self.epoch = 0
        self.iterator: Iterator = self._start_epoch()

    def _start_epoch(self) -> Iterator:
        if self.sampler is not None:
            self.sampler.set_epoch(self.epoch)
        return iter(self.loader)

    def next(self):
        try:
            return _as_tuples(next(self.iterator))
        except StopIteration:
            self.epoch += 1
            self.iterator = self._start_epoch()
            return _as_tuples(next(self.iterator))


def ptb_next_tokens(root, options: Options, seed: int) -> TokenWindows:
    """Penn Treebank windows of options["seq_len"] tokens, each with its next-token targets."""
    from accelbench.train.synthetic import next_token_task

    tokens = ptb_tokens(root, options["vocab"])
    return TokenWindows(
        tokens, options["seq_len"] + 1, lambda index, window: next_token_task(window)
    )

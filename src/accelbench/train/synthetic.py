"""Deterministic synthetic data that a model can actually learn.

Random inputs with random labels only let a network memorise; these tasks have
structure, so a falling loss means the training step works. Everything is drawn
from the generator the loop passes in. The fixed parts of a task (class
templates, the token chain, a teacher network) come from a second generator
seeded with the first one's initial seed, so every batch drawn from one seed
poses the same task, and every process of a distributed run sees the same data.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

MASK_TOKEN = 0  # token id the masked-language-model task puts in place of a hidden token
IGNORE_INDEX = -100  # target of positions that carry no loss (nn.CrossEntropyLoss default)


def task_generator(generator: torch.Generator, salt: int = 0) -> torch.Generator:
    """A generator for the fixed parts of a task: the same for every batch of one seed."""
    return torch.Generator().manual_seed(generator.initial_seed() * 1_000_003 + salt)


def class_templates(generator: torch.Generator, classes: int, shape: Sequence[int]) -> torch.Tensor:
    """One fixed random pattern per class, shape (classes, *shape)."""
    return torch.randn(classes, *shape, generator=task_generator(generator))


def labelled_samples(
    generator: torch.Generator, batch: int, classes: int, shape: Sequence[int], noise: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Samples = the class's template plus Gaussian noise; labels uniform over the classes."""
    templates = class_templates(generator, classes, shape)
    labels = torch.randint(0, classes, (batch,), generator=generator)
    samples = templates[labels] + noise * torch.randn(batch, *shape, generator=generator)
    return samples, labels


def token_chain(
    generator: torch.Generator, batch: int, length: int, vocab: int, follow: float = 0.8
) -> torch.Tensor:
    """Token sequences (batch, length) from a Markov chain with a fixed successor per token.

    With probability `follow` the next token is the current one's successor
    (a fixed permutation), otherwise uniform: a language model can learn it and
    its loss falls from log(vocab) towards the chain's entropy. Token 0 is
    never drawn, so the masked-language-model task can use it as the mask.
    """
    successor = torch.randperm(vocab - 1, generator=task_generator(generator)) + 1
    tokens = torch.empty(batch, length, dtype=torch.long)
    tokens[:, 0] = torch.randint(1, vocab, (batch,), generator=generator)
    for position in range(1, length):
        follows = torch.rand(batch, generator=generator) < follow
        anywhere = torch.randint(1, vocab, (batch,), generator=generator)
        tokens[:, position] = torch.where(follows, successor[tokens[:, position - 1] - 1], anywhere)
    return tokens


def next_token_task(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Language modelling: inputs are tokens[..., :-1], targets the tokens one step later."""
    return tokens[..., :-1].contiguous(), tokens[..., 1:].contiguous()


def masked_token_task(
    generator: torch.Generator, tokens: torch.Tensor, fraction: float = 0.15
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked language modelling: hide `fraction` of the tokens; targets only where hidden."""
    hidden = torch.rand(tokens.shape, generator=generator) < fraction
    hidden[..., 0] |= ~hidden.any(dim=-1)  # every sequence carries some loss
    inputs = tokens.masked_fill(hidden, MASK_TOKEN)
    targets = tokens.masked_fill(~hidden, IGNORE_INDEX)
    return inputs, targets


def random_edges(generator: torch.Generator, batch: int, nodes: int, degree: int) -> torch.Tensor:
    """Edge lists (batch, 2, nodes * degree): every node links to `degree` random nodes."""
    sources = torch.arange(nodes).repeat_interleave(degree).expand(batch, -1)
    targets = torch.randint(0, nodes, (batch, nodes * degree), generator=generator)
    return torch.stack([sources, targets], dim=1).contiguous()


def image_batch(generator: torch.Generator, batch: int, options: dict) -> tuple[torch.Tensor, ...]:
    """RGB images of options["image_size"] and their labels, for the image classifiers."""
    size = options["image_size"]
    return labelled_samples(generator, batch, options["classes"], (3, size, size))


def next_token_batch(generator: torch.Generator, batch: int, options: dict):
    """A language-modelling batch of options["seq_len"] tokens from the token chain."""
    tokens = token_chain(generator, batch, options["seq_len"] + 1, options["vocab"])
    return next_token_task(tokens)

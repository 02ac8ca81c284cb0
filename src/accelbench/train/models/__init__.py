"""Model registry: one module per model, each declaring a `SPEC`.

A model declares how to build it, the shape of one input sample, how to make a
deterministic synthetic batch, and its loss, so the training loop needs to know
nothing about any particular network.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelbench.registry import discover


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str  # "cnn", "rnn", "transformer", "autoencoder", ...
    description: str
    build: Callable[[dict[str, Any]], Any]  # options -> torch.nn.Module
    make_batch: Callable[[Any, int, dict[str, Any]], tuple[Any, Any]]  # (generator, batch, opts)
    loss: Callable[[], Any]  # -> loss module
    default_batch: int


def models() -> dict[str, ModelSpec]:
    """All registered models by name."""
    return discover(__name__)

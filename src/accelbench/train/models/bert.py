"""A BERT-style Transformer encoder trained as a masked language model.

Token and position embeddings, pre-norm encoder layers (GELU, no dropout) and a
linear head to the vocabulary; 15% of the tokens are hidden and predicted from
both sides. Small by default; BERT-base is dim 768, heads 12, layers 12,
ff 3072, vocab 30522, seq_len 512 (config/cluster.yaml uses a mid size).
Trains on the Penn Treebank when present, otherwise on a learnable token chain.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from accelbench.train import data
from accelbench.train.models import ModelSpec, adam
from accelbench.train.nets import (
    SequenceCrossEntropy,
    TokenEmbedding,
    TransformerBlock,
    sequential_layers,
)
from accelbench.train.synthetic import masked_token_task, token_chain


def build(options: dict[str, Any]) -> nn.Sequential:
    dim = options["dim"]
    blocks = [
        TransformerBlock(dim, options["heads"], options["ff"], causal=False)
        for _ in range(options["layers"])
    ]
    head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, options["vocab"]))
    return nn.Sequential(TokenEmbedding(options["vocab"], dim, options["seq_len"]), *blocks, head)


def make_batch(generator, batch: int, options: dict[str, Any]):
    tokens = token_chain(generator, batch, options["seq_len"], options["vocab"])
    return masked_token_task(generator, tokens)


def real_data(root, options: dict[str, Any], seed: int):
    tokens = data.ptb_tokens(root, options["vocab"])
    windows = data.TokenWindows(tokens, options["seq_len"], lambda index, window: window)
    return data.PerSample(
        windows, seed, lambda index, window, generator: masked_token_task(generator, window)
    )


SPEC = ModelSpec(
    name="bert",
    family="transformer",
    description="BERT-style Transformer encoder, masked language model",
    build=build,
    make_batch=make_batch,
    loss=SequenceCrossEntropy,
    default_batch=16,
    options={
        "lr": 0.001,
        "vocab": 1000,
        "dim": 128,
        "heads": 4,
        "layers": 2,
        "ff": 512,
        "seq_len": 64,
    },
    tiny_options={
        "lr": 0.01,
        "vocab": 16,
        "dim": 8,
        "heads": 2,
        "layers": 2,
        "ff": 16,
        "seq_len": 8,
    },
    optimizer=adam,
    layers=sequential_layers,
    dataset="ptb",
    real_data=real_data,
)

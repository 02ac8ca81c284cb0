"""A BERT-style Transformer encoder trained as a masked language model.

Token and position embeddings, pre-norm encoder layers (GELU, no dropout) and a
linear head to the vocabulary; 15% of the tokens are hidden and predicted from
both sides. Small by default; BERT-base is dim 768, heads 12, layers 12,
ff 3072, vocab 30522, seq_len 512 (config/cluster.yaml uses a mid size).
Trains on the Penn Treebank when present, otherwise on a learnable token chain.
"""

from __future__ import annotations

from torch import nn

from accelbench.train import data
from accelbench.train.models import Options, adam
from accelbench.train.nets import (
    SequenceCrossEntropy,
    sequential_layers,
    transformer,
)
from accelbench.train.synthetic import masked_token_task, token_chain


def build(options: Options) -> nn.Sequential:
    return transformer(options, causal=False)


def make_batch(generator, batch: int, options: Options):
    tokens = token_chain(generator, batch, options["seq_len"], options["vocab"])
    return masked_token_task(generator, tokens)


def real_data(root, options: Options, seed: int):
    tokens = data.ptb_tokens(root, options["vocab"])
    windows = data.TokenWindows(tokens, options["seq_len"], lambda index, window: window)
    return data.PerSample(
        windows, seed, lambda index, window, generator: masked_token_task(generator, window)
    )


loss = SequenceCrossEntropy
optimizer = adam
layers = sequential_layers

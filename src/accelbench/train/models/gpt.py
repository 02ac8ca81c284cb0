"""A GPT-style decoder-only Transformer language model.

Token and position embeddings, pre-norm layers with causal self-attention
(each position sees only earlier ones), a final LayerNorm and a linear head;
trained to predict the next token. Small by default; GPT-2 small is dim 768,
heads 12, layers 12, ff 3072, vocab 50257, seq_len 1024. Trains on the Penn
Treebank when present, otherwise on a learnable token chain.
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
from accelbench.train.synthetic import next_token_batch


def build(options: Options) -> nn.Sequential:
    return transformer(options, causal=True)


make_batch = next_token_batch
loss = SequenceCrossEntropy
optimizer = adam
layers = sequential_layers
real_data = data.ptb_next_tokens

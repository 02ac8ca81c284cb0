"""An LSTM language model (as the LSTM of Shi et al. 2016, on the Penn Treebank).

Embedding, stacked single-layer LSTMs and a linear decoder to the vocabulary,
trained to predict the next token of each position (truncated back-propagation
over `seq_len` steps, state reset every batch). Trains on the Penn Treebank
when present under train.data_dir, otherwise on a learnable token chain.
"""

from __future__ import annotations

import torch
from torch import nn

from accelbench.train import data
from accelbench.train.models import Options, adam
from accelbench.train.nets import SequenceCrossEntropy, sequential_layers
from accelbench.train.synthetic import next_token_batch


class LSTMLayer(nn.Module):
    """One LSTM layer that returns only its output sequence, so layers chain."""

    def __init__(self, size_in: int, size_out: int):
        super().__init__()
        self.lstm = nn.LSTM(size_in, size_out, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lstm(x)[0]


def build(options: Options) -> nn.Sequential:
    embed, hidden = options["embed"], options["hidden"]
    layers: list[nn.Module] = [nn.Embedding(options["vocab"], embed)]
    for index in range(options["layers"]):
        layers.append(LSTMLayer(embed if index == 0 else hidden, hidden))
    layers.append(nn.Linear(hidden, options["vocab"]))
    return nn.Sequential(*layers)


make_batch = next_token_batch
loss = SequenceCrossEntropy
optimizer = adam
layers = sequential_layers
real_data = data.ptb_next_tokens

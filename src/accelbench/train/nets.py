"""Building blocks several models share: token embeddings, sequence losses, layer lists.

Every block maps one tensor to one tensor, so a model built from them is an
`nn.Sequential` whose children are its layer sequence (split by the pipeline
strategy, sharded block by block by FSDP).
"""

from __future__ import annotations

import torch
from torch import nn

from accelbench.train.synthetic import IGNORE_INDEX


class TokenEmbedding(nn.Module):
    """Token plus learned position embeddings, as in BERT and GPT."""

    def __init__(self, vocab: int, dim: int, max_length: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(max_length, dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.tokens(tokens) + self.positions(positions)


class TransformerBlock(nn.Module):
    """One pre-norm encoder layer; with `causal` each position sees only earlier ones."""

    def __init__(self, dim: int, heads: int, ff: int, causal: bool):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(
            dim, heads, ff, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.causal = causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.causal:
            return self.layer(x)
        mask = nn.Transformer.generate_square_subsequent_mask(
            x.shape[1], device=x.device, dtype=x.dtype
        )
        return self.layer(x, src_mask=mask, is_causal=True)


def transformer(options: dict, causal: bool) -> nn.Sequential:
    """Embeddings, pre-norm blocks, a final LayerNorm and a head to the vocabulary."""
    dim = options["dim"]
    blocks = [
        TransformerBlock(dim, options["heads"], options["ff"], causal=causal)
        for _ in range(options["layers"])
    ]
    head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, options["vocab"]))
    return nn.Sequential(TokenEmbedding(options["vocab"], dim, options["seq_len"]), *blocks, head)


class SequenceCrossEntropy(nn.Module):
    """Cross-entropy over every position of (batch, length, vocab) logits; -100 is ignored."""

    def __init__(self):
        super().__init__()
        self.loss = nn.CrossEntropyLoss(ignore_index=IGNORE_INDEX)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.loss(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def torchvision_resnet_layers(model) -> list[nn.Module]:
    """A torchvision ResNet's forward as a block sequence (stem, stages, pooling, head)."""
    return [
        nn.Sequential(model.conv1, model.bn1, model.relu, model.maxpool),
        model.layer1,
        model.layer2,
        model.layer3,
        model.layer4,
        nn.Sequential(model.avgpool, nn.Flatten(1), model.fc),
    ]


def sequential_layers(model: nn.Sequential) -> list[nn.Module]:
    return list(model)


def check_image_size(name: str, image_size: int, minimum: int) -> None:
    if image_size < minimum:
        raise ValueError(f"{name} needs image_size >= {minimum}; got {image_size}")

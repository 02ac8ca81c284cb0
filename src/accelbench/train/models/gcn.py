"""A graph convolutional network (Kipf and Welling 2017) on a sparse adjacency, plain PyTorch.

A batch is a set of graphs of `nodes` nodes each, given as node features
(batch, nodes, features) and edge lists (batch, 2, edges); the forward pass
builds the block-diagonal, symmetrically normalised adjacency with self-loops
as one sparse COO matrix and propagates with `torch.sparse.mm`. Graph
classification: mean over nodes, then a linear layer. Under mixed precision the
sparse products stay in float32 (PyTorch's sparse kernels have no half-precision
backward); the dense layers run in the autocast type. In the synthetic task a
graph's node features are its class pattern under heavy noise, so averaging
over neighbours (what the convolution does) is what makes them readable.
"""

from __future__ import annotations

import torch
from torch import nn

from accelbench.train.models import Options, adam
from accelbench.train.synthetic import class_templates, random_edges

NODE_NOISE = 2.0


def normalized_adjacency(edges: torch.Tensor, nodes: int, dtype: torch.dtype) -> torch.Tensor:
    """D^-1/2 (A + I) D^-1/2 of all graphs as one sparse (batch*nodes)^2 matrix, A symmetric."""
    graphs = edges.shape[0]
    offsets = (torch.arange(graphs, device=edges.device) * nodes).view(graphs, 1)
    sources, targets = (edges[:, 0] + offsets).reshape(-1), (edges[:, 1] + offsets).reshape(-1)
    loops = torch.arange(graphs * nodes, device=edges.device)
    rows = torch.cat([sources, targets, loops])
    cols = torch.cat([targets, sources, loops])
    size = graphs * nodes
    values = torch.ones(rows.shape[0], dtype=dtype, device=edges.device)
    adjacency = torch.sparse_coo_tensor(
        torch.stack([rows, cols]), values, (size, size), check_invariants=False
    )
    adjacency = adjacency.coalesce()
    degree = torch.zeros(size, dtype=dtype, device=edges.device).index_add_(
        0, adjacency.indices()[0], adjacency.values()
    )
    row, col = adjacency.indices()
    scale = (degree[row] * degree[col]).rsqrt()
    return torch.sparse_coo_tensor(
        adjacency.indices(),
        adjacency.values() * scale,
        (size, size),
        is_coalesced=True,
        check_invariants=False,  # built from valid indices above; checking costs a pass
    )


class GCN(nn.Module):
    def __init__(self, options: Options):
        super().__init__()
        widths = [options["features"]] + [options["hidden"]] * options["layers"]
        self.convolutions = nn.ModuleList(
            nn.Linear(width_in, width_out)
            for width_in, width_out in zip(widths, widths[1:], strict=False)
        )
        self.head = nn.Linear(widths[-1], options["classes"])

    def forward(self, features: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        graphs, nodes, _ = features.shape
        adjacency = normalized_adjacency(edges, nodes, features.dtype)
        hidden = features.reshape(graphs * nodes, -1)
        for convolution in self.convolutions:
            support = convolution(hidden)
            with torch.autocast(support.device.type, enabled=False):
                hidden = torch.relu(torch.sparse.mm(adjacency, support.to(adjacency.dtype)))
        return self.head(hidden.reshape(graphs, nodes, -1).mean(dim=1))


def make_batch(generator, batch: int, options: Options):
    nodes, width = options["nodes"], options["features"]
    templates = class_templates(generator, options["classes"], (width,))
    labels = torch.randint(0, options["classes"], (batch,), generator=generator)
    noise = NODE_NOISE * torch.randn(batch, nodes, width, generator=generator)
    features = templates[labels].unsqueeze(1) + noise
    edges = random_edges(generator, batch, nodes, options["degree"])
    return (features, edges), labels


build = GCN
loss = nn.CrossEntropyLoss
optimizer = adam

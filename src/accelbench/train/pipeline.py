"""Model parallelism: a model's layers split into stages on their own devices, micro-batched.

The layer sequence is cut into contiguous stages of about equal cost (forward
FLOPs per layer, counted on a small sample) and stage i lives on device i. A
mini-batch is cut into micro-batches that enter the pipeline one after the
other (GPipe's schedule, one process): because CUDA runs kernels
asynchronously, stage i works on micro-batch m while stage i+1 still works on
m-1. Backward runs through autograd, one engine thread per device. On CPU
devices the same code runs without the overlap, which is how it is tested.
"""

from __future__ import annotations

import torch
from torch import nn


def balanced_split(costs: list[float], stages: int) -> list[int]:
    """Boundaries [0, b1, ..., len(costs)] of `stages` contiguous non-empty groups.

    Minimises the largest group's cost (linear partition by dynamic programming),
    so the slowest stage, which sets the pipeline's pace, is as fast as it can be.
    """
    count = len(costs)
    if stages < 1 or stages > count:
        raise ValueError(f"cannot split {count} layers into {stages} non-empty stages")
    prefix = [0.0]
    for cost in costs:
        prefix.append(prefix[-1] + cost)
    # best[k][i]: smallest maximum stage cost of the first i layers in k stages.
    best = [[float("inf")] * (count + 1) for _ in range(stages + 1)]
    cut = [[0] * (count + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        for i in range(k, count + 1):
            for j in range(k - 1, i):
                candidate = max(best[k - 1][j], prefix[i] - prefix[j])
                if candidate < best[k][i]:
                    best[k][i], cut[k][i] = candidate, j
    boundaries = [count]
    for k in range(stages, 0, -1):
        boundaries.append(cut[k][boundaries[-1]])
    return boundaries[::-1]


def layer_costs(layers: list[nn.Module], sample: torch.Tensor) -> list[float]:
    """Forward FLOPs of each layer on `sample` (1 for layers without matmuls or convolutions).

    Layers run in evaluation mode, so that counting leaves BatchNorm's running statistics alone.
    """
    from torch.utils.flop_counter import FlopCounterMode

    costs = []
    with torch.no_grad():
        for layer in layers:
            training = layer.training
            layer.eval()
            with FlopCounterMode(display=False) as counter:
                sample = layer(sample)
            layer.train(training)
            costs.append(float(max(counter.get_total_flops(), 1)))
    return costs


class Pipeline(nn.Module):
    """Stages of layers on `devices`; forward feeds `microbatches` chunks through them in turn."""

    def __init__(
        self,
        layers: list[nn.Module],
        devices: list[torch.device],
        microbatches: int,
        costs: list[float],
    ):
        super().__init__()
        if len(layers) < len(devices):
            raise ValueError(
                f"the model has {len(layers)} layers, fewer than {len(devices)} pipeline stages"
            )
        boundaries = balanced_split(costs, len(devices))
        self.stages = nn.ModuleList(
            nn.Sequential(*layers[start:end]).to(device)
            for start, end, device in zip(boundaries, boundaries[1:], devices, strict=False)
        )
        self.devices = list(devices)
        self.microbatches = microbatches
        self.boundaries = boundaries

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        chunks = list(inputs.chunk(self.microbatches))
        count, stages = len(chunks), len(self.stages)
        # Fill and drain: at tick t, stage s processes micro-batch t - s.
        for tick in range(count + stages - 1):
            for stage in reversed(range(stages)):
                index = tick - stage
                if 0 <= index < count:
                    moved = chunks[index].to(self.devices[stage])
                    chunks[index] = self.stages[stage](moved)
        return torch.cat(chunks)

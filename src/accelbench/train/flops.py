"""FLOPs of one training step per sample, counted by torch.utils.flop_counter.FlopCounterMode.

The count runs the model's own training step (forward, backward, optimiser)
once on a fresh copy of the model with a small synthetic batch, on the `meta`
device: shapes only, no arithmetic, so even ImageNet-size networks are counted
in a moment. FLOPs scale linearly with the batch, so the count divided by the
batch is the cost of one sample. FlopCounterMode counts matrix multiplications,
convolutions and attention; elementwise work and optimiser updates are not
counted. A model with an operation that has no meta kernel (the GCN's sparse
products) is counted on the CPU instead, with oneDNN off so that fused
recurrent kernels decompose into countable matrix products; sparse products
themselves are not counted.
"""

from __future__ import annotations

import warnings

import torch
from torch.utils.flop_counter import FlopCounterMode

from accelbench.train.models import ModelSpec, new_step

SAMPLES = 2  # BatchNorm needs more than one value per channel in training mode


def _on(obj, device: str):
    if isinstance(obj, tuple | list):
        return tuple(_on(item, device) for item in obj)
    return obj.to(device)


def _count(spec: ModelSpec, options: dict, seed: int, device: str) -> int:
    with torch.random.fork_rng(devices=[]), torch.device(device):
        model = spec.build(options)  # its own copy: the experiment's model stays untouched
    inputs, targets = spec.make_batch(torch.Generator().manual_seed(seed), SAMPLES, options)
    parts = spec.parts(model)
    step = new_step(spec, parts, options["lr"])
    with FlopCounterMode(display=False) as counter:
        spec.train_step(step, _on(inputs, device), _on(targets, device))
    return counter.get_total_flops()


def flops_per_sample(spec: ModelSpec, options: dict, seed: int) -> float:
    """FLOPs of one training step divided by the samples in it."""
    try:
        flops = _count(spec, options, seed, "meta")
    except NotImplementedError:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # oneDNN's flag context warns about Intel GPUs
            with torch.backends.mkldnn.flags(enabled=False):
                flops = _count(spec, options, seed, "cpu")
    return flops / SAMPLES

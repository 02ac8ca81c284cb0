"""FLOPs of one training step per sample, counted by torch.utils.flop_counter.FlopCounterMode.

The count runs the model's own training step (forward, backward, optimiser)
once on a copy of the model, on the CPU in float32, with a small synthetic
batch; FLOPs scale linearly with the batch, so the count divided by the batch
is the cost of one sample. FlopCounterMode counts matrix multiplications,
convolutions and attention; elementwise work, optimiser updates and sparse
products (the GCN's propagation) are not counted. oneDNN is switched off while
counting so that fused recurrent kernels (LSTM) decompose into countable
matrix products; the model itself trains with it.
"""

from __future__ import annotations

import contextlib
import copy
import warnings

import torch
from torch.utils.flop_counter import FlopCounterMode

from accelbench.train.models import ModelSpec, Step

SAMPLES = 2  # BatchNorm needs more than one value per channel in training mode


def flops_per_sample(spec: ModelSpec, model, options: dict, seed: int) -> float:
    """FLOPs of one training step divided by the samples in it (model untouched)."""
    clone = copy.deepcopy(model).float().cpu()
    inputs, targets = spec.make_batch(torch.Generator().manual_seed(seed), SAMPLES, options)
    parts = spec.parts(clone)
    step = Step(
        parts=parts,
        optimizers=[spec.optimizer(part.parameters(), options["lr"]) for part in parts],
        criterion=spec.loss(),
        autocast=contextlib.nullcontext,
        scaler=torch.amp.GradScaler("cpu", enabled=False),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # oneDNN's flag context warns about Intel GPUs
        with torch.backends.mkldnn.flags(enabled=False), FlopCounterMode(display=False) as counter:
            spec.train_step(step, inputs, targets)
    return counter.get_total_flops() / SAMPLES

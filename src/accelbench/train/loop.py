"""The measured training loop: fixed steps on synthetic data, time per mini-batch.

Each step is timed on the host clock between two device synchronisations, so
the time covers the whole forward, backward and optimiser update and nothing
queued from an earlier step. Warm-up steps (allocator growth, cuDNN autotuning,
lazy initialisation) are run but not counted. Inputs are generated and moved to
the device before the loop: data loading is not part of this measurement.
"""

from __future__ import annotations

import contextlib
import math
import resource
import time
from typing import Any

from accelbench import timing
from accelbench.devices import cpu_threads, cuda_unavailable_reason, parse_device
from accelbench.grid import TrainExperiment
from accelbench.train.models import models

BATCH_POOL = 4  # distinct synthetic batches cycled through, so the loss can fall
LEARNING_RATE = 0.01


def precision_unavailable_reason(precision: str, is_gpu: bool) -> str | None:
    """A precision the device cannot do; asked once the device itself is known to exist."""
    import torch

    if precision == "bf16" and is_gpu and not torch.cuda.is_bf16_supported():
        return f"this GPU ({torch.cuda.get_device_name(0)}) does not support bfloat16"
    return None


def _autocast(precision: str, device_type: str):
    import torch

    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
    if precision in dtypes:
        return torch.autocast(device_type=device_type, dtype=dtypes[precision])
    return contextlib.nullcontext()


@contextlib.contextmanager
def _tensor_cores(allow_tf32: bool):
    """TF32 on or off for this experiment only; the process-wide flags are restored after."""
    import torch

    previous = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = allow_tf32
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = previous


def _peak_memory(is_gpu: bool) -> dict[str, Any]:
    import torch

    if is_gpu:
        return timing.value(torch.cuda.max_memory_allocated(), "bytes")
    # ru_maxrss is in KiB on Linux; it is the whole process's peak resident set.
    return timing.value(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "bytes")


def measure_training(exp: TrainExperiment, settings: dict[str, Any]):
    """Train `exp.model` for warm-up + measured steps and summarise the per-step times."""
    import torch

    from accelbench.experiment import Outcome

    device = parse_device(exp.device)
    reason = cuda_unavailable_reason(device) or precision_unavailable_reason(
        exp.precision, device.is_gpu
    )
    if reason:
        return Outcome("unavailable", reason)
    spec = models()[exp.model]
    device_type = "cuda" if device.is_gpu else "cpu"
    target = torch.device("cuda:0" if device.is_gpu else "cpu")
    options = {"image_size": settings["image_size"]}
    synchronize = torch.cuda.synchronize if device.is_gpu else (lambda: None)

    with cpu_threads(device), _tensor_cores(exp.precision == "tf32"):
        torch.manual_seed(settings["seed"])
        model = spec.build(options).to(target)
        generator = torch.Generator().manual_seed(settings["seed"])
        pool = [spec.make_batch(generator, exp.batch, options) for _ in range(BATCH_POOL)]
        if exp.precision == "fp64":
            model = model.double()
            pool = [(x.double() if x.is_floating_point() else x, y) for x, y in pool]
        pool = [(x.to(target), y.to(target)) for x, y in pool]
        criterion = spec.loss()
        optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=0.9)
        scaler = torch.amp.GradScaler(device_type, enabled=exp.precision == "fp16")
        model.train()

        def step(index: int) -> torch.Tensor:
            inputs, targets = pool[index % BATCH_POOL]
            optimizer.zero_grad(set_to_none=True)
            with _autocast(exp.precision, device_type):
                loss = criterion(model(inputs), targets)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            return loss.detach()

        if device.is_gpu:
            torch.cuda.reset_peak_memory_stats()
        warmup, steps = settings["warmup_steps"], settings["steps"]
        step_times, losses = [], []
        for index in range(warmup + steps):
            synchronize()
            started = time.perf_counter()
            loss = step(index)
            synchronize()
            elapsed = time.perf_counter() - started
            losses.append(float(loss))
            if index >= warmup:
                step_times.append(elapsed)

    if not all(math.isfinite(value) for value in losses[warmup:]):
        return Outcome("failed", f"loss is not finite during the measured steps: {losses[-3:]}")
    time_stats = timing.summarize(step_times, "s")
    metrics = {
        "time_per_batch": time_stats,
        "throughput": timing.rate_from_time(time_stats, exp.batch, "samples/s"),
        "peak_memory": _peak_memory(device.is_gpu),
        "loss_first": timing.value(losses[0], "loss"),
        "loss_last": timing.value(losses[-1], "loss"),
        "parameters": timing.value(sum(p.numel() for p in model.parameters()), "count"),
    }
    return Outcome("ok", metrics=metrics)

"""Parallelism strategies: how many processes an experiment runs and how its model is wrapped.

- `single`: one process, one device (cpuN: N threads; cuda1).
- `dp`: one process driving K GPUs with `nn.DataParallel` (cudaK, K >= 2), its
  replicas in the step's autocast dtype (accelbench.train.data_parallel).
- `ddp`: one process per GPU (cudaK, NxKcuda; NCCL) or per CPU core (cpuN: N
  processes with one thread each, NxKcpu: K on each of N nodes; gloo),
  `DistributedDataParallel`.
- `fsdp`: the same processes, parameters sharded with FSDP2's `fully_shard`,
  block by block where the model declares its layers.
- `pipeline`: one process, the layers split into K stages on K GPUs
  (accelbench.train.pipeline).

The batch size of an experiment is the global mini-batch: data-parallel
strategies split it evenly over their replicas, so time per mini-batch is
comparable across strategies (as in Shi et al.'s multi-GPU runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accelbench.platform.devices import Device

STRATEGY_NAMES = ("single", "dp", "ddp", "fsdp", "pipeline")
DISTRIBUTED = ("ddp", "fsdp")
COMPILABLE = ("single", "ddp")  # strategies torch.compile is applied with


def process_count(strategy: str, device: Device) -> int:
    """Processes an experiment runs: one per GPU or CPU core for ddp/fsdp, else one."""
    return device.units if strategy in DISTRIBUTED else 1


def threads_per_process(strategy: str, device: Device) -> int:
    """CPU threads each process uses: cpuN single runs N; ddp/fsdp on cpuN run one per process."""
    if device.is_gpu or strategy in DISTRIBUTED:
        return 1
    return device.count


def exclusion(strategy: str, device: Device, batch: int, has_layers: bool) -> str | None:
    """Why `strategy` makes no sense on `device` for this batch and model, or None."""
    if strategy == "single":
        if device.is_gpu and device.gpus != 1:
            return f"strategy 'single' uses one GPU; {device.name} asks for {device.gpus}"
        if device.nodes > 1:
            return (
                f"strategy 'single' runs one process on one node; "
                f"{device.name} spans {device.nodes}"
            )
        return None
    if strategy in ("dp", "pipeline"):
        what = (
            "DataParallel replicates the model" if strategy == "dp" else "a pipeline splits layers"
        )
        if not device.is_gpu:
            return (
                f"{what} across GPUs; a CPU is one device "
                f"(use 'ddp' for several CPU processes, 'single' for several threads)"
            )
        if device.nodes > 1:
            return f"{strategy} runs in one process on one node; {device.name} spans {device.nodes}"
        if device.count < 2:
            return f"{strategy} needs at least 2 GPUs; {device.name} has one (use 'single')"
        if strategy == "pipeline" and not has_layers:
            return "the model declares no layer sequence to split into pipeline stages"
        return None
    processes = process_count(strategy, device)
    if processes < 2:
        return f"{strategy} needs at least 2 processes; {device.name} gives one (use 'single')"
    if batch % processes:
        return f"batch {batch} does not split evenly over {processes} processes"
    return None


@dataclass(frozen=True)
class Placement:
    """Where one process computes: its input device, the device targets meet the output on,
    every device it drives (for synchronisation and peak memory), its rank in the group."""

    device: Any  # torch.device of the inputs
    output_device: Any
    devices: tuple = field(default=())
    rank: int = 0
    world_size: int = 1


def placement(strategy: str, device: Device, rank: int, world_size: int, local_gpu: int):
    """The torch devices of one process of an experiment."""
    import torch

    if not device.is_gpu:
        cpu = torch.device("cpu")
        return Placement(cpu, cpu, (cpu,), rank, world_size)
    if strategy in ("dp", "pipeline"):
        gpus = tuple(torch.device("cuda", index) for index in range(device.count))
        last = gpus[-1] if strategy == "pipeline" else gpus[0]
        return Placement(gpus[0], last, gpus, rank, world_size)
    gpu = torch.device("cuda", local_gpu)
    return Placement(gpu, gpu, (gpu,), rank, world_size)


def wrap(strategy: str, spec, model, place: Placement, microbatches: int, sample) -> list:
    """The model's parts (modules with their own optimiser), moved and wrapped for `strategy`."""
    parts = spec.parts(model)
    if strategy == "single":
        return [part.to(place.device) for part in parts]
    if strategy == "dp":
        from accelbench.train.data_parallel import PrecisionDataParallel  # imports torch

        ids = [gpu.index for gpu in place.devices]
        return [PrecisionDataParallel(part.to(place.device), device_ids=ids) for part in parts]
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [place.device.index] if place.device.type == "cuda" else None
        return [DistributedDataParallel(part.to(place.device), device_ids=ids) for part in parts]
    if strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard

        blocks = spec.layers(model) if spec.layers else []
        for part in parts:
            part.to(place.device)
            members = {id(module) for module in part.modules()}
            for block in blocks:
                # Only blocks the part's forward really calls, and that hold parameters.
                if id(block) in members and block is not part and _has_parameters(block):
                    fully_shard(block)
            fully_shard(part)
        return parts
    if strategy == "pipeline":
        from accelbench.train.pipeline import Pipeline, layer_costs

        (whole,) = parts
        layers = spec.layers(whole)
        inputs = sample[0]
        if inputs.is_floating_point():
            inputs = inputs.to(next(whole.parameters()).dtype)
        costs = layer_costs(layers, inputs)
        return [Pipeline(layers, list(place.devices), microbatches, costs)]
    raise ValueError(f"strategy {strategy!r} is not known; allowed: {', '.join(STRATEGY_NAMES)}")


def compile_parts(parts: list, backend: str) -> list:
    """torch.compile each part (after the strategy wrapped it, as DDP's documentation advises)."""
    import torch

    return [torch.compile(part, backend=backend) for part in parts]


def _has_parameters(module) -> bool:
    return next(module.parameters(), None) is not None

"""Everything one process trains with: model, strategy wrapping, optimisers, precision, data.

Built once before the timed loop; nothing here is measured except what the
record reports about the setup (parameters, FLOPs per sample, the data used).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from accelbench.platform.devices import Device
from accelbench.train import cpu_support, data, datasets, strategies
from accelbench.train.cells import TrainCell
from accelbench.train.flops import flops_per_sample
from accelbench.train.models import (
    ModelSpec,
    OptionValue,
    Step,
    Unavailable,
    models,
    new_step,
    resolve_options,
)
from accelbench.train.settings import TrainSettings

log = logging.getLogger(__name__)

BATCH_POOL = 4  # distinct synthetic batches cycled through, so the loss can fall
AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass
class Session:
    spec: ModelSpec
    model: Any  # the unwrapped model (its parts are what the step trains)
    step: Step
    source: Any  # data.SyntheticSource or data.LoaderSource
    move: Callable[[Any], tuple[Any, Any]]  # host batch -> (inputs, targets) on the devices
    placement: strategies.Placement
    options: dict[str, OptionValue]
    parameters: int
    flops_per_sample: float
    data: str  # "synthetic" or the dataset's name
    data_note: str | None

    def synchronize(self) -> None:
        for device in self.placement.devices:
            if device.type == "cuda":
                torch.cuda.synchronize(device)

    def train_step(self, inputs, targets) -> torch.Tensor:
        return self.spec.train_step(self.step, inputs, targets)


def _real_dataset(spec: ModelSpec, options: dict, settings: TrainSettings):
    """(dataset or None, data name, note): the model's real dataset if present and fitting."""
    if spec.dataset is None or not settings.data_dir:
        return None, "synthetic", None
    if not datasets.is_present(settings.data_dir, spec.dataset):
        return None, "synthetic", f"{spec.dataset} not found under {settings.data_dir}"
    root = datasets.dataset_root(settings.data_dir, spec.dataset)
    try:
        return spec.real_data(root, options, settings.seed), spec.dataset, None
    except data.DataMismatch as err:
        log.warning("%s: %s; training on synthetic data", spec.name, err)
        return None, "synthetic", f"{spec.dataset} not used: {err}"


def _mover(precision: str, channels_last: bool, place: strategies.Placement):
    """Host batch -> device batch: floats to float64 under fp64, images channels-last if asked."""

    def convert(obj, device):
        if isinstance(obj, tuple | list):
            return tuple(convert(item, device) for item in obj)
        if obj.is_floating_point():
            if precision == "fp64":
                obj = obj.double()
            if channels_last and obj.dim() == 4:
                return obj.to(device, memory_format=torch.channels_last)
        return obj.to(device)

    def move(batch):
        inputs, targets = batch
        return convert(inputs, place.device), convert(targets, place.output_device)

    return move


def build(exp: TrainCell, settings: TrainSettings, device: Device, place) -> Session:
    """Model, parts wrapped for the strategy, optimisers, scaler and data of this process."""
    spec = models()[exp.model]
    options = resolve_options(spec, settings.model_options, settings.image_size)
    torch.manual_seed(settings.seed)
    model = spec.build(options)
    _check_cpu_support(model, device, exp.precision)
    parameters = sum(p.numel() for p in model.parameters())
    flops = settings.flops_per_sample
    if flops is None:
        flops = flops_per_sample(spec, options, settings.seed)

    generator = torch.Generator().manual_seed(settings.seed)
    sample = spec.make_batch(generator, min(exp.batch, 2), options)
    dataset, data_name, note = _real_dataset(spec, options, settings)
    if dataset is None:
        generator = torch.Generator().manual_seed(settings.seed)
        pool = [spec.make_batch(generator, exp.batch, options) for _ in range(BATCH_POOL)]
        source = data.SyntheticSource(pool, place.rank, place.world_size)
    else:
        source = data.LoaderSource(dataset, exp.batch, settings.seed, place.rank, place.world_size)

    if exp.precision == "fp64":
        model = model.double()
    if settings.channels_last:
        model = model.to(memory_format=torch.channels_last)
    parts = strategies.wrap(
        exp.strategy, spec, model, place, settings.pipeline_microbatches, sample
    )
    if settings.compile != "off":
        parts = strategies.compile_parts(parts, settings.compile)
    device_type = "cuda" if device.is_gpu else "cpu"
    autocast_dtype = AUTOCAST_DTYPES.get(exp.precision)

    def autocast():
        if autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device_type, dtype=autocast_dtype)

    scaler = torch.amp.GradScaler(device_type, enabled=exp.precision == "fp16")
    step = new_step(spec, parts, options["lr"], autocast, scaler)
    for part in parts:
        part.train()
    return Session(
        spec=spec,
        model=model,
        step=step,
        source=source,
        move=_mover(exp.precision, settings.channels_last, place),
        placement=place,
        options=options,
        parameters=parameters,
        flops_per_sample=flops,
        data=data_name,
        data_note=note,
    )


def _check_cpu_support(model, device, precision: str) -> None:
    """Refuse, as unavailable, a CPU LSTM in a precision this CPU's oneDNN has no kernel for."""
    dtype = AUTOCAST_DTYPES.get(precision)
    if device.is_gpu or dtype is None:
        return
    if any(isinstance(module, torch.nn.LSTM) for module in model.modules()):
        reason = cpu_support.lstm_unsupported(dtype)
        if reason:
            raise Unavailable(reason)

"""PyTorch, on the CPU and on CUDA GPUs."""

from __future__ import annotations

from collections.abc import Callable

from accelbench import dtypes
from accelbench.backends.base import Backend, CheckRun
from accelbench.measuring import timers
from accelbench.platform import doctor
from accelbench.platform.devices import Device, cuda_unavailable_reason


def _torch_reason(device: Device, dtype: str | None) -> str | None:
    if not device.is_gpu:
        return None
    return cuda_unavailable_reason(device) or doctor.backend_problem(
        "torch", range(device.count), dtype
    )


def _synchronizer() -> Callable[[], None]:
    import torch

    return torch.cuda.synchronize


def _empty_cache() -> None:
    import torch

    torch.cuda.empty_cache()


def _no_cuda_device() -> str | None:
    import torch

    return None if torch.cuda.is_available() else "torch on a GPU: no CUDA device here"


SPEC = Backend(
    "torch",
    ("cpu", "cuda"),
    timers.TORCH,
    _torch_reason,
    half_dtypes=dtypes.HALF_DTYPES,
    device_synchronizer=_synchronizer,
    release_cached_memory=_empty_cache,
    check_runs=(
        CheckRun("torch (CPU)"),
        CheckRun("torch (GPU)", "cuda1", missing=_no_cuda_device),
    ),
)

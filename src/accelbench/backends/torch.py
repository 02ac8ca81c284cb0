"""PyTorch, on the CPU and on CUDA GPUs, and how PyTorch code gets its tensors there."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from accelbench import dtypes
from accelbench.backends.base import Backend, CheckRun
from accelbench.backends.prepared import Prepared
from accelbench.dtypes import host_dtype
from accelbench.measuring import timers
from accelbench.platform import doctor
from accelbench.platform.devices import Device, cuda_unavailable_reason

if TYPE_CHECKING:  # NumPy is imported where arrays are made, not where a grid is planned
    import numpy as np


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


def torch_dtype(dtype: np.dtype):
    import torch

    return torch.bfloat16 if dtype.name == "bfloat16" else getattr(torch, dtype.name)


def torch_from_host(x: np.ndarray):
    """A CPU tensor sharing `x`'s memory; bfloat16 goes through its 16-bit pattern."""
    import numpy as np
    import torch

    if x.dtype.name == "bfloat16":
        return torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(x)


def torch_to_host(t) -> np.ndarray:
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(host_dtype("bfloat16")).copy()
    return t.numpy().copy()


def torch_prepared(host_inputs, device: Device, run_into, out_shape, out_dtype) -> Prepared:
    """Prepared for PyTorch code on the CPU or, for a cudaK device, on GPU 0. On the CPU
    the tensors share the inputs as placed for this run (kernels.measure.check_kernel) and an
    output placed here (accelbench.measuring.placement)."""
    import numpy as np
    import torch

    from accelbench.measuring import placement

    host = tuple(torch_from_host(np.ascontiguousarray(x)) for x in host_inputs)
    if device.is_gpu:
        inputs = tuple(t.to("cuda:0", copy=True) for t in host)
        out = torch.empty(out_shape, dtype=torch_dtype(np.dtype(out_dtype)), device="cuda:0")
    else:
        inputs = host
        out = torch_from_host(placement.empty(out_shape, out_dtype))
    upload = download = None
    if device.is_gpu:
        host_out = torch.empty(out_shape, dtype=out.dtype)

        def upload():
            for resident, source in zip(inputs, host, strict=True):
                resident.copy_(source)

        def download():
            return host_out.copy_(out)

    return Prepared(
        run=lambda: run_into(*inputs, out),
        fetch=lambda: torch_to_host(out),
        poison=lambda: out.fill_(float("nan")),
        upload=upload,
        download=download,
    )


SPEC = Backend(
    "torch",
    ("cpu", "cuda"),
    timers.TORCH,
    _torch_reason,
    half_dtypes=dtypes.HALF_DTYPES,
    device_synchronizer=_synchronizer,
    release_cached_memory=_empty_cache,
    distributions=("torch",),
    probe=doctor.probe_torch,
    check_runs=(
        CheckRun("torch (CPU)"),
        CheckRun("torch (GPU)", "cuda1", missing=_no_cuda_device),
    ),
)

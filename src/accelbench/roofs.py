"""Measured roofs: the ceilings every kernel on a device is compared with.

Per device and dtype: the peak GEMM throughput (the best library GEMM on
that device at a large n) and the copy bandwidth (the best library copy of a
buffer far larger than the caches, read plus write counted as STREAM does);
on a GPU also the pinned host->device and device->host bandwidth. Each roof
is measured with the same machinery as the kernels: checked against the
float64 reference first, then timed with the backend's own timer. Taking the
best of several libraries is what makes it a roof rather than one library's
result.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelbench import timing
from accelbench.backends import BACKENDS
from accelbench.devices import Device, cpu_threads, parse_device
from accelbench.grid import RoofExperiment

MIB = 1 << 20
# metric -> (kernel measured, candidate backends, what its rate counts)
ROOFS = {
    "peak_gflops": ("matmul", ("numpy", "torch", "cupy"), "flops"),
    "copy_bandwidth": ("transfer-d2d", ("numpy", "torch", "cupy"), "bytes"),
    "h2d_bandwidth": ("transfer-h2d-pinned", ("torch", "cupy", "numba-cuda"), "bytes"),
    "d2h_bandwidth": ("transfer-d2h-pinned", ("torch", "cupy", "numba-cuda"), "bytes"),
}
GPU_ONLY = ("h2d_bandwidth", "d2h_bandwidth")


def roof_sizes(exp: RoofExperiment, settings: dict[str, Any]) -> dict[str, int]:
    """GEMM n and copy length (elements) for this device kind and dtype, from the settings."""
    from accelbench.kernels import host_dtype

    kind = parse_device(exp.device).kind
    roofs = settings["roofs"]
    itemsize = host_dtype(exp.dtype).itemsize
    return {
        "gemm_size": int(roofs["gemm_size"][kind]),
        "copy_size": int(roofs["copy_mib"][kind]) * MIB // itemsize,
    }


def _candidates(kernel, backends, device: Device, dtype_name: str) -> tuple[list[str], list[str]]:
    """(backends that can measure this roof here, reasons of those that cannot)."""
    from accelbench.kernels import kernels

    spec = kernels()[kernel]
    usable, reasons = [], []
    for name in backends:
        backend = BACKENDS[name]
        if device.kind not in backend.device_kinds or name not in spec.implementations:
            continue
        if dtype_name not in spec.dtypes(name):
            reasons.append(f"{name}: no {dtype_name} {kernel}")
        elif reason := backend.unavailable_reason(device):
            reasons.append(f"{name}: {reason}")
        else:
            usable.append(name)
    return usable, reasons


def _measure_one(metric: str, device: Device, dtype_name: str, size: int, settings, threads):
    """Best rate over the candidate backends: (rate stats, check summary) or an Outcome."""
    from accelbench.experiment import Outcome, _mismatch, check_kernel, time_function
    from accelbench.kernels import host_dtype, kernels

    kernel, backends, counts = ROOFS[metric]
    spec, dtype = kernels()[kernel], host_dtype(dtype_name)
    usable, reasons = _candidates(kernel, backends, device, dtype_name)
    if not usable:
        return Outcome("unavailable", f"{metric}: no backend can measure it ({'; '.join(reasons)})")
    amount = (
        spec.flops(size) / 1e9
        if counts == "flops"
        else spec.bytes_moved(size, dtype.itemsize) / 1e9
    )
    unit = "GFLOP/s" if counts == "flops" else "GB/s"
    best = None
    rates: dict[str, float] = {}
    for name in usable:
        checked = check_kernel(spec, name, device, dtype, size, settings["seed"])
        if isinstance(checked, Outcome):
            checked.reason = f"{metric} with {name}: {checked.reason}"
            return checked
        label = f"roof {metric} {device.name} {dtype_name} {name}"
        samples = time_function(
            checked.prepared.run, BACKENDS[name].timer, threads, settings, label
        )
        after = checked.recheck()
        if not after["passed"]:
            return Outcome(
                "failed", f"{metric} with {name}, after timing: {_mismatch(after)}", check=after
            )
        rate = timing.rate_from_time(timing.summarize(samples, "s"), amount, unit)
        rates[name] = rate["median"]
        if best is None or rate["median"] > best[0]["median"]:
            best = (rate, {"backend": name, "size": size, **after})
    best[1]["candidates"] = rates
    return best


def measure_roof(exp: RoofExperiment, settings: dict[str, Any]):
    """Measure every roof that applies to the device; the record holds each with its backend."""
    from accelbench.experiment import Outcome

    device = parse_device(exp.device)
    if device.is_gpu and device.count != 1:
        return Outcome(
            "unavailable", f"roofs are measured on one GPU; {exp.device} asks for {device.count}"
        )
    sizes = roof_sizes(exp, settings)
    metrics: dict[str, Any] = {}
    checks: dict[str, Any] = {}
    with cpu_threads(device) as threads:
        for metric, (kernel, _, _) in ROOFS.items():
            if metric in GPU_ONLY and not device.is_gpu:
                continue
            size = sizes["gemm_size"] if kernel == "matmul" else sizes["copy_size"]
            found = _measure_one(metric, device, exp.dtype, size, settings, threads)
            if not isinstance(found, tuple):
                return found
            metrics[metric], checks[metric] = found
    metrics["threads"] = timing.value(threads, "threads")
    errors = [check["relative_error"] for check in checks.values()]
    check = {
        "passed": True,
        "relative_error": float(np.max(errors)),
        "reference": "numpy float64",
        "roofs": checks,
    }
    return Outcome("ok", metrics=metrics, check=check)

"""Measured roofs: the ceilings every kernel on a device is compared with.

Per device and dtype: the peak GEMM throughput (the best library GEMM on
that device over n and n/2) and the memory bandwidth (the best of the
STREAM kernels and a read (sum) over every backend that uses all the device's threads, on
arrays far beyond the caches: stream.py); on a GPU also the pinned
host->device and device->host bandwidth. Each roof is measured with the same
machinery as the kernels: checked against the float64 reference first, then
timed with the backend's own timer, in as many independent runs. Taking the
best of several libraries and kernels is what makes it a roof rather than one
library's result; on a cluster a roof runs in the same job group as the
kernels of its device, so both see the same node.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from accelbench.backends import named as backend_named
from accelbench.families.roof import GPU_CEILINGS, RoofExperiment, RoofSettings
from accelbench.kernels import KernelSpec, host_dtype, kernels
from accelbench.kernels.measure import (
    cell_data,
    check_kernel,
    implementation_name,
    too_slow,
)
from accelbench.measuring import statistics, timers
from accelbench.measuring.calls import time_function
from accelbench.measuring.checking import mismatch
from accelbench.measuring.outcome import Outcome
from accelbench.measuring.phases import Phases
from accelbench.platform.devices import Device, cpu_threads
from accelbench.roofs import stream

log = logging.getLogger(__name__)

MIB = 1 << 20
# metric -> (kernels measured, candidate backends, what its rate counts)
ROOFS = {
    "peak_gflops": (("matmul",), ("numpy", "torch", "cupy"), "flops"),
    "memory_bandwidth": (tuple(stream.SPECS), stream.BACKENDS, "bytes"),
    "h2d_bandwidth": (("transfer-h2d-pinned",), ("torch", "cupy", "numba-cuda"), "bytes"),
    "d2h_bandwidth": (("transfer-d2h-pinned",), ("torch", "cupy", "numba-cuda"), "bytes"),
}
GPU_ONLY = GPU_CEILINGS  # an ok roof record of a GPU holds them (results checks it)
# The GEMM roof is the best over n and n/2: a library's best size need not be the largest.
GEMM_FRACTIONS = (1, 2)
# Ceilings that count bytes: the same memory and link in every dtype (search_source).
BYTE_CEILINGS = tuple(metric for metric, (_, _, counts) in ROOFS.items() if counts == "bytes")


def roof_sizes(exp: RoofExperiment, settings: RoofSettings) -> dict[str, int]:
    """GEMM n and copy length (elements) for this device kind and dtype, from the settings."""
    kind = exp.parsed_device.kind
    roofs = settings.roofs
    itemsize = host_dtype(exp.dtype).itemsize
    return {
        "gemm_size": int(roofs["gemm_size"][kind]),
        "copy_size": int(roofs["copy_mib"][kind]) * MIB // itemsize,
    }


def _spec(kernel: str) -> KernelSpec:
    return stream.SPECS.get(kernel) or kernels()[kernel]


def _candidates(kernel, backends, device: Device, dtype_name: str) -> tuple[list[str], list[str]]:
    """(backends that can measure this roof here, reasons of those that cannot)."""
    spec = _spec(kernel)
    usable, reasons = [], []
    for name in backends:
        backend = backend_named(name)
        if device.kind not in backend.device_kinds or name not in spec.implementations:
            continue
        if dtype_name not in spec.dtypes(name):
            reasons.append(f"{name}: no {dtype_name} {kernel}")
        elif reason := backend.unavailable_reason(device, dtype_name):
            reasons.append(f"{name}: {reason}")
        else:
            usable.append(name)
    return usable, reasons


def _sizes(metric: str, sizes: dict[str, int]) -> list[int]:
    if metric == "peak_gflops":
        return sorted({max(2, sizes["gemm_size"] // fraction) for fraction in GEMM_FRACTIONS})
    return [sizes["copy_size"]]


@dataclass
class Ceiling:
    """One roof: the best candidate's rate, its check, its raw time samples and warm-up,
    what measured it."""

    rate: dict[str, Any]
    check: dict[str, Any]
    samples: list[float]
    warmup: timers.Warmup
    implementation: str
    timer: str


def _candidate(kernel: str, backend: str, size: int) -> str:
    return f"{kernel}/{backend}/n{size}"


def later_runs(exp: RoofExperiment, settings: RoofSettings, first: Outcome) -> RoofSettings:
    """Settings for runs 2..R: each roof's winner of the first run, timed alone.

    The first run times every candidate; the later ones time its winner only. A
    roof then costs one search instead of R, and the later runs' rates are free of
    the upward bias of taking the best of several noisy candidates.
    """
    search = {
        metric: {"winner": _candidate(c["kernel"], c["backend"], c["size"]), **c}
        for metric, c in first.check["roofs"].items()
    }
    # Made here, in the job's process, the winners' inputs serve every later run.
    dtype = host_dtype(exp.dtype)
    for winner in search.values():
        cell_data(_spec(winner["kernel"]), winner["size"], dtype, settings.seed)
    # A winner run 1 timed is timed in every run, whatever max_call_s says of a later call.
    return replace(settings, roof_search=search, max_call_s=None)


def borrowed_search(exp: RoofExperiment, settings: RoofSettings) -> dict[str, Any]:
    """The byte ceilings' winners of the roof record `settings.search_from` (the same
    device's float32 roof: families.roof.search_source), each at this dtype's copy length,
    where its backend computes in this dtype; a ceiling whose winner cannot is searched."""
    source = settings.search_from
    if not source:
        return {}
    won = json.loads(Path(source).read_text())["check"]["roofs"]
    size = roof_sizes(exp, settings)["copy_size"]
    device = exp.parsed_device
    search = {}
    for metric in BYTE_CEILINGS:
        if metric not in won:
            continue
        kernel, backend = won[metric]["kernel"], won[metric]["backend"]
        usable, _ = _candidates(kernel, (backend,), device, exp.dtype)
        if usable:
            search[metric] = {"winner": _candidate(kernel, backend, size), "from": source}
    return search


def search_text(borrowed: dict[str, Any]) -> str:
    """How the record's candidates were chosen, as its params say."""
    own = "every candidate timed in run 1; its winner alone in later runs"
    if not borrowed:
        return own
    source = next(iter(borrowed.values()))["from"]
    return f"{', '.join(borrowed)}: the winners of {source} alone in every run; the rest: {own}"


def _timed_candidate(metric, kernel, backend, device, dtype, size, settings, threads, to_beat):
    """One candidate checked, timed and, if its rate beats `to_beat`, checked again after
    its timing (a roof is the winner's rate): (rate, its timers.Timed, the check after
    timing or None), or the Outcome of a failed check. Its buffers live only in this call."""
    spec = _spec(kernel)
    counts = ROOFS[metric][2]
    unit = "GFLOP/s" if counts == "flops" else "GB/s"
    label = f"roof {metric} {device.name} {dtype.name} {kernel} {backend} n={size}"
    phases = Phases()
    checked = check_kernel(spec, backend, device, dtype, size, settings.seed)
    phases.lap("inputs, reference and check")
    if isinstance(checked, Outcome):
        checked.reason = f"{metric} with {kernel} on {backend}: {checked.reason}"
        return checked
    if slow := too_slow(checked, backend, device, settings):
        return Outcome("skipped", f"{backend} n={size}: {slow}")
    timer = backend_named(backend).timer
    timed = time_function(checked.prepared.run, timer, threads, settings, label)
    phases.lap("timing")
    amount = spec.flops(size) if counts == "flops" else spec.bytes_moved(size, dtype.itemsize)
    rate = statistics.rate_from_time(statistics.summarize(timed.samples, "s"), amount / 1e9, unit)
    after = checked.recheck() if rate["median"] > to_beat else None
    phases.lap("recheck")
    log.info("%s: %.4g %s; %s", label, rate["median"], unit, phases.text())
    if after is not None and not after["passed"]:
        reason = f"{metric} with {kernel} on {backend}, after timing: {mismatch(after)}"
        return Outcome("failed", reason, check=after)
    return rate, timed, after


def _measure_one(metric: str, device: Device, dtype_name: str, sizes, settings, threads):
    """Best rate over the candidate kernels, backends and sizes: a Ceiling, or an Outcome.

    With a search from run 1 (later_runs), only its winner is timed. One candidate's
    buffers at a time: each is freed, and its library's cache emptied, before the next.
    """
    searched = settings.roof_search.get(metric)
    kernel_names, backends, _ = ROOFS[metric]
    dtype = host_dtype(dtype_name)
    best = None
    rates: dict[str, float] = {}
    reasons: list[str] = []
    for kernel in kernel_names:
        usable, why = _candidates(kernel, backends, device, dtype_name)
        reasons += why
        # Size by size: the backends of one size share its inputs and reference (cell_data).
        for size, name in ((size, name) for size in _sizes(metric, sizes) for name in usable):
            if searched and _candidate(kernel, name, size) != searched["winner"]:
                continue
            to_beat = best.rate["median"] if best else -math.inf
            found = _timed_candidate(
                metric, kernel, name, device, dtype, size, settings, threads, to_beat
            )
            # The next candidate may be another library's, which cannot allocate from this
            # one's cache: two candidates' buffers (gigabytes each) would be held at once.
            backend_named(name).free_cached_memory(device)
            if isinstance(found, Outcome) and found.status == "skipped":
                reasons.append(found.reason)
                continue
            if isinstance(found, Outcome):
                return found
            rate, timed, after = found
            rates[_candidate(kernel, name, size)] = rate["median"]
            if after is not None:
                best = Ceiling(
                    rate,
                    {"kernel": kernel, "backend": name, "size": size, **after},
                    timed.samples,
                    timed.warmup,
                    implementation_name(_spec(kernel), name),
                    backend_named(name).timer.description,
                )
    if best is None:
        return Outcome("unavailable", f"{metric}: no backend can measure it ({'; '.join(reasons)})")
    # Every candidate's rate as run 1 timed them, whichever run this is.
    best.check["candidates"] = (searched or {}).get("candidates", rates)
    return best


def measure_roof(exp: RoofExperiment, settings: RoofSettings):
    """Measure every roof that applies to the device; the record holds each with its backend.

    A ceiling no backend can measure here (in this dtype, on this device) is left out,
    its reason in the check's `unmeasured`, and the others are kept: a GEMM peak in 16
    bits is worth having where no STREAM kernel runs in 16 bits. Only a roof with no
    ceiling at all is unavailable.
    """
    device = exp.parsed_device
    if device.is_gpu and device.count != 1:
        return Outcome(
            "unavailable", f"roofs are measured on one GPU; {exp.device} asks for {device.count}"
        )
    sizes = roof_sizes(exp, settings)
    borrowed = borrowed_search(exp, settings)
    settings = replace(settings, roof_search={**borrowed, **settings.roof_search})
    metrics: dict[str, Any] = {}
    checks: dict[str, Any] = {}
    raw: dict[str, Any] = {}
    series: dict[str, Any] = {}
    unmeasured: dict[str, str] = {}
    implementations, timers = [], []
    with cpu_threads(device) as threads:
        for metric in ROOFS:
            if metric in GPU_ONLY and not device.is_gpu:
                continue
            found = _measure_one(metric, device, exp.dtype, sizes, settings, threads)
            if isinstance(found, Outcome) and found.status == "unavailable":
                unmeasured[metric] = found.reason
                continue
            if isinstance(found, Outcome):
                return found
            metrics[metric], checks[metric] = found.rate, found.check
            raw[f"{metric}_time"] = statistics.raw_samples("s", [found.samples])
            series.update(
                statistics.warmup_series(
                    [found.warmup.seconds], [found.warmup.steady], prefix=f"{metric}_"
                )
            )
            implementations.append(f"{metric}={found.implementation}")
            timers += [found.timer] if found.timer not in timers else []
    if not metrics:
        return Outcome("unavailable", "; ".join(unmeasured.values()))
    metrics["threads"] = statistics.value(threads, "threads")
    errors = [check["relative_error"] for check in checks.values()]
    check = {
        "passed": True,
        "relative_error": float(np.max(errors)),
        "reference": "numpy float64",
        "roofs": checks,
    }
    if unmeasured:
        check["unmeasured"] = unmeasured
    measured_by = {"implementation": "; ".join(implementations), "timer": "; ".join(timers)}
    params = {"roof_search": search_text(borrowed)}
    return Outcome(
        "ok",
        metrics=metrics,
        check=check,
        params=params,
        raw=raw,
        measured_by=measured_by,
        series=series,
    )

"""`accelbench benchmark`: this machine's kernels against its own measured roofs, as a table.

A performance check for people, not a test: it measures with the same code
as the workflow (checked against the float64 reference, then timed with the
library timers) and prints what it finds next to the targets:

- the best CPU backend's GEMM at the largest default-grid size, as a percent
  of the measured GEMM roof (the best library GEMM at the roof size);
- the memory-bound kernels (saxpy, stencil, reduction), best backend, as a
  percent of the measured memory roof (the best STREAM kernel over all the
  device's threads), on arrays as large as the STREAM arrays so that both
  stream from the same level of memory;
- Numba parallel Mandelbrot against naive Python at the default-grid size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from accelbench import backends
from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.families.kernel import exclusion as kernel_exclusion
from accelbench.families.roof import RoofExperiment, RoofSettings
from accelbench.kernels import host_dtype
from accelbench.kernels.measure import measure_kernel
from accelbench.platform.devices import usable_cpus
from accelbench.roofs.measure import MIB, measure_roof

GEMM_TARGET = 80.0  # percent of the GEMM roof
MEMORY_TARGET = 70.0  # percent of the STREAM memory roof
MANDELBROT_TARGET = 100.0  # times naive Python
MEMORY_KERNELS = ("saxpy", "stencil", "reduction")
# The grid's sizes the table measures: kernel -> which of its config sizes.
MEASURED_SIZES = {"matmul": "largest", "mandelbrot": "first"}


@dataclass(frozen=True)
class Line:
    """One row of the table: what was measured, the best backend, and how it compares."""

    what: str
    backend: str
    achieved: float
    unit: str
    against: str
    score: float  # percent of the roof, or a speed-up factor
    score_unit: str
    target: float

    @property
    def meets_target(self) -> bool:
        return self.score >= self.target


class BenchmarkError(RuntimeError):
    """A measurement the table needs did not succeed; the message says which and why."""


def _measure(kernel: str, device: str, backend: str, dtype: str, size: int, settings) -> dict:
    exp = KernelExperiment(kernel, device, backend, dtype, size)
    outcome = measure_kernel(exp, settings)
    if outcome.status != "ok":
        raise BenchmarkError(f"{exp.id}: {outcome.status}: {outcome.reason}")
    return outcome.metrics


def _best(kernel: str, device: str, dtype: str, size: int, metric: str, settings):
    """(backend, median of `metric`) of the fastest compiled CPU backend."""
    found = {}
    for name, backend in backends.catalogue().items():
        exp = KernelExperiment(kernel, device, name, dtype, size)
        if backend.naive or kernel_exclusion(exp) or backend.unavailable_reason(exp.parsed_device):
            continue
        found[name] = _measure(kernel, device, name, dtype, size, settings)[metric]["median"]
    best = max(found, key=found.get)
    return best, found[best]


def unsized(config: dict[str, Any]) -> list[str]:
    """The kernels of MEASURED_SIZES whose list of sizes in the config is empty."""
    return [kernel for kernel in MEASURED_SIZES if not config["kernels"]["sizes"].get(kernel)]


def memory_size(kernel: str, copy_elements: int) -> int:
    """Problem size n whose main array has as many elements as a STREAM roof array."""
    return math.isqrt(copy_elements) if kernel == "stencil" else copy_elements


def run(config: dict[str, Any], dtypes: list[str], min_run_time: float, samples: int) -> list[Line]:
    """Measure everything the table shows, on cpuN with N the usable cores."""
    device = f"cpu{usable_cpus()}"
    kernels_cfg = config["kernels"]
    timing = {
        "seed": config.get("seed", 0),
        "min_run_time": min_run_time,
        "samples": samples,
        "warmup_s": kernels_cfg["warmup_s"],
    }
    settings = KernelSettings(**timing)
    roof_settings = RoofSettings(**timing, roofs=kernels_cfg["roofs"])
    lines = []
    for dtype in dtypes:
        roof = measure_roof(RoofExperiment(device, dtype), roof_settings)
        if roof.status != "ok":
            raise BenchmarkError(f"roof {device} {dtype}: {roof.status}: {roof.reason}")
        peak = roof.metrics["peak_gflops"]["median"]
        memory = roof.metrics["memory_bandwidth"]["median"]
        stream_best = roof.check["roofs"]["memory_bandwidth"]
        gemm_roof = roof.check["roofs"]["peak_gflops"]
        gemm_size = max(kernels_cfg["sizes"]["matmul"])
        backend, gflops = _best("matmul", device, dtype, gemm_size, "gflops", settings)
        lines.append(
            Line(
                f"GEMM n={gemm_size} {dtype}",
                backend,
                gflops,
                "GFLOP/s",
                f"GEMM roof {peak:.4g} GFLOP/s ({gemm_roof['backend']}, n={gemm_roof['size']})",
                100.0 * gflops / peak,
                "%",
                GEMM_TARGET,
            )
        )
        copy_elements = (
            int(kernels_cfg["roofs"]["copy_mib"]["cpu"]) * MIB // host_dtype(dtype).itemsize
        )
        for kernel in MEMORY_KERNELS:
            size = memory_size(kernel, copy_elements)
            backend, bandwidth = _best(kernel, device, dtype, size, "bandwidth", settings)
            lines.append(
                Line(
                    f"{kernel} n={size} {dtype}",
                    backend,
                    bandwidth,
                    "GB/s",
                    f"memory roof {memory:.4g} GB/s ({stream_best['kernel']}, "
                    f"{stream_best['backend']})",
                    100.0 * bandwidth / memory,
                    "%",
                    MEMORY_TARGET,
                )
            )
    size = kernels_cfg["sizes"]["mandelbrot"][0]
    mandel_settings = replace(settings, naive_size_limit={"mandelbrot": size})
    naive = _measure("mandelbrot", device, "python", "float64", size, mandel_settings)
    fast = _measure("mandelbrot", device, "numba-parallel", "float64", size, mandel_settings)
    naive_time, fast_time = naive["time"]["median"], fast["time"]["median"]
    lines.append(
        Line(
            f"Mandelbrot n={size} float64",
            "numba-parallel",
            fast["gflops"]["median"],
            "GFLOP/s",
            f"naive Python {naive_time * 1e3:.4g} ms vs {fast_time * 1e3:.4g} ms",
            naive_time / fast_time,
            "x",
            MANDELBROT_TARGET,
        )
    )
    return lines


def format_table(lines: list[Line], device: str) -> str:
    """A Markdown table of the lines, with the targets."""
    rows = [
        f"Kernels on {device} against this machine's measured roofs",
        "",
        "| measured | best backend | achieved | compared with | result | target |",
        "|:---|:---|---:|:---|---:|---:|",
    ]
    for line in lines:
        result = f"{line.score:.1f}{line.score_unit}"
        verdict = "met" if line.meets_target else "not met"
        rows.append(
            f"| {line.what} | {line.backend} | {line.achieved:.4g} {line.unit} | {line.against} "
            f"| {result} | >= {line.target:g}{line.score_unit} ({verdict}) |"
        )
    return "\n".join(rows)

"""One run of a kernel: check it against its reference, then time it.

The kernel family's measuring function (accelbench.families.kernel) and what a job
does for it before its runs fork. The timing is the backend's library timer
(torch.utils.benchmark on the CPU, cupyx.profiler.benchmark or CUDA events on
the GPU); the check runs before and again after timing, so the timed code is
known to compute the right thing (accelbench.measuring.checking and .calls, which the
data science workloads and the roofs share).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from threadpoolctl import threadpool_limits

from accelbench import backends
from accelbench.kernels import KernelSpec, Prepared, host_dtype, kernels
from accelbench.measuring import placement, statistics
from accelbench.measuring.calls import add_transfers, energy_window, time_function, time_transfers
from accelbench.measuring.checking import check_against_reference, mismatch
from accelbench.measuring.outcome import Outcome
from accelbench.measuring.phases import Phases
from accelbench.platform.devices import Device, cpu_threads

if TYPE_CHECKING:
    from accelbench.families.kernel import KernelSettings
    from accelbench.measuring.settings import TimedSettings

log = logging.getLogger(__name__)


def implementation_name(spec: KernelSpec, backend: str) -> str:
    """Where a kernel's backend variant is written: `module:backend`."""
    return f"{spec.implementations[backend].__module__}:{backend}"


def naive_size_limit(spec: KernelSpec, settings: KernelSettings) -> int:
    """Largest n naive Python runs for this kernel: the config's, else the kernel's default."""
    return int(settings.naive_size_limit.get(spec.name, spec.naive_size_limit))


@dataclass
class Checked:
    """A prepared kernel that passed its first check, with what the timing needs."""

    prepared: Prepared
    check: dict[str, Any]
    first_call: float
    recheck: Callable[[], dict[str, Any]]  # the same check again, after timing


@dataclass(frozen=True)
class CellData:
    """A kernel cell's inputs and their float64 reference result."""

    inputs: tuple[np.ndarray, ...]
    reference: np.ndarray


# The latest cells' data, by (kernel, size, dtype, seed): a roof's winners at the most.
_MADE: dict[tuple[str, int, str, int], CellData] = {}
MOST_CELLS_KEPT = 4


def cell_data(spec: KernelSpec, size: int, dtype: np.dtype, seed: int) -> CellData:
    """The inputs and float64 reference of one kernel cell, made once per process.

    Every run of a cell uses the same seeded inputs, so a job makes them before it forks
    its runs (`prepare_kernel`) and each run inherits them; the candidates of a roof
    that share a kernel and size (one per backend) share them too, and a roof's later
    runs its winners' (roofs.later_runs). Making them is most of a large GPU cell's host
    work: 2^25 random values, and the reference on the host.
    """
    key = (spec.name, int(size), dtype.name, int(seed))
    if key not in _MADE:
        while len(_MADE) >= MOST_CELLS_KEPT:
            del _MADE[next(iter(_MADE))]
        made = spec.make_inputs(np.random.default_rng(seed), size, dtype)
        # On every CPU this process may use, whatever the measurement's own thread count
        # (a GPU's host side keeps one): a GEMM reference at n = 4096 is 137 GFLOP.
        with threadpool_limits(limits=len(os.sched_getaffinity(0))):
            reference = spec.reference(*made)
        _MADE[key] = CellData(tuple(made), reference)
    return _MADE[key]


def prepare_kernel(exp, settings: KernelSettings) -> None:
    """Make the cell's inputs and reference, and its flop count, in the job's process,
    before its runs fork: a count that depends on the data (Mandelbrot's escape steps, a
    float64 run over the grid) is cached by its spec, and each run inherits it instead of
    computing it again (1 to 3 s a run)."""
    spec, backend = kernels()[exp.kernel], backends.named(exp.backend)
    if backend.unavailable_reason(exp.parsed_device, exp.dtype):
        return
    if backend.naive and exp.size > naive_size_limit(spec, settings):
        return
    cell_data(spec, exp.size, host_dtype(exp.dtype), settings.seed)
    spec.flops(exp.size)


def check_kernel(spec: KernelSpec, backend: str, device, dtype: np.dtype, size: int, seed: int):
    """Take the cell's inputs (cell_data), on the host placed afresh for this run
    (accelbench.measuring.placement), prepare the backend, run once against the reference: Checked
    or Outcome."""
    made = cell_data(spec, size, dtype, seed)
    # Host arrays are placed afresh; a GPU backend copies them to the device as they are.
    inputs = made.inputs if device.is_gpu else tuple(placement.copy(x) for x in made.inputs)
    reference = made.reference
    tolerance = spec.tolerance(size, dtype)
    prepared = spec.implementations[backend](inputs, device)

    def recheck():
        return check_against_reference(
            prepared,
            reference,
            tolerance,
            spec.error,
            spec.error_measure,
            dtype=spec.output_dtype(dtype),
        )

    started = time.perf_counter()
    check = recheck()  # first call: includes JIT compilation
    first_call = time.perf_counter() - started
    if not check["passed"]:
        return Outcome("failed", mismatch(check), check=check)
    return Checked(prepared, check, first_call, recheck)


def too_slow(checked: Checked, backend: str, device: Device, settings: TimedSettings) -> str | None:
    """Why a checked cell is not timed: a call lasts longer than `max_call_s`, so its warm-up
    and samples alone would take a minute or more (a 16-bit GEMM on a CPU without 16-bit
    arithmetic runs at 1 GFLOP/s). The first call tells, unless the backend compiled in it:
    then a second one is timed. None where the settings set no limit or the call is faster."""
    limit = settings.max_call_s
    took = checked.first_call
    if not limit or took <= limit:
        return None
    if backends.named(backend).compiles:
        sync = backends.named(backend).synchronizer(device.is_gpu)
        started = time.perf_counter()
        checked.prepared.run()
        sync()
        took = time.perf_counter() - started
        if took <= limit:
            return None
    return f"skipped: one call takes {took:.3g} s, more than max_call_s = {limit:g} s allows"


def later_runs(exp, settings: KernelSettings, first: Outcome) -> KernelSettings:
    """Settings for runs 2..R: a cell run 1 timed is timed in every run, whatever max_call_s
    says of a later call (near the limit a noisy host would otherwise skip a cell after
    measuring it)."""
    return replace(settings, max_call_s=None)


def measure_kernel(exp, settings: KernelSettings) -> Outcome:
    """Check the kernel against its float64 reference, then time it with the backend's timer.

    GPU backends are also timed copying their inputs in and their output out
    (`transfer_time`) and doing both around the kernel (`end_to_end_time`).
    After the timing, the kernel runs again in an energy window (accelbench.measuring.energy).
    """
    spec, backend, device = kernels()[exp.kernel], backends.named(exp.backend), exp.parsed_device
    reason = backend.unavailable_reason(device, exp.dtype)
    if reason:
        return Outcome("unavailable", reason)
    if backend.naive and exp.size > (limit := naive_size_limit(spec, settings)):
        return Outcome("skipped", f"skipped: above naive size limit (n={exp.size} > {limit})")
    dtype = host_dtype(exp.dtype)
    measured_by = {
        "implementation": implementation_name(spec, exp.backend),
        "timer": backend.timer.description,
    }
    phases = Phases()
    with cpu_threads(device) as threads:
        if device.is_gpu:
            backend.synchronizer(True)()  # the run's CUDA context, made now
            phases.lap("context")
        checked = check_kernel(spec, exp.backend, device, dtype, exp.size, settings.seed)
        phases.lap("check")
        if isinstance(checked, Outcome):
            checked.measured_by = measured_by
            return checked
        if slow := too_slow(checked, exp.backend, device, settings):
            return Outcome("skipped", slow, check=checked.check, measured_by=measured_by)
        prepared = checked.prepared
        timed = time_function(prepared.run, backend.timer, threads, settings, exp.id)
        samples = timed.samples
        phases.lap("timing")
        transfers = time_transfers(prepared, backend.timer, threads, settings, exp.id)
        phases.lap("transfers")
        used = energy_window(prepared, backend, device, settings, samples)
        phases.lap("energy")
        check = checked.recheck()  # the timed code must still be right
        phases.lap("recheck")
        log.info("%s: the run's phases: %s", exp.id, phases.text())
        if not check["passed"]:
            reason = "after timing: " + mismatch(check)
            return Outcome("failed", reason, check=check, measured_by=measured_by)
    flops, nbytes = spec.flops(exp.size), spec.bytes_moved(exp.size, dtype.itemsize)
    time_stats = statistics.summarize(samples, "s")
    metrics = {"time": time_stats}
    raw = {"time": statistics.raw_samples("s", [samples])}
    if flops:
        metrics["gflops"] = statistics.rate_from_time(time_stats, flops / 1e9, "GFLOP/s")
    metrics["bandwidth"] = statistics.rate_from_time(time_stats, nbytes / 1e9, "GB/s")
    metrics["arithmetic_intensity"] = statistics.value(flops / nbytes, "flop/byte")
    metrics["first_call_time"] = statistics.value(checked.first_call, "s")
    metrics["threads"] = statistics.value(threads, "threads")
    if transfers:
        end_to_end = add_transfers(metrics, raw, transfers)
        if flops:
            metrics["end_to_end_gflops"] = statistics.rate_from_time(
                end_to_end, flops / 1e9, "GFLOP/s"
            )
    return Outcome(
        "ok",
        metrics=metrics,
        check=check,
        raw=raw,
        measured_by=measured_by,
        energy=used,
        series=statistics.warmup_series([timed.warmup.seconds], [timed.warmup.steady]),
    )


def preload() -> None:
    """Import what a kernel's (or a roof's) runs need before the job forks them: the
    kernels, and each backend's preload (Numba's CPU target, CuPy where it is installed),
    once each."""
    kernels()
    for preload_backend in dict.fromkeys(
        each.preload for each in backends.catalogue().values() if each.preload
    ):
        preload_backend()


def record_params(exp, settings: KernelSettings) -> dict[str, int]:
    """What a kernel's record adds to its parameters: the naive size limit, only for a
    naive backend (where it applies)."""
    if not backends.named(exp.backend).naive:
        return {}
    return {"naive_size_limit": naive_size_limit(kernels()[exp.kernel], settings)}

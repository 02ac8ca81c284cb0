"""Run one experiment and write its record: the body of every benchmark job.

Whatever happens inside the measurement, the job ends with exactly one
complete record: "ok" with metrics, "unavailable" or "oom" with the reason, or
"failed" with the error. Only a killed process leaves no record, and then the
atomic write guarantees no half-written one either.
"""

from __future__ import annotations

import logging
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from accelbench import provenance, timing
from accelbench.backends import BACKENDS
from accelbench.devices import cpu_threads, parse_device, slurm_gpu_shortfall
from accelbench.grid import KernelExperiment, TrainExperiment
from accelbench.kernels import Prepared, kernels, relative_error
from accelbench.results import make_record, write_record

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    status: str
    reason: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    check: dict[str, Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)  # what the run settled (e.g. data used)
    series: dict[str, Any] | None = None  # per-step values (e.g. the loss trajectory)
    raised: bool = False  # the measurement raised: worth another attempt, unlike a result


class RetryableFailure(RuntimeError):
    """An experiment failed on an attempt that is not the last: no record, the job fails."""


def is_out_of_memory(err: BaseException) -> bool:
    """Host MemoryError, torch's and CuPy's device out-of-memory errors."""
    if isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError":
        return True
    message = str(err).lower()
    return "out of memory" in message or "can't allocate memory" in message


def _check(prepared: Prepared, reference: np.ndarray, tolerance: float) -> dict[str, Any]:
    """Poison the output, run once, compare with the float64 reference."""
    prepared.poison()
    prepared.run()
    error = relative_error(prepared.fetch(), reference)
    return {
        "passed": error <= tolerance,
        "relative_error": error,
        "tolerance": tolerance,
        "reference": "numpy float64",
    }


def _time_kernel(prepared: Prepared, timer: str, threads: int, settings: dict, label: str):
    if timer == "cupy":
        return timing.cupy_samples(prepared.run, min_run_time=settings["min_run_time"])
    if timer == "cuda-events":
        return timing.cuda_event_samples(prepared.run, min_run_time=settings["min_run_time"])
    return timing.torch_timer_samples(
        prepared.run,
        num_threads=threads,
        min_run_time=settings["min_run_time"],
        samples=settings["samples"],
        label=label,
    )


def measure_kernel(exp: KernelExperiment, settings: dict[str, Any]) -> Outcome:
    """Check the kernel against its float64 reference, then time it with the backend's timer."""
    spec, backend, device = kernels()[exp.kernel], BACKENDS[exp.backend], parse_device(exp.device)
    reason = backend.unavailable_reason(device)
    if reason:
        return Outcome("unavailable", reason)
    dtype = np.dtype(exp.dtype)
    inputs = spec.make_inputs(np.random.default_rng(settings["seed"]), exp.size, dtype)
    reference = spec.reference(*inputs)
    tolerance = spec.tolerance(exp.size, dtype)
    with cpu_threads(device) as threads:
        prepared = spec.implementations[exp.backend](inputs, device)
        started = time.perf_counter()
        check = _check(prepared, reference, tolerance)  # first call: includes JIT compilation
        first_call = time.perf_counter() - started
        if not check["passed"]:
            return Outcome("failed", _mismatch(check), check=check)
        samples = _time_kernel(prepared, backend.timer, threads, settings, exp.id)
        check = _check(prepared, reference, tolerance)  # the timed code must still be right
        if not check["passed"]:
            return Outcome("failed", "after timing: " + _mismatch(check), check=check)
    flops, nbytes = spec.flops(exp.size), spec.bytes_moved(exp.size, dtype.itemsize)
    time_stats = timing.summarize(samples, "s")
    metrics = {
        "time": time_stats,
        "gflops": timing.rate_from_time(time_stats, flops / 1e9, "GFLOP/s"),
        "bandwidth": timing.rate_from_time(time_stats, nbytes / 1e9, "GB/s"),
        "arithmetic_intensity": timing.value(flops / nbytes, "flop/byte"),
        "first_call_time": timing.value(first_call, "s"),
        "threads": timing.value(threads, "threads"),
    }
    return Outcome("ok", metrics=metrics, check=check)


def _mismatch(check: dict[str, Any]) -> str:
    return (
        f"result differs from the float64 reference: relative error "
        f"{check['relative_error']:.3g} > tolerance {check['tolerance']:.3g}"
    )


def _guarded(measure, exp, settings) -> Outcome:
    """Turn any exception from a measurement into an "oom" or "failed" outcome."""
    try:
        return measure(exp, settings)
    except Exception as err:  # the record must say what went wrong, whatever it was
        log.error("%s raised:\n%s", exp.id, traceback.format_exc())
        status = "oom" if is_out_of_memory(err) else "failed"
        return Outcome(status, f"{type(err).__name__}: {err}", raised=True)


def run(
    exp: KernelExperiment | TrainExperiment,
    settings: dict[str, Any],
    output: str,
    *,
    final_attempt: bool = True,
) -> str:
    """Measure `exp` and write its record atomically to `output`; returns the status.

    An error on an attempt that is not the last raises RetryableFailure instead
    of writing a record, so the scheduler retries it (with more memory and time);
    on the last attempt the error goes into the record, so the grid keeps the cell.
    In a group of launched processes (srun tasks) every rank measures and rank 0 writes.
    """
    from accelbench.train.distributed import from_environment
    from accelbench.train.loop import measure_training

    started = provenance.now()
    measure = measure_kernel if isinstance(exp, KernelExperiment) else measure_training
    # A launched rank (an srun task) may see only its own GPU; loop.py checks it has one.
    launched = from_environment() is not None
    shortfall = None if launched else slurm_gpu_shortfall(parse_device(exp.device))
    outcome = Outcome("failed", shortfall) if shortfall else _guarded(measure, exp, settings)
    if outcome.raised and not final_attempt:
        raise RetryableFailure(f"{exp.id}: {outcome.reason}")
    write_outcome(exp, settings, output, outcome, started)
    return outcome.status


def write_outcome(
    exp: KernelExperiment | TrainExperiment,
    settings: dict[str, Any],
    output: str,
    outcome: Outcome,
    started: str,
) -> None:
    """The record of one outcome, with the provenance of this process, written atomically."""
    from accelbench.train.distributed import is_primary_process

    record = make_record(
        experiment=exp.family,
        experiment_id=exp.id,
        status=outcome.status,
        reason=outcome.reason,
        params={
            **asdict(exp),
            **{k: v for k, v in settings.items() if k != "config_hash"},
            **outcome.params,
        },
        metrics=outcome.metrics,
        check=outcome.check,
        series=outcome.series,
        provenance=provenance.collect(
            seed=settings["seed"], config_digest=settings["config_hash"], started=started
        ),
    )
    if is_primary_process():
        write_record(output, record)
    log.info("%s: %s%s", exp.id, outcome.status, f" ({outcome.reason})" if outcome.reason else "")

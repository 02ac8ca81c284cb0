"""One run of a data science workload: check it against its CPU library's result, then
time it.

The data science family's measuring function (accelbench.families.datasci), with the
kernels' check and timers (accelbench.kernels.measure).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import joblib
import numpy as np

from accelbench.backends.libraries import DATASCI_BACKENDS
from accelbench.datasci import THROUGHPUT_UNIT, workloads
from accelbench.measuring import statistics
from accelbench.measuring.calls import add_transfers, energy_window, time_function, time_transfers
from accelbench.measuring.checking import check_against_reference, mismatch
from accelbench.measuring.outcome import Outcome
from accelbench.platform.devices import cpu_threads

if TYPE_CHECKING:
    from accelbench.families.datasci import DatasciSettings

log = logging.getLogger(__name__)


def measure_datasci(exp, settings: DatasciSettings) -> Outcome:
    """Check a data science workload against its CPU library's result, then time it.

    As for kernels: the check runs before and after the timing, the backend's
    library timer times the call with its inputs resident, and a GPU library is
    also timed moving its inputs in and its result out (`transfer_time`) and
    doing both around the call (`end_to_end_time`). The throughput counts the
    workload's items (rows, samples or nodes) per second. After the timing, the
    call runs again in an energy window (accelbench.measuring.energy).
    """
    spec, backend = workloads()[exp.workload], DATASCI_BACKENDS[exp.backend]
    device = exp.parsed_device
    reason = backend.unavailable_reason(device)
    if reason:
        return Outcome("unavailable", reason)
    measured_by = {
        "implementation": f"{spec.implementations[exp.backend].__module__}:{exp.backend}",
        "timer": backend.timer.description,
    }
    # joblib's pool too (scikit-learn's forests), which threadpoolctl does not pin.
    with cpu_threads(device) as threads, joblib.parallel_config(n_jobs=threads):
        inputs = spec.make_inputs(np.random.default_rng(settings.seed), exp.size)
        reference = spec.reference(*inputs)
        tolerance = spec.tolerance(exp.size)
        prepared = spec.implementations[exp.backend](inputs, device)

        def recheck():
            return check_against_reference(
                prepared, reference, tolerance, spec.error, spec.error_measure, spec.reference_name
            )

        started = time.perf_counter()
        check = recheck()
        first_call = time.perf_counter() - started
        timed = check["passed"]
        if timed:
            timing_run = time_function(prepared.run, backend.timer, threads, settings, exp.id)
            samples = timing_run.samples
            transfers = time_transfers(prepared, backend.timer, threads, settings, exp.id)
            used = energy_window(prepared, backend, device, settings, samples)
            check = recheck()  # the timed code must still be right
    if not check["passed"]:
        reason = ("after timing: " if timed else "") + mismatch(check)
        return Outcome("failed", reason, check=check, measured_by=measured_by)
    time_stats = statistics.summarize(samples, "s")
    work = spec.work(exp.size)
    metrics = {
        "time": time_stats,
        "item_throughput": statistics.rate_from_time(time_stats, work, THROUGHPUT_UNIT),
        "first_call_time": statistics.value(first_call, "s"),
        "threads": statistics.value(threads, "threads"),
    }
    raw = {"time": statistics.raw_samples("s", [samples])}
    if transfers:
        end_to_end = add_transfers(metrics, raw, transfers)
        metrics["end_to_end_item_throughput"] = statistics.rate_from_time(
            end_to_end, work, THROUGHPUT_UNIT
        )
    return Outcome(
        "ok",
        metrics=metrics,
        check=check,
        raw=raw,
        measured_by=measured_by,
        params={"item": spec.item},
        energy=used,
        series=statistics.warmup_series([timing_run.warmup.seconds], [timing_run.warmup.steady]),
    )


def preload() -> None:
    """Import the CPU libraries of the data science workloads before the job forks its runs
    (the workloads import them only when they run, so that reading the grid stays fast)."""
    import networkx  # noqa: F401
    import sklearn.cluster  # noqa: F401
    import sklearn.decomposition  # noqa: F401
    import sklearn.linear_model  # noqa: F401
    import sklearn.neighbors  # noqa: F401

    workloads()

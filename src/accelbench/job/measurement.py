"""Run one experiment and write its record: the body of every benchmark job.

Whatever happens inside the measurement, the job ends with exactly one
complete record: "ok" with metrics, "unavailable" or "oom" with the reason, or
"failed" with the error. Only a killed process leaves no record, and then the
atomic write guarantees no half-written one either.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from accelbench import backends, registry
from accelbench.families.base import Experiment, Family, family_of
from accelbench.job.context import JobContext
from accelbench.job.runs import Runs
from accelbench.measuring import contention, energy, gpu_state, host_speed, precision, rerun
from accelbench.measuring import statistics as sample_stats
from accelbench.measuring.outcome import (
    Outcome,
    RankFailure,
    RetryableFailure,
    note_rank_failure,
    of_error,
    of_process_end,
)
from accelbench.measuring.phases import Phases
from accelbench.measuring.settings import ContentionSettings, Params, RunSettings
from accelbench.platform import doctor, forked_cuda, host_cpus, provenance
from accelbench.platform.devices import cpus_used, slurm_gpu_shortfall
from accelbench.platform.processes import ChildFailed, OomKills, call_in_fork
from accelbench.platform.ranks import from_environment, is_primary_process, ranks_may_fork
from accelbench.records.record import make_record, write_record

log = logging.getLogger(__name__)


def guarded(measure, exp, settings) -> Outcome:
    """Turn any exception from a measurement into its outcome (outcome.of_error)."""
    try:
        return measure(exp, settings)
    except Exception as err:  # the record must say what went wrong, whatever it was
        log.error("%s raised:\n%s", exp.id, traceback.format_exc())
        return of_error(err)


def in_fresh_process(measure, exp: Experiment, settings: RunSettings) -> Outcome:
    """One run in a process forked for it: its own allocations, JIT loads and thread pools.

    Forking is safe only from a process that has not started a thread pool yet
    (OpenMP cannot be forked), which is why only the supervisor's fresh child
    asks for it. The outcome comes back pickled through a pipe.
    """
    kills = OomKills.read()
    try:
        return call_in_fork(guarded, measure, exp, settings)
    except ChildFailed as died:  # guarded answers every exception: the run's process died
        return of_process_end("the run's process", died.code, kills)


def combine_runs(outcomes: list[Outcome], spread: rerun.Spread | None = None) -> Outcome:
    """One outcome from R runs: every distribution metric across runs (sample_stats.across_runs).

    The check is the worst run's; series and settled params are the first run's,
    with each metric's run medians added as a series and the per-run series (each
    run's warm-up) joined run after run; the raw samples of all runs are kept, run by
    run, and so are the energy windows.
    """
    first = outcomes[0]
    if len(outcomes) == 1:
        return first
    per_run = [outcome.metrics for outcome in outcomes]
    checks = [outcome.check for outcome in outcomes if outcome.check]
    check = None
    if checks:
        check = dict(max(checks, key=lambda found: found.get("relative_error") or 0.0))
        check["passed"] = all(bool(found.get("passed")) for found in checks)
    series = dict(first.series or {})
    for name, entry in series.items():
        if sample_stats.is_per_run_series(name):
            values = [value for outcome in outcomes for value in outcome.series[name]["values"]]
            series[name] = {**entry, "values": values}
    interval = sample_stats.RERUN_INTERVAL if spread is None else sample_stats.HOST_RERUN_INTERVAL
    return Outcome(
        "ok",
        metrics=sample_stats.combine_metrics(per_run, spread),
        check=check,
        params={**first.params, "interval": interval},
        series={**series, **sample_stats.run_medians(per_run)},
        raw=sample_stats.combine_raw([outcome.raw for outcome in outcomes]),
        measured_by=first.measured_by,
        energy=energy.combine_sections([outcome.energy for outcome in outcomes]),
    )


def preload(*families: Family) -> None:
    """Import what measuring `families` needs (the fork server: every registered family,
    once), before runs are forked: what every run imports, then each family's own
    (its declaration's `preload`).

    Each forked run then starts without paying for the imports. Importing starts
    no thread pool (only the first parallel call does), so forking stays safe.
    Nothing here may ask the CUDA driver anything: a child of a process that has
    asked cannot use CUDA. So torch.utils.benchmark is left to each run (importing
    it imports torch.utils.cpp_extension, which calls torch.cuda.is_available()
    wherever CUDA_HOME, nvcc or /usr/local/cuda exists); its slow dependency,
    setuptools, is imported here, leaving the run 20 ms of the import.
    """
    import setuptools  # noqa: F401  (torch.utils.cpp_extension's: 50 ms)
    import torch  # noqa: F401  (seconds to import)

    done = set()
    for family in families:
        if family.preload and family.preload not in done:
            done.add(family.preload)
            family.preload_function()()


def before_runs(exp: Experiment, settings: RunSettings) -> None:
    """What every run of the job needs and none should make again, made here before the
    runs fork (each inherits it): the imports, the answers about the GPUs, the idle
    energy baseline and what the family prepares (a kernel's inputs and reference)."""
    phases = Phases()
    preload(family_of(exp))
    phases.lap("imports")
    if not forked_cuda.children_can_use_cuda():
        # This process initialised CUDA: each run must find out that it cannot use it and
        # say so (forked_cuda.CudaForkError), not inherit answers asked here.
        return
    know_the_gpus(exp)
    phases.lap("GPU questions")
    family = family_of(exp)
    if family.measures_energy:
        device = exp.parsed_device
        energy.Probe(device.is_gpu, range(device.count), settings.energy).close()
        phases.lap("idle energy baseline")
    if prepare := family.prepare_function():
        prepare(exp, settings)
        phases.lap("inputs and reference")
    log.info("%s: before its runs: %s", exp.id, phases.text())


def know_the_gpus(exp: Experiment) -> None:
    """Ask what a job asks about the GPUs (doctor.inspected: each in a forked child, once
    per process) here, so that every process forked from this one inherits the answers.

    Each question opens a CUDA context in a child of its own, a second or so: a GPU run
    asks whether its backend can run, and every record's provenance asks which GPUs
    there are. Asked in the fork server, no job asks again; in a job, none of its runs.
    """
    doctor.visible_gpus()
    if exp.parsed_device.is_gpu:
        for name in doctor.PROBES:
            doctor.inspected(name, 0)


def gpu_watch(exp: Experiment):
    """What the GPUs of `exp` did during its runs, for the record's conditions: their clocks,
    power and throttling, read by a process of their own throughout (gpu_state.GpuWatch: it
    asks NVML, never CUDA, so the runs forked beside it can use CUDA); a context holding
    None on a CPU. A comparison group's cells share one GPU, and one watch."""
    device = exp.parsed_device
    if not device.is_gpu:
        return contextlib.nullcontext(None)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return gpu_state.GpuWatch(gpu_state.watched_gpus(device.count, visible))


def with_gpu_state(outcome: Outcome, gpus: gpu_state.GpuWatch | None) -> Outcome:
    """`outcome` with what its GPUs did in its conditions, if it is ok and ran on GPUs."""
    if outcome.status == "ok" and gpus is not None:
        outcome.conditions = {**(outcome.conditions or {}), "gpu_state": gpus.stop()}
    return outcome


def _in_runs(exp: Experiment, settings: RunSettings, fresh_processes: bool) -> Outcome:
    """The experiment measured in independent runs until it is precise, combined.

    Runs are added (accelbench.measuring.precision) until the figure of merit's rerun interval
    is as narrow as asked or the time budget is spent, after at least
    settings.runs; the outcome's conditions say how precise it ended (job.runs.Runs).
    Where allowed, each run is a process of its own. Otherwise the runs follow
    one another in this process, or, for a family that repeats its runs itself
    (its declaration's `repeats_runs_itself`: training, inside the processes it
    launched), its one call measures them all: a launched rank (an srun task)
    cannot fork alone, its peers would wait for it.
    What the devices did meanwhile is watched from the first run to the last.
    """
    family = family_of(exp)
    if family.repeats_runs_itself and (not fresh_processes or from_environment()):
        cpus = host_cpus.ClockWatch(cpus_used(exp.parsed_device))
        with gpu_watch(exp) as gpus:
            outcome = guarded(family.measuring_function(), exp, settings)
            cpus.poll()
        if outcome.status == "ok":
            outcome.conditions = {**(outcome.conditions or {}), "cpu_clock": cpus.record()}
        return with_gpu_state(outcome, gpus)
    runs = Runs(exp, settings, fresh_processes)
    runs.prepare(before_runs, host_history, host_spread)
    measured = in_fresh_process if runs.forked else guarded
    # A fresh process, and each run's own, has started no thread pool: ranks may fork.
    with ranks_may_fork(fresh_processes), gpu_watch(exp) as gpus:
        while runs.wants_more():
            runs.run(measured)
    return with_gpu_state(runs.result(combine_runs), gpus)


def host_history(exp: Experiment, settings: RunSettings) -> host_speed.HostHistory | None:
    """The host's recent probes, against which a CPU experiment's runs are held
    (accelbench.measuring.host_speed), where the config asks for the probe; none on a GPU, whose
    times the host's CPUs do not set."""
    limit = settings.contention.max_host_slowdown
    if not limit or exp.parsed_device.is_gpu:
        return None
    return host_speed.HostHistory.load(limit)


def host_spread(
    exp: Experiment, host: host_speed.HostHistory | None, spreads: rerun.HostSpreads
) -> rerun.Spread | None:
    """What the host's recent cells of the experiment's device kind and its probes say of
    the runs (accelbench.measuring.rerun): a GPU's runs do not drift with the host's CPUs."""
    gpu = exp.parsed_device.is_gpu
    drift = 0.0 if gpu else (host.drift() if host else None)
    return rerun.spread_for(exp.parsed_device.kind, drift, spreads, device_timed=gpu)


def _tell(text: str) -> None:
    """A warning in the job's log and, where the log is a file, on the job's stderr too:
    the console of the Snakemake that runs it."""
    log.warning("%s", text)
    if is_primary_process() and any(
        isinstance(handler, logging.FileHandler) for handler in logging.getLogger().handlers
    ):
        print(f"accelbench: {text}", file=sys.stderr, flush=True)


def measure_watched(
    exp: Experiment, settings: RunSettings, *, fresh_processes: bool = False
) -> Outcome:
    """Measure under watch: a measurement disturbed by other load is retried after a pause.

    Contention above `contention.max_other_cpus` (CPUs used by other processes
    plus steal) makes the whole measurement run again after `pause_s`, up to
    `retries` times; if the machine stays busy the last outcome is kept, flagged
    busy. A measurement at least half of whose runs the host slowed
    (accelbench.measuring.host_speed) is flagged busy too, without a repeat: the host's
    stretches last minutes. A launched rank never retries alone (its peers would wait
    for it).
    The record's conditions hold the machine's state and how precise the
    measurement ended (accelbench.measuring.precision); a repeat, and a record that ends
    busy or imprecise, are told on the console.
    """
    [outcome] = watched(
        [exp],
        settings.contention,
        lambda: [_in_runs(exp, settings, fresh_processes)],
        fresh_processes,
    )
    return outcome


def watched(
    exps: list[Experiment],
    guard: ContentionSettings,
    measure_all: Callable[[], list[Outcome]],
    fresh_processes: bool,
) -> list[Outcome]:
    """`measure_all()`'s outcomes of `exps`, measured under watch (measure_watched): one
    experiment, or a comparison group's cells measured together (accelbench.job.group),
    which are measured again together where other load disturbed them. `guard`: the
    contention settings (the same for every cell of a group)."""
    retries = 0 if from_environment() else int(guard.retries)
    for attempt in range(1, retries + 2):
        watch = contention.Watch()
        outcomes = measure_all()
        seen = watch.stop()
        others = seen.busier_than(guard.max_other_cpus)
        # Another process's load may pass in a pause; the host's lasts minutes.
        ended = any(outcome.status != "ok" for outcome in outcomes)
        if not others or ended or attempt > retries:
            break
        names = exps[0].id if len(exps) == 1 else f"{len(exps)} cells of a group"
        _tell(
            f"{names}: {seen.contention:.2f} CPUs were busy elsewhere during the measurement "
            f"(limit {guard.max_other_cpus:.2f}); measuring again in {guard.pause_s} s "
            f"(attempt {attempt + 1} of {retries + 1})"
        )
        time.sleep(guard.pause_s)
    for exp, outcome in zip(exps, outcomes, strict=True):
        _flag(exp, outcome, seen, guard, attempt, others, fresh_processes)
    return outcomes


def _flag(exp, outcome, seen, guard, attempt, others, fresh_processes) -> None:
    """The machine's state and how precise the measurement ended, in `outcome`'s conditions;
    a busy or imprecise record told on the console; the spread of an undisturbed one kept
    for the host's next cells."""
    slowed = _host_slowed(outcome)
    busy = others or slowed > 0
    if fresh_processes and not others:
        _keep_spread(exp, outcome)
    reached = (outcome.conditions or {}) if outcome.status == "ok" else {}
    if busy and reached.get("imprecise"):
        reached["imprecise_reason"] = (
            f"the machine was busy ({_busy_text(seen, slowed, others)}); "
            f"{reached['imprecise_reason']}"
        )
    outcome.conditions = {
        **seen.as_record(),
        "busy": busy,
        "max_other_cpus": guard.max_other_cpus,
        "attempts": attempt,
        "cpus_used": cpus_used(exp.parsed_device),
        **reached,
    }
    # The record's own "imprecise": short of its configured target (the tables mark only
    # what is clearly wider than the host allows: accelbench.analysis.tidy).
    short = reached.get("imprecise")
    if outcome.status == "ok" and (busy or short):
        flags = " and ".join(
            flag for flag, on in (("flagged busy", busy), ("short of its target", short)) if on
        )
        machine = f"{_busy_text(seen, slowed, others, 'CPUs busy elsewhere')}; " if busy else ""
        _tell(f"{exp.id}: {flags}: {machine}{precision.describe(reached)}")


def _keep_spread(exp: Experiment, outcome: Outcome) -> None:
    """Add the spread of the figure of merit's run medians to the host's recent cells
    (rerun.HostSpreads), whose spreads widen the intervals of the next half hour's cells.
    Called only for a measurement no other process disturbed: one taken beside other load
    tells of that load, not of the host (with two processes spinning beside them, cells
    moved fifty-fold between runs)."""
    metrics = family_of(exp).precise_metrics
    found = (outcome.series or {}).get(f"{metrics[0]}_run_medians") if metrics else None
    medians = found["values"] if found and outcome.status == "ok" else []
    if len(medians) > 1 and min(medians) > 0:
        kind = exp.parsed_device.kind
        rerun.HostSpreads.load().add(kind, [math.log(median) for median in medians])


def _host_slowed(outcome: Outcome) -> int:
    """The runs the host slowed, where they were at least half of them (so the median is
    theirs); else 0."""
    conditions = (outcome.conditions or {}) if outcome.status == "ok" else {}
    slowed = conditions.get("host_slowed_runs", 0)
    return slowed if 2 * slowed >= conditions.get("runs", 1) and slowed else 0


def _busy_text(
    seen: contention.Conditions, slowed: int, others: bool, cpus: str = "CPUs elsewhere"
) -> str:
    """What made a measurement busy: other processes' CPUs, runs the host slowed, or both."""
    parts = [f"{seen.contention:.2f} {cpus}"] if others or not slowed else []
    if slowed:
        parts.append(f"{slowed} of its runs slowed by the host")
    return ", ".join(parts)


# Settings a record keeps elsewhere (conditions, energy, unit).
NOT_PARAMS = ("contention", "energy", "source_digest")


def _params(exp: Experiment, settings: RunSettings) -> Params:
    """The experiment's parameters and settings, less those its family leaves out, with what
    its family adds (its declaration's `record_params`: a naive kernel's size limit)."""
    family = family_of(exp)
    params = {
        key: value
        for key, value in settings.as_params().items()
        if key not in (*NOT_PARAMS, *family.unrecorded_settings)
    }
    params["interval"] = (
        sample_stats.RERUN_INTERVAL if settings.runs > 1 else sample_stats.WITHIN_RUN_INTERVAL
    )
    params.update(family.params_of(exp, settings))
    return {**asdict(exp), **params}


def run(
    exp: Experiment,
    settings: RunSettings,
    output: str,
    *,
    context: JobContext,
    final_attempt: bool = True,
    failure_dir: str | None = None,
    fresh_processes: bool = False,
) -> str:
    """Measure `exp` and write its record atomically to `output`; returns the status.

    An error on an attempt that is not the last raises RetryableFailure instead
    of writing a record, so the scheduler retries it (with more memory and time);
    on the last attempt the error goes into the record, so the grid keeps the cell.
    In a group of launched processes (srun tasks) every rank measures and rank 0
    writes; a rank other than 0 that fails notes why in `failure_dir` and raises
    RankFailure, so that its non-zero exit ends the group at once.
    `fresh_processes` runs each repetition in a forked process; only a process that
    has not measured anything yet may ask for it. `context`: the config digest the
    record's provenance names.
    """
    started = provenance.now()
    # A launched rank (an srun task) may see only its own GPU; loop.py checks it has one.
    launched = from_environment()
    shortfall = None if launched else slurm_gpu_shortfall(exp.parsed_device)
    if shortfall:
        outcome = Outcome("failed", shortfall)
    else:
        outcome = measure_watched(exp, settings, fresh_processes=fresh_processes)
    if outcome.raised and failure_dir and launched and not launched.is_primary:
        note_rank_failure(failure_dir, launched.rank, outcome)
        raise RankFailure(f"{exp.id}: rank {launched.rank}: {outcome.reason}")
    if outcome.raised and not final_attempt:
        raise RetryableFailure(f"{exp.id}: {outcome.reason}")
    write_outcome(exp, settings, output, outcome, started, context)
    return outcome.status


def unit_section(exp: Experiment) -> dict[str, Any] | None:
    """Where the experiment's unit came from and its source's digest (the record's `unit`);
    None for a family without units (roofs), or where the catalogue cannot say (a module
    that fails to import: the record's reason says so)."""
    family = family_of(exp)
    if family.catalogue is None:
        return None
    try:
        unit = registry.units(family.catalogue).get(getattr(exp, family.primary))
    except registry.PluginError:
        return None
    return unit.as_record() if unit else None


def write_outcome(
    exp: Experiment,
    settings: RunSettings,
    output: str,
    outcome: Outcome,
    started: str,
    context: JobContext,
) -> None:
    """The record of one outcome, with the provenance of this process, written atomically.

    Only rank 0 of a launched group builds and writes it: provenance asks git and
    the Slurm controller, once per record rather than once per task.
    """
    if is_primary_process():
        record = make_record(
            experiment=exp.family,
            experiment_id=exp.id,
            status=outcome.status,
            reason=outcome.reason,
            params={**_params(exp, settings), **outcome.params},
            metrics={**outcome.metrics, **energy.metrics(outcome.energy)},
            check=outcome.check,
            series=outcome.series,
            conditions=outcome.conditions,
            raw=outcome.raw,
            measured_by=outcome.measured_by,
            energy=outcome.energy,
            transient=outcome.transient,
            unit=unit_section(exp),
            provenance=provenance.collect(
                seed=settings.seed,
                config_digest=context.config_hash,
                started=started,
                libraries=backends.distributions(),
            ),
        )
        write_record(output, record)
    log.info("%s: %s%s", exp.id, outcome.status, f" ({outcome.reason})" if outcome.reason else "")

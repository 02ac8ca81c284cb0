"""The measured training loop: time per mini-batch, data loading timed apart.

Each step is two intervals on the host clock, each closed by a device
synchronisation: loading (the next batch from its source, moved to the
device) and the step itself (forward, backward, optimiser update), so the step
time covers all of the step's work and nothing queued from before. Warm-up
steps (allocator growth, cuDNN autotuning, lazy initialisation, compilation, a
clock still low) are run but not counted: at least `warmup_steps`, then until
the step time stops falling (timers.stopped_falling) or `warmup_s` is spent.
The measured steps follow: at least `steps`, and at least `min_run_time`
seconds of them, so a small model is not judged on a tenth of a second. An
experiment trains in independent runs, each with its own model, optimiser and
data, until its time per mini-batch is precise (accelbench.measuring.precision). In a
multi-process run all processes start each step together (a barrier outside
the timed intervals), a step takes as long as its slowest process, and every
process decides on the same combined step times, so all run the same steps.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import os
import resource
import socket
import statistics
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from accelbench import registry
from accelbench.measuring import energy, precision, timers
from accelbench.measuring import statistics as sample_stats
from accelbench.measuring.outcome import Outcome
from accelbench.platform import doctor, ranks
from accelbench.platform.devices import (
    Device,
    cpu_threads,
    cuda_unavailable_reason,
    visible_gpu_count,
)
from accelbench.train import distributed, strategies
from accelbench.train.cells import TrainCell
from accelbench.train.models import Unavailable, models
from accelbench.train.settings import TIME_METRIC, TrainSettings


@contextlib.contextmanager
def _tensor_cores(allow_tf32: bool):
    """TF32 on or off for this experiment only; the process-wide flags are restored after."""
    import torch

    previous = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = allow_tf32
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = previous


def run_steps(session, settings: TrainSettings) -> dict[str, Any]:
    """Warm-up steps until steady state, then the measured steps (module docstring):
    per-step load and step times (s, each the slowest process's), every step's loss and
    the warm-up (its steps, seconds and whether the step time had stopped falling)."""
    import torch
    import torch.distributed as dist

    grouped = session.placement.world_size > 1
    step_times: list[float] = []
    data_times: list[float] = []
    losses = []
    warmup: dict[str, Any] | None = None
    while True:
        if warmup is None:
            steady = timers.stopped_falling(step_times)
            spent = sum(step_times) + sum(data_times)
            if len(step_times) >= settings.warmup_steps and (steady or spent >= settings.warmup_s):
                warmup = {"steps": len(step_times), "seconds": spent, "steady": steady}
        if warmup is not None:
            measured = step_times[warmup["steps"] :]
            if len(measured) >= settings.steps and sum(measured) >= settings.min_run_time:
                break
        if grouped:
            dist.barrier()
        session.synchronize()
        started = time.perf_counter()
        inputs, targets = session.move(session.source.next())
        session.synchronize()
        loaded = time.perf_counter()
        losses.append(session.train_step(inputs, targets))
        session.synchronize()
        finished = time.perf_counter()
        step, data = finished - loaded, loaded - started
        if grouped:
            slowest = torch.tensor(
                [step, data], dtype=torch.float64, device=session.placement.device
            )
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            step, data = slowest.tolist()
        step_times.append(step)
        data_times.append(data)
    return {
        "step_times": step_times,
        "data_times": data_times,
        "losses": torch.stack(losses).double().cpu(),
        "warmup": warmup,
    }


def _reset_peak_memory(place) -> None:
    """Start the CUDA allocator's peak afresh on this process's GPUs (one run's own)."""
    import torch

    for gpu in place.devices:
        if gpu.type == "cuda":
            torch.cuda.reset_peak_memory_stats(gpu)


def _peak_memory(place) -> tuple[str, int]:
    """The CUDA allocator's peak over this process's GPUs, or the process's peak resident set."""
    import torch

    gpus = [device for device in place.devices if device.type == "cuda"]
    if gpus:
        return "peak_gpu_memory", max(torch.cuda.max_memory_allocated(gpu) for gpu in gpus)
    # ru_maxrss is in KiB on Linux: the peak resident set of this process since it started.
    return "peak_host_rss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _combine_ranks(log: dict[str, Any], peak: int, device) -> tuple[dict[str, Any], int]:
    """Across processes: the mean loss and the largest peak memory (the step times are each
    step's slowest already: run_steps)."""
    import torch
    import torch.distributed as dist

    losses = log["losses"].to(device)
    dist.all_reduce(losses, op=dist.ReduceOp.SUM)
    peaks = torch.tensor([peak], dtype=torch.float64, device=device)
    dist.all_reduce(peaks, op=dist.ReduceOp.MAX)
    return {**log, "losses": (losses / dist.get_world_size()).cpu()}, int(peaks.item())


def _another_run(progress: precision.Progress, grouped: bool, device) -> bool:
    """Whether to train one more run; in a group rank 0's answer, so that every process
    trains the same runs (each reads its own clock for the time budget)."""
    import torch
    import torch.distributed as dist

    more = progress.more()
    if grouped:
        flag = torch.tensor([float(more)], device=device)
        dist.broadcast(flag, src=0)
        more = bool(flag.item())
    return more


def _rank_hosts(grouped: bool) -> list[str]:
    """The host each process ran on, in rank order: where a multi-node run really ran."""
    import torch.distributed as dist

    host = socket.gethostname()
    if not grouped:
        return [host]
    hosts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(hosts, host)
    return hosts


def energy_probe(device: Device, place, settings: TrainSettings) -> energy.Probe:
    """This process's energy meter: its own GPUs; on the CPU, the packages, unless several
    processes share them (their energy could not be told apart)."""
    gpus = [unit.index or 0 for unit in place.devices if unit.type == "cuda"]
    declined = None
    if place.world_size > 1 and not device.is_gpu:
        declined = (
            f"not measured: the {place.world_size} processes share the CPU packages, "
            "whose energy counters cannot tell them apart"
        )
    return energy.Probe(device.is_gpu, gpus, settings.energy, declined=declined)


def energy_window(session, probe: energy.Probe, step_times: list[float]) -> None:
    """Training steps (each loading its batch) for at least the energy window, after the
    timed steps. In a group every process runs the same number of steps (planned from
    the same combined step times), and all measure or none does."""
    import torch
    import torch.distributed as dist

    if session.placement.world_size > 1:
        reads = torch.tensor([float(probe.reads)], device=session.placement.device)
        dist.all_reduce(reads, op=dist.ReduceOp.MIN)
        if not reads.item():
            if probe.reads:
                probe.decline("another process of the group cannot read its energy counter")
            return
    elif not probe.reads:
        return

    def step():
        inputs, targets = session.move(session.source.next())
        session.train_step(inputs, targets)

    probe.window(step, statistics.median(step_times), session.synchronize)


def _combine_energy(found: dict[str, Any], device) -> dict[str, Any]:
    """Across processes: each window's energy summed (every process read its own GPUs),
    its length the longest; the idle baselines summed too."""
    import torch
    import torch.distributed as dist

    measured = torch.tensor([float(found["status"] != "unavailable")], device=device)
    dist.all_reduce(measured, op=dist.ReduceOp.MIN)
    if found["status"] == "unavailable":
        return found
    if not measured.item():
        return energy.unavailable("another process of the group lost its energy counter")
    windows = found["windows"]
    energies = torch.tensor(
        [
            [w["joules"] for w in windows] + [found["baseline_w"]],
            [w["seconds"] for w in windows] + [0.0],
        ],
        dtype=torch.float64,
        device=device,
    )
    seconds = energies[1].clone()
    dist.all_reduce(energies, op=dist.ReduceOp.SUM)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
    world = dist.get_world_size()
    combined = [
        {**window, "joules": float(joules), "seconds": float(length)}
        for window, joules, length in zip(
            windows, energies[0].tolist(), seconds.tolist(), strict=False
        )
    ]
    return {
        **found,
        "method": f"{found['method']} in each of {world} processes, summed",
        "baseline_w": float(energies[0, -1]),
        "windows": combined,
    }


def _local_gpu(rendezvous: ranks.Rendezvous) -> int:
    """This process's GPU: its local rank, or 0 where each task sees only its own GPU."""
    return rendezvous.local_rank if visible_gpu_count() > 1 else 0


def train_process(
    exp: TrainCell,
    settings: TrainSettings,
    rendezvous: ranks.Rendezvous = ranks.SINGLE_PROCESS,
    keep_state: bool = False,
) -> dict[str, Any]:
    """Build and train in this process (one rank of a group, or the only process).

    Returns plain numbers for the record (in a group: combined over ranks);
    with `keep_state`, also the trained parameters as full CPU tensors.
    """
    import torch
    import torch.distributed as dist

    device = exp.parsed_device
    threads = strategies.threads_per_process(exp.strategy, device)
    grouped = rendezvous.world_size > 1
    place = strategies.placement(
        exp.strategy, device, rendezvous.rank, rendezvous.world_size, _local_gpu(rendezvous)
    )
    if device.is_gpu:
        torch.cuda.set_device(place.device)
    gpus = sum(1 for unit in place.devices if unit.type == "cuda")
    if grouped:
        # Imported by the first optimiser otherwise, once the group has started: a group
        # started before torch._dynamo is imported outlives destroy_process_group (below).
        preload()
        backend = "nccl" if device.is_gpu else "gloo"
        distributed.init_process_group(rendezvous, backend, place.device)
    try:
        if grouped and device.is_gpu:
            gpus = distributed.check_distinct_gpus(place.device)
        hosts = _rank_hosts(grouped)
        with cpu_threads(device, threads), _tensor_cores(exp.precision == "tf32"):
            measured = _measured_runs(exp, settings, place, grouped, keep_state)
    except RuntimeError as err:
        hung = grouped and distributed.peers_timed_out(err, "a collective of the processes")
        if not hung:
            raise
        raise hung from err
    finally:
        if grouped:
            # The last run's model holds the group: dropped after the group has ended, it
            # would end the group's gloo threads while holding the GIL, and a thread that was
            # releasing a collective's tensor waits for the GIL for good (forked ranks hung so
            # on a 16-CPU host). _measured_runs drops it, the collector frees what cycles hold,
            # and the group ends in destroy_process_group, which frees the GIL.
            gc.collect()
            dist.destroy_process_group()
    result = {
        "runs": measured.runs,
        "losses": measured.runs[0]["losses"],
        "memory_metric": measured.memory_metric,
        "peak_memory": max(measured.peaks),
        **measured.built,
        "processes": rendezvous.world_size,
        "hosts": hosts,
        "threads": threads,
        "gpus": gpus,
        "launcher": rendezvous.launcher,
        "energy": measured.energy,
        "precision": measured.precision,
    }
    if keep_state:
        result["state"] = measured.state
    return result


@dataclass
class _MeasuredRuns:
    """What an experiment's runs leave for its record, without their sessions, so that
    no model outlives the runs (train_process ends a group only once none holds it)."""

    runs: list[dict[str, Any]]
    memory_metric: str
    peaks: list[int]
    built: dict[str, Any]
    energy: dict[str, Any] | None
    precision: dict[str, Any]
    state: dict[str, Any] | None


def _measured_runs(
    exp: TrainCell, settings: TrainSettings, place, grouped: bool, keep_state: bool
) -> _MeasuredRuns:
    """Independent runs, each building its model, optimiser and data afresh, until the time
    per mini-batch is precise (accelbench.measuring.precision)."""
    from accelbench.train import session as sessions

    device = exp.parsed_device
    runs, peaks = [], []
    state = None
    progress = precision.Progress(precision.Goal.of((TIME_METRIC,), settings))
    session = None
    try:
        with energy_probe(device, place, settings) as probe:
            while _another_run(progress, grouped, place.device):
                # The last run's model and optimiser go before this run's peak counts
                # (the collector too: a model built first in a process can be in a cycle).
                session = None
                gc.collect()
                _reset_peak_memory(place)
                session = sessions.build(exp, settings, device, place)
                log = run_steps(session, settings)
                memory_name, peak = _peak_memory(place)
                if grouped:
                    log, peak = _combine_ranks(log, peak, place.device)
                peaks.append(peak)
                runs.append({**log, "losses": log["losses"].tolist()})
                # This run's parameters as the measured steps left them, before the
                # energy window trains on: the last run's are returned.
                if keep_state:
                    state = _full_state(session.model)
                measured = log["step_times"][log["warmup"]["steps"] :]
                progress.add({"time_per_batch": sample_stats.summarize(measured, "s")})
                energy_window(session, probe, measured)
                settings = replace(settings, flops_per_sample=session.flops_per_sample)
            used = probe.section("step", exp.batch)
        built = _built(session)
        if grouped and used is not None:  # every process of the group takes it or none
            used = _combine_energy(used, place.device)
    finally:
        session = None  # also when a run fails: its traceback keeps this frame
    return _MeasuredRuns(runs, memory_name, peaks, built, used, progress.report(), state)


def _built(session) -> dict[str, Any]:
    """What the record says of the model and data a session built, kept past the session."""
    names = ("parameters", "flops_per_sample", "options", "data", "data_note")
    return {name: getattr(session, name) for name in names}


def _full_state(model) -> dict[str, Any]:
    """Parameters and buffers as full CPU tensors (FSDP shards gathered)."""
    state = {}
    for name, tensor in model.state_dict().items():
        full = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
        state[name] = full.detach().cpu().clone()
    return state


def _launch(exp: TrainCell, settings: TrainSettings, device: Device) -> dict[str, Any]:
    """Run the experiment's processes: in this process, as a launched rank, or launched here."""
    processes = strategies.process_count(exp.strategy, device)
    if processes == 1:
        return train_process(exp, settings)
    rendezvous = ranks.from_environment()
    if rendezvous is not None:
        if rendezvous.world_size != processes:
            raise ranks.LaunchError(
                f"launched as {rendezvous.world_size} processes ({rendezvous.launcher}); "
                f"{exp.device} with {exp.strategy} needs {processes}"
            )
        return train_process(exp, settings, rendezvous)
    # torchrun's ranks are new interpreters: they load the catalogue this process has.
    request = {
        # The worker imports the experiment's type by its name: "module:name".
        "experiment_type": f"{type(exp).__module__}:{type(exp).__qualname__}",
        "experiment": asdict(exp),
        "settings": settings.as_params(),
        "plugins": registry.plugin_folders(),
    }
    threads = strategies.threads_per_process(exp.strategy, device)
    return distributed.launch(
        functools.partial(train_process, exp, settings),
        request,
        processes,
        threads,
        on_gpus=device.is_gpu,
    )


def _unavailable_reason(exp: TrainCell, settings: TrainSettings, device: Device) -> str | None:
    launched = ranks.from_environment()
    if device.nodes > 1 and launched is None:
        processes = strategies.process_count(exp.strategy, device)
        return (
            f"{exp.device} runs as {processes} Slurm tasks over {device.nodes} nodes: run it "
            f"under Slurm (snakemake --executor slurm {exp.path}), "
            f"or in an allocation with srun --ntasks={processes} accelbench train {exp.path}"
        )
    if launched is not None and device.is_gpu:
        # Each launched task needs one GPU, whether it sees its node's GPUs or only its own.
        bound = os.environ.get("CUDA_VISIBLE_DEVICES")
        hint = f" (CUDA_VISIBLE_DEVICES={bound!r})" if bound is not None else ""
        reason = (
            None
            if visible_gpu_count()
            else f"no CUDA device available to PyTorch in this task{hint}"
        )
        gpus = [_local_gpu(launched)] if reason is None else []
    else:
        reason = cuda_unavailable_reason(device)
        gpus = range(device.count)
    if reason is None and device.is_gpu:
        # Checked in a forked child: a process that goes on to launch the ranks (torchrun)
        # must hold no CUDA context, or the ranks cannot use its GPUs in EXCLUSIVE_PROCESS
        # mode; a launched rank checks its own GPU, not GPU 0 of its node.
        reason = doctor.backend_problem("torch", gpus, exp.precision)
    if reason is None and settings.compile != "off" and exp.strategy not in strategies.COMPILABLE:
        reason = (
            f"torch.compile is applied with strategies {', '.join(strategies.COMPILABLE)}; "
            f"train.compile is {settings.compile!r} and the strategy is {exp.strategy!r}"
        )
    return reason


def measure_training(exp: TrainCell, settings: TrainSettings):
    """Train `exp.model` for warm-up + measured steps and summarise what was measured."""
    device = exp.parsed_device
    reason = _unavailable_reason(exp, settings, device)
    if reason:
        return Outcome("unavailable", reason)
    try:
        result = _launch(exp, settings, device)
    except Unavailable as err:
        return Outcome("unavailable", str(err))
    return outcome_from(result, exp)


def preload() -> None:
    """Import what a training run needs before the job forks its runs: the models and their
    libraries, and what the first optimiser built imports (torch._dynamo: 2 s)."""
    import torch._dynamo  # noqa: F401

    import accelbench.train.session  # noqa: F401


def later_runs(exp: TrainCell, settings: TrainSettings, first: Outcome) -> TrainSettings:
    """Settings for runs 2..R of a training experiment: the FLOPs run 1 counted."""
    return replace(settings, flops_per_sample=first.metrics["flops_per_sample"]["value"])


def outcome_from(result: dict[str, Any], exp: TrainCell) -> Outcome:
    """The record's metrics, loss series and data description from a run's plain numbers."""
    losses = result["losses"]
    params = {
        "options": result["options"],
        "data": result["data"],
        "data_note": result["data_note"],
        "launcher": result["launcher"],
        "hosts": result["hosts"],
    }
    series = {"loss": {"unit": "loss", "values": losses}}
    runs = [(run, run["warmup"]["steps"]) for run in result["runs"]]
    measured = [value for run, warmup in runs for value in run["losses"][warmup:]]
    if not all(math.isfinite(value) for value in measured):
        reason = f"loss is not finite during the measured steps: {losses[-3:]}"
        return Outcome("failed", reason, params=params, series=series)
    flops_per_batch = result["flops_per_sample"] * exp.batch
    per_run = []
    for run, warmup in runs:
        time_stats = sample_stats.summarize(run["step_times"][warmup:], "s")
        per_run.append(
            {
                "time_per_batch": time_stats,
                "throughput": sample_stats.rate_from_time(time_stats, exp.batch, "samples/s"),
                "data_time_per_batch": sample_stats.summarize(run["data_times"][warmup:], "s"),
                "achieved_flops": sample_stats.rate_from_time(
                    time_stats, flops_per_batch / 1e9, "GFLOP/s"
                ),
            }
        )
    series.update(
        sample_stats.warmup_series(
            [run["warmup"]["seconds"] for run, _ in runs],
            [run["warmup"]["steady"] for run, _ in runs],
        )
    )
    series.update(sample_stats.run_medians(per_run) if len(per_run) > 1 else {})
    raw = {
        name: sample_stats.raw_samples("s", [run[key][warmup:] for run, warmup in runs])
        for name, key in (("time_per_batch", "step_times"), ("data_time_per_batch", "data_times"))
    }
    measured_by = {
        "implementation": f"{models()[exp.model].module_name}:{exp.model} "
        f"+ accelbench.train.strategies:{exp.strategy}",
        "timer": timers.STEP_TIMER,
    }
    metrics = {
        **sample_stats.combine_metrics(per_run),
        "first_step_time": sample_stats.value(result["runs"][0]["step_times"][0], "s"),
        result["memory_metric"]: sample_stats.value(result["peak_memory"], "bytes"),
        "loss_first": sample_stats.value(losses[0], "loss"),
        "loss_last": sample_stats.value(losses[-1], "loss"),
        "parameters": sample_stats.value(result["parameters"], "count"),
        "flops_per_sample": sample_stats.value(result["flops_per_sample"], "FLOP"),
        "processes": sample_stats.value(result["processes"], "processes"),
        "nodes": sample_stats.value(len(set(result["hosts"])), "nodes"),
        "threads": sample_stats.value(result["threads"], "threads"),
        "gpus": sample_stats.value(result["gpus"], "GPUs"),
    }
    return Outcome(
        "ok",
        metrics=metrics,
        params=params,
        series=series,
        raw=raw,
        measured_by=measured_by,
        energy=result.get("energy"),
        conditions=result["precision"],
    )

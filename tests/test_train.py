"""The training benchmark: measured steps, learning actually happening, and device handling."""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import statistics
import weakref
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from accelbench.families.train import PRECISIONS, TrainExperiment
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.measuring import timers
from accelbench.platform import devices
from accelbench.records.record import load_record
from accelbench.train import loop
from accelbench.train.cells import exclusion as train_exclusion
from accelbench.train.loop import later_runs as train_later_runs
from accelbench.train.loop import measure_training, run_steps, train_process
from accelbench.train.models import models, new_step, resolve_options
from accelbench.train.settings import TrainSettings

HAS_GPU = torch.cuda.is_available()
NO_GPU_REASON = "no CUDA GPU present (torch.cuda.is_available() is False)"
SETTINGS = TrainSettings(seed=0, steps=3, warmup_steps=1, image_size=32)
CONTEXT = JobContext("t")
BATCH = 4


def check_ok_metrics(metrics, batch, steps):
    time_stats = metrics["time_per_batch"]
    assert time_stats["unit"] == "s"
    assert time_stats["n"] == steps
    assert 0 < time_stats["min"] <= time_stats["median"] <= time_stats["max"]
    assert time_stats["ci_low"] <= time_stats["median"] <= time_stats["ci_high"]
    throughput = metrics["throughput"]
    assert throughput["unit"] == "samples/s"
    assert throughput["n"] == steps
    assert throughput["median"] == pytest.approx(batch / time_stats["median"])
    assert throughput["max"] == pytest.approx(batch / time_stats["min"])
    assert metrics["parameters"]["value"] > 1e6
    memory = "peak_gpu_memory" if "peak_gpu_memory" in metrics else "peak_host_rss"
    assert "peak_memory" not in metrics
    assert metrics[memory]["unit"] == "bytes"
    assert metrics[memory]["value"] > 0
    for name in ("loss_first", "loss_last"):
        assert math.isfinite(metrics[name]["value"]), name
        assert metrics[name]["value"] > 0, name
    data_time = metrics["data_time_per_batch"]
    assert data_time["unit"] == "s" and data_time["n"] == steps
    assert 0 <= data_time["min"] <= data_time["median"] <= data_time["max"]
    assert metrics["flops_per_sample"]["unit"] == "FLOP"
    assert metrics["flops_per_sample"]["value"] > 0
    achieved = metrics["achieved_flops"]
    assert achieved["unit"] == "GFLOP/s"
    flops_per_batch = metrics["flops_per_sample"]["value"] * batch
    assert achieved["median"] == pytest.approx(flops_per_batch / time_stats["median"] / 1e9)
    assert metrics["first_step_time"]["value"] > 0


@pytest.mark.parametrize("precision", ["fp32", "fp64", "bf16"])
def test_cpu_training_record(precision, tmp_path):
    exp = TrainExperiment("resnet18", "cpu1", precision, "single", BATCH)
    assert train_exclusion(exp) is None
    output = tmp_path / "train.json"
    status = measurement.run(exp, SETTINGS, str(output), context=CONTEXT)
    record = load_record(output)
    assert status == record["status"] == "ok", record["reason"]
    assert record["experiment"] == "train"
    assert record["id"] == f"train/resnet18/cpu1/{precision}/single/bs{BATCH}"
    assert record["check"] is None
    check_ok_metrics(record["metrics"], BATCH, SETTINGS.steps)
    params = record["params"]
    assert params["precision"] == precision
    assert params["steps"] == SETTINGS.steps
    assert params["warmup_steps"] == SETTINGS.warmup_steps
    assert params["image_size"] == SETTINGS.image_size
    assert params["options"] == {
        "lr": 0.01,
        "depth": 18,
        "image_size": SETTINGS.image_size,
        "classes": 10,
    }
    assert params["data"] == "synthetic"
    assert record["provenance"]["config_hash"] == "t"
    assert record["provenance"]["seed"] == 0
    losses = record["series"]["loss"]
    assert losses["unit"] == "loss"
    assert len(losses["values"]) == SETTINGS.warmup_steps + SETTINGS.steps
    assert losses["values"][0] == record["metrics"]["loss_first"]["value"]
    assert losses["values"][-1] == record["metrics"]["loss_last"]["value"]
    assert record["measured_by"] == {
        "implementation": "accelbench.train.models.resnet:resnet18 "
        "+ accelbench.train.strategies:single",
        "timer": timers.STEP_TIMER,
    }
    step_times = record["raw"]["time_per_batch"]
    assert step_times["unit"] == "s" and len(step_times["runs"]) == 1
    assert len(step_times["runs"][0]) == SETTINGS.steps  # the measured steps, no warm-up
    assert statistics.median(step_times["runs"][0]) == pytest.approx(
        record["metrics"]["time_per_batch"]["median"]
    )


def test_measure_training_outcome_directly():
    exp = TrainExperiment("resnet18", "cpu1", "fp32", "single", BATCH)
    outcome = measure_training(exp, SETTINGS)
    assert outcome.status == "ok", outcome.reason
    assert outcome.reason is None
    check_ok_metrics(outcome.metrics, BATCH, SETTINGS.steps)
    # ResNet-18 with a 10-class head: 11.18 M parameters.
    assert outcome.metrics["parameters"]["value"] == 11_181_642


def test_flops_are_counted_by_the_first_run_only(monkeypatch):
    """Counting takes up to seconds (an LSTM on the meta device) and never changes."""
    from accelbench.train import session

    counted = []
    real = session.flops_per_sample
    monkeypatch.setattr(
        session, "flops_per_sample", lambda *args: counted.append(args) or real(*args)
    )
    exp = TrainExperiment("fcn", "cpu1", "fp32", "single", BATCH)
    outcome = measure_training(exp, replace(SETTINGS, runs=3))
    assert outcome.status == "ok", outcome.reason
    assert len(counted) == 1
    later = train_later_runs(exp, SETTINGS, outcome)
    assert later.flops_per_sample == outcome.metrics["flops_per_sample"]["value"] > 0
    again = measure_training(exp, later)
    assert len(counted) == 1
    assert again.metrics["flops_per_sample"] == outcome.metrics["flops_per_sample"]


class FakeCudaAllocator:
    """torch.cuda's allocation counters for a run on the CPU: the bytes of the models built
    and not yet freed are allocated; max_memory_allocated is the peak since the last
    reset_peak_memory_stats, as torch counts it."""

    def __init__(self):
        self.allocated = self.peak = 0

    def allocate(self, nbytes: int) -> None:
        self.allocated += nbytes
        self.peak = max(self.peak, self.allocated)

    def free(self, nbytes: int) -> None:
        self.allocated -= nbytes

    def reset_peak_memory_stats(self, device=None) -> None:
        self.peak = self.allocated

    def max_memory_allocated(self, device=None) -> int:
        return self.peak


def test_the_peak_gpu_memory_of_repeated_runs_is_each_runs_own(monkeypatch):
    """Runs in one process: each run's peak counts its own model, not the last run's too."""
    from accelbench.train import session, strategies

    allocator = FakeCudaAllocator()
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", allocator.reset_peak_memory_stats)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", allocator.max_memory_allocated)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    on_the_cpu = strategies.placement

    def with_a_gpu(*args):
        place = on_the_cpu(*args)
        return dataclasses.replace(place, devices=(*place.devices, torch.device("cuda", 0)))

    monkeypatch.setattr(strategies, "placement", with_a_gpu)
    build = session.build

    def build_on_the_gpu(*args):
        built = build(*args)
        nbytes = sum(p.numel() * p.element_size() for p in built.model.parameters())
        allocator.allocate(nbytes)
        weakref.finalize(built.model, allocator.free, nbytes)
        # In a reference cycle, as a model built first in a process can be: only the
        # collector frees it.
        object.__setattr__(built.model, "held_by_itself", [built.model])
        return built

    monkeypatch.setattr(session, "build", build_on_the_gpu)
    exp = TrainExperiment("fcn", "cpu1", "fp32", "single", BATCH)
    gc.disable()  # the collector runs when the loop asks, not when allocations happen to
    try:
        result = train_process(exp, replace(SETTINGS, runs=3))
    finally:
        gc.enable()
    assert result["memory_metric"] == "peak_gpu_memory"
    assert result["peak_memory"] == 4 * result["parameters"]  # one float32 model


def test_training_is_deterministic_for_a_seed():
    exp = TrainExperiment("resnet18", "cpu1", "fp64", "single", 2)
    settings = replace(SETTINGS, steps=2, warmup_steps=0)
    first = measure_training(exp, settings).metrics
    second = measure_training(exp, settings).metrics
    for name in ("loss_first", "loss_last"):
        assert first[name]["value"] == pytest.approx(second[name]["value"], rel=1e-9)


@pytest.mark.parametrize("name", list(models()))
def test_every_model_runs_one_fp32_step(name):
    spec = models()[name]
    assert spec.name == name
    assert spec.default_batch > 0
    assert "lr" in spec.options
    options = resolve_options(spec, spec.tiny_options)
    torch.manual_seed(0)
    model = spec.build(options)
    batch = spec.make_batch(torch.Generator().manual_seed(0), 2, options)
    again = spec.make_batch(torch.Generator().manual_seed(0), 2, options)
    flat, flat_again = _tensors(batch), _tensors(again)
    assert len(flat) == len(flat_again) >= 2
    for x, y in zip(flat, flat_again, strict=True):
        assert x.shape[0] == 2, "every tensor of a batch has the sample as its first dimension"
        assert torch.equal(x, y), "make_batch must be deterministic for a seeded generator"
    parts = spec.parts(model)
    step = new_step(spec, parts, options["lr"])
    before = [p.detach().clone() for p in model.parameters()]
    loss = spec.train_step(step, *batch)
    assert loss.dtype == torch.float32 and loss.dim() == 0
    assert math.isfinite(loss.item())
    assert not loss.requires_grad, "the step returns the detached loss"
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    for part in parts:
        changed = [
            not torch.equal(b, p)
            for b, p in zip(before, model.parameters(), strict=True)
            if any(p is q for q in part.parameters())
        ]
        assert any(changed), "an optimiser step must change every part's parameters"


def _tensors(obj):
    if isinstance(obj, tuple | list):
        return [tensor for item in obj for tensor in _tensors(item)]
    return [obj]


def test_tf32_on_cpu_is_excluded():
    reason = train_exclusion(TrainExperiment("resnet18", "cpu1", "tf32", "single", BATCH))
    assert isinstance(reason, str)
    assert "CUDA" in reason
    assert train_exclusion(TrainExperiment("resnet18", "cuda1", "tf32", "single", BATCH)) is None


@pytest.mark.parametrize("precision", [p for p in PRECISIONS if p != "tf32"])
def test_other_precisions_on_cpu_are_not_excluded(precision):
    assert train_exclusion(TrainExperiment("resnet18", "cpu4", precision, "single", 8)) is None


def test_multi_gpu_single_strategy_is_excluded():
    reason = train_exclusion(TrainExperiment("resnet18", "cuda2", "fp32", "single", BATCH))
    assert reason == "strategy 'single' uses one GPU; cuda2 asks for 2"


def test_cpu2_uses_two_threads_and_restores_the_count(monkeypatch):
    spec = models()["resnet18"]
    seen = []
    original = spec.build

    def build(options):
        seen.append(torch.get_num_threads())
        return original(options)

    monkeypatch.setattr(spec.implementation, "build", build)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        outcome = measure_training(
            TrainExperiment("resnet18", "cpu2", "fp32", "single", 2),
            replace(SETTINGS, steps=1, warmup_steps=0),
        )
        assert outcome.status == "ok", outcome.reason
        # Built twice: once on the meta device to count FLOPs, once to train.
        assert seen == [2, 2], "the model must be built and trained with the device's thread count"
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(previous)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU leaves nothing to choose")
def test_cpu1_training_runs_on_the_one_cpu_chosen_for_it_and_gives_the_others_back(monkeypatch):
    spec = models()["resnet18"]
    seen = []
    original = spec.build

    def build(options):
        seen.append(os.sched_getaffinity(0))
        return original(options)

    monkeypatch.setattr(spec.implementation, "build", build)
    outside = os.sched_getaffinity(0)
    outcome = measure_training(
        TrainExperiment("resnet18", "cpu1", "fp32", "single", 2),
        replace(SETTINGS, steps=1, warmup_steps=0),
    )
    assert outcome.status == "ok", outcome.reason
    chosen = set(devices.pinned_cpus(devices.parse_device("cpu1")))
    assert len(chosen) == 1 and seen == [chosen, chosen]
    assert os.sched_getaffinity(0) == outside


def test_cpu_thread_count_restored_after_failure(monkeypatch):
    def build(options):
        raise RuntimeError("build failed")

    monkeypatch.setattr(models()["resnet18"].implementation, "build", build)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.raises(RuntimeError, match="build failed"):
            measure_training(TrainExperiment("resnet18", "cpu2", "fp32", "single", 2), SETTINGS)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(previous)


def test_cuda_training_unavailable_without_gpu():
    if HAS_GPU:
        pytest.skip("a CUDA GPU is present")
    outcome = measure_training(TrainExperiment("resnet18", "cuda1", "fp32", "single", 4), SETTINGS)
    assert outcome.status == "unavailable"
    assert "CUDA" in outcome.reason
    assert outcome.metrics == {}


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason=NO_GPU_REASON)
@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16", "tf32"])
def test_cuda_training(precision, tmp_path):
    exp = TrainExperiment("resnet18", "cuda1", precision, "single", BATCH)
    assert train_exclusion(exp) is None
    output = tmp_path / "train.json"
    measurement.run(exp, SETTINGS, str(output), context=CONTEXT)
    record = load_record(output)
    if precision == "bf16" and not torch.cuda.is_bf16_supported():
        assert record["status"] == "unavailable"
        assert "bfloat16" in record["reason"]
        return
    assert record["status"] == "ok", record["reason"]
    check_ok_metrics(record["metrics"], BATCH, SETTINGS.steps)
    assert record["provenance"]["accelerator"]["gpus"]


def test_harness_overhead_pairs_loop_steps_with_bare_steps():
    from accelbench.train.overhead import harness_overhead

    exp = TrainExperiment("fcn", "cpu1", "fp32", "single", 8)
    tiny = {"input_dim": 16, "hidden": [8], "classes": 3}
    result = harness_overhead(exp, TrainSettings(model_options=tiny), pairs=5, warmup=1)
    assert len(result["loop_s"]) == len(result["bare_s"]) == 5
    assert all(t > 0 for t in result["loop_s"] + result["bare_s"])
    overhead = result["overhead"]
    assert overhead["unit"] == "fraction" and overhead["n"] == 5
    relative = sorted((a - b) / b for a, b in zip(result["loop_s"], result["bare_s"], strict=True))
    assert overhead["median"] == pytest.approx(relative[2])
    gan = TrainExperiment("dcgan", "cpu1", "fp32", "single", 4)
    with pytest.raises(ValueError, match="dcgan trains several parts"):
        harness_overhead(
            gan, TrainSettings(model_options=dict(models()["dcgan"].tiny_options)), pairs=3
        )
    with pytest.raises(ValueError, match="measured in one process"):
        harness_overhead(TrainExperiment("fcn", "cpu2", "fp32", "ddp", 8), TrainSettings(), pairs=3)


# Warm-up until steady state, measured steps for a least time, runs until precise -------


class StepClock:
    """Stands in for the `time` module the loop reads its clock from."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class ClockedSession:
    """A training session whose k-th step takes `step_s[k]` seconds on a StepClock."""

    def __init__(self, clock: StepClock, step_s):
        self.clock, self.step_s = clock, iter(step_s)
        self.placement = SimpleNamespace(world_size=1)
        self.source = SimpleNamespace(next=lambda: (None, None))

    def synchronize(self) -> None:
        pass

    def move(self, batch):
        return batch

    def train_step(self, inputs, targets):
        self.clock.now += next(self.step_s)
        return torch.tensor(1.0)


def clocked_steps(monkeypatch, step_s, **settings):
    clock = StepClock()
    monkeypatch.setattr(loop, "time", clock)
    return run_steps(ClockedSession(clock, step_s), TrainSettings(**settings))


def test_warm_up_steps_run_until_the_step_time_stops_falling(monkeypatch):
    # A cold process: 100 ms per step at first, 10 ms once settled; two warm-up steps
    # (the configured least) would count 60, 40, 30, 20 ms steps as measured.
    falling = [0.1, 0.08, 0.06, 0.04, 0.03, 0.02] + [0.01] * 200
    log = clocked_steps(
        monkeypatch, falling, warmup_steps=2, warmup_s=10.0, steps=3, min_run_time=0.05
    )
    warmup = log["warmup"]
    assert warmup["steady"] is True
    # Steps 9-11 as fast as the median of steps 6-8 (20, 10, 10 ms): steady after 11.
    assert warmup["steps"] == 11
    measured = log["step_times"][warmup["steps"] :]
    assert measured == pytest.approx([0.01] * 5)  # 3 steps at least, and 50 ms at least
    assert warmup["seconds"] == pytest.approx(sum(log["step_times"][:11]))
    assert len(log["losses"]) == len(log["step_times"])


def test_a_warm_up_that_keeps_falling_stops_at_its_budget_and_says_so(monkeypatch):
    always_faster = [0.1 * 0.9**step for step in range(500)]
    log = clocked_steps(
        monkeypatch, always_faster, warmup_steps=2, warmup_s=0.5, steps=3, min_run_time=0.0
    )
    assert log["warmup"]["steady"] is False
    assert 0.5 <= log["warmup"]["seconds"] < 0.5 + 0.1
    assert len(log["step_times"]) == log["warmup"]["steps"] + 3


def test_without_a_warm_up_budget_or_a_least_time_the_counts_are_exact(monkeypatch):
    log = clocked_steps(monkeypatch, [0.1, 0.05] + [0.01] * 20, warmup_steps=2, steps=3)
    assert log["warmup"] == {"steps": 2, "seconds": pytest.approx(0.15), "steady": False}
    assert len(log["step_times"]) == 5


def test_training_adds_runs_until_precise_within_its_budget():
    exp = TrainExperiment("fcn", "cpu1", "fp32", "single", BATCH)
    # No run-to-run spread can meet a precision of one part in a million: the budget ends it.
    settings = replace(SETTINGS, runs=3, half_width=1e-6, budget_s=2.0)
    outcome = measure_training(exp, settings)
    assert outcome.status == "ok", outcome.reason
    report = outcome.conditions
    runs = report["runs"]
    assert runs >= 3 and report["imprecise"] is True
    assert report["imprecise_reason"] == f"time budget of 2 s spent after {runs} runs"
    assert outcome.metrics["time_per_batch"]["runs"] == runs
    assert len(outcome.raw["time_per_batch"]["runs"]) == runs
    assert len(outcome.series["warmup_s"]["values"]) == runs
    assert len(outcome.series["time_per_batch_run_medians"]["values"]) == runs

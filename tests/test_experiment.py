"""One experiment -> one complete record (ok, unavailable, oom or failed), written atomically."""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import weakref
from dataclasses import replace
from datetime import datetime

import numpy as np
import pytest
import torch

from accelbench import config as workflow_config
from accelbench.backends import Backend, catalogue
from accelbench.backends.cupy_stand_in import NUMPY_AS_DEVICE
from accelbench.families import roof as roof_family
from accelbench.families.base import family_of
from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.families.roof import RoofExperiment, RoofSettings
from accelbench.families.train import TrainExperiment
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.kernels import Prepared, fft, kernels, mandelbrot, saxpy, stencil
from accelbench.kernels import measure as measure_kernel_module
from accelbench.kernels.measure import measure_kernel
from accelbench.measuring import timers
from accelbench.measuring.outcome import Outcome, is_out_of_memory
from accelbench.records import record as results
from accelbench.records.record import load_record, make_record, write_record
from accelbench.roofs import measure as roofs
from accelbench.roofs import stream
from accelbench.train.settings import TrainSettings

HAS_GPU = torch.cuda.is_available()
SETTINGS = KernelSettings(seed=0, min_run_time=0.02, samples=5)
TRAIN_SETTINGS = TrainSettings(seed=0, steps=3, warmup_steps=1, image_size=32)
CONTEXT = JobContext("test")
# JAX's client may not start in the test process (tests/conftest.py): its records, measured
# in runs forked as a job forks them, are tested in tests/test_backends.py.
CPU_BACKENDS = [
    name for name, backend in catalogue().items() if "cpu" in backend.device_kinds and name != "jax"
]
GPU_ONLY_BACKENDS = ["cupy", "numba-cuda"]
SIZE = 32
TIMED_METRICS = ("time", "gflops", "bandwidth")
MATMUL_ON_NUMPY = kernels()["matmul"].implementations["numpy"]


def run_record(exp, tmp_path, settings=SETTINGS):
    output = tmp_path / "record.json"
    status = measurement.run(exp, settings, str(output), context=CONTEXT)
    record = load_record(output)
    assert record["status"] == status
    return record


def assert_distribution(metric, n):
    assert metric["n"] == n
    for key in ("median", "q1", "q3", "ci_low", "ci_high", "min", "max"):
        assert np.isfinite(metric[key]) and metric[key] > 0, key
    assert metric["ci_low"] <= metric["median"] <= metric["ci_high"]
    assert metric["min"] <= metric["q1"] <= metric["median"] <= metric["q3"] <= metric["max"]
    assert 0.0 < metric["ci_level"] <= 1.0


def assert_provenance(record, settings):
    prov = record["provenance"]
    for key in ("host", "git", "config_hash", "seed", "started", "finished"):
        assert key in prov, key
    assert prov["host"]
    assert set(prov["git"]) >= {"commit", "dirty"}
    assert prov["config_hash"] == CONTEXT.config_hash
    assert prov["seed"] == settings.seed
    started = datetime.fromisoformat(prov["started"])
    finished = datetime.fromisoformat(prov["finished"])
    assert started.tzinfo is not None
    assert started <= finished


def assert_params(record, exp, settings):
    params = record["params"]
    for key, value in settings.as_params().items():
        if key not in (*measurement.NOT_PARAMS, *family_of(exp).unrecorded_settings):
            assert params[key] == value, key
    assert "config_hash" not in params
    for key in exp.__dataclass_fields__:
        assert params[key] == getattr(exp, key)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_cpu_kernel_record(backend, dtype, tmp_path):
    exp = KernelExperiment("matmul", "cpu1", backend, dtype, SIZE)
    record = run_record(exp, tmp_path)
    assert record["status"] == "ok", record["reason"]
    assert record["reason"] is None
    assert record["experiment"] == "kernel"
    assert record["id"] == exp.id == f"kernels/matmul/cpu1/{backend}/{dtype}/n{SIZE}"

    check = record["check"]
    assert check["passed"] is True
    assert 0.0 <= check["relative_error"] <= check["tolerance"]
    assert check["tolerance"] == pytest.approx(4.0 * SIZE * float(np.finfo(dtype).eps))

    metrics = record["metrics"]
    for name in TIMED_METRICS:
        assert_distribution(metrics[name], SETTINGS.samples)
    assert metrics["time"]["unit"] == "s"
    assert metrics["gflops"]["unit"] == "GFLOP/s"
    assert metrics["bandwidth"]["unit"] == "GB/s"
    spec = kernels()["matmul"]
    flops = spec.flops(SIZE)
    nbytes = spec.bytes_moved(SIZE, np.dtype(dtype).itemsize)
    time_median = metrics["time"]["median"]
    assert metrics["gflops"]["median"] == pytest.approx(flops / time_median / 1e9)
    assert metrics["bandwidth"]["median"] == pytest.approx(nbytes / time_median / 1e9)
    # A rate is a decreasing function of time: the interval ends swap.
    assert metrics["gflops"]["ci_low"] == pytest.approx(flops / metrics["time"]["ci_high"] / 1e9)
    assert metrics["arithmetic_intensity"]["value"] == pytest.approx(flops / nbytes)
    assert metrics["threads"]["value"] == 1
    assert metrics["first_call_time"]["value"] > 0

    assert_params(record, exp, SETTINGS)
    assert_provenance(record, SETTINGS)
    assert record["measured_by"] == {
        "implementation": f"accelbench.kernels.matmul:{backend}",
        "timer": catalogue()[backend].timer.description,
    }
    raw = record["raw"]["time"]
    assert raw["unit"] == "s" and len(raw["runs"]) == 1
    assert len(raw["runs"][0]) == SETTINGS.samples
    assert statistics.median(raw["runs"][0]) == pytest.approx(time_median)


def test_runs_keep_every_runs_raw_samples(tmp_path):
    exp = KernelExperiment("saxpy", "cpu1", "numpy", "float64", 1000)
    record = run_record(exp, tmp_path, replace(SETTINGS, runs=3))
    assert record["status"] == "ok", record["reason"]
    runs = record["raw"]["time"]["runs"]
    assert [len(run) for run in runs] == [SETTINGS.samples] * 3
    # The record's median is the median of the run medians; each run's is in the series.
    medians = [statistics.median(run) for run in runs]
    assert record["series"]["time_run_medians"]["values"] == pytest.approx(medians)
    assert record["metrics"]["time"]["median"] == pytest.approx(statistics.median(medians))
    assert record["measured_by"]["implementation"] == "accelbench.kernels.saxpy:numpy"


def test_cpu2_kernel_uses_two_threads_and_restores(tmp_path):
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        record = run_record(KernelExperiment("matmul", "cpu2", "torch", "float64", SIZE), tmp_path)
        assert record["status"] == "ok", record["reason"]
        assert record["metrics"]["threads"]["value"] == 2
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(previous)


@pytest.mark.parametrize("backend", [*GPU_ONLY_BACKENDS, "torch"])
def test_gpu_kernel_record(backend, tmp_path):
    exp = KernelExperiment("matmul", "cuda1", backend, "float32", SIZE)
    record = run_record(exp, tmp_path)
    assert_params(record, exp, SETTINGS)
    assert_provenance(record, SETTINGS)
    if HAS_GPU:
        assert record["status"] == "ok", record["reason"]
        assert record["check"]["passed"] is True
        for name in TIMED_METRICS:
            assert record["metrics"][name]["n"] >= 3
    else:
        assert record["status"] == "unavailable"
        assert isinstance(record["reason"], str) and record["reason"].strip()
        assert "CUDA" in record["reason"] or "GPU" in record["reason"]
        assert record["metrics"] == {}
        assert record["check"] is None


def test_gpu_train_record(tmp_path):
    exp = TrainExperiment("resnet18", "cuda1", "fp32", "single", 4)
    record = run_record(exp, tmp_path, TRAIN_SETTINGS)
    assert record["experiment"] == "train"
    assert_params(record, exp, TRAIN_SETTINGS)
    if HAS_GPU:
        assert record["status"] == "ok", record["reason"]
        assert record["metrics"]["time_per_batch"]["n"] == TRAIN_SETTINGS.steps
    else:
        assert record["status"] == "unavailable"
        assert "CUDA" in record["reason"]
        assert record["metrics"] == {}


def test_too_many_gpus_is_unavailable():
    count = torch.cuda.device_count() if HAS_GPU else 0
    exp = KernelExperiment("matmul", f"cuda{count + 1}", "torch", "float32", SIZE)
    outcome = measure_kernel(exp, SETTINGS)
    assert outcome.status == "unavailable"
    assert outcome.reason
    assert outcome.metrics == {}


# --- wrong results, errors and out-of-memory --------------------------------------------------


@pytest.fixture
def timer_calls(monkeypatch):
    """Replace the CPU timer: record calls and raise, so a test sees whether timing happened."""
    calls = []

    def forbidden(fn, **kwargs):
        calls.append(kwargs)
        raise AssertionError("the timer must not be called")

    monkeypatch.setattr(timers, "torch_timer_samples", forbidden)
    return calls


def replace_numpy(monkeypatch, prepare):
    monkeypatch.setitem(kernels()["matmul"].implementations, "numpy", prepare)


def wrong_prepare(inputs, device) -> Prepared:
    """Computes A @ B^T: plausible numbers, wrong answer."""
    a, b = inputs
    out = np.empty_like(a)
    return Prepared(
        run=lambda: np.matmul(a, b.T, out=out),
        fetch=lambda: out.copy(),
        poison=lambda: out.fill(np.nan),
    )


def noop_prepare(inputs, device) -> Prepared:
    out = np.empty_like(inputs[0])
    return Prepared(run=lambda: None, fetch=lambda: out.copy(), poison=lambda: out.fill(np.nan))


NUMPY_EXP = KernelExperiment("matmul", "cpu1", "numpy", "float64", SIZE)


def test_wrong_result_fails_without_timing(monkeypatch, timer_calls, tmp_path):
    replace_numpy(monkeypatch, wrong_prepare)
    record = run_record(NUMPY_EXP, tmp_path)
    assert record["status"] == "failed"
    assert "reference" in record["reason"]
    assert "timer" not in record["reason"]
    assert timer_calls == []
    assert record["check"]["passed"] is False
    assert record["check"]["relative_error"] > record["check"]["tolerance"]
    assert record["metrics"] == {}
    for name in TIMED_METRICS:
        assert name not in record["metrics"]


def test_noop_run_fails_and_infinite_error_is_stored_as_null(monkeypatch, timer_calls, tmp_path):
    replace_numpy(monkeypatch, noop_prepare)
    record = run_record(NUMPY_EXP, tmp_path)
    assert record["status"] == "failed"
    assert "reference" in record["reason"]
    assert timer_calls == []
    assert record["check"]["passed"] is False
    assert record["check"]["relative_error"] is None  # inf has no JSON form
    assert record["metrics"] == {}


def degrading(monkeypatch):
    """numpy's matmul right at its check, wrong from its second call on; every timer call
    says 1 ms, so a roof's first candidate (numpy) wins."""

    def degrading_prepare(inputs, device) -> Prepared:
        good = MATMUL_ON_NUMPY(inputs, device)
        calls = {"run": 0}

        def run():
            calls["run"] += 1
            good.run()
            if calls["run"] > 1:
                good.poison()

        return Prepared(run=run, fetch=good.fetch, poison=good.poison)

    def fake_timer(fn, **kwargs):
        fn()
        warmup = timers.Warmup(seconds=0.0, blocks=0, steady=True, per_call=1e-3)
        return timers.Timed([1e-3] * kwargs["samples"], warmup)

    replace_numpy(monkeypatch, degrading_prepare)
    monkeypatch.setattr(timers, "torch_timer_samples", fake_timer)


def test_result_going_wrong_during_timing_fails(monkeypatch, tmp_path):
    """The check after timing catches code that was right once and then wrong."""
    degrading(monkeypatch)
    record = run_record(NUMPY_EXP, tmp_path)
    assert record["status"] == "failed"
    assert record["reason"].startswith("after timing")
    assert "reference" in record["reason"]
    assert record["check"]["passed"] is False
    assert record["metrics"] == {}


def test_memory_error_gives_oom(monkeypatch, timer_calls, tmp_path):
    def prepare(inputs, device):
        raise MemoryError("Unable to allocate 8.00 TiB for an array")

    replace_numpy(monkeypatch, prepare)
    record = run_record(NUMPY_EXP, tmp_path)
    assert record["status"] == "oom"
    assert "MemoryError" in record["reason"]
    assert "8.00 TiB" in record["reason"]
    assert record["metrics"] == {}
    assert timer_calls == []


def test_runtime_error_gives_failed_with_message(monkeypatch, timer_calls, tmp_path):
    def prepare(inputs, device):
        raise RuntimeError("kernel exploded at tile 3")

    replace_numpy(monkeypatch, prepare)
    record = run_record(NUMPY_EXP, tmp_path)
    assert record["status"] == "failed"
    assert "RuntimeError" in record["reason"]
    assert "kernel exploded at tile 3" in record["reason"]
    assert record["metrics"] == {}
    assert record["check"] is None


def test_error_during_run_gives_failed(monkeypatch, timer_calls, tmp_path):
    def prepare(inputs, device):
        def run():
            raise ValueError("operands could not be broadcast")

        good = MATMUL_ON_NUMPY(inputs, device)
        return Prepared(run=run, fetch=good.fetch, poison=good.poison)

    replace_numpy(monkeypatch, prepare)
    record = run_record(NUMPY_EXP, tmp_path)
    assert record["status"] == "failed"
    assert "operands could not be broadcast" in record["reason"]


def test_device_oom_during_training_gives_oom(monkeypatch, tmp_path):
    def measure(exp, settings):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr("accelbench.train.loop.measure_training", measure)
    exp = TrainExperiment("resnet18", "cpu1", "fp32", "single", 4)
    record = run_record(exp, tmp_path, TRAIN_SETTINGS)
    assert record["status"] == "oom"
    assert "CUDA out of memory" in record["reason"]


class OutOfMemoryError(RuntimeError):
    """Same name as torch's and CuPy's device OOM errors."""


@pytest.mark.parametrize(
    "err",
    [
        MemoryError(),
        MemoryError("Unable to allocate 1.00 TiB"),
        OutOfMemoryError("allocation failed"),
        torch.OutOfMemoryError("boom"),
        RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB"),
        RuntimeError("CUDA error: out of memory"),
        OSError("[Errno 12] Cannot allocate memory: can't allocate memory"),
    ],
    ids=repr,
)
def test_is_out_of_memory_recognises_oom(err):
    assert is_out_of_memory(err) is True


@pytest.mark.parametrize(
    "err",
    [
        RuntimeError("kernel failed"),
        ValueError("shapes (3,3) and (4,4) not aligned"),
        KeyError("memory"),
        TypeError("expected memoryview"),
    ],
    ids=repr,
)
def test_is_out_of_memory_rejects_other_errors(err):
    assert is_out_of_memory(err) is False


def numba_driver_error(code: str):
    """numba-cuda's CudaAPIError as its driver wrapper raises it for a failed call."""
    from numba.cuda.cudadrv.driver import CudaAPIError, binding

    result = getattr(binding.CUresult, code)
    return CudaAPIError(result, f"Call to cuMemAlloc results in {result.name}")


def test_a_numba_cuda_out_of_memory_error_gives_oom(monkeypatch, tmp_path):
    assert is_out_of_memory(numba_driver_error("CUDA_ERROR_LAUNCH_FAILED")) is False

    def prepare(inputs, device):
        raise numba_driver_error("CUDA_ERROR_OUT_OF_MEMORY")

    replace_numpy(monkeypatch, prepare)
    record = run_record(NUMPY_EXP, tmp_path)
    assert record["status"] == "oom", record["reason"]
    assert "CUDA_ERROR_OUT_OF_MEMORY" in record["reason"]


def test_outcome_defaults():
    outcome = Outcome("ok")
    assert outcome.reason is None and outcome.metrics == {} and outcome.check is None
    assert Outcome("failed").metrics is not Outcome("failed").metrics


# --- atomic write -------------------------------------------------------------------------------


def failing_in(directory, real):
    """os.replace that fails for files in `directory` and behaves normally elsewhere."""

    def replace(src, dst, *args, **kwargs):
        if os.path.dirname(os.path.abspath(dst)) == str(directory):
            raise OSError(28, "No space left on device")
        return real(src, dst, *args, **kwargs)

    return replace


def test_run_leaves_no_file_when_the_write_fails(monkeypatch, tmp_path):
    out_dir = tmp_path / "results" / "kernels"
    target = out_dir / "n32.json"
    monkeypatch.setattr(results.os, "replace", failing_in(out_dir, os.replace))
    with pytest.raises(OSError, match="No space left"):
        measurement.run(NUMPY_EXP, SETTINGS, str(target), context=CONTEXT)
    assert not target.exists()
    assert list(out_dir.iterdir()) == []


@pytest.mark.parametrize("stage", ["replace", "fsync"])
def test_failed_write_keeps_previous_record_and_cleans_up(monkeypatch, tmp_path, stage):
    target = tmp_path / "record.json"
    old = make_record(
        experiment="kernel",
        experiment_id="kernels/matmul/cpu1/numpy/float64/n32",
        status="unavailable",
        reason="old reason",
        params=dataclasses.asdict(KernelExperiment("matmul", "cpu1", "numpy", "float64", 32)),
        provenance={},
    )
    write_record(target, old)
    before = target.read_text()
    new = {**old, "reason": "new reason"}
    if stage == "replace":
        monkeypatch.setattr(results.os, "replace", failing_in(tmp_path, os.replace))
    else:

        def fsync(fd):
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(results.os, "fsync", fsync)
    with pytest.raises(OSError):
        write_record(target, new)
    assert target.read_text() == before
    assert load_record(target)["reason"] == "old reason"
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]


def test_successful_write_leaves_only_the_record(tmp_path):
    target = tmp_path / "deep" / "dir" / "record.json"
    record = make_record(
        experiment="kernel",
        experiment_id="kernels/matmul/cpu1/numpy/float64/n32",
        status="failed",
        reason="r",
        params=dataclasses.asdict(KernelExperiment("matmul", "cpu1", "numpy", "float64", 32)),
        provenance={},
        check={"passed": False, "relative_error": float("inf")},
    )
    write_record(target, record)
    assert [p.name for p in target.parent.iterdir()] == ["record.json"]
    assert load_record(target)["check"]["relative_error"] is None


# --- naive Python, transfers, copies and roofs --------------------------------------------------


def test_naive_python_above_its_limit_writes_a_skipped_record(timer_calls, tmp_path):
    exp = KernelExperiment("matmul", "cpu1", "python", "float64", 128)
    record = run_record(exp, tmp_path, replace(SETTINGS, naive_size_limit={"matmul": 64}))
    assert record["status"] == "skipped"
    assert record["reason"] == "skipped: above naive size limit (n=128 > 64)"
    assert record["metrics"] == {} and record["check"] is None
    assert record["params"]["naive_size_limit"] == 64
    assert timer_calls == []


def test_naive_python_limit_defaults_to_the_kernels_own(tmp_path):
    spec = kernels()["matmul"]
    exp = KernelExperiment("matmul", "cpu1", "python", "float64", spec.naive_size_limit + 1)
    record = run_record(exp, tmp_path)
    assert record["status"] == "skipped"
    assert f"> {spec.naive_size_limit})" in record["reason"]


def test_naive_python_within_its_limit_is_measured(tmp_path):
    exp = KernelExperiment("mandelbrot", "cpu1", "python", "float64", 8)
    record = run_record(exp, tmp_path, replace(SETTINGS, naive_size_limit={"mandelbrot": 8}))
    assert record["status"] == "ok", record["reason"]
    assert record["check"]["measure"] == "fraction of pixels whose escape count differs"
    assert record["params"]["naive_size_limit"] == 8
    assert_distribution(record["metrics"]["gflops"], SETTINGS.samples)


def test_compiled_backends_carry_no_naive_limit(tmp_path):
    record = run_record(NUMPY_EXP, tmp_path, replace(SETTINGS, naive_size_limit={"matmul": 4}))
    assert record["status"] == "ok"
    assert "naive_size_limit" not in record["params"]


DEVICE_PATHS = {
    "saxpy": saxpy.prepare_array_module,
    "stencil": stencil.prepare_array_module,
    "fft2d": fft.prepare_array_module,
    "mandelbrot": mandelbrot.prepare_array_module,
}


@pytest.mark.parametrize("kernel", sorted(DEVICE_PATHS))
def test_transfer_and_end_to_end_time_where_inputs_must_be_copied(monkeypatch, kernel, tmp_path):
    """A backend whose Prepared copies in and out (here NumPy standing in for CuPy) is
    also timed copying, and copying around the kernel."""
    spec = kernels()[kernel]
    monkeypatch.setitem(
        spec.implementations,
        "numpy",
        lambda inputs, device: DEVICE_PATHS[kernel](NUMPY_AS_DEVICE, inputs),
    )
    exp = KernelExperiment(kernel, "cpu1", "numpy", "float32", 16)
    record = run_record(exp, tmp_path)
    assert record["status"] == "ok", record["reason"]
    metrics = record["metrics"]
    for name in ("transfer_time", "end_to_end_time"):
        assert metrics[name]["unit"] == "s"
        assert_distribution(metrics[name], SETTINGS.samples)
    flops = spec.flops(16)
    assert metrics["end_to_end_gflops"]["unit"] == "GFLOP/s"
    assert metrics["end_to_end_gflops"]["median"] == pytest.approx(
        flops / metrics["end_to_end_time"]["median"] / 1e9
    )


def test_host_backends_record_no_transfer(tmp_path):
    record = run_record(KernelExperiment("saxpy", "cpu1", "numba", "float32", 1000), tmp_path)
    assert record["status"] == "ok", record["reason"]
    assert not {"transfer_time", "end_to_end_time", "end_to_end_gflops"} & set(record["metrics"])


def test_copy_kernel_reports_bandwidth_and_no_flops(tmp_path):
    exp = KernelExperiment("transfer-d2d", "cpu1", "numpy", "float64", 1000)
    record = run_record(exp, tmp_path)
    assert record["status"] == "ok", record["reason"]
    metrics = record["metrics"]
    assert "gflops" not in metrics
    assert metrics["arithmetic_intensity"]["value"] == 0
    assert metrics["bandwidth"]["median"] == pytest.approx(16000 / metrics["time"]["median"] / 1e9)
    assert record["check"]["relative_error"] == 0.0


@pytest.mark.parametrize("backend", ["numpy", "python", "torch"])
def test_half_precision_kernel_record(backend, tmp_path):
    dtype = "bfloat16" if backend == "torch" else "float16"
    kernel = "saxpy"
    exp = KernelExperiment(kernel, "cpu1", backend, dtype, 64)
    if dtype not in kernels()[kernel].dtypes(backend):
        from accelbench.families.kernel import exclusion as kernel_exclusion

        assert "computes in float64, float32 only" in kernel_exclusion(exp)
        return
    record = run_record(exp, tmp_path)
    assert record["status"] == "ok", record["reason"]
    assert record["metrics"]["bandwidth"]["median"] > 0


ROOF_SETTINGS = RoofSettings(
    seed=0,
    min_run_time=0.02,
    samples=5,
    roofs={"gemm_size": {"cpu": 48, "cuda": 64}, "copy_mib": {"cpu": 1, "cuda": 1}},
)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cpu_roof_record(dtype, tmp_path):
    exp = RoofExperiment("cpu1", dtype)
    assert exp.path == f"results/roofs/cpu1/{dtype}.json"
    record = run_record(exp, tmp_path, ROOF_SETTINGS)
    assert record["experiment"] == "roof"
    assert record["status"] == "ok", record["reason"]
    metrics = record["metrics"]
    assert set(metrics) == {"peak_gflops", "memory_bandwidth", "threads"}
    assert metrics["peak_gflops"]["unit"] == "GFLOP/s"
    assert metrics["memory_bandwidth"]["unit"] == "GB/s"
    for name in ("peak_gflops", "memory_bandwidth"):
        assert_distribution(metrics[name], SETTINGS.samples)
    itemsize = np.dtype(dtype).itemsize
    assert record["params"]["gemm_size"] == 48
    assert record["params"]["copy_size"] == (1 << 20) // itemsize
    assert "roofs" not in record["params"]
    roofs = record["check"]["roofs"]
    assert record["check"]["passed"] is True
    # The roof is the best of the candidates, each checked before it was timed.
    for name, found in roofs.items():
        best = f"{found['kernel']}/{found['backend']}/n{found['size']}"
        assert found["passed"] is True
        assert found["candidates"][best] == max(found["candidates"].values())
        assert metrics[name]["median"] == pytest.approx(found["candidates"][best])
        assert len(record["raw"][f"{name}_time"]["runs"][0]) == SETTINGS.samples
    implementation = record["measured_by"]["implementation"]
    assert implementation.startswith("peak_gflops=accelbench.kernels.matmul:")
    assert "; memory_bandwidth=accelbench.roofs.stream:" in implementation
    assert record["measured_by"]["timer"] == timers.TORCH.description
    # GEMM: the libraries over n and n/2.
    assert set(roofs["peak_gflops"]["candidates"]) == {
        f"matmul/{backend}/n{n}" for backend in ("numpy", "torch") for n in (24, 48)
    }
    # Memory: the STREAM kernels and a read on every backend that uses all the threads.
    assert set(roofs["memory_bandwidth"]["candidates"]) == {
        f"stream-{op}/{backend}/n{(1 << 20) // itemsize}"
        for op in ("copy", "scale", "add", "triad", "read")
        for backend in ("torch", "numba-parallel")
    }


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_16_bit_cpu_roof_measures_its_gemm_and_its_memory_ceiling(dtype, tmp_path):
    """The STREAM kernels run in 16 bits where a backend computes in them (PyTorch here)."""
    record = run_record(RoofExperiment("cpu1", dtype), tmp_path, ROOF_SETTINGS)
    assert record["status"] == "ok", record["reason"]
    assert {"peak_gflops", "memory_bandwidth"} <= set(record["metrics"])
    memory = record["check"]["roofs"]["memory_bandwidth"]
    assert memory["passed"] is True
    assert set(memory["candidates"]) == {
        f"stream-{op}/torch/n{(1 << 20) // 2}" for op in ("copy", "scale", "add", "triad", "read")
    }
    assert "unmeasured" not in record["check"]


def test_a_roof_keeps_the_ceilings_it_measured_and_says_why_the_others_are_missing(
    monkeypatch, tmp_path
):
    for name, spec in stream.SPECS.items():  # no backend computes STREAM in 16 bits
        monkeypatch.setitem(stream.SPECS, name, dataclasses.replace(spec, half_dtypes={}))
    settings = replace(ROOF_SETTINGS, runs=2)
    record = run_record(RoofExperiment("cpu1", "float16"), tmp_path, settings)
    assert record["status"] == "ok", record["reason"]
    assert set(record["metrics"]) == {"peak_gflops", "threads"}
    assert record["metrics"]["peak_gflops"]["runs"] == 2
    assert set(record["check"]["roofs"]) == {"peak_gflops"}
    missing = record["check"]["unmeasured"]
    assert set(missing) == {"memory_bandwidth"}
    assert "no backend can measure it" in missing["memory_bandwidth"]
    assert "torch: no float16 stream-copy" in missing["memory_bandwidth"]
    assert record["measured_by"]["implementation"].startswith("peak_gflops=")
    assert "memory_bandwidth" not in record["measured_by"]["implementation"]


def test_a_roof_frees_each_candidates_buffers_before_it_prepares_the_next(monkeypatch, tmp_path):
    """A GPU roof at copy_mib 2048 holds gigabytes per candidate: only one may be alive, and
    what it leaves in its library's memory cache goes back before the next is prepared."""
    alive, alive_at_prepare, released = [0], [], []

    def tracked(prepare):
        def prepare_tracked(inputs, device):
            alive_at_prepare.append(alive[0])
            prepared = prepare(inputs, device)
            alive[0] += 1
            weakref.finalize(prepared, lambda: alive.__setitem__(0, alive[0] - 1))
            return prepared

        return prepare_tracked

    for spec in (*stream.SPECS.values(), kernels()["matmul"]):
        for backend, prepare in spec.implementations.items():
            monkeypatch.setitem(spec.implementations, backend, tracked(prepare))

    def release(backend, device):
        released.append((backend.name, alive[0]))

    monkeypatch.setattr(Backend, "free_cached_memory", release)
    record = run_record(RoofExperiment("cpu1", "float32"), tmp_path, ROOF_SETTINGS)
    assert record["status"] == "ok", record["reason"]
    candidates = sum(len(found["candidates"]) for found in record["check"]["roofs"].values())
    assert alive_at_prepare == [0] * candidates
    assert released == [(backend, 0) for backend, _ in released] and len(released) == candidates


def test_later_roof_runs_time_only_the_first_runs_winner(monkeypatch, tmp_path):
    timed = []
    real = roofs.time_function

    def counting(run, timer, threads, settings, label):
        timed.append(label)
        return real(run, timer, threads, settings, label)

    monkeypatch.setattr(roofs, "time_function", counting)
    record = run_record(RoofExperiment("cpu1", "float32"), tmp_path, replace(ROOF_SETTINGS, runs=3))
    assert record["status"] == "ok", record["reason"]
    candidates = {name: found["candidates"] for name, found in record["check"]["roofs"].items()}
    searched = sum(len(rates) for rates in candidates.values())
    assert len(timed) == searched + 2 * len(candidates)  # run 1: all; runs 2, 3: the winners
    winners = {
        f"roof {name} cpu1 float32 {found['kernel']} {found['backend']} n={found['size']}"
        for name, found in record["check"]["roofs"].items()
    }
    assert set(timed[searched:]) == winners
    for name in candidates:
        assert len(candidates[name]) > 1  # the record keeps run 1's whole search
        assert record["metrics"][name]["runs"] == 3
    assert record["params"]["roof_search"].startswith("every candidate timed in run 1")


def test_a_roof_in_another_dtype_times_the_float32_roofs_byte_winners_alone(monkeypatch, tmp_path):
    """Bytes move at the memory's and the link's rate whatever their type: a roof in another
    dtype times the float32 roof's memory winner alone, at its own copy length, and still
    searches every GEMM candidate of its own dtype."""
    timed = []
    real = roofs.time_function

    def counting(run, timer, threads, settings, label):
        timed.append(label)
        return real(run, timer, threads, settings, label)

    float32 = run_record(RoofExperiment("cpu1", "float32"), tmp_path / "f32", ROOF_SETTINGS)
    source = tmp_path / "f32" / "record.json"
    won = float32["check"]["roofs"]["memory_bandwidth"]
    monkeypatch.setattr(roofs, "time_function", counting)
    settings = replace(ROOF_SETTINGS, search_from=str(source))
    record = run_record(RoofExperiment("cpu1", "float64"), tmp_path, settings)
    assert record["status"] == "ok", record["reason"]
    memory = record["check"]["roofs"]["memory_bandwidth"]
    assert (memory["kernel"], memory["backend"]) == (won["kernel"], won["backend"])
    assert memory["size"] == won["size"] // 2  # 1 MiB of float64
    assert [label for label in timed if "memory_bandwidth" in label] == [
        f"roof memory_bandwidth cpu1 float64 {won['kernel']} {won['backend']} n={memory['size']}"
    ]
    assert len(record["check"]["roofs"]["peak_gflops"]["candidates"]) > 1
    assert record["params"]["roof_search"].startswith(f"memory_bandwidth: the winners of {source}")


def test_a_roof_searches_a_ceiling_whose_float32_winner_cannot_compute_in_its_dtype(tmp_path):
    """Numba has no 16-bit arithmetic: a float32 memory winner in Numba leaves the 16-bit
    roof to search its own backends."""
    source = tmp_path / "float32.json"
    won = {"kernel": "stream-read", "backend": "numba-parallel", "size": 262144, "passed": True}
    source.write_text(json.dumps({"check": {"roofs": {"memory_bandwidth": won}}}))
    exp = RoofExperiment("cpu1", "bfloat16")
    assert roofs.borrowed_search(exp, replace(ROOF_SETTINGS, search_from=str(source))) == {}


def test_the_grid_plans_the_byte_search_from_the_devices_float32_roof():
    config = workflow_config.load([])
    config["kernels"]["dtypes"] = ["float32", "bfloat16"]
    config["kernels"]["overrides"] = {}
    assert (
        roof_family.search_source(config, "cpu1", "bfloat16") == "results/roofs/cpu1/float32.json"
    )
    assert roof_family.search_source(config, "cpu1", "float32") is None
    config["kernels"]["dtypes"] = ["bfloat16"]
    assert roof_family.search_source(config, "cpu1", "bfloat16") is None


def test_a_call_slower_than_max_call_s_is_skipped_with_its_time(tmp_path):
    """A cell whose call outlasts the grid's limit is not timed: its record says how long
    one call took (a 16-bit GEMM on a CPU without 16-bit arithmetic), and the grid keeps
    the cell."""
    exp = KernelExperiment("matmul", "cpu1", "numpy", "float32", 256)
    record = run_record(exp, tmp_path, replace(SETTINGS, max_call_s=1e-9))
    assert record["status"] == "skipped"
    assert "one call takes" in record["reason"] and "max_call_s = 1e-09 s" in record["reason"]
    assert record["metrics"] == {} and record["check"]["passed"]


def test_a_cell_run_1_timed_is_timed_in_every_run_whatever_a_later_call_takes(
    monkeypatch, tmp_path
):
    """Near max_call_s a noisy host would skip a cell in run 2 after run 1 measured it: the
    limit decides once, in run 1."""
    calls = []
    real = measure_kernel_module.too_slow

    def slow_after_run_1(checked, backend, device, settings):
        calls.append(settings.max_call_s)
        return real(
            checked, backend, device, replace(settings, max_call_s=settings.max_call_s and 1e9)
        )

    monkeypatch.setattr(measure_kernel_module, "too_slow", slow_after_run_1)
    exp = KernelExperiment("saxpy", "cpu1", "numpy", "float32", 64)
    record = run_record(exp, tmp_path, replace(SETTINGS, runs=3, max_call_s=0.5))
    assert record["status"] == "ok", record["reason"]
    assert calls == [0.5, None, None]


def test_roof_of_a_missing_gpu_is_unavailable(tmp_path):
    record = run_record(RoofExperiment("cuda1", "float32"), tmp_path, ROOF_SETTINGS)
    if HAS_GPU:
        assert record["status"] == "ok", record["reason"]
        assert {"peak_gflops", "memory_bandwidth", "h2d_bandwidth", "d2h_bandwidth"} <= set(
            record["metrics"]
        )
    else:
        assert record["status"] == "unavailable"
        assert "peak_gflops" in record["reason"] and "torch" in record["reason"]
        assert record["metrics"] == {}


def test_wrong_roof_gemm_fails_the_roof(monkeypatch, tmp_path):
    replace_numpy(monkeypatch, wrong_prepare)
    record = run_record(RoofExperiment("cpu1", "float64"), tmp_path, ROOF_SETTINGS)
    assert record["status"] == "failed"
    assert record["reason"].startswith("peak_gflops with matmul on numpy: result differs")
    assert record["metrics"] == {}


def test_a_roof_whose_winner_goes_wrong_during_timing_fails(monkeypatch, tmp_path):
    degrading(monkeypatch)
    record = run_record(RoofExperiment("cpu1", "float64"), tmp_path, ROOF_SETTINGS)
    assert record["status"] == "failed"
    assert record["reason"].startswith("peak_gflops with matmul on numpy, after timing")
    assert record["metrics"] == {}


@pytest.mark.parametrize(
    "kernel", ["mandelbrot", "saxpy", "reduction", "stencil", "fft1d", "fft2d", "transfer-h2d"]
)
@pytest.mark.parametrize("backend", ["cupy", "numba-cuda", "torch"])
def test_every_gpu_kernel_yields_a_record_without_a_gpu(kernel, backend, tmp_path):
    exp = KernelExperiment(kernel, "cuda1", backend, "float32", 16)
    record = run_record(exp, tmp_path)
    if HAS_GPU:
        assert record["status"] == "ok", record["reason"]
        if not kernel.startswith("transfer"):
            assert {"transfer_time", "end_to_end_time"} <= set(record["metrics"])
    else:
        assert record["status"] == "unavailable"
        assert "CUDA" in record["reason"] or "GPU" in record["reason"]
        assert record["metrics"] == {} and record["check"] is None


def test_a_job_log_keeps_the_measurement_and_only_the_warnings_of_the_libraries(tmp_path):
    """Numba-CUDA's driver logs every allocation and free at INFO once the root logger has
    a handler: thousands of lines in one GPU job's log, hiding the measurement's own; and
    its low-occupancy warning (coloured) came with each small launch."""
    log_file = tmp_path / "job.log"
    script = f"""
import logging
from accelbench.job.measuring_process import configure_logging
configure_logging({str(log_file)!r})
logging.getLogger("numba.cuda.cudadrv.driver").info("add pending dealloc: cuMemFree 8000 bytes")
logging.getLogger("numba.cuda.cudadrv.driver").warning("a driver warning")
logging.getLogger("accelbench.job.measurement").info("run 1: +-0.2%")
import warnings
warnings.warn("\x1b[1mGrid size 1 will likely result in GPU under-utilization due to low"
              " occupancy.")
warnings.warn("a library's other warning")
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    text = log_file.read_text()
    assert "run 1: +-0.2%" in text
    assert "a driver warning" in text
    assert "dealloc" not in text
    assert "a library's other warning" in text
    assert "Grid size" not in text

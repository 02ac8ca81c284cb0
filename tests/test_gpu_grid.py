"""The GPU acceptance grid (config/gpu.yaml) on this machine's stand-ins: every cell it
measures on a GPU runs here with what stands in for its library (PyTorch on the CPU
device, NumPy for CuPy, Numba's CUDA simulator), at a small size, and computes the right
result; every model it trains, in every precision the CPU has, trains here. A lent GPU
then only finds what the stand-ins cannot show."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from accelbench import config as workflow_config
from accelbench import grid
from accelbench.backends.cupy_stand_in import numpy_playing_cupy
from accelbench.families.train import TrainExperiment
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.kernels import host_dtype, kernels
from accelbench.platform.devices import parse_device
from accelbench.records.record import load_record
from accelbench.train.models import models
from accelbench.train.settings import TrainSettings

from conftest import REPO_ROOT

GPU_GRID = grid.expand(workflow_config.load([REPO_ROOT / "config" / "gpu.yaml"]))
GPU_CELLS = sorted(
    {
        (exp.kernel, exp.backend, exp.dtype)
        for exp in GPU_GRID.experiments
        if exp.family == "kernel" and exp.device == "cuda1"
    }
)
# Small enough for the simulator, whose every CUDA thread is a Python thread.
STAND_IN_SIZE = 24


def _run_and_check(spec, prepare, dtype_name: str, device) -> float:
    """The cell's error against its float64 reference, after a poisoned output is computed
    anew; the kernel's tolerance bounds it."""
    dtype = host_dtype(dtype_name)
    inputs = spec.make_inputs(np.random.default_rng(7), STAND_IN_SIZE, dtype)
    prepared = prepare(inputs, device)
    prepared.poison()
    prepared.run()
    return spec.error(prepared.fetch(), spec.reference(*inputs))


# Run in an interpreter of their own: Numba-CUDA's cells under the simulator, and JAX's on the
# CPU device (its client may not start in the test process, nor in a child forked from it).
OWN_INTERPRETER = {"numba-cuda": ("cuda1", {"NUMBA_ENABLE_CUDASIM": "1"}), "jax": ("cpu1", {})}


@pytest.mark.parametrize(
    ("kernel", "backend", "dtype"), [cell for cell in GPU_CELLS if cell[1] not in OWN_INTERPRETER]
)
def test_every_gpu_kernel_cell_of_the_grid_computes_right_on_its_stand_in(
    monkeypatch, kernel, backend, dtype
):
    spec = kernels()[kernel]
    device = parse_device("cpu1" if backend == "torch" else "cuda1")  # torch: the same code
    with numpy_playing_cupy():
        error = _run_and_check(spec, spec.implementations[backend], dtype, device)
    assert error <= spec.tolerance(STAND_IN_SIZE, host_dtype(dtype)), (kernel, backend, dtype)


IN_OWN_INTERPRETER = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from accelbench.kernels import host_dtype, kernels
    from accelbench.platform.devices import parse_device

    backend, device = sys.argv[2], parse_device(sys.argv[3])
    errors = {}
    for kernel, dtype in json.loads(sys.argv[1]):
        spec = kernels()[kernel]
        inputs = spec.make_inputs(np.random.default_rng(7), SIZE, host_dtype(dtype))
        prepared = spec.implementations[backend](inputs, device)
        prepared.poison()
        prepared.run()
        error = spec.error(prepared.fetch(), spec.reference(*inputs))
        errors[f"{kernel} {dtype}"] = [error, spec.tolerance(SIZE, host_dtype(dtype))]
    print("REPORT " + json.dumps(errors))
    """
).replace("SIZE", str(STAND_IN_SIZE))


@pytest.mark.parametrize("backend", sorted(OWN_INTERPRETER))
def test_every_cell_of_the_grid_run_in_its_own_interpreter_computes_right(backend):
    """Numba-CUDA's cells under the CUDA simulator; JAX's on the CPU device, the same code."""
    cells = [[kernel, dtype] for kernel, name, dtype in GPU_CELLS if name == backend]
    assert cells
    device, environment = OWN_INTERPRETER[backend]
    pythonpath = os.pathsep.join(
        filter(None, [str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH")])
    )
    done = subprocess.run(
        [sys.executable, "-c", IN_OWN_INTERPRETER, json.dumps(cells), backend, device],
        env={**os.environ, **environment, "PYTHONPATH": pythonpath},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [report] = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    errors = json.loads(report.removeprefix("REPORT "))
    assert set(errors) == {f"{kernel} {dtype}" for kernel, dtype in cells}
    for cell, (error, tolerance) in errors.items():
        assert error <= tolerance, cell


GPU_TRAINING = sorted(
    {
        (exp.model, exp.precision, exp.batch)
        for exp in GPU_GRID.experiments
        if exp.family == "train" and exp.device == "cuda1"
    }
)
# tf32 is a mode of CUDA's tensor cores: the CPU has nothing that stands in for it.
CPU_PRECISIONS = ("fp32", "bf16", "fp16")


@pytest.mark.parametrize(
    ("model", "precision"),
    sorted(
        {(model, precision) for model, precision, _ in GPU_TRAINING if precision in CPU_PRECISIONS}
    ),
)
def test_every_model_the_grid_trains_on_the_gpu_trains_on_the_cpu_in_that_precision(
    tmp_path, model, precision
):
    """Or says why this CPU cannot: oneDNN's bfloat16 LSTM needs AVX-512."""
    settings = TrainSettings(
        seed=0, steps=1, warmup_steps=0, image_size=32, model_options=models()[model].tiny_options
    )
    exp = TrainExperiment(model, "cpu1", precision, "single", 2)
    output = tmp_path / "record.json"
    measurement.run(exp, settings, str(output), context=JobContext("gpu-grid"))
    record = load_record(output)
    assert record["params"]["precision"] == precision
    if record["status"] == "unavailable":  # a CPU without the 16-bit kernels the model needs
        assert precision != "fp32" and "this CPU" in record["reason"], record["reason"]
        return
    assert record["status"] == "ok", record["reason"]
    assert record["metrics"]["time_per_batch"]["median"] > 0

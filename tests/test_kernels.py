"""Kernel implementations against their float64 references, on CPU, simulated CUDA and real GPUs.

Every check poisons the output buffer with NaN before the run, so an
implementation that leaves the buffer alone (or returns a stale result) cannot
pass. The Numba CUDA kernels run under Numba's CUDA simulator in a child
process, because the simulator must be switched on before Numba is imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from accelbench.backends import BACKENDS
from accelbench.devices import parse_device
from accelbench.experiment import _check
from accelbench.kernels import Prepared, kernels, relative_error
from accelbench.kernels.matmul import TILE, prepare_array_module

REPO_ROOT = Path(__file__).resolve().parents[1]
HAS_GPU = torch.cuda.is_available()
NO_GPU_REASON = "no CUDA GPU present (torch.cuda.is_available() is False)"
DTYPES = ("float32", "float64")
SIZES = (1, 7, 33, 64)
CPU1 = parse_device("cpu1")


def implementations_for(kind: str) -> list[tuple[str, str]]:
    """(kernel, backend) for every registered implementation whose backend runs on `kind`."""
    return [
        (name, backend)
        for name, spec in kernels().items()
        for backend in spec.implementations
        if kind in BACKENDS[backend].device_kinds
    ]


CPU_IMPLEMENTATIONS = implementations_for("cpu")
GPU_IMPLEMENTATIONS = implementations_for("cuda")


def fresh_inputs(spec, size: int, dtype: np.dtype, salt: int = 0):
    """Inputs from a generator seeded by the case, so each size and dtype gets its own data."""
    rng = np.random.default_rng([size, dtype.itemsize, salt, 20240501])
    return spec.make_inputs(rng, size, dtype)


def check_poisoned_run(prepared: Prepared, reference: np.ndarray, dtype: np.dtype, tol: float):
    prepared.poison()
    poisoned = np.array(prepared.fetch(), copy=True)
    assert poisoned.shape == reference.shape
    assert np.isnan(poisoned).all(), "poison() must fill the whole output with NaN"
    prepared.run()
    result = np.array(prepared.fetch(), copy=True)
    assert result.shape == reference.shape
    assert result.dtype == dtype, f"computed in {result.dtype}, asked for {dtype}"
    assert np.isfinite(result).all()
    error = relative_error(result, reference)
    assert error <= tol, f"relative error {error:.3g} > tolerance {tol:.3g}"
    return error


def test_registry_has_cpu_and_gpu_implementations():
    assert "matmul" in kernels()
    assert ("matmul", "numpy") in CPU_IMPLEMENTATIONS
    assert {"numpy", "numba", "numba-parallel", "torch"} <= {b for _, b in CPU_IMPLEMENTATIONS}
    assert {"torch", "cupy", "numba-cuda"} <= {b for _, b in GPU_IMPLEMENTATIONS}
    for _, backend in CPU_IMPLEMENTATIONS + GPU_IMPLEMENTATIONS:
        assert backend in BACKENDS


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(("kernel", "backend"), CPU_IMPLEMENTATIONS)
def test_cpu_implementation_matches_reference(kernel, backend, size, dtype):
    spec, dtype = kernels()[kernel], np.dtype(dtype)
    assert BACKENDS[backend].unavailable_reason(CPU1) is None
    inputs = fresh_inputs(spec, size, dtype)
    reference = spec.reference(*inputs)
    assert reference.dtype == np.float64
    prepared = spec.implementations[backend](inputs, CPU1)
    check_poisoned_run(prepared, reference, dtype, spec.tolerance(size, dtype))
    # A second run on the same buffers must give the same answer (no accumulation into C).
    prepared.run()
    assert relative_error(np.array(prepared.fetch()), reference) <= spec.tolerance(size, dtype)


@pytest.mark.parametrize(("kernel", "backend"), CPU_IMPLEMENTATIONS)
def test_cpu_implementation_via_check_helper(kernel, backend):
    spec, dtype, size = kernels()[kernel], np.dtype("float32"), 33
    inputs = fresh_inputs(spec, size, dtype, salt=1)
    prepared = spec.implementations[backend](inputs, CPU1)
    check = _check(prepared, spec.reference(*inputs), spec.tolerance(size, dtype))
    assert check["passed"] is True
    assert 0.0 <= check["relative_error"] <= check["tolerance"]
    assert check["reference"] == "numpy float64"


def test_reference_matches_float64_matmul():
    spec = kernels()["matmul"]
    a = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    b = np.array([[5.0, 6.0], [7.0, 8.0]], dtype=np.float32)
    np.testing.assert_array_equal(spec.reference(a, b), [[19.0, 22.0], [43.0, 50.0]])
    assert spec.reference(a, b).dtype == np.float64


@pytest.mark.parametrize("dtype", DTYPES)
def test_make_inputs_shape_dtype_and_determinism(dtype):
    spec, dtype = kernels()["matmul"], np.dtype(dtype)
    first = spec.make_inputs(np.random.default_rng(3), 7, dtype)
    second = spec.make_inputs(np.random.default_rng(3), 7, dtype)
    other = spec.make_inputs(np.random.default_rng(4), 7, dtype)
    assert len(first) == 2
    for x, y in zip(first, second, strict=True):
        assert x.shape == (7, 7) and x.dtype == dtype
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(first[0], other[0])
    assert not np.array_equal(first[0], first[1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_tolerance_rejects_wrong_results(dtype):
    """The bound is tight enough to catch a transposed operand or one corrupted element."""
    spec, dtype, size = kernels()["matmul"], np.dtype(dtype), 33
    a, b = fresh_inputs(spec, size, dtype, salt=2)
    reference = spec.reference(a, b)
    tol = spec.tolerance(size, dtype)
    assert relative_error(a @ b, reference) <= tol
    assert relative_error(a @ b.T, reference) > tol
    corrupted = (a @ b).astype(dtype)
    corrupted[5, 7] += 1.0
    assert relative_error(corrupted, reference) > tol
    assert tol == pytest.approx(4.0 * size * float(np.finfo(dtype).eps))


def test_relative_error_edge_cases():
    reference = np.array([[1.0, -4.0], [2.0, 0.0]])
    assert relative_error(reference.copy(), reference) == 0.0
    assert relative_error(reference + np.array([[0.0, 0.0], [0.0, 0.5]]), reference) == 0.125
    assert relative_error(reference[:1], reference) == float("inf")
    with_nan = reference.copy()
    with_nan[0, 0] = np.nan
    assert relative_error(with_nan, reference) == float("inf")
    with_inf = reference.copy()
    with_inf[1, 1] = np.inf
    assert relative_error(with_inf, reference) == float("inf")
    # An all-zero reference falls back to the absolute error.
    assert relative_error(np.full((2, 2), 0.25), np.zeros((2, 2))) == 0.25


def numpy_buffer_prepared(out: np.ndarray, run) -> Prepared:
    return Prepared(run=run, fetch=lambda: out.copy(), poison=lambda: out.fill(np.nan))


def test_noop_run_fails_the_check():
    spec, dtype, size = kernels()["matmul"], np.dtype("float64"), 16
    inputs = fresh_inputs(spec, size, dtype, salt=3)
    reference = spec.reference(*inputs)
    out = np.empty((size, size), dtype=dtype)
    prepared = numpy_buffer_prepared(out, run=lambda: None)
    prepared.poison()
    prepared.run()
    assert np.isnan(prepared.fetch()).all()
    assert relative_error(prepared.fetch(), reference) == float("inf")
    check = _check(prepared, reference, spec.tolerance(size, dtype))
    assert check["passed"] is False
    assert check["relative_error"] == float("inf")


def test_stale_correct_output_without_compute_fails_the_check():
    """A buffer already holding the right answer does not pass if run() computes nothing."""
    spec, dtype, size = kernels()["matmul"], np.dtype("float64"), 16
    a, b = fresh_inputs(spec, size, dtype, salt=4)
    reference = spec.reference(a, b)
    out = a @ b  # the correct answer, left over from an earlier run
    assert relative_error(out, reference) <= spec.tolerance(size, dtype)
    check = _check(
        numpy_buffer_prepared(out, run=lambda: None), reference, spec.tolerance(size, dtype)
    )
    assert check["passed"] is False


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
def test_array_module_path_with_numpy_standing_in_for_cupy(size, dtype):
    spec, dtype = kernels()["matmul"], np.dtype(dtype)
    inputs = fresh_inputs(spec, size, dtype, salt=5)
    prepared = prepare_array_module(np, inputs, np.asarray, np.array)
    check_poisoned_run(prepared, spec.reference(*inputs), dtype, spec.tolerance(size, dtype))


def test_array_module_fetch_is_a_host_copy():
    spec, dtype = kernels()["matmul"], np.dtype("float64")
    inputs = fresh_inputs(spec, 5, dtype, salt=6)
    prepared = prepare_array_module(np, inputs, np.asarray, np.array)
    prepared.run()
    fetched = prepared.fetch()
    prepared.poison()
    assert np.isfinite(fetched).all(), "fetch() must return a copy, not a view of the output"


@pytest.mark.parametrize(
    ("n", "itemsize", "flops", "nbytes"),
    [(3, 8, 54.0, 216.0), (10, 4, 2000.0, 1200.0), (1, 8, 2.0, 24.0)],
)
def test_matmul_flops_and_bytes(n, itemsize, flops, nbytes):
    spec = kernels()["matmul"]
    # 2 n^3 flops (n^3 multiplies and n^3 adds); A, B and C each cross memory once.
    assert spec.flops(n) == flops
    assert spec.bytes_moved(n, itemsize) == nbytes


SIMULATOR_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    from numba import config
    from accelbench import timing
    from accelbench.backends import BACKENDS
    from accelbench.devices import parse_device
    from accelbench.kernels import kernels, relative_error

    device = parse_device("cuda1")
    spec = kernels()["matmul"]
    report = {
        "simulator": bool(config.ENABLE_CUDASIM),
        "reason": BACKENDS["numba-cuda"].unavailable_reason(device),
        "cases": [],
    }
    for size in (5, 17, 20):
        for name in ("float32", "float64"):
            dtype = np.dtype(name)
            inputs = spec.make_inputs(np.random.default_rng([size, dtype.itemsize]), size, dtype)
            reference = spec.reference(*inputs)
            prepared = spec.implementations["numba-cuda"](inputs, device)
            prepared.poison()
            poisoned = bool(np.isnan(prepared.fetch()).all())
            prepared.run()
            result = prepared.fetch()
            report["cases"].append({
                "size": size, "dtype": name, "poisoned": poisoned,
                "result_dtype": str(result.dtype), "shape": list(result.shape),
                "error": relative_error(result, reference),
                "tolerance": spec.tolerance(size, dtype),
            })
    tiny = spec.implementations["numba-cuda"](
        spec.make_inputs(np.random.default_rng(0), 2, np.dtype("float32")), device
    )
    samples = timing.cuda_event_samples(tiny.run, min_run_time=1e-4, n_warmup=1)
    report["samples"] = [float(s) for s in samples]
    print("REPORT " + json.dumps(report))
    """
)


@pytest.fixture(scope="module")
def simulator_report():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    done = subprocess.run(
        [sys.executable, "-c", SIMULATOR_SCRIPT],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"simulator run failed:\n{done.stdout}\n{done.stderr}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    assert lines, f"no report from the simulator run:\n{done.stdout}\n{done.stderr}"
    return json.loads(lines[-1].removeprefix("REPORT "))


def test_numba_cuda_available_under_simulator(simulator_report):
    assert simulator_report["simulator"] is True
    assert simulator_report["reason"] is None


def test_numba_cuda_kernel_matches_reference_under_simulator(simulator_report):
    cases = simulator_report["cases"]
    assert {(c["size"], c["dtype"]) for c in cases} == {(n, d) for n in (5, 17, 20) for d in DTYPES}
    assert any(c["size"] % TILE for c in cases), "sizes must leave partial tiles"
    assert any(c["size"] > TILE for c in cases), "sizes must span more than one tile"
    for case in cases:
        label = f"n={case['size']} {case['dtype']}"
        assert case["poisoned"], f"{label}: poison() left finite values"
        assert case["shape"] == [case["size"], case["size"]], label
        assert case["result_dtype"] == case["dtype"], label
        assert case["error"] is not None and case["error"] <= case["tolerance"], (
            f"{label}: relative error {case['error']} > tolerance {case['tolerance']}"
        )


def test_cuda_event_samples_under_simulator(simulator_report):
    samples = simulator_report["samples"]
    assert len(samples) >= 3
    assert all(isinstance(s, float) and s >= 0.0 for s in samples)


def test_numba_cuda_unavailable_without_gpu_or_simulator():
    if HAS_GPU:
        pytest.skip("a CUDA GPU is present; the no-GPU reason does not apply")
    reason = BACKENDS["numba-cuda"].unavailable_reason(parse_device("cuda1"))
    assert reason and "CUDA" in reason


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason=NO_GPU_REASON)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", (1, 33, 100, 256))
@pytest.mark.parametrize(("kernel", "backend"), GPU_IMPLEMENTATIONS)
def test_gpu_implementation_matches_reference(kernel, backend, size, dtype):
    device = parse_device("cuda1")
    assert BACKENDS[backend].unavailable_reason(device) is None
    spec, dtype = kernels()[kernel], np.dtype(dtype)
    inputs = fresh_inputs(spec, size, dtype, salt=7)
    prepared = spec.implementations[backend](inputs, device)
    check_poisoned_run(prepared, spec.reference(*inputs), dtype, spec.tolerance(size, dtype))

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

from accelbench.backends import catalogue as backend_catalogue
from accelbench.backends import cupy_stand_in
from accelbench.backends.cupy_stand_in import NUMPY_AS_DEVICE
from accelbench.kernels import (
    HALF_DTYPES,
    Prepared,
    host_dtype,
    kernels,
    mandelbrot,
    relative_error,
    torch_to_host,
)
from accelbench.kernels.matmul import TILE, prepare_array_module
from accelbench.kernels.measure import implementation_name
from accelbench.measuring.checking import check_against_reference
from accelbench.platform.devices import parse_device

REPO_ROOT = Path(__file__).resolve().parents[1]
HAS_GPU = torch.cuda.is_available()
NO_GPU_REASON = "no CUDA GPU present (torch.cuda.is_available() is False)"
DTYPES = ("float32", "float64")
SIZES = (1, 7, 33, 64)
CPU1 = parse_device("cpu1")


def implementations_for(kind: str) -> list[tuple[str, str]]:
    """(kernel, backend) for every registered implementation that runs on `kind` devices."""
    return [
        (name, backend)
        for name, spec in kernels().items()
        for backend in spec.implementations
        if kind in backend_catalogue()[backend].device_kinds and kind in spec.device_kinds
    ]


def cases_for(kind: str) -> list[tuple[str, str, str]]:
    """(kernel, backend, dtype) for every implementation on `kind` and each dtype it computes in."""
    return [
        (name, backend, dtype)
        for name, backend in implementations_for(kind)
        for dtype in kernels()[name].dtypes(backend)
    ]


CPU_IMPLEMENTATIONS = implementations_for("cpu")
GPU_IMPLEMENTATIONS = implementations_for("cuda")
CPU_CASES = cases_for("cpu")
GPU_CASES = cases_for("cuda")


def fresh_inputs(spec, size: int, dtype: np.dtype, salt: int = 0):
    """Inputs from a generator seeded by the case, so each size and dtype gets its own data."""
    rng = np.random.default_rng([size, dtype.itemsize, salt, 20240501])
    return spec.make_inputs(rng, size, dtype)


def check_poisoned_run(
    prepared: Prepared, reference: np.ndarray, dtype: np.dtype, tol: float, spec
):
    prepared.poison()
    poisoned = np.array(prepared.fetch(), copy=True)
    assert poisoned.shape == reference.shape
    assert np.isnan(poisoned.astype(np.complex128)).all(), "poison() must fill the output with NaN"
    prepared.run()
    result = np.array(prepared.fetch(), copy=True)
    assert result.shape == reference.shape
    expected = spec.output_dtype(dtype)
    assert result.dtype == expected, f"computed in {result.dtype}, asked for {expected}"
    assert np.isfinite(result.astype(np.complex128)).all()
    error = spec.error(result, reference)
    assert error <= tol, f"{spec.error_measure} {error:.3g} > tolerance {tol:.3g}"
    return error


# JAX's client may not start in the test process (tests/conftest.py), nor in a child forked
# after CUDA started there: its cells are checked in an interpreter of their own, which starts
# it once for all of them (in_a_fresh_interpreter).
IN_PROCESS_CPU_CASES = [case for case in CPU_CASES if case[1] != "jax"]
JAX_CPU_CASES = [case for case in CPU_CASES if case[1] == "jax"]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(("kernel", "backend", "dtype"), IN_PROCESS_CPU_CASES)
def test_cpu_implementation_matches_reference(kernel, backend, dtype, size):
    matches_reference(kernel, backend, dtype, size)


def matches_reference(kernel: str, backend: str, dtype: str, size: int) -> None:
    spec, dtype = kernels()[kernel], host_dtype(dtype)
    assert backend_catalogue()[backend].unavailable_reason(CPU1) is None
    inputs = fresh_inputs(spec, size, dtype)
    reference = spec.reference(*inputs)
    assert reference.dtype in (np.float64, np.complex128)
    prepared = spec.implementations[backend](inputs, CPU1)
    tol = spec.tolerance(size, dtype)
    check_poisoned_run(prepared, reference, dtype, tol, spec)
    # A second run on the same buffers must give the same answer (no accumulation).
    prepared.run()
    assert spec.error(np.array(prepared.fetch()), reference) <= tol
    # Host backends have nothing to transfer.
    assert prepared.upload is None and prepared.download is None


@pytest.mark.parametrize(
    ("kernel", "backend"), [case for case in CPU_IMPLEMENTATIONS if case[1] != "jax"]
)
def test_cpu_implementation_via_check_helper(kernel, backend):
    passes_the_check_helper(kernel, backend)


def passes_the_check_helper(kernel: str, backend: str) -> None:
    spec, dtype, size = kernels()[kernel], np.dtype("float32"), 33
    inputs = fresh_inputs(spec, size, dtype, salt=1)
    prepared = spec.implementations[backend](inputs, CPU1)
    reference = spec.reference(*inputs)
    check = check_against_reference(
        prepared, reference, spec.tolerance(size, dtype), spec.error, spec.error_measure
    )
    assert check["passed"] is True
    assert 0.0 <= check["relative_error"] <= check["tolerance"]
    assert check["reference"] == "numpy float64"
    assert check["measure"] == spec.error_measure


def on_the_cpu(kernel: str, backend: str, dtype: str, size: int) -> None:
    matches_reference(kernel, backend, dtype, size)
    passes_the_check_helper(kernel, backend)


CHECK_CASES = """\
import json, sys
import test_kernels

check = getattr(test_kernels, sys.argv[1])
for case in json.loads(sys.argv[2]):
    try:
        check(*case)
    except AssertionError as err:
        sys.exit(f"{case}: {err}")
print("CHECKED", len(json.loads(sys.argv[2])))
"""


def in_a_fresh_interpreter(check: str, cases: list[tuple[str, str, str, int]]) -> None:
    """`check` (a function of this module) on each of `cases`, in an interpreter of its own."""
    folders = [str(REPO_ROOT / "src"), str(REPO_ROOT / "tests"), os.environ.get("PYTHONPATH")]
    path = os.pathsep.join(filter(None, folders))
    done = subprocess.run(
        [sys.executable, "-c", CHECK_CASES, check, json.dumps(cases)],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["CHECKED", str(len(cases))]


def test_jax_cpu_implementations_match_reference_in_an_interpreter_of_their_own():
    cases = [(*case, size) for case in JAX_CPU_CASES for size in SIZES]
    assert {kernel for kernel, *_ in cases} >= {"matmul", "saxpy", "reduction", "stencil", "fft1d"}
    in_a_fresh_interpreter("on_the_cpu", cases)


@pytest.mark.parametrize("kernel", sorted(kernels()))
@pytest.mark.parametrize("dtype", DTYPES)
def test_inputs_are_fresh_random_nonzero_and_deterministic(kernel, dtype):
    spec, dtype = kernels()[kernel], np.dtype(dtype)
    first = spec.make_inputs(np.random.default_rng(3), 9, dtype)
    second = spec.make_inputs(np.random.default_rng(3), 9, dtype)
    other = spec.make_inputs(np.random.default_rng(4), 9, dtype)
    for x, y in zip(first, second, strict=True):
        np.testing.assert_array_equal(x, y)
        assert np.count_nonzero(x) > 0
        assert x.dtype in (dtype, spec.output_dtype(dtype))
    assert any(not np.array_equal(x, z) for x, z in zip(first, other, strict=True))


@pytest.mark.parametrize("kernel", sorted(kernels()))
def test_flops_and_bytes_are_declared_for_every_size(kernel):
    spec = kernels()[kernel]
    for n in (1, 2, 16, 33):
        assert spec.flops(n) >= 0
        assert spec.bytes_moved(n, 4) > 0
        assert spec.bytes_moved(n, 8) == 2 * spec.bytes_moved(n, 4)
    assert spec.flops(64) >= spec.flops(32)


@pytest.mark.parametrize(
    ("kernel", "n", "itemsize", "flops", "nbytes"),
    [
        ("saxpy", 10, 4, 20.0, 120.0),
        ("reduction", 10, 8, 10.0, 80.0),
        ("stencil", 10, 4, 4.0 * 64, 800.0),
        ("stencil", 2, 8, 0.0, 64.0),
        ("fft1d", 8, 4, 5.0 * 8 * 3, 2.0 * 8 * 8),
        ("fft2d", 4, 8, 5.0 * 16 * 4, 2.0 * 16 * 16),
        ("transfer-d2d", 10, 4, 0.0, 80.0),
        ("transfer-h2d-pinned", 10, 4, 0.0, 40.0),
        ("transfer-d2h", 10, 8, 0.0, 80.0),
    ],
)
def test_declared_counts(kernel, n, itemsize, flops, nbytes):
    spec = kernels()[kernel]
    assert spec.flops(n) == flops
    assert spec.bytes_moved(n, itemsize) == nbytes


def test_mandelbrot_flops_count_the_reference_steps():
    n = 48
    counts = mandelbrot.reference(*mandelbrot.coordinates(n))
    assert counts.shape == (n, n)
    assert set(np.unique(counts)) <= set(range(mandelbrot.MAX_ITER + 1))
    assert counts.max() == mandelbrot.MAX_ITER and counts.min() == 1  # inside and far outside
    assert kernels()["mandelbrot"].flops(n) == mandelbrot.FLOPS_PER_STEP * counts.sum()
    # A random sub-pixel shift changes the work by well under one percent.
    shifted = mandelbrot.reference(
        *mandelbrot.make_inputs(np.random.default_rng(1), 128, np.dtype("float64"))
    )
    assert abs(shifted.sum() - mandelbrot.steps(128)) < 0.01 * mandelbrot.steps(128)


def test_mandelbrot_reference_matches_a_direct_escape_loop():
    real, imag = mandelbrot.coordinates(12)
    expected = np.array(mandelbrot.escape_python(real.tolist(), imag.tolist()), dtype=float)
    np.testing.assert_array_equal(mandelbrot.reference(real, imag), expected)


def test_mismatch_fraction():
    reference = np.array([[1.0, 2.0], [3.0, 100.0]])
    assert mandelbrot.mismatch_fraction(reference.copy(), reference) == 0.0
    assert mandelbrot.mismatch_fraction(reference + [[0, 0], [0, 1]], reference) == 0.25
    assert mandelbrot.mismatch_fraction(reference[:1], reference) == float("inf")
    assert mandelbrot.mismatch_fraction(np.full((2, 2), np.nan), reference) == float("inf")


def wrong_copies(inputs) -> list[np.ndarray]:
    (x,) = inputs
    corrupted = x.copy()
    corrupted[3] = -corrupted[3]
    return [corrupted, np.roll(x, 1)]


def wrong_saxpy(inputs) -> list[np.ndarray]:
    a, x, y = inputs
    return [(a * x).astype(x.dtype), (x + y).astype(x.dtype)]


def wrong_reduction(inputs) -> list[np.ndarray]:
    (x,) = inputs
    return [np.sum(x[1:], keepdims=True), np.sum(x, keepdims=True) * 1.05]


def wrong_stencil(inputs) -> list[np.ndarray]:
    (u,) = inputs
    shifted = u.copy()
    shifted[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 1:-1])
    return [shifted, u.copy()]


def wrong_mandelbrot(inputs) -> list[np.ndarray]:
    reference = mandelbrot.reference(*inputs)
    return [reference + 1, reference.T.copy()]


def wrong_fft(inputs) -> list[np.ndarray]:
    (x,) = inputs
    return [np.fft.ifftn(x) * x.size, np.conj(np.fft.fftn(x))]


def wrong_matmul(inputs) -> list[np.ndarray]:
    a, b = inputs
    return [a @ b.T]


# Plausible but wrong outputs each kernel's bound must reject: for the computing kernels
# these know, and for every copy (a kernel of no arithmetic: see COPY_KERNELS).
WRONG_RESULTS = {
    "saxpy": wrong_saxpy,
    "reduction": wrong_reduction,
    "stencil": wrong_stencil,
    "mandelbrot": wrong_mandelbrot,
    "fft1d": wrong_fft,
    "fft2d": wrong_fft,
    "matmul": wrong_matmul,
}
COPY_KERNELS = {name for name, spec in kernels().items() if not any(spec.flops(n) for n in SIZES)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", sorted({*WRONG_RESULTS, *COPY_KERNELS}))
def test_error_bound_rejects_wrong_results(kernel, dtype):
    spec, dtype, size = kernels()[kernel], np.dtype(dtype), 33
    inputs = fresh_inputs(spec, size, dtype, salt=8)
    reference = spec.reference(*inputs)
    tol = spec.tolerance(size, dtype)
    for wrong in WRONG_RESULTS.get(kernel, wrong_copies)(inputs):
        assert spec.error(wrong, reference) > tol


CUPY_KERNELS = [name for name, spec in kernels().items() if "cupy" in spec.implementations]
NUMBA_CUDA_KERNELS = [
    name for name, spec in kernels().items() if "numba-cuda" in spec.implementations
]
CUDA1 = parse_device("cuda1")


@pytest.fixture
def numpy_playing_cupy():
    """NumPy standing in for CuPy as the CuPy backend's array module, so the registered CuPy
    implementations run here as they are."""
    with cupy_stand_in.numpy_playing_cupy():
        yield


@pytest.mark.parametrize("size", (1, 7, 33))
@pytest.mark.parametrize("kernel", CUPY_KERNELS)
def test_cupy_code_path_with_numpy_standing_in(numpy_playing_cupy, kernel, size):
    spec = kernels()[kernel]
    for name in spec.dtypes("cupy"):
        dtype = host_dtype(name)
        inputs = fresh_inputs(spec, size, dtype, salt=9)
        prepared = spec.implementations["cupy"](inputs, CUDA1)
        check_poisoned_run(
            prepared, spec.reference(*inputs), dtype, spec.tolerance(size, dtype), spec
        )
        # Computing kernels time their copies; copy kernels are the copy.
        assert (prepared.upload is None) == (kernel in COPY_KERNELS)
        assert (prepared.download is None) == (kernel in COPY_KERNELS)


def test_numpy_standing_in_for_cupy_refuses_the_copies_cupy_refuses():
    """ndarray.set and ndarray.get(out=...) neither broadcast nor cast (cupy/_core/core.pyx)."""
    device = np.zeros(3, dtype=np.float32)
    for host, error, message in [
        (np.array(2.0, np.float32), ValueError, "Shape mismatch"),  # a 0-d scalar into (3,)
        (np.zeros(1, np.float32), ValueError, "Shape mismatch"),
        (np.zeros(3, np.float64), TypeError, "float64 array cannot be set to float32"),
        ([1.0, 2.0, 3.0], TypeError, "Only numpy.ndarray"),
    ]:
        with pytest.raises(error, match=message):
            NUMPY_AS_DEVICE.upload(device, host)
    with pytest.raises(RuntimeError, match="non-contiguous"):
        NUMPY_AS_DEVICE.upload(np.zeros(6, np.float32)[::2], np.ones(3, np.float32))
    # A strided host array is accepted: CuPy makes it contiguous before the copy.
    NUMPY_AS_DEVICE.upload(device, np.arange(6, dtype=np.float32)[::2])
    np.testing.assert_array_equal(device, [0.0, 2.0, 4.0])

    for out, error, message in [
        (np.empty((), np.float32), ValueError, "Shape mismatch"),
        (np.empty(3, np.float64), TypeError, "float64 array cannot be obtained from float32"),
        (np.empty(6, np.float32)[::2], RuntimeError, "non-contiguous"),
    ]:
        with pytest.raises(error, match=message):
            NUMPY_AS_DEVICE.download(out, device)
    out = np.empty(3, np.float32)
    assert NUMPY_AS_DEVICE.download(out, device) is out
    np.testing.assert_array_equal(out, device)


@pytest.mark.parametrize("kernel", [name for name in CUPY_KERNELS if name not in COPY_KERNELS])
def test_cupy_upload_and_download_with_numpy_standing_in(numpy_playing_cupy, kernel):
    """upload() copies the host inputs into the device ones; download() returns the output."""
    spec, dtype, size = kernels()[kernel], np.dtype("float64"), 17
    inputs = fresh_inputs(spec, size, dtype, salt=10)
    prepared = spec.implementations["cupy"](inputs, CUDA1)
    changed = fresh_inputs(spec, size, dtype, salt=11)
    for host, new in zip(inputs, changed, strict=True):
        host[...] = new  # the host buffers now hold other data; the device still the old
    prepared.run()
    assert spec.error(prepared.fetch(), spec.reference(*changed)) > spec.tolerance(size, dtype)
    prepared.upload()
    prepared.poison()
    prepared.run()
    downloaded = prepared.download()
    assert spec.error(downloaded, spec.reference(*changed)) <= spec.tolerance(size, dtype)
    prepared.poison()
    assert np.isfinite(downloaded.astype(np.complex128)).all(), "download() must copy"


def test_half_dtypes_only_where_a_backend_computes_in_them():
    for name, spec in kernels().items():
        for backend, extra in spec.half_dtypes.items():
            assert backend in spec.implementations, (name, backend)
            assert set(extra) <= set(HALF_DTYPES)
        for backend in ("python", "numba", "numba-parallel", "numba-cuda"):
            assert spec.dtypes(backend) == ("float64", "float32"), (name, backend)


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


def test_noop_run_fails_thecheck_against_reference():
    spec, dtype, size = kernels()["matmul"], np.dtype("float64"), 16
    inputs = fresh_inputs(spec, size, dtype, salt=3)
    reference = spec.reference(*inputs)
    out = np.empty((size, size), dtype=dtype)
    prepared = numpy_buffer_prepared(out, run=lambda: None)
    prepared.poison()
    prepared.run()
    assert np.isnan(prepared.fetch()).all()
    assert relative_error(prepared.fetch(), reference) == float("inf")
    check = check_against_reference(prepared, reference, spec.tolerance(size, dtype))
    assert check["passed"] is False
    assert check["relative_error"] == float("inf")


def test_stale_correct_output_without_compute_fails_thecheck_against_reference():
    """A buffer already holding the right answer does not pass if run() computes nothing."""
    spec, dtype, size = kernels()["matmul"], np.dtype("float64"), 16
    a, b = fresh_inputs(spec, size, dtype, salt=4)
    reference = spec.reference(a, b)
    out = a @ b  # the correct answer, left over from an earlier run
    assert relative_error(out, reference) <= spec.tolerance(size, dtype)
    check = check_against_reference(
        numpy_buffer_prepared(out, run=lambda: None), reference, spec.tolerance(size, dtype)
    )
    assert check["passed"] is False


def test_array_module_fetch_is_a_host_copy():
    spec, dtype = kernels()["matmul"], np.dtype("float64")
    inputs = fresh_inputs(spec, 5, dtype, salt=6)
    prepared = prepare_array_module(NUMPY_AS_DEVICE, inputs)
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
    from accelbench.measuring import timers
    from accelbench.backends import named
    from accelbench.platform.devices import parse_device
    from accelbench.kernels import kernels

    device = parse_device("cuda1")
    report = {
        "simulator": bool(config.ENABLE_CUDASIM),
        "reason": named("numba-cuda").unavailable_reason(device),
        "cases": [],
    }
    # Tiny and odd: the simulator runs every CUDA thread as a Python thread.
    sizes = {"matmul": (5, 17, 20), "reduction": (3, 200), "fft2d": (3, 8)}
    for kernel, spec in kernels().items():
        if "numba-cuda" not in spec.implementations:
            continue
        for size in sizes.get(kernel, (5, 16)):
            for name in ("float32", "float64"):
                dtype = np.dtype(name)
                rng = np.random.default_rng([size, dtype.itemsize])
                inputs = spec.make_inputs(rng, size, dtype)
                reference = spec.reference(*inputs)
                prepared = spec.implementations["numba-cuda"](inputs, device)
                prepared.poison()
                poisoned = bool(np.isnan(prepared.fetch().astype(np.complex128)).all())
                prepared.run()
                result = prepared.fetch()
                case = {
                    "kernel": kernel, "size": size, "dtype": name, "poisoned": poisoned,
                    "result_dtype": str(result.dtype),
                    "expected_dtype": str(spec.output_dtype(dtype)),
                    "shape": list(result.shape), "reference_shape": list(reference.shape),
                    "error": spec.error(result, reference),
                    "tolerance": spec.tolerance(size, dtype),
                    "transfers": prepared.upload is not None,
                }
                if prepared.upload is not None and size == min(sizes.get(kernel, (5,))):
                    prepared.poison()
                    prepared.upload()
                    prepared.run()
                    case["downloaded_error"] = spec.error(prepared.download(), reference)
                report["cases"].append(case)
    tiny = kernels()["matmul"].implementations["numba-cuda"](
        kernels()["matmul"].make_inputs(np.random.default_rng(0), 2, np.dtype("float32")), device
    )
    timed = timers.cuda_event_samples(tiny.run, min_run_time=1e-4, warmup_s=0.05)
    report["samples"] = [float(s) for s in timed.samples]
    report["warmup_blocks"] = timed.warmup.blocks
    print("REPORT " + json.dumps(report))
    """
)


@pytest.fixture(scope="module")
def simulator_report():
    return run_under_simulator(SIMULATOR_SCRIPT)


def test_numba_cuda_available_under_simulator(simulator_report):
    assert simulator_report["simulator"] is True
    assert simulator_report["reason"] is None


def test_numba_cuda_kernel_matches_reference_under_simulator(simulator_report):
    cases = simulator_report["cases"]
    assert {c["kernel"] for c in cases} == set(NUMBA_CUDA_KERNELS)
    matmul_cases = [c for c in cases if c["kernel"] == "matmul"]
    assert {(c["size"], c["dtype"]) for c in matmul_cases} == {
        (n, d) for n in (5, 17, 20) for d in DTYPES
    }
    assert any(c["size"] % TILE for c in matmul_cases), "sizes must leave partial tiles"
    assert any(c["size"] > TILE for c in matmul_cases), "sizes must span more than one tile"
    for case in cases:
        label = f"{case['kernel']} n={case['size']} {case['dtype']}"
        assert case["poisoned"], f"{label}: poison() left finite values"
        assert case["shape"] == case["reference_shape"], label
        assert case["result_dtype"] == case["expected_dtype"], label
        assert case["error"] is not None and case["error"] <= case["tolerance"], (
            f"{label}: error {case['error']} > tolerance {case['tolerance']}"
        )
        # Computing kernels time their copies; copy kernels are the copy.
        assert case["transfers"] == (case["kernel"] not in COPY_KERNELS), label
        if "downloaded_error" in case:
            assert case["downloaded_error"] <= case["tolerance"], label
    assert {c["kernel"] for c in cases if "downloaded_error" in c} == (
        set(NUMBA_CUDA_KERNELS) - COPY_KERNELS
    )


CAPPED_GRID_SCRIPT = textwrap.dedent(
    """
    import json
    import threading
    import numpy as np
    import accelbench.kernels
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    from numba.cuda.simulator.kernel import BlockThread, FakeCUDAKernel
    from accelbench.platform.devices import parse_device
    from accelbench.kernels import kernels

    # One block per grid dimension: a kernel that does not stride leaves output poisoned.
    accelbench.kernels.MAX_GRID_BLOCKS = 1
    launches = []
    configure = FakeCUDAKernel.__getitem__

    def recorded_launch(kernel, configuration):
        launches.append([int(blocks) for blocks in np.atleast_1d(configuration[0])])
        return configure(kernel, configuration)

    FakeCUDAKernel.__getitem__ = recorded_launch
    # Which thread writes which element of a 2-D array: x must run along a row.
    writes = []
    store = FakeCUDAArray.__setitem__

    def recorded_store(array, index, value):
        thread = threading.current_thread()
        if isinstance(thread, BlockThread) and array._ary.ndim == 2:
            writes.append(
                (
                    list(thread.blockIdx), list(thread.threadIdx),
                    list(thread._manager._block_dim), list(thread._manager._grid_dim),
                    [int(i) for i in index],
                )
            )
        return store(array, index, value)

    FakeCUDAArray.__setitem__ = recorded_store
    device = parse_device("cuda1")
    # Beyond one block: 1-D kernels over more than 256 threads' worth (odd and a power of
    # two for the FFTs), 2-D kernels over more than one 16 x 16 tile.
    sizes = {"fft1d": (300, 1024), "fft2d": (20, 32), "matmul": (20,), "stencil": (20,),
             "mandelbrot": (20,)}
    cases = []
    for kernel, spec in kernels().items():
        if "numba-cuda" not in spec.implementations:
            continue
        for size in sizes.get(kernel, (300,)):
            dtype = np.dtype("float32")
            inputs = spec.make_inputs(np.random.default_rng([size, 7]), size, dtype)
            reference = spec.reference(*inputs)
            prepared = spec.implementations["numba-cuda"](inputs, device)
            prepared.poison()
            del launches[:], writes[:]
            prepared.run()
            result = prepared.fetch()
            across_rows = sum(
                (col - (block[0] * threads[0] + thread[0])) % (grid[0] * threads[0]) != 0
                or (row - (block[1] * threads[1] + thread[1])) % (grid[1] * threads[1]) != 0
                for block, thread, threads, grid, (row, col) in writes
            )
            cases.append({
                "kernel": kernel, "size": size,
                "poisoned": int(np.isnan(result.astype(np.complex128)).sum()),
                "error": spec.error(result, reference),
                "tolerance": spec.tolerance(size, dtype),
                "largest_grid": max((max(grid) for grid in launches), default=0),
                "writes_2d": len(writes),
                "writes_across_rows": int(across_rows),
            })
    print("REPORT " + json.dumps(cases))
    """
)


def run_under_simulator(script: str) -> str:
    """`script`'s REPORT line, run in a child process with Numba's CUDA simulator on."""
    # This checkout's package first, whatever is installed in the environment.
    pythonpath = os.pathsep.join(
        filter(None, [str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH")])
    )
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": pythonpath}
    done = subprocess.run(
        [sys.executable, "-c", script],
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


@pytest.fixture(scope="module")
def capped_grid_cases():
    return run_under_simulator(CAPPED_GRID_SCRIPT)


def test_every_numba_cuda_kernel_covers_its_range_on_a_capped_grid(capped_grid_cases):
    """With one block per grid dimension, each kernel strides over the rest of its range."""
    assert {case["kernel"] for case in capped_grid_cases} == set(NUMBA_CUDA_KERNELS)
    for case in capped_grid_cases:
        label = f"{case['kernel']} n={case['size']}"
        assert case["largest_grid"] <= 1, f"{label}: a launch ignored the grid cap"
        assert case["poisoned"] == 0, f"{label}: {case['poisoned']} elements left poisoned"
        assert case["error"] <= case["tolerance"], label


def test_neighbouring_cuda_threads_write_neighbouring_elements_of_a_row(capped_grid_cases):
    """threadIdx.x maps to the column of a row-major array, so a warp's accesses coalesce."""
    tiled = {case["kernel"]: case for case in capped_grid_cases if case["size"] == 20}
    for kernel in ("matmul", "stencil", "mandelbrot"):
        assert tiled[kernel]["writes_2d"] == 20 * 20, kernel
        assert tiled[kernel]["writes_across_rows"] == 0, kernel


def test_cuda_event_samples_under_simulator(simulator_report):
    samples = simulator_report["samples"]
    assert len(samples) >= 3
    # The simulator's events keep the API but carry no time (numba-cuda returns -1 ms):
    # this checks the event loop runs, not the values, which need a GPU.
    assert all(isinstance(s, float) for s in samples)
    assert simulator_report["warmup_blocks"] >= 1  # warmed up on the host clock first


def test_numba_cuda_unavailable_without_gpu_or_simulator():
    if HAS_GPU:
        pytest.skip("a CUDA GPU is present; the no-GPU reason does not apply")
    reason = backend_catalogue()["numba-cuda"].unavailable_reason(parse_device("cuda1"))
    assert reason and "CUDA" in reason


GPU_SIZES = (1, 33, 100, 256)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason=NO_GPU_REASON)
@pytest.mark.parametrize("size", GPU_SIZES)
@pytest.mark.parametrize(("kernel", "backend", "dtype"), [c for c in GPU_CASES if c[1] != "jax"])
def test_gpu_implementation_matches_reference(kernel, backend, dtype, size):
    on_the_gpu(kernel, backend, dtype, size)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason=NO_GPU_REASON)
def test_jax_gpu_implementations_match_reference_in_an_interpreter_of_their_own():
    cases = [(*case, size) for case in GPU_CASES if case[1] == "jax" for size in GPU_SIZES]
    assert cases
    in_a_fresh_interpreter("on_the_gpu", cases)


def on_the_gpu(kernel: str, backend: str, dtype: str, size: int) -> None:
    device = parse_device("cuda1")
    assert backend_catalogue()[backend].unavailable_reason(device) is None
    spec, dtype = kernels()[kernel], host_dtype(dtype)
    inputs = fresh_inputs(spec, size, dtype, salt=7)
    reference = spec.reference(*inputs)
    prepared = spec.implementations[backend](inputs, device)
    check_poisoned_run(prepared, reference, dtype, spec.tolerance(size, dtype), spec)
    if prepared.upload is not None:
        prepared.poison()
        prepared.upload()
        prepared.run()
        downloaded = prepared.download()
        if isinstance(downloaded, torch.Tensor):
            downloaded = torch_to_host(downloaded)
        assert spec.error(downloaded, reference) <= spec.tolerance(size, dtype)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason=NO_GPU_REASON)
def test_a_numba_cuda_fft_longer_than_the_grid_covers_every_point():
    """2^24 points: more than 65535 blocks of 256 threads, the largest 1-D grid launched."""
    spec, dtype, size = kernels()["fft1d"], np.dtype("float32"), 1 << 24
    inputs = fresh_inputs(spec, size, dtype, salt=12)
    prepared = spec.implementations["numba-cuda"](inputs, parse_device("cuda1"))
    check_poisoned_run(prepared, spec.reference(*inputs), dtype, spec.tolerance(size, dtype), spec)


@pytest.mark.parametrize("name", sorted(kernels()))
def test_every_backend_of_a_kernel_is_named_after_the_kernels_module(name):
    """A record's measured_by names `module:backend`; shared wrappers must not say kernels/."""
    spec = kernels()[name]
    modules = {prepare.__module__ for prepare in spec.implementations.values()}
    assert len(modules) == 1
    assert modules.pop().startswith("accelbench.kernels.")
    backend, prepare = next(iter(spec.implementations.items()))
    assert implementation_name(spec, backend) == f"{prepare.__module__}:{backend}"

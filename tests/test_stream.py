"""The STREAM kernels of the memory roof, and Numba loops compiled serial and parallel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from accelbench.backends.cupy_stand_in import NUMPY_AS_DEVICE
from accelbench.kernels import array_prepared, host_dtype, relative_error
from accelbench.kernels.measure import check_kernel
from accelbench.platform.devices import parse_device
from accelbench.roofs import stream

CPU_CASES = [
    (name, backend, dtype)
    for name, spec in stream.SPECS.items()
    for backend in ("torch", "numba-parallel")
    for dtype in spec.dtypes(backend)
]


@pytest.mark.parametrize(("name", "backend", "dtype"), CPU_CASES)
def test_stream_kernels_match_the_float64_reference(name, backend, dtype):
    checked = check_kernel(
        stream.SPECS[name], backend, parse_device("cpu2"), host_dtype(dtype), 70001, 0
    )
    assert checked.check["passed"], checked.check


def test_the_memory_roof_has_16_bit_candidates_where_a_backend_computes_in_16_bits():
    for spec in stream.SPECS.values():
        assert spec.dtypes("torch") == ("float64", "float32", "float16", "bfloat16")
        assert spec.dtypes("cupy") == ("float64", "float32", "float16")
        assert spec.dtypes("numba-parallel") == ("float64", "float32")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", sorted(stream.SPECS))
def test_stream_array_code_runs_through_a_device_module(name, dtype):
    """The CuPy path, with NumPy standing in for CuPy (copies in and out included); the
    read of 70001 values near 1 sums past float16's largest value into float32."""
    spec, dtype = stream.SPECS[name], np.dtype(dtype)
    inputs = spec.make_inputs(np.random.default_rng(0), 70001, dtype)
    op = name.removeprefix("stream-")
    prepared = array_prepared(
        NUMPY_AS_DEVICE,
        inputs,
        stream._array_code(op, np),
        stream.out_shape(op, inputs),
        spec.output_dtype(dtype),
    )
    prepared.upload()
    prepared.poison()
    prepared.run()
    assert relative_error(prepared.download(), spec.reference(*inputs)) <= spec.tolerance(
        70001, dtype
    )


def test_stream_counts_words_as_stream_does():
    itemsize = 8
    moved = {name: spec.bytes_moved(10, itemsize) for name, spec in stream.SPECS.items()}
    assert moved == {
        "stream-copy": 160.0,
        "stream-scale": 160.0,
        "stream-add": 240.0,
        "stream-triad": 240.0,
        "stream-read": 80.0,
    }
    assert stream.SPECS["stream-triad"].flops(10) == 20.0


CACHE_PROBE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from accelbench.kernels.saxpy import _numba_loop
    loop = _numba_loop(sys.argv[1] == "parallel")
    a, x, y = np.ones(1), np.ones(64), np.ones(64)
    loop(a, x, y, np.empty(64))
    print(json.dumps(sum(loop.stats.cache_hits.values())))
    """
)


def cache_hits(variant: str, cache_dir) -> int:
    done = subprocess.run(
        [sys.executable, "-c", CACHE_PROBE, variant],
        env={**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_parallel_loop_never_loads_the_serial_loops_machine_code(tmp_path):
    """Numba's disk cache does not key on `parallel`: without a name of its own each
    variant would load the other's compiled code, and numba-parallel would run serially."""
    assert cache_hits("serial", tmp_path) == 0  # compiled and cached
    assert cache_hits("parallel", tmp_path) == 0  # not the serial code from the cache
    assert cache_hits("parallel", tmp_path) == 1  # its own cache entry, now there
    assert cache_hits("serial", tmp_path) == 1

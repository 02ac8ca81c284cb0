"""Each run places its host arrays afresh: runs forked from one parent do not share one
placement (accelbench.measuring.placement)."""

import numpy as np
import pytest

from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.kernels import host_dtype, kernels
from accelbench.kernels.measure import check_kernel, prepare_kernel
from accelbench.measuring import placement
from accelbench.platform.devices import parse_device
from accelbench.platform.processes import call_in_fork


@pytest.mark.parametrize(
    "shape, dtype", [((128, 128), "float32"), ((), "float64"), ((0,), "int32"), (7, "bfloat16")]
)
def test_an_array_starts_at_a_cache_line_within_a_page(shape, dtype):
    dtype = host_dtype(dtype) if dtype == "bfloat16" else np.dtype(dtype)
    array = placement.empty(shape, dtype)
    assert array.shape == ((shape,) if isinstance(shape, int) else shape)
    assert array.dtype == dtype and array.flags.c_contiguous and array.flags.writeable
    if array.size:  # an empty array's address means nothing
        assert array.ctypes.data % placement.CACHE_LINE == 0


def test_a_copy_holds_the_values_and_leaves_other_inputs_alone():
    x = np.arange(12.0).reshape(3, 4)
    placed = placement.copy(x)
    assert np.array_equal(placed, x) and placed.ctypes.data != x.ctypes.data
    assert placement.copy(np.float32(2.5)) == np.float32(2.5)
    assert placement.copy(np.asarray(2.5)).shape == ()
    marker = object()
    assert placement.copy(marker) is marker


def offsets_of_a_forked_run() -> tuple[int, ...]:
    return tuple(placement.empty((1024,), np.float64).ctypes.data % placement.PAGE for _ in "ab")


def test_runs_forked_from_one_parent_draw_their_own_placements():
    drawn = {call_in_fork(offsets_of_a_forked_run) for _ in range(8)}
    # 64 offsets per array: eight runs that all drew one placement would be a 64**-14 chance.
    assert len(drawn) > 1


def test_a_checked_kernel_still_matches_its_reference_on_placed_arrays():
    for backend in ("numpy", "numba", "torch"):
        checked = check_kernel(
            kernels()["matmul"], backend, parse_device("cpu1"), np.dtype("float64"), 64, 0
        )
        assert checked.check["passed"], (backend, checked.check)


def flop_counts_made_in_a_forked_run(size: int) -> tuple[float, int]:
    from accelbench.kernels import mandelbrot

    misses = mandelbrot.steps.cache_info().misses
    return kernels()["mandelbrot"].flops(size), mandelbrot.steps.cache_info().misses - misses


def test_a_jobs_runs_inherit_a_flop_count_that_depends_on_the_data():
    """Mandelbrot's flops are the steps of a float64 run over its grid: made once in the
    job's process (prepare_kernel), not in each forked run (1 to 3 s a run)."""
    from accelbench.kernels import mandelbrot

    mandelbrot.steps.cache_clear()
    exp = KernelExperiment("mandelbrot", "cpu1", "numpy", "float32", 96)
    prepare_kernel(exp, KernelSettings(seed=0))
    flops, computed = call_in_fork(flop_counts_made_in_a_forked_run, 96)
    assert computed == 0 and flops == kernels()["mandelbrot"].flops(96) > 0

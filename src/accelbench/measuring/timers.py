"""The library timers: per-run samples of a call, after the run has warmed up.

Timing itself is delegated to torch.utils.benchmark (CPU and PyTorch) and, on a
GPU, to cupyx.profiler.benchmark or CUDA events (JAX, which has no timer, waits for its
results in each call and is timed on the host clock); this module only adapts their
results into plain per-run samples, which accelbench.measuring.statistics
summarises. Before any sample counts, a run warms up until its time per call stops
falling (`warm_up`): a freshly forked process is cold (page faults, thread pools
starting, a clock still low after idling) and its first calls can be several times
slower than its later ones.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
import timeit
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from accelbench.measuring.settings import TimedSettings

# The GPU timers' samples are blocks of back-to-back calls lasting at least this long, as
# torch's Timer times blocks: an event pair around one call on an idle GPU also times the
# host preparing the launch (on an H100, a 134 MB copy read 157 us a call so in Numba and
# 102 us in CuPy, 129 us and 92 us in blocks of 20; torch's blocks gave 92 us), so the
# backends would not be compared alike.
GPU_BLOCK_S = 1e-3
# Training times each step itself: the loop synchronises the device around it.
STEP_TIMER = "time.perf_counter around each training step, device synchronised"
# Warm-up: blocks of calls until the median of the last WARMUP_WINDOW blocks' time per
# call is no more than WARMUP_TOLERANCE below the median of the WARMUP_WINDOW before.
WARMUP_WINDOW = 3
WARMUP_TOLERANCE = 0.03


@dataclass(frozen=True)
class Warmup:
    """How one run reached steady state before its samples: the warm-up's length, its
    blocks, whether the time per call had stopped falling (False: the warm-up budget was
    spent while it still fell), and the time per call it ended at."""

    seconds: float
    blocks: int
    steady: bool
    per_call: float


@dataclass(frozen=True)
class Timed:
    """One run's timed samples (s) and the warm-up before them."""

    samples: list[float]
    warmup: Warmup


def stopped_falling(per_call: Sequence[float]) -> bool:
    """Whether a sequence of block (or step) times has reached steady state: the median of
    the last WARMUP_WINDOW is no more than WARMUP_TOLERANCE below the median of the
    WARMUP_WINDOW before them. Medians, so that one slow block (an interrupt) neither
    ends nor prolongs the warm-up."""
    if len(per_call) < 2 * WARMUP_WINDOW:
        return False
    last = statistics.median(per_call[-WARMUP_WINDOW:])
    before = statistics.median(per_call[-2 * WARMUP_WINDOW : -WARMUP_WINDOW])
    return last >= (1.0 - WARMUP_TOLERANCE) * before


def warm_up(
    block: Callable[[int], float], first: float, *, block_s: float, budget_s: float
) -> Warmup:
    """Run `block(number)` (the time per call of `number` calls) until steady state or until
    `budget_s` is spent, in blocks of about `block_s` each, sized from the latest time per
    call (`first`: one call's, to start from). A fixed count of warm-up calls is not
    enough: a freshly forked process ran matmul at 9.2, 6.0, 3.8, 2.6 and 4.4 ms per call
    before it settled at 1.5 ms."""
    started = time.perf_counter()
    per_call: list[float] = []
    latest = first
    while True:
        latest = block(max(1, int(block_s / max(latest, 1e-9))))
        per_call.append(latest)
        steady = stopped_falling(per_call)
        spent = time.perf_counter() - started
        if steady or spent >= budget_s:
            settled = statistics.median(per_call[-WARMUP_WINDOW:])
            return Warmup(spent, len(per_call), steady, settled)


def synchronised_block(
    fn: Callable[[], object], sync: Callable[[], None]
) -> Callable[[int], float]:
    """A warm-up block for GPU timers: `number` calls between two device synchronisations,
    on the host clock (the samples themselves come from the library's CUDA events)."""

    def block(number: int) -> float:
        calls = repeated(fn, number)
        sync()
        started = time.perf_counter()
        calls()
        sync()
        return (time.perf_counter() - started) / number

    return block


def torch_timer_samples(
    fn: Callable[[], object],
    *,
    num_threads: int,
    min_run_time: float,
    samples: int,
    label: str,
    warmup_s: float,
) -> Timed:
    """`samples` per-run times (s) of `fn`, each from one torch.utils.benchmark.Timer block,
    after a warm-up (`warm_up`, at most `warmup_s`) in blocks of the same Timer.

    The block length (runs per sample) is chosen from the warmed-up time per call so
    that all samples together last about `min_run_time`; each `Timer.timeit` call
    pins torch's thread count and synchronises CUDA around the block.
    blocked_autorange is not used because it grows blocks by factors of ten and
    can return as few as two samples, too few for a confidence interval.
    """
    timer = torch_benchmark().Timer(
        stmt="fn()", globals={"fn": fn}, num_threads=num_threads, label=label
    )
    sample_s = min_run_time / samples
    warmup = warm_up(
        lambda number: timer.timeit(number).times[0],
        timer.timeit(1).times[0],
        block_s=sample_s / 2,
        budget_s=warmup_s,
    )
    number = max(1, int(sample_s / max(warmup.per_call, 1e-9)))
    return Timed([timer.timeit(number).times[0] for _ in range(samples)], warmup)


def host_clock_samples(
    fn: Callable[[], object], *, min_run_time: float, samples: int, warmup_s: float
) -> Timed:
    """`samples` times per call (s) of `fn`, each from one timeit block on the host clock
    (garbage collection off, as in torch's Timer), after a warm-up (`warm_up`, at most
    `warmup_s`), blocks sized as torch_timer_samples sizes them. For a library no timer
    here knows whose calls wait for their own work (a JAX call that blocks until its
    result is ready): the host clock then reads the work, on any device, and no other
    library's synchronisation is asked."""
    timer = timeit.Timer(fn)

    def block(number: int) -> float:
        return timer.timeit(number) / number

    sample_s = min_run_time / samples
    warmup = warm_up(block, block(1), block_s=sample_s / 2, budget_s=warmup_s)
    number = max(1, int(sample_s / max(warmup.per_call, 1e-9)))
    return Timed([block(number) for _ in range(samples)], warmup)


def torch_benchmark():
    """torch.utils.benchmark, imported in the run that times (see experiment.preload). Its
    import of torch.utils.cpp_extension warns, in every run of a host without a GPU, that
    no CUDA runtime is found: a message about compiling extensions, which nothing here
    does, so it is kept off the console."""
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    from torch.utils import benchmark

    return benchmark


def _gpu_warm_up(fn: Callable[[], object], sync, min_run_time: float, warmup_s: float) -> Warmup:
    block = synchronised_block(fn, sync)
    return warm_up(block, block(1), block_s=min_run_time / 10, budget_s=warmup_s)


def calls_per_block(per_call: float) -> int:
    """Back-to-back calls in one GPU timer sample: enough to last GPU_BLOCK_S."""
    return max(1, math.ceil(GPU_BLOCK_S / max(per_call, 1e-9)))


def repeated(fn: Callable[[], object], number: int) -> Callable[[], None]:
    """`fn` called `number` times back to back, nothing waited for in between."""

    def block() -> None:
        for _ in range(number):
            fn()

    return block


def cupy_samples(fn: Callable[[], object], *, min_run_time: float, warmup_s: float) -> Timed:
    """GPU times per call (s) of `fn` from cupyx.profiler.benchmark (CUDA events, synchronised)
    around blocks of calls (calls_per_block), after a warm-up (`warm_up`, at most `warmup_s`)."""
    import cupy
    from cupyx.profiler import benchmark

    warmup = _gpu_warm_up(fn, cupy.cuda.runtime.deviceSynchronize, min_run_time, warmup_s)
    number = calls_per_block(warmup.per_call)
    result = benchmark(repeated(fn, number), n_repeat=10_000, n_warmup=1, max_duration=min_run_time)
    return Timed([float(t) / number for t in result.gpu_times[0]], warmup)


def cuda_event_samples(
    fn: Callable[[], object], *, min_run_time: float, warmup_s: float, max_repeat: int = 10_000
) -> Timed:
    """GPU times per launch (s) of a Numba CUDA launch, read from CUDA events.

    Numba has no benchmark helper, so this follows cupyx.profiler.benchmark's
    method after the warm-up (`warm_up`, at most `warmup_s`): one event pair around
    each block of launches (calls_per_block), repeating until `min_run_time` of wall
    time is spent (the events, not the wall clock, give the samples).
    """
    from numba import cuda

    warmup = _gpu_warm_up(fn, cuda.synchronize, min_run_time, warmup_s)
    number = calls_per_block(warmup.per_call)
    block = repeated(fn, number)
    samples: list[float] = []
    deadline = time.perf_counter() + min_run_time
    while len(samples) < max_repeat and (len(samples) < 3 or time.perf_counter() < deadline):
        start, end = cuda.event(), cuda.event()
        start.record()
        block()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / number)
    return Timed(samples, warmup)


@dataclass(frozen=True)
class Timer:
    """A library timer as a backend names it: what a record calls it, and how it takes the
    per-run samples of a call, `samples(fn, threads, settings, label)` (settings: the
    family's `min_run_time`, `samples` and `warmup_s`)."""

    description: str
    samples: Callable[[Callable[[], object], int, TimedSettings, str], Timed]


def _torch_timer(
    fn: Callable[[], object], threads: int, settings: TimedSettings, label: str
) -> Timed:
    return torch_timer_samples(
        fn,
        num_threads=threads,
        min_run_time=settings.min_run_time,
        samples=settings.samples,
        label=label,
        warmup_s=settings.warmup_s,
    )


def _cupy_timer(
    fn: Callable[[], object], threads: int, settings: TimedSettings, label: str
) -> Timed:
    return cupy_samples(fn, min_run_time=settings.min_run_time, warmup_s=settings.warmup_s)


def _cuda_event_timer(
    fn: Callable[[], object], threads: int, settings: TimedSettings, label: str
) -> Timed:
    return cuda_event_samples(fn, min_run_time=settings.min_run_time, warmup_s=settings.warmup_s)


TORCH = Timer(
    "torch.utils.benchmark.Timer.timeit (one block per sample, threads pinned)", _torch_timer
)
CUPY = Timer(
    "cupyx.profiler.benchmark (CUDA events) around blocks of back-to-back calls", _cupy_timer
)
CUDA_EVENTS = Timer(
    "CUDA events around blocks of back-to-back Numba CUDA launches", _cuda_event_timer
)

"""JAX on the CPU and on CUDA GPUs: jnp code compiled by XLA (`jax.jit`).

JAX dispatches asynchronously, on the CPU as on a GPU: a call returns before its work is
done. So each call of a kernel waits for its own result (`block_until_ready`, how JAX's
documentation times code), and the timer reads the host clock around blocks of such
calls (timers.host_clock_samples); no other library's wait stands in for it (torch's
would not wait for XLA's stream). The first call traces and compiles.

JAX computes in float32 unless its 64-bit types are enabled: they are, before a run makes
its first array (`jax_enable_x64`), so a float64 cell computes in float64, while float32
inputs stay float32 (the check refuses a result in another type).

XLA starts its thread pools, and on a GPU its CUDA context, when its client starts, and a
child forked after that cannot use them (its first call waits forever on threads it does
not have). The job only imports JAX before its runs fork (importing starts neither); each
run starts its own client. XLA sizes its CPU pool then, one thread per CPU the process
may run on, so a run starts it after devices.cpu_threads has pinned the cell's CPUs: a
cpuN cell computes on N threads, a cpu1 cell on one (jaxlib 0.10 then runs each call on
one thread; `--xla_cpu_multi_thread_eigen=false` would not do it, its matrix products
still ran on two). A pool cannot be resized: a run forked from a process whose client had
started, or that needs other threads than its process's client has, is `unavailable` and
says why.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelbench.backends.base import Backend, BackendError, CheckRun
from accelbench.backends.prepared import Prepared
from accelbench.measuring import timers
from accelbench.measuring.settings import TimedSettings
from accelbench.platform import doctor
from accelbench.platform.devices import Device, cuda_unavailable_reason

# The plugins that make a jaxlib CUDA-enabled, one per CUDA stack.
CUDA_PLUGINS = ("jax-cuda13-plugin", "jax-cuda12-plugin")


@dataclass(frozen=True)
class Started:
    """Where JAX's client was started: the process, and the threads of the CPU run it was
    started for (None: a GPU run's, whose host side XLA sizes itself)."""

    pid: int
    threads: int | None


_started: Started | None = None


def cuda_plugin() -> str | None:
    """The installed CUDA plugin of jaxlib, with its version; None for a CPU-only jaxlib."""
    for name in CUDA_PLUGINS:
        try:
            return f"{name} {importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def start_problem(threads: int | None) -> str | None:
    """Why this process cannot start (or reuse) JAX's client for a CPU run on `threads`
    threads (None: a GPU run)."""
    if _started is None:
        return None
    if _started.pid != os.getpid():
        return (
            f"JAX's client was started in process {_started.pid}, which this run was forked "
            "from: XLA's threads do not survive a fork (nothing may start JAX before runs fork)"
        )
    if _started.threads != threads:
        return (
            f"JAX's client in this process was started for {_run_of(_started.threads)}, "
            f"not for {_run_of(threads)}"
        )
    return None


def _run_of(threads: int | None) -> str:
    return "a GPU run" if threads is None else f"a CPU run on {threads} thread(s)"


def _jax_reason(device: Device, dtype: str | None) -> str | None:
    if importlib.util.find_spec("jax") is None:
        return "JAX is not installed (No module named 'jax')"
    if device.is_gpu and cuda_plugin() is None:
        return f"no CUDA-enabled jaxlib: {doctor.JAX_GPU_FIX}"
    if device.is_gpu and (missing := cuda_unavailable_reason(device)):
        return missing  # before this process's client: no GPU here says more
    if problem := start_problem(None if device.is_gpu else device.count):
        return problem
    if not device.is_gpu:
        return None
    return doctor.backend_problem("jax", range(device.count), dtype)


def imported():
    """JAX, its 64-bit types enabled (before any array is made: JAX would otherwise
    compute a float64 cell in float32)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def started(threads: int | None):
    """JAX, its client started in this process for a CPU run on `threads` threads (its
    CPUs pinned already: XLA sizes its pool from them) or, for None, a GPU run. A CPU run
    starts the CPU platform alone: no CUDA context. A GPU run's client allocates as it
    goes, instead of taking 75% of the GPU's memory at start from the cells measured
    beside it in one process (JAX's XLA_PYTHON_CLIENT_PREALLOCATE)."""
    global _started
    if problem := start_problem(threads):
        raise BackendError(problem)
    jax = imported()
    if _started is None:
        if threads is not None:
            jax.config.update("jax_platforms", "cpu")
        else:
            os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        jax.devices()
        _started = Started(os.getpid(), threads)
    return jax


def jax_prepared(host_inputs, device: Device, compute: Callable[..., Any]) -> Prepared:
    """Prepared for JAX code: `compute(*inputs)` returns the result (a JAX array is never
    written in place), compiled by jax.jit, on the CPU or, for a cudaK device, on GPU 0.

    The inputs are put on the device once, here. Each run keeps its result on the device
    and waits for it: JAX dispatches asynchronously, so a call that returned may not have
    computed yet (accelbench.backends.jax). `poison` replaces the result with NaN. On a GPU,
    `upload` puts fresh copies of the host inputs there and `download` copies the result
    to JAX's CPU device: a JAX array keeps the host copy it was first read into, so reading
    it again would copy nothing.
    """
    import numpy as np

    jax = started(None if device.is_gpu else device.count)
    target = jax.devices("cuda" if device.is_gpu else "cpu")[0]
    host = tuple(np.ascontiguousarray(x) for x in host_inputs)
    inputs = [jax.device_put(x, target) for x in host]
    function = jax.jit(compute)
    shape = jax.eval_shape(function, *inputs)
    held = []

    def run():
        held[:] = [function(*inputs).block_until_ready()]

    def poison():
        held[:] = [jax.device_put(np.full(shape.shape, np.nan, shape.dtype), target)]

    upload = download = None
    if device.is_gpu:
        cpu = jax.devices("cpu")[0]

        def upload():
            inputs[:] = [jax.device_put(x, target) for x in host]
            jax.block_until_ready(inputs)

        def download():
            return jax.device_put(held[0], cpu).block_until_ready()

    poison()
    return Prepared(
        run=run,
        fetch=lambda: np.array(held[0]),
        poison=poison,
        upload=upload,
        download=download,
    )


def _synchronizer() -> Callable[[], None]:
    """Each call waits for its own result, so nothing is left queued; the wait starts the
    run's client (its CUDA context) where none has started yet."""

    def wait() -> None:
        started(None).effects_barrier()

    return wait


def _import_jax() -> None:
    """Import JAX where it is installed: a second a run; importing starts no client and no
    thread, so the runs can still fork."""
    if importlib.util.find_spec("jax"):
        import jax.numpy  # noqa: F401


def _samples(
    fn: Callable[[], object], threads: int, settings: TimedSettings, label: str
) -> timers.Timed:
    return timers.host_clock_samples(
        fn,
        min_run_time=settings.min_run_time,
        samples=settings.samples,
        warmup_s=settings.warmup_s,
    )


def _not_installed() -> str | None:
    return None if importlib.util.find_spec("jax") else "jax: JAX is not installed here"


def _no_gpu_here() -> str | None:
    if _not_installed() or cuda_plugin() is None:
        return f"jax (GPU): no CUDA-enabled jaxlib here; {doctor.JAX_GPU_FIX}"
    if not doctor.visible_gpus():
        return "jax (GPU): no CUDA device here"
    if problem := start_problem(None):  # the CPU run's client, in `accelbench check`
        return f"jax (GPU): {problem}"
    return None


TIMER = timers.Timer(
    "timeit blocks on the host clock, each call waiting for its result (block_until_ready)",
    _samples,
)
SPEC = Backend(
    "jax",
    ("cpu", "cuda"),
    TIMER,
    _jax_reason,
    compiles=True,
    device_synchronizer=_synchronizer,
    preload=_import_jax,
    check_runs=(
        CheckRun("jax (CPU)", missing=_not_installed),
        CheckRun("jax (GPU)", "cuda1", missing=_no_gpu_here),
    ),
    distributions=("jax", "jaxlib", *CUDA_PLUGINS),
    probe=doctor.probe_jax,
)

"""A backend is one module: the catalogue, its refusals, and a backend added from outside."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types

import pytest

from accelbench import backends, cli
from accelbench.backends import Backend, BackendError
from accelbench.backends import jax as jax_backend
from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.kernels import kernels
from accelbench.kernels.measure import measure_kernel
from accelbench.measuring import timers
from accelbench.platform import doctor
from accelbench.platform.devices import parse_device

from plugin_backends import TWIN, install

CPU1 = parse_device("cpu1")


def test_the_catalogue_lists_the_packages_backends_in_their_order():
    assert list(backends.catalogue()) == [
        "numpy",
        "numba",
        "numba-parallel",
        "torch",
        "cupy",
        "numba-cuda",
        "python",
        "jax",
    ]


def test_an_unknown_backend_is_refused_naming_the_known_ones():
    with pytest.raises(BackendError, match=r"unknown backend 'mlx'; the known backends: numpy, "):
        backends.named("mlx")


def test_a_kernel_is_never_measured_on_an_unknown_backend():
    exp = KernelExperiment("saxpy", "cpu1", "mlx", "float32", 8)
    with pytest.raises(BackendError, match="unknown backend 'mlx'"):
        measure_kernel(exp, KernelSettings(min_run_time=0.01, samples=3))


def test_each_gpu_backend_waits_for_its_device_with_its_own_library(monkeypatch):
    """CuPy's and Numba's queues are not torch's: torch.cuda.synchronize would return before
    their work is done, and the time read would be the launch's."""
    import torch
    from numba import cuda

    def cupy_wait():
        """CuPy's deviceSynchronize, standing in for CuPy."""

    fake_cupy = types.ModuleType("cupy")
    fake_cupy.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(deviceSynchronize=cupy_wait)
    )
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    assert backends.named("cupy").synchronizer(True) is cupy_wait
    assert backends.named("numba-cuda").synchronizer(True) is cuda.synchronize
    assert backends.named("torch").synchronizer(True) is torch.cuda.synchronize
    assert backends.named("cupy").synchronizer(False)() is None


def test_a_gpu_backend_that_names_no_wait_is_refused_rather_than_given_another_librarys():
    silent = Backend("silent", ("cuda",), timers.CUPY, lambda device, dtype: None)
    with pytest.raises(BackendError, match="'silent' names nothing that waits for its GPU"):
        silent.synchronizer(True)


def test_a_backend_timed_by_a_name_is_refused_when_declared():
    with pytest.raises(BackendError, match="'old': its timer is a str"):
        Backend("old", ("cpu",), "torch", lambda device, dtype: None)


def test_the_doctor_asks_each_package_backend_by_the_probe_it_declares():
    assert list(backends.probes().items()) == list(doctor.PROBES.items())


def test_the_doctor_inspects_an_installed_backend_that_declares_a_probe(monkeypatch, capsys):
    """`accelbench doctor` lists every backend of the catalogue that declares a probe, an
    installed one after the package's, each in its own lines."""
    report = doctor.BackendReport("numpy-twin", imported=True, version="numpy-twin 0.1")
    twin = Backend(
        "numpy-twin", ("cpu",), timers.TORCH, lambda device, dtype: None, probe=lambda gpu: report
    )
    known = backends.catalogue()
    monkeypatch.setattr(backends, "catalogue", lambda: {**known, twin.name: twin})
    asked = []

    def diagnose(*, probes, preload):
        asked.extend(probes)
        return doctor.Diagnosis(doctor.Driver(note="none"), [probes["numpy-twin"](None)], [])

    monkeypatch.setattr(doctor, "diagnose", diagnose)
    assert cli.main(["doctor"]) == 0
    assert asked == [*doctor.PROBES, "numpy-twin"]
    assert "numpy-twin: imports (numpy-twin 0.1)" in capsys.readouterr().out


MEASURE = """\
import json, sys
sys.path.insert(0, {site!r})
from accelbench import backends
from accelbench.families.kernel import KernelExperiment, KernelSettings, exclusion
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.records.record import load_record

exp = KernelExperiment("saxpy", "cpu1", "numpy-twin", "float32", 64)
settings = KernelSettings(seed=0, min_run_time=0.02, samples=5)
measurement.run(exp, settings, {output!r}, context=JobContext("test"))
record = load_record({output!r})
print(json.dumps({{
    "catalogue": list(backends.catalogue()),
    "exclusion": exclusion(exp),
    "status": record["status"],
    "reason": record["reason"],
    "measured_by": record["measured_by"],
    "passed": record["check"]["passed"],
}}))
"""


def test_an_installed_package_adds_a_backend_through_its_entry_point(tmp_path):
    """A distribution on sys.path names a backend module in the group accelbench.backends:
    the backend joins the catalogue after the package's, and a kernel written once against
    the array module it is given (saxpy) is checked and timed on it, by its own timer."""
    site = tmp_path / "site"
    install(site, "twinbackend", "0.1", TWIN, "twin")
    script = MEASURE.format(site=str(site), output=str(tmp_path / "record.json"))
    shown = json.loads(
        subprocess.run(
            [sys.executable, "-c", textwrap.dedent(script)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert shown["catalogue"][-1] == "numpy-twin"
    assert shown["exclusion"] is None
    assert shown["status"] == "ok", shown["reason"]
    assert shown["passed"] is True
    assert shown["measured_by"] == {
        "implementation": "accelbench.kernels.saxpy:numpy-twin",
        "timer": "the twin's own timer",
    }


def test_a_backend_declared_twice_is_refused_naming_both(tmp_path):
    site = tmp_path / "site"
    install(site, "twice", "1.0", TWIN.replace('"numpy-twin"', '"numpy"'), "numpy")
    script = f"import sys\nsys.path.insert(0, {str(site)!r})\n" + (
        "from accelbench import backends\nbackends.catalogue()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode != 0
    assert "backend 'numpy' is declared twice: by " in done.stderr
    assert "backends/numpy.py and by entry point numpy = twice of twice 1.0" in done.stderr


# ---- JAX --------------------------------------------------------------------------------

JAX_KERNELS = sorted(name for name, spec in kernels().items() if "jax" in spec.implementations)

JAX_RUNS = """\
import json, sys
from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.measuring.settings import ContentionSettings
from accelbench.records.record import load_record

if sys.argv[1] == "started":  # the job's process starts JAX before its runs fork
    from accelbench.backends import jax as jax_backend
    jax_backend.started(1)
settings = KernelSettings(min_run_time=0.01, samples=3, warmup_s=0.05, runs=2, budget_s=0,
                          contention=ContentionSettings(retries=0, max_host_slowdown=0))
found = {}
for kernel, dtype, size in json.loads(sys.argv[2]):
    exp = KernelExperiment(kernel, "cpu1", "jax", dtype, size)
    output = f"{sys.argv[3]}/{kernel}-{dtype}.json"
    measurement.run(exp, settings, output, context=JobContext("test"), fresh_processes=True)
    record = load_record(output)
    found[exp.id] = {key: record.get(key) for key in ("status", "reason", "check", "measured_by")}
    found[exp.id]["threads"] = (record.get("metrics") or {}).get("threads")
print("FOUND " + json.dumps(found))
"""


def measured_in_forked_runs(cells, tmp_path, parent: str = "imports") -> dict:
    """Records of kernel cells on jax/cpu1, each measured in two runs forked from a fresh
    process (`parent` "started": one that started JAX's client first)."""
    done = subprocess.run(
        [sys.executable, "-c", JAX_RUNS, parent, json.dumps(cells), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("FOUND "))
    return json.loads(line.removeprefix("FOUND "))


def test_every_jax_kernel_is_measured_in_forked_runs_and_checked_against_float64(tmp_path):
    """Each kernel JAX implements (two in float64 too), through the measurement a job
    makes: runs forked from a process that imported JAX (the job's preload), each starting
    its own client; the result checked against the float64 reference and in its own type
    (a float64 cell that JAX computed in float32 would fail), timed by JAX's own timer."""
    sizes = {"matmul": 48, "stencil": 33, "fft2d": 16}
    cells = [[name, "float32", sizes.get(name, 1000)] for name in JAX_KERNELS]
    cells += [[name, "float64", sizes.get(name, 1000)] for name in ("matmul", "fft1d")]
    found = measured_in_forked_runs(cells, tmp_path)
    assert len(found) == len(cells) and {"matmul", "saxpy", "reduction"} <= set(JAX_KERNELS)
    for exp_id, record in found.items():
        assert record["status"] == "ok", (exp_id, record["reason"])
        check = record["check"]
        assert check["passed"] and check["reference"] == "numpy float64", exp_id
        assert check["relative_error"] <= check["tolerance"]
        assert record["measured_by"]["timer"] == backends.named("jax").timer.description
        assert record["measured_by"]["implementation"].endswith(":jax")
        assert record["threads"]["value"] == 1


def test_a_run_forked_after_jax_started_is_unavailable_not_hung(tmp_path):
    """XLA's threads do not survive a fork: a child of a process whose client started would
    wait forever on them. Its run says so instead."""
    found = measured_in_forked_runs([["saxpy", "float32", 1000]], tmp_path, parent="started")
    (record,) = found.values()
    assert record["status"] == "unavailable"
    assert (
        "which this run was forked from: XLA's threads do not survive a fork" in (record["reason"])
    )


def test_jax_is_unavailable_saying_so_where_it_is_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # `import jax` fails, as without it
    jax = backends.named("jax")
    for device in ("cpu1", "cuda1"):
        reason = jax.unavailable_reason(parse_device(device), "float32")
        assert reason == "JAX is not installed (No module named 'jax')"
    outcome = measure_kernel(
        KernelExperiment("saxpy", "cpu1", "jax", "float32", 8),
        KernelSettings(min_run_time=0.01, samples=3),
    )
    assert (outcome.status, outcome.reason) == ("unavailable", jax.unavailable_reason(CPU1))


def test_jax_on_a_gpu_without_a_cuda_enabled_jaxlib_is_unavailable_saying_so(monkeypatch):
    monkeypatch.setattr(jax_backend, "cuda_plugin", lambda: None)
    reason = backends.named("jax").unavailable_reason(parse_device("cuda1"), "float32")
    assert reason.startswith("no CUDA-enabled jaxlib: jaxlib's CUDA plugin comes with")


def test_a_jax_client_started_for_one_thread_count_refuses_another(monkeypatch):
    """XLA cannot resize its pool: a process that started JAX for cpu1 does not measure cpu2."""
    monkeypatch.setattr(jax_backend, "_started", jax_backend.Started(os.getpid(), 1))
    assert backends.named("jax").unavailable_reason(CPU1) is None
    reason = backends.named("jax").unavailable_reason(parse_device("cpu2"))
    assert reason == (
        "JAX's client in this process was started for a CPU run on 1 thread(s), "
        "not for a CPU run on 2 thread(s)"
    )


def test_jax_waits_for_its_own_results_and_never_for_torchs_device(monkeypatch):
    """JAX is asynchronous on the CPU too: its calls wait for their results, its timer reads
    the host clock around them, and nothing asks torch to synchronise."""
    import torch

    def refuse():
        raise AssertionError("torch.cuda.synchronize asked for a JAX measurement")

    monkeypatch.setattr(torch.cuda, "synchronize", refuse)
    jax = backends.named("jax")
    assert jax.compiles and jax.timer not in (timers.TORCH, timers.CUPY, timers.CUDA_EVENTS)
    calls = []
    settings = KernelSettings(min_run_time=0.01, samples=3)
    timed = jax.timer.samples(lambda: calls.append(1), 1, settings, "")
    assert len(timed.samples) == 3 and calls


POOL = """\
import os
from accelbench.backends import jax as jax_backend
from accelbench.platform.devices import cpu_threads, parse_device

with cpu_threads(parse_device("cpu1")):
    jax_backend.started(1)
    names = [open(f"/proc/self/task/{task}/comm").read().strip()
             for task in os.listdir("/proc/self/task")]
    print(len(os.sched_getaffinity(0)), names.count("tf_XLAEigen"))
"""


def test_a_cpu1_run_starts_xla_with_a_pool_of_one_thread_on_one_cpu():
    """XLA sizes its CPU pool from the CPUs the process may run on when its client starts:
    a run starts it inside devices.cpu_threads, so a cpu1 cell's pool has one thread."""
    done = subprocess.run([sys.executable, "-c", POOL], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["1", "1"]

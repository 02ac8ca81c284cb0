"""A backend is one module: the catalogue, its refusals, and a backend added from outside."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types

import pytest

from accelbench import backends
from accelbench.backends import Backend, BackendError
from accelbench.families.kernel import KernelExperiment
from accelbench.kernels.measure import measure_kernel
from accelbench.measuring import timers

from plugin_backends import TWIN, install


def test_the_catalogue_lists_the_packages_backends_in_their_order():
    assert list(backends.catalogue()) == [
        "numpy",
        "numba",
        "numba-parallel",
        "torch",
        "cupy",
        "numba-cuda",
        "python",
    ]


def test_an_unknown_backend_is_refused_naming_the_known_ones():
    with pytest.raises(BackendError, match=r"unknown backend 'jax'; the known backends: numpy, "):
        backends.named("jax")


def test_a_kernel_is_never_measured_on_an_unknown_backend():
    exp = KernelExperiment("saxpy", "cpu1", "jax", "float32", 8)
    with pytest.raises(BackendError, match="unknown backend 'jax'"):
        measure_kernel(exp, {"seed": 0, "min_run_time": 0.01, "samples": 3})


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


MEASURE = """\
import json, sys
sys.path.insert(0, {site!r})
from accelbench import backends
from accelbench.families.kernel import KernelExperiment, exclusion
from accelbench.job import measurement
from accelbench.records.record import load_record

exp = KernelExperiment("saxpy", "cpu1", "numpy-twin", "float32", 64)
settings = {{"seed": 0, "min_run_time": 0.02, "samples": 5, "config_hash": "test"}}
measurement.run(exp, settings, {output!r})
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

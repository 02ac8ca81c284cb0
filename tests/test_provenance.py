"""What a record says about where it was measured: the GPUs as CUDA numbers them."""

from __future__ import annotations

import subprocess

import torch

from accelbench.platform import provenance


class FakeUuid:
    """torch's _CUuuid: its text is the UUID without NVML's "GPU-" prefix."""

    def __init__(self, text):
        self.text = text

    def __str__(self):
        return self.text


class FakeProperties:
    """What torch reads of a device here: its UUID, and its compute capability (cuDNN)."""

    def __init__(self, uuid):
        self.uuid = FakeUuid(uuid)
        self.major, self.minor = 9, 0


def test_the_accelerator_lists_each_cuda_device_with_its_uuid(monkeypatch):
    uuids = ["58a6b4b0-1111-2222-3333-444455556666", "9f00aa11-7777-8888-9999-000011112222"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: f"NVIDIA H100 ({index})")
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda index: FakeProperties(uuids[index])
    )
    monkeypatch.setattr(
        subprocess,
        "run",
        lambda *args, **kwargs: subprocess.CompletedProcess(args, 0, stdout="580.65.06\n"),
    )
    found = provenance.gpu_info()
    assert found["gpus"] == ["NVIDIA H100 (0)", "NVIDIA H100 (1)"]
    assert found["uuids"] == uuids
    assert found["driver"] == "580.65.06"


def test_without_a_gpu_the_accelerator_lists_none(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    found = provenance.gpu_info()
    assert found["gpus"] == [] and found["uuids"] == []


def config_vars(monkeypatch, **values):
    """sysconfig's build variables as a build with these values would give them."""
    monkeypatch.setattr(provenance.sysconfig, "get_config_var", values.get)


def test_a_pyenv_build_on_a_shared_libpython_is_told_from_the_distributions(monkeypatch, tmp_path):
    """Two builds of 3.11 on one machine ran a Python loop 35% apart: the record says which."""
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f10 r-xp 0 08:01 42 /root/.pyenv/versions/3.11.7/lib/libpython3.11.so\n")
    config_vars(
        monkeypatch,
        Py_ENABLE_SHARED=1,
        CONFIG_ARGS="'--prefix=/root/.pyenv/versions/3.11.7' '--enable-shared' 'LDFLAGS=-L/x'",
    )
    pyenv = provenance.python_build(maps)
    assert pyenv["configured_shared"] is True and pyenv["libpython_loaded"] is True
    assert pyenv["configured_optimizations"] is False and pyenv["configured_lto"] is False
    maps.write_text("5600-5610 r-xp 0 08:01 7 /usr/bin/python3.11\n")
    config_vars(
        monkeypatch,
        Py_ENABLE_SHARED=0,
        CONFIG_ARGS="'--enable-optimizations' '--with-lto=full' 'CFLAGS=-O3 -g'",
    )
    optimised = provenance.python_build(maps)
    assert optimised["configured_shared"] is False and optimised["libpython_loaded"] is False
    assert optimised["configured_optimizations"] is True and optimised["configured_lto"] is True


def test_a_build_that_does_not_tell_how_it_was_built_leaves_it_null(monkeypatch, tmp_path):
    config_vars(monkeypatch)  # no CONFIG_ARGS, no Py_ENABLE_SHARED (Windows, some builds)
    found = provenance.python_build(tmp_path / "no-maps")
    assert found["configured_shared"] is None and found["configured_optimizations"] is None
    assert found["libpython_loaded"] is None
    assert found["implementation"] and found["compiler"]


def test_the_blas_in_use_is_named_with_its_version_architecture_and_threads():
    import numpy  # noqa: F401  (its BLAS is then loaded)

    found = provenance.blas_libraries()
    assert found and all(library["internal_api"] for library in found)
    openblas = [library for library in found if library["internal_api"] == "openblas"]
    for library in openblas:  # OpenBLAS says which kernels it chose for this CPU
        assert library["architecture"] and library["version"] and library["num_threads"] >= 1


def test_a_blas_threadpoolctl_cannot_read_leaves_it_null(monkeypatch):
    import threadpoolctl

    def unreadable():
        raise OSError("cannot read the library")

    monkeypatch.setattr(threadpoolctl, "threadpool_info", unreadable)
    assert provenance.blas_libraries() is None


def test_a_record_names_the_libraries_of_every_backend_and_the_training_and_workflow():
    """The backends declare their distributions (Backend.distributions); a record names
    them, and torchvision and Snakemake besides, installed or not."""
    from accelbench import backends

    assert set(provenance.library_versions(backends.distributions())) == {
        *("numpy", "numba", "torch", "torchvision", "cupy-cuda12x", "cupy-cuda13x"),
        *("numba-cuda", "jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin"),
        *("pandas", "snakemake", "polars", "scikit-learn", "networkx"),
        *("cudf-cu12", "cudf-cu13", "cuml-cu12", "cuml-cu13", "cugraph-cu12", "cugraph-cu13"),
    }


def test_the_provenance_types_have_the_keys_of_the_record_schemas_provenance():
    from accelbench.records.record import record_schema

    schema = record_schema()["properties"]["provenance"]["properties"]
    assert set(provenance.Provenance.__annotations__) == set(schema)
    parts = {
        "cpu_topology": provenance.CpuTopology,
        "python_build": provenance.PythonBuild,
        "accelerator": provenance.Accelerator,
        "git": provenance.GitState,
        "slurm": provenance.SlurmContext,
    }
    for key, typed in parts.items():
        assert set(typed.__annotations__) == set(schema[key]["properties"]), key
    blas = schema["blas"]["items"]["properties"]
    assert set(provenance.BlasLibrary.__annotations__) == set(blas)

"""What every registered kernel, data science workload and model promises the rest of the code.

The contracts live in the package (accelbench.contracts), where `accelbench check` runs them
on the user's units; here they run over every built-in unit (each a test case of its own).
The last tests plant broken units and see the checks name each break, so a contract that
stops checking anything fails too.
"""

from __future__ import annotations

import dataclasses
import sys
import types

import numpy as np
import pytest
import torch

from accelbench import contracts, registry
from accelbench.backends import BackendError
from accelbench.backends import catalogue as backend_catalogue
from accelbench.backends.libraries import DATASCI_BACKENDS
from accelbench.datasci import workloads
from accelbench.kernels import kernels
from accelbench.train.models import models, resolve_options


def planted(spec, module: str = "planted") -> registry.Unit:
    """A unit that no module declares, for the checks to judge."""
    return registry.Unit(spec, module, ("planted.py",), "planted", "0" * 16)


def texts(found) -> list[str]:
    return [f"{at}: {text}" for at, text in found]


@pytest.mark.parametrize("name", [*backend_catalogue(), *DATASCI_BACKENDS])
def test_every_backend_names_devices_and_a_timer_the_measurement_knows(name):
    assert contracts.backend_problems(backend_catalogue().get(name) or DATASCI_BACKENDS[name]) == []


@pytest.mark.parametrize("name", list(kernels()))
def test_every_kernel_runs_where_it_says_on_known_backends_and_dtypes(name):
    assert contracts.kernel_problems(kernels()[name]) == []


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        (name, dtype)
        for name, spec in kernels().items()
        for dtype in contracts.computed_dtypes(spec)
    ],
)
def test_every_kernel_has_a_float64_reference_its_check_accepts_and_poison_fails(name, dtype):
    assert contracts.reference_problems(kernels()[name], dtype) == []


@pytest.mark.parametrize("name", list(workloads()))
def test_every_workload_has_a_cpu_and_a_gpu_library_and_a_result_path(name):
    unit = registry.units("datasci")[name]
    assert contracts.workload_problems(unit.spec, unit.module) == []


@pytest.mark.parametrize("name", list(workloads()))
def test_every_workload_reference_is_reproducible_from_its_seed(name):
    assert contracts.reproducibility_problems(workloads()[name]) == []


@pytest.mark.parametrize("name", list(models()))
def test_every_model_is_planned_from_options_it_can_resolve(name):
    assert contracts.model_problems(models()[name]) == []


@pytest.mark.parametrize("name", list(models()))
def test_every_model_trains_a_step_on_batches_split_by_sample(name):
    spec = models()[name]
    assert contracts.batch_problems(spec, resolve_options(spec, spec.tiny_options)) == []


@pytest.mark.parametrize("name", [name for name, spec in models().items() if spec.min_image_size])
def test_a_model_trains_on_the_smallest_image_the_grid_admits(name):
    spec = models()[name]
    options = resolve_options(spec, {**spec.tiny_options, "image_size": spec.min_image_size})
    assert contracts.batch_problems(spec, options) == []


# ---- the checks themselves ------------------------------------------------------------------


def test_a_backend_on_an_unknown_device_or_timer_is_named():
    numpy = backend_catalogue()["numpy"]
    broken = dataclasses.replace(numpy, name="x/y", device_kinds=("tpu",))
    problems = "\n".join(contracts.backend_problems(broken))
    assert "backend 'x/y': a result path holds it as one part" in problems
    assert "device kind 'tpu'" in problems
    assert contracts.backend_problems(numpy) == []
    # A timer named by a string, as backends once were, would fall back to another's.
    with pytest.raises(BackendError, match="'x': its timer is a str, not an accelbench"):
        dataclasses.replace(numpy, name="x", timer="stopwatch")


def test_a_kernel_that_breaks_the_contract_is_named_for_each_break_with_its_field(monkeypatch):
    spec = kernels()["saxpy"]
    broken = dataclasses.replace(
        spec,
        name="bad/name",
        implementations={"fortran": None, "cupy": None, "python": None},
        half_dtypes={"numba": ("float16",), "cupy": ("float8",)},
        device_kinds=("cpu",),
        naive_size_limit=0,
    )
    monkeypatch.setitem(kernels(), broken.name, broken)
    problems = "\n".join(texts(contracts.kernel_problems(broken)))
    assert "implementations.fortran: backend 'fortran' is not one of" in problems
    assert "device_kinds: cupy runs on ('cuda',), the kernel on ('cpu',) only" in problems
    assert "half_dtypes: cupy computes in ['float8'], no grid dtype" in problems
    assert "naive_size_limit: naive python has no positive limit" in problems
    assert "half_dtypes: 16-bit dtypes for numba" in problems
    assert "name: " in problems and "does not name" in problems  # the '/' splits its path
    gpu_without_code = dataclasses.replace(
        spec,
        name="gpu-less",
        implementations={"numpy": None},
        half_dtypes={},
        device_kinds=("cpu", "cuda"),
    )
    monkeypatch.setitem(kernels(), gpu_without_code.name, gpu_without_code)
    assert texts(contracts.kernel_problems(gpu_without_code)) == [
        "device_kinds: declares cuda devices, no implementation runs there"
    ]


def test_a_kernel_whose_reference_or_check_is_wrong_is_named():
    spec = kernels()["saxpy"]
    in_single = dataclasses.replace(
        spec, reference=lambda *inputs: spec.reference(*inputs).astype(np.complex64)
    )
    assert texts(contracts.reference_problems(in_single, "float32")) == [
        "reference: in float32: the reference is complex64, not float64"
    ]
    accepts_anything = dataclasses.replace(spec, error=lambda result, reference: 0.0)
    assert texts(contracts.reference_problems(accepts_anything, "float64")) == [
        "error: in float64: a NaN output passes the check",
        "error: in float64: an output of another shape passes the check",
    ]
    refuses_everything = dataclasses.replace(spec, tolerance=lambda n, dtype: -1.0)
    assert "tolerance: in float64: the reference itself fails the check" in texts(
        contracts.reference_problems(refuses_everything, "float64")
    )


def test_a_workload_that_breaks_the_contract_is_named(monkeypatch):
    unit = registry.units("datasci")["sort"]
    spec = unit.spec
    cpu_backend, cpu_code = next(
        (backend, prepare)
        for backend, prepare in spec.implementations.items()
        if "cpu" in DATASCI_BACKENDS[backend].device_kinds
    )

    def foreign(inputs, device):
        return cpu_code(inputs, device)

    foreign.__module__ = "somewhere.else"
    broken = dataclasses.replace(
        spec,
        name="cpu only",
        item="",
        implementations={cpu_backend: cpu_code, "dask": foreign},
    )
    monkeypatch.setitem(workloads(), broken.name, broken)
    problems = "\n".join(texts(contracts.workload_problems(broken, unit.module)))
    assert "implementations.dask: backend 'dask' is not one of" in problems
    assert "implementations: no library on cuda" in problems
    assert "its code is in accelbench.datasci.sort, somewhere.else, not in" in problems
    assert "item: empty" in problems
    slashed = dataclasses.replace(spec, name="a/b")
    monkeypatch.setitem(workloads(), slashed.name, slashed)
    assert any("does not name" in text for _, text in contracts.workload_problems(slashed, "x"))


def test_a_workload_with_unseeded_inputs_or_a_lax_check_is_named():
    spec = workloads()["sort"]
    draws = iter(range(1, 100))
    unseeded = dataclasses.replace(
        spec, make_inputs=lambda rng, n: spec.make_inputs(np.random.default_rng(next(draws)), n)
    )
    assert texts(contracts.reproducibility_problems(unseeded)) == [
        "make_inputs: the same seed gives another reference"
    ]
    lax = dataclasses.replace(spec, error=lambda result, reference: 0.0)
    assert texts(contracts.reproducibility_problems(lax)) == [
        "error: the poisoned result passes the check"
    ]


def toy_model_module(monkeypatch, name: str, **overrides) -> None:
    """A model module under accelbench.train.models: a linear classifier on 4 features,
    with `overrides` replacing its parts."""

    def build(options):
        return torch.nn.Linear(4, 2)

    def make_batch(generator, batch, options):
        features = torch.randn(batch, 4, generator=generator)
        return features, (features[:, 0] > 0).long()

    module = types.ModuleType(f"accelbench.train.models.{name}")
    vars(module).update(build=build, make_batch=make_batch, loss=torch.nn.CrossEntropyLoss)
    vars(module).update(overrides)
    monkeypatch.setitem(sys.modules, module.__name__, module)


def test_a_model_that_breaks_the_contract_is_named(monkeypatch):
    spec = next(iter(models().values()))
    toy_model_module(monkeypatch, "toy")
    broken = dataclasses.replace(
        spec,
        name="toy",
        module=None,
        default_batch=0,
        options={"image_size": 8},
        tiny_options={"width": 3},
        follows_image_size=True,
        min_image_size=16,
        dataset="imagenet-22k",
    )
    monkeypatch.setitem(models(), broken.name, broken)
    problems = "\n".join(texts(contracts.model_problems(broken)))
    assert "options.lr: None" in problems
    assert "default_batch: 0 is not a positive integer" in problems
    assert "tiny_options: train.model_options.toy.width: unknown option" in problems
    assert "dataset: 'imagenet-22k' is not one of" in problems
    assert "options: image_size below its min_image_size" in problems
    assert "batch '0' must be a positive integer" in problems
    sound = dataclasses.replace(broken, default_batch=2, options={"lr": 0.1}, tiny_options={})
    sound = dataclasses.replace(sound, follows_image_size=False, min_image_size=None, dataset=None)
    monkeypatch.setitem(models(), sound.name, sound)
    assert contracts.model_problems(sound) == []
    assert contracts.batch_problems(sound, {"lr": 0.1}) == []


def test_a_model_whose_batches_or_steps_break_the_contract_is_named(monkeypatch):
    spec = dataclasses.replace(next(iter(models().values())), name="toy", module=None)
    options = {"lr": 0.1}

    def samples_last(generator, batch, options):
        features = torch.randn(3, batch, generator=generator)  # 3 features on dim 0
        return features, torch.zeros(batch, dtype=torch.long)

    toy_model_module(monkeypatch, "toy", make_batch=samples_last)
    assert texts(contracts.batch_problems(spec, options))[0].startswith(
        "make_batch: a batch part is not 4 samples"
    )

    def unseeded(generator, batch, options):
        return torch.randn(batch, 4), torch.zeros(batch, dtype=torch.long)

    toy_model_module(monkeypatch, "toy", make_batch=unseeded)
    assert texts(contracts.batch_problems(spec, options)) == [
        "make_batch: one seed gives two batches"
    ]

    def pooled(options):
        return torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Flatten(0))

    toy_model_module(monkeypatch, "toy", build=pooled)
    assert texts(contracts.batch_problems(spec, options)) == ["build: output (8,) is not 4 samples"]

    def diverged(step, inputs, targets):
        return torch.tensor(float("nan"))

    toy_model_module(monkeypatch, "toy", train_step=diverged)
    assert texts(contracts.batch_problems(spec, options)) == [
        "train_step: a step returned tensor(nan), not a finite detached scalar"
    ]


def test_a_problem_reads_file_unit_field_and_what_is_wrong():
    checked = contracts.Checked("kernels", planted(kernels()["saxpy"]))
    checked.add([("tolerance", "in float32: the reference itself fails the check")])
    assert [str(problem) for problem in checked.problems] == [
        "planted.py: kernel saxpy: tolerance: in float32: the reference itself fails the check"
    ]

"""What every registered kernel, data science workload and model promises the rest of the code.

The catalogues grow by adding a module, so no test here names a member: each contract is
checked over whatever is registered (each unit a test case of its own), by a function that
lists what a unit breaks. The last tests register broken units and see those functions
name each break, so a contract that stops checking anything fails too.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import types

import numpy as np
import pytest
import torch

from accelbench import grid
from accelbench.backends import BACKENDS, DATASCI_BACKENDS
from accelbench.datasci import POISONED, workloads
from accelbench.devices import DeviceError, parse_device
from accelbench.families import datasci as datasci_family
from accelbench.families import kernel as kernel_family
from accelbench.families import train as train_family
from accelbench.families.datasci import DatasciExperiment
from accelbench.families.kernel import KernelExperiment
from accelbench.families.train import TrainExperiment
from accelbench.kernels import host_dtype, kernels
from accelbench.timing import TIMERS
from accelbench.train.datasets import DATASETS
from accelbench.train.models import (
    OptionError,
    call,
    models,
    new_step,
    resolve_options,
    supervised_step,
)

SMALL = 8  # a problem size every kernel accepts
WORKLOAD_SIZE = 300  # rows, samples or nodes: enough for every workload's check
BATCH = 4  # samples of a model's batch: even, so a data-parallel split leaves no remainder


# ---- backends ---------------------------------------------------------------------------


def backend_problems(backend) -> list[str]:
    """A backend runs on device kinds a device string can name, timed by a known timer."""
    problems = []
    if "/" in backend.name:
        problems.append(f"backend {backend.name!r}: a result path holds it as one part")
    for kind in backend.device_kinds:
        try:
            parse_device(f"{kind}1")
        except DeviceError as err:
            problems.append(f"backend {backend.name!r}: device kind {kind!r}: {err}")
    if backend.timer not in TIMERS:
        problems.append(f"backend {backend.name!r}: timer {backend.timer!r} is not in TIMERS")
    return problems


@pytest.mark.parametrize("name", [*BACKENDS, *DATASCI_BACKENDS])
def test_every_backend_names_devices_and_a_timer_the_measurement_knows(name):
    assert backend_problems(BACKENDS.get(name) or DATASCI_BACKENDS[name]) == []


# ---- result paths -----------------------------------------------------------------------


def path_problems(exp, parse) -> list[str]:
    """The experiment's result path names it, part by part, and `parse` accepts its parts."""
    where = grid.cell_of_path(exp.path)
    if where is None or where[1] != exp.id:
        return [f"{exp.path} does not name {exp} (a name must be one path part)"]
    try:  # as a record's id is read back, and as a target's wildcards are checked
        found = {grid.experiment_of_id(exp.id), parse(where[2])}
    except grid.GridError as err:
        return [f"{exp.path}: {err}"]
    return [] if found == {exp} else [f"{exp.path} reads back as {found}"]


def first_cell(implementations, backends, kinds) -> tuple[str, str] | None:
    """(device, backend) of the first implementation, on one unit of a kind in `kinds`."""
    for backend in implementations:
        for kind in backends[backend].device_kinds if backend in backends else ():
            if kind in kinds:
                return f"{kind}1", backend
    return None


# ---- kernels ----------------------------------------------------------------------------


def kernel_problems(name: str) -> list[str]:
    """What the registered kernel `name` breaks of what the grid and the measurement assume."""
    spec, problems = kernels()[name], []
    implemented = [backend for backend in spec.implementations if backend in BACKENDS]
    problems += [
        f"{name}: backend {backend!r} is not one of {', '.join(BACKENDS)}"
        for backend in spec.implementations
        if backend not in BACKENDS
    ]
    for backend in implemented:
        if not set(BACKENDS[backend].device_kinds) & set(spec.device_kinds):
            problems.append(
                f"{name}: {backend} runs on {BACKENDS[backend].device_kinds}, "
                f"the kernel on {spec.device_kinds} only: the grid never runs it"
            )
        if unknown := set(spec.dtypes(backend)) - set(kernel_family.DTYPES):
            problems.append(f"{name}: {backend} computes in {sorted(unknown)}, no grid dtype")
        if BACKENDS[backend].naive and spec.naive_size_limit <= 0:
            problems.append(f"{name}: naive {backend} has no positive naive_size_limit")
    for kind in spec.device_kinds:
        if not any(kind in BACKENDS[backend].device_kinds for backend in implemented):
            problems.append(f"{name}: declares {kind} devices, no implementation runs there")
    problems += [
        f"{name}: 16-bit dtypes for {backend}, which it has no implementation on"
        for backend in spec.half_dtypes
        if backend not in spec.implementations
    ]
    if cell := first_cell(implemented, BACKENDS, spec.device_kinds):
        exp = KernelExperiment(name, cell[0], cell[1], "float64", SMALL)
        problems += path_problems(exp, kernel_family.parse)
    return problems


def computed_dtypes(spec) -> list[str]:
    """Every dtype some backend computes this kernel in."""
    return sorted({dtype for backend in spec.implementations for dtype in spec.dtypes(backend)})


def reference_problems(spec, dtype_name: str) -> list[str]:
    """The reference is float64 (complex128), it passes its own check in the output dtype,
    and the check refuses a poisoned (NaN) output and one of another shape."""
    dtype = host_dtype(dtype_name)
    inputs = spec.make_inputs(np.random.default_rng([SMALL, 1]), SMALL, dtype)
    reference = np.asarray(spec.reference(*inputs))
    label = f"{spec.name} in {dtype_name}"
    if reference.dtype not in (np.float64, np.complex128):
        return [f"{label}: reference in {reference.dtype}, not float64"]
    tolerance, problems = spec.tolerance(SMALL, dtype), []
    if not 0 <= tolerance < math.inf:
        problems.append(f"{label}: tolerance {tolerance}")
    if spec.error(reference.astype(spec.output_dtype(dtype)), reference) > tolerance:
        problems.append(f"{label}: the reference itself fails the check")
    poisoned = np.full(reference.shape, np.nan, dtype=spec.output_dtype(dtype))
    if not spec.error(poisoned, reference) > tolerance:
        problems.append(f"{label}: a NaN output passes the check")
    if not spec.error(reference.ravel()[1:], reference) > tolerance:
        problems.append(f"{label}: an output of another shape passes the check")
    return problems


@pytest.mark.parametrize("name", list(kernels()))
def test_every_kernel_runs_where_it_says_on_known_backends_and_dtypes(name):
    assert kernel_problems(name) == []


@pytest.mark.parametrize(
    ("name", "dtype"),
    [(name, dtype) for name, spec in kernels().items() for dtype in computed_dtypes(spec)],
)
def test_every_kernel_has_a_float64_reference_its_check_accepts_and_poison_fails(name, dtype):
    assert reference_problems(kernels()[name], dtype) == []


# ---- data science workloads ---------------------------------------------------------------

# A workload compares its libraries across these: a CPU and a GPU one at least.
DATASCI_DEVICE_KINDS = {
    kind for backend in DATASCI_BACKENDS.values() for kind in backend.device_kinds
}


def workload_problems(name: str) -> list[str]:
    """What the registered workload `name` breaks of what the grid and the records assume."""
    spec, problems = workloads()[name], []
    problems += [
        f"{name}: backend {backend!r} is not one of {', '.join(DATASCI_BACKENDS)}"
        for backend in spec.implementations
        if backend not in DATASCI_BACKENDS
    ]
    kinds = {
        kind
        for backend in spec.implementations
        if backend in DATASCI_BACKENDS
        for kind in DATASCI_BACKENDS[backend].device_kinds
    }
    problems += [
        f"{name}: no library on {kind}: nothing to compare"
        for kind in DATASCI_DEVICE_KINDS
        if kind not in kinds
    ]
    modules = {prepare.__module__ for prepare in spec.implementations.values()}
    if len(modules) != 1 or not modules.pop().startswith("accelbench.datasci."):
        problems.append(f"{name}: a record names its code as one workload module, not these")
    if not spec.item:
        problems.append(f"{name}: no item: a throughput counts nothing")
    if cell := first_cell(spec.implementations, DATASCI_BACKENDS, kinds):
        exp = DatasciExperiment(name, cell[0], cell[1], WORKLOAD_SIZE)
        problems += path_problems(exp, datasci_family.parse)
    return problems


def reproducibility_problems(spec) -> list[str]:
    """One seed gives one reference (a rerun checks against the same), and the poisoned
    result fails the check."""
    first, again = (
        spec.reference(*spec.make_inputs(np.random.default_rng(7), WORKLOAD_SIZE)) for _ in range(2)
    )
    tolerance, problems = spec.tolerance(WORKLOAD_SIZE), []
    if not 0 <= tolerance < math.inf:
        problems.append(f"{spec.name}: tolerance {tolerance}")
    if spec.error(again, first) > tolerance:
        problems.append(f"{spec.name}: the same seed gives another reference")
    if not spec.error(POISONED, first) > tolerance:
        problems.append(f"{spec.name}: the poisoned result passes the check")
    return problems


@pytest.mark.parametrize("name", list(workloads()))
def test_every_workload_has_a_cpu_and_a_gpu_library_and_a_result_path(name):
    assert workload_problems(name) == []


@pytest.mark.parametrize("name", list(workloads()))
def test_every_workload_reference_is_reproducible_from_its_seed(name):
    assert reproducibility_problems(workloads()[name]) == []


# ---- models -----------------------------------------------------------------------------


def model_problems(name: str) -> list[str]:
    """What the registered model `name` breaks of what planning and training assume."""
    spec, problems = models()[name], []
    lr = spec.options.get("lr")
    if isinstance(lr, bool) or not isinstance(lr, int | float) or not lr > 0:
        problems.append(f"{name}: option lr is {lr!r}; training reads a positive rate")
    if isinstance(spec.default_batch, bool) or not (
        isinstance(spec.default_batch, int) and spec.default_batch > 0
    ):
        problems.append(f"{name}: default_batch {spec.default_batch!r}")
    try:
        tiny = resolve_options(spec, spec.tiny_options)
    except OptionError as err:
        problems.append(f"{name}: tiny_options: {err}")
        tiny = {}
    if spec.dataset is not None and spec.dataset not in DATASETS:
        problems.append(f"{name}: dataset {spec.dataset!r} is not one of {', '.join(DATASETS)}")
    if (spec.follows_image_size or spec.min_image_size) and "image_size" not in spec.options:
        problems.append(f"{name}: takes an image size but has no image_size option")
    elif spec.min_image_size:
        for which, options in (("default", spec.options), ("tiny", tiny)):
            if options.get("image_size", spec.min_image_size) < spec.min_image_size:
                problems.append(f"{name}: {which} image_size below its min_image_size")
    exp = TrainExperiment(name, "cpu1", "fp32", "single", spec.default_batch)
    return problems + path_problems(exp, train_family.parse)


def leaves(batch_part) -> list:
    """The tensors of a batch's inputs or targets (a tensor or nested tuples of them)."""
    if isinstance(batch_part, tuple):
        return [leaf for part in batch_part for leaf in leaves(part)]
    return [batch_part]


def batch_problems(spec, options) -> list[str]:
    """make_batch is a pair of tensors (or tuples of them) with the sample first, the same
    for one seed, and one training step on it gives a finite loss; a supervised model's
    output has the sample first too (DataParallel and the pipeline cut and join it there)."""
    name, problems = spec.name, []
    inputs, targets = spec.make_batch(torch.Generator().manual_seed(3), BATCH, options)
    again, _ = spec.make_batch(torch.Generator().manual_seed(3), BATCH, options)
    for leaf in leaves(inputs) + leaves(targets):
        if not isinstance(leaf, torch.Tensor) or leaf.ndim == 0 or len(leaf) != BATCH:
            problems.append(f"{name}: a batch part is not {BATCH} samples on dim 0: {leaf!r}")
    if not all(map(torch.equal, leaves(inputs), leaves(again))):
        problems.append(f"{name}: one seed gives two batches")
    if problems:
        return problems
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = spec.build(options)
        if spec.train_step is supervised_step:
            with torch.no_grad():
                output = call(model, inputs)
            if len(output) != BATCH:
                return [f"{name}: output {tuple(output.shape)} is not {BATCH} samples"]
        step = new_step(spec, spec.parts(model), options["lr"])
        loss = spec.train_step(step, inputs, targets)
    if loss.ndim != 0 or not torch.isfinite(loss) or loss.requires_grad:
        return [f"{name}: a step returned {loss!r}, not a finite detached scalar"]
    return []


@pytest.mark.parametrize("name", list(models()))
def test_every_model_is_planned_from_options_it_can_resolve(name):
    assert model_problems(name) == []


@pytest.mark.parametrize("name", list(models()))
def test_every_model_trains_a_step_on_batches_split_by_sample(name):
    spec = models()[name]
    assert batch_problems(spec, resolve_options(spec, spec.tiny_options)) == []


@pytest.mark.parametrize("name", [name for name, spec in models().items() if spec.min_image_size])
def test_a_model_trains_on_the_smallest_image_the_grid_admits(name):
    spec = models()[name]
    options = resolve_options(spec, {**spec.tiny_options, "image_size": spec.min_image_size})
    assert batch_problems(spec, options) == []


# ---- the checks themselves ------------------------------------------------------------------


def test_a_backend_on_an_unknown_device_or_timer_is_named():
    numpy = BACKENDS["numpy"]
    broken = dataclasses.replace(numpy, name="x/y", device_kinds=("tpu",), timer="stopwatch")
    problems = "\n".join(backend_problems(broken))
    assert "backend 'x/y': a result path holds it as one part" in problems
    assert "device kind 'tpu'" in problems
    assert "timer 'stopwatch' is not in TIMERS" in problems
    assert backend_problems(numpy) == []


def test_a_kernel_that_breaks_the_contract_is_named_for_each_break(monkeypatch):
    spec = next(iter(kernels().values()))
    broken = dataclasses.replace(
        spec,
        name="bad/name",
        implementations={"fortran": None, "cupy": None, "python": None},
        half_dtypes={"numba": ("float16",), "cupy": ("float8",)},
        device_kinds=("cpu",),
        naive_size_limit=0,
    )
    monkeypatch.setitem(kernels(), broken.name, broken)
    problems = "\n".join(kernel_problems(broken.name))
    assert "backend 'fortran' is not one of" in problems
    assert "cupy runs on ('cuda',), the kernel on ('cpu',) only" in problems
    assert "cupy computes in ['float8'], no grid dtype" in problems
    assert "naive python has no positive naive_size_limit" in problems
    assert "16-bit dtypes for numba" in problems
    assert "does not name" in problems  # the '/' splits its path
    gpu_without_code = dataclasses.replace(
        spec, name="gpu-less", implementations={"numpy": None}, device_kinds=("cpu", "cuda")
    )
    monkeypatch.setitem(kernels(), gpu_without_code.name, gpu_without_code)
    assert kernel_problems("gpu-less") == [
        "gpu-less: declares cuda devices, no implementation runs there"
    ]


def test_a_kernel_whose_reference_or_check_is_wrong_is_named():
    spec = next(iter(kernels().values()))
    in_single = dataclasses.replace(
        spec, reference=lambda *inputs: spec.reference(*inputs).astype(np.complex64)
    )
    assert reference_problems(in_single, "float32") == [
        f"{spec.name} in float32: reference in complex64, not float64"
    ]
    accepts_anything = dataclasses.replace(spec, error=lambda result, reference: 0.0)
    assert reference_problems(accepts_anything, "float64") == [
        f"{spec.name} in float64: a NaN output passes the check",
        f"{spec.name} in float64: an output of another shape passes the check",
    ]
    refuses_everything = dataclasses.replace(spec, tolerance=lambda n, dtype: -1.0)
    assert f"{spec.name} in float64: the reference itself fails the check" in (
        reference_problems(refuses_everything, "float64")
    )


def test_a_workload_that_breaks_the_contract_is_named(monkeypatch):
    spec = next(iter(workloads().values()))
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
    problems = "\n".join(workload_problems(broken.name))
    assert "backend 'dask' is not one of" in problems
    assert "no library on cuda" in problems
    assert "names its code as one workload module" in problems
    assert "no item" in problems
    slashed = dataclasses.replace(spec, name="a/b")
    monkeypatch.setitem(workloads(), slashed.name, slashed)
    assert any("does not name" in problem for problem in workload_problems("a/b"))


def test_a_workload_with_unseeded_inputs_or_a_lax_check_is_named():
    spec = next(iter(workloads().values()))
    draws = iter(range(1, 100))
    unseeded = dataclasses.replace(
        spec, make_inputs=lambda rng, n: spec.make_inputs(np.random.default_rng(next(draws)), n)
    )
    assert reproducibility_problems(unseeded) == [
        f"{spec.name}: the same seed gives another reference"
    ]
    lax = dataclasses.replace(spec, error=lambda result, reference: 0.0)
    assert reproducibility_problems(lax) == [f"{spec.name}: the poisoned result passes the check"]


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
    problems = "\n".join(model_problems(broken.name))
    assert "option lr is None" in problems
    assert "default_batch 0" in problems
    assert "tiny_options: train.model_options.toy.width: unknown option" in problems
    assert "dataset 'imagenet-22k' is not one of" in problems
    assert "default image_size below its min_image_size" in problems
    assert "batch '0' must be a positive integer" in problems
    sound = dataclasses.replace(broken, default_batch=2, options={"lr": 0.1}, tiny_options={})
    sound = dataclasses.replace(sound, follows_image_size=False, min_image_size=None, dataset=None)
    monkeypatch.setitem(models(), sound.name, sound)
    assert model_problems(sound.name) == []
    assert batch_problems(sound, {"lr": 0.1}) == []


def test_a_model_whose_batches_or_steps_break_the_contract_is_named(monkeypatch):
    spec = dataclasses.replace(next(iter(models().values())), name="toy", module=None)
    options = {"lr": 0.1}

    def samples_last(generator, batch, options):
        features = torch.randn(3, batch, generator=generator)  # 3 features on dim 0
        return features, torch.zeros(batch, dtype=torch.long)

    toy_model_module(monkeypatch, "toy", make_batch=samples_last)
    assert batch_problems(spec, options)[0].startswith("toy: a batch part is not 4 samples")

    def unseeded(generator, batch, options):
        return torch.randn(batch, 4), torch.zeros(batch, dtype=torch.long)

    toy_model_module(monkeypatch, "toy", make_batch=unseeded)
    assert batch_problems(spec, options) == ["toy: one seed gives two batches"]

    def pooled(options):
        return torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Flatten(0))

    toy_model_module(monkeypatch, "toy", build=pooled)
    assert batch_problems(spec, options) == ["toy: output (8,) is not 4 samples"]

    def diverged(step, inputs, targets):
        return torch.tensor(float("nan"))

    toy_model_module(monkeypatch, "toy", train_step=diverged)
    assert batch_problems(spec, options) == [
        "toy: a step returned tensor(nan), not a finite detached scalar"
    ]

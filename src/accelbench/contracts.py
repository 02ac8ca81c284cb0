"""What every kernel, data science workload and model promises the rest of the code.

The catalogues grow by adding a module (accelbench.registry), the package's or the user's,
so no check here names a member: each takes one unit and lists what it breaks, as a
Problem naming the unit's file and the field of its spec at fault. `check` runs them on
the units asked for (`accelbench check`; the tests run them over the built-ins), then one
verified run of each backend the unit declares that can run here: on the CPU as it is,
as each backend says (Backend.check_runs): CuPy's code with NumPy standing in
(accelbench.backends.cupy_stand_in), Numba-CUDA's under the CUDA simulator in a process of
its own (NUMBA_ENABLE_CUDASIM is read at import).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from accelbench import grid, registry
from accelbench.backends import catalogue as backend_catalogue
from accelbench.backends import named as backend_named
from accelbench.backends.libraries import DATASCI_BACKENDS
from accelbench.families import datasci as datasci_family
from accelbench.families import kernel as kernel_family
from accelbench.families import train as train_family
from accelbench.platform.devices import DeviceError, parse_device
from accelbench.train.datasets import DATASETS
from accelbench.train.models import (
    OptionError,
    call,
    new_step,
    resolve_options,
    supervised_step,
)

SMALL = 8  # a problem size every kernel accepts
WORKLOAD_SIZE = 300  # rows, samples or nodes: enough for every workload's check
BATCH = 4  # samples of a model's batch: even, so a data-parallel split leaves no remainder
# What a check finds: (the spec's field at fault, what is wrong).
Found = list[tuple[str, str]]


@dataclass(frozen=True)
class Problem:
    """One broken promise of one unit: its file, the unit, the field at fault and why."""

    file: str
    unit: str  # "kernel axpby"
    field: str
    text: str

    def __str__(self) -> str:
        return f"{self.file}: {self.unit}: {self.field}: {self.text}"


@dataclass
class Checked:
    """A unit's check: its problems, the backends that ran here and those that could not."""

    kind: str
    unit: registry.Unit
    problems: list[Problem] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{registry.KINDS[self.kind].what} {self.unit.name}"

    def add(self, found: Found) -> None:
        self.problems += [Problem(self.unit.file, self.label, at, text) for at, text in found]

    def report(self) -> list[str]:
        """What `accelbench check` prints of it: a line for the unit, what ran and what could
        not, then each problem with its file and field."""
        verdict = f"{len(self.problems)} problem(s)" if self.problems else "ok"
        where = self.unit.file
        if not where.startswith(self.unit.origin):  # a built-in, an entry point
            where = f"{where}, {self.unit.origin}"
        lines = [f"{self.label} ({where}): {verdict}"]
        if self.ran:
            lines.append(f"  ran here: {', '.join(self.ran)}")
        lines += [f"  not run here: {why}" for why in self.not_run]
        return lines + [f"  {problem}" for problem in self.problems]


# ---- backends ---------------------------------------------------------------------------


def backend_problems(backend) -> list[str]:
    """A backend runs on device kinds a device string can name (its timer, a Timer, it
    names as it is made: Backend refuses any other)."""
    problems = []
    if "/" in backend.name:
        problems.append(f"backend {backend.name!r}: a result path holds it as one part")
    for kind in backend.device_kinds:
        try:
            parse_device(f"{kind}1")
        except DeviceError as err:
            problems.append(f"backend {backend.name!r}: device kind {kind!r}: {err}")
    return problems


# ---- result paths -----------------------------------------------------------------------


def path_problems(exp, parse) -> Found:
    """The experiment's result path names it, part by part, and `parse` accepts its parts."""
    where = grid.cell_of_path(exp.path)
    if where is None or where[1] != exp.id:
        return [("name", f"{exp.path} does not name {exp} (a name must be one path part)")]
    try:  # as a record's id is read back, and as a target's wildcards are checked
        found = {grid.experiment_of_id(exp.id), parse(where[2])}
    except grid.GridError as err:
        return [("name", f"{exp.path}: {err}")]
    return [] if found == {exp} else [("name", f"{exp.path} reads back as {found}")]


def first_cell(implementations, backends, kinds) -> tuple[str, str] | None:
    """(device, backend) of the first implementation, on one unit of a kind in `kinds`."""
    for backend in implementations:
        for kind in backends[backend].device_kinds if backend in backends else ():
            if kind in kinds:
                return f"{kind}1", backend
    return None


# ---- kernels ----------------------------------------------------------------------------


def kernel_problems(spec) -> Found:
    """What a kernel breaks of what the grid and the measurement assume."""
    known = backend_catalogue()
    implemented = [backend for backend in spec.implementations if backend in known]
    found = [
        (f"implementations.{backend}", f"backend {backend!r} is not one of {', '.join(known)}")
        for backend in spec.implementations
        if backend not in known
    ]
    for backend in implemented:
        if not set(known[backend].device_kinds) & set(spec.device_kinds):
            found.append(
                (
                    "device_kinds",
                    f"{backend} runs on {known[backend].device_kinds}, "
                    f"the kernel on {spec.device_kinds} only: the grid never runs it",
                )
            )
        if unknown := set(spec.dtypes(backend)) - set(kernel_family.DTYPES):
            found.append(("half_dtypes", f"{backend} computes in {sorted(unknown)}, no grid dtype"))
        if known[backend].naive and spec.naive_size_limit <= 0:
            found.append(("naive_size_limit", f"naive {backend} has no positive limit"))
    for kind in spec.device_kinds:
        if not any(kind in known[backend].device_kinds for backend in implemented):
            found.append(("device_kinds", f"declares {kind} devices, no implementation runs there"))
    found += [
        ("half_dtypes", f"16-bit dtypes for {backend}, which it has no implementation on")
        for backend in spec.half_dtypes
        if backend not in spec.implementations
    ]
    if cell := first_cell(implemented, known, spec.device_kinds):
        exp = kernel_family.KernelExperiment(spec.name, cell[0], cell[1], "float64", SMALL)
        found += path_problems(exp, kernel_family.parse)
    return found


def computed_dtypes(spec) -> list[str]:
    """Every dtype some backend computes this kernel in."""
    return sorted({dtype for backend in spec.implementations for dtype in spec.dtypes(backend)})


def reference_problems(spec, dtype_name: str) -> Found:
    """The reference is float64 (complex128), it passes its own check in the output dtype,
    and the check refuses a poisoned (NaN) output and one of another shape."""
    from accelbench.kernels import host_dtype

    dtype = host_dtype(dtype_name)
    inputs = spec.make_inputs(np.random.default_rng([SMALL, 1]), SMALL, dtype)
    reference = np.asarray(spec.reference(*inputs))
    if reference.dtype not in (np.float64, np.complex128):
        return [("reference", f"in {dtype_name}: the reference is {reference.dtype}, not float64")]
    tolerance, found = spec.tolerance(SMALL, dtype), []
    if not 0 <= tolerance < math.inf:
        found.append(("tolerance", f"in {dtype_name}: {tolerance} is not a bound"))
    if spec.error(reference.astype(spec.output_dtype(dtype)), reference) > tolerance:
        found.append(("tolerance", f"in {dtype_name}: the reference itself fails the check"))
    poisoned = np.full(reference.shape, np.nan, dtype=spec.output_dtype(dtype))
    if not spec.error(poisoned, reference) > tolerance:
        found.append(("error", f"in {dtype_name}: a NaN output passes the check"))
    if not spec.error(reference.ravel()[1:], reference) > tolerance:
        found.append(("error", f"in {dtype_name}: an output of another shape passes the check"))
    return found


# ---- data science workloads ---------------------------------------------------------------

# A workload compares its libraries across these: a CPU and a GPU one at least.
DATASCI_DEVICE_KINDS = {
    kind for backend in DATASCI_BACKENDS.values() for kind in backend.device_kinds
}


def workload_problems(spec, module: str) -> Found:
    """What a workload, declared in `module`, breaks of what the grid and the records assume."""
    found = [
        (
            f"implementations.{backend}",
            f"backend {backend!r} is not one of {', '.join(DATASCI_BACKENDS)}",
        )
        for backend in spec.implementations
        if backend not in DATASCI_BACKENDS
    ]
    kinds = {
        kind
        for backend in spec.implementations
        if backend in DATASCI_BACKENDS
        for kind in DATASCI_BACKENDS[backend].device_kinds
    }
    found += [
        ("implementations", f"no library on {kind}: nothing to compare")
        for kind in sorted(DATASCI_DEVICE_KINDS - kinds)
    ]
    modules = {prepare.__module__ for prepare in spec.implementations.values()}
    if modules != {module}:
        found.append(
            (
                "implementations",
                f"its code is in {', '.join(sorted(modules))}, not in {module}: a record names "
                "its code as the workload's module",
            )
        )
    if not spec.item:
        found.append(("item", "empty: a throughput counts nothing"))
    if cell := first_cell(spec.implementations, DATASCI_BACKENDS, kinds):
        exp = datasci_family.DatasciExperiment(spec.name, cell[0], cell[1], WORKLOAD_SIZE)
        found += path_problems(exp, datasci_family.parse)
    return found


def reproducibility_problems(spec) -> Found:
    """One seed gives one reference (a rerun checks against the same), and the poisoned
    result fails the check."""
    from accelbench.datasci import POISONED

    first, again = (
        spec.reference(*spec.make_inputs(np.random.default_rng(7), WORKLOAD_SIZE)) for _ in range(2)
    )
    tolerance, found = spec.tolerance(WORKLOAD_SIZE), []
    if not 0 <= tolerance < math.inf:
        found.append(("tolerance", f"{tolerance} is not a bound"))
    if spec.error(again, first) > tolerance:
        found.append(("make_inputs", "the same seed gives another reference"))
    if not spec.error(POISONED, first) > tolerance:
        found.append(("error", "the poisoned result passes the check"))
    return found


# ---- models -----------------------------------------------------------------------------


def model_problems(spec) -> Found:
    """What a model breaks of what planning and training assume."""
    found: Found = []
    lr = spec.options.get("lr")
    if isinstance(lr, bool) or not isinstance(lr, int | float) or not lr > 0:
        found.append(("options.lr", f"{lr!r}; training reads a positive rate"))
    if isinstance(spec.default_batch, bool) or not (
        isinstance(spec.default_batch, int) and spec.default_batch > 0
    ):
        found.append(("default_batch", f"{spec.default_batch!r} is not a positive integer"))
    try:
        tiny = resolve_options(spec, spec.tiny_options)
    except OptionError as err:
        found.append(("tiny_options", str(err)))
        tiny = {}
    if spec.dataset is not None and spec.dataset not in DATASETS:
        found.append(("dataset", f"{spec.dataset!r} is not one of {', '.join(DATASETS)}"))
    if (spec.follows_image_size or spec.min_image_size) and "image_size" not in spec.options:
        found.append(("options", "takes an image size but has no image_size option"))
    elif spec.min_image_size:
        for which, options in (("options", spec.options), ("tiny_options", tiny)):
            if options.get("image_size", spec.min_image_size) < spec.min_image_size:
                found.append((which, "image_size below its min_image_size"))
    exp = train_family.TrainExperiment(spec.name, "cpu1", "fp32", "single", spec.default_batch)
    return found + path_problems(exp, train_family.parse)


def leaves(batch_part) -> list:
    """The tensors of a batch's inputs or targets (a tensor or nested tuples of them)."""
    if isinstance(batch_part, tuple):
        return [leaf for part in batch_part for leaf in leaves(part)]
    return [batch_part]


def batch_problems(spec, options) -> Found:
    """make_batch is a pair of tensors (or tuples of them) with the sample first, the same
    for one seed, and one training step on it gives a finite loss; a supervised model's
    output has the sample first too (DataParallel and the pipeline cut and join it there)."""
    import torch

    found: Found = []
    inputs, targets = spec.make_batch(torch.Generator().manual_seed(3), BATCH, options)
    again, _ = spec.make_batch(torch.Generator().manual_seed(3), BATCH, options)
    for leaf in leaves(inputs) + leaves(targets):
        if not isinstance(leaf, torch.Tensor) or leaf.ndim == 0 or len(leaf) != BATCH:
            found.append(("make_batch", f"a batch part is not {BATCH} samples on dim 0: {leaf!r}"))
    if not all(map(torch.equal, leaves(inputs), leaves(again))):
        found.append(("make_batch", "one seed gives two batches"))
    if found:
        return found
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = spec.build(options)
        if spec.train_step is supervised_step:
            with torch.no_grad():
                output = call(model, inputs)
            if len(output) != BATCH:
                return [("build", f"output {tuple(output.shape)} is not {BATCH} samples")]
        step = new_step(spec, spec.parts(model), options["lr"])
        loss = spec.train_step(step, inputs, targets)
    if loss.ndim != 0 or not torch.isfinite(loss) or loss.requires_grad:
        return [("train_step", f"a step returned {loss!r}, not a finite detached scalar")]
    return []


# ---- the checks of one unit -------------------------------------------------------------


def contract_problems(kind: str, unit: registry.Unit) -> Found:
    """What the unit breaks of its kind's contract, without running its implementations."""
    spec = unit.spec
    if kind == "kernels":
        found = kernel_problems(spec)
        for dtype in computed_dtypes(spec):
            found += reference_problems(spec, dtype)
        return found
    if kind == "datasci":
        return workload_problems(spec, unit.module) + reproducibility_problems(spec)
    return model_problems(spec)


def _raised(err: Exception, unit: registry.Unit) -> str:
    """An exception's text, and the line of the unit's file it came from, where it did."""
    ours = [
        frame.lineno
        for frame in traceback.extract_tb(err.__traceback__)
        if frame.filename.endswith(unit.file)
    ]
    where = f" (line {ours[-1]})" if ours else ""
    return f"raised {type(err).__name__}: {err}{where}"


def _kernel_backend_run(unit: registry.Unit, backend: str, device) -> Found:
    """One verified run of each dtype `backend` computes the kernel in, at size SMALL."""
    from accelbench.kernels import host_dtype
    from accelbench.measuring.checking import check_against_reference, mismatch

    spec, found = unit.spec, []
    for name in spec.dtypes(backend):
        dtype = host_dtype(name)
        try:
            inputs = spec.make_inputs(np.random.default_rng([SMALL, 2]), SMALL, dtype)
            prepared = spec.implementations[backend](inputs, device)
            check = check_against_reference(
                prepared,
                np.asarray(spec.reference(*inputs)),
                spec.tolerance(SMALL, dtype),
                spec.error,
                spec.error_measure,
                dtype=spec.output_dtype(dtype),
            )
        except Exception as err:  # whatever the user's code raised is the problem
            found.append((f"implementations.{backend}", f"in {name}: {_raised(err, unit)}"))
            continue
        if not check["passed"]:
            found.append((f"implementations.{backend}", f"in {name}, n={SMALL}: {mismatch(check)}"))
    return found


def _simulated(kind: str, unit: registry.Unit, backend: str) -> Found:
    """The verified run of a Numba-CUDA implementation under the CUDA simulator, in a
    process of its own with the same catalogue."""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    command = [sys.executable, "-m", __name__, kind, unit.name, backend, *registry.plugin_folders()]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return [(f"implementations.{backend}", f"the simulator's run ended: {tail}")]
    return [tuple(found) for found in json.loads(done.stdout)]


def run_kernel(checked: Checked) -> None:
    """One verified run of each backend the kernel declares that can run here, as each
    backend's check_runs say."""
    implemented = checked.unit.spec.implementations
    for name, backend in backend_catalogue().items():
        if name not in implemented:
            continue
        for run in backend.verified_runs():
            if missing := run.missing():
                checked.not_run.append(missing)
            elif run.simulated:
                checked.add(_simulated("kernels", checked.unit, name))
                checked.ran.append(run.label)
            else:
                with run.stand_in():
                    checked.add(_kernel_backend_run(checked.unit, name, parse_device(run.device)))
                checked.ran.append(run.label)


def run_workload(checked: Checked) -> None:
    """One verified run of each library the workload declares that is installed here."""
    from accelbench.measuring.checking import check_against_reference, mismatch

    spec, unit = checked.unit.spec, checked.unit
    for backend, prepare in spec.implementations.items():
        library = DATASCI_BACKENDS.get(backend)
        if library is None:
            continue  # the contract names it
        device = parse_device(f"{library.device_kinds[0]}1")
        if device.is_gpu and (reason := library.unavailable_reason(device)):
            checked.not_run.append(f"{backend}: {reason}")
            continue
        try:
            inputs = spec.make_inputs(np.random.default_rng(3), WORKLOAD_SIZE)
            check = check_against_reference(
                prepare(inputs, device),
                spec.reference(*inputs),
                spec.tolerance(WORKLOAD_SIZE),
                spec.error,
                spec.error_measure,
                spec.reference_name,
            )
        except Exception as err:  # whatever the user's code raised is the problem
            checked.add([(f"implementations.{backend}", _raised(err, unit))])
            continue
        checked.ran.append(backend)
        if not check["passed"]:
            text = f"n={WORKLOAD_SIZE}: {mismatch(check)}"
            checked.add([(f"implementations.{backend}", text)])


def run_model(checked: Checked) -> None:
    """One training step on the CPU in its tiny options, and at the smallest image it admits."""
    spec, unit = checked.unit.spec, checked.unit
    variants = [("tiny_options", spec.tiny_options)]
    if spec.min_image_size:
        variants.append(
            ("min_image_size", {**spec.tiny_options, "image_size": spec.min_image_size})
        )
    for which, overrides in variants:
        try:
            checked.add(batch_problems(spec, resolve_options(spec, overrides)))
        except OptionError:
            continue  # the contract names it
        except Exception as err:  # whatever the user's code raised is the problem
            checked.add([(which, f"a training step {_raised(err, unit)}")])
        checked.ran.append(f"a training step on the CPU ({which})")


RUNS: dict[str, Callable[[Checked], None]] = {
    "kernels": run_kernel,
    "datasci": run_workload,
    "models": run_model,
}


def check_unit(kind: str, name: str) -> Checked:
    """The contract of the unit `name` of `kind`, then its verified runs."""
    checked = Checked(kind, registry.units(kind)[name])
    try:
        checked.add(contract_problems(kind, checked.unit))
    except Exception as err:  # a declaration whose functions raise breaks the contract
        checked.add([("SPEC", _raised(err, checked.unit))])
    RUNS[kind](checked)
    return checked


def users_units() -> list[tuple[str, str]]:
    """(kind, name) of every unit that is not built in: the plugin folders' and the entry
    points'."""
    return [
        (kind, name)
        for kind in registry.KINDS
        for name, unit in registry.units(kind).items()
        if not unit.builtin
    ]


def named_units(names: Iterable[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """(kind, name) of each unit of any kind named, and the names no unit has."""
    found, unknown = [], []
    for name in names:
        kinds = [kind for kind in registry.KINDS if name in registry.units(kind)]
        found += [(kind, name) for kind in kinds]
        if not kinds:
            unknown.append(name)
    return found, unknown


def main(argv: Sequence[str]) -> int:
    """`python -m accelbench.contracts KIND NAME BACKEND [FOLDER ...]`: one backend's
    verified runs, in this process's environment (the CUDA simulator's), as JSON."""
    kind, name, backend, *folders = argv
    registry.use_plugins(folders)
    unit = registry.units(kind)[name]
    device = parse_device("cuda1" if "cuda" in backend_named(backend).device_kinds else "cpu1")
    print(json.dumps(_kernel_backend_run(unit, backend, device)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

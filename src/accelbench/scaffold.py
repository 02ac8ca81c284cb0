"""`accelbench new kernel|workload|model NAME`: a unit of the user's that runs as it is.

It writes three files into a plugin folder (accelbench.registry): the unit's module, a
working example with every field explained where it says what to count or bound; a config
that measures it beside one built-in of its kind on the devices this machine has; and a
test that checks it against its contract (accelbench.contracts). `accelbench check` then
`accelbench run --configfile` measure it, from any directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from accelbench import config as workflow_config
from accelbench import registry


class ScaffoldError(ValueError):
    """A name or a folder `new` cannot write a unit for; the message says which and why."""


@dataclass(frozen=True)
class Template:
    """What `new` writes for one kind of unit, and the built-in it is measured beside."""

    kind: str  # the catalogue: also the folder in the plugin folder
    source: str  # the module, formatted with name and ident
    beside: str  # a built-in unit of the kind
    sizes: list[int]  # the sizes (kernels, workloads) or batch sizes (models) measured


KERNEL = '''\
"""{name}: out = a * x + b * y over vectors of length n. Replace it with your kernel.

A kernel declares what it computes and how to judge it (accelbench.kernels): its flop and
byte counts, fresh random inputs, a float64 reference, the error bound its check holds
every implementation to, and one `prepare` per backend it has. `prepare` moves the inputs
to the device and returns a Prepared whose `run` computes into an output buffer that stays
there: accelbench times `run` alone, and the copies in and out apart. Before timing, and
again after, it poisons the output with NaN, runs once and checks the result against the
reference, so a kernel that computes nothing, or the wrong thing, is recorded as failed.
"""

from __future__ import annotations

import numpy as np

from accelbench.kernels import (
    KernelSpec,
    Prepared,
    array_implementations,
    array_prepared,
    torch_prepared,
    unit_roundoff,
)


def make_inputs(rng: np.random.Generator, n: int, dtype: np.dtype) -> tuple[np.ndarray, ...]:
    """Fresh random inputs of size n in `dtype`, from `rng` alone (a rerun gets the same).
    Not zeros: some hardware computes on zeros faster than on numbers."""
    a, b = (np.asarray(rng.uniform(0.5, 2.0)).astype(dtype) for _ in range(2))
    x, y = (rng.uniform(0.5, 1.5, n).astype(dtype) for _ in range(2))
    return a, b, x, y


def reference(a, b, x, y) -> np.ndarray:
    """The answer from the same inputs, computed in float64 with NumPy."""
    wide = [value.astype(np.float64) for value in (a, b, x, y)]
    return wide[0] * wide[2] + wide[1] * wide[3]


def tolerance(n: int, dtype: np.dtype) -> float:
    """The largest error the check accepts, as normwise relative error
    max|out - reference| / max|reference|. Derive it from the arithmetic, in units of the
    dtype's roundoff: each element here is three roundings of positive numbers, so a few
    units bound it whatever the order; a sum of n terms would need about n units (log n
    for a pairwise sum)."""
    return 6.0 * unit_roundoff(dtype)


def prepare_array_module(am, inputs) -> Prepared:
    """NumPy on a CPU, CuPy on a GPU: one code against the module it is given (`am.xp`)."""
    xp = am.xp

    def {ident}(a, b, x, y, out):
        xp.multiply(x, a, out=out)
        out += xp.multiply(y, b)

    return array_prepared(am, inputs, {ident}, inputs[2].shape, inputs[2].dtype)


def prepare_torch(inputs, device) -> Prepared:
    """PyTorch on the CPU or, for a cudaK device, on GPU 0."""
    import torch

    def {ident}(a, b, x, y, out):
        torch.mul(x, a, out=out)
        out.addcmul_(y, b)

    return torch_prepared(inputs, device, {ident}, inputs[2].shape, inputs[2].dtype)


SPEC = KernelSpec(
    name="{name}",
    description="out = a * x + b * y, vectors of length n",
    # Floating-point operations for size n, counted from the arithmetic (two multiplies
    # and an add per element): the record's GFLOP/s is flops / time.
    flops=lambda n: 3.0 * n,
    # The fewest bytes any implementation must move for size n and an item of `itemsize`
    # bytes (x and y read, out written once): GB/s is bytes / time, and flops / bytes is
    # the arithmetic intensity, the roofline's axis.
    bytes_moved=lambda n, itemsize: 3.0 * n * itemsize,
    make_inputs=make_inputs,
    reference=reference,
    tolerance=tolerance,
    # Each backend it has, by name, and its `prepare`: the array-module code on every
    # backend with an array module (NumPy, CuPy), and PyTorch. The grid excludes the
    # backends it lacks, saying why; add "numba" and "numba-parallel"
    # (numba_implementations), "numba-cuda" or "python" the same way (see
    # accelbench/kernels/saxpy.py).
    implementations={{**array_implementations(prepare_array_module), "torch": prepare_torch}},
    # The 16-bit dtypes each backend computes it in (float64 and float32 always).
    half_dtypes={{"torch": ("float16", "bfloat16")}},
)
'''

WORKLOAD = '''\
"""{name}: per key, the mean of x over the rows whose y is positive. Replace it with yours.

A data science workload (accelbench.datasci) is one call of a library on an input made from
a seed and a size n (here rows): written once against pandas' API, it runs on pandas on a
CPU and on cuDF on a GPU (cuDF mirrors pandas), and in polars' own API. pandas' result is the
reference every library's is checked against, before the timing and again after it. Its
throughput is n rows per second of one call.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accelbench.datasci import dataframe_workload, frame_error


def make_inputs(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame]:
    """n rows from `rng` alone (a rerun gets the same): a key of 100 values, two floats."""
    frame = pd.DataFrame(
        {{"key": rng.integers(0, 100, n), "x": rng.uniform(0, 1, n), "y": rng.normal(0, 1, n)}}
    )
    return (frame,)


def compute(df, frame):
    """pandas on a CPU, cuDF on a GPU: `df` is the library's module, `frame` its frame."""
    kept = frame[frame["y"] > 0]
    return kept.groupby("key", as_index=False)["x"].mean()


def on_polars(pl, frame):
    """The same in polars' own API (`pl` is polars, `frame` a polars frame)."""
    return frame.filter(pl.col("y") > 0).group_by("key").agg(pl.col("x").mean())


SPEC = dataframe_workload(
    "{name}",
    "per key, the mean of x over the rows with y > 0",
    make_inputs,
    compute,
    on_polars=on_polars,
    # The check: rows put in key order (a group-by leaves their order to the library),
    # then the largest normwise relative error of a float column; other columns must be equal.
    error=frame_error(by="key"),
    # A mean summed in another order differs from pandas' by a few roundoffs of float64
    # per row summed (2.2e-16 each): 1e-12 bounds it for any n this runs at.
    tolerance=1e-12,
    error_measure="largest normwise relative error of a float column (0: equal)",
)
'''

MODEL = '''\
"""{name}: a small multilayer perceptron on synthetic data. Replace it with your model.

A model declares what planning needs in SPEC, which imports no torch (the workflow plans
its grid without it), and in this module how to build the network, how to make one batch
from a seed, and its loss (accelbench.train.models: `layers`, `parts`, `optimizer`,
`train_step` and `real_data` are optional). The training loop measures time per batch,
samples per second, peak memory and the loss; FLOPs are counted from the network (torch's
FlopCounterMode), not declared.
"""

from __future__ import annotations

from accelbench.train.models import ModelSpec

SPEC = ModelSpec(
    name="{name}",
    family="fcn",  # the kind of network: cnn, fcn, rnn, transformer, autoencoder, gan, gnn
    description="multilayer perceptron, 2 hidden layers, synthetic classes",
    default_batch=64,
    # Size options and their defaults (lr, the learning rate, is required); a config
    # overrides them under train.model_options.{name}.
    options={{"lr": 0.01, "features": 256, "hidden": 512, "classes": 10}},
    # The smallest options that still run every layer: `accelbench check` trains a step in them.
    tiny_options={{"features": 8, "hidden": 8, "classes": 2}},
    # Its `layers` below compose the forward pass: pipeline and FSDP can split it.
    splittable=True,
)


def build(options):
    """The network for these options."""
    from torch import nn

    return nn.Sequential(
        nn.Linear(options["features"], options["hidden"]),
        nn.ReLU(),
        nn.Linear(options["hidden"], options["hidden"]),
        nn.ReLU(),
        nn.Linear(options["hidden"], options["classes"]),
    )


def make_batch(generator, batch: int, options):
    """One batch (inputs, targets) from `generator` alone, the sample first: each class a
    template plus noise, so the loss falls as it trains."""
    from accelbench.train.synthetic import labelled_samples

    return labelled_samples(generator, batch, options["classes"], (options["features"],))


def loss():
    from torch import nn

    return nn.CrossEntropyLoss()


def layers(model):
    """The blocks whose composition is the forward pass."""
    return list(model)
'''

TEST = '''\
"""{what} {name} keeps accelbench's contract: python -m pytest {tests}"""

from pathlib import Path

from accelbench import contracts, registry

UNITS = Path(__file__).resolve().parents[1]


def test_{ident}_keeps_its_contract_and_matches_its_reference_on_every_backend_here():
    registry.use_plugins([UNITS])
    checked = contracts.check_unit("{kind}", "{name}")
    assert [str(problem) for problem in checked.problems] == []
'''

TEMPLATES = {
    "kernel": Template("kernels", KERNEL, "saxpy", [100_000, 1_000_000]),
    "workload": Template("datasci", WORKLOAD, "groupby", [10_000, 1_000_000]),
    "model": Template("models", MODEL, "fcn", [64]),
}
# Where a config names the units of each catalogue.
SIZES_KEYS = {
    "kernels": ("kernels", "sizes"),
    "datasci": ("datasci", "sizes"),
    "models": ("train", "batch_sizes"),
}


def identifier(name: str) -> str:
    """A Python name for a unit's module and functions: its name with _ for the rest."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return f"unit_{ident}" if ident[0].isdigit() else ident


def devices_here() -> tuple[str, bool]:
    """The CPU device of every CPU this process may use, and whether a GPU is visible."""
    from accelbench.platform import doctor
    from accelbench.platform.devices import usable_cpus

    return f"cpu{usable_cpus()}", bool(doctor.visible_gpus())


def config_text(what: str, name: str, folder: Path, cpu: str, gpu: bool) -> str:
    """A config that measures `name` beside the template's built-in, and nothing else of the
    default grid (config files merge key by key: each default unit is given [])."""
    template = TEMPLATES[what]
    default = yaml.safe_load(workflow_config.default_config_path().read_text())
    config: dict = {"plugins": {"paths": ["."]}}
    for kind, (section, key) in SIZES_KEYS.items():
        measured = {name: template.sizes, template.beside: template.sizes}
        units = measured if kind == template.kind else {}
        units.update({unit: [] for unit in default[section][key] if unit not in units})
        config.setdefault(section, {})[key] = units
    devices = [cpu, "cuda1"] if gpu else [cpu]
    if what == "kernel":
        axes = {"devices": devices, "backends": ["numpy", "torch", *(["cupy"] * gpu)]}
        axes["dtypes"] = ["float32"]
        # The default grid narrows its built-ins' cells (kernels.overrides): not this one's.
        config["kernels"] = {**axes, **config["kernels"], "overrides": {template.beside: axes}}
    elif what == "workload":
        backends = ["pandas", "polars", *(["cudf"] * gpu)]
        config["datasci"] = {"devices": devices, "backends": backends, **config["datasci"]}
    else:
        axes = {"devices": devices, "precisions": ["fp32"], "strategies": ["single"]}
        config["train"] = {**axes, **config["train"]}
    command = "accelbench run --cores all --configfile"
    header = (
        f"# {what.capitalize()} {name} of {folder}/ beside the built-in {template.beside}, on "
        f"this machine's devices:\n#   accelbench check {name} --configfile {folder}/{name}.yaml"
        f"\n#   {command} {folder}/{name}.yaml\n# Merged over the package's default grid key by "
        "key: each of its units is given [] below\n# (config/README.md in the package)."
        "\n# plugins.paths is relative to this file: this folder holds kernels/, datasci/, "
        "models/.\n"
    )
    return header + yaml.dump(
        config, Dumper=_Plain, sort_keys=False, default_flow_style=None, width=100
    )


class _Plain(yaml.SafeDumper):
    """YAML without anchors: a value written twice reads twice."""

    def ignore_aliases(self, data) -> bool:
        return True


def new(what: str, name: str, folder: Path) -> list[Path]:
    """Write `what` ("kernel", "workload", "model") `name` into `folder`: its module, its config
    and its test. Returns the files; ScaffoldError, naming why, writes none."""
    template = TEMPLATES[what]
    if not registry.NAME_RULE.fullmatch(name):
        raise ScaffoldError(
            f"{what} name {name!r} cannot be one part of a result path: a name is "
            f"{registry.NAME_RULE_TEXT}"
        )
    if name in registry.units(template.kind):
        unit = registry.units(template.kind)[name]
        raise ScaffoldError(f"a {what} named {name!r} exists already: {unit.file} ({unit.origin})")
    ident = identifier(name)
    module = folder / template.kind / f"{ident}.py"
    config = folder / f"{name}.yaml"
    test = folder / "tests" / f"test_{ident}.py"
    for path in (module, config, test):
        if path.exists():
            raise ScaffoldError(f"{path} exists already: nothing written")
    cpu, gpu = devices_here()
    texts = {
        module: template.source.format(name=name, ident=ident),
        config: config_text(what, name, folder, cpu, gpu),
        test: TEST.format(
            what=what, name=name, ident=ident, kind=template.kind, tests=folder / "tests"
        ),
    }
    for path, text in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(texts)

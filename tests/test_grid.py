"""Result paths <-> experiments, exclusion rules, grid expansion, config name checks."""

from __future__ import annotations

import copy
import re
from dataclasses import asdict

import pytest
import yaml

from accelbench import config as accelbench_config
from accelbench import grid
from accelbench.families import FAMILIES
from accelbench.families import kernel as kernel_family
from accelbench.families import roof as roof_family
from accelbench.families import train as train_family
from accelbench.families.kernel import KernelExperiment
from accelbench.families.roof import RoofExperiment
from accelbench.families.train import TrainExperiment
from accelbench.kernels import kernels
from accelbench.platform.devices import DeviceError, parse_device
from accelbench.slurm import resources as cluster
from accelbench.train.cells import exclusion as train_exclusion

from conftest import REPO_ROOT
from refusals import BAD_TARGETS


@pytest.fixture
def config():
    return yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())


def test_kernel_path_round_trips():
    exp = KernelExperiment("matmul", "cpu4", "numba-parallel", "float32", 512)
    assert exp.path == "results/kernels/matmul/cpu4/numba-parallel/float32/n512.json"
    assert exp.id == "kernels/matmul/cpu4/numba-parallel/float32/n512"
    wildcards = {
        "kernel": "matmul",
        "device": "cpu4",
        "backend": "numba-parallel",
        "dtype": "float32",
        "size": "512",
    }
    assert kernel_family.parse(wildcards) == exp


@pytest.mark.parametrize("configfile", ["config.yaml", "cluster.yaml"])
def test_a_job_rebuilds_every_planned_experiment_from_its_wildcards(configfile):
    """Without the catalogues (a job's script): the same experiment the grid planned."""
    config = accelbench_config.load([REPO_ROOT / "config" / configfile])
    planned = grid.expand(config).experiments
    assert {exp.family for exp in planned} == {"kernel", "roof", "train", "datasci"}
    for exp in planned:
        wildcards = {name: str(value) for name, value in asdict(exp).items()}
        assert grid.planned_experiment(FAMILIES[exp.family].rule, wildcards) == exp


@pytest.mark.parametrize("configfile", ["config.yaml", "cluster.yaml"])
def test_a_record_id_reads_back_as_its_experiment(configfile):
    config = accelbench_config.load([REPO_ROOT / "config" / configfile])
    for exp in grid.expand(config).experiments:
        assert grid.experiment_of_id(exp.id) == exp


@pytest.mark.parametrize(
    ("record_id", "message"),
    [
        ("kernels/matmul/cpu1/numpy/float64/n0", "size '0' must be a positive integer"),
        ("train/fcn/cpu1/fp32/single/bs16.5", "batch '16.5' must be a positive integer"),
        ("roofs/gpu1/float32", "device 'gpu1' is malformed"),
        ("datasci/groupby/cpu01/pandas/n10", "device 'cpu01' is malformed"),
        ("kernels/matmul/cpu1/n64", "is not a result path below results/ (kernels/{kernel}/"),
        ("results/roofs/cpu1/float32", "is not a result path"),
    ],
)
def test_a_record_id_that_names_no_cell_is_refused_naming_the_part(record_id, message):
    with pytest.raises(grid.GridError, match=re.escape(message)):
        grid.experiment_of_id(record_id)


def test_train_path_round_trips():
    exp = TrainExperiment("resnet18", "cuda1", "bf16", "single", 64)
    assert exp.path == "results/train/resnet18/cuda1/bf16/single/bs64.json"
    wildcards = {
        "model": "resnet18",
        "device": "cuda1",
        "precision": "bf16",
        "strategy": "single",
        "batch": "64",
    }
    assert train_family.parse(wildcards) == exp


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"kernel": "gemm"},
            "kernel 'gemm' is not known; allowed: fft1d, fft2d, mandelbrot, matmul, reduction",
        ),
        ({"device": "gpu1"}, "device 'gpu1' is malformed: expected cpuN"),
        ({"device": "cpu0"}, "device 'cpu0' is malformed"),
        ({"backend": "mlx"}, "backend 'mlx' is not known; allowed: numpy, numba"),
        ({"dtype": "int8"}, "dtype 'int8' is not known; allowed: float64, float32"),
        ({"size": "012"}, "size '012' must be a positive integer"),
        ({"device": "cuda1"}, "backend 'numpy' runs on cpu devices, not on cuda1"),
        ({"device": "cuda2", "backend": "cupy"}, "kernels run on one GPU; cuda2 asks for 2"),
        ({"device": "cpu2", "backend": "cupy"}, "backend 'cupy' runs on cuda devices"),
    ],
)
def test_bad_kernel_wildcards_name_the_part(change, message):
    wildcards = {
        "kernel": "matmul",
        "device": "cpu1",
        "backend": "numpy",
        "dtype": "float64",
        "size": "64",
        **change,
    }
    with pytest.raises(grid.GridError) as err:
        kernel_family.parse(wildcards)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"model": "resnet1000"},
            "model 'resnet1000' is not known; allowed: alexnet, alexnet-r, alexnet-s, autoencoder",
        ),
        ({"precision": "fp8"}, "precision 'fp8' is not known"),
        (
            {"strategy": "magic"},
            "strategy 'magic' is not known; allowed: single, dp, ddp, fsdp, pipeline",
        ),
        ({"batch": "-4"}, "batch size '-4' must be a positive integer"),
        ({"precision": "tf32"}, "tf32 is a CUDA tensor-core mode"),
        ({"device": "cuda4"}, "strategy 'single' uses one GPU; cuda4 asks for 4"),
    ],
)
def test_bad_train_wildcards_name_the_part(change, message):
    wildcards = {
        "model": "resnet18",
        "device": "cpu1",
        "precision": "fp32",
        "strategy": "single",
        "batch": "16",
        **change,
    }
    with pytest.raises(grid.GridError) as err:
        train_family.parse(wildcards)
    assert message in str(err.value)


def test_default_grid_is_cpu_only_and_complete(config):
    expanded = grid.expand(config)
    kernel_cells = [e for e in expanded.experiments if isinstance(e, KernelExperiment)]
    roofs = [e for e in expanded.experiments if isinstance(e, RoofExperiment)]
    matmul = [e for e in kernel_cells if e.kernel == "matmul"]
    assert len(matmul) == 2 * 5 * 1 * 2  # devices, backends, float32, sizes
    # Every other registered kernel that runs on a CPU has a few cells in the default grid.
    assert {e.kernel for e in kernel_cells} == {
        name for name, spec in kernels().items() if "cpu" in spec.device_kinds
    }
    assert len(kernel_cells) - len(matmul) <= 30
    assert {(r.device, r.dtype) for r in roofs} == {(e.device, e.dtype) for e in kernel_cells}
    # training: 3 models x (single on cpu1 and cpu2, ddp on cpu2); ddp on cpu1 is excluded.
    train = [e for e in expanded.experiments if isinstance(e, TrainExperiment)]
    assert len(train) == 3 * 3
    assert all(not parse_device(exp.device).is_gpu for exp in expanded.experiments)
    assert sorted(exp.path for exp, _ in expanded.excluded) == [
        f"results/train/{model}/cpu1/fp32/ddp/bs{batch}.json"
        for model, batch in (("fcn", 64), ("lstm", 32), ("resnet18", 16))
    ]
    assert {reason for _, reason in expanded.excluded} == {
        "ddp needs at least 2 processes; cpu1 gives one (use 'single')"
    }
    assert len(set(expanded.paths)) == len(expanded.paths)


def test_overrides_replace_the_axes_of_one_kernel(config):
    config = copy.deepcopy(config)
    config["kernels"]["sizes"] = {"matmul": [8], "saxpy": [16]}
    config["kernels"]["dtypes"] = ["float64", "float32"]
    config["kernels"]["overrides"] = {"saxpy": {"devices": ["cpu4"], "backends": ["python"]}}
    expanded = grid.expand(config)
    saxpy = {e.path for e in expanded.experiments if getattr(e, "kernel", None) == "saxpy"}
    assert saxpy == {
        "results/kernels/saxpy/cpu4/python/float64/n16.json",
        "results/kernels/saxpy/cpu4/python/float32/n16.json",
    }
    matmul = [e for e in expanded.experiments if getattr(e, "kernel", None) == "matmul"]
    assert len(matmul) == 2 * 5 * 2


@pytest.mark.parametrize(
    ("exp", "message"),
    [
        (
            ("matmul", "cpu1", "numba", "float16", 64),
            "kernel 'matmul' on backend 'numba' computes in float64, float32 only, not in float16",
        ),
        (
            ("mandelbrot", "cpu1", "torch", "bfloat16", 64),
            "computes in float64, float32 only, not in bfloat16",
        ),
        (
            ("transfer-h2d-pinned", "cpu2", "torch", "float32", 64),
            "kernel 'transfer-h2d-pinned' runs on cuda devices only, not on cpu2: "
            "a host<->device copy needs a GPU",
        ),
        (
            ("transfer-d2h", "cpu2", "numpy", "float32", 64),
            "backend 'numpy' runs on cpu devices, not on",
        ),
    ],
)
def test_kernel_exclusions_say_why(exp, message):
    exp = KernelExperiment(*exp)
    reason = kernel_family.exclusion(exp)
    if "not on" in message and "numpy" in message:
        exp = KernelExperiment(exp.kernel, "cuda1", exp.backend, exp.dtype, exp.size)
        reason = kernel_family.exclusion(exp)
    assert reason and message in reason
    wildcards = {key: str(value) for key, value in exp.__dict__.items()}
    with pytest.raises(grid.GridError, match="excluded from the grid"):
        kernel_family.parse(wildcards)


def test_half_precision_cells_run_where_supported():
    for exp in (
        KernelExperiment("matmul", "cpu1", "torch", "bfloat16", 64),
        KernelExperiment("matmul", "cuda1", "cupy", "float16", 64),
        KernelExperiment("saxpy", "cpu1", "numpy", "float16", 64),
    ):
        assert kernel_family.exclusion(exp) is None


def test_roof_path_round_trips_and_bad_parts_are_named():
    exp = RoofExperiment("cuda1", "bfloat16")
    assert exp.path == "results/roofs/cuda1/bfloat16.json"
    assert exp.id == "roofs/cuda1/bfloat16"
    assert roof_family.parse({"device": "cuda1", "dtype": "bfloat16"}) == exp
    with pytest.raises(grid.GridError, match="dtype 'int4' is not known"):
        roof_family.parse({"device": "cpu1", "dtype": "int4"})
    with pytest.raises(grid.GridError, match="device 'gpu1' is malformed"):
        roof_family.parse({"device": "gpu1", "dtype": "float32"})


def test_training_precisions_given_per_device_kind_set_a_gpu_beside_its_cpu_baseline(config):
    """A GPU in four precisions beside its host CPU in fp32 alone, the baseline of every GPU
    row; a device kind the mapping leaves out trains in none."""
    config = copy.deepcopy(config)
    config["train"]["devices"] = ["cpu2", "cuda1"]
    config["train"]["strategies"] = ["single"]
    config["train"]["precisions"] = {"cpu": ["fp32"], "cuda": ["fp32", "tf32", "bf16", "fp16"]}
    trained = {
        (exp.model, exp.device, exp.precision)
        for exp in grid.expand(config).experiments
        if exp.family == "train"
    }
    models = {model for model, _, _ in trained}
    assert trained == {(model, "cpu2", "fp32") for model in models} | {
        (model, "cuda1", precision)
        for model in models
        for precision in ("fp32", "tf32", "bf16", "fp16")
    }
    config["train"]["precisions"] = {"cuda": ["bf16"]}
    devices = {exp.device for exp in grid.expand(config).experiments if exp.family == "train"}
    assert devices == {"cuda1"}


def test_excluded_cells_keep_their_reason(config):
    config = copy.deepcopy(config)
    config["kernels"]["devices"] = ["cpu1", "cuda1"]
    config["kernels"]["backends"] = ["numpy", "cupy"]
    config["train"]["devices"] = ["cpu1", "cuda1"]
    config["train"]["precisions"] = ["fp32", "tf32"]
    expanded = grid.expand(config)
    excluded = {exp.path: reason for exp, reason in expanded.excluded}
    assert (
        "backend 'numpy' runs on cpu devices, not on cuda1"
        in excluded["results/kernels/matmul/cuda1/numpy/float32/n128.json"]
    )
    assert (
        "backend 'cupy' runs on cuda devices"
        in excluded["results/kernels/matmul/cpu1/cupy/float32/n512.json"]
    )
    assert "tf32" in excluded["results/train/resnet18/cpu1/tf32/single/bs16.json"]
    kept = set(expanded.paths)
    assert "results/kernels/matmul/cuda1/cupy/float32/n128.json" in kept
    assert "results/train/resnet18/cuda1/tf32/single/bs16.json" in kept
    assert kept.isdisjoint(excluded)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            ("kernels", "backends"),
            ["numpy", "opencl"],
            "config key kernels.backends: unknown backend 'opencl'; allowed:",
        ),
        (
            ("kernels", "sizes"),
            {"saxpyy": [4]},
            "config key kernels.sizes: unknown kernel 'saxpyy'",
        ),
        (
            ("train", "batch_sizes"),
            {"vgg": [4]},
            "config key train.batch_sizes: unknown model 'vgg'",
        ),
        (("train", "devices"), ["tpu1"], "config key train.devices: device 'tpu1' is malformed"),
        (
            ("kernels", "overrides"),
            {"mandelbrott": {"devices": ["cpu1"]}},
            "config key kernels.overrides: unknown kernel 'mandelbrott'",
        ),
        (
            ("kernels", "overrides"),
            {"saxpy": {"backends": ["mlx"]}},
            "config key kernels.overrides.saxpy.backends: unknown backend 'mlx'",
        ),
        (
            ("kernels", "overrides"),
            {"saxpy": {"devices": ["cpu0"]}},
            "config key kernels.overrides.saxpy.devices: device 'cpu0' is malformed",
        ),
        (
            ("kernels", "naive_size_limit"),
            {"gemm": 64},
            "config key kernels.naive_size_limit: unknown kernel 'gemm'",
        ),
    ],
)
def test_validate_config_names_key_and_allowed_values(config, key, value, message):
    config[key[0]][key[1]] = value
    with pytest.raises(grid.GridError) as err:
        grid.validate_config(config)
    assert message in str(err.value)


def test_device_grammar():
    assert parse_device("cpu16").count == 16
    assert parse_device("cuda2").is_gpu
    assert parse_device("2x4cuda").nodes == 2
    for bad in ("cpu", "cuda0", "CPU1", "4xcuda", "cpu1 "):
        with pytest.raises(DeviceError, match="expected cpuN"):
            parse_device(bad)


def test_slurm_resources_follow_the_device(config):
    cpu8, cuda2 = parse_device("cpu8"), parse_device("cuda2")
    config["slurm"].update(cpu_partition="short", gpu_partition="a100", cpus_per_gpu=6)
    assert cluster.partition(cpu8, config) == "short"
    assert cluster.partition(cuda2, config) == "a100"
    assert cluster.cpus_per_task(cpu8, config) == 8
    assert cluster.cpus_per_task(cuda2, config) == 12
    assert (cluster.gpus(cpu8), cluster.gpus(cuda2)) == (0, 2)
    assert (cluster.local_threads(cpu8), cluster.local_threads(cuda2)) == (8, 1)
    assert (
        cluster.scaled(config, "train", "mem_mb", attempt=2)
        == 2 * config["resources"]["train"]["mem_mb"]
    )


def test_an_empty_batch_list_drops_a_model(config):
    # Config files merge key by key, so an empty list is how a later file drops a model.
    config["train"]["batch_sizes"] = {"resnet18": [], "fcn": [8]}
    config["train"]["strategies"] = ["single"]
    models = {exp.model for exp in grid.expand(config).experiments if exp.family == "train"}
    assert models == {"fcn"}


def test_model_options_are_checked_with_the_config(config):
    config["train"]["model_options"] = {"lstm": {"hiden": 64}}
    with pytest.raises(grid.GridError) as err:
        grid.validate_config(config)
    assert "config key train.model_options.lstm.hiden: unknown option; allowed: lr" in str(
        err.value
    )


# A blind CPU grid of every model: what the grid can know is excluded before any job.
BLIND_GRID = {"image_size": 32, "model_options": {}, "pipeline_microbatches": 4}


@pytest.mark.parametrize("strategy", ["single", "ddp", "fsdp"])
def test_a_model_whose_layers_cannot_take_the_image_is_excluded(strategy):
    exp = TrainExperiment("alexnet", "cpu2", "fp32", strategy, 8)
    assert train_exclusion(exp, BLIND_GRID) == (
        "alexnet needs image_size >= 63 (its poolings); the config gives 32"
    )
    assert train_exclusion(exp, {**BLIND_GRID, "image_size": 64}) is None


@pytest.mark.parametrize(
    ("model", "device", "strategy", "batch", "image_size", "excluded"),
    [
        ("resnet50", "cpu2", "ddp", 2, 32, True),  # one sample per process, 1x1 last maps
        ("resnet50", "cpu2", "fsdp", 2, 32, True),
        ("resnet50", "cpu2", "ddp", 2, 64, False),  # 2x2 last maps: 4 values per channel
        ("resnet50", "cpu2", "ddp", 4, 32, False),
        ("resnet18", "cpu1", "single", 1, 32, True),
        ("resnet18", "cuda2", "dp", 2, 32, True),  # one sample per GPU replica
        ("resnet56", "cpu2", "ddp", 2, 32, False),  # 8x8 maps even at its last stage
        ("fcn", "cpu2", "ddp", 2, 32, False),  # no BatchNorm
        ("dcgan", "cpu1", "single", 1, 32, False),  # trains at batch 1; not judged here
    ],
)
def test_batch_norm_needs_two_values_per_channel(
    model, device, strategy, batch, image_size, excluded
):
    exp = TrainExperiment(model, device, "fp32", strategy, batch)
    reason = train_exclusion(exp, {**BLIND_GRID, "image_size": image_size})
    assert (reason is not None) == excluded, reason
    if excluded:
        assert f"{model}'s BatchNorm would normalise over 1 value per channel" in reason


def test_the_grid_excludes_what_it_can_know_with_the_reason(config):
    config["train"].update(
        devices=["cpu2"],
        strategies=["single", "ddp"],
        image_size=32,
        batch_sizes={"alexnet": [4], "resnet50": [2], "fcn": [3]},
    )
    expanded = grid.expand(config)
    reasons = {exp.path: reason for exp, reason in expanded.excluded}
    assert "needs image_size >= 63" in reasons["results/train/alexnet/cpu2/fp32/single/bs4.json"]
    assert "BatchNorm" in reasons["results/train/resnet50/cpu2/fp32/ddp/bs2.json"]
    assert "does not split evenly" in reasons["results/train/fcn/cpu2/fp32/ddp/bs3.json"]
    assert "results/train/resnet50/cpu2/fp32/single/bs2.json" in expanded.paths


def test_roofs_exist_only_for_devices_kernels_run_on():
    for device in ("cuda2", "2x4cuda", "2x1cuda", "2x2cpu"):
        with pytest.raises(grid.GridError, match="roofs bound kernels, which run on one node's"):
            roof_family.parse({"device": device, "dtype": "float32"})
    assert roof_family.parse({"device": "cuda1", "dtype": "float32"}).device == "cuda1"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "results/kernels/matmul/cpu1/numpy/float32/16.json",
            "results/kernels/matmul/cpu1/numpy/float32/16.json: part 7, '16.json', must read "
            "'n{size}.json' (results/kernels/{kernel}/{device}/{backend}/{dtype}/n{size}.json)",
        ),
        (
            "results/kernel/matmul/cpu1/numpy/float32/n16.json",
            "results/kernel/matmul/cpu1/numpy/float32/n16.json: no result is named 'kernel' "
            "(did you mean 'kernels'?); records are results/kernels/{kernel}/{device}/"
            "{backend}/{dtype}/n{size}.json, results/train/",
        ),
        (
            "results/train/resnet18/cpu1/fp32/bs16.json",
            "results/train/resnet18/cpu1/fp32/bs16.json has 6 parts; a train record has 7: "
            "results/train/{model}/{device}/{precision}/{strategy}/bs{batch}.json",
        ),
        (
            "results/roofs/cpu1/float64",
            "results/roofs/cpu1/float64: part 4, 'float64', must read '{dtype}.json'",
        ),
    ],
)
def test_a_target_no_rule_makes_is_told_which_part_is_wrong(target, message):
    assert message in grid.unmade_target_reason(target, "/work/flow")


def refusal(target: str, config: dict) -> str:
    """What the workflow says of a bad target, found as it finds it: a path of a record's
    shape is parsed by its family's rule (grid.target_check, with the config), any other is
    told which part is wrong (grid.check_targets). tests/test_workflow.py runs each way
    through Snakemake."""
    cell = grid.cell_of_path(target)
    if cell is None:
        return grid.unmade_target_reason(target, "/work/flow")
    with pytest.raises(grid.GridError) as refused:
        grid.parse_path(target, cell[0], config)
    return str(refused.value)


@pytest.fixture(scope="module")
def default_config() -> dict:
    """The default config as the workflow reads it: validated, its defaults filled in."""
    return accelbench_config.load()


@pytest.mark.parametrize(("target", "message"), BAD_TARGETS.values(), ids=BAD_TARGETS)
def test_a_bad_target_is_refused_naming_its_wrong_part(default_config, target, message):
    assert message in refusal(target, default_config)


def test_an_absolute_target_is_told_the_path_to_name(tmp_path):
    inside = tmp_path / "results/kernels/matmul/cpu1/numpy/float64/n16.json"
    assert grid.unmade_target_reason(str(inside), str(tmp_path)) == (
        f"{inside}: name targets relative to the workflow's folder {tmp_path}: "
        "results/kernels/matmul/cpu1/numpy/float64/n16.json"
    )
    wrong = tmp_path / "results/kernels/matmul/cpu1/numpy/float64/16.json"
    assert grid.unmade_target_reason(str(wrong), str(tmp_path)).endswith(
        "; results/kernels/matmul/cpu1/numpy/float64/16.json: part 7, '16.json', must read "
        "'n{size}.json' (results/kernels/{kernel}/{device}/{backend}/{dtype}/n{size}.json)"
    )
    outside = "/elsewhere/results/roofs/cpu1/float64.json"
    assert grid.unmade_target_reason(outside, str(tmp_path)) == (
        f"{outside} is outside the workflow's folder {tmp_path}, where every target lies"
    )


def test_targets_outside_results_are_left_to_snakemake():
    assert grid.unmade_target_reason("data/cifar10", "/work/flow") is None
    assert grid.unmade_target_reason("everything", "/work/flow") is None

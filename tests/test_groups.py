"""Comparison groups: the cells a comparison table sets side by side on one kind of device
are measured by one job, their runs interleaved in rounds in a new order each round, each
cell keeping its own record; naming one record measures its group again."""

from __future__ import annotations

import copy
import json
import random
from dataclasses import replace

import pytest

from accelbench import config as workflow_config
from accelbench import grid
from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.families.train import TrainExperiment
from accelbench.job import group
from accelbench.job.context import JobContext
from accelbench.measuring import rerun
from accelbench.platform.devices import parse_device
from accelbench.records.record import load_record
from accelbench.slurm import resources as cluster

from conftest import copy_workflow, snakemake

SETTINGS = KernelSettings(min_run_time=0.02, samples=3, runs=3, budget_s=0.0)
CONTEXT = JobContext("t")


def kernel(backend: str, device: str = "cpu1", size: int = 64) -> KernelExperiment:
    return KernelExperiment("saxpy", device, backend, "float32", size)


def test_the_cells_a_table_row_compares_on_one_kind_of_device_form_a_group():
    config = workflow_config.load([])
    config = copy.deepcopy(config)
    config["kernels"]["devices"] = ["cpu1", "cpu2", "cuda1"]
    config["kernels"]["backends"] = ["numpy", "torch", "cupy"]
    config["kernels"]["overrides"] = {}
    config["train"]["devices"] = ["cpu1", "cpu2", "cuda1"]
    config["train"]["precisions"] = {"cpu": ["fp32"], "cuda": ["fp32", "bf16"]}
    planned = grid.expand(config).experiments
    groups = {cells.id: cells for cells in grid.comparison_groups(planned)}
    matmul = groups["kernel/cpu/matmul/float32/128"]
    assert {(exp.device, exp.backend) for exp in matmul.experiments} == {
        (device, backend) for device in ("cpu1", "cpu2") for backend in ("numpy", "torch")
    }
    # A GPU's cells are a group of their own: on a cluster they run in another partition.
    on_gpu = groups["kernel/cuda/matmul/float32/128"]
    assert {exp.backend for exp in on_gpu.experiments} == {"torch", "cupy"}
    assert groups["train/cuda/resnet18/single/16"].paths == [
        "results/train/resnet18/cuda1/fp32/single/bs16.json",
        "results/train/resnet18/cuda1/bf16/single/bs16.json",
    ]
    # Distributed training launches its own processes: it is measured alone.
    assert not any("ddp" in path for cells in groups.values() for path in cells.paths)
    grouped = [path for cells in groups.values() for path in cells.paths]
    assert len(grouped) == len(set(grouped))  # a cell belongs to one group at most
    assert all(
        cells.rule.startswith("compared_") and cells.rule.isidentifier()
        for cells in groups.values()
    )
    assert grid.measuring_family(matmul.rule).name == "kernel"
    assert grid.measuring_family("kernel_benchmark").name == "kernel"
    assert grid.measuring_family("tables") is None


def test_a_run_starts_with_its_largest_groups_so_its_first_job_tells_the_host_its_spread():
    """The first job of a fresh host is measured before the host knows its spread, and
    `make run` measures it again: one of rerun.LEAST_CELLS cells or more tells it at once."""
    groups = grid.comparison_groups(grid.expand(workflow_config.load([])).experiments)
    first = max(groups, key=lambda cells: cells.priority)
    assert first.priority == max(len(cells.experiments) for cells in groups)
    assert first.priority >= rerun.LEAST_CELLS


def test_a_group_job_asks_for_its_largest_cell_and_its_cells_time_one_after_another():
    devices = [parse_device(name) for name in ("cpu1", "cpu4", "cpu2")]
    assert cluster.group_device(devices).name == "cpu4"


def test_a_group_measures_its_cells_in_interleaved_rounds_each_keeping_its_record(tmp_path):
    exps = [kernel("numpy"), kernel("torch"), kernel("numba")]
    outputs = [str(tmp_path / f"{exp.backend}.json") for exp in exps]
    statuses = group.run_group(
        "kernel/cpu/saxpy/float32/64",
        exps,
        [SETTINGS] * len(exps),
        outputs,
        context=CONTEXT,
    )
    assert statuses == ["ok"] * 3
    records = [load_record(output) for output in outputs]
    memberships = [record["conditions"]["group"] for record in records]
    assert all(found == memberships[0] for found in memberships)  # one measurement of it
    rounds = memberships[0]["rounds"]
    assert len(rounds) == 3 and all(
        sorted(order) == sorted(exp.id for exp in exps) for order in rounds
    )
    for record in records:
        assert len(record["series"]["time_run_medians"]["values"]) == 3  # run i was in round i


def test_each_round_runs_its_cells_in_a_new_random_order():
    exps = [kernel(backend) for backend in ("numpy", "torch", "numba")]
    _, rounds = group.measure_group(
        exps, [SETTINGS] * 3, fresh_processes=False, rng=random.Random(7)
    )
    orders = {tuple(order) for order in rounds}
    assert len(orders) > 1  # with this seed the three rounds are not all alike
    again = group.measure_group(exps, [SETTINGS] * 3, fresh_processes=False, rng=random.Random(7))
    assert again[1] == rounds


def test_a_cell_that_fails_leaves_the_rounds_and_the_others_are_measured(tmp_path):
    exps = [kernel("numpy"), kernel("cupy")]  # no CuPy on this CPU: its first run says why
    outputs = [str(tmp_path / "good.json"), str(tmp_path / "bad.json")]
    statuses = group.run_group(
        "kernel/cpu/saxpy/float32/64", exps, [SETTINGS] * 2, outputs, context=CONTEXT
    )
    assert statuses == ["ok", "unavailable"]
    assert "run 1 of 3" in load_record(outputs[1])["reason"]
    good = load_record(outputs[0])
    assert [len(order) for order in good["conditions"]["group"]["rounds"]] == [2, 1, 1]


def test_a_cell_whose_goal_is_met_leaves_the_later_rounds(tmp_path):
    """Rounds replace the runs each cell took alone; they add none."""
    exps = [kernel("numpy"), kernel("torch")]
    settings = [SETTINGS, replace(SETTINGS, runs=4)]
    outcomes, rounds = group.measure_group(exps, settings, fresh_processes=False)
    assert [len(order) for order in rounds] == [2, 2, 2, 1]
    assert rounds[-1] == [exps[1].id]
    assert [outcome.conditions["runs"] for outcome in outcomes] == [3, 4]


@pytest.mark.workflow
def test_naming_one_record_of_a_group_measures_the_group_again(tmp_path):
    workflow = copy_workflow(tmp_path)
    target = "results/kernels/matmul/cpu1/numpy/float64/n32.json"
    done = snakemake(workflow, "--cores", "1", "--configfile", "config/tiny.yaml", "--", target)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    peer = workflow / "results/kernels/matmul/cpu1/torch/float64/n32.json"
    first = load_record(workflow / target)["conditions"]["group"]["measurement"]
    assert load_record(peer)["conditions"]["group"]["measurement"] == first
    again = snakemake(
        workflow, "--cores", "1", "--configfile", "config/tiny.yaml", "--force", "--", target
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert grid.group_rule("kernel/cpu/matmul/float64/32") in again.stdout + again.stderr
    measured = json.loads(peer.read_text())["conditions"]["group"]["measurement"]
    assert measured != first  # the whole group anew, its records from one measurement


def test_a_training_groups_cells_are_its_models_precisions_on_one_gpu():
    exps = [
        TrainExperiment("fcn", "cuda1", precision, "single", 8) for precision in ("fp32", "bf16")
    ]
    [cells] = grid.comparison_groups(exps)
    assert cells.id == "train/cuda/fcn/single/8"

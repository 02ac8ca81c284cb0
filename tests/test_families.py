"""The family registry: a new family is its declaration and one registration, and every part
of the workflow that plans, checks, measures and reads experiments finds it there."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from accelbench import grid
from accelbench.analysis import tidy
from accelbench.families import FAMILIES, base
from accelbench.families.base import (
    RESULTS_DIR,
    Expanded,
    Experiment,
    Family,
    GridError,
    choice,
    device_name,
    positive_int,
    raise_if_excluded,
)
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.measuring import statistics
from accelbench.measuring.outcome import Outcome
from accelbench.measuring.settings import ContentionSettings, RunSettings
from accelbench.records import record as results
from accelbench.run import progress
from accelbench.run import start as run_start

from conftest import REPO_ROOT

TOY_PATTERN = RESULTS_DIR + "/toys/{adder}/{device}/n{size}.json"
ADDERS = {"builtin": sum, "loop": None}


@dataclasses.dataclass(frozen=True)
class ToyExperiment(Experiment):
    """Adding up the integers below `size` with one adder: a family small enough to read."""

    adder: str
    device: str
    size: int

    family = "toy"
    pattern = TOY_PATTERN


def toy_exclusion(exp: ToyExperiment) -> str | None:
    return "the toy adders run on a CPU" if exp.device.startswith("cuda") else None


def parse_toy(wildcards, config=None) -> ToyExperiment:
    exp = ToyExperiment(
        adder=choice("adder", wildcards["adder"], ADDERS),
        device=device_name(wildcards["device"]),
        size=positive_int("size", wildcards["size"]),
    )
    return raise_if_excluded(exp, toy_exclusion(exp))


def expand_toy(config, planned=()) -> Expanded:
    section = config.get("toys") or {}
    candidates = [
        ToyExperiment(adder, device, size)
        for adder in section.get("adders", [])
        for device in section.get("devices", [])
        for size in section.get("sizes", [])
    ]
    return Expanded.judged(candidates, toy_exclusion)


def validate_toy(config) -> None:
    for adder in (config.get("toys") or {}).get("adders", []):
        if adder not in ADDERS:
            raise GridError(f"config key toys.adders: unknown adder {adder!r}")


@dataclasses.dataclass(frozen=True)
class ToySettings(RunSettings):
    """A toy's settings: the seed and goal every family has, and its own sample count."""

    samples: int = 5

    PARAMS = (*RunSettings.PARAMS, "samples")


def measure_toy(exp: ToyExperiment, settings: ToySettings) -> Outcome:
    """Time the sum with a library timer's clock; check it against the closed form."""

    def loop(values):
        total = 0
        for value in values:
            total += value
        return total

    add = ADDERS[exp.adder] or loop
    values = range(exp.size)
    times = []
    for _ in range(settings.samples):
        start = time.perf_counter()
        total = add(values)
        times.append(time.perf_counter() - start)
    expected = exp.size * (exp.size - 1) // 2
    return Outcome(
        "ok" if total == expected else "failed",
        None if total == expected else f"sum {total}, expected {expected}",
        metrics={"time": statistics.summarize(times, "s")},
        check={"passed": total == expected, "reference": "n(n-1)/2"},
    )


TOY = Family(
    name="toy",
    experiment_type=ToyExperiment,
    rule="toy_benchmark",
    resources="kernels",
    parse=parse_toy,
    expand=expand_toy,
    validate=validate_toy,
    settings=lambda config, wildcards=None: ToySettings(runs=3, budget_s=0),
    settings_type=ToySettings,
    measure=f"{__name__}:measure_toy",
    measures_energy=False,
    primary="adder",
    secondary=("size",),
    time_metric="time",
)
TOY_CONFIG = {
    "toys": {"adders": ["builtin", "loop"], "devices": ["cpu1", "cuda1"], "sizes": [1000]}
}


@pytest.fixture
def toy_registered(monkeypatch):
    monkeypatch.setitem(FAMILIES, "toy", TOY)


def test_a_registered_family_is_planned_checked_measured_and_tabled(toy_registered, tmp_path):
    config = {**grid_config(), **TOY_CONFIG}
    planned = grid.expand(config)
    toys = [exp for exp in planned.experiments if exp.family == "toy"]
    assert toys == [ToyExperiment("builtin", "cpu1", 1000), ToyExperiment("loop", "cpu1", 1000)]
    assert (ToyExperiment("loop", "cuda1", 1000), "the toy adders run on a CPU") in planned.excluded
    exp = toys[1]
    assert exp.path == "results/toys/loop/cpu1/n1000.json"
    assert grid.experiment_of_id(exp.id) == exp
    assert grid.cell_of_path(exp.path) == (
        "toy",
        exp.id,
        {"adder": "loop", "device": "cpu1", "size": "1000"},
    )
    assert (
        grid.planned_experiment(
            "toy_benchmark", {"adder": "loop", "device": "cpu1", "size": "1000"}
        )
        == exp
    )
    assert grid.target_check("toy", config)({"adder": "loop", "device": "cpu1", "size": "7"}) == []
    with pytest.raises(GridError, match="adder 'abacus' is not known"):
        grid.target_check("toy", config)({"adder": "abacus", "device": "cpu1", "size": "7"})
    with pytest.raises(GridError, match="unknown adder 'abacus'"):
        grid.validate_config({**config, "toys": {"adders": ["abacus"]}})
    assert grid.wildcard_constraints()["adder"] == grid.WILDCARD_CONSTRAINT

    folder = tmp_path / "results"
    for toy in toys:
        output = tmp_path / toy.path
        settings = TOY.settings(config, None)
        context = JobContext("toy")
        status = measurement.run(toy, settings, str(output), context=context, fresh_processes=True)
        assert status == "ok"
    record = results.load_record(tmp_path / exp.path)  # the record schema knows the family
    assert record["experiment"] == "toy" and record["metrics"]["time"]["n"] == 15  # 3 runs x 5
    assert record["conditions"]["runs"] == 3

    frame, problems = tidy.collect(sorted(str(path) for path in folder.rglob("*.json")))
    assert problems == []
    rows, _ = tidy.experiment_rows(frame, "toy")
    assert sorted(rows["label"]) == ["builtin", "loop"]
    assert (rows["time_median"] > 0).all()


def test_the_record_schema_names_exactly_the_registered_families(monkeypatch):
    def named():
        return results.record_schema()["properties"]["experiment"]["enum"]

    assert named() == ["kernel", "train", "roof", "datasci"]
    monkeypatch.setitem(FAMILIES, "toy", TOY)
    assert named() == ["kernel", "train", "roof", "datasci", "toy"]


def grid_config() -> dict:
    """The default config: the registered families plan from their own sections."""
    from accelbench import config

    return config.load([])


@pytest.mark.parametrize("name", list(FAMILIES))
def test_each_family_declares_a_rule_of_the_workflow_that_writes_its_records(name):
    family = FAMILIES[name]
    rules = "\n".join(path.read_text() for path in (REPO_ROOT / "workflow" / "rules").glob("*.smk"))
    rule = rules[rules.index(f"rule {family.rule}:") :]
    assert rule.split("\nrule ")[0].count(f'FAMILIES["{name}"].pattern') == 1
    assert family.pattern.startswith(RESULTS_DIR + "/") and family.pattern.endswith(".json")
    assert grid.planned_experiment(family.rule, example_wildcards(family)).family == name


def example_wildcards(family: Family) -> dict[str, str]:
    numbers = {"size", "batch"}
    return {
        field.name: "8" if field.name in numbers else "x"
        for field in dataclasses.fields(family.experiment_type)
    }


def test_the_declarations_import_neither_torch_nor_numba():
    """Every job's Snakemake reads them while it parses the Snakefile."""
    code = (
        "import sys, accelbench.families, accelbench.grid; "
        "print(sorted({'torch', 'numba'} & set(sys.modules)))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert found == "[]"


def job(rule: str, output: list[str], log: list[str]):
    return SimpleNamespace(
        rule=SimpleNamespace(name=rule), output=output, log=log, is_group=lambda: False
    )


def group(*members):
    return SimpleNamespace(jobs=list(members), is_group=lambda: True)


def test_a_run_keeps_the_records_and_logs_it_is_about_to_replace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kernel = "results/kernels/matmul/cpu1/numpy/float64/n8.json"
    roof = "results/roofs/cpu1/float64.json"
    logs = [
        "results/logs/kernels/matmul/cpu1/numpy/float64/n8.log",
        "results/logs/roofs/cpu1/float64.log",
    ]
    for path in (kernel, roof, *logs, "results/tidy.parquet"):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(path)
    jobs = [
        group(job("kernel_benchmark", [kernel], logs[:1]), job("roof_benchmark", [roof], logs[1:])),
        job("tidy", ["results/tidy.parquet"], []),
    ]
    assert run_start.experiment_files(jobs) == [kernel, logs[0], roof, logs[1]]
    planned = grid.Grid(tuple(grid.experiment_of_id(p[8:-5]) for p in (kernel, roof)), ())
    message = run_start.start(jobs, planned, Path("results"))
    assert message == progress.plan_message([kernel, roof], planned)
    (kept,) = Path("results/replaced").iterdir()
    copies = sorted(str(path.relative_to(kept)) for path in kept.rglob("*") if path.is_file())
    assert copies == sorted(path.removeprefix("results/") for path in (kernel, roof, *logs))
    assert Path(kernel).read_text() == kernel  # copied, not moved: Snakemake removes it


def test_the_fork_server_imports_for_the_families_a_run_measures_and_none_for_no_experiment():
    kernel = job("kernel_benchmark", ["results/kernels/matmul/cpu1/numpy/float64/n8.json"], [])
    roof = job("roof_benchmark", ["results/roofs/cpu1/float64.json"], [])
    tidy = job("tidy", ["results/tidy.parquet"], [])
    assert run_start.measured_families([group(roof, kernel), tidy]) == ["kernel", "roof"]
    assert run_start.measured_families([tidy]) == []


HOOKS = ("measure", "later_runs", "prepare", "preload", "record_params")


@pytest.mark.parametrize("name", list(FAMILIES))
def test_each_hook_a_family_declares_is_a_function_of_its_module(name):
    family = FAMILIES[name]
    for hook in HOOKS:
        named = getattr(family, hook)
        if named is None:
            continue
        module, function = named.split(":")
        assert callable(base._imported(named)), f"{name}.{hook}: {module} has no {function}"
    assert base.family_of(family.experiment_type(**example_parameters(family))) is family


def example_parameters(family) -> dict:
    """A parameter set of the family's experiment type (not checked against its grid)."""
    return {
        field.name: 1 if field.type == "int" else "cpu1" if field.name == "device" else "x"
        for field in dataclasses.fields(family.experiment_type)
    }


def test_a_family_is_found_by_the_type_its_experiments_are_built_from():
    exp = FAMILIES["roof"].experiment_type("cpu1", "float32")
    named = base.experiment_type_name(exp)
    assert named == "accelbench.families.roof:RoofExperiment"
    assert base.experiment_from(named, {"device": "cpu1", "dtype": "float32"}) == exp
    assert base.family_of(exp) is FAMILIES["roof"]


def test_only_a_family_that_repeats_its_runs_itself_measures_them_in_one_call(monkeypatch):
    """Where runs may not fork, the job chain calls the measuring function once for such a
    family (training: its loop repeats its runs), and once per run for the others."""
    calls = []

    def measure(exp, settings):
        calls.append(settings.runs)
        return Outcome("ok", metrics={"time": statistics.summarize([1.0, 1.1, 0.9], "s")})

    settings = ToySettings(runs=3, budget_s=0.0, contention=ContentionSettings(retries=0))
    for repeats, expected in ((False, [3, 3, 3]), (True, [3])):
        declared = dataclasses.replace(TOY, repeats_runs_itself=repeats)
        monkeypatch.setattr(base, "_DECLARED", {**base._DECLARED, "toy": declared})
        monkeypatch.setattr(base.Family, "measuring_function", lambda self: measure)
        calls.clear()
        measurement._in_runs(ToyExperiment("loop", "cpu1", 10), settings, fresh_processes=False)
        assert calls == expected

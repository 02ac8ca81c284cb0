"""A unit of the user's is measured by the job chain as a built-in is: in the job's own process
(forked by the fork server, which loaded no folder of the user's), and whatever it does wrong
(raise, NaN, the wrong shape or dtype, past the time limit) ends in a record that says so."""

from __future__ import annotations

import logging
import os
from dataclasses import replace

import pytest

from accelbench import registry
from accelbench.analysis import tidy
from accelbench.families.datasci import DatasciExperiment, DatasciSettings
from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.families.train import TrainExperiment
from accelbench.job import fork_server, supervisor
from accelbench.job.context import JobContext
from accelbench.records.record import load_record
from accelbench.train.loop import measure_training
from accelbench.train.settings import TrainSettings

import plugin_folders

SETTINGS = KernelSettings(min_run_time=0.01, samples=3, warmup_s=0.0)
TRAIN_SETTINGS = TrainSettings(seed=0, steps=2, warmup_steps=1)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One fork server for the module's jobs, started as a run starts it: with no folder of
    the user's loaded. (pytest names the test phase in the environment, which would make
    the server refuse each job: the tests run without it.)"""
    os.environ.pop("PYTEST_CURRENT_TEST", None)
    fork_server.start(tmp_path_factory.mktemp("server") / "fork_server.log")
    yield
    fork_server.stop()


@pytest.fixture
def served(server, monkeypatch, caplog):
    """The jobs' log; each job's environment is the server's (job() leaves out the phase)."""
    with caplog.at_level(logging.INFO, logger="accelbench.job"):
        yield monkeypatch
    registry.use_plugins([])


def job(served, exp, settings, folder, tmp_path, time_limit: float = 300) -> dict:
    """Run `exp` as a job of the workflow does, its context naming the plugin folder."""
    served.delenv("PYTEST_CURRENT_TEST", raising=False)
    out = tmp_path / "results" / f"{exp.id}.json"
    supervisor.run_supervised(
        exp,
        settings,
        str(out),
        context=JobContext.of("t", [str(folder)] if folder else []),
        attempt=1,
        max_attempts=1,
        time_limit=time_limit,
    )
    return load_record(out)


def twice(name: str, dtype: str = "float64") -> KernelExperiment:
    return KernelExperiment(name, "cpu1", "numpy", dtype, 64)


def test_a_job_measures_a_kernel_of_the_users_and_records_where_it_came_from(
    tmp_path, served, caplog
):
    folder = tmp_path / "units"
    file = plugin_folders.kernel(folder, "twice")
    record = job(served, twice("twice"), replace(SETTINGS, runs=3), folder, tmp_path)
    assert record["status"] == "ok", record["reason"]
    assert "forked by the fork server" in caplog.text
    registry.use_plugins([folder])
    assert record["unit"] == registry.units("kernels")["twice"].as_record()
    assert record["unit"]["origin"] == str(folder) and record["unit"]["files"] == [str(file)]
    assert record["measured_by"]["implementation"].endswith(".kernels.twice:numpy")
    assert record["conditions"]["runs"] == 3  # each run forked from the job's process
    assert "plugins" not in record["params"]


def test_a_job_started_as_a_new_interpreter_loads_the_users_units_too(tmp_path, served, caplog):
    """As on Slurm, where each job's measuring process (each srun task's) starts afresh."""
    served.delenv(fork_server.ADDRESS_VARIABLE)
    plugin_folders.kernel(tmp_path / "units", "twice")
    record = job(served, twice("twice"), SETTINGS, tmp_path / "units", tmp_path)
    assert record["status"] == "ok", record["reason"]
    assert "forked by the fork server" not in caplog.text
    assert record["unit"]["origin"] == str(tmp_path / "units")


def test_a_built_in_kernels_record_names_the_package_as_its_origin(tmp_path, served):
    exp = KernelExperiment("saxpy", "cpu1", "numpy", "float64", 64)
    record = job(served, exp, SETTINGS, None, tmp_path)
    assert record["unit"]["origin"] == "builtin"
    assert record["unit"]["files"] == ["accelbench/kernels/saxpy.py"]


PLANTED = {
    "raises": ({"run": "raise ValueError('planted')"}, "ValueError: planted"),
    "nan": (
        {"run": "out.fill(np.nan)"},
        "result differs from the float64 reference: normwise relative error inf > tolerance 0",
    ),
    "shape": ({"fetch": "out[1:].copy()"}, "normwise relative error inf > tolerance 0"),
    "dtype": ({"fetch": "out.astype(np.float64)"}, "result in float64, not in float32 as asked"),
}


@pytest.mark.parametrize("fault", PLANTED)
def test_a_kernel_of_the_users_that_goes_wrong_gives_a_record_that_says_how(
    tmp_path, served, fault
):
    parts, reason = PLANTED[fault]
    plugin_folders.kernel(tmp_path / "units", "planted", **parts)
    record = job(served, twice("planted", "float32"), SETTINGS, tmp_path / "units", tmp_path)
    assert record["status"] == "failed"
    assert reason in record["reason"]
    assert record["unit"]["origin"] == str(tmp_path / "units")
    assert record["metrics"] == {}
    if fault == "dtype":
        assert record["check"]["output_dtype"] == "float64"
        assert record["check"]["dtype"] == "float32"


@pytest.mark.waits
def test_a_kernel_of_the_users_that_runs_past_the_time_limit_gives_a_record_that_says_so(
    tmp_path, served
):
    plugin_folders.kernel(tmp_path / "units", "stuck", run="time.sleep(600)")
    record = job(served, twice("stuck"), SETTINGS, tmp_path / "units", tmp_path, time_limit=20)
    assert record["status"] == "failed"
    assert record["reason"].startswith("exceeded the job's time limit: stopped after 20 s")
    assert record["transient"] is True  # measured again by the next run
    assert record["unit"]["origin"] == str(tmp_path / "units")


def test_a_workload_of_the_users_that_raises_gives_a_failed_record(tmp_path, served):
    plugin_folders.workload(tmp_path / "units", "clip", compute="raise KeyError('x')")
    exp = DatasciExperiment("clip", "cpu1", "pandas", 100)
    settings = DatasciSettings(min_run_time=0.01, samples=3)
    record = job(served, exp, settings, tmp_path / "units", tmp_path)
    assert record["status"] == "failed"
    assert record["reason"] == "KeyError: 'x'"


def test_a_model_of_the_users_whose_loss_turns_nan_gives_a_failed_record(tmp_path, served):
    plugin_folders.model(
        tmp_path / "units", "linear", loss="return lambda output, target: output.sum() * np.nan"
    )
    source = tmp_path / "units" / "models" / "linear.py"
    source.write_text("import numpy as np\n" + source.read_text())
    exp = TrainExperiment("linear", "cpu1", "fp32", "single", 8)
    record = job(served, exp, TRAIN_SETTINGS, tmp_path / "units", tmp_path)
    assert record["status"] == "failed"
    assert record["reason"].startswith("loss is not finite during the measured steps")
    assert record["unit"]["files"] == [str(source)]


def test_the_tidy_table_holds_the_users_cells_whatever_they_came_to(tmp_path, served):
    folder = tmp_path / "units"
    plugin_folders.kernel(folder, "twice")
    plugin_folders.kernel(folder, "planted", run="raise ValueError('planted')")
    for name in ("twice", "planted"):
        job(served, twice(name), SETTINGS, folder, tmp_path)
    frame, problems = tidy.collect(sorted(map(str, (tmp_path / "results").rglob("*.json"))))
    assert problems == []
    rows = frame.set_index("kernel")
    assert rows.loc["twice", "status"] == "ok"
    assert rows.loc["planted", "status"] == "failed"
    assert set(rows["unit_origin"]) == {str(folder)}
    assert rows["unit_digest"].str.fullmatch("[0-9a-f]{16}").all()


def test_torchrun_ranks_load_the_users_model_from_the_folder_the_job_has(tmp_path, caplog):
    """Measured here (a process that may not fork its ranks), ddp starts them under torchrun:
    new interpreters, which load the catalogue of this process."""
    plugin_folders.model(tmp_path / "units", "linear")
    registry.use_plugins([tmp_path / "units"])
    caplog.set_level(logging.INFO, logger="accelbench.train.distributed")
    try:
        outcome = measure_training(
            TrainExperiment("linear", "cpu2", "fp32", "ddp", 4), TRAIN_SETTINGS
        )
    finally:
        registry.use_plugins([])
    assert outcome.status == "ok", outcome.reason
    assert outcome.metrics["processes"]["value"] == 2
    assert "-m torch.distributed.run" in caplog.text

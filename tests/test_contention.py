"""The guard against a busy machine, and measuring in independent runs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.measuring import contention, statistics
from accelbench.measuring.settings import ContentionSettings
from accelbench.records.record import load_record

# Every test here reads the machine's load: `make test` runs them alone (marker quiet).
pytestmark = pytest.mark.quiet

BURN = "import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass\n"


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def foreign_burner(seconds: float, env: dict[str, str] | None = None) -> int:
    """A CPU-bound process that is not ours: started through a shell that exits at once,
    so it is re-parented and is no descendant of this process. Returns its pid."""
    done = subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -c "$BURN" >/dev/null 2>&1 & echo $!'],
        env={**os.environ, **(env or {}), "BURN": BURN.format(seconds=seconds)},
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.strip())


@pytest.fixture
def burner():
    started: list[int] = []

    def start(seconds: float = 5.0, env: dict[str, str] | None = None) -> int:
        pid = foreign_burner(seconds, env)
        started.append(pid)
        time.sleep(0.2)  # let it start burning before the window opens
        return pid

    yield start
    for pid in started:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_own_work_and_own_children_are_not_contention():
    watch = contention.Watch()
    spin(0.5)
    child = subprocess.Popen([sys.executable, "-c", BURN.format(seconds=0.7)])
    child.wait()
    seen = watch.stop()
    # This process and its child were busy for about 1.2 s; none of that is "other".
    assert seen.other_cpus < 0.5, seen
    assert seen.window_s >= 1.0
    assert seen.cpus_online >= 1 and seen.load_average_1m >= 0


def test_a_busy_loop_of_another_process_is_detected(burner):
    burner(seconds=5.0)
    watch = contention.Watch()
    time.sleep(1.0)
    seen = watch.stop()
    assert seen.other_cpus > 0.6, seen
    assert seen.contention >= seen.other_cpus


def test_tasks_of_the_same_slurm_job_are_not_contention(burner, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "424242")
    burner(seconds=5.0, env={"SLURM_JOB_ID": "424242"})
    watch = contention.Watch()
    time.sleep(1.0)
    assert watch.stop().other_cpus < 0.5


def quick_measure(exp, settings):
    spin(0.2)
    return measurement.Outcome("ok", metrics={"time": statistics.summarize([1.0, 1.1, 1.2], "s")})


SAXPY = KernelExperiment("saxpy", "cpu1", "numpy", "float64", 1000)


def test_a_busy_measurement_is_retried_and_then_flagged(burner, monkeypatch):
    calls = []

    def measure(exp, settings):
        calls.append(time.perf_counter())
        return quick_measure(exp, settings)

    monkeypatch.setattr("accelbench.kernels.measure.measure_kernel", measure)
    burner(seconds=10.0)
    guard = ContentionSettings(max_other_cpus=0.3, retries=1, pause_s=0.5)
    outcome = measurement.measure_watched(SAXPY, KernelSettings(contention=guard))
    assert len(calls) == 2 and calls[1] - calls[0] >= 0.5  # measured again after the pause
    assert outcome.status == "ok"
    assert outcome.conditions["busy"] is True
    assert outcome.conditions["attempts"] == 2
    assert outcome.conditions["max_other_cpus"] == 0.3
    assert outcome.conditions["other_cpus"] > 0.3


def test_a_quiet_measurement_is_taken_once_and_not_flagged(monkeypatch):
    monkeypatch.setattr("accelbench.kernels.measure.measure_kernel", quick_measure)
    # A generous limit: the test machine itself may run daemons.
    guard = ContentionSettings(max_other_cpus=0.9)
    outcome = measurement.measure_watched(SAXPY, KernelSettings(contention=guard))
    assert outcome.conditions["busy"] is False
    assert outcome.conditions["attempts"] == 1


def test_the_record_keeps_the_conditions_and_the_interval_method(tmp_path):
    settings = KernelSettings(
        min_run_time=0.01, samples=3, runs=2, contention=ContentionSettings(max_other_cpus=64.0)
    )
    output = tmp_path / "record.json"
    assert measurement.run(SAXPY, settings, str(output), context=JobContext("t")) == "ok"
    record = load_record(output)
    assert record["conditions"]["busy"] is False
    assert {"other_cpus", "steal_cpus", "load_average_1m", "cpu_mhz", "governor"} <= set(
        record["conditions"]
    )
    assert record["params"]["runs"] == 2
    assert record["params"]["interval"] == statistics.RERUN_INTERVAL
    assert record["metrics"]["time"]["runs"] == 2 and record["metrics"]["time"]["n"] == 6
    assert len(record["series"]["time_run_medians"]["values"]) == 2


def test_each_run_can_be_a_fresh_process(monkeypatch):
    pids = []

    def measure(exp, settings):
        return measurement.Outcome(
            "ok",
            metrics={"time": statistics.summarize([1.0, 2.0, 3.0], "s")},
            params={"pid": os.getpid()},
        )

    for _ in range(2):
        outcome = measurement.in_fresh_process(measure, SAXPY, KernelSettings())
        pids.append(outcome.params["pid"])
    assert len(set(pids)) == 2 and os.getpid() not in pids


def test_a_run_whose_process_is_killed_ends_as_a_failure_not_a_hang():
    def measure(exp, settings):
        os.kill(os.getpid(), signal.SIGTERM)

    outcome = measurement.in_fresh_process(measure, SAXPY, KernelSettings())
    assert outcome.status == "failed"
    assert "killed by SIGTERM" in outcome.reason
    assert outcome.raised


def test_a_run_whose_process_exits_without_an_outcome_is_a_failure(tmp_path):
    def measure(exp, settings):
        os._exit(5)

    outcome = measurement.in_fresh_process(measure, SAXPY, KernelSettings())
    assert outcome.status == "failed"
    assert outcome.reason.startswith(
        "the run's process exited with code 5 without a record or an error of its own"
    )
    assert outcome.transient, "an exit without a word is a passing fault, measured again"
    assert outcome.raised and outcome.metrics == {}
    measurement.write_outcome(
        SAXPY, KernelSettings(), tmp_path / "r.json", outcome, "", JobContext("h")
    )
    assert load_record(tmp_path / "r.json")["status"] == "failed"


def test_a_failed_run_fails_the_experiment_naming_the_run(monkeypatch):
    outcomes = iter(
        [
            measurement.Outcome("ok", metrics={"time": statistics.summarize([1.0, 1.0, 1.0], "s")}),
            measurement.Outcome("failed", "result differs from the float64 reference"),
        ]
    )
    monkeypatch.setattr(
        "accelbench.kernels.measure.measure_kernel",
        lambda e, s: next(outcomes),
    )
    outcome = measurement._in_runs(SAXPY, KernelSettings(runs=3), fresh_processes=False)
    assert outcome.status == "failed"
    assert outcome.reason == "run 2 of 3: result differs from the float64 reference"


def test_the_workflow_that_started_the_measurement_is_counted_apart():
    """A parent busy while its child measures (Snakemake's bookkeeping on a free core)."""
    script = textwrap.dedent(
        """
        import json, time
        from accelbench.measuring import contention
        watch = contention.Watch()
        time.sleep(1.0)
        print(json.dumps(watch.stop().as_record()))
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    spin(1.5)  # the parent works while the child watches
    seen = json.loads(child.communicate()[0])
    assert seen["workflow_cpus"] > 0.5, seen
    assert seen["other_cpus"] < 0.5, seen


def conditions(window_s: float, other_cpus: float) -> contention.Conditions:
    return contention.Conditions(
        window_s=window_s,
        other_cpus=other_cpus,
        workflow_cpus=0.0,
        steal_cpus=0.0,
        load_average_1m=0.0,
        cpus_online=2,
        cpu_mhz=None,
        governor=None,
        resolution_cpus=2 / (contention.CLOCK_TICKS * window_s),
    )


def test_a_window_too_short_to_resolve_the_limit_is_not_called_busy():
    # 20 ms on 2 CPUs at 100 ticks/s: one tick of a daemon reads as 0.5 CPUs.
    assert not conditions(0.02, 0.5).busier_than(0.25)
    # Over 2 s the counters resolve 0.01 CPUs: the same reading is a busy machine.
    assert conditions(2.0, 0.5).busier_than(0.25)
    assert not conditions(2.0, 0.2).busier_than(0.25)


def test_a_watch_records_the_resolution_of_its_window():
    watch = contention.Watch()
    time.sleep(0.3)
    seen = watch.stop()
    assert seen.resolution_cpus == pytest.approx(
        seen.cpus_online / (contention.CLOCK_TICKS * seen.window_s)
    )
    assert seen.as_record()["resolution_cpus"] == seen.resolution_cpus

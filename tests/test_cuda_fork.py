"""A process that forks runs never touches the CUDA driver, so the runs it forks can use CUDA.

torch marks every child of a process that has asked the driver anything (even
torch.cuda.is_available(), which torch.utils.cpp_extension asks at import when
CUDA_HOME, nvcc or /usr/local/cuda is there) as a bad fork, in which CUDA cannot
start; the flag is set on a machine without a GPU too, so it is checked here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from accelbench.families.base import experiment_type_name
from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.job import fork_server
from accelbench.job.context import JobContext
from accelbench.platform import forked_cuda
from accelbench.records.record import load_record

REPO_ROOT = Path(__file__).resolve().parents[1]
# What every GPU node has after `module load cuda`: torch then asks the driver on import
# of torch.utils.cpp_extension.
CUDA_HOME = "/usr/local/cuda"

PRELOAD_THEN_RUN = textwrap.dedent(
    """
    import json, sys
    import torch
    from accelbench.job import measurement
    from accelbench.families import FAMILIES
    from accelbench.families.kernel import KernelExperiment
    from accelbench.measuring.outcome import Outcome

    def measure(exp, settings):
        return Outcome("ok", params={"bad_fork": torch.cuda._is_in_bad_fork()})

    measurement.preload(*(FAMILIES.values() if sys.argv[1] == "all" else [FAMILIES[sys.argv[1]]]))
    exp = KernelExperiment("matmul", "cuda1", "torch", "float32", 8)
    print("RESULT " + json.dumps(measurement.in_fresh_process(measure, exp, {}).params))
    """
)


def run_python(script: str, *args: str, **environment: str):
    """`script` in a new interpreter with this checkout's package and CUDA_HOME set."""
    source = [str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH")]
    pythonpath = os.pathsep.join(filter(None, source))
    env = {**os.environ, "PYTHONPATH": pythonpath, "CUDA_HOME": CUDA_HOME, **environment}
    done = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout + done.stderr
    return json.loads(lines[-1].removeprefix("RESULT "))


@pytest.mark.parametrize("family", ["all", "kernel", "train", "datasci"])
def test_a_run_forked_after_the_preload_can_still_use_cuda(family):
    assert run_python(PRELOAD_THEN_RUN, family) == {"bad_fork": False}


DOCTOR_AFTER_A_PRELOAD = textwrap.dedent(
    """
    import json, os, sys
    import torch
    from accelbench.platform import doctor

    def preload():
        os.environ["PRELOADED"] = "yes"
        if sys.argv[1] == "initialises-cuda":
            torch.cuda.is_available()

    def probe(kernel_gpu):
        seen = f"{os.getpid()} {os.environ.get('PRELOADED')}"
        return doctor.BackendReport("torch", True, "1.0", seen)

    diagnosis = doctor.diagnose(doctor.Driver(note="none"), {"torch": probe}, preload)
    report = diagnosis.backends[0]
    print("RESULT " + json.dumps({
        "asker": os.getpid(), "seen": report.cuda, "problem": report.problem,
        "exit_code": diagnosis.exit_code, "verdict": doctor.render(diagnosis).splitlines()[-1],
    }))
    """
)


def test_the_doctor_checks_each_backend_in_a_child_forked_after_the_imports():
    found = run_python(DOCTOR_AFTER_A_PRELOAD, "leaves-cuda-alone")
    pid, preloaded = found["seen"].split()
    assert int(pid) != found["asker"] and preloaded == "yes"
    assert (found["problem"], found["exit_code"]) == (None, 0)


def test_imports_that_initialise_cuda_fail_the_doctor_even_without_a_gpu():
    found = run_python(DOCTOR_AFTER_A_PRELOAD, "initialises-cuda")
    assert found["problem"] == forked_cuda.BAD_FORK
    assert found["exit_code"] == 1
    assert found["verdict"] == (
        "The imports before the runs fork initialise CUDA: no forked run can use a GPU."
    )


LAUNCHER = textwrap.dedent(
    """
    import functools, json, os, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from fake_torch_cuda import T4, FakeTorch
    from accelbench.platform import doctor
    from accelbench.families.train import TrainExperiment
    from accelbench.train import loop
    from accelbench.train.settings import TrainSettings

    fake = FakeTorch([T4, T4], Path(sys.argv[2]))
    doctor.PROBES["torch"] = functools.partial(doctor.probe_torch, torch=fake)
    settings = TrainSettings(seed=0, steps=3, warmup_steps=1, image_size=32)
    exp = TrainExperiment("resnet18", "cuda2", "tf32", "ddp", 4)
    outcome = loop.measure_training(exp, settings)
    print("RESULT " + json.dumps({
        "launcher": os.getpid(), "status": outcome.status, "launches": fake.launched(),
    }))
    """
)


def test_the_process_that_launches_the_ranks_runs_no_kernel_itself(tmp_path):
    """Its check's kernel runs in a child: a context the launcher kept on GPU 0 would keep
    rank 0 off that GPU in EXCLUSIVE_PROCESS mode (T4s refuse tf32, so nothing launches)."""
    found = run_python(LAUNCHER, str(REPO_ROOT / "tests"), str(tmp_path / "launches"))
    assert found["status"] == "unavailable"
    [(pid, device)] = found["launches"]
    assert device == "cuda:0" and pid != found["launcher"]


FORKED_FROM_A_CUDA_PROCESS = textwrap.dedent(
    """
    import json
    import torch
    from accelbench.job import measurement
    from accelbench.families import FAMILIES
    from accelbench.families.kernel import KernelExperiment, KernelSettings

    torch.cuda.is_available()  # this process has asked the driver: its children cannot use CUDA
    exp = KernelExperiment("matmul", "cuda1", "torch", "float32", 8)
    settings = KernelSettings(min_run_time=0.01, samples=3, runs=2)
    outcome = measurement.measure_watched(exp, settings, fresh_processes=True)
    print("RESULT " + json.dumps([outcome.status, outcome.reason]))
    """
)


def test_a_gpu_run_forked_from_a_process_that_initialised_cuda_fails_naming_the_cause():
    """Not "unavailable": that would lose every GPU result of the job without a word."""
    status, reason = run_python(FORKED_FROM_A_CUDA_PROCESS)
    assert status == "failed"
    assert reason == f"run 1 of 2: CudaForkError: {forked_cuda.BAD_FORK}"


def test_a_gpu_experiment_through_the_fork_server_reaches_its_runs_fork_safe(tmp_path, monkeypatch):
    """Fork server, measuring process, forked runs: here, without a GPU, the record says so
    (it would say the runs cannot use CUDA had anything before them initialised it)."""
    monkeypatch.setenv("CUDA_HOME", CUDA_HOME)
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    exp = KernelExperiment("matmul", "cuda1", "torch", "float32", 8)
    settings = KernelSettings(min_run_time=0.01, samples=3, runs=2)
    payload = {
        "family": exp.family,
        "experiment_type": experiment_type_name(exp),
        "experiment": asdict(exp),
        "settings": settings.as_params(),
        "context": JobContext("t").as_payload(),
        "output": str(tmp_path / "r.json"),
        "final": True,
        "log_file": None,
        "failure_dir": None,
        "deadline": time.time() + 600,
    }
    fork_server.start(tmp_path / "fork_server.log")
    try:
        served = fork_server.request(payload)
        assert served is not None
        assert served.wait(300) == 0
    finally:
        fork_server.stop()
    record = load_record(tmp_path / "r.json")
    assert (record["status"], record["reason"]) == (
        "unavailable",
        "run 1 of 2: no CUDA device available to PyTorch on this host",
    )

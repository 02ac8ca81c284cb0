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
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# What every GPU node has after `module load cuda`: torch then asks the driver on import
# of torch.utils.cpp_extension.
CUDA_HOME = "/usr/local/cuda"

PRELOAD_THEN_RUN = textwrap.dedent(
    """
    import json, sys
    import torch
    from accelbench import experiment
    from accelbench.grid import KernelExperiment
    from accelbench.outcome import Outcome

    def measure(exp, settings):
        return Outcome("ok", params={"bad_fork": torch.cuda._is_in_bad_fork()})

    experiment.preload(None if sys.argv[1] == "all" else sys.argv[1])
    exp = KernelExperiment("matmul", "cuda1", "torch", "float32", 8)
    print("RESULT " + json.dumps(experiment._in_fresh_process(measure, exp, {}).params))
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

"""`accelbench new` writes a unit that runs as it is, with its config and its test;
`accelbench check` holds a unit to its contract and runs each backend it has here once,
naming every problem by file and field."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from accelbench import cli, registry

import plugin_folders

ACCELBENCH = [sys.executable, "-m", "accelbench.cli"]


@pytest.fixture(autouse=True)
def only_built_ins_after():
    yield
    registry.use_plugins([])


def accelbench(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACCELBENCH, *args], cwd=cwd, capture_output=True, text=True)


@pytest.mark.parametrize(
    ("what", "name", "beside"),
    [("kernel", "axpby", "saxpy"), ("workload", "mean-by-key", "groupby"), ("model", "mlp", "fcn")],
)
def test_new_then_check_passes_outside_the_checkout_and_the_config_runs_only_it_and_one_built_in(
    tmp_path, what, name, beside
):
    made = accelbench("new", what, name, "--dir", "units", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    config = tmp_path / "units" / f"{name}.yaml"
    assert f"accelbench check {name} --configfile units/{name}.yaml" in made.stdout
    checked = accelbench("check", "--configfile", str(config), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.splitlines()[0].endswith(": ok")
    assert checked.stdout.splitlines()[-1] == "1 unit(s) checked, 0 problem(s)"
    planned = accelbench("grid", "--configfile", str(config), cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    units = {path.split("/")[2] for path in planned.stdout.split() if "/roofs/" not in path}
    assert units == {name, beside}
    assert "WARNING" not in planned.stderr  # no default unit kept by the merge
    assert yaml.safe_load(config.read_text())["plugins"] == {"paths": ["."]}


def test_the_test_new_writes_passes(tmp_path):
    assert accelbench("new", "kernel", "axpby", cwd=tmp_path).returncode == 0
    test = tmp_path / "my_benchmarks" / "tests" / "test_axpby.py"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("two words", "kernel name 'two words' cannot be one part of a result path"),
        ("saxpy", "a kernel named 'saxpy' exists already: accelbench/kernels/saxpy.py (builtin)"),
    ],
)
def test_new_refuses_a_name_it_cannot_give(tmp_path, monkeypatch, capsys, name, message):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["new", "kernel", name]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "my_benchmarks").exists()


def test_new_writes_nothing_over_a_file_that_exists(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_benchmarks").mkdir()
    (tmp_path / "my_benchmarks" / "axpby.yaml").write_text("mine\n")
    assert cli.main(["new", "kernel", "axpby"]) == 2
    assert "my_benchmarks/axpby.yaml exists already: nothing written" in capsys.readouterr().err
    assert not (tmp_path / "my_benchmarks" / "kernels").exists()


def plugin_config(tmp_path) -> str:
    config = tmp_path / "units.yaml"
    config.write_text("plugins: {paths: [units]}\n")
    return str(config)


def test_check_names_each_problem_with_file_and_field_and_exits_1(tmp_path, capsys):
    file = plugin_folders.kernel(tmp_path / "units", "twice", run="np.multiply(x, 3, out=out)")
    assert cli.main(["check", "--configfile", plugin_config(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"kernel twice ({file}): 2 problem(s)"
    assert out[1] == "  ran here: numpy"
    assert out[2:4] == [
        f"  {file}: kernel twice: implementations.numpy: in {dtype}, n=8: result differs from "
        "the float64 reference: normwise relative error 0.5 > tolerance 0"
        for dtype in ("float64", "float32")
    ]
    assert out[-1] == "1 unit(s) checked, 2 problem(s)"


def test_check_names_the_line_of_the_users_code_that_raised(tmp_path, capsys):
    file = plugin_folders.kernel(tmp_path / "units", "twice", run="raise ValueError('planted')")
    assert cli.main(["check", "twice", "--configfile", plugin_config(tmp_path)]) == 1
    line = next(
        number
        for number, text in enumerate(file.read_text().splitlines(), start=1)
        if "planted" in text
    )
    assert (
        f"  {file}: kernel twice: implementations.numpy: in float64: raised ValueError: "
        f"planted (line {line})"
    ) in capsys.readouterr().out.splitlines()


def test_check_runs_numba_cuda_code_under_the_cuda_simulator_with_the_users_folder(
    tmp_path, capsys
):
    """Its kernel copies x where it should double it: the simulator's run, in a process of
    its own that loads the same folder, finds it."""
    source = plugin_folders.KERNEL.format(name="twice", run=plugin_folders.TWICE, fetch="out")
    source += """
from numba import cuda

from accelbench.kernels import grid_1d, numba_cuda_prepared


@cuda.jit
def copy(x, out):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        out[i] = x[i]


def prepare_numba_cuda(inputs, device):
    blocks, threads = grid_1d(inputs[0].size)
    launch = lambda x, out: copy[blocks, threads](x, out)
    return numba_cuda_prepared(inputs, launch, inputs[0].shape, inputs[0].dtype)


SPEC.implementations["numba-cuda"] = prepare_numba_cuda
SPEC = dataclasses.replace(SPEC, device_kinds=("cpu", "cuda"))
"""
    file = plugin_folders.write_unit(
        tmp_path / "units", "kernels", "twice", "import dataclasses\n" + source
    )
    assert cli.main(["check", "twice", "--configfile", plugin_config(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "ran here: numpy, numba-cuda (CUDA simulator)" in out
    assert (
        f"{file}: kernel twice: implementations.numba-cuda: in float64, n=8: result differs"
    ) in out


CHECK_SAXPY = """\
import json
from accelbench import contracts

checked = contracts.check_unit("kernels", "saxpy")
print("CHECKED " + json.dumps([[str(problem) for problem in checked.problems], checked.ran]))
"""


def test_check_of_a_built_in_runs_every_backend_it_has_here():
    """CuPy's code with NumPy standing in, Numba-CUDA's under the simulator; in an interpreter
    of its own, as the command's: checking JAX's code starts its client, and Numba's parallel
    code its OpenMP threads, neither of which this process may keep."""
    done = subprocess.run(
        [sys.executable, "-c", CHECK_SAXPY], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("CHECKED "))
    problems, ran = json.loads(line.removeprefix("CHECKED "))
    assert problems == []
    assert "cupy (NumPy standing in for CuPy)" in ran
    assert "numba-cuda (CUDA simulator)" in ran
    assert {"numpy", "numba", "numba-parallel", "torch (CPU)", "python", "jax (CPU)"} <= set(ran)


def test_check_of_a_name_no_unit_has_exits_1(capsys):
    assert cli.main(["check", "nothing-here"]) == 1
    assert "no kernel, workload or model is named 'nothing-here'" in capsys.readouterr().err


def test_check_with_no_unit_of_the_users_says_there_is_nothing_to_check(capsys):
    assert cli.main(["check"]) == 1
    assert "nothing to check" in capsys.readouterr().err


def test_check_names_the_file_of_a_module_that_fails_to_import(tmp_path, capsys):
    file = plugin_folders.write_unit(tmp_path / "units", "models", "broken", "import nowhere\n")
    assert cli.main(["check", "--configfile", plugin_config(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        f"accelbench: {file}, line 1: cannot be imported: ModuleNotFoundError: "
        "No module named 'nowhere'\n"
    )

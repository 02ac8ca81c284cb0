"""Config files that would blow up are refused in a few lines that name the file and the key."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelbench import cli, grid
from accelbench import config as workflow_config

from conftest import snakemake

# 374 bytes: eight anchors, each a list of nine of the one before, 9**8 = 43 million numbers.
ALIAS_BOMB = (
    "train:\n  model_options:\n    fcn:\n      hidden: ["
    + ", ".join(
        ["&a0 [1,1,1,1,1,1,1,1,1]"]
        + [f"&a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 8)]
    )
    + "]\n"
)
DEEP = "kernels:\n  sizes:\n    matmul: " + "[" * 5000 + "]" * 5000 + "\n"
NESTED_200 = "kernels:\n  sizes:\n    matmul: " + "[" * 200 + "]" * 200 + "\n"
REPEATED = "kernels:\n  sizes:\n    matmul: [64, 64, 64]\n"
MANY_REPEATS = "kernels:\n  sizes:\n    matmul: [" + ", ".join(["64"] * 10_000) + "]\n"
MILLIONS_OF_REPEATS = "kernels:\n  sizes:\n    matmul: [" + "64, " * 3_500_000 + "64]\n"
TWICE = "kernels:\n  sizes:\n    matmul: [64]\n    matmul: [128]\n"
ACCELBENCH = [sys.executable, "-m", "accelbench.cli"]


def refusal(tmp_path, capsys, text: str) -> tuple[str, Path]:
    """What `accelbench grid` says about a config file holding `text`."""
    path = tmp_path / "site.yaml"
    path.write_text(text)
    assert cli.main(["grid", "--configfile", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    return err, path


def test_an_alias_bomb_is_refused_in_one_line_naming_the_file(tmp_path, capsys):
    assert len(ALIAS_BOMB) < 400
    err, path = refusal(tmp_path, capsys, ALIAS_BOMB)
    assert err.count("\n") == 1 and len(err) < 500
    assert f"config file {path}" in err
    assert f"more than {workflow_config.MAX_NODES} values, its aliases expanded" in err


def test_the_alias_bomb_costs_neither_time_nor_memory(tmp_path):
    """In a process of its own, so its peak memory is the command's."""
    path = tmp_path / "site.yaml"
    path.write_text(ALIAS_BOMB.replace("&a7", "&a8 [" + ",".join(["*a7"] * 9) + "], &a7"))
    done = subprocess.run(
        [*ACCELBENCH, "grid", "--configfile", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30)),
    )
    assert done.returncode == 2
    assert len(done.stderr) < 500
    assert "its aliases expanded" in done.stderr


@pytest.mark.parametrize("text", [DEEP, NESTED_200], ids=["5000 deep", "200 deep"])
def test_a_config_nested_too_deep_is_refused_naming_the_file(tmp_path, capsys, text):
    err, path = refusal(tmp_path, capsys, text)
    assert err.count("\n") == 1
    assert f"config file {path}" in err
    assert f"nests values more than {workflow_config.MAX_DEPTH} deep (line 3)" in err


def test_a_repeated_value_is_refused_naming_the_key_and_the_file(tmp_path, capsys):
    err, path = refusal(tmp_path, capsys, REPEATED)
    assert err == (
        f"accelbench: {path}: config key kernels.sizes.matmul: 64 is given 3 times; "
        "give each value once\n"
    )


def test_a_value_repeated_many_times_is_refused_in_a_short_message(tmp_path, capsys):
    err, path = refusal(tmp_path, capsys, MANY_REPEATS)
    assert err == (
        f"accelbench: {path}: config key kernels.sizes.matmul: 64 is given 10000 times; "
        "give each value once\n"
    )


def test_millions_of_repeats_are_refused_at_once(tmp_path, capsys):
    started = time.monotonic()
    err, path = refusal(tmp_path, capsys, MILLIONS_OF_REPEATS)
    assert time.monotonic() - started < 10
    assert err == (
        f"accelbench: config file {path} holds more than {workflow_config.MAX_NODES} values, "
        "its aliases expanded (line 3); a config needs a few hundred\n"
    )


def test_a_key_given_twice_is_refused_naming_its_line(tmp_path, capsys):
    err, path = refusal(tmp_path, capsys, TWICE)
    assert err == (
        f"accelbench: config file {path}: key 'matmul' is given twice in one mapping "
        "(line 4); the second would silently replace the first\n"
    )


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        ("kernels:\n  sizes: {matmul: [-8]}\n", "kernels.sizes.matmul.0", "-8 is less than"),
        ("train:\n  steps: 0\n", "train.steps", "0 is less than the minimum of 3"),
        ("kernels:\n  backends: [numpi]\n", "kernels.backends", "unknown backend 'numpi'"),
        ("train:\n  model_options: {fcn: {width: 3}}\n", "train.model_options.fcn.width", ""),
        ("cluster_analysis:\n  cpu_hour_bins: [4, 2]\n", "cluster_analysis.cpu_hour_bins", ""),
    ],
)
def test_every_config_error_names_the_file_that_set_the_key(tmp_path, capsys, text, key, message):
    err, path = refusal(tmp_path, capsys, text)
    assert err.startswith(f"accelbench: {path}: config key {key}")
    assert message in err


def test_an_error_in_a_key_the_site_file_leaves_alone_names_the_default_config(
    tmp_path, capsys, monkeypatch
):
    default = tmp_path / "default.yaml"
    text = workflow_config.default_config_path().read_text()
    default.write_text(text.replace("\nretries: 1\n", "\nretries: -1\n"))
    monkeypatch.setattr(workflow_config, "default_config_path", lambda: default)
    err, _ = refusal(tmp_path, capsys, "seed: 3\n")
    assert err.startswith(f"accelbench: {default}: config key retries: -1 is less than")


# --- the same through Snakemake ----------------------------------------------------------------


@pytest.mark.workflow
@pytest.mark.parametrize(
    ("text", "message"),
    [
        (ALIAS_BOMB, "its aliases expanded"),
        (NESTED_200, f"nests values more than {workflow_config.MAX_DEPTH} deep"),
        (REPEATED, "config key kernels.sizes.matmul: 64 is given 3 times"),
    ],
    ids=["alias bomb", "200 deep", "repeated size"],
)
def test_snakemake_refuses_them_in_a_few_lines_naming_the_file(workflow_dir, text, message):
    (workflow_dir / "config" / "bad.yaml").write_text(text)
    done = snakemake(workflow_dir, "-n", "--configfile=config/bad.yaml")
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert message in output
    assert str(workflow_dir / "config" / "bad.yaml") in output
    assert len(output) < 5_000


@pytest.mark.workflow
def test_a_run_in_another_directory_reads_the_default_config_too(workflow_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    done = snakemake(
        workflow_dir,
        "-n",
        "--directory",
        str(elsewhere),
        "--configfile=config/tiny.yaml",
        "results/kernels/matmul/cpu1/numpy/float64/n32.json",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "'resources' is a required property" not in done.stdout + done.stderr
    assert grid.group_rule("kernel/cpu/matmul/float64/32") in done.stdout + done.stderr


@pytest.mark.workflow
def test_a_workflow_without_its_schema_says_so(workflow_dir):
    schema = workflow_dir / workflow_config.SCHEMA
    schema.unlink()
    done = snakemake(workflow_dir, "-n")
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert f"the workflow's config schema {schema} is missing" in output
    assert "Traceback" not in output

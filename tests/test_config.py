"""The CLI loads and validates the config exactly as the workflow does, from any directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from accelbench import cli, grid, studies
from accelbench import config as workflow_config
from accelbench.job import measurement

from conftest import REPO_ROOT
from refusals import BAD_CONFIGS

ACCELBENCH = [sys.executable, "-m", "accelbench.cli"]

BAD_VALUES = [
    ("kernels:\n  sizes: {matmul: [-8]}\n", "-8 is less than the minimum of 1"),
    ("kernels:\n  sizes: {matmul: [0]}\n", "0 is less than the minimum of 1"),
    ("train:\n  batch_sizes: {fcn: [0]}\n", "0 is less than the minimum of 1"),
    ("kernels:\n  dtypes: [float8]\n", "'float8' is not one of"),
    ("train:\n  epochs: 3\n", "'epochs' is not one of"),
]


def workflow_message(paths: list[Path]) -> str:
    """What the Snakefile's check (config.check_loaded) says about the config Snakemake
    merges from `paths`."""
    merged: dict = {}
    for path in paths:
        workflow_config.merge(merged, workflow_config._read(path))
    with pytest.raises(workflow_config.ConfigError) as error:
        workflow_config.check_loaded(merged, paths, REPO_ROOT)
    return str(error.value)


@pytest.mark.parametrize(("text", "message"), BAD_VALUES)
@pytest.mark.parametrize("command", ["grid", "benchmark", "train"])
def test_every_command_refuses_what_the_workflow_refuses(tmp_path, capsys, command, text, message):
    extra = tmp_path / "bad.yaml"
    extra.write_text(text)
    args = {"grid": [], "benchmark": [], "train": ["results/train/fcn/cpu1/fp32/single/bs4.json"]}
    target = tmp_path / "results" / "train"
    assert cli.main([command, *args[command], "--configfile", str(extra)]) == 2
    err = capsys.readouterr().err
    assert message in err
    # The same words as the workflow's, naming the file.
    workflow = workflow_message([workflow_config.default_config_path(), extra])
    assert err == f"accelbench: {workflow}\n"
    assert str(extra) in err
    assert not target.exists()


@pytest.mark.parametrize(("config", "message"), BAD_CONFIGS.values(), ids=BAD_CONFIGS)
def test_the_workflows_check_names_the_bad_key(tmp_path, config, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(config)
    assert message in workflow_message([workflow_config.default_config_path(), bad])


def test_a_missing_configfile_is_one_line_naming_it(tmp_path):
    done = subprocess.run(
        [*ACCELBENCH, "grid", "--configfile", "nowhere.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr == "accelbench: config file nowhere.yaml does not exist\n"


def test_commands_run_from_any_directory(tmp_path):
    done = subprocess.run([*ACCELBENCH, "grid"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "results/kernels/matmul/cpu1/numpy/float32/n128.json" in done.stdout.split()


def test_a_checkout_named_in_the_environment_must_be_one(tmp_path):
    done = subprocess.run(
        [*ACCELBENCH, "grid"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", workflow_config.WORKFLOW_ENV: str(tmp_path)},
    )
    assert done.returncode == 2
    assert f"{workflow_config.WORKFLOW_ENV}={tmp_path} has no Snakefile" in done.stderr


def test_the_default_config_is_the_checkouts():
    assert workflow_config.default_config_path() == REPO_ROOT / "config" / "config.yaml"
    assert Path(workflow_config.load()["slurm"]["cpu_partition"])  # defaults filled in


def test_a_failed_training_experiment_fails_the_command(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(measurement, "run", lambda exp, settings, path, context: "failed")
    assert cli.main(["train", "results/train/fcn/cpu1/fp32/single/bs4.json"]) == 1
    assert "results/train/fcn/cpu1/fp32/single/bs4.json: failed" in capsys.readouterr().out


def test_queue_wait_bin_edges_must_increase(tmp_path):
    extra = tmp_path / "bins.yaml"
    extra.write_text("cluster_analysis:\n  gb_hour_bins: [16, 8]\n")
    with pytest.raises(
        workflow_config.ConfigError,
        match=r"config key cluster_analysis.gb_hour_bins: bin edges must increase, got \[16, 8\]",
    ):
        workflow_config.load([extra])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kernels:\n  runs: 2\n", "config key kernels.runs: 2 is less than the minimum of 3"),
        ("datasci:\n  runs: 1\n", "config key datasci.runs: 1 is less than the minimum of 3"),
        ("train:\n  runs: 40\n", "config key train.runs: 40 is greater than the maximum of 30"),
        ("kernels:\n  half_width: 0\n", "config key kernels.half_width: 0 is less than or equal"),
        ("kernels:\n  half_width: 1.5\n", "config key kernels.half_width: 1.5 is greater than"),
        ("train:\n  budget_s: -5\n", "config key train.budget_s: -5 is less than the minimum of 0"),
        ("train:\n  steps: 0\n", "config key train.steps: 0 is less than the minimum of 3"),
        ("train:\n  warmup_steps: 1.5\n", "config key train.warmup_steps: 1.5 is not of type"),
        ("train:\n  min_run_time: fast\n", "config key train.min_run_time: 'fast' is not of type"),
        ("kernels:\n  warmup_s: -1\n", "config key kernels.warmup_s: -1 is less than the minimum"),
        ("kernels:\n  max_call_s: 0\n", "config key kernels.max_call_s: 0 is less than or equal"),
        (
            "train:\n  precisions: {cpu: [fp32], gpu: [bf16]}\n",
            "config key train.precisions: 'gpu' is not one of ['cpu', 'cuda']",
        ),
        (
            "train:\n  precisions: {cuda: [fp8]}\n",
            "config key train.precisions.cuda.0: 'fp8' is not one of ['fp32', 'tf32',",
        ),
        (
            "train:\n  precisions: [fp32, fp8]\n",
            "config key train.precisions.1: 'fp8' is not one of ['fp32', 'tf32',",
        ),
    ],
)
def test_a_measurement_setting_that_makes_no_sense_is_refused_naming_key_and_file(
    tmp_path, text, message
):
    extra = tmp_path / "quick.yaml"
    extra.write_text(text)
    with pytest.raises(workflow_config.ConfigError) as error:
        workflow_config.load([extra])
    assert str(error.value).startswith(f"{extra}: {message}")


def test_the_schema_lists_the_names_the_package_knows():
    """The schema's enums of dtypes, precisions and strategies are the package's own lists
    (the dtypes' one declaration, accelbench.dtypes)."""
    import yaml

    from accelbench import dtypes
    from accelbench.families import train as train_family
    from accelbench.train import strategies

    schema = yaml.safe_load((REPO_ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    train = schema["properties"]["train"]["properties"]
    assert tuple(schema["$defs"]["kernel_dtypes"]["items"]["enum"]) == dtypes.DTYPES
    assert tuple(schema["$defs"]["precisions"]["items"]["enum"]) == train_family.PRECISIONS
    assert tuple(train["strategies"]["items"]["enum"]) == strategies.STRATEGY_NAMES


SITE_EXAMPLE = REPO_ROOT / "config" / "site-example.yaml"


def test_a_site_config_copied_with_lines_deleted_is_warned_of_what_it_keeps(tmp_path, capsys):
    """Config files merge key by key: a deleted kernel or model stays in the grid; the run
    says which ones, naming the file that does not name them."""
    lines = SITE_EXAMPLE.read_text().splitlines(keepends=True)
    deleted = ("    mandelbrot: []\n", "    saxpy: []\n", "    lstm: []\n", "    pca: []\n")
    site = tmp_path / "mysite.yaml"
    site.write_text("".join(line for line in lines if line not in deleted))
    config, sources = workflow_config.load_with_sources([site])
    expanded = grid.expand(config)
    # pca is back in the config too, but only sklearn runs it, and this grid has no sklearn.
    assert workflow_config.kept_defaults(sources, expanded) == {
        "kernels.sizes": ["mandelbrot", "saxpy"],
        "train.batch_sizes": ["lstm"],
    }
    warning = workflow_config.kept_defaults_warning(sources, expanded)
    assert warning.startswith(
        "WARNING: the grid keeps kernels mandelbrot, saxpy (kernels.sizes); models lstm "
        f"(train.batch_sizes) from {workflow_config.default_config_path()}, which {site} does "
        "not name"
    )
    assert "Give each one [] to leave it out" in warning
    assert cli.main(["grid", "--configfile", str(site)]) == 0
    assert warning in capsys.readouterr().err


def test_the_shipped_configs_name_every_default_they_keep():
    """The example site config gives [] to what it leaves out: 20 experiments, no warning;
    nor do the larger grids warn, alone or layered as their commands layer them."""
    config, sources = workflow_config.load_with_sources([SITE_EXAMPLE])
    expanded = grid.expand(config)
    assert workflow_config.kept_defaults_warning(sources, expanded) is None
    assert len(expanded.experiments) == 20
    assert {exp.family for exp in expanded.experiments} == {"kernel", "roof", "datasci", "train"}
    assert {exp.device for exp in expanded.experiments} == {"cpu4", "cuda1"}
    layered = (
        ["cluster.yaml"],
        ["gpu.yaml"],
        ["gpu-full.yaml"],
        ["gpu.yaml", "gpu-rapids.yaml"],
    )
    for files in layered:
        paths = [REPO_ROOT / "config" / name for name in files]
        config, sources = workflow_config.load_with_sources(paths)
        assert workflow_config.kept_defaults(sources, grid.expand(config)) == {}, files
    # The grids of the studies (accelbench.studies) that have one.
    for name in studies.names():
        if studies.config_file(name).is_file():
            config, sources = workflow_config.load_with_sources([studies.config_file(name)])
            assert workflow_config.kept_defaults(sources, grid.expand(config)) == {}, name
    # No site config, nothing to warn about.
    config, sources = workflow_config.load_with_sources([])
    assert workflow_config.kept_defaults(sources, grid.expand(config)) == {}


def test_the_docs_show_the_example_site_config_as_shipped():
    # docs/slurm.md includes the file as it is (pymdownx.snippets), never a copy of it.
    page = (REPO_ROOT / "docs" / "slurm.md").read_text(encoding="utf-8")
    assert f'```yaml\n--8<-- "{SITE_EXAMPLE.relative_to(REPO_ROOT)}"\n```' in page
    example = SITE_EXAMPLE.read_text(encoding="utf-8").splitlines()[0]
    for text in (REPO_ROOT / "README.md", *(REPO_ROOT / "docs").rglob("*.md")):
        assert example not in text.read_text(encoding="utf-8"), text

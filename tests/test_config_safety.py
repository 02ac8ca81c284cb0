"""No config value reaches a shell: every value that can end on a command line has a strict pattern.

sbatch is called through a shell with `slurm_extra` appended unquoted, and
`--sdm env-modules` runs `module load <modules>; <job>`; partitions, account,
QoS, constraint, paths and sacct times end on command lines too. The schema
refuses shell characters in all of them, naming the key; where accelbench
builds such a line it also quotes.
"""

from __future__ import annotations

import copy
import shlex
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from accelbench.slurm import resources as cluster

from conftest import REPO_ROOT, snakemake

SCHEMA = str(REPO_ROOT / "workflow" / "schemas" / "config.schema.yaml")
DEFAULT = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())

HOSTILE = [
    "a100$(touch {marker})",
    "a100`touch {marker}`",
    "a100; touch {marker}",
    "a100 && touch {marker}",
    "a100|touch {marker}",
    "a100\ntouch {marker}",
    "a100 b",
    "a100'",
    'a100"',
    "a100>{marker}",
]

# (path of keys, how the value sits there); a list index 0 means the first item.
KEYS = [
    (("slurm", "cpu_partition"), str),
    (("slurm", "gpu_partition"), str),
    (("slurm", "account"), str),
    (("slurm", "qos"), str),
    (("slurm", "gpu_model"), str),
    (("slurm", "modules"), list),
    (("train", "data_dir"), str),
    (("cluster_analysis", "sacct_dump"), str),
    (("cluster_analysis", "partitions"), list),
    (("cluster_analysis", "since"), str),
    (("cluster_analysis", "until"), str),
]


def with_value(keys: tuple[str, ...], value) -> dict:
    config = copy.deepcopy(DEFAULT)
    section = config
    for key in keys[:-1]:
        section = section.setdefault(key, {})
    section[keys[-1]] = value
    return config


@pytest.mark.parametrize("template", HOSTILE)
@pytest.mark.parametrize(("keys", "kind"), KEYS, ids=[".".join(k) for k, _ in KEYS])
def test_shell_characters_in_a_command_line_value_are_refused_naming_the_key(
    tmp_path, keys, kind, template
):
    marker = tmp_path / "ran"
    value = template.format(marker=marker)
    config = with_value(keys, [value] if kind is list else value)
    with pytest.raises(Exception, match="Error validating config") as error:
        validate(config, SCHEMA)
    where = "".join(f"[{key!r}]" for key in keys) + ("[0]" if kind is list else "")
    assert f"On instance{where}" in str(error.value)
    assert not marker.exists()


@pytest.mark.parametrize("template", [t for t in HOSTILE if "&&" not in t and "|" not in t])
def test_shell_characters_in_the_constraint_are_refused(tmp_path, template):
    config = with_value(("slurm", "constraint"), template.format(marker=tmp_path / "ran"))
    with pytest.raises(Exception, match=r"On instance\['slurm'\]\['constraint'\]"):
        validate(config, SCHEMA)


@pytest.mark.parametrize(
    ("keys", "value"),
    [
        (("slurm", "modules"), ["cuda/12.4", "GCC/12.3.0", "python/3.11-gcc", "foss+cuda/2023a"]),
        (("slurm", "constraint"), "[rack1|rack2]&ib,skylake*2"),
        (("slurm", "gpu_model"), "a100_80gb"),
        (("slurm", "account"), "proj-ml.2024"),
        (("slurm", "gpu_partition"), None),
        (("train", "data_dir"), "/scratch/user@site/data-sets_1.0"),
        (("cluster_analysis", "since"), "2024-01-01T00:00:00"),
    ],
)
def test_values_real_sites_use_are_accepted(keys, value):
    validate(with_value(keys, value), SCHEMA)


def test_gpus_per_node_in_slurm_extra_is_quoted():
    layout = cluster.TaskLayout(nodes=2, tasks_per_node=2, cpus_per_task=1, gpus_per_node=2)
    config = with_value(("slurm", "gpu_model"), "a100")
    assert cluster.task_resources(layout, config)["slurm_extra"] == "--gpus-per-node=a100:2"
    # Even a value that got past the schema stays one word for the shell.
    config["slurm"]["gpu_model"] = "a100$(x)"
    extra = cluster.task_resources(layout, config)["slurm_extra"]
    assert shlex.split(extra) == ["--gpus-per-node=a100$(x):2"]


def test_env_modules_are_quoted_for_module_load():
    config = with_value(("slurm", "modules"), ["cuda/12.4", "bad;name"])
    assert cluster.env_modules(config) == ["cuda/12.4", "'bad;name'"]


def test_a_hostile_gpu_model_stops_the_workflow_before_any_job(workflow_dir: Path, tmp_path):
    marker = tmp_path / "ran"
    (workflow_dir / "config" / "hostile.yaml").write_text(
        yaml.safe_dump({"slurm": {"gpu_model": f"a100$(touch {marker})"}})
    )
    done = snakemake(
        workflow_dir,
        "-n",
        "--cores",
        "1",
        "--configfile",
        "config/tiny.yaml",
        "config/hostile.yaml",
    )
    assert done.returncode != 0
    hostile = workflow_dir / "config" / "hostile.yaml"
    assert f"{hostile}: config key slurm.gpu_model: " in done.stdout + done.stderr
    assert not marker.exists()

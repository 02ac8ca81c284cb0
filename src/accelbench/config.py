"""The configuration as the workflow sees it: found, merged and validated in one place.

The Snakefile and every `accelbench` command load the same default config,
merge the user's files over it the way Snakemake's --configfile does
(mappings key by key, lists replaced) and validate the result with the same
two checks: the JSON Schema (snakemake.utils.validate, which also fills in
the schema's defaults) and the registry check of kernel, backend and model
names. So a bad value gets the same message from `accelbench grid` as from
`snakemake`, and no command runs on a config the workflow would refuse.

The workflow's files are found from the installed package (an editable
install from the checkout), not from the working directory; the variable
ACCELBENCH_WORKFLOW names another checkout.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from snakemake.utils import validate as validate_against_schema
from snakemake_interface_common.exceptions import WorkflowError

from accelbench import grid

WORKFLOW_ENV = "ACCELBENCH_WORKFLOW"
DEFAULT_CONFIG = Path("config") / "config.yaml"
SCHEMA = Path("workflow") / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A config file that is missing or unreadable, or a config the workflow would refuse."""


def _is_workflow(folder: Path) -> bool:
    return (folder / "Snakefile").is_file() and (folder / DEFAULT_CONFIG).is_file()


def workflow_root() -> Path:
    """The checkout holding the Snakefile, config/ and workflow/ of this package."""
    named = os.environ.get(WORKFLOW_ENV)
    if named:
        if not _is_workflow(Path(named)):
            raise ConfigError(
                f"{WORKFLOW_ENV}={named} has no Snakefile and {DEFAULT_CONFIG}: "
                "point it at an accelbench checkout"
            )
        return Path(named)
    for folder in Path(__file__).resolve().parents:
        if _is_workflow(folder):
            return folder
    raise ConfigError(
        f"cannot find the accelbench workflow (Snakefile, {DEFAULT_CONFIG}) above "
        f"{Path(__file__).resolve().parent}; install the package from its checkout "
        f"(pip install -e .) or set {WORKFLOW_ENV} to the checkout"
    )


def default_config_path() -> Path:
    return workflow_root() / DEFAULT_CONFIG


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Merge `extra` into `base` as Snakemake merges config files; returns `base`."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def _read(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"config file {path} cannot be read: {err}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(
            f"config file {path} must hold a mapping of keys, not a {type(loaded).__name__}"
        )
    return loaded


def check_configfiles(paths: Sequence[str | os.PathLike[str]]) -> None:
    """Refuse a result file given as a config file: a target that --configfile swallowed.

    `--configfile` takes every path after it up to the next option, so in
    `snakemake --configfile site.yaml results/.../n128.json` the record is read
    as configuration (and, when it does not exist, Snakemake stops with a
    FileNotFoundError before the workflow is read).
    """
    for path in map(Path, paths):
        if path.suffix == ".json" and "results" in path.parts:
            raise ConfigError(
                f"--configfile took the result {path} as a config file: --configfile reads "
                "every path after it, so a target written after it is swallowed. Write "
                "--configfile=config/mysite.yaml (one file per option), or name the "
                "targets before --configfile"
            )


def check_configfile_options(argv: Sequence[str]) -> None:
    """Refuse --configfile given twice: Snakemake keeps only the files of the last one."""
    given = [arg for arg in argv if arg.split("=")[0] in ("--configfile", "--configfiles")]
    if len(given) > 1:
        raise ConfigError(
            f"--configfile is given {len(given)} times and Snakemake would read only the "
            "files of the last one: name them all after one option, targets before it "
            "(snakemake TARGETS --configfile config/a.yaml config/b.yaml)"
        )


def check_values(config: dict[str, Any]) -> None:
    """What the schema cannot say: the registry names and device strings of the grid, and
    increasing bin edges of the queue-wait analysis. The error names the config key."""
    grid.validate_config(config)
    for key in ("cpu_hour_bins", "gb_hour_bins"):
        edges = config["cluster_analysis"][key]
        if any(high <= low for low, high in zip(edges, edges[1:], strict=False)):
            raise ConfigError(
                f"config key cluster_analysis.{key}: bin edges must increase, got {edges}"
            )


def validate(config: dict[str, Any]) -> None:
    """The workflow's checks: the schema (filling in its defaults), then check_values."""
    try:
        validate_against_schema(config, str(workflow_root() / SCHEMA))
    except WorkflowError as err:
        raise ConfigError(str(err)) from None
    try:
        check_values(config)
    except grid.GridError as err:
        raise ConfigError(str(err)) from None


def load(configfiles: Sequence[str | os.PathLike[str]] = ()) -> dict[str, Any]:
    """The default config with `configfiles` merged over it, validated as the workflow does."""
    config: dict[str, Any] = {}
    for path in [default_config_path(), *map(Path, configfiles)]:
        merge(config, _read(path))
    validate(config)
    return config


def kernel_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The settings of every kernel experiment (a rule's params: a change reruns them)."""
    kernels = config["kernels"]
    return {
        "seed": config["seed"],
        "min_run_time": kernels["min_run_time"],
        "samples": kernels["samples"],
        "runs": kernels["runs"],
        "contention": dict(config.get("contention") or {}),
        "energy": dict(config.get("energy") or {}),
        "naive_size_limit": kernels.get("naive_size_limit", {}),
    }


def roof_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The settings of every roof experiment: the kernels' timing, and the roof sizes."""
    settings = kernel_settings(config)
    del settings["naive_size_limit"], settings["energy"]
    return {**settings, "roofs": config["kernels"]["roofs"]}


def datasci_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The settings of every data science experiment (a rule's params: a change reruns them)."""
    datasci = config.get("datasci") or {}
    return {
        "seed": config["seed"],
        "min_run_time": datasci.get("min_run_time", 0.3),
        "samples": datasci.get("samples", 10),
        "runs": datasci.get("runs", 3),
        "contention": dict(config.get("contention") or {}),
    }

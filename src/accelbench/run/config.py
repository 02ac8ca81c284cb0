"""The configuration of the run last started in a workflow directory, for the commands after it.

A run given --configfile has a grid the default config does not; a command that
follows it without the same --configfile looks for the tables and records of the
default grid (`snakemake --report` then stops: "marked for report but does not
exist"). So a run writes its merged config when it starts, a config file like any
other (results/config.yaml, the report's copy, is written only once the tables
are made); `snakemake --report` and `accelbench status` read it where they are
given no config, and a run without --configfile after a run with another config
says so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from accelbench.platform.provenance import config_hash

RUN_CONFIG = Path("results") / "logs" / "run_config.yaml"


def path(folder: str | os.PathLike[str] = ".") -> Path:
    return Path(folder) / RUN_CONFIG


def write(
    config: Mapping[str, Any],
    configfiles: Sequence[str | os.PathLike[str]],
    folder: str | os.PathLike[str] = ".",
) -> Path:
    """Write the config of the run starting now; the files it came from head it as a comment."""
    named = " ".join(map(str, configfiles)) or "(none: the default config alone)"
    text = (
        f"# The config of the run started {datetime.now(UTC):%Y-%m-%d %H:%M} UTC here, "
        f"with --configfile {named}.\n"
        "# `snakemake --report` and `accelbench status` use it when given no --configfile.\n"
        + yaml.safe_dump(dict(config), sort_keys=False)
    )
    target = path(folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Whole or not at all: a command reading it meanwhile gets the last run's.
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, target)
    return target


def started(folder: str | os.PathLike[str] = ".") -> datetime | None:
    """When the run last started here wrote its config (None: no run has)."""
    try:
        return datetime.fromtimestamp(path(folder).stat().st_mtime, UTC)
    except OSError:
        return None


def asks_for_report(argv: Sequence[str]) -> bool:
    """Whether a Snakemake command line makes the report (--report [FILE])."""
    return any(arg == "--report" or arg.startswith("--report=") for arg in argv)


def for_report(
    configfiles: Sequence[str | os.PathLike[str]],
    argv: Sequence[str],
    folder: str | os.PathLike[str] = ".",
) -> Path | None:
    """The run config a `snakemake --report` given no --configfile reports with, if any."""
    if configfiles or not asks_for_report(argv) or not path(folder).is_file():
        return None
    return path(folder)


def other_config_note(
    config: Mapping[str, Any],
    configfiles: Sequence[str | os.PathLike[str]],
    folder: str | os.PathLike[str] = ".",
) -> str | None:
    """A note for a command given no --configfile after a run with another config: it
    plans the default grid, not that run's."""
    if configfiles or not path(folder).is_file():
        return None
    try:
        previous = yaml.safe_load(path(folder).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(previous, dict) or config_hash(previous) == config_hash(dict(config)):
        return None
    return (
        f"NOTE: the run last started here had another config ({RUN_CONFIG} holds it, the files "
        "it came from named at its top); this one, given no --configfile, has the default "
        "grid. To go on with that run, give it the same --configfile (or "
        f"--configfile={RUN_CONFIG})."
    )

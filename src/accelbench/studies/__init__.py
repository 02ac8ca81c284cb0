"""Studies apart from the core pipeline: one folder each, found here, named nowhere else.

A study's folder holds its Python code, its rules (`rules.smk`), the report captions
of its outputs (`report/`), its rule scripts (`scripts/`), any reference data it
compares with, and its grid (`config.yaml`) where it asks for one of its own. Its
package (`__init__.py`) says, light to import, what the workflow needs of it before
anything runs:

- `TITLES`: the human title of each of its report items;
- `NEEDS`: output name -> whether a planned grid fills it, called as
  `NEEDS[name](plan, baseline)` with the `accelbench.analysis.fillable.Planned` of the
  grid (the outputs its rules add to the default target only when they have something
  to show).

A study with commands of its own (`accelbench sacct`, `accelbench gpu-check`) has a
`commands` module: `add_commands(subparsers)` adds them to the accelbench parser, and
`ERRORS`, where it has one, the exceptions they report as one line (exit 2). The CLI
finds them here (commands()), as the Snakefile finds the rules.

The Snakefile includes every study's `rules.smk` (rule_files); a study's rules add
what the default target makes of them to the workflow's STUDY_TARGETS. The core
(accelbench.analysis, the Snakefile, workflow/rules/) imports none of them.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

FOLDER = Path(__file__).resolve().parent
RULES = "rules.smk"
CONFIG = "config.yaml"
COMMANDS = "commands"


def names() -> list[str]:
    """Every study, by its folder's name."""
    return sorted(info.name for info in pkgutil.iter_modules([str(FOLDER)]) if info.ispkg)


def study(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")


def rule_files() -> list[str]:
    """The rule file of every study that has rules, by its full path (the workflow of a
    wheel and a checkout's both include them from the imported package)."""
    return [str(FOLDER / name / RULES) for name in names() if (FOLDER / name / RULES).is_file()]


def commands() -> list[ModuleType]:
    """The `commands` module of every study that has commands, in the studies' order."""
    return [
        importlib.import_module(f"{__name__}.{name}.{COMMANDS}")
        for name in names()
        if (FOLDER / name / f"{COMMANDS}.py").is_file()
    ]


def config_file(name: str) -> Path:
    """The grid a study asks for (`snakemake --configfile` it); only some have one."""
    return FOLDER / name / CONFIG


def titles() -> dict[str, str]:
    """The human title of every study's report items."""
    return {
        key: title for name in names() for key, title in getattr(study(name), "TITLES", {}).items()
    }


def needs() -> dict[str, Callable[[Any, str], bool]]:
    """Output name -> whether a planned grid fills it, of every study's outputs."""
    return {
        key: need for name in names() for key, need in getattr(study(name), "NEEDS", {}).items()
    }

"""`accelbench run` and `accelbench workflow-path`: this package's workflow, from any directory.

A wheel carries the Snakefile with its rules, config, profile, envs and scripts
inside the package; a checkout has them at its top (config.workflow_root finds
either). `accelbench run` starts Snakemake on that Snakefile with the current
directory as its working directory, so results/ and .snakemake/ land where the
user stands, never inside site-packages.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from accelbench import config as workflow_config


def snakemake_command(arguments: Sequence[str], directory: Path) -> list[str]:
    """The Snakemake command line of `accelbench run ARGUMENTS` started in `directory`.

    The user's arguments come last, so a --directory or --snakefile of theirs wins.
    """
    snakefile = workflow_config.workflow_root() / "Snakefile"
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(snakefile),
        "--directory",
        str(directory),
        *arguments,
    ]


def command_run(args: argparse.Namespace) -> NoReturn:
    """Run the workflow here (results/ in this directory); other arguments go to snakemake."""
    workflow_config.check_snakemake_arguments(args.snakemake_arguments)
    command = snakemake_command(args.snakemake_arguments, Path.cwd())
    # Snakemake replaces this process, so Ctrl-C and a scheduler's SIGTERM reach it directly.
    os.execv(command[0], command)


def command_workflow_path(args: argparse.Namespace) -> int:
    """Print the folder holding the workflow's Snakefile, config/ and workflow/."""
    print(workflow_config.workflow_root())
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add `accelbench run` and `accelbench workflow-path` to the accelbench parser.

    `run` takes Snakemake's own options: the parser hands what it does not know to
    it as `snakemake_arguments` (cli.main).
    """
    run = commands.add_parser(
        "run",
        help=command_run.__doc__,
        description=f"{command_run.__doc__} E.g. accelbench run --cores 2.",
    )
    run.set_defaults(handler=command_run, snakemake_arguments=[])
    path = commands.add_parser("workflow-path", help=command_workflow_path.__doc__)
    path.set_defaults(handler=command_workflow_path)

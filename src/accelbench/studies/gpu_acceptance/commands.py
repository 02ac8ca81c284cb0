"""`accelbench gpu-check`: the GPU acceptance study's command, found by
accelbench.studies.commands like every study's."""

from __future__ import annotations

import argparse
import sys

from accelbench import config as workflow_config
from accelbench.arguments import add_configfile
from accelbench.studies.gpu_acceptance import acceptance
from accelbench.studies.gpu_acceptance import check as gpu_check


def command_gpu_check(args: argparse.Namespace) -> int:
    """Judge the GPU grid's records (config/gpu.yaml) and keep them in reference/<gpu>/;
    exit 1 if a condition fails."""
    config = workflow_config.load(args.configfile)
    verdict, kept = gpu_check.run(config, workflow_config.workflow_root())
    print(acceptance.render(verdict), end="")
    if kept is None:
        print("accelbench: no GPU ran: no reference written", file=sys.stderr)
    else:
        print(f"reference: {kept}", file=sys.stderr)
    return 0 if verdict.passed else 1


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add `accelbench gpu-check` to the accelbench parser."""
    checking = commands.add_parser("gpu-check", help=command_gpu_check.__doc__)
    add_configfile(checking)
    checking.set_defaults(handler=command_gpu_check)

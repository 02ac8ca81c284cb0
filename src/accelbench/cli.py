"""`accelbench ...`: commands for people, next to the workflow.

Each subcommand is a thin layer over a package function, so what a person
runs by hand is exactly what the workflow and the tests run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from accelbench import grid

DEFAULT_CONFIG = Path("config/config.yaml")


def load_config(paths: Sequence[Path]) -> dict:
    """Merge config files the way Snakemake's --configfile does: mappings by key, lists replaced."""

    def merge(base: dict, extra: dict) -> dict:
        for key, value in extra.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                merge(base[key], value)
            else:
                base[key] = value
        return base

    config: dict = {}
    for path in paths:
        merge(config, yaml.safe_load(Path(path).read_text()) or {})
    return config


def command_grid(args: argparse.Namespace) -> int:
    """List the result paths a config asks for, and the excluded cells with their reasons."""
    config = load_config([DEFAULT_CONFIG, *args.configfile])
    grid.validate_config(config)
    expanded = grid.expand(config)
    for path in expanded.paths:
        print(path)
    for exp, reason in expanded.excluded:
        print(f"excluded {exp.path}: {reason}", file=sys.stderr)
    print(f"{len(expanded.paths)} experiments, {len(expanded.excluded)} excluded", file=sys.stderr)
    return 0


def command_train(args: argparse.Namespace) -> int:
    """Run the training experiment a result path names and write its record there.

    What `srun --ntasks=P accelbench train PATH` runs in each task of a ddp/fsdp
    job (rank 0 writes the record); also a way to rerun one experiment by hand.
    """
    from accelbench import experiment, provenance
    from accelbench.train import settings

    config = load_config([DEFAULT_CONFIG, *args.configfile])
    grid.validate_config(config)
    exp = grid.parse_train_path(args.path)
    run_settings = {
        **settings.for_model(config, exp.model),
        "config_hash": provenance.config_hash(config),
    }
    status = experiment.run(exp, run_settings, args.path)
    print(f"{exp.path}: {status}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="accelbench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("grid", help=command_grid.__doc__)
    listing.add_argument(
        "--configfile",
        type=Path,
        action="append",
        default=[],
        help="config merged over config/config.yaml (repeatable)",
    )
    listing.set_defaults(handler=command_grid)
    train = commands.add_parser("train", help=command_train.__doc__.splitlines()[0])
    train.add_argument("path", help="result path, e.g. results/train/lstm/cpu2/fp32/ddp/bs32.json")
    train.add_argument(
        "--configfile",
        type=Path,
        action="append",
        default=[],
        help="config merged over config/config.yaml (repeatable)",
    )
    train.set_defaults(handler=command_train)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except grid.GridError as err:
        print(f"accelbench: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

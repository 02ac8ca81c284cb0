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
from accelbench.analysis import compare

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


def command_compare(args: argparse.Namespace) -> int:
    """Compare two result directories; exit 1 if a cell regressed beyond its CI."""
    runs = []
    for path in (args.old, args.new):
        frame, problems = compare.load_run(path)
        for record, problem in problems:
            print(f"invalid record {record}: {problem}", file=sys.stderr)
        runs.append(frame)
    result = compare.compare(*runs, metrics=args.metric or None, threshold=args.threshold)
    print(compare.report_text(result, args.threshold, compare.provenance_changes(*runs)), end="")
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        result.to_csv(args.csv, index=False)
    return 1 if (result["verdict"] == compare.REGRESSION).any() else 0


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

    comparing = commands.add_parser("compare", help=command_compare.__doc__)
    comparing.add_argument("old", type=Path, help="results directory (or tidy .parquet) before")
    comparing.add_argument("new", type=Path, help="results directory (or tidy .parquet) after")
    comparing.add_argument(
        "--threshold",
        type=float,
        default=0.1,
        help="slowdown that counts as a regression, as a fraction (default 0.1: 10%%)",
    )
    comparing.add_argument(
        "--metric",
        action="append",
        default=[],
        help="metric to compare (repeatable; default: every measured time, unit s)",
    )
    comparing.add_argument("--csv", type=Path, help="also write every compared cell here")
    comparing.set_defaults(handler=command_compare)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (grid.GridError, compare.CompareError) as err:
        print(f"accelbench: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

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


def command_benchmark(args: argparse.Namespace) -> int:
    """Measure this machine's kernels against its measured roofs and print a table."""
    from accelbench import benchmark
    from accelbench.devices import usable_cpus

    config = load_config([DEFAULT_CONFIG, *args.configfile])
    grid.validate_config(config)
    try:
        lines = benchmark.run(
            config,
            args.dtype or ["float64", "float32"],
            min_run_time=args.min_run_time,
            samples=args.samples or config["kernels"]["samples"],
        )
    except benchmark.BenchmarkError as err:
        print(f"accelbench: {err}", file=sys.stderr)
        return 1
    print(benchmark.format_table(lines, f"cpu{usable_cpus()}"))
    return 0


def _add_configfile(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--configfile",
        type=Path,
        action="append",
        default=[],
        help="config merged over config/config.yaml (repeatable)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="accelbench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("grid", help=command_grid.__doc__)
    _add_configfile(listing)
    listing.set_defaults(handler=command_grid)
    bench = commands.add_parser("benchmark", help=command_benchmark.__doc__)
    _add_configfile(bench)
    bench.add_argument(
        "--dtype",
        action="append",
        choices=["float64", "float32"],
        help="dtype to measure (repeatable; default: float64 and float32)",
    )
    bench.add_argument(
        "--min-run-time",
        type=float,
        default=1.0,
        help="seconds of timed runs per measurement (default: 1.0)",
    )
    bench.add_argument(
        "--samples", type=int, help="timed samples per measurement (default: the config's)"
    )
    bench.set_defaults(handler=command_benchmark)
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

"""`accelbench sacct` and `accelbench advise`: the queue wait study's commands, found by
accelbench.studies.commands like every study's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from accelbench import config as workflow_config
from accelbench.analysis import plain_tables
from accelbench.studies.queue_wait import advisor, sacct
from accelbench.studies.queue_wait import wait as queue_wait

# What these commands report as one line and exit 2, like a bad config.
ERRORS = (sacct.SacctError, advisor.AdviceError)


def command_sacct(args: argparse.Namespace) -> int:
    """Query sacct (on a Slurm login node) and store the raw text the queue analysis reads."""
    config = workflow_config.load(args.configfile)
    settings = config["cluster_analysis"]
    text = sacct.query(
        args.partition or sacct.configured_partitions(config),
        args.since or settings["since"],
        args.until or settings["until"],
    )
    sacct.write_dump(text, args.output)
    print(f"{args.output}: {sacct.parse(text).summary()}", file=sys.stderr)
    return 0


def command_advise(args: argparse.Namespace) -> int:
    """Which partition gives the result first: expected queue wait plus measured run time."""
    config = workflow_config.load(args.configfile)
    settings = config["cluster_analysis"]
    for path in [args.sacct] + ([args.tidy] if args.experiment else []):
        if not path.is_file():
            raise advisor.AdviceError(f"{path} does not exist")
    parsed = sacct.read(args.sacct)
    not_ranked: list[advisor.NotRanked] = []
    if args.experiment:
        options, not_ranked = advisor.experiment_options(
            pd.read_parquet(args.tidy), args.experiment, config, args.count, source=str(args.tidy)
        )
    else:
        advisor.require_jobs_in(parsed.jobs, args.partition)
        options = advisor.job_size_options(
            args.partition or sacct.configured_partitions(config),
            args.cpus,
            args.mem,
            args.time,
            args.runtime,
        )
    table = advisor.rank(
        parsed.jobs,
        options,
        settings["cpu_hour_bins"],
        settings["gb_hour_bins"],
        settings["min_jobs"],
    )
    notes = advisor.notes(table, not_ranked)
    notes += [queue_wait.FORECAST_METHOD.format(min_jobs=settings["min_jobs"])]
    notes += [f"{args.sacct}: {parsed.summary()}"]
    render = plain_tables.to_markdown if args.markdown else plain_tables.to_text
    print(render(advisor.display(table), "Time to result", notes, 2))
    print(advisor.verdict(table))
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add `accelbench sacct` and `accelbench advise` to the accelbench parser."""
    _add_sacct(commands)
    _add_advise(commands)


def _add_sacct(commands: argparse._SubParsersAction) -> None:
    query = commands.add_parser("sacct", help=command_sacct.__doc__)
    query.add_argument("--configfile", type=Path, action="append", default=[])
    query.add_argument(
        "--partition", action="append", default=[], help="default: cluster_analysis.partitions"
    )
    query.add_argument("--since", help="sacct --starttime; default: cluster_analysis.since")
    query.add_argument("--until", help="sacct --endtime; default: cluster_analysis.until")
    query.add_argument("--output", type=Path, default=Path("results/cluster/sacct.txt"))
    query.set_defaults(handler=command_sacct)


def _add_advise(commands: argparse._SubParsersAction) -> None:
    advise = commands.add_parser("advise", help=command_advise.__doc__)
    advise.add_argument("--configfile", type=Path, action="append", default=[])
    advise.add_argument("--sacct", type=Path, required=True, help="sacct dump (accelbench sacct)")
    advise.add_argument(
        "--experiment", help="result id glob, e.g. 'kernels/matmul/*/*/float32/n4096'"
    )
    advise.add_argument("--tidy", type=Path, default=Path("results/tidy.parquet"))
    advise.add_argument(
        "--count", type=int, default=1, help="units of work: kernel calls or training steps"
    )
    advise.add_argument("--cpus", type=int, help="job size: CPUs")
    advise.add_argument("--mem", help="job size: memory, e.g. 16G")
    advise.add_argument("--time", help="job size: time limit, Slurm format, e.g. 2:00:00")
    advise.add_argument(
        "--runtime",
        action="append",
        default=[],
        metavar="PARTITION=TIME",
        help="job size: expected run time in a partition, Slurm format (repeatable)",
    )
    advise.add_argument(
        "--partition", action="append", default=[], help="job size: partitions to compare"
    )
    advise.add_argument(
        "--markdown", action="store_true", help="print a Markdown table instead of plain text"
    )
    advise.set_defaults(handler=command_advise)

"""`accelbench ...`: commands for people, next to the workflow.

Each subcommand is a thin layer over a package function, so what a person
runs by hand is exactly what the workflow and the tests run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from accelbench import __version__, backends, dtypes, grid, registry, studies
from accelbench import config as workflow_config
from accelbench.analysis import compare
from accelbench.arguments import add_configfile, positive_int, positive_seconds
from accelbench.platform import doctor
from accelbench.records import record as results
from accelbench.run import first_cells, launch
from accelbench.slurm import run_status

# The files compare-machines writes under --out: <stem>.md, .tex, .csv, .html, .pdf, .png.
MACHINES_STEM = "machines"


def command_grid(args: argparse.Namespace) -> int:
    """List the result paths a config asks for, and the excluded cells with their reasons."""
    config, sources = workflow_config.load_with_sources(args.configfile)
    expanded = grid.expand(config)
    kept = workflow_config.kept_defaults_warning(sources, expanded)
    if kept:
        print(kept, file=sys.stderr)
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
    A record already there is kept in results/replaced/ first, as the workflow does.
    """
    from accelbench.job import measurement
    from accelbench.job.context import JobContext
    from accelbench.platform import provenance
    from accelbench.platform.ranks import is_primary_process
    from accelbench.train import settings

    config = workflow_config.load(args.configfile)
    exp = grid.parse_path(args.path, "train")
    if Path(args.path).is_dir():
        print(
            f"accelbench: {args.path} is a directory; the record is written as a file there",
            file=sys.stderr,
        )
        return 2
    if is_primary_process():
        folder = Path(grid.RESULTS_DIR)
        results.keep_replaced([args.path], folder, results.replaced_folder(folder))
    run_settings = settings.TrainSettings.from_params(settings.for_model(config, exp.model))
    context = JobContext.of(provenance.config_hash(config))
    status = measurement.run(exp, run_settings, args.path, context=context)
    print(f"{exp.path}: {status}")
    # The record says why either way; a failed experiment must also fail the command.
    return 1 if status == "failed" else 0


def command_check(args: argparse.Namespace) -> int:
    """Check units of your own (or the units named) against their contracts, then run each
    backend they have that can run here once against the reference; exit 1 on any problem."""
    from accelbench import contracts

    try:
        workflow_config.load(args.configfile)
        wanted, unknown = (
            contracts.named_units(args.names) if args.names else (contracts.users_units(), [])
        )
    except (workflow_config.ConfigError, registry.PluginError) as err:
        print(f"accelbench: {err}", file=sys.stderr)
        return 1
    for name in unknown:
        print(f"accelbench: no kernel, workload or model is named {name!r}", file=sys.stderr)
    if not wanted and not unknown:
        print(
            "accelbench: nothing to check: no unit of your own (name its folder in plugins.paths "
            "of a --configfile, or install a package that registers units), and no unit named",
            file=sys.stderr,
        )
        return 1
    problems = 0
    for kind, name in wanted:
        checked = contracts.check_unit(kind, name)
        problems += len(checked.problems)
        print("\n".join(checked.report()), flush=True)
    print(f"{len(wanted)} unit(s) checked, {problems} problem(s)")
    return 1 if problems or unknown else 0


def command_new(args: argparse.Namespace) -> int:
    """Write a kernel, data science workload or model of your own that runs as it is, a config
    that measures it beside a built-in on this machine, and its test."""
    from accelbench import scaffold

    try:
        module, config, test = scaffold.new(args.what, args.name, args.dir)
    except scaffold.ScaffoldError as err:
        print(f"accelbench: {err}", file=sys.stderr)
        return 2
    print(f"wrote {module} (yours to fill in), {config} and {test}; then:")
    print(f"  accelbench check {args.name} --configfile {config}")
    print(f"  accelbench run --cores all --configfile {config}")
    print(f"  python -m pytest {test}")
    return 0


def command_compare(args: argparse.Namespace) -> int:
    """Compare two result directories; exit 1 if a cell regressed beyond its CI."""
    runs = []
    for path in (args.old, args.new):
        frame, problems = compare.load_run(path)
        for record, problem in problems:
            print(f"invalid record {record}: {problem}", file=sys.stderr)
        runs.append(frame)
    result = compare.compare(
        *runs, metrics=args.metric or None, threshold=args.threshold, common=args.common
    )
    left_out = compare.one_run_only(*runs) if args.common else None
    changes = compare.provenance_changes(*runs)
    print(compare.report_text(result, args.threshold, changes, left_out), end="")
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        result.to_csv(args.csv, index=False)
    return 1 if (result["verdict"] == compare.REGRESSION).any() else 0


def command_compare_machines(args: argparse.Namespace) -> int:
    """Join the records of several machines for the cells of work they share: a table (and
    with --out its files and a figure) of each cell's time on each machine and device."""
    from accelbench.analysis import figures, machines, style, tables

    if len(args.folders) < 2:
        raise compare.CompareError("compare-machines needs two or more folders of records")
    sources = machines.load_all(args.folders)
    for source in sources:
        for record, problem in source.problems:
            print(f"invalid record {record}: {problem}", file=sys.stderr)
    joined = machines.join(sources)
    if joined.cells.empty:
        print(machines.nothing_shared(joined), "Nothing is drawn or written.")
        return 0
    table, notes = tables.machines_table(joined)
    print(tables.to_markdown(table, notes), end="")
    if args.out:
        written = tables.write_table(table, notes, args.out / MACHINES_STEM)
        written += style.save(figures.machine_times(joined), args.out / MACHINES_STEM)
        print("wrote " + ", ".join(map(str, written)), file=sys.stderr)
    return 0


def command_doctor(args: argparse.Namespace) -> int:
    """Check the NVIDIA driver, the GPUs and each GPU backend's CUDA libraries here."""
    from accelbench.job import measurement  # torch, Numba and the measuring code: seconds

    diagnosis = doctor.diagnose(probes=backends.probes(), preload=measurement.preload)
    print(doctor.render(diagnosis))
    return diagnosis.exit_code


def command_benchmark(args: argparse.Namespace) -> int:
    """Measure this machine's kernels against its measured roofs and print a table."""
    from accelbench.platform.devices import usable_cpus
    from accelbench.roofs import check as roof_check

    config = workflow_config.load(args.configfile)
    for kernel in roof_check.unsized(config):
        key = f"kernels.sizes.{kernel}"
        raise workflow_config.ConfigError(
            f"{workflow_config.where_set(key, args.configfile)}: config key {key} is empty; "
            f"the benchmark measures {kernel} at its {roof_check.MEASURED_SIZES[kernel]} size"
        )
    try:
        lines = roof_check.run(
            config,
            args.dtype or list(dtypes.BASE_DTYPES),
            min_run_time=args.min_run_time,
            samples=config["kernels"]["samples"] if args.samples is None else args.samples,
        )
    except roof_check.BenchmarkError as err:
        print(f"accelbench: {err}", file=sys.stderr)
        return 1
    print(roof_check.format_table(lines, f"cpu{usable_cpus()}"))
    return 0


def command_first_cells(args: argparse.Namespace) -> int:
    """List the records measured before the host had shown its drift (their interval is
    from their own runs alone), to measure again: `make run` does."""
    for path in first_cells.first_cells(args.results):
        print(path)
    return 0


def _add_grid(commands: argparse._SubParsersAction) -> None:
    """`accelbench grid`: the experiments a config asks for."""
    listing = commands.add_parser("grid", help=command_grid.__doc__)
    add_configfile(listing)
    listing.set_defaults(handler=command_grid)


def _add_train(commands: argparse._SubParsersAction) -> None:
    """`accelbench train PATH`: one training experiment, as each task of a ddp job runs it."""
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


def _add_check(commands: argparse._SubParsersAction) -> None:
    """`accelbench check`: units of your own against their contracts."""
    contract = commands.add_parser(
        "check",
        help="check your units against their contracts and run each backend here once",
        description=command_check.__doc__,
    )
    contract.add_argument(
        "names", nargs="*", help="kernels, workloads or models (default: every unit of yours)"
    )
    add_configfile(contract)
    contract.set_defaults(handler=command_check)


def _add_new(commands: argparse._SubParsersAction) -> None:
    """`accelbench new`: a unit of your own to start from."""
    scaffolding = commands.add_parser(
        "new",
        help="write a kernel, workload or model of your own, its config and its test",
        description=command_new.__doc__,
    )
    scaffolding.add_argument("what", choices=["kernel", "workload", "model"])
    scaffolding.add_argument("name", help="its name, one part of its result paths")
    scaffolding.add_argument(
        "--dir",
        type=Path,
        default=Path("my_benchmarks"),
        help="the plugin folder to write into (default: my_benchmarks)",
    )
    scaffolding.set_defaults(handler=command_new)


def _add_compare(commands: argparse._SubParsersAction) -> None:
    """`accelbench compare OLD NEW`: regressions between two runs."""
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
    comparing.add_argument(
        "--common",
        action="store_true",
        help="compare only the cells both runs have (runs of different grids); a cell the "
        "new run lacks is then left out, not a regression",
    )
    comparing.set_defaults(handler=command_compare)


def _add_compare_machines(commands: argparse._SubParsersAction) -> None:
    """`accelbench compare-machines`: several machines' records side by side."""
    joining = commands.add_parser(
        "compare-machines",
        help="the cells of work several machines share, each one's time side by side",
        description=command_compare_machines.__doc__,
    )
    joining.add_argument(
        "folders",
        type=Path,
        nargs="+",
        metavar="FOLDER",
        help="two or more: a results folder, a reference folder (records/ below it) or a tidy "
        ".parquet",
    )
    joining.add_argument(
        "--out",
        type=Path,
        help=f"also write the table ({MACHINES_STEM}.md, .tex, .csv, .html) and the figure "
        f"({MACHINES_STEM}.pdf, .png) here",
    )
    joining.set_defaults(handler=command_compare_machines)


def _add_benchmark(commands: argparse._SubParsersAction) -> None:
    """`accelbench benchmark`: this machine's kernels against its roofs."""
    bench = commands.add_parser("benchmark", help=command_benchmark.__doc__)
    add_configfile(bench)
    bench.add_argument(
        "--dtype",
        action="append",
        choices=dtypes.BASE_DTYPES,
        help="dtype to measure (repeatable; default: float64 and float32)",
    )
    bench.add_argument(
        "--min-run-time",
        type=positive_seconds,
        default=1.0,
        help="seconds of timed runs per measurement (default: 1.0)",
    )
    bench.add_argument(
        "--samples",
        type=positive_int,
        help="timed samples per measurement (default: the config's)",
    )
    bench.set_defaults(handler=command_benchmark)


def _add_first_cells(commands: argparse._SubParsersAction) -> None:
    """`accelbench first-cells`: the records to measure again."""
    firsts = commands.add_parser("first-cells", help=command_first_cells.__doc__)
    firsts.add_argument(
        "results", type=Path, nargs="?", default=Path("results"), help="default: results"
    )
    firsts.set_defaults(handler=command_first_cells)


def _add_doctor(commands: argparse._SubParsersAction) -> None:
    """`accelbench doctor`: why a GPU backend does not run here."""
    commands.add_parser("doctor", help=command_doctor.__doc__).set_defaults(handler=command_doctor)


def build_parser() -> argparse.ArgumentParser:
    """The accelbench parser: the core's commands, then each study's, found through its
    folder (accelbench.studies.commands), then the workflow's."""
    parser = argparse.ArgumentParser(prog="accelbench", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for add_command in (
        _add_grid,
        _add_train,
        _add_check,
        _add_new,
        _add_compare,
        _add_compare_machines,
        _add_benchmark,
        _add_first_cells,
        _add_doctor,
    ):
        add_command(commands)
    for study in studies.commands():
        study.add_commands(commands)
    run_status.add_command(commands)
    launch.add_commands(commands)
    return parser


def reported_errors() -> tuple[type[Exception], ...]:
    """What a command reports as one line and exit 2: a mistake in what it was given (its
    config, a path, its options), not a failure of the code."""
    in_studies = (error for study in studies.commands() for error in getattr(study, "ERRORS", ()))
    return (workflow_config.ConfigError, grid.GridError, compare.CompareError, *in_studies)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if "snakemake_arguments" in args:
        args.snakemake_arguments = unknown
    elif unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return args.handler(args)
    except reported_errors() as err:
        print(f"accelbench: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

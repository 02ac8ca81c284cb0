"""Where the Slurm jobs of a workflow run are: pending, running, completed or failed.

While jobs wait, Snakemake's Slurm executor prints nothing, squeue names every
job after the run's UUID, and the logs of successful jobs are deleted. The
executor's own submission conventions are enough to tell the jobs apart again:

- ``--job-name`` is the run UUID (``<prefix>_<uuid>`` with ``slurm-jobname-prefix``);
- ``--comment`` is ``rule_<rule>_wildcards_<values joined by _>``, or
  ``rule_<group>_<rules>`` for a group job (which has no wildcards there);
- ``--output`` is ``.snakemake/slurm_logs/rule_<rule>/<values>/%j.log`` or
  ``.../group_<group>_<rules>/%j.log``;
- ``-D`` is the workflow directory;
- the ``--wrap`` command names every experiment of the job:
  ``--target-jobs 'rule:key=value,...' ...``.

squeue knows live jobs (comment and log pattern included); sacct also knows
finished jobs and keeps the submit line, the only place where the experiments
of a group job are written (sacct's Comment stays empty unless the site sets
AccountingStoreFlags=job_comment). A job sacct does not list (held, not yet
recorded, or a site without accounting) is read from its batch script while
it is unfinished (`scontrol write batch_script`).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

from accelbench import config as workflow_config
from accelbench import grid
from accelbench.arguments import add_configfile, positive_seconds
from accelbench.families import FAMILIES
from accelbench.run import config as run_config
from accelbench.run import progress

SQUEUE_FIELDS = ("JobID", "State", "Name", "Comment", "TimeUsed", "WorkDir", "Reason", "STDOUT")
SACCT_FIELDS = ("JobID", "JobName", "State", "Elapsed", "WorkDir", "Comment", "SubmitLine")
QUERY_TIMEOUT_S = 60

# Slurm states by what they mean for the run; any other state counts as failed.
CATEGORY_OF_STATE = {
    "PENDING": "pending",
    "REQUEUED": "pending",
    "REQUEUE_HOLD": "pending",
    "REQUEUE_FED": "pending",
    "RESV_DEL_HOLD": "pending",
    "CONFIGURING": "running",
    "RUNNING": "running",
    "COMPLETING": "running",
    "STAGE_OUT": "running",
    "SIGNALING": "running",
    "RESIZING": "running",
    "SUSPENDED": "running",
    "STOPPED": "running",
    "COMPLETED": "completed",
    "CANCELLED": "cancelled",
    "TIMEOUT": "timeout",
    "OUT_OF_MEMORY": "out of memory",
}
CATEGORIES = ("pending", "running", "completed", "failed", "timeout", "out of memory", "cancelled")
# Problems first: those are the jobs a person looks for.
LISTING_ORDER = (
    "failed",
    "timeout",
    "out of memory",
    "cancelled",
    "running",
    "pending",
    "completed",
)

# Rules whose wildcards name an experiment of the grid, shown by its result id.
EXPERIMENT_PATTERNS = {family.rule: family.pattern for family in FAMILIES.values()}
RUN_ID_LINE = re.compile(r"SLURM run ID: (\S+)")
KEEP_LOGS_HINT = "keep them with `slurm-keep-successful-logs: true` in the profile"


class StatusError(RuntimeError):
    """Slurm could not be asked about the run's jobs."""


@dataclass(frozen=True)
class Target:
    """One Snakemake job (an experiment) inside a Slurm job."""

    rule: str
    wildcards: tuple[tuple[str, str], ...] = ()
    measured_by: str = ""  # the comparison group's rule, for a cell its job measured

    @property
    def label(self) -> str:
        """The result id for grid experiments (as in tidy.parquet), else rule and wildcards."""
        values = dict(self.wildcards)
        pattern = EXPERIMENT_PATTERNS.get(self.rule)
        if pattern is not None:
            try:
                path = pattern.format(**values)
            except KeyError:
                pass
            else:
                return path.removeprefix(grid.RESULTS_DIR + "/").removesuffix(".json")
        return " ".join([self.rule, *(f"{key}={value}" for key, value in self.wildcards)])


@dataclass(frozen=True)
class SlurmJob:
    """One Slurm job of a run, as squeue and/or sacct describe it."""

    job_id: str
    run: str
    state: str
    elapsed: str
    workdir: str
    comment: str
    log: str
    reason: str = ""
    targets: tuple[Target, ...] = ()
    attempt: int | None = None

    @property
    def category(self) -> str:
        return CATEGORY_OF_STATE.get(self.state, "failed")

    @property
    def submission(self) -> str:
        """The rule, or the group job's name, as the executor wrote it into the comment."""
        return self.comment.removeprefix("rule_").partition("_wildcards_")[0]

    @property
    def is_group(self) -> bool:
        return f"group_{self.submission}" in Path(self.log).parts

    @property
    def name(self) -> str:
        """`group kernels_cpu1` or the rule; a group's rules are cut off when known."""
        if not self.is_group:
            return self.submission or "(no comment)"
        rules = sorted({target.measured_by or target.rule for target in self.targets})
        suffix = "_" + "_".join(rules)
        group = self.submission.removesuffix(suffix) if rules else self.submission
        return f"group {group}"

    @property
    def experiments(self) -> list[str]:
        """What the job computes: its targets, else the wildcards of its comment."""
        if self.targets:
            return [target.label for target in self.targets]
        wildcards = self.comment.partition("_wildcards_")[2]
        return [f"{self.submission} {wildcards}".strip()] if not self.is_group else []

    @property
    def rules(self) -> list[str]:
        """One rule per experiment, for counts by rule."""
        if self.targets:
            return [target.rule for target in self.targets]
        return [self.name]

    @property
    def number(self) -> int:
        return int(re.match(r"\d*", self.job_id).group() or 0)


def _expand_log(pattern: str, job_id: str, workdir: str) -> str:
    """The log path Slurm wrote: %j, %A and %a replaced, relative paths under -D."""
    if not pattern or pattern == "(null)":
        return ""
    array, _, task = job_id.partition("_")
    replacements = {"%j": job_id, "%A": array, "%a": task, "%%": "%"}
    path = re.sub(r"%[jAa%]", lambda match: replacements[match.group()], pattern)
    return path if os.path.isabs(path) or not workdir else os.path.join(workdir, path)


def _null(value: str) -> str:
    return "" if value == "(null)" else value


def _state(value: str) -> str:
    """The state word: sacct writes 'CANCELLED by 1000'."""
    words = value.split()
    return words[0] if words else ""


def parse_squeue(text: str) -> list[SlurmJob]:
    """Rows of `squeue --Format` with SQUEUE_FIELDS, each field ending in '|'."""
    jobs = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) < len(SQUEUE_FIELDS):
            continue
        job_id, state, run, comment, elapsed, workdir, reason, stdout = fields[: len(SQUEUE_FIELDS)]
        jobs.append(
            SlurmJob(
                job_id=job_id.strip(),
                run=run,
                state=_state(state),
                elapsed=elapsed,
                workdir=workdir,
                comment=_null(comment),
                log=_expand_log(stdout, job_id.strip(), workdir),
                reason="" if reason == "None" else reason,
            )
        )
    return jobs


def parse_targets(wrapped: str) -> tuple[tuple[Target, ...], int | None]:
    """The --target-jobs and --attempt of the Snakemake command a job runs."""
    try:
        words = shlex.split(wrapped)
    except ValueError:
        return (), None
    targets: list[Target] = []
    attempt = None
    for index, word in enumerate(words):
        if word == "--attempt" and index + 1 < len(words) and words[index + 1].isdigit():
            attempt = int(words[index + 1])
        if word != "--target-jobs":
            continue
        for spec in words[index + 1 :]:
            if spec.startswith("--"):
                break
            rule, _, wildcards = spec.partition(":")
            pairs = re.findall(r'([^,=]+)=("[^"]*"|[^,]*)', wildcards)
            targets.append(Target(rule, tuple((key, value.strip('"')) for key, value in pairs)))
    return tuple(targets), attempt


def _option(submit_line: str, name: str) -> str:
    match = re.search(rf"(?:^|\s){name}[= ](\S+)", submit_line)
    return match.group(1) if match else ""


def parse_sacct(text: str) -> list[SlurmJob]:
    """Rows of `sacct --parsable2 --noheader --format` with SACCT_FIELDS."""
    jobs = []
    for line in text.splitlines():
        fields = line.split("|", len(SACCT_FIELDS) - 1)
        if len(fields) < len(SACCT_FIELDS):
            continue
        job_id, run, state, elapsed, workdir, comment, submit_line = fields
        options, _, wrapped = submit_line.partition(" --wrap=")
        targets, attempt = parse_targets(wrapped)
        jobs.append(
            SlurmJob(
                job_id=job_id,
                run=run,
                state=_state(state),
                elapsed=elapsed,
                workdir=workdir,
                comment=comment or _option(options, "--comment"),
                log=_expand_log(_option(options, "--output"), job_id, workdir),
                targets=targets,
                attempt=attempt,
            )
        )
    return jobs


def merge(live: list[SlurmJob], accounted: list[SlurmJob]) -> list[SlurmJob]:
    """One row per job: squeue's state and reason, sacct's experiments; by job id."""
    by_id = {job.job_id: job for job in accounted}
    for job in live:
        known = by_id.get(job.job_id)
        by_id[job.job_id] = (
            job
            if known is None
            else replace(
                job,
                comment=job.comment or known.comment,
                log=job.log or known.log,
                targets=known.targets,
                attempt=known.attempt,
            )
        )
    return sorted(by_id.values(), key=lambda job: (job.number, job.job_id))


def script_targets(script: str) -> tuple[tuple[Target, ...], int | None]:
    """The experiments in a job's batch script (`#!/bin/sh`, comments, the Snakemake call)."""
    lines = [line for line in script.splitlines() if not line.lstrip().startswith("#")]
    return parse_targets("\n".join(lines))


def _same_directory(one: str, other: str | Path) -> bool:
    return bool(one) and os.path.realpath(one) == os.path.realpath(other)


def select(jobs: list[SlurmJob], directory: str | Path, run: str | None) -> list[SlurmJob]:
    """The jobs a workflow directory submitted, in one run when given."""
    return [
        job
        for job in jobs
        if _same_directory(job.workdir, directory) and (run is None or job.run == run)
    ]


def latest_run(jobs: list[SlurmJob]) -> str | None:
    """The run of the most recently submitted job (job ids only grow)."""
    return max(jobs, key=lambda job: job.number).run if jobs else None


def find_run(directory: str | Path) -> str | None:
    """The run UUID of the newest Snakemake log in the directory that used the Slurm executor."""
    logs = sorted((Path(directory) / ".snakemake" / "log").glob("*.snakemake.log"), reverse=True)
    for log in logs:
        with log.open(errors="replace") as lines:
            for line in lines:
                match = RUN_ID_LINE.search(line)
                if match:
                    return match.group(1)
    return None


def with_group_cells(jobs: list[SlurmJob], groups: list[grid.ComparisonGroup]) -> list[SlurmJob]:
    """Jobs whose comparison groups are named by their cells: a group's rule has no
    wildcards, so its target alone would hide the experiments it measured."""
    cells = {
        group.rule: tuple(
            Target(
                FAMILIES[group.family].rule,
                tuple((name, str(value)) for name, value in asdict(exp).items()),
                measured_by=group.rule,
            )
            for exp in group.experiments
        )
        for group in groups
    }
    return [
        replace(job, targets=tuple(cell for t in job.targets for cell in cells.get(t.rule, (t,))))
        for job in jobs
    ]


def _attempt_key(job: SlurmJob) -> tuple:
    """Jobs with the same key are attempts at the same work; a group without targets is unique."""
    if job.targets:
        return ("targets", job.targets)
    if job.is_group:
        return ("job", job.job_id)
    return ("comment", job.comment)


def latest_attempts(jobs: list[SlurmJob]) -> tuple[list[SlurmJob], list[SlurmJob]]:
    """(latest attempt of each piece of work, earlier attempts that were resubmitted)."""
    latest: dict[tuple, SlurmJob] = {}
    for job in sorted(jobs, key=lambda job: job.number):
        latest[_attempt_key(job)] = job
    current = sorted(latest.values(), key=lambda job: job.number)
    kept = {job.job_id for job in current}
    return current, [job for job in jobs if job.job_id not in kept]


@dataclass
class Summary:
    """Counts of a run's jobs by category, and of its experiments by rule and category."""

    jobs: Counter = field(default_factory=Counter)
    by_rule: dict[str, Counter] = field(default_factory=dict)


def summarise(jobs: list[SlurmJob]) -> Summary:
    summary = Summary()
    for job in jobs:
        summary.jobs[job.category] += 1
        for rule in job.rules:
            summary.by_rule.setdefault(rule, Counter())[job.category] += 1
    return summary


def format_counts(counts: Counter) -> str:
    """'2 pending, 1 failed', always in the same order so that reports compare at a glance."""
    return ", ".join(f"{counts[name]} {name}" for name in CATEGORIES if counts[name])


def _log_note(job: SlurmJob) -> str:
    if not job.log:
        return "unknown"
    if Path(job.log).exists():
        return job.log
    if job.category == "pending":
        return f"{job.log} (not written yet)"
    if job.category == "completed":
        return f"{job.log} (deleted after success)"
    return f"{job.log} (missing)"


def _job_lines(job: SlurmJob) -> list[str]:
    """'job 202  pending (Priority)  work', then its experiments and its log, indented."""
    if job.category == "pending":
        state = f"pending ({job.reason})" if job.reason else "pending"
    else:
        state = f"{job.category} {job.elapsed}"
    experiments = job.experiments
    details = [f"attempt {job.attempt}"] if job.attempt and job.attempt > 1 else []
    if len(experiments) > 1:
        details.append(f"{len(experiments)} experiments")
    name = f"{job.name} ({', '.join(details)})" if details else job.name
    lines = [f"  job {job.job_id}  {state}  {name}"]
    lines += [f"      {experiment}" for experiment in experiments]
    lines.append(f"      log: {_log_note(job)}")
    return lines


def render(
    jobs: list[SlurmJob], directory: str | Path, run: str | None, *, everything: bool = False
) -> str:
    """The plain-text report: counts, counts by rule, and where the unfinished jobs are."""
    header = f"{f'Run {run}' if run else 'All runs'} in {os.path.realpath(directory)}"
    if not jobs:
        return f"{header}\nno Slurm jobs found\n"
    current, earlier = latest_attempts(jobs)
    summary = summarise(current)
    jobs_word = "Slurm job" if len(current) == 1 else "Slurm jobs"
    lines = [header, f"{len(current)} {jobs_word}: {format_counts(summary.jobs)}"]
    width = max(len(rule) for rule in summary.by_rule)
    lines.append("Experiments by rule:")
    lines += [
        f"  {rule:<{width}}  {format_counts(counts)}"
        for rule, counts in sorted(summary.by_rule.items())
    ]
    shown = [job for job in current if everything or job.category != "completed"]
    shown.sort(key=lambda job: (LISTING_ORDER.index(job.category), job.number))
    if shown:
        lines.append("Jobs:" if everything else "Jobs not completed:")
        for job in shown:
            lines += _job_lines(job)
    if earlier:
        lines.append(f"Earlier attempts, resubmitted ({len(earlier)}):")
        for job in earlier:
            lines += _job_lines(job)
    if any(job.category == "completed" and job.log and not Path(job.log).exists() for job in shown):
        lines.append(f"Logs of successful jobs are deleted by the executor; {KEEP_LOGS_HINT}.")
    return "\n".join(lines) + "\n"


def squeue_command(run: str | None) -> list[str]:
    """Own jobs still known to the controller (MinJobAge keeps finished ones a while)."""
    columns = ",".join(f"{name}:|" for name in SQUEUE_FIELDS)
    command = ["squeue", "--me", "--noheader", "--states=all", f"--Format={columns}"]
    return command + (["--name", run] if run else [])


def sacct_command(run: str | None, days: float, now: datetime | None = None) -> list[str]:
    """Allocations of the last `days` from accounting, finished ones included."""
    since = (now or datetime.now()) - timedelta(days=days)
    command = [
        "sacct",
        "--allocations",
        "--parsable2",
        "--noheader",
        f"--starttime={since:%Y-%m-%dT%H:%M}",
        "--endtime=now",
        f"--format={','.join(SACCT_FIELDS)}",
    ]
    return command + (["--name", run] if run else [])


def _query(command: list[str]) -> str | None:
    """Standard output of a Slurm command, or None where it is missing or fails."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def batch_script_command(job_id: str) -> list[str]:
    return ["scontrol", "write", "batch_script", job_id, "-"]


def collect(directory: str | Path, run: str | None, days: float = 7) -> list[SlurmJob]:
    """The run's jobs from squeue and sacct; a site without accounting gets squeue's alone.

    sacct lists a job only once it is eligible (not while held) and only with
    accounting; an unfinished job it does not describe gets its experiments
    from its batch script, which the controller keeps until the job ends.
    """
    live = _query(squeue_command(run))
    accounted = _query(sacct_command(run, days))
    if live is None and accounted is None:
        raise StatusError("neither squeue nor sacct answered; is Slurm reachable from here?")
    jobs = select(merge(parse_squeue(live or ""), parse_sacct(accounted or "")), directory, run)
    for index, job in enumerate(jobs):
        if not job.targets and job.category in ("pending", "running"):
            script = _query(batch_script_command(job.job_id))
            if script:
                targets, attempt = script_targets(script)
                jobs[index] = replace(job, targets=targets, attempt=attempt)
    return jobs


def snakemake_running(directory: str | Path) -> bool:
    """Whether a Snakemake run holds the directory: its lock files exist while it runs."""
    locks = Path(directory) / ".snakemake" / "locks"
    return locks.is_dir() and any(locks.iterdir())


def is_workflow_directory(directory: str | Path) -> bool:
    """Whether a workflow runs here: a Snakefile, Snakemake's folder or a run's config."""
    folder = Path(directory)
    return (
        (folder / "Snakefile").is_file()
        or (folder / ".snakemake").is_dir()
        or run_config.path(folder).is_file()
    )


def grid_config(directory: str | Path, configfiles: list[Path]) -> tuple[dict, str] | None:
    """(config, where it came from): --configfile, else the config the run last started in
    the directory wrote; None without either."""
    if configfiles:
        return workflow_config.load(configfiles), " ".join(map(str, configfiles))
    if run_config.path(directory).is_file():
        source = f"{run_config.RUN_CONFIG}, the config of the run last started here"
        return workflow_config.load([run_config.path(directory)]), source
    return None


def grid_report(
    directory: str | Path,
    expanded: grid.Grid,
    config: dict,
    source: str,
    reader: progress.RecordReader,
) -> tuple[str, bool]:
    """The grid's progress (text, whether every experiment has its record)."""
    found = progress.grid_progress(expanded, config, reader, run_config.started(directory))
    text = progress.render_progress(found, running=snakemake_running(directory))
    return f"Progress of the grid of {source}:\n{text}\n", found.recorded == found.planned


def _where_looked(days: float, slurm: str) -> str:
    """Where status looks for a run, and what it expects to find there."""
    asked = slurm or f"squeue and sacct (last {days:g} days) list no job started there"
    return (
        f"no {run_config.RUN_CONFIG} (written when a run starts), no 'SLURM run ID' in "
        f".snakemake/log/, and {asked}"
    )


def status_report(args: argparse.Namespace, reader: progress.RecordReader) -> tuple[str, int, bool]:
    """(text, exit status, whether the grid is complete) of one look at the run."""
    directory = args.directory
    known = grid_config(directory, args.configfile)
    expanded = grid.expand(known[0]) if known else None
    grid_text = grid_report(directory, expanded, *known, reader) if known else None
    slurm = ""
    try:
        run = args.run or find_run(directory)
        jobs = collect(directory, run, args.days)
        if run is None:
            run = latest_run(jobs)
            jobs = select(jobs, directory, run)
    except StatusError:
        jobs, slurm = None, "no Slurm to ask (squeue and sacct did not answer)"
    where = os.path.realpath(directory)
    if not jobs and grid_text is None:
        looked = _where_looked(args.days, slurm)
        if not is_workflow_directory(directory):
            return (
                f"accelbench: no run found in {where}: {looked}; nor is there a Snakefile. Run "
                "accelbench status in the directory you ran snakemake in, or name it with "
                "--directory DIR.\n",
                2,
                False,
            )
        return f"No run has started in {where} yet: {looked}.\n", 0, False
    if jobs:
        if expanded is not None:
            jobs = with_group_cells(jobs, grid.comparison_groups(expanded.experiments))
        text = render(jobs, directory, run, everything=args.all)
    elif jobs == []:
        text = f"No Slurm jobs: squeue and sacct (last {args.days:g} days) list none from {where}\n"
    else:
        text = ""  # no Slurm here: a local run
    grid_text, complete = grid_text or ("", False)
    return text + grid_text, 0, complete


def command_status(args: argparse.Namespace) -> int:
    """Show a workflow run's progress: the grid's experiments done and left with an ETA, and
    its Slurm jobs by state with where each unfinished one is; --watch repeats it."""
    reader = progress.RecordReader(args.directory)
    try:
        while True:
            text, code, complete = status_report(args, reader)
            if code:
                print(text, end="", file=sys.stderr)
                return code
            if args.watch and sys.stdout.isatty():
                print("\033[H\033[2J", end="")  # a fresh screen for each look
            if args.watch:
                print(f"{datetime.now():%H:%M:%S}, every {args.watch:g} s (Ctrl-C stops):")
            print(text, end="", flush=True)
            if not args.watch or complete:
                return 0
            time.sleep(args.watch)
    except KeyboardInterrupt:
        return 130


def add_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `accelbench status` to the subcommands of the accelbench parser."""
    status = commands.add_parser("status", help=command_status.__doc__)
    status.add_argument(
        "--directory", type=Path, default=Path("."), help="workflow directory (default: .)"
    )
    status.add_argument(
        "--run",
        help="run UUID (Snakemake prints 'SLURM run ID'); default: the newest run found in "
        ".snakemake/log, else the newest job from the directory known to Slurm",
    )
    status.add_argument(
        "--days", type=float, default=7, help="how far back sacct looks (default: 7)"
    )
    status.add_argument(
        "--all", action="store_true", help="list completed jobs too, with their logs"
    )
    add_configfile(status)
    status.add_argument(
        "--watch",
        nargs="?",
        const=30.0,
        type=positive_seconds,
        metavar="SECONDS",
        help="look again every SECONDS (default 30) until every experiment has its record; "
        "Ctrl-C stops",
    )
    status.set_defaults(handler=command_status)
    return status

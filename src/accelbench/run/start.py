"""What a run does once Snakemake has planned it and before its first job starts.

The Snakefile's `onstart` hands over the jobs Snakemake is about to run; the
decisions about them are made here, where they are tested: which jobs measure an
experiment (those of a registered family's rule, group members included), what
the run is about to measure, and which records and logs it is about to replace.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from accelbench.families import FAMILIES
from accelbench.grid import Grid, measuring_family
from accelbench.records import record as results
from accelbench.run import progress


def experiment_files(jobs: Iterable[Any]) -> list[str]:
    """The records and logs of the jobs that measure an experiment of any family, one at a
    time or as a comparison group."""
    return [
        str(path)
        for job in progress.member_jobs(jobs)
        if measuring_family(job.rule.name)
        for path in [*job.output, *job.log]
    ]


def measured_families(jobs: Iterable[Any]) -> list[str]:
    """The names of the families with an experiment among the jobs: what a local run's
    fork server imports before the first job (none: the run starts no server)."""
    found = {measuring_family(member.rule.name) for member in progress.member_jobs(jobs)}
    return [name for name, family in FAMILIES.items() if family in found]


def start(jobs: Iterable[Any], planned: Grid, folder: Path) -> str:
    """Refuse a results folder that cannot be written; copy every record (and its job's
    logs) about to be measured again to this run's results/replaced/ folder, since
    Snakemake removes them before its job runs and again if the job fails, even when
    it never ran; return the message that says what the run will measure.
    """
    jobs = list(jobs)
    results.ensure_writable(folder)
    results.keep_replaced(experiment_files(jobs), folder, results.replaced_folder(folder))
    return progress.plan_message(progress.measured_paths(jobs), planned)

"""A comparison group measured by one job: its cells' runs interleaved in rounds.

The cells that one row of a comparison table sets against each other on one machine
(accelbench.grid.ComparisonGroup: a kernel's backends and its CPU's thread counts at one
dtype and size, a model's precisions on one GPU) are measured together. Each round runs
every cell that still wants a run once, each run a process of its own, in a new random
order each round, until no cell's goal wants another. What the host does meanwhile (a
slower stretch of minutes, a clock that moved) then falls on the cells of a round alike,
and the ratio of two cells can be read round by round (accelbench.analysis.ratios): cells
measured minutes apart carried the host's drift between them twice. Randomized
interleaved trials made cloud comparisons repeatable where back-to-back trials were not
(Abedi and Brecht, ICPE 2017); duet benchmarking's paired runs were 5 to 37 times more
accurate in clouds (Bulej et al., ICPE 2020).

A cell's goal counts its own runs alone (accelbench.job.runs), so a group takes the runs
its cells would have taken one by one: rounds replace them, they add none. Each cell keeps
its own record at its own path; `conditions.group` names the group, this measurement of
it (the same in every record it wrote) and the order of its rounds.
"""

from __future__ import annotations

import logging
import random
import uuid

from accelbench.families.base import Experiment
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.job.runs import Runs
from accelbench.measuring.outcome import Outcome, RetryableFailure
from accelbench.measuring.settings import RunSettings
from accelbench.platform import provenance
from accelbench.platform.devices import slurm_gpu_shortfall
from accelbench.platform.ranks import ranks_may_fork

log = logging.getLogger(__name__)


def measure_group(
    exps: list[Experiment],
    settings: list[RunSettings],
    fresh_processes: bool,
    rng: random.Random | None = None,
) -> tuple[list[Outcome], list[list[str]]]:
    """Every cell measured in interleaved rounds: (their outcomes, the cells of each round
    in the order they ran)."""
    rng = rng or random.Random()
    cells = [Runs(exp, found, fresh_processes) for exp, found in zip(exps, settings, strict=True)]
    for runs in cells:
        runs.prepare(measurement.before_runs, measurement.host_history, measurement.host_spread)
    rounds: list[list[str]] = []
    with ranks_may_fork(fresh_processes), measurement.gpu_watch(exps[0]) as gpus:
        while due := [runs for runs in cells if runs.wants_more()]:
            rng.shuffle(due)
            for runs in due:
                runs.run(measurement.in_fresh_process if runs.forked else measurement.guarded)
            rounds.append([runs.exp.id for runs in due])
    outcomes = [
        measurement.with_gpu_state(runs.result(measurement.combine_runs), gpus) for runs in cells
    ]
    return outcomes, rounds


def run_group(
    group_id: str,
    exps: list[Experiment],
    settings: list[RunSettings],
    outputs: list[str],
    *,
    context: JobContext,
    final_attempt: bool = True,
    fresh_processes: bool = False,
) -> list[str]:
    """Measure the group `group_id` and write each cell's record atomically to its output;
    returns their statuses. An error on an attempt that is not the last raises
    RetryableFailure instead of writing records, so the scheduler measures the group again."""
    started = provenance.now()
    log.info(
        "group %s: %d cells measured together, their runs in interleaved rounds: %s",
        group_id,
        len(exps),
        ", ".join(exp.id for exp in exps),
    )
    rounds: list[list[str]] = []

    def measure_all() -> list[Outcome]:
        outcomes, rounds[:] = measure_group(exps, settings, fresh_processes)
        return outcomes

    shortfall = slurm_gpu_shortfall(exps[0].parsed_device)
    if shortfall:
        outcomes = [Outcome("failed", shortfall) for _ in exps]
    else:
        outcomes = measurement.watched(exps, settings[0].contention, measure_all, fresh_processes)
    raised = [(exp, outcome) for exp, outcome in zip(exps, outcomes, strict=True) if outcome.raised]
    if raised and not final_attempt:
        exp, outcome = raised[0]
        raise RetryableFailure(f"group {group_id}: {exp.id}: {outcome.reason}")
    membership = {
        "id": group_id,
        "measurement": uuid.uuid4().hex,
        "cells": [exp.id for exp in exps],
        "rounds": rounds,
    }
    for exp, found, output, outcome in zip(exps, settings, outputs, outcomes, strict=True):
        if outcome.status == "ok":
            outcome.conditions = {**(outcome.conditions or {}), "group": membership}
        measurement.write_outcome(exp, found, output, outcome, started, context)
    return [outcome.status for outcome in outcomes]

"""One experiment's independent runs: its goal, what the host says of its runs, the runs so
far, one more run, and all of them combined into one outcome.

A measurement of one experiment (accelbench.job.measurement) adds runs until its goal is
met; a comparison group's (accelbench.job.group) runs its cells' runs in rounds, one of
each cell a round, until none of them wants another. Either way each run is a process of
its own where allowed, and what a cell's goal counts (the time its runs took, its
budget) is its own runs' time: the runs of other cells between two of its own are not
its cost.
"""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import replace

from accelbench.families.base import Experiment, family_of
from accelbench.measuring import energy, host_speed, precision, rerun
from accelbench.measuring.outcome import Outcome
from accelbench.measuring.settings import RunSettings
from accelbench.platform import host_cpus
from accelbench.platform.devices import cpus_used

log = logging.getLogger(__name__)


class Runs:
    """The runs of one experiment: `prepare` before the first (in the process that forks
    them), then `run` while `wants_more`, then `result`. `measured`: how one run is taken
    (measurement.in_fresh_process or measurement.guarded, with the family's measuring
    function); `spreads`: the host's recent cells (rerun.HostSpreads)."""

    def __init__(self, exp: Experiment, settings: RunSettings, forked: bool) -> None:
        family = family_of(exp)
        self.exp = exp
        self.measure = family.measuring_function()
        self.later_runs = family.later_runs_function()
        self.goal = precision.Goal.of(family.precise_metrics, settings)
        if family.repeats_runs_itself:
            # Each forked process trains one run; this process decides how many.
            settings = replace(settings, runs=1, budget_s=0.0)
        self.settings = settings
        self.several = self.goal.least_runs > 1 or self.goal.budget_s > 0
        self.forked = forked and self.several
        self.cpus = host_cpus.ClockWatch(cpus_used(exp.parsed_device))
        self.outcomes: list[Outcome] = []
        self.slowdowns: list[float] = []
        self.failed: Outcome | None = None
        self._own_time = 0.0
        self.host: host_speed.HostHistory | None = None
        self.spread: rerun.Spread | None = None
        self.progress = precision.Progress(self.goal, clock=self._clock)

    def _clock(self) -> float:
        """The time this experiment's own runs have taken: what its goal and budget count."""
        return self._own_time

    def prepare(self, before_runs, host_history, host_spread) -> None:
        """What the job makes once before the runs fork (`before_runs`: imports, the GPU
        questions, the idle baseline, inputs and reference), and what the host says of
        runs of this kind (its recent probes and spread), where the runs are forked."""
        if not self.forked:
            return
        before_runs(self.exp, self.settings)
        self.host = host_history(self.exp, self.settings)
        self.spread = host_spread(self.exp, self.host, rerun.HostSpreads.load())
        self.progress = precision.Progress(self.goal, clock=self._clock, spread=self.spread)

    def wants_more(self) -> bool:
        return self.failed is None and self.progress.more()

    def run(self, measured) -> None:
        """One more run (`measured(measure, exp, settings)` takes it): added to the runs, or,
        where it did not end ok, the measurement's end (`failed`, with which run it was)."""
        run_cpus = self.cpus.cpus  # the runs' own CPUs, which the probe times
        before = host_speed.probe(run_cpus) if self.host else 0.0
        started = time.perf_counter()
        count = len(self.outcomes) + 1
        run_settings = (
            self.settings
            if energy.takes_window(self.settings, count)
            else energy.without_window(self.settings)
        )
        outcome = measured(self.measure, self.exp, run_settings)
        took = time.perf_counter() - started
        self._own_time += took
        self.cpus.poll()
        if outcome.status != "ok":
            if self.several:
                of = f" of {self.goal.least_runs}" if count <= self.goal.least_runs else ""
                outcome.reason = f"run {count}{of}: {outcome.reason}"
            self.failed = outcome
            return
        if self.host:
            self.slowdowns.append(self.host.slowdown(before, host_speed.probe(run_cpus)))
        self.outcomes.append(outcome)
        self.progress.add(outcome.metrics)
        log.info(
            "%s: run %d (%.2f s): +-%.1f%% (target +-%.0f%%)%s",
            self.exp.id,
            count,
            took,
            100 * self.progress.achieved(),
            100 * self.goal.half_width,
            f"; host probe {self.slowdowns[-1]:.2f}x its recent speed" if self.host else "",
        )
        if count == 1 and self.later_runs:
            self.settings = self.later_runs(self.exp, self.settings, outcome)

    def result(self, combine_runs) -> Outcome:
        """The runs combined (`combine_runs(outcomes, spread)`), with how precise they ended
        and what the host did meanwhile in the conditions; or the run that failed."""
        if self.failed is not None:
            return self.failed
        combined = combine_runs(self.outcomes, self.spread)
        combined.conditions = self.progress.report()
        if self.spread is not None:
            combined.conditions.update(self.spread.as_record())
        if self.host:
            combined.conditions.update(
                host_slowed_runs=sum(map(self.host.slowed, self.slowdowns)),
                host_slowdown=statistics.median(self.slowdowns),
                host_probe_s=self.host.reference(),
                host_speed_of_best=self.host.speed_of_best(),
                max_host_slowdown=self.host.limit,
            )
        combined.conditions["cpu_clock"] = self.cpus.record()
        return combined

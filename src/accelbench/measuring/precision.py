"""How many runs a measurement takes: independent runs are added until its interval is as
narrow as asked, or its time budget is spent; and when an interval is too wide to trust.

An experiment runs at least `runs` times; then, while the rerun interval
(statistics.across_runs) of its figure of merit is wider than `half_width` (a fraction
of the median: 0.5 is +-50%) and one more run still fits in `budget_s` seconds
(counted from the end of the first run, which alone pays for compiling and, for a
roof, for searching its best kernel; the next run assumed as long as the last),
another independent run is added, as torch.utils.benchmark's
adaptive_autorange adds blocks and pyperf adds worker processes. Where the host has told
how its runs spread and drift (accelbench.measuring.rerun), the runs the goal needs are predicted
after the least runs, and a measurement the budget or 30 runs cannot bring there stops
at once instead of spending the budget for nothing. The record keeps what the
measurement reached against its goal and, where it stopped short, why
(`Progress.report`). Stopping as soon as the goal is reached costs
the interval a little of its coverage (a run of luck ends the measurement); simulated
with a run-to-run spread of 2% and one run in ten disturbed, an independent rerun's
median still lands inside 91% of the time (tests/test_precision.py).

Which intervals tables, figures and the summary mark imprecise is another question:
not those short of a goal the host cannot reach, but those clearly wider than the host
allows (`imprecise_reason`). The analysis judges every record of a run so
(accelbench.analysis.tidy), against the typical interval of its device kind among all
of them, so that old records and committed references are judged by the same rule, by
more cells than a measurement has seen when it ends.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from statistics import median

from accelbench.measuring import statistics
from accelbench.measuring.rerun import LEAST_CELLS, MOST_SPAN, Spread
from accelbench.measuring.sections import ConditionsSection, Metric
from accelbench.measuring.settings import RunSettings


def _span(half_width: float) -> float:
    """High / low of an interval m (1 +- ...) whose larger side is `half_width` of m, on the
    log scale the rerun interval is built on: exp(2 log(1 + half_width))."""
    return (1 + half_width) ** 2 if math.isfinite(half_width) else math.inf


# An interval more than MARGIN times as wide as the typical one of its device kind on its
# host is clearly wider than the host allows (`imprecise_reason`).
MARGIN = 2.0
WIDE_TEXT = (
    f"its interval is more than {MARGIN:g} times as wide as the typical one of its device kind here"
)
SPAN_TEXT = (
    f"its interval spans more than a factor of {MOST_SPAN:g}, and too few cells of its "
    "device kind here tell their typical one"
)


def typical_width(widths: Iterable[float]) -> float | None:
    """The typical relative half-width of the intervals of one device kind's cells on one
    host: their median (robust to the few wide ones it is to tell), or None with fewer
    than rerun.LEAST_CELLS finite ones."""
    finite = [width for width in widths if math.isfinite(width)]
    return median(finite) if len(finite) >= LEAST_CELLS else None


def imprecise_reason(width: float, span: float, typical: float | None) -> str | None:
    """Why an interval of relative half-width `width` and `span` (high / low) is clearly
    less precise than its host allows, its device kind's typical half-width there being
    `typical` (None: unknown); None where it is not.

    Only the host's own yardstick is fair: where an independent rerun moves every median
    by +-40%, +-50% is as good as the host gives, and marking it would mark every cell.
    MARGIN = 2 is "clearly": simulated on the default machinery (three runs, normal log
    run medians, the host's drift its recent cells' swing), a cell whose runs spread as
    the host's typical cell does is wider than twice the typical interval 4% of the time
    (5% with heavy-tailed t3 runs), one whose runs spread three times as much 45% of the
    time. Where the typical interval is within +-20%, an interval spanning more than a
    factor of MOST_SPAN (+-41% at least) is more than twice as wide and so marked; where
    it is wider, the host itself does not resolve a factor of 2, which the summary
    states once instead of marking every cell. Without a yardstick (too few cells of
    the kind), a span beyond MOST_SPAN is what marks a cell."""
    if typical is None:
        return SPAN_TEXT if not span <= MOST_SPAN else None
    return WIDE_TEXT if width > MARGIN * typical else None


@dataclass(frozen=True)
class Goal:
    """What a measurement aims for: at least `least_runs` runs, then runs until the
    figures of merit are within +-`half_width` of their medians or `budget_s` is spent."""

    least_runs: int
    half_width: float
    budget_s: float
    metrics: tuple[str, ...]

    @classmethod
    def of(cls, metrics: tuple[str, ...], settings: RunSettings) -> Goal:
        """The goal an experiment's settings (a family's config section) set for its figures
        of merit (`metrics`: its family's precise_metrics)."""
        return cls(
            least_runs=int(settings.runs),
            half_width=float(settings.half_width),
            budget_s=float(settings.budget_s),
            metrics=tuple(metrics),
        )


@dataclass
class Progress:
    """The runs of one measurement so far, and whether another one is due: with what the
    host says of its runs (`spread`, accelbench.measuring.rerun), how many the goal needs."""

    goal: Goal
    clock: Callable[[], float] = time.perf_counter
    runs: list[dict[str, Metric]] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    spread: Spread | None = None

    def __post_init__(self) -> None:
        self.last = self.clock()
        self.first_ended: float | None = None

    def add(self, metrics: Mapping[str, Metric]) -> None:
        """One more run, by its metrics (those of the goal that it measured)."""
        now = self.clock()
        self.durations.append(now - self.last)
        self.last = now
        if self.first_ended is None:
            self.first_ended = now
        self.runs.append({name: metrics[name] for name in self.goal.metrics if name in metrics})

    @property
    def spent(self) -> float:
        """Seconds since the first run ended: what the budget counts."""
        return 0.0 if self.first_ended is None else self.clock() - self.first_ended

    def achieved(self) -> float:
        """The widest relative half-width among the figures of merit, across the runs so far
        (one run: its own interval, which does not cover reruns)."""
        if not self.runs:
            return math.inf
        widths = [
            statistics.relative_half_width(
                statistics.across_runs(statistics.distributions(self.runs, name), self.spread)
            )
            for name in self.runs[0]
        ]
        return max(widths, default=math.inf)

    def needed(self) -> int | None:
        """The runs the goal needs at the spread seen (None: no number of runs reaches it),
        the most among the figures of merit; the runs so far where nothing can be told."""
        if self.spread is None or len(self.runs) < 2:
            return len(self.runs)
        most = len(self.runs)
        for name in self.runs[0]:
            medians = [run["median"] for run in statistics.distributions(self.runs, name)]
            if min(medians) <= 0:
                continue
            runs = self.spread.runs_needed([math.log(m) for m in medians], self.goal.half_width)
            if runs is None:
                return None
            most = max(most, runs)
        return most

    def within_reach(self) -> bool:
        """Whether the runs the goal needs fit in the budget and the rerun interval's
        range, each as long as the last; always, where the host tells nothing."""
        needed = self.needed()
        if needed is None or needed > statistics.MAX_RUNS:
            return False
        more = needed - len(self.runs)
        return self.spent + more * self.durations[-1] <= self.goal.budget_s

    def more(self) -> bool:
        """Whether to run once more: fewer runs than the least, or still too wide while
        the goal is within reach and another run (as long as the last) fits in the budget."""
        count = len(self.runs)
        if count < self.goal.least_runs:
            return True
        if count >= statistics.MAX_RUNS or self.achieved() <= self.goal.half_width:
            return False
        if self.spread is not None and not self.within_reach():
            return False
        return self.spent + self.durations[-1] <= self.goal.budget_s

    def report(self) -> ConditionsSection:
        """What the record keeps (its `conditions`): the precision asked and reached, the
        runs, the time spent and, where the goal was missed (`imprecise`), why. That is
        what the measurement did, not the mark of the tables (`imprecise_reason`)."""
        achieved = self.achieved()
        precise = achieved <= self.goal.half_width and _span(achieved) <= MOST_SPAN
        reason = None
        count = len(self.runs)
        if not precise:
            runs = f"{count} run{'s' if count != 1 else ''}"
            needed = self.needed() if self.spread is not None else count
            if count >= statistics.MAX_RUNS:
                reason = f"stopped at {count} runs, the most the rerun interval is defined for"
            elif needed is None:
                reason = (
                    f"stopped after {runs}: no number of runs reaches +-"
                    f"{self.goal.half_width:.0%} at this host's spread and drift"
                )
            elif self.goal.budget_s <= 0:
                reason = f"measured in {runs}, as the configuration asks (its budget_s is 0)"
            elif needed > count:
                reason = (
                    f"stopped after {runs}: needs about {needed} runs at this spread, "
                    f"more than the time budget of {self.goal.budget_s:g} s allows"
                )
            else:
                reason = f"time budget of {self.goal.budget_s:g} s spent after {runs}"
            if achieved <= self.goal.half_width:
                reason = f"its interval spans more than a factor of {MOST_SPAN:g}"
        return {
            "runs": len(self.runs),
            "reached_half_width": achieved if math.isfinite(achieved) else None,
            "half_width_target": self.goal.half_width,
            "imprecise": not precise,
            "imprecise_reason": reason,
            "budget_s": self.goal.budget_s,
            "spent_s": self.spent,
        }


def describe(report: ConditionsSection) -> str:
    """One line for the log and the console: how precise a measurement is, and where it
    stopped short, why."""
    reached = report.get("reached_half_width")
    shown = f"+-{reached:.1%}" if reached is not None else "no interval"
    runs = report["runs"]
    text = f"{shown} after {runs} run{'s' if runs != 1 else ''}"
    text += f" (target +-{report['half_width_target']:.0%})"
    return text + (f": {report['imprecise_reason']}" if report.get("imprecise_reason") else "")

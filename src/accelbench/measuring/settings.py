"""The settings of one experiment: what its family declares from the config, typed.

A family's settings are one frozen dataclass (its declaration's `settings_type`), built
from the rule's params once, where a job starts, and handed down the job chain unchanged:
a change inside the chain (a run that takes no energy window, the settings of later runs)
is a `dataclasses.replace`. The rule's params stay a plain JSON document (`as_params`):
Snakemake reruns an experiment when they change, and the record's `params` come from them.

`RunSettings` is what the job chain reads (its goal, its contention guard, its energy
windows), `TimedSettings` adds what the timers read; each family's type adds its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

# The rule's params: a JSON document Snakemake compares between runs; with the experiment's
# parameters and what its run settled, the record's `params` (an open object in its schema).
Params = dict[str, Any]

Settings = TypeVar("Settings", bound="RunSettings")


class SettingsError(ValueError):
    """A settings mapping with a key its type does not have."""


def _refuse_unknown(kind: type, given: Mapping[str, Any]) -> None:
    allowed = [f.name for f in fields(kind)]
    unknown = [key for key in given if key not in allowed]
    if unknown:
        raise SettingsError(
            f"unknown {kind.__name__} key {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(allowed)}"
        )


@dataclass(frozen=True)
class ContentionSettings:
    """The config's `contention` keys: how a measurement disturbed by other load is retried
    (accelbench.measuring.contention) and when the host slowed a run (host_speed)."""

    max_other_cpus: float = 0.25
    retries: int = 1
    pause_s: float = 3
    max_host_slowdown: float = 1.2

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> ContentionSettings:
        given = params or {}
        _refuse_unknown(cls, given)
        return cls(**given)

    def as_params(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _per_kind(cpu: float, cuda: float) -> Mapping[str, float]:
    return field(default_factory=lambda: {"cpu": cpu, "cuda": cuda})


@dataclass(frozen=True)
class EnergySettings:
    """The config's `energy` keys (accelbench.measuring.energy), seconds per device kind as
    given (a kind the config leaves out takes its default), and whether this run takes a
    window at all: the job chain turns it off beyond `window_runs` (without_window)."""

    enabled: bool = True
    min_window_s: Mapping[str, float] = _per_kind(cpu=0.2, cuda=1.0)
    baseline_s: Mapping[str, float] = _per_kind(cpu=0.5, cuda=1.0)
    window_runs: int = 3
    window: bool = True

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> EnergySettings:
        given = params or {}
        _refuse_unknown(cls, given)
        return cls(**given)

    def min_window_for(self, kind: str) -> float:
        return float({**EnergySettings().min_window_s, **self.min_window_s}[kind])

    def baseline_for(self, kind: str) -> float:
        return float({**EnergySettings().baseline_s, **self.baseline_s}[kind])

    def as_params(self) -> Params:
        """The config's keys, and `window` where a run takes none."""
        params: Params = {
            "enabled": self.enabled,
            "min_window_s": dict(self.min_window_s),
            "baseline_s": dict(self.baseline_s),
            "window_runs": self.window_runs,
        }
        if not self.window:
            params["window"] = False
        return params


# The nested settings and the types that read them from params.
_NESTED = {"contention": ContentionSettings, "energy": EnergySettings}


@dataclass(frozen=True)
class RunSettings:
    """What the job chain reads of any family's settings: the seed, the goal of its runs
    (accelbench.measuring.precision: at least `runs`, more until the rerun interval is within
    +-half_width of the median or budget_s is spent), the contention guard and the energy."""

    seed: int = 0
    runs: int = 1
    half_width: float = 0.25
    budget_s: float = 0.0
    contention: ContentionSettings = field(default_factory=ContentionSettings)
    energy: EnergySettings = field(default_factory=EnergySettings)

    # The keys of the rule's params, in their order; those also in OPTIONAL only when set.
    PARAMS: ClassVar[tuple[str, ...]] = (
        "seed",
        "runs",
        "half_width",
        "budget_s",
        "contention",
        "energy",
    )
    OPTIONAL: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_params(cls: type[Settings], params: Mapping[str, Any]) -> Settings:
        """The settings of the rule's params (as_params); SettingsError names a key the
        type does not have, and the keys it has."""
        _refuse_unknown(cls, params)
        values = {
            key: _NESTED[key].from_params(value) if key in _NESTED else value
            for key, value in params.items()
        }
        return cls(**values)

    def as_params(self) -> Params:
        """The rule's params (PARAMS, in order), and what the job chain set beyond them (a
        later run's settings): a process handed them measures with the same settings."""
        defaults = type(self)()
        params: Params = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in self.PARAMS:
                if f.name in self.OPTIONAL and value is None:
                    continue
            elif value == getattr(defaults, f.name):
                continue
            params[f.name] = value.as_params() if f.name in _NESTED else value
        return {key: params[key] for key in sorted(params, key=self._order)}

    def _order(self, key: str) -> int:
        return self.PARAMS.index(key) if key in self.PARAMS else len(self.PARAMS)


@dataclass(frozen=True)
class TimedSettings(RunSettings):
    """Settings of a family whose calls the timers time (accelbench.measuring.timers): at
    least `min_run_time` seconds and `samples` samples a run, after at most `warmup_s` of
    warm-up; a call slower than `max_call_s` is not timed (None: no limit)."""

    min_run_time: float = 0.3
    samples: int = 10
    warmup_s: float = 0.0
    max_call_s: float | None = None

"""The settings of one training experiment, from the config's train.* keys.

A rule's params are exactly these settings, so Snakemake reruns an experiment
when one of its own settings changes (its model's options included) and not
when another model's options do. They land in the record's params.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelbench.measuring.settings import Params, RunSettings
from accelbench.train.models import models, resolve_options

# The training family's figure of merit: what an ok record cannot lack, and what its runs
# repeat until it is precise.
TIME_METRIC = "time_per_batch"

COMPILE_BACKENDS = ("off", "eager", "aot_eager", "inductor")


@dataclass(frozen=True)
class TrainSettings(RunSettings):
    """The settings of a training experiment: its goal, as every family's (with its own
    defaults), and how each run trains."""

    seed: int = 0
    steps: int = 20  # measured steps of each run, at least
    # Seconds of measured steps in each run, at least (0: exactly `steps`).
    min_run_time: float = 0.0
    warmup_steps: int = 3  # warm-up steps of each run, at least
    # Most seconds of warm-up while the step time still falls (0: exactly `warmup_steps`).
    warmup_s: float = 0.0
    runs: int = 1  # independent runs, at least: the interval covers reruns (statistics.across_runs)
    # Runs are added until the rerun interval is within +-half_width of the median, or the
    # measurement has taken budget_s seconds (accelbench.measuring.precision; 0: exactly `runs`).
    half_width: float = 0.05
    budget_s: float = 0.0
    image_size: int | None = None  # ImageNet-type models; None: the model's default
    model_options: Mapping[str, Any] = field(default_factory=dict)  # overrides of this model
    data_dir: str | None = None  # real datasets are looked for here; None: synthetic only
    pipeline_microbatches: int = 4
    compile: str = "off"  # torch.compile backend, or "off"
    channels_last: bool = False
    # The digest of the model's source where it is the user's (registry.source_digest).
    source_digest: str | None = None
    # Counted by the first run and handed to the later ones (later_runs): counting a
    # model takes up to seconds, and its FLOPs do not change from run to run.
    flops_per_sample: float | None = None

    PARAMS = (
        "seed",
        "steps",
        "min_run_time",
        "warmup_steps",
        "warmup_s",
        "runs",
        "half_width",
        "budget_s",
        "contention",
        "energy",
        "image_size",
        "model_options",
        "data_dir",
        "pipeline_microbatches",
        "compile",
        "channels_last",
        "source_digest",
    )
    OPTIONAL = ("source_digest",)

    def __post_init__(self) -> None:
        if self.compile not in COMPILE_BACKENDS:
            raise ValueError(
                f"compile {self.compile!r} is not known; allowed: {', '.join(COMPILE_BACKENDS)}"
            )


def for_model(config: Mapping[str, Any], model: str) -> Params:
    """The settings of `model`'s experiments under `config` (the rule's params, less the
    digest of a model of the user's)."""
    train = config["train"]
    defaults = TrainSettings()
    return {
        "seed": config.get("seed", defaults.seed),
        "steps": train.get("steps", defaults.steps),
        "min_run_time": train.get("min_run_time", defaults.min_run_time),
        "warmup_steps": train.get("warmup_steps", defaults.warmup_steps),
        "warmup_s": train.get("warmup_s", defaults.warmup_s),
        "runs": train.get("runs", defaults.runs),
        "half_width": train.get("half_width", defaults.half_width),
        "budget_s": train.get("budget_s", defaults.budget_s),
        "contention": dict(config.get("contention") or {}),
        "energy": dict(config.get("energy") or {}),
        "image_size": train.get("image_size", defaults.image_size),
        "model_options": dict(train.get("model_options", {}).get(model, {})),
        "data_dir": train.get("data_dir") or None,
        "pipeline_microbatches": train.get("pipeline_microbatches", defaults.pipeline_microbatches),
        "compile": train.get("compile", defaults.compile),
        "channels_last": train.get("channels_last", defaults.channels_last),
    }


def validate(config: Mapping[str, Any]) -> None:
    """Model option names and types under train.model_options; OptionError names the key."""
    registered = models()
    for model, overrides in config["train"].get("model_options", {}).items():
        if model not in registered:
            raise ValueError(
                f"config key train.model_options: unknown model {model!r}; "
                f"allowed: {', '.join(registered)}"
            )
        resolve_options(registered[model], overrides, config["train"].get("image_size"))

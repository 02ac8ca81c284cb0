"""The result record: one JSON file per experiment, written atomically.

Every experiment yields a record, including the ones that could not run, so a
table never loses a cell silently. A crash mid-write never leaves a file that
looks valid: the record is written to a temporary file in the same directory
and renamed over the target only once it is complete.

What a record may hold is one JSON Schema (record_schema), built here from the
declarations below and published as SCHEMA_FILE for other tools; accelbench
checks every record it writes or reads against the same schema (with jsonschema-rs,
accelbench.records.json_schema), and then against the CROSS_RULES a schema cannot state. A
record that breaks either is refused with the file and the key named: it never
reaches a table as a number it does not hold.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from string import Formatter
from typing import Any, Final, NotRequired, TypedDict

from accelbench import grid
from accelbench.families import FAMILIES, Family
from accelbench.grid import retry_flag
from accelbench.measuring import energy, gpu_state
from accelbench.measuring.sections import (
    CheckSection,
    ConditionsSection,
    EnergySection,
    MeasuredBy,
    Metrics,
    RawSamples,
    Series,
)
from accelbench.measuring.settings import Params
from accelbench.platform import host_cpus, provenance
from accelbench.platform.provenance import Provenance
from accelbench.records.json_schema import (
    JsonSchema,
    SchemaViolation,
    compile_schema,
    finite_or_none,
    shown,
)
from accelbench.registry import UnitSection

SCHEMA_VERSION = 1
# skipped: deliberately not run (e.g. naive Python above its size limit), with the reason.
STATUSES = ("ok", "unavailable", "oom", "failed", "skipped")
# Optional: per-step values, name -> {"unit": str, "values": [number or null, ...]}
# (e.g. the loss of every training step); metrics hold the summaries.
SERIES_KEY: Final = "series"
# Optional: what else the machine did during the measurement (accelbench.measuring.contention),
# with "busy": true where it stayed above the limit after the retries, or where the host
# slowed at least half of its runs (accelbench.measuring.host_speed).
CONDITIONS_KEY: Final = "conditions"
# Optional: the raw samples behind the distribution metrics, run by run,
# name -> {"unit": str, "runs": [[number or null, ...], ...]}.
RAW_KEY: Final = "raw"
# Optional: what measured it, {"implementation": "module:variant", "timer": str}.
MEASURED_BY_KEY: Final = "measured_by"
# Optional: the energy of the measured work (accelbench.measuring.energy): "ok" with the method, the
# idle baseline and each window, or "too_short"/"unavailable" with the reason.
ENERGY_KEY: Final = "energy"
# Optional: where the measured unit (kernel, workload, model) came from and what its source
# was (accelbench.registry.Unit): {"origin": "builtin", a plugin folder or an entry point,
# "files": [...], "digest": ...}.
UNIT_KEY: Final = "unit"
# Optional, on a "failed" record only: true where the failure was a passing fault (a full
# disk, a process killed from outside other than by the OOM killer;
# accelbench.measuring.outcome), so
# the workflow's next run measures the cell again instead of keeping the record.
TRANSIENT_KEY: Final = "transient"
REQUIRED_KEYS = (
    "schema_version",
    "experiment",
    "id",
    "status",
    "reason",
    "params",
    "metrics",
    "check",
    "provenance",
)
# Where the schema is published, below the workflow's root.
SCHEMA_FILE = "workflow/schemas/record.schema.json"


def time_metrics() -> dict[str, str]:
    """What an "ok" record of a measured family cannot lack: its time, which its tables,
    summary and comparisons are built on (accelbench.families declares it)."""
    return {name: family.time_metric for name, family in FAMILIES.items() if family.time_metric}


# The units metrics are measured in, by what their numbers may be. Times, rates, sizes,
# work and energy are never negative; counts are whole numbers; a loss takes any sign.
NONNEGATIVE_UNITS = (
    "s",
    "GFLOP/s",
    "GB/s",
    "items/s",
    "samples/s",
    "flop/byte",
    "FLOP",
    "bytes",
    "W",
    "J",
)
COUNT_UNITS = ("threads", "processes", "nodes", "GPUs", "count")
SIGNED_UNITS = ("loss",)
UNITS = NONNEGATIVE_UNITS + COUNT_UNITS + SIGNED_UNITS
# An energy above the idle baseline (energy.metrics) below its counter's resolution is
# recorded as an upper bound; records written before that hold a number, which noise could
# take below zero.
SIGNED_METRICS = "_above_idle$"
# An energy metric's resolution, and the upper bound that stands for an energy above idle
# below it (energy.metrics): one number, never negative.
ENERGY_BOUND_METRICS = "_(resolution|upper_bound)$"

# A distribution metric (statistics.summarize, across_runs, rate_from_time): n samples, and
# statistics in the metric's unit, ordered as below; a spread is never negative.
DISTRIBUTION_REQUIRED = (
    "unit",
    "n",
    "median",
    "q1",
    "q3",
    "iqr",
    "ci_low",
    "ci_high",
    "ci_level",
    "min",
    "max",
)
LOCATION_STATISTICS = ("median", "q1", "q3", "ci_low", "ci_high", "min", "max", "mean")
SPREAD_STATISTICS = ("iqr", "std", "between_run_std")
ORDERED_STATISTICS = (("min", "q1", "median", "q3", "max"), ("ci_low", "median", "ci_high"))
# Each statistic and the next of its chain: every distribution holds them all (the schema).
ORDERED_PAIRS = tuple(pair for chain in ORDERED_STATISTICS for pair in itertools.pairwise(chain))

# Rules a JSON Schema cannot state; validate_record checks them after the schema.
CROSS_RULES = (
    "the id is a result path of the record's experiment family with a well-formed device "
    "(grid.experiment_of_id)",
    "every parameter the id names equals the params entry of the same name",
    "in every distribution metric min <= q1 <= median <= q3 <= max and ci_low <= median <= ci_high",
)


class Record(TypedDict):
    """One result record, as written and read (make_record, load_record); the keys after
    `provenance` only where they hold something."""

    schema_version: int
    experiment: str
    id: str
    status: str
    reason: str | None
    params: Params
    metrics: Metrics
    check: CheckSection | None
    provenance: Provenance  # provenance.collect
    series: NotRequired[dict[str, Series]]
    conditions: NotRequired[ConditionsSection]
    raw: NotRequired[dict[str, RawSamples]]
    measured_by: NotRequired[MeasuredBy]
    unit: NotRequired[UnitSection]
    energy: NotRequired[EnergySection]
    transient: NotRequired[bool]


class RecordError(ValueError):
    """A file that is not a valid result record; the message names the file and the defect."""


def _number(minimum: float | None = None, nullable: bool = False) -> JsonSchema:
    found: JsonSchema = {"type": ["number", "null"] if nullable else "number"}
    if minimum is not None:
        found["minimum"] = minimum
    return found


def _text(nullable: bool = False) -> JsonSchema:
    return {"type": ["string", "null"] if nullable else "string"}


def _closed(required: tuple[str, ...] = (), **properties: JsonSchema) -> JsonSchema:
    """An object with exactly these keys, `required` among them."""
    found: JsonSchema = {"type": "object", "properties": properties}
    if required:
        found["required"] = list(required)
    found["additionalProperties"] = False
    return found


def _distribution(units: tuple[str, ...], signed: bool) -> JsonSchema:
    """A distribution metric in one of `units`; its statistics at least 0 unless `signed`."""
    location = _number() if signed else _number(0)
    return _closed(
        DISTRIBUTION_REQUIRED,
        unit={"enum": list(units)},
        n={"type": "integer", "minimum": 1},
        runs={"type": "integer", "minimum": 1},
        ci_level={"type": "number", "minimum": 0, "maximum": 1},
        **dict.fromkeys(LOCATION_STATISTICS, location),
        **dict.fromkeys(SPREAD_STATISTICS, _number(0)),
    )


def _single(units: tuple[str, ...], value: JsonSchema) -> JsonSchema:
    return _closed(("unit", "value"), unit={"enum": list(units)}, value=value)


def _metric(signed: bool) -> JsonSchema:
    """A metric: a single `value`, or a distribution. Its unit decides what its numbers may
    be: never negative (NONNEGATIVE_UNITS, unless `signed`), a count, or of any sign."""
    in_units = {
        kind: {"properties": {"unit": {"enum": list(units)}}}
        for kind, units in (("count", COUNT_UNITS), ("positive", NONNEGATIVE_UNITS))
    }
    if signed:
        single: JsonSchema = _single(UNITS, _number())
        distribution = _distribution(UNITS, signed=True)
    else:
        single = {
            "if": in_units["count"],
            "then": _single(COUNT_UNITS, {"type": "integer", "minimum": 0}),
            "else": {
                "if": in_units["positive"],
                "then": _single(NONNEGATIVE_UNITS, _number(0)),
                "else": _single(SIGNED_UNITS, _number()),
            },
        }
        distribution = {
            "if": in_units["positive"],
            "then": _distribution(NONNEGATIVE_UNITS, signed=False),
            "else": _distribution(COUNT_UNITS + SIGNED_UNITS, signed=True),
        }
    return {"if": {"required": ["value"]}, "then": single, "else": distribution}


def _check_section() -> JsonSchema:
    """The correctness check: against the float64 reference (kernels, data science), and for
    a roof, each ceiling's winning candidate and every candidate's rate, and why a ceiling
    was not measured."""
    base = {
        "passed": {"type": "boolean"},
        # null: infinite, e.g. a result that differs from its reference anywhere.
        "relative_error": _number(0, nullable=True),
        "tolerance": _number(0, nullable=True),
        "measure": _text(),
        "reference": _text(),
        # A kernel's result in another dtype than asked: the one it came in, and the asked.
        "output_dtype": _text(),
        "dtype": _text(),
    }
    roof = _closed(
        ("passed",),
        **base,
        kernel=_text(),
        backend=_text(),
        size={"type": "integer", "minimum": 1},
        candidates={"type": "object", "additionalProperties": _number(0)},
    )
    found = _closed(
        ("passed",),
        **base,
        roofs={"type": "object", "additionalProperties": roof},
        unmeasured={"type": "object", "additionalProperties": {"type": "string", "minLength": 1}},
    )
    found["type"] = ["object", "null"]
    return found


def _energy_section() -> JsonSchema:
    window = _closed(
        ("joules", "seconds", "calls"),
        joules=_number(0),
        seconds={"type": "number", "exclusiveMinimum": 0},
        calls={"type": "integer", "minimum": 1},
    )
    measured = ("method", "unit", "counter_period_s", "baseline_w", "baseline_s", "windows")
    found = _closed(
        ("status",),
        status={"enum": list(energy.STATUSES)},
        reason=_text(nullable=True),
        method=_text(),
        counters={"type": "array", "items": _text()},
        unit={"enum": list(energy.WORK_UNITS)},
        samples_per_unit={"type": ["integer", "null"], "minimum": 1},
        counter_period_s=_number(0),
        baseline_w=_number(0),
        baseline_s=_number(0),
        baseline_age_s=_number(0),
        min_window_s=_number(0),
        windows={"type": "array", "minItems": 1, "items": window},
    )
    found["allOf"] = [
        {
            "if": {"properties": {"status": {"const": "ok"}}},
            "else": {
                "description": "energy that is not ok says why",
                "properties": {"reason": {"type": "string", "minLength": 1}},
                "required": ["reason"],
            },
        },
        {
            "if": {"properties": {"status": {"const": "unavailable"}}},
            "else": {"description": "energy that was measured", "required": list(measured)},
        },
    ]
    return found


def _energy_bounds() -> list[JsonSchema]:
    """An energy above idle below its counter's resolution (energy.metrics) has its upper
    bound and its resolution in place of its value, never beside it."""
    rules = []
    for work in (*energy.WORK_UNITS, "sample"):
        name = f"energy_per_{work}{energy.ABOVE_IDLE}"
        rules.append(
            {
                "if": {"required": [f"{name}_upper_bound"]},
                "then": {
                    "description": f"{name} below the counter's resolution: its bound, no value",
                    "required": [f"{name}_resolution"],
                    "properties": {name: False},
                },
            }
        )
    return rules


def _cpu_list() -> JsonSchema:
    return {"type": "array", "items": {"type": "integer", "minimum": 0}}


def _nullable(section: JsonSchema) -> JsonSchema:
    return {**section, "type": ["object", "null"]}


def _figure(source: bool = False) -> JsonSchema:
    """A figure's min, median and max over its samples, never negative, and where it came
    from where `source`; null where the machine did not tell it."""
    statistics = ("min", "median", "max")
    properties: dict[str, JsonSchema] = {
        **dict.fromkeys(statistics, _number(0)),
        "samples": {"type": "integer", "minimum": 1},
    }
    if source:
        properties["source"] = {"enum": list(gpu_state.SOURCES)}
    return _nullable(_closed(tuple(properties), **properties))


def _unreadable() -> JsonSchema:
    """Why each field that is null is null: field -> reason."""
    return {"type": "object", "additionalProperties": {"type": "string", "minLength": 1}}


def _gpu_state_section() -> JsonSchema:
    """What the GPUs did during the measurement (gpu_state.GpuWatch): per GPU, by NVML's
    UUID, clocks, power, temperature and throttling, null where NVML did not tell."""
    reason_name = {
        "anyOf": [{"enum": list(gpu_state.REASONS.values())}, {"pattern": "^0x[0-9a-f]+$"}],
        "type": "string",
    }
    figures = {name: _figure(source=True) for name in gpu_state.FIGURES}
    gpu = _closed(
        (
            *gpu_state.FIGURES,
            "power_limit_w",
            "temperature_c",
            "clock_event_reasons",
            "throttled_s",
            "readings",
            "busy_readings",
            "busy_s",
            "unreadable",
        ),
        **figures,
        power_limit_w=_number(0, nullable=True),
        temperature_c=_nullable(_closed(("min", "max"), min=_number(0), max=_number(0))),
        clock_event_reasons={"type": ["array", "null"], "items": reason_name},
        throttled_s=_closed(
            tuple(gpu_state.VIOLATIONS),
            **dict.fromkeys(gpu_state.VIOLATIONS, _number(0, nullable=True)),
        ),
        readings={"type": "integer", "minimum": 0},
        busy_readings={"type": "integer", "minimum": 0},
        busy_s=_number(0),
        unreadable=_unreadable(),
    )
    found = _closed(
        ("status",),
        status={"enum": list(gpu_state.STATUSES)},
        reason=_text(nullable=True),
        method=_text(),
        period_s={"type": "number", "exclusiveMinimum": 0},
        seconds=_number(0),
        gpus={"type": "object", "minProperties": 1, "additionalProperties": gpu},
    )
    found["if"] = {"properties": {"status": {"const": "ok"}}}
    found["then"] = {
        "description": "a GPU state that was read has its GPUs",
        "required": ["method", "period_s", "seconds", "gpus"],
    }
    found["else"] = {
        "description": "a GPU state that was not read says why",
        "properties": {"reason": {"type": "string", "minLength": 1}},
        "required": ["reason"],
    }
    return found


def _cpu_clock_section() -> JsonSchema:
    """The clocks and governors of the CPUs the runs used (host_cpus.ClockWatch)."""
    return _closed(
        ("cpus", "mhz", "sources", "governors", "unreadable"),
        cpus=_cpu_list(),
        mhz=_figure(),
        sources={"type": "array", "items": {"enum": list(host_cpus.CLOCK_SOURCES)}},
        governors={"type": ["array", "null"], "items": _text()},
        unreadable=_unreadable(),
    )


def _conditions_section() -> JsonSchema:
    """What else the machine did (contention.Conditions, and the guard's verdict), the CPUs
    the measurement ran on (devices.cpus_used) and their clocks, what its GPUs did, and how
    precise it ended (precision.Progress.report)."""
    rates = ("window_s", "other_cpus", "workflow_cpus", "steal_cpus", "load_average_1m")
    return _closed(
        ("busy",),
        busy={"type": "boolean"},
        **{name: _number(0) for name in (*rates, "resolution_cpus", "max_other_cpus")},
        cpus_online={"type": "integer", "minimum": 1},
        cpu_mhz=_number(0, nullable=True),
        governor=_text(nullable=True),
        attempts={"type": "integer", "minimum": 1},
        cpus_used=_cpu_list(),
        runs={"type": "integer", "minimum": 1},
        reached_half_width=_number(0, nullable=True),
        half_width_target={"type": "number", "exclusiveMinimum": 0},
        imprecise={"type": "boolean"},
        imprecise_reason=_text(nullable=True),
        budget_s=_number(0),
        spent_s=_number(0),
        host_slowed_runs={"type": "integer", "minimum": 0},
        host_slowdown=_number(0),
        host_probe_s=_number(0, nullable=True),
        host_speed_of_best=_number(0, nullable=True),
        max_host_slowdown=_number(0),
        host_run_spread=_number(0),
        host_drift=_number(0),
        cpu_clock=_cpu_clock_section(),
        gpu_state=_gpu_state_section(),
        group=_group_section(),
    )


def _group_section() -> JsonSchema:
    """The comparison group a record was measured in (accelbench.job.group): its id, this
    measurement of it (the same in each of its cells' records: their runs were taken in
    the same rounds, so two of them pair round by round), its cells and the order of
    every round."""
    ids = {"type": "array", "items": _text()}
    return _closed(
        ("id", "measurement", "cells", "rounds"),
        id=_text(),
        measurement=_text(),
        cells={**ids, "minItems": 2},
        rounds={"type": "array", "items": ids},
    )


def _provenance_section() -> JsonSchema:
    """Where and with what it was measured (provenance.collect); each part is optional."""
    count = {"type": ["integer", "null"], "minimum": 1}
    slurm_value = {"type": ["string", "integer", "null"]}
    slurm = _closed(
        **dict.fromkeys(provenance.SLURM_VARIABLES, slurm_value),
        allocation={"type": ["object", "null"], "additionalProperties": _text()},
        exclusive={"type": ["boolean", "null"]},
    )
    slurm["type"] = ["object", "null"]
    # host_cpus.Topology.record: every key, null where sysfs does not tell
    counts = ("sockets", "cores", "logical_cpus", "threads_per_core")
    cpu_topology = _closed(
        (*counts, "numa_nodes", "smt_active", "usable"),
        **dict.fromkeys(counts, count),
        numa_nodes={
            "type": ["object", "null"],
            "patternProperties": {"^[0-9]+$": _cpu_list()},
            "additionalProperties": False,
        },
        smt_active={"type": ["boolean", "null"]},
        usable=_cpu_list(),
    )
    python_build = _closed(
        (*provenance.PYTHON_BUILD_TEXTS, *provenance.PYTHON_BUILD_FLAGS),
        **dict.fromkeys(provenance.PYTHON_BUILD_TEXTS, _text(nullable=True)),
        **dict.fromkeys(provenance.PYTHON_BUILD_FLAGS, {"type": ["boolean", "null"]}),
    )
    blas = _closed(
        ("internal_api",),
        internal_api=_text(),
        **dict.fromkeys(
            ("prefix", "filepath", "version", "architecture", "threading_layer"),
            _text(nullable=True),
        ),
        num_threads={"type": ["integer", "null"], "minimum": 1},
    )
    return _closed(
        **dict.fromkeys(("host", "platform", "cpu_model", "python"), _text(nullable=True)),
        python_build=_nullable(python_build),
        blas={"type": ["array", "null"], "items": blas},
        cpu_count=count,
        usable_cpus=count,
        cpu_topology=cpu_topology,
        libraries={"type": "object", "additionalProperties": _text(nullable=True)},
        accelerator=_closed(
            cuda_runtime=_text(nullable=True),
            cudnn={"type": ["integer", "null"]},
            gpus={"type": "array", "items": _text()},
            uuids={"type": "array", "items": _text()},
            driver=_text(nullable=True),
        ),
        cuda_visible_devices=_text(nullable=True),
        git=_closed(commit=_text(nullable=True), dirty={"type": ["boolean", "null"]}),
        config_hash=_text(nullable=True),
        slurm=slurm,
        modules={"type": "array", "items": _text()},
        seed={"type": ["integer", "null"]},
        started=_text(),
        finished=_text(),
    )


def _id_regex(kind: type) -> str:
    """The ids of one family as a regex: its result pattern below results/, less .json."""
    pattern = kind.pattern.removeprefix(grid.RESULTS_DIR + "/").removesuffix(".json")
    parts = {field.name: field.type for field in fields(kind)}
    regex = ""
    for text, name, _, _ in Formatter().parse(pattern):
        regex += re.escape(text)
        if name:
            regex += "[1-9][0-9]*" if parts[name] == "int" else "[^/]+"
    return f"^{regex}$"


def _family_rules(family: Family) -> JsonSchema:
    """What a record of one family holds: an id of its shape and the parameters the id
    names; if ok, its time or, a roof, its ceilings."""
    kind = family.experiment_type
    params = {
        field.name: {"type": "integer", "minimum": 1}
        if field.type == "int"
        else {"type": "string", "minLength": 1}
        for field in fields(kind)
    }
    return {
        "description": f"experiment {family.name!r}: the id is a {family.name} result path, "
        "the params hold its parts",
        "properties": {
            "id": {"pattern": _id_regex(kind)},
            "params": {"required": list(params), "properties": params},
        },
        "if": {"properties": {"status": {"const": "ok"}}, "required": ["status"]},
        "then": _ok_rules(family),
    }


def _ok_rules(family: Family) -> JsonSchema:
    """What an ok record of the family cannot lack: its time, or a roof's ceilings."""
    if family.time_metric:
        return {
            "description": f"an ok {family.name} record has its time",
            "properties": {"metrics": {"required": [family.time_metric]}},
        }
    if family.ceilings:
        on_gpu = {"properties": {"params": {"properties": {"device": {"pattern": "cuda"}}}}}
        return {
            "allOf": [
                *_ceilings(family.ceilings),
                {"if": on_gpu, "then": {"allOf": _ceilings(family.gpu_ceilings)}},
            ]
        }
    return {}


def _ceilings(ceilings: tuple[str, ...]) -> list[JsonSchema]:
    """Each ceiling in an ok roof's metrics, or in its check's `unmeasured` with the reason."""
    return [
        {
            "if": {"properties": {"metrics": {"required": [ceiling]}}},
            "else": {
                "description": f"an ok roof has {ceiling} or says why not",
                "properties": {
                    "check": {
                        "type": "object",
                        "required": ["unmeasured"],
                        "properties": {"unmeasured": {"required": [ceiling]}},
                    }
                },
            },
        }
        for ceiling in ceilings
    ]


def _status_rule() -> JsonSchema:
    """A record's metrics follow its status: numbers only where it ran, a reason where not."""
    return {
        "if": {"properties": {"status": {"const": "ok"}}, "required": ["status"]},
        "then": {
            "description": "an ok record has metrics, and its check (if any) passed",
            "properties": {
                "metrics": {"minProperties": 1},
                "check": {"properties": {"passed": {"const": True}}},
            },
        },
        "else": {
            "description": "a record that did not run says why and has no metrics",
            "properties": {
                "reason": {"type": "string", "minLength": 1},
                "metrics": {"maxProperties": 0},
            },
        },
    }


def _transient_rule() -> JsonSchema:
    """A passing fault (a failure worth measuring again) can only be a failed record."""
    return {
        "if": {"required": [TRANSIENT_KEY]},
        "then": {
            "description": "only a failed record is a passing fault",
            "properties": {"status": {"const": "failed"}},
        },
    }


def _family_rules_in_turn() -> JsonSchema:
    """Each family's rules, applied to its records alone: if kernel ... else if train ...,
    one test per family."""
    by_family: JsonSchema = {}
    for family in reversed(FAMILIES.values()):
        by_family = {
            "if": {
                "properties": {"experiment": {"const": family.name}},
                "required": ["experiment"],
            },
            "then": _family_rules(family),
            **({"else": by_family} if by_family else {}),
        }
    return by_family


def record_schema() -> JsonSchema:
    """The record's JSON Schema, as published in SCHEMA_FILE: what validate_record checks,
    except the CROSS_RULES (stated in its description)."""
    series = _closed(
        ("unit", "values"),
        unit={"enum": list(UNITS)},
        values={"type": "array", "items": _number(nullable=True)},
    )
    raw = _closed(
        ("unit", "runs"),
        unit={"enum": list(UNITS)},
        runs={"type": "array", "items": {"type": "array", "items": _number(0, nullable=True)}},
    )
    schema = _closed(
        REQUIRED_KEYS,
        schema_version={"const": SCHEMA_VERSION},
        experiment={"enum": list(FAMILIES)},
        id={"type": "string"},
        status={"enum": list(STATUSES)},
        reason=_text(nullable=True),
        params={"type": "object"},
        metrics={
            "type": "object",
            "patternProperties": {
                SIGNED_METRICS: {"$ref": "#/$defs/signed_metric"},
                ENERGY_BOUND_METRICS: {"$ref": "#/$defs/energy_bound"},
            },
            "additionalProperties": {"$ref": "#/$defs/metric"},
            "allOf": _energy_bounds(),
        },
        check=_check_section(),
        provenance=_provenance_section(),
        series={"type": "object", "additionalProperties": series},
        conditions=_conditions_section(),
        raw={"type": "object", "additionalProperties": raw},
        measured_by=_closed(("implementation", "timer"), implementation=_text(), timer=_text()),
        unit=_closed(
            ("origin", "files", "digest"),
            origin={"type": "string", "minLength": 1},
            files={"type": "array", "minItems": 1, "items": _text()},
            digest={"type": "string", "pattern": "^[0-9a-f]{16}$"},
        ),
        energy=_energy_section(),
        transient={"const": True},
    )
    schema["allOf"] = [_status_rule(), _transient_rule(), _family_rules_in_turn()]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "accelbench result record",
        "description": (
            "One experiment's result, written by accelbench (src/accelbench/records/record.py, "
            "which generates this file). Numbers are finite and integers have no fraction. "
            "Also checked, beyond this schema: " + "; ".join(CROSS_RULES) + "."
        ),
        **schema,
        "$defs": {
            "metric": _metric(signed=False),
            "signed_metric": _metric(signed=True),
            "energy_bound": _single(("J", "W"), _number(0)),
        },
    }


def schema_text() -> str:
    """The published schema file's text."""
    return json.dumps(record_schema(), indent=2) + "\n"


def write_schema(root: str | os.PathLike[str] = ".") -> Path:
    """Write the schema to SCHEMA_FILE below the workflow's `root` (`make record-schema`)."""
    path = Path(root) / SCHEMA_FILE
    path.write_text(schema_text(), encoding="utf-8")
    return path


@functools.cache
def _compiled_schema(families: tuple[str, ...]):
    """The record schema's checker for these registered families (compiled once)."""
    return compile_schema(record_schema())


def make_record(
    *,
    experiment: str,
    experiment_id: str,
    status: str,
    params: Params,
    provenance: Provenance,
    metrics: Metrics | None = None,
    check: CheckSection | None = None,
    reason: str | None = None,
    series: dict[str, Series] | None = None,
    conditions: ConditionsSection | None = None,
    raw: dict[str, RawSamples] | None = None,
    measured_by: MeasuredBy | None = None,
    energy: EnergySection | None = None,
    transient: bool = False,
    unit: UnitSection | None = None,
) -> Record:
    """Assemble a record and validate it, so an invalid one is never written."""
    record: Record = {
        "schema_version": SCHEMA_VERSION,
        "experiment": experiment,
        "id": experiment_id,
        "status": status,
        "reason": reason,
        "params": params,
        "metrics": metrics or {},
        "check": check,
        "provenance": provenance,
    }
    if series:
        record[SERIES_KEY] = series
    if conditions:
        record[CONDITIONS_KEY] = conditions
    if raw:
        record[RAW_KEY] = raw
    if measured_by:
        record[MEASURED_BY_KEY] = measured_by
    if unit:
        record[UNIT_KEY] = unit
    if energy:
        record[ENERGY_KEY] = energy
    if transient:
        record[TRANSIENT_KEY] = True
    validate_record(record)
    return record


def validate_record(record: Any, source: str = "record") -> None:
    """Raise RecordError, naming `source` and the key, if `record` breaks the record
    contract: the schema (record_schema), then the CROSS_RULES."""
    try:
        _compiled_schema(tuple(FAMILIES))(record)
    except SchemaViolation as err:
        raise RecordError(f"{source}: {err}") from None
    _check_id_and_params(record, source)
    for name, metric in record["metrics"].items():
        if "median" in metric:
            for low, high in ORDERED_PAIRS:
                if metric[low] > metric[high]:
                    raise RecordError(
                        f"{source}: metrics.{name}: {low} {metric[low]!r} is above "
                        f"{high} {metric[high]!r}"
                    )


def _check_id_and_params(record: Record, source: str) -> None:
    try:
        exp = grid.experiment_of_id(record["id"])
    except grid.GridError as err:
        raise RecordError(f"{source}: id: {err}") from None
    params = record["params"]
    for name in _parameter_names(type(exp)):
        said = getattr(exp, name)
        if params[name] != said:
            raise RecordError(
                f"{source}: params.{name}: {shown(params[name])}, "
                f"but the id {record['id']!r} says {shown(said)}"
            )


@functools.cache
def _parameter_names(kind: type) -> tuple[str, ...]:
    """The parameters an id names: the fields of its experiment type."""
    return tuple(field.name for field in fields(kind))


def _current_umask() -> int:
    """The process umask (reading it means setting it; it is set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_record(path: str | os.PathLike[str], record: Record) -> Path:
    """Validate and write `record` to `path` atomically (temp file, fsync, rename)."""
    validate_record(record, str(path))
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(finite_or_none(record), indent=2, sort_keys=True, allow_nan=False)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
            handle.flush()
            # mkstemp makes the file 0600, and the mode survives the rename: give it the
            # mode any other new file gets, so colleagues on a shared file system can read it.
            os.fchmod(handle.fileno(), 0o666 & ~_current_umask())
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    if record.get(TRANSIENT_KEY):
        _flag_transient(target)
    return target


def load_record(path: str | os.PathLike[str]) -> Record:
    """Read and validate one record; RecordError names the file and what is wrong."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        # As json.loads reads bytes, with one decoder for all records (json.loads with an
        # option makes a decoder a call).
        record = _DECODER.decode(data.decode(json.detect_encoding(data), "surrogatepass"))
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, _not_json's
        raise RecordError(f"{path}: not valid JSON ({err})") from err
    validate_record(record, str(path))
    return record


def _flag_transient(path: Path) -> None:
    """Give a transient record just written its retry flag (file times move in clock ticks:
    a flag written right after the record could bear the same time)."""
    flag = retry_flag(path)
    flag.touch()
    newer = path.stat().st_mtime_ns + 1_000_000_000
    os.utime(flag, ns=(newer, newer))


def _not_json(constant: str) -> None:
    """Python's json reads NaN, Infinity and -Infinity; JSON has no such numbers."""
    raise ValueError(f"{constant} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_not_json)


# Below results/: previous versions of records that were measured again, one folder per run.
REPLACED_DIR = "replaced"


def ensure_writable(results: Path) -> None:
    """Refuse a run whose results folder cannot be written, before anything is measured,
    in one line (not the traceback of the first write that fails)."""
    try:
        results.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=results):
            pass
    except OSError as err:
        raise OSError(
            err.errno,
            f"cannot write to {results}/ ({err.strerror}): the workflow writes its records, "
            "logs and tables there; make it writable, or run in a checkout you can write to",
        ) from None


def record_files(results: str | os.PathLike[str]) -> list[Path]:
    """The record files under a results folder, sorted, without the earlier versions of
    records measured again (REPLACED_DIR)."""
    results = Path(results)
    return sorted(
        path
        for path in results.rglob("*.json")
        if REPLACED_DIR not in path.relative_to(results).parts
    )


def replaced_folder(results: Path) -> Path:
    """The folder of this run's replaced records: results/replaced/<run start>."""
    return results / REPLACED_DIR / time.strftime("%Y-%m-%dT%H%M%S")


def attempt_log(log_file: str | os.PathLike[str], attempt: int | str) -> Path:
    """Where the log of a job's failed attempt is kept, beside the job's log
    (`n64.log` -> `n64.attempt1.log`): Snakemake empties the log before the next attempt.
    `attempt` "*" gives the pattern of them all."""
    log_path = Path(log_file)
    return log_path.with_name(f"{log_path.stem}.attempt{attempt}{log_path.suffix}")


def keep_replaced(
    paths: Iterable[str | os.PathLike[str]], results: Path, archive: Path
) -> list[Path]:
    """Copy each existing file under `results` about to be replaced (the records measured again,
    the logs of their jobs) to `archive`, and move there the logs of their jobs' failed
    attempts (attempt_log). Returns the copies.

    Snakemake removes a job's old output and log before the job runs and again when it
    fails, also when it fails before it ran (a submission Slurm refused), so without this
    copy a valid measurement could be lost for none. Each copy is written whole or not at
    all (temporary file, fsync, rename): a disk that fills meanwhile stops the run with
    the record still in its place, and no truncated copy.
    """
    kept = []
    for path in map(Path, paths):
        if path.is_file():
            kept.append(_archive(path, archive / path.relative_to(results)))
        for attempt in sorted(path.parent.glob(attempt_log(path, "*").name)):
            kept.append(_archive(attempt, archive / attempt.relative_to(results)))
            attempt.unlink()
    return kept


def _archive(path: Path, copy: Path) -> Path:
    """`path` copied to `copy` atomically, with its times."""
    partial = None
    try:
        copy.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(prefix=f".{copy.name}.", suffix=".tmp", dir=copy.parent)
        os.close(fd)
        shutil.copyfile(path, partial)
        with open(partial, "rb") as written:
            os.fsync(written.fileno())
        shutil.copystat(path, partial)
        os.replace(partial, copy)
    except BaseException as err:
        if partial is not None:
            Path(partial).unlink(missing_ok=True)
        if isinstance(err, OSError):
            why = f"cannot keep {path} before it is measured again: {err}"
            raise OSError(err.errno, why) from err
        raise
    return copy

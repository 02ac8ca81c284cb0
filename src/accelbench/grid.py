"""Experiment ids <-> wildcards <-> result paths, grid expansion and validity rules.

The result path is the interface: it is fully determined by an experiment's
parameters and parses back into them. Combinations that make no sense are
excluded from the grid with a stated reason, and naming such a path as a
target fails before any job starts with that same reason. What each family's
experiments are, and which make sense, its declaration says (accelbench.families);
this module asks every registered family.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from accelbench.families import FAMILIES
from accelbench.families.base import (
    RESULTS_DIR,
    WILDCARD_CONSTRAINT,
    Experiment,
    GridError,
    device_name,
    from_parts,
    positive_int,
)


def retry_flag(path: str | os.PathLike[str]) -> Path:
    """The hidden file beside a record that failed by a passing fault, a second newer than the
    record: the workflow asks for it as the record's input where it exists
    (target_check), so Snakemake measures the experiment again. It stays once the cell
    is measured (older than the new record then): were it removed, Snakemake would see the
    experiment's inputs change and measure it yet again."""
    path = Path(path)
    return path.with_name(f".{path.name}.retry")


def target_check(family: str, config: Mapping[str, Any] | None = None):
    """A rule's input function that parses its target path and asks for no input but the
    record's retry flag, where a record there once failed by a passing fault.

    Snakemake evaluates it while planning, so a wrong part of a path named as a
    target stops the run before any job starts, with GridError naming the part;
    and a transient record, older than its flag (retry_flag), is measured again.
    """
    parse = FAMILIES[family].parse

    def check(wildcards) -> list[str]:
        exp = parse(dict(wildcards.items()), config)
        flag = retry_flag(exp.path)
        return [str(flag)] if flag.exists() else []

    return check


def planned_experiment(rule: str, wildcards: Mapping[str, str]) -> Experiment:
    """The experiment a job of `rule` measures, from the wildcards of its output path, which
    its rule's input function (target_check) already parsed in the Snakemake that planned it.

    The fields are only converted, not checked against the kernel, workload and model
    catalogues again: importing them (Numba among them) would cost every job's script
    half a second or more.
    """
    kind = family_of_rule(rule).experiment_type
    parts = {field.name: wildcards[field.name] for field in fields(kind)}
    return from_parts(kind, parts, lambda name, value: int(value))


# A comparison group's rule is this, its family and a digest of its id (group_rule).
GROUP_RULE_PREFIX = "compared"


def group_rule(group_id: str) -> str:
    """The Snakemake rule that measures the comparison group `group_id` (ComparisonGroup.id):
    `compared_kernel_3f9a0c12`, its family and a digest of the rest. A digest, not the id
    spelled out, keeps the report's rule graph narrow; it stays the same while the group
    does, and the job's log (results/logs/groups/<id>.log) and outputs name the cells."""
    family, _, rest = group_id.partition("/")
    return f"{GROUP_RULE_PREFIX}_{family}_{hashlib.sha1(rest.encode()).hexdigest()[:8]}"


def measuring_family(rule: str):
    """The family whose experiments `rule` measures, one at a time or as a comparison
    group; None for a rule that measures none (the aggregation's)."""
    for family in FAMILIES.values():
        if rule == family.rule or rule.startswith(f"{GROUP_RULE_PREFIX}_{family.name}_"):
            return family
    return None


def family_of_rule(rule: str):
    """The family whose experiments `rule` measures; GridError for a rule that measures none."""
    for family in FAMILIES.values():
        if family.rule == rule:
            return family
    raise GridError(f"rule {rule!r} measures no experiment family")


def parse_path(path: str, family: str, config: Mapping[str, Any] | None = None) -> Experiment:
    """A result path of `family` -> its experiment, checked as a target is (GridError names
    a wrong part)."""
    pattern = FAMILIES[family].pattern
    relative = str(path).removeprefix("./")
    below = relative.removeprefix(RESULTS_DIR + "/")
    match = _path_regex(pattern).fullmatch(below)
    if not match or below == relative:
        raise GridError(f"{path} is not a {family} result path ({pattern})")
    return FAMILIES[family].parse(match.groupdict(), config)


@functools.cache
def _path_regex(pattern: str) -> re.Pattern[str]:
    """A result pattern below results/ as a regex matching the end of a path."""
    below = re.escape(pattern.removeprefix(RESULTS_DIR + "/"))
    below = below.replace(r"\{", "{").replace(r"\}", "}")
    return re.compile(r"(?:^|/)" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", below) + "$")


def cell_of_path(path: str) -> tuple[str, str, dict[str, str]] | None:
    """(family, id, parameters) a result path stands for, read from the path alone;
    None if it is not a result path. Used for records that cannot be read themselves."""
    text = str(path).replace("\\", "/")
    for family in FAMILIES.values():
        match = _path_regex(family.pattern).search(text)
        if match:
            record_id = match.group(0).lstrip("/").removesuffix(".json")
            return family.name, record_id, match.groupdict()
    return None


def record_patterns() -> dict[str, str]:
    """Every record's path pattern, by the part after results/ that names its family."""
    return {family.pattern.split("/")[1]: family.pattern for family in FAMILIES.values()}


def unmade_target_reason(target: str, workdir: str) -> str | None:
    """What is wrong with a target no rule makes: an absolute path (Snakemake matches targets
    relative to the workflow's folder), or a path below results/ of no record's shape,
    naming the part that is wrong. None for a target elsewhere: Snakemake's message stands.
    """
    path = Path(target)
    if not path.is_absolute():
        return _record_shape_problem(os.path.normpath(target))
    try:
        relative = path.resolve().relative_to(Path(workdir).resolve()).as_posix()
    except ValueError:
        return f"{target} is outside the workflow's folder {workdir}, where every target lies"
    hint = f"{target}: name targets relative to the workflow's folder {workdir}: {relative}"
    problem = _record_shape_problem(relative)
    return f"{hint}; {problem}" if problem else hint


def check_targets(targets: Iterable[str], made: Callable[[str], bool], workdir: str) -> None:
    """Refuse the first target no rule makes (`made` says which do) with what is wrong with
    it (unmade_target_reason), before Snakemake says only "No rule to produce"."""
    for target in targets:
        if not made(target) and (reason := unmade_target_reason(target, workdir)):
            raise GridError(reason)


def _record_shape_problem(path: str) -> str | None:
    """The part of `path`, below results/, that no record path has there."""
    parts = path.split("/")
    if len(parts) < 2 or parts[0] != RESULTS_DIR:
        return None
    patterns = record_patterns()
    pattern = patterns.get(parts[1])
    if pattern is None:
        close = difflib.get_close_matches(parts[1], patterns, n=1)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        return (
            f"{path}: no result is named {parts[1]!r}{guess}; records are "
            f"{', '.join(patterns.values())}"
        )
    shapes = pattern.split("/")
    family = parts[1].removesuffix("s")
    if len(parts) != len(shapes):
        return f"{path} has {len(parts)} parts; a {family} record has {len(shapes)}: {pattern}"
    for number, (part, shape) in enumerate(zip(parts, shapes, strict=True), start=1):
        regex = "[^/]+".join(map(re.escape, re.split(r"\{\w+\}", shape)))
        if not re.fullmatch(regex, part):
            return f"{path}: part {number}, {part!r}, must read {shape!r} ({pattern})"
    return None


def experiment_of_path(path: str) -> Experiment:
    """The experiment a result path names (experiment_of_id of its part below results/)."""
    relative = str(path).removeprefix("./").removeprefix(RESULTS_DIR + "/")
    return experiment_of_id(relative.removesuffix(".json"))


def experiment_of_id(record_id: str) -> Experiment:
    """The experiment a record id (its result path below results/, without .json) names.

    Only the form is checked (sizes and batches positive integers, the device
    well-formed: the grammar has one spelling per device), not the catalogues of kernels,
    models and workloads: reading 100,000 records must not import them.
    GridError names the part that is wrong.
    """
    for family in FAMILIES.values():
        kind = family.experiment_type
        match = _path_regex(kind.pattern).fullmatch(f"{record_id}.json")
        if match:
            exp = from_parts(kind, match.groupdict(), positive_int)
            device_name(exp.device)
            return exp
    shapes = ", ".join(
        family.pattern.removeprefix(RESULTS_DIR + "/") for family in FAMILIES.values()
    )
    raise GridError(f"{record_id!r} is not a result path below results/ ({shapes}, less .json)")


@dataclass(frozen=True)
class Grid:
    experiments: tuple[Experiment, ...]
    excluded: tuple[tuple[Experiment, str], ...]

    @property
    def paths(self) -> list[str]:
        return [exp.path for exp in self.experiments]


def expand(config: Mapping[str, Any]) -> Grid:
    """Every experiment the config asks for, split into runnable and excluded-with-reason."""
    kept: tuple[Experiment, ...] = ()
    excluded: tuple[tuple[Experiment, str], ...] = ()
    for family in FAMILIES.values():
        expanded = family.expand(config, kept)
        kept, excluded = kept + expanded.kept, excluded + expanded.excluded
    return Grid(kept, excluded)


@dataclass(frozen=True)
class ComparisonGroup:
    """Cells that one row of a comparison table sets against each other on one kind of
    device (a kernel's backends and its CPU's thread counts at one dtype and size, a
    model's precisions on one GPU): one job measures them, their runs interleaved in rounds
    in a new order each round, so that what the host does meanwhile falls on all of them
    alike and the ratio of two of them is read round by round (accelbench.job.measurement).
    Each cell keeps its own record and result path; naming one as a target measures the
    group again. A CPU's and a GPU's cells never share a group: on a cluster they run in
    different partitions, on different nodes."""

    family: str
    key: tuple[str, ...]  # the device kind, then the parameters the cells share
    experiments: tuple[Experiment, ...]

    @property
    def id(self) -> str:
        """`kernel/cpu/matmul/float32/512`: the family, the device kind, what is shared."""
        return "/".join((self.family, *self.key))

    @property
    def rule(self) -> str:
        """The name of the Snakemake rule that measures this group (measuring_family)."""
        return group_rule(self.id)

    @property
    def log(self) -> str:
        return f"{RESULTS_DIR}/logs/groups/{self.id}.log"

    @property
    def paths(self) -> list[str]:
        return [exp.path for exp in self.experiments]

    @property
    def priority(self) -> int:
        """The Snakemake priority of the group's job: its cell count, so that a run starts
        with its largest groups. A fresh host's first job is measured before the host has
        shown its spread, and measured again at the end of `make run` (run.first_cells);
        a first job of many cells tells the host its spread at once (rerun.LEAST_CELLS),
        so it is the only one measured twice."""
        return len(self.experiments)


def _group_key(exp: Experiment) -> tuple[str, ...] | None:
    """What `exp` shares with the cells of its group (None where it is measured alone)."""
    family = FAMILIES[exp.family]
    device = exp.parsed_device
    if not family.compared_over or device.nodes > 1 or not family.groupable(exp):
        return None
    shared = [
        str(getattr(exp, found.name))
        for found in fields(exp)
        if found.name not in (*family.compared_over, "device")
    ]
    return (device.kind, *shared)


def comparison_groups(experiments: Iterable[Experiment]) -> list[ComparisonGroup]:
    """The comparison groups of a grid's experiments, in the grid's order: every set of two
    or more cells a group would hold (a cell with no peer is measured alone, as before)."""
    found: dict[tuple[str, tuple[str, ...]], list[Experiment]] = {}
    for exp in experiments:
        key = _group_key(exp)
        if key is not None:
            found.setdefault((exp.family, key), []).append(exp)
    return [
        ComparisonGroup(family, key, tuple(cells))
        for (family, key), cells in found.items()
        if len(cells) > 1
    ]


def validate_config(config: Mapping[str, Any]) -> None:
    """Names the schema cannot know (registered kernels, backends, models) and device strings,
    each family's section by its declaration.

    Runs when the Snakefile is parsed, so a bad name stops the run before any job.
    """
    for family in FAMILIES.values():
        family.validate(config)


def wildcard_constraints() -> dict[str, str]:
    """One path segment for each wildcard of every family's result path."""
    return {
        name: WILDCARD_CONSTRAINT
        for family in FAMILIES.values()
        for name in re.findall(r"\{(\w+)\}", family.pattern)
    }

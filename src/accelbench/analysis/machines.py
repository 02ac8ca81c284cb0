"""Several machines side by side: the cells of work they share, each with its own numbers.

A source is the records of one run: a results folder, a committed `reference/<gpu>/` (its
records under `records/`), a colleague's copy of either, or a tidy .parquet. A cell of work
is an experiment less its device: its family's grid parameters but the device (matmul,
torch, float32, n=1024; resnet50, fp32, single, batch 32), and the parameters beyond the
grid that change the work itself (`WORK_OPTIONS`: a model's options), so two records of
one id whose model options differ did not do the same work and are never joined. A cell
is shared where two or more sources measured it ok, with a time; a joined table has a row
per shared cell and a column per source and device, each number its own machine's, at
its own date. Cells of one source only are counted, not shown. A record that is in two
sources (a run kept as a reference, then compared with itself) counts once, in the first.

Numbers of two machines are never set against each other as a factor here: where a
machine measured the same cell on its GPU and its CPU, its own factor
(accelbench.analysis.gpu_vs_cpu) says what the GPU pays there.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd

from accelbench.analysis import compare, gpu_vs_cpu, tidy
from accelbench.families import Family
from accelbench.platform.devices import names_a_gpu
from accelbench.records import record as results

# A committed reference holds its records in this folder; a results folder holds them at
# its top.
RECORDS = "records"
# The committed references, in the workflow's folder.
REFERENCES = "reference"
# Parameters beyond the grid's that change the work: a model's options (depth, image size).
WORK_OPTIONS = ("options",)
# What each record of a cell keeps of its tidy row, besides its parameters.
NUMBERS = ("median", "ci_low", "ci_high", "ci_level")
FLAGS = ("busy", "imprecise")
# The columns every joined table has, whatever its records (none, say).
CELL_COLUMNS = (
    "experiment",
    "source",
    "cell",
    "work",
    "label",
    "options_text",
    "device",
    "id",
    "status",
    *NUMBERS,
    *FLAGS,
    "unit",
    "host",
    "cpu_model",
    "cpu_topology",
    "gpu",
    "started",
    "git_commit",
)
# How many cells of work a sentence names before it counts the rest.
NAMED = 12


@dataclass(frozen=True)
class Source:
    """The records of one run: `name` as the reader knows it (the path given, "this run"),
    its tidy table, and whether it is a committed reference (records/ below it)."""

    name: str
    frame: pd.DataFrame
    reference: bool = False
    problems: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Joined:
    """`cells`: the records of the shared cells of work, one row each, in reading order
    (`source`: the position of its source; `work` and `label`: its cell; NUMBERS, FLAGS,
    `unit` and the rest of its tidy row: device, parameters, provenance); `alone`: per
    source, its cells of work no other source measured; `unlike`: the cells several sources
    measured with different options."""

    sources: tuple[Source, ...]
    cells: pd.DataFrame
    alone: dict[str, int]
    unlike: list[str]


def load(path: str | os.PathLike[str], name: str | None = None) -> Source:
    """The records of a results folder, a reference folder (its records/) or a tidy
    .parquet; compare.CompareError names a path that holds none or does not exist."""
    path = Path(path)
    reference = (path / RECORDS).is_dir()
    frame, problems = compare.load_run(path / RECORDS if reference else path)
    return Source(name or str(path), frame, reference, tuple(problems))


def load_all(paths: Sequence[str | os.PathLike[str]]) -> list[Source]:
    """Each of `paths` loaded (`load`); compare.CompareError names a path given twice."""
    seen: dict[Path, str] = {}
    for path in paths:
        resolved = Path(path).resolve()
        if resolved in seen:
            raise compare.CompareError(f"{path}: given twice (also as {seen[resolved]})")
        seen[resolved] = str(path)
    return [load(path) for path in paths]


def reference_folders(root: str | os.PathLike[str]) -> list[Path]:
    """The committed references of the workflow at `root`: each folder of its reference/
    that holds records/."""
    folder = Path(root) / REFERENCES
    found = sorted(folder.iterdir()) if folder.is_dir() else []
    return [path for path in found if (path / RECORDS).is_dir()]


def reference_files(root: str | os.PathLike[str]) -> list[Path]:
    """The record files of the committed references (a summary is made again when they
    change)."""
    return [file for path in reference_folders(root) for file in results.record_files(path)]


def committed_references(root: str | os.PathLike[str]) -> list[Source]:
    """The committed references of the workflow at `root`, each named reference/<folder>;
    a folder whose records/ holds no record is left out."""
    found = []
    for path in reference_folders(root):
        try:
            found.append(load(path, f"{REFERENCES}/{path.name}"))
        except compare.CompareError:
            continue
    return found


def grid_keys(family: Family) -> list[str]:
    """The parameters that name a cell of `family` on any device: its grid parameters less
    the device (a record's id less its device)."""
    return [field.name for field in fields(family.experiment_type) if field.name != "device"]


def key_text(value: Any) -> str:
    """A parameter value as a part of a key: every missing value alike, a whole number alike
    whether a table holds it as an integer or a float."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _options_text(value: Any) -> str:
    """Work options as a key: the same options in any key order alike; "" for none."""
    if not isinstance(value, str):
        return key_text(value)
    try:
        return json.dumps(json.loads(value), sort_keys=True)
    except ValueError:
        return value


def _joined_texts(
    rows: pd.DataFrame, names: Sequence[str], text: Callable[[Any], str]
) -> pd.Series:
    """Per row, the values of the columns `names` as `text` writes them, joined by "|" (a
    column that is not there counts as empty)."""
    parts = [
        rows[name].map(text) if name in rows else pd.Series("", index=rows.index) for name in names
    ]
    return pd.concat(parts, axis=1).astype(str).agg("|".join, axis=1)


def _cell_rows(position: int, source: Source, name: str, family: Family, keys_of) -> pd.DataFrame:
    """The ok records of one family of a source that hold its time, with their cell of work
    (`cell`: its parameters; `work`: those and its options) and numbers."""
    frame, metric = source.frame, family.time_metric
    column = f"{metric}_median"
    if column not in frame:
        return frame.iloc[:0]
    rows = frame[(frame["experiment"] == name) & (frame["status"] == "ok")]
    rows = rows[rows[column].astype(float).notna()]
    if rows.empty:
        return rows
    keys = keys_of(family)
    cell = name + "|" + _joined_texts(rows, keys, key_text)
    options = _joined_texts(rows, WORK_OPTIONS, _options_text)
    return rows.assign(
        source=position,
        cell=cell,
        work=cell + "|" + options,
        label=rows.apply(tidy.row_label, axis=1, params=keys).astype("object"),
        options_text=options,
        unit=frame.attrs.get("units", {}).get(column, "s"),
        **{field: rows[f"{metric}_{field}"].astype(float) for field in NUMBERS},
        **{flag: rows.get(flag, False) for flag in FLAGS},
    )


def _ordered(rows: pd.DataFrame, keys_of) -> pd.DataFrame:
    """The rows family by family, each in its parameters' reading order, then by source."""
    parts = []
    for name, family in gpu_vs_cpu.work_families().items():
        here = rows[rows["experiment"] == name]
        if len(here):
            parts.append(gpu_vs_cpu.in_reading_order(here, [*keys_of(family), "work", "source"]))
    return pd.concat(parts, ignore_index=True) if parts else rows.reset_index(drop=True)


def _labelled(cells: pd.DataFrame) -> pd.DataFrame:
    """Labels that tell every cell of work apart: where two cells share one (their options
    differ), each names its options."""
    works = cells.groupby("label")["work"].nunique()
    twice = cells["label"].map(works).gt(1)
    named = cells["label"] + ", options " + cells["options_text"].astype(str)
    return cells.assign(label=named.where(twice, cells["label"]))


def measured(
    source: Source, position: int = 0, keys_of: Callable[[Family], list[str]] = grid_keys
) -> pd.DataFrame:
    """The cells of work `source` measured ok, with a time: its records, each with its cell
    (named by `keys_of`; `source`: `position`), in reading order."""
    parts = [
        _cell_rows(position, source, name, family, keys_of)
        for name, family in gpu_vs_cpu.work_families().items()
    ]
    parts = [part for part in parts if len(part)]
    if not parts:
        return pd.DataFrame(columns=list(CELL_COLUMNS))
    return _ordered(pd.concat(parts, ignore_index=True), keys_of)


def join(sources: Sequence[Source], keys_of: Callable[[Family], list[str]] = grid_keys) -> Joined:
    """The cells of work two or more of `sources` measured ok (cells of work named by
    `keys_of`: by default the grid's, the implementation among them), with each source's
    records of them."""
    rows = pd.concat(
        [measured(source, position, keys_of) for position, source in enumerate(sources)],
        ignore_index=True,
    )
    rows = rows[~(rows["started"].notna() & rows.duplicated(["id", "host", "started"]))]
    shared = rows["work"].map(rows.groupby("work")["source"].nunique()).ge(2)
    single = rows[~shared]
    alone = {
        source.name: single.loc[single["source"] == position, "work"].nunique()
        for position, source in enumerate(sources)
    }
    several = single["cell"].map(rows.groupby("cell")["source"].nunique()).ge(2)
    unlike = list(dict.fromkeys(_ordered(single[several], keys_of)["label"]))
    cells = _labelled(_ordered(rows[shared], keys_of))
    return Joined(tuple(sources), cells, alone, unlike)


def columns(joined: Joined) -> list[tuple[int, str]]:
    """The (source, device) columns of a joined table, by source, devices in natural order."""
    cells = joined.cells
    return [
        (position, device)
        for position in range(len(joined.sources))
        for device in tidy.natural_devices(cells.loc[cells["source"] == position, "device"])
    ]


def _distinct(values: pd.Series) -> list[str]:
    return sorted({str(value) for value in values.dropna()})


def cpu_name(model: Any) -> str:
    """A CPU model as a sentence names it: without trademark signs."""
    return " ".join(re.sub(r"\((R|TM|tm)\)", " ", str(model)).split())


def dates(rows: pd.DataFrame) -> str:
    """The days `rows` were measured on (UTC): one day, or the first and the last."""
    days = sorted({stamp.strftime("%Y-%m-%d") for stamp in rows["started"].dropna()})
    if not days:
        return "date unknown"
    return days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"


def commits(rows: pd.DataFrame) -> str:
    """The commits `rows` were measured at, shortened as git shortens them ("" for none)."""
    return ", ".join(commit[:7] for commit in _distinct(rows["git_commit"]))


def machine_text(rows: pd.DataFrame) -> str:
    """The machine of `rows`: 'NVIDIA H200 on host vm (Intel Xeon Processor)', or without a
    GPU 'host vm (Intel Xeon Processor)'."""
    hosts = " and ".join(_distinct(rows["host"])) or "unnamed"
    cpus = ", ".join(dict.fromkeys(map(cpu_name, _distinct(rows["cpu_model"])))) or "CPU unknown"
    on_gpu = rows[rows["device"].map(names_a_gpu).astype(bool)]
    gpus = ", ".join(_distinct(on_gpu["gpu"]))
    machine = f"host {hosts} ({cpus})"
    return f"{gpus} on {machine}" if gpus else machine


def source_text(source: Source, rows: pd.DataFrame) -> str:
    """A source as a column names it: a committed reference with its commit, else its name."""
    commit = commits(rows) if source.reference else ""
    return f"{source.name} at {commit}" if commit else source.name


def column_lines(joined: Joined, position: int, device: str) -> list[str]:
    """What names a column: its host and CPU, its GPU (on a GPU), the device and the dates
    of its records, and its source."""
    cells = joined.cells
    rows = cells[(cells["source"] == position) & (cells["device"] == device)]
    cpus = ", ".join(dict.fromkeys(map(cpu_name, _distinct(rows["cpu_model"]))))
    lines = [", ".join(part for part in (", ".join(_distinct(rows["host"])), cpus) if part)]
    if names_a_gpu(device):
        lines.append(", ".join(_distinct(rows["gpu"])) or "GPU unknown")
    lines.append(f"{device}, {dates(rows)}")
    return [*lines, source_text(joined.sources[position], rows)]


def named(labels: Sequence[str]) -> str:
    """Cells of work in a sentence: the first NAMED, then how many more."""
    shown = "; ".join(labels[:NAMED])
    more = len(labels) - NAMED
    return shown + (f"; and {more} more" if more > 0 else "")


def counts_text(joined: Joined) -> str:
    """How many cells of work each source measured alone."""
    return "; ".join(f"{name} {count}" for name, count in joined.alone.items())


def unlike_text(joined: Joined) -> str | None:
    """The cells measured on several machines with different options, or None."""
    if not joined.unlike:
        return None
    count = len(joined.unlike)
    return (
        f"Not joined: {count} cell{'s' if count != 1 else ''} measured on several machines "
        f"whose {', '.join(WORK_OPTIONS)} differ, not the same work: {named(joined.unlike)}."
    )


def nothing_shared(joined: Joined) -> str:
    """Why a joined table has no row: no cell of work was measured ok on two sources."""
    names = ", ".join(source.name for source in joined.sources)
    lines = [
        f"No cell of work is shared: none was measured ok on two of {names}. Cells of work "
        f"each measured: {counts_text(joined)}."
    ]
    return "\n".join([*lines, *filter(None, [unlike_text(joined)])])

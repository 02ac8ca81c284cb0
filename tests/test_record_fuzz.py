"""Tampered records by the hundred: each is a record the writer could have written, or a
listed problem with its cell marked; nothing downstream crashes on them.

Valid records of every family are mutated at random (seeded): a value of another
JSON type, a flipped sign, NaN or Infinity, a key dropped or added, a parameter or
the id that no longer matches the path, two statistics swapped, the file cut
short. The published JSON Schema, read by jsonschema, is the second opinion: what
it refuses accelbench must refuse, and what accelbench refuses beyond it must
break one of the rules a schema cannot state, checked here on their own.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import random
import shutil
from dataclasses import fields
from pathlib import Path

import jsonschema
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from accelbench.analysis import (
    compare,
    crossovers,
    outputs,
    provenance_summary,
    summary,
    tables,
    tidy,
)
from accelbench.families import FAMILIES
from accelbench.families.base import POSITIVE_INT
from accelbench.records import record as results
from accelbench.studies.roofline import offload, roofline
from accelbench.studies.shi2016 import comparison as shi2016

from records import (
    KERNELS,
    TRAIN,
    datasci_records,
    kernel_record,
    roof_record,
    steps,
    with_energy,
    write_records,
)

SEED = 30
REPO_ROOT = Path(__file__).resolve().parents[1]
SCHEMA = jsonschema.Draft202012Validator(
    json.loads((REPO_ROOT / results.SCHEMA_FILE).read_text(encoding="utf-8"))
)
# Values of each JSON type, to put where another type is.
OTHER_TYPES = (True, "true", None, [1.0], {"x": 1.0}, 7, -0.5)
ORDERS = (("min", "q1", "median", "q3", "max"), ("ci_low", "median", "ci_high"))
SPREADS = ("n", "runs", "ci_level", "iqr", "std", "between_run_std")


def base_records():
    """A small grid of every family and status, with energy and GPU cells: enough for
    every table, figure and analysis to have something to draw."""
    gpu_kernels = [
        kernel_record("torch", "cuda1", size, samples=steps(start, start / 100))
        for size, start in ((256, 3e-4), (512, 4e-4))
    ]
    roofs = [roof_record("cpu1"), roof_record("cuda1", host_copy=25.0)]
    return [
        *with_energy(TRAIN),
        *KERNELS,
        *gpu_kernels,
        *with_energy(datasci_records(["cpu4", "cuda1"])[::3]),
        *roofs,
    ]


def same(a, b) -> bool:
    """JSON equality: true is not 1, 1 is 1.0 (and -0.0 is 0.0)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b or (a != a and b != b)
    return type(a) is type(b) and a == b


def sites(node, path=()):
    """Every (path, value) in a parsed record, the record itself first."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from sites(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from sites(value, (*path, index))


def parent_of(record, path):
    for part in path[:-1]:
        record = record[part]
    return record


def json_type(value) -> str:
    if is_number(value):
        return "number"
    return type(value).__name__


def is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def nonnegative_site(record, path) -> bool:
    """A number in a metric that can never be negative: every number of a metric in a unit
    that is never negative, and a spread or count of any metric."""
    if len(path) != 3 or path[0] != "metrics":
        return False
    metric = record["metrics"][path[1]]
    signed = metric["unit"] in results.SIGNED_UNITS or path[1].endswith("_above_idle")
    return path[2] in SPREADS or not signed


def other_grid_value(value):
    """Another value a grid parameter of the same type could have."""
    if isinstance(value, int):
        return value * 2
    if POSITIVE_INT.match(value[-1]):  # a device: cpu1 -> cpu3
        return value[:-1] + str(int(value[-1]) + 2)
    return value + "x"


def mutate(record, rng):
    """(category, mutated text, whether accelbench must refuse it) of one record."""
    category = rng.choice(
        ("retype", "negate", "non_finite", "drop", "extra", "params", "id", "swap", "cut")
    )
    mutant = copy.deepcopy(record)
    every = list(sites(mutant))[1:]
    numbers = [(path, value) for path, value in every if is_number(value)]
    must = True
    if category == "retype":
        path, value = rng.choice([site for site in every if not isinstance(site[1], dict)])
        parent_of(mutant, path)[path[-1]] = rng.choice(
            [other for other in OTHER_TYPES if json_type(other) != json_type(value)]
        )
        must = path[0] == "metrics" or path == ("schema_version",)
    elif category == "negate":
        path, value = rng.choice(numbers)
        parent_of(mutant, path)[path[-1]] = -value
        must = value > 0 and nonnegative_site(record, path)
    elif category == "non_finite":
        path, _ = rng.choice(numbers)
        parent_of(mutant, path)[path[-1]] = rng.choice((math.nan, math.inf, -math.inf))
    elif category == "drop":
        path, _ = rng.choice(
            [site for site in every if isinstance(parent_of(mutant, site[0]), dict)]
        )
        del parent_of(mutant, path)[path[-1]]
        must = len(path) == 1 and path[0] in results.REQUIRED_KEYS
    elif category == "extra":
        objects = [path for path, value in sites(mutant) if isinstance(value, dict)]
        path = rng.choice([path for path in objects if path[:1] != ("params",)])
        parent = mutant
        for part in path:
            parent = parent[part]
        parent["surprise"] = True
    elif category == "params":
        kind = FAMILIES[record["experiment"]].experiment_type
        name = rng.choice([field.name for field in fields(kind)])
        mutant["params"][name] = other_grid_value(mutant["params"][name])
    elif category == "id":
        parts = mutant["id"].split("/")
        index = rng.randrange(1, len(parts))
        parts[index] = other_grid_value(parts[index])
        mutant["id"] = "/".join(parts)
    elif category == "swap":
        metrics = [m for m in mutant["metrics"].values() if "median" in m]
        if not metrics:
            return category, json.dumps(mutant), False
        metric = rng.choice(metrics)
        low, high = rng.choice([(a, b) for order in ORDERS for a in order for b in order if a < b])
        metric[low], metric[high] = metric[high], metric[low]
        must = False  # refused where the order breaks; checked against the order itself
    text = json.dumps(mutant, indent=2)
    if category == "cut":
        text = text[: rng.randrange(1, len(text) - 2)]
    return category, text, must


def ordered(record) -> bool:
    return all(
        metric[a] <= metric[b]
        for metric in record["metrics"].values()
        if "median" in metric
        for order in ORDERS
        for a, b in itertools.pairwise(name for name in order if name in metric)
    )


def fits_its_path(record, original) -> bool:
    """The rules beyond the schema, checked here on their own: the id and the parameters it
    names are the original's, and the statistics are in order."""
    kind = FAMILIES[original["experiment"]].experiment_type
    return (
        record["id"] == original["id"]
        and all(
            same(record["params"].get(f.name), original["params"][f.name]) for f in fields(kind)
        )
        and ordered(record)
    )


def not_json(constant: str):
    raise ValueError(f"{constant} is not JSON")


def judge(path: Path, original, category, text, must):
    """Write the mutant at its path and check accelbench's verdict; returns whether it was
    refused."""
    path.write_text(text, encoding="utf-8")
    try:
        mutant = json.loads(text, parse_constant=not_json)
    except ValueError:
        mutant = None
    try:
        results.load_record(path)
    except results.RecordError as err:
        assert str(err).startswith(f"{path}: "), (category, str(err))
        if mutant is not None and SCHEMA.is_valid(mutant):
            assert not fits_its_path(mutant, original), (category, str(err))
        return True
    assert mutant is not None, category
    assert SCHEMA.is_valid(mutant), (category, text)
    assert not must or same(mutant, original), (category, text)
    assert fits_its_path(mutant, original), (category, text)
    return False


@pytest.mark.parametrize("family", ["kernel", "train", "datasci", "roof"])
def test_every_mutant_is_a_valid_record_or_refused_naming_its_file(family, tmp_path):
    rng = random.Random(f"{SEED}-{family}")
    originals = [r for _, r in base_records() if r["experiment"] == family]
    refused = {}
    for _ in range(120):
        original = json.loads(json.dumps(rng.choice(originals)))
        category, text, must = mutate(original, rng)
        path = tmp_path / f"{original['id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        refused.setdefault(category, []).append(judge(path, original, category, text, must))
    for category in ("non_finite", "extra", "params", "id", "cut"):
        assert all(refused[category]), category  # never valid, whatever it hit
    assert sum(map(sum, refused.values())) > 80  # most mutants break something


def downstream(root: Path, good: Path, out: Path) -> pd.DataFrame:
    """Every stage that reads records, as the workflow and `accelbench compare` run them;
    returns the tidy table as the rules read it."""
    frame, problems = tidy.collect(sorted(root.rglob("*.json")))
    frame = tidy.with_invalid_records(frame, problems)
    tidy.write(frame, out / "tidy.parquet", out / "tidy.csv")
    pd.DataFrame(problems, columns=["path", "problem"]).to_csv(out / "problems.csv", index=False)
    assert (tidy.problems_warning(out / "problems.csv") is None) == (not problems)
    frame = pd.read_parquet(out / "tidy.parquet")
    for name, build in outputs.TABLES.items():
        tables.write_table(*build(frame, "cpu1"), out / name)
    summary.summary_html(frame, "cpu1")
    for draw in outputs.FIGURES.values():
        plt.close(draw(frame, "cpu1", None))
    roofline.above_roof_note(roofline.roof_table(frame))
    crossing = [crossovers.crossovers(frame, with_transfer=flag) for flag in (False, True)]
    assert all(isinstance(found, pd.DataFrame) for found in crossing)
    for draw in (roofline.roofline_figure, crossovers.crossover_figure):
        plt.close(draw(frame))
    numbers = offload.break_even_table(frame)
    offload.write_table(numbers, str(out / "offload"))
    plt.close(offload.figure(frame, numbers))
    compared, not_compared = shi2016.comparison(frame)
    shi2016.write_table(compared, not_compared, str(out / "shi2016"))
    plt.close(shi2016.figure(compared))
    provenance_summary.summary_table(frame)
    old = compare.load_run(good)[0]
    for before, after in ((old, frame), (frame, old)):
        found = compare.compare(before, after)
        compare.report_text(found, 0.1, compare.provenance_changes(before, after))
    return frame


# pandas warns where a later version will raise: a crash waiting for an upgrade.
@pytest.mark.filterwarnings("error::pandas.errors.PandasChangeWarning")
def test_no_mutant_breaks_a_table_a_figure_the_summary_or_a_comparison(tmp_path):
    rng = random.Random(SEED)
    originals = base_records()
    good = tmp_path / "good" / "results"
    write_records(good, originals)
    for round_ in range(3):
        root = tmp_path / f"round{round_}" / "results"
        refused = set()
        for exp_id, original in originals:
            path = root / f"{exp_id}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            as_written = json.loads(json.dumps(original))
            if rng.random() < 0.5:
                category, text, must = mutate(as_written, rng)
                if judge(path, as_written, category, text, must):
                    refused.add(exp_id)
            else:
                path.write_text(json.dumps(as_written), encoding="utf-8")
        frame = downstream(root, good, tmp_path / f"round{round_}" / "out")
        assert set(frame["id"]) == {exp_id for exp_id, _ in originals}  # no cell lost or made up
        marked = set(frame.loc[frame["status"] == tidy.INVALID, "id"])
        assert marked == refused
        verdicts = compare.compare(compare.load_run(good)[0], frame).set_index(["id", "metric"])
        for exp_id in refused:
            assert verdicts.loc[(exp_id, compare.STATUS_METRIC), "verdict"] != "unchanged"
        shutil.rmtree(root.parent)

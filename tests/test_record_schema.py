"""The record's published JSON Schema: the file is what the code checks, and a general
validator (jsonschema) reads it as accelbench does."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from accelbench.records import record as results

from records import (
    GPU_TRAIN,
    KERNELS,
    NODE_TRAIN,
    TRAIN,
    datasci_records,
    roof_record,
    with_energy,
)

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def published():
    return json.loads((REPO_ROOT / results.SCHEMA_FILE).read_text(encoding="utf-8"))


def test_the_published_schema_is_what_the_code_checks():
    committed = (REPO_ROOT / results.SCHEMA_FILE).read_text(encoding="utf-8")
    assert committed == results.schema_text(), (
        f"{results.SCHEMA_FILE} is out of date: run `make record-schema` and commit it"
    )


def test_the_published_schema_is_a_json_schema(published):
    jsonschema.Draft202012Validator.check_schema(published)
    assert published["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def every_kind_of_record():
    roofs = [
        roof_record("cpu2"),
        roof_record("cuda1", host_copy=25.0),
        roof_record("cuda1", "float64", status="unavailable"),
    ]
    return [
        record
        for _, record in (
            *TRAIN,
            *KERNELS,
            *GPU_TRAIN,
            *NODE_TRAIN,
            *with_energy(GPU_TRAIN),
            *with_energy(datasci_records(["cpu4", "cuda1"])),
            *roofs,
        )
    ]


def test_records_of_every_family_and_status_meet_the_published_schema(published):
    validator = jsonschema.Draft202012Validator(published)
    for record in every_kind_of_record():
        as_written = json.loads(json.dumps(record))
        assert [error.message for error in validator.iter_errors(as_written)] == [], record["id"]


def test_the_published_schema_says_where_accelbench_reads_it_more_strictly(published):
    # accelbench.records.json_schema: numbers are finite, integers have no fraction; and the
    # rules across keys that a JSON Schema cannot state.
    assert "Numbers are finite and integers have no fraction." in published["description"]
    for rule in results.CROSS_RULES:
        assert rule in published["description"]

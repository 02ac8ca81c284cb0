"""The record schema's checker (jsonschema-rs): each keyword read as jsonschema reads it,
stricter only where the record schema's description says, its violations in plain words."""

from __future__ import annotations

import math

import jsonschema
import pytest

from accelbench.records.json_schema import SchemaViolation, compile_schema


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "number"}, True),
        ({"type": "number"}, 3),
        ({"type": "integer"}, False),
        ({"type": ["integer", "null"], "minimum": 1}, None),
        ({"type": ["integer", "null"], "minimum": 1}, 0),
        ({"const": 1}, True),
        ({"const": True}, 1),
        ({"const": 1}, 1.0),
        ({"enum": ["s", "J"]}, "ms"),
        ({"type": "string", "minLength": 1}, ""),
        ({"type": "string", "pattern": "^n[1-9]"}, "n0"),
        ({"type": "number", "exclusiveMinimum": 0}, 0),
        ({"type": "number", "maximum": 1}, 1.5),
        ({"minimum": 0}, "text"),
        ({"type": "object", "required": ["a"]}, {"b": 1}),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, {"a": 1, "b": 2}),
        ({"properties": {"a": {"type": "string"}}, "additionalProperties": False}, {"b": 1}),
        ({"patternProperties": {"_x$": {"type": "string"}}}, {"a_x": 1}),
        ({"minProperties": 1}, {}),
        ({"maxProperties": 0}, {"a": 1}),
        ({"type": "array", "items": {"type": "number", "minimum": 0}}, [1.0, -2.0]),
        ({"type": "array", "minItems": 1}, []),
        ({"if": {"required": ["v"]}, "then": {"required": ["u"]}}, {"v": 1}),
        ({"if": {"required": ["v"]}, "then": {"required": ["u"]}, "else": False}, {"u": 1}),
        ({"allOf": [{"type": "object"}, {"required": ["a"]}]}, {"a": 1}),
        (
            {"if": {"properties": {"s": {"const": "ok"}}}, "then": {"minProperties": 2}},
            {"s": "ok"},
        ),
    ],
)
def test_the_checker_reads_each_keyword_as_json_schema_does(schema, value):
    try:
        compile_schema(schema)(value)
        accepted = True
    except SchemaViolation:
        accepted = False
    assert accepted == jsonschema.Draft202012Validator(schema).is_valid(value)


@pytest.mark.parametrize(
    ("schema", "value", "message"),
    [
        ({"type": "number"}, math.nan, "NaN is not a finite number"),
        ({"type": "number"}, math.inf, "Infinity is not a finite number"),
        ({"type": "integer"}, 2.0, "2.0 is not an integer"),
    ],
)
def test_the_checker_is_stricter_than_json_schema_on_numbers_only(schema, value, message):
    with pytest.raises(SchemaViolation, match=message):
        compile_schema(schema)(value)
    compile_schema({"type": ["number", "null"]})(value)  # written as null: allowed there


def test_a_non_finite_number_passes_only_where_null_is_allowed():
    check = compile_schema(
        {
            "properties": {
                "error": {"type": ["number", "null"], "minimum": 0},
                "runs": {"type": "array", "items": {"type": "number"}},
            }
        }
    )
    check({"error": math.inf, "runs": [1.0]})  # written as null
    with pytest.raises(SchemaViolation) as refused:
        check({"error": math.nan, "runs": [1.0, -math.inf]})
    assert str(refused.value) == "runs.1: -Infinity is not a finite number"


def test_a_key_of_digits_and_a_value_of_no_json_type_are_named():
    counts = {"type": "array", "items": {"type": "integer"}}
    check = compile_schema({"additionalProperties": counts})
    with pytest.raises(SchemaViolation) as refused:
        check({"0": [1, 2.0]})
    assert str(refused.value) == "0.1: 2.0 is not an integer"
    with pytest.raises(SchemaViolation, match="set"):
        check({"0": {1, 2}})


def test_a_violation_names_where_it_is_and_the_rule_that_applied():
    check = compile_schema(
        {
            "properties": {"runs": {"type": "array", "items": {"type": "number"}}},
            "if": {"required": ["runs"]},
            "then": {"description": "a run has samples", "required": ["unit"]},
        }
    )
    with pytest.raises(SchemaViolation) as refused:
        check({"runs": [1.0, "2"], "unit": "s"})
    assert str(refused.value) == 'runs.1: "2" is not a number'
    with pytest.raises(SchemaViolation) as refused:
        check({"runs": []})
    assert str(refused.value) == "'unit' is missing (a run has samples)"

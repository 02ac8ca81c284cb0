"""A JSON Schema checked by jsonschema-rs, its first violation told in plain words.

accelbench checks every record it writes or reads against the record's published
schema. jsonschema, in Python, takes some 2 ms a record, and a schema compiled
into Python some 100 µs; jsonschema-rs, in Rust, some 30 µs, so 100,000 records
are read in seconds. A violation names the path of the wrong value, the value as
the file writes it and what was expected, with the description of the innermost
`then` or `else` that applied: the rule that says why ("an ok kernel record has
its time").

Two readings are stricter than JSON Schema's, as the record schema's description
says. A number is finite: jsonschema-rs refuses NaN and infinities under every
type, so a value it refuses is checked again as the writer stores it, with null for
them, which passes where null is allowed. An integer has no fraction (JSON Schema
also takes 1.0): the compiled copy of the schema checks that with a keyword of its
own, WHOLE. A boolean is never a number, as in JSON Schema.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import jsonschema_rs

Check = Callable[[Any], None]
# A JSON Schema, or a fragment of one: a JSON document whose keys are the schema's
# keywords ("type", "properties", "if", ...), nested to any depth.
JsonSchema = dict[str, Any]

# Beside every "type" that allows an integer, in the compiled copy of the schema only.
WHOLE = "x-accelbench-whole"
_NAMES = {"object": "an object", "array": "a list", "integer": "an integer", "null": "null"}
# What each kind of jsonschema-rs error says, in these words; Type and AdditionalProperties
# need the rule itself.
_SAYS = {
    "Minimum": "{value} is below {limit}",
    "ExclusiveMinimum": "{value} is not above {limit}",
    "Maximum": "{value} is above {limit}",
    "MinLength": "{value} is shorter than {limit}",
    "Pattern": "{value} does not match {pattern}",
    "MinProperties": "has {size} entries, fewer than {limit}",
    "MaxProperties": "has {size} entries, more than {limit}",
    "MinItems": "needs at least {limit} items",
    "Required": "{property!r} is missing",
    "Constant": "{value} is not {expected}",
    "Enum": "{value} is not one of {options}",
    "FalseSchema": "{value} is not allowed here",
    "Custom": "{value} is {message}",
}
# Keywords whose next part in a path is a name, not a keyword.
_NAMING = ("properties", "patternProperties", "$defs")


class SchemaViolation(ValueError):
    """A value that breaks the schema: where (keys and indices) and why."""

    def __init__(self, message: str, path: list[str] | None = None) -> None:
        super().__init__(message)
        self.message, self.path = message, path or []

    def __str__(self) -> str:
        where = ".".join(self.path)
        return f"{where}: {self.message}" if where else self.message


def shown(value: Any) -> str:
    """A value as JSON would write it, cut short: the message quotes what the file says."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def finite_or_none(value: Any) -> Any:
    """`value` as written: JSON has no NaN or Infinity, so they are stored as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite_or_none(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(item) for item in value]
    return value


def compile_schema(schema: JsonSchema) -> Check:
    """A function that raises SchemaViolation for a value `schema` refuses."""
    validator = jsonschema_rs.validator_for(_strict(schema), keywords={WHOLE: _Whole})

    def check(value: Any) -> None:
        try:
            validator.validate(value)
            return
        except jsonschema_rs.ValidationError:
            pass  # or only a NaN or an infinity, where null is allowed
        except ValueError as err:  # a Python value of no JSON type
            raise SchemaViolation(str(err)) from None
        try:
            validator.validate(finite_or_none(value))
        except jsonschema_rs.ValidationError as err:
            path = list(map(str, err.instance_path))
            raise SchemaViolation(_message(schema, err, value), path) from None

    return check


class _Whole:
    """The WHOLE keyword: a float is no integer, though it has no fraction."""

    def __init__(self, parent_schema: Any, value: Any, schema_path: Any) -> None:
        pass

    def validate(self, instance: Any) -> None:
        if isinstance(instance, float):
            raise ValueError("not an integer")


def _strict(schema: Any) -> Any:
    """`schema` with WHOLE beside every type that allows an integer."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    strict = {key: _strict(value) for key, value in schema.items()}
    kinds = schema.get("type")
    if kinds == "integer" or (isinstance(kinds, list) and "integer" in kinds):
        strict[WHOLE] = True
    return strict


def _message(schema: JsonSchema, error: jsonschema_rs.ValidationError, document: Any) -> str:
    """What is wrong with the value `error` names in `document`, and why."""
    value = document
    for part in error.instance_path:  # an object's key of digits comes as a number
        value = value[str(part)] if isinstance(value, dict) else value[part]
    rule, why, previous = schema, "", None
    for part in error.evaluation_path[:-1]:  # to the rule that failed, through any $ref
        rule = _resolve(schema, rule["$ref"]) if part == "$ref" else rule[part]
        if part in ("then", "else") and previous not in _NAMING and isinstance(rule, dict):
            why = rule.get("description", why)
        previous = part
    kind, said = type(error.kind).__name__, error.kind.as_dict()
    if isinstance(value, float) and not math.isfinite(value):
        what = f"{shown(value)} is not a finite number"
    elif kind == "Type":
        kinds = rule["type"] if isinstance(rule["type"], list) else [rule["type"]]
        what = f"{shown(value)} is not " + " or ".join(_NAMES.get(k, f"a {k}") for k in kinds)
    elif kind == "AdditionalProperties":
        known = ", ".join(rule.get("properties", {}))
        what = f"unknown key {said['unexpected'][0]!r} (known: {known})"
    elif kind in _SAYS:
        what = _SAYS[kind].format(
            value=shown(value),
            limit=shown(said.get("limit")),
            pattern=said.get("pattern"),
            size=len(value) if isinstance(value, dict) else 0,
            property=said.get("property"),
            expected=shown(said.get("expected_value")),
            options=", ".join(map(shown, said.get("options", ()))),
            message=error.message,
        )
    else:
        what = error.message
    return f"{what} ({why})" if why else what


def _resolve(schema: JsonSchema, reference: str) -> Any:
    """The part of `schema` a local `$ref` ("#/$defs/name") points to."""
    target: Any = schema
    for part in reference.removeprefix("#/").split("/"):
        target = target[part]
    return target

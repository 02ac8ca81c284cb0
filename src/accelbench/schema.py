"""A fast checker for the part of JSON Schema (draft 2020-12) the record schema uses.

The result record's schema is published as a JSON Schema file so that other
tools can check records, and accelbench checks every record it writes or reads
against that same schema, so the two cannot drift apart. A general validator
(jsonschema) takes milliseconds per record; reading 100,000 records must take
seconds, so the schema is compiled once into plain Python functions here, with
an inline test for the common leaves (a number, a text, an integer) that only
falls back to the full check, and its message, when the quick test fails. A
keyword this checker does not know is refused when compiling: it would
otherwise be silently ignored. `$ref` may not be recursive.

Two readings are stricter than JSON Schema's and are stated in the schema's
description: a number is finite (JSON has no NaN or Infinity; where null is
allowed, a non-finite float of a record not yet written is accepted, since the
writer stores it as null), and an integer is written without a fraction (JSON
Schema also takes 1.0). A boolean is never a number, as in JSON Schema.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], None]
Test = Callable[[Any], bool]

# Keywords that only describe: compiling skips them.
ANNOTATIONS = frozenset(("$schema", "$id", "$defs", "$comment", "title", "description"))
LEAF_KEYWORDS = frozenset(
    ("type", "const", "enum", "minimum", "maximum", "exclusiveMinimum", "minLength", "pattern")
)
OBJECT_KEYWORDS = frozenset(
    (
        "properties",
        "patternProperties",
        "additionalProperties",
        "required",
        "minProperties",
        "maxProperties",
    )
)
ARRAY_KEYWORDS = frozenset(("items", "minItems"))
KEYWORDS = (
    LEAF_KEYWORDS | OBJECT_KEYWORDS | ARRAY_KEYWORDS | {"$ref", "allOf", "if", "then", "else"}
)
LARGEST = sys.float_info.max  # a bound every finite float meets and no infinity does


class SchemaViolation(ValueError):
    """A value that breaks the schema: where (a list of keys and indices) and why.

    The message is put together only when it is read: a failed `if` is no error.
    """

    def __init__(self, template: str, *values: Any) -> None:
        super().__init__(template)
        self.template, self.values = template, values
        self.path: list[str] = []
        self.why = ""

    @property
    def message(self) -> str:
        return self.template.format(*map(shown, self.values)) + self.why

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


def _literal(text: str) -> str:
    """`text` as a message template that shows it as it is."""
    return text.replace("{", "{{").replace("}", "}}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# JSON type -> the Python types json.loads gives for it (a bool is also an int in Python).
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
    "integer": (int,),
    "number": (int, float),
}
_NAMES = {"object": "an object", "array": "a list", "integer": "an integer", "null": "null"}


def _equal(value: Any, expected: Any) -> bool:
    """JSON equality: true is not 1, 1.0 is 1."""
    if isinstance(expected, bool) or isinstance(value, bool):
        return value is expected
    if _is_number(value) and _is_number(expected):
        return value == expected
    return type(value) is type(expected) and value == expected


# The quick tests of a leaf: (kind, low, high, nullable), the bounds inclusive.
_NUMBER, _INTEGER, _TEXT, _BOOLEAN, _TEXTS, _CONSTANT = range(6)
Quick = tuple[int, Any, Any, bool]


def _quick(schema: Any) -> Quick | None:
    """The quick test of a leaf schema whose check is one type and simple bounds; None
    for any other schema. It only passes values the full check passes."""
    if not isinstance(schema, dict) or not schema.keys() <= LEAF_KEYWORDS | ANNOTATIONS:
        return None
    if set(schema) - ANNOTATIONS == {"const"} and isinstance(schema["const"], str | bool):
        return (_CONSTANT, schema["const"], None, False)
    if set(schema) - ANNOTATIONS == {"enum"} and all(isinstance(o, str) for o in schema["enum"]):
        return (_TEXTS, frozenset(schema["enum"]), None, False)
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds or []
    nullable = "null" in kinds
    kinds = [kind for kind in kinds if kind != "null"]
    rest = set(schema) - ANNOTATIONS - {"type", "minimum", "maximum"}
    if len(kinds) != 1 or rest:
        return None
    low, high = schema.get("minimum", -LARGEST), schema.get("maximum", LARGEST)
    kind = {"number": _NUMBER, "integer": _INTEGER, "string": _TEXT, "boolean": _BOOLEAN}.get(
        kinds[0]
    )
    if kind is None or (kind not in (_NUMBER, _INTEGER) and {"minimum", "maximum"} & set(schema)):
        return None
    return (kind, low, high, nullable)


def _passes(quick: Quick, item: Any) -> bool:
    """Whether `item` passes the quick test (False: ask the full check)."""
    kind, low, high, nullable = quick
    cls = item.__class__
    if kind == _NUMBER:
        return (cls is float or cls is int) and low <= item <= high or (nullable and item is None)
    if kind == _TEXT:
        return cls is str or (nullable and item is None)
    if kind == _INTEGER:
        return cls is int and low <= item <= high or (nullable and item is None)
    if kind == _TEXTS:
        return cls is str and item in low
    if kind == _CONSTANT:
        return cls is low.__class__ and item == low
    return cls is bool or (nullable and item is None)


def compile_schema(schema: dict[str, Any]) -> Check:
    """A function that raises SchemaViolation for a value `schema` refuses."""
    return _Compiler(schema).compile(schema)


class _Compiler:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def compile(self, schema: dict[str, Any] | bool) -> Check:
        if schema is True or schema == {}:
            return _anything
        if schema is False:
            return _nothing
        unknown = set(schema) - ANNOTATIONS - KEYWORDS
        if unknown:
            raise ValueError(f"schema keywords {sorted(unknown)} are not supported")
        checks = []
        if "$ref" in schema:
            checks.append(self.ref(schema["$ref"]))
        kind = schema.get("type")
        structure = None
        if schema.keys() & OBJECT_KEYWORDS:
            structure = self.object_(schema, typed=kind == "object")
        elif schema.keys() & ARRAY_KEYWORDS:
            structure = self.array(schema, typed=kind == "array")
        leaf = {key: value for key, value in schema.items() if key in LEAF_KEYWORDS}
        if structure is not None and kind in ("object", "array"):
            del leaf["type"]  # the structure's own check says what it is not
        if leaf:
            checks.append(self.leaf(leaf))
        if structure is not None:
            checks.append(structure)
        if "allOf" in schema:
            checks += [self.compile(sub) for sub in schema["allOf"]]
        if schema.keys() & {"if", "then", "else"}:
            checks.append(self.conditional(schema))
        if len(checks) <= 1:
            return checks[0] if checks else _anything

        def every(value: Any) -> None:
            for check in checks:
                check(value)

        return every

    def ref(self, reference: str) -> Check:
        if reference not in self.refs:
            target: Any = self.root
            for part in reference.removeprefix("#/").split("/"):
                target = target[part]
            self.refs[reference] = self.compile(target)
        return self.refs[reference]

    def leaf(self, schema: dict[str, Any]) -> Check:
        """Type, constant, choices, bounds and text rules of one value, in one check."""
        kinds = schema.get("type", [])
        kinds = [kinds] if isinstance(kinds, str) else kinds
        allowed = tuple({python for kind in kinds for python in _PYTHON_TYPES[kind]})
        boolean, nullable = "boolean" in kinds, "null" in kinds
        expected = _literal(" or ".join(_NAMES.get(kind, f"a {kind}") for kind in kinds))
        options = schema.get("enum", [schema["const"]] if "const" in schema else None)
        listed = _literal(", ".join(map(shown, options or ())))
        choice = "one of " if "enum" in schema else ""
        low, high = schema.get("minimum"), schema.get("maximum")
        above = schema.get("exclusiveMinimum")
        shortest = schema.get("minLength", 0)
        pattern = re.compile(schema["pattern"]) if "pattern" in schema else None

        def checked(value: Any) -> None:
            if kinds and not (boolean if isinstance(value, bool) else isinstance(value, allowed)):
                raise SchemaViolation("{} is not " + expected, value)
            if kinds and isinstance(value, float) and not math.isfinite(value):
                if nullable:
                    return
                raise SchemaViolation("{} is not a finite number", value)
            if options is not None and not any(_equal(value, option) for option in options):
                raise SchemaViolation("{} is not " + choice + listed, value)
            if _is_number(value):
                if low is not None and value < low:
                    raise SchemaViolation("{} is below {}", value, low)
                if above is not None and value <= above:
                    raise SchemaViolation("{} is not above {}", value, above)
                if high is not None and value > high:
                    raise SchemaViolation("{} is above {}", value, high)
            if isinstance(value, str):
                if len(value) < shortest:
                    raise SchemaViolation("{} is shorter than {}", value, shortest)
                if pattern is not None and not pattern.search(value):
                    raise SchemaViolation("{} does not match {}", value, pattern.pattern)

        return checked

    def object_(self, schema: dict[str, Any], typed: bool) -> Check:
        named = {key: self.compile(sub) for key, sub in schema.get("properties", {}).items()}
        patterned = [
            (re.compile(pattern), self.compile(sub))
            for pattern, sub in schema.get("patternProperties", {}).items()
        ]
        other = schema.get("additionalProperties", True)
        rest = None if other is False else self.compile(other)
        # Each named key's quick test (None: none), then any other key's.
        quick = {key: _quick(sub) for key, sub in schema.get("properties", {}).items()}
        quick_rest = None if patterned else _quick(other)
        required = schema.get("required", ())
        fewest, most = schema.get("minProperties", 0), schema.get("maxProperties")
        known = ", ".join(named)
        free = rest is _anything and not patterned  # any other key, any value

        def unnamed(key: str) -> Check | None:
            for pattern, sub in patterned:
                if pattern.search(key):
                    return sub
            return rest

        def structured(value: Any) -> None:
            if not isinstance(value, dict):
                if typed:
                    raise SchemaViolation("{} is not an object", value)
                return
            for key in required:
                if key not in value:
                    raise SchemaViolation(_literal(f"{key!r} is missing"))
            if len(value) < fewest:
                raise SchemaViolation("has {} entries, fewer than {}", len(value), fewest)
            if most is not None and len(value) > most:
                raise SchemaViolation("has {} entries, more than {}", len(value), most)
            for key, item in value.items():
                test = quick.get(key, quick_rest)
                if test is not None:  # the commonest of _passes inline: this loop sees every value
                    kind, low, high, _ = test
                    cls = item.__class__
                    if (
                        (kind == _NUMBER and (cls is float or cls is int) and low <= item <= high)
                        or (kind == _TEXT and cls is str)
                        or (kind == _TEXTS and cls is str and item in low)
                        or (kind == _INTEGER and cls is int and low <= item <= high)
                        or _passes(test, item)
                    ):
                        continue
                check = named.get(key)
                if check is None:
                    if free:
                        continue
                    check = unnamed(key)
                if check is None:
                    raise SchemaViolation(_literal(f"unknown key {key!r} (known: {known})"))
                try:
                    check(item)
                except SchemaViolation as err:
                    err.path.insert(0, key)
                    raise

        return structured

    def array(self, schema: dict[str, Any], typed: bool) -> Check:
        items = schema.get("items", True)
        item_check, quick = self.compile(items), _quick(items)
        number = quick is not None and quick[0] == _NUMBER and quick[2] == LARGEST
        low = quick[1] if number else 0
        fewest = schema.get("minItems", 0)

        def listed(value: Any) -> None:
            if not isinstance(value, list):
                if typed:
                    raise SchemaViolation("{} is not a list", value)
                return
            if len(value) < fewest:
                raise SchemaViolation("needs at least {} items", fewest)
            if item_check is _anything:
                return
            for index, item in enumerate(value):
                if number and (item.__class__ is float or item.__class__ is int) and low <= item:
                    continue  # the commonest of _passes inline: a list of samples
                if quick is not None and _passes(quick, item):
                    continue
                try:
                    item_check(item)
                except SchemaViolation as err:
                    err.path.insert(0, str(index))
                    raise

        return listed

    def test(self, schema: dict[str, Any] | bool) -> Test:
        """Whether a value meets `schema` (an `if`), without building a message where the
        schema is a plain one: required keys, and properties with quick tests."""
        if isinstance(schema, dict) and schema.keys() <= {"required", "properties", "allOf"}:
            required = tuple(schema.get("required", ()))
            quick = {key: _quick(sub) for key, sub in schema.get("properties", {}).items()}
            parts = [self.test(sub) for sub in schema.get("allOf", ())]
            # Only a test of choices or a constant fails exactly where the full check fails.
            if all(test is not None and test[0] in (_TEXTS, _CONSTANT) for test in quick.values()):
                tests = list(quick.items())

                def meets(value: Any) -> bool:
                    if isinstance(value, dict):
                        for key in required:
                            if key not in value:
                                return False
                        for key, test in tests:
                            if key in value and not _passes(test, value[key]):  # type: ignore[arg-type]
                                return False
                    return all(part(value) for part in parts)

                return meets
        check = self.compile(schema)

        def passes(value: Any) -> bool:
            try:
                check(value)
            except SchemaViolation:
                return False
            return True

        return passes

    def explained(self, schema: dict[str, Any] | bool) -> Check:
        """A branch of if/then/else whose violations end with its description: the rule that
        applied ("an ok kernel record has its time") says why."""
        check = self.compile(schema)
        why = schema.get("description") if isinstance(schema, dict) else None
        if not why:
            return check

        def described(value: Any) -> None:
            try:
                check(value)
            except SchemaViolation as err:
                err.why = err.why or f" ({why})"  # the innermost rule that applied
                raise

        return described

    def conditional(self, schema: dict[str, Any]) -> Check:
        condition = self.test(schema.get("if", True))
        then = self.explained(schema.get("then", True))
        otherwise = self.explained(schema.get("else", True))

        def branch(value: Any) -> None:
            (then if condition(value) else otherwise)(value)

        return branch


def _anything(value: Any) -> None:
    return None


def _nothing(value: Any) -> None:
    raise SchemaViolation("{} is not allowed here", value)

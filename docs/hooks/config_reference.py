"""MkDocs hook: the config reference, generated from the config schema at every build.

A page holding the line `<!-- config-reference -->` gets, in its place, one table per
section of workflow/schemas/config.schema.yaml: each key with what it means (the schema's
`description`), what it accepts (the schema's types, enums, bounds and patterns) and its
default (the value in config/config.yaml, the grid every run starts from, else the
schema's `default`), then config/config.yaml itself. Nothing is written by hand, so the
page cannot drift from what the workflow checks.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
DEFAULTS = ROOT / "config" / "config.yaml"
MARKER = "<!-- config-reference -->"
# A default longer than this is left to the default grid, shown whole below the tables.
LONGEST_DEFAULT = 60


def resolve(node: dict[str, Any], defs: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The node with its `$ref` merged in (its own keys win), and the name of the $def."""
    ref = node.get("$ref")
    if not ref:
        return node, None
    name = ref.rsplit("/", 1)[-1]
    target, _ = resolve(defs[name], defs)
    return {**target, **{key: value for key, value in node.items() if key != "$ref"}}, name


def flow(value: Any) -> str:
    """A value as YAML writes it on one line."""
    if value == "":
        return '""'
    text = yaml.safe_dump(value, default_flow_style=True, width=math.inf, sort_keys=False)
    return text.strip().removesuffix("...").strip()


def code(value: Any) -> str:
    return f"`{flow(value)}`"


def bounds(node: dict[str, Any]) -> str:
    low, high = node.get("minimum"), node.get("maximum")
    above, below = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")
    if low is not None and high is not None:
        return f" from {low} to {high}"
    if above is not None and below is not None:
        return f" between {above} and {below} (exclusive)"
    if low is not None:
        return f" >= {low}"
    if above is not None:
        return f" > {above}"
    return ""


def accepts(node: dict[str, Any], defs: dict[str, Any], many: bool = False) -> str:
    """What a key takes, in words, from its schema (`many`: said of each item of a list)."""
    node, name = resolve(node, defs)
    if name and node.get("type") == "string" and "description" in defs[name]:
        return defs[name]["description"]  # a named kind of string: a device, a Slurm name
    if "enum" in node:
        return ("any of " if many else "one of ") + ", ".join(map(code, node["enum"]))
    if "anyOf" in node:
        return " or ".join(accepts(option, defs, many) for option in node["anyOf"])
    kind = node.get("type")
    if kind == "array":
        return "a list of " + accepts(node.get("items", {}), defs, many=True)
    if kind == "object":
        values = node.get("additionalProperties")
        names = node.get("propertyNames", {}).get("enum")
        keys = ", ".join(map(code, names)) if names else ""
        if isinstance(values, dict):
            return f"{keys or 'a name'} -> {accepts(values, defs)}"
        return f"a mapping of {keys}" if keys else "a mapping"
    if kind == "null":
        return "`null`"
    if kind == "boolean":
        return "`true` or `false`"
    if kind in ("integer", "number"):
        noun = {"integer": ("an integer", "integers"), "number": ("a number", "numbers")}[kind]
        return f"{noun[many]}{bounds(node)}"
    if kind == "string":
        pattern = node.get("pattern")
        noun = "strings" if many else "a string"
        return f"{noun} matching `{pattern}`" if pattern else noun
    return "any value"


def meaning(node: dict[str, Any], defs: dict[str, Any]) -> str:
    """The key's description, or that of the $def it refers to (unless that names a kind of
    string, which `accepts` gives)."""
    if "description" in node:
        return node["description"]
    resolved, name = resolve(node, defs)
    if name and resolved.get("type") != "string":
        return resolved.get("description", "")
    return ""


def default(keys: list[str], node: dict[str, Any], grid: dict[str, Any]) -> str:
    value: Any = grid
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            break
        value = value[key]
    else:
        shown = code(value)
        return shown if len(shown) <= LONGEST_DEFAULT else "[the default grid](#the-default-grid)"
    return f"{code(node['default'])} (schema)" if "default" in node else "–"


def cell(text: str) -> str:
    """Text fit for a table cell: one line, no column break (a pipe in a code span is
    the table extension's to keep; one outside is escaped)."""
    parts = " ".join(text.split()).split("`")
    return "`".join(part if odd % 2 else part.replace("|", "\\|") for odd, part in enumerate(parts))


def leaves(node, defs, keys, required=False):
    """(keys, node, required) of every key with a value of its own, nested mappings
    flattened."""
    resolved, _ = resolve(node, defs)
    if resolved.get("type") == "object" and "properties" in resolved:
        for name, child in resolved["properties"].items():
            yield from leaves(child, defs, [*keys, name], name in resolved.get("required", ()))
    else:
        yield keys, node, required


def table(rows, defs, grid) -> list[str]:
    lines = ["| key | meaning | accepts | default |", "|---|---|---|---|"]
    for keys, node, required in rows:
        text = meaning(node, defs) + (" (required)" if required else "")
        shown = default(keys, resolve(node, defs)[0], grid)
        lines.append(
            f"| `{'.'.join(keys)}` | {cell(text)} | {cell(accepts(node, defs))} | {cell(shown)} |"
        )
    return lines


def reference() -> str:
    """The generated Markdown: a table per section, then the default grid whole."""
    schema = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))
    grid = yaml.safe_load(DEFAULTS.read_text(encoding="utf-8"))
    defs = schema.get("$defs", {})
    out = [cell(schema["description"]), ""]
    top = []
    sections = []
    for name, node in schema["properties"].items():
        resolved, _ = resolve(node, defs)
        if resolved.get("type") == "object" and "properties" in resolved:
            sections.append((name, resolved))
        else:
            top.append(([name], node, name in schema.get("required", ())))
    out += ["## Top level", "", *table(top, defs, grid), ""]
    for name, node in sections:
        out += [f"## `{name}`", ""]
        if "description" in node:
            out += [cell(node["description"]), ""]
        out += [*table(leaves(node, defs, [name]), defs, grid), ""]
    out += [
        "## The default grid",
        "",
        "`config/config.yaml`, which every run starts from:",
        "",
        "```yaml",
        DEFAULTS.read_text(encoding="utf-8").rstrip("\n"),
        "```",
        "",
    ]
    return "\n".join(out)


def on_config(config, **kwargs):
    """`mkdocs serve` rebuilds when the schema or the default grid changes."""
    config.watch.extend(str(path) for path in (SCHEMA, DEFAULTS))
    return config


def on_page_markdown(markdown: str, page, config, files, **kwargs) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference())

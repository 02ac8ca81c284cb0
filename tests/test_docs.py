"""The documentation: the README stays short, no text is written twice, the config reference
names every key of the schema, and the site builds with `mkdocs build --strict`."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections import defaultdict

import pytest
import yaml

from conftest import REPO_ROOT

DOCS = REPO_ROOT / "docs"


def written_text() -> list:
    """Every file of prose: the README, config/README.md and the pages of the site."""
    return [
        REPO_ROOT / "README.md",
        REPO_ROOT / "config" / "README.md",
        *sorted(DOCS.rglob("*.md")),
    ]


def paragraphs(text: str) -> list[str]:
    """The paragraphs of a Markdown text (a fenced block is one), whitespace collapsed."""
    found, lines, fenced = [], [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not line.strip() and not fenced:
            found.append(" ".join(" ".join(lines).split()))
            lines = []
        else:
            lines.append(line)
    found.append(" ".join(" ".join(lines).split()))
    return [paragraph for paragraph in found if paragraph]


def hook():
    spec = importlib.util.spec_from_file_location(
        "config_reference", DOCS / "hooks" / "config_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_short():
    assert len((REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


def test_no_paragraph_is_written_twice():
    # Pages show the README's and config/README.md's text by including it (`--8<--`).
    where = defaultdict(list)
    for path in written_text():
        for paragraph in paragraphs(path.read_text(encoding="utf-8")):
            if len(paragraph) >= 40 and not paragraph.startswith("--8<--"):
                where[paragraph].append(str(path.relative_to(REPO_ROOT)))
    twice = {paragraph[:80]: files for paragraph, files in where.items() if len(files) > 1}
    assert twice == {}


def test_the_pages_include_what_exists():
    # check_paths fails the build too; this names the page and the section at once.
    for page in sorted(DOCS.rglob("*.md")):
        for name, section in re.findall(
            r'^--8<-- "([^":]+)(?::([\w-]+))?"', page.read_text(), re.M
        ):
            source = REPO_ROOT / name
            assert source.is_file(), (page, name)
            if section:
                assert f"--8<-- [start:{section}]" in source.read_text(), (page, name, section)


def schema_keys(node: dict, defs: dict, prefix: str = "") -> list[str]:
    """Every key of the config schema that holds a value, dotted."""
    if "$ref" in node:
        node = {**defs[node["$ref"].rsplit("/", 1)[-1]], **node}
    if "properties" not in node:
        return [prefix]
    return [
        key
        for name, child in node["properties"].items()
        for key in schema_keys(child, defs, f"{prefix}.{name}" if prefix else name)
    ]


def test_the_config_reference_names_every_key_of_the_schema():
    reference = hook()
    schema = yaml.safe_load(reference.SCHEMA.read_text(encoding="utf-8"))
    text = reference.reference()
    keys = schema_keys(schema, schema["$defs"])
    assert len(keys) > 70 and "kernels.roofs.gemm_size" in keys
    for key in keys:
        assert f"| `{key}` |" in text, key
    # Each row has its four cells: no description or pattern breaks a column.
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == len(keys)
    assert all(len(re.split(r"(?<!\\)\|", re.sub(r"`[^`]*`", "", row))) == 6 for row in rows)


def test_the_site_builds_strictly(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python", "pymdownx"):
        pytest.importorskip(module)
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=REPO_ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    config = (tmp_path / "reference" / "config" / "index.html").read_text(encoding="utf-8")
    assert "kernels.roofs.gemm_size" in config and "<!-- config-reference -->" not in config
    contracts = (tmp_path / "reference" / "contracts" / "index.html").read_text(encoding="utf-8")
    assert 'id="accelbench.contracts.kernel_problems"' in contracts
    slurm = (tmp_path / "slurm" / "index.html").read_text(encoding="utf-8")
    assert "A small site config to start from" in slurm and "--8&lt;--" not in slurm

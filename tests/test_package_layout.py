"""The package's layout stays layered: no two packages import each other, and the job chain
knows no family.

The import graph is read from the source with `ast`: every `import` and `from ... import`
of an accelbench module, at module level and inside functions alike (an import inside a
function is still a dependency, only a later one). Imports under `if TYPE_CHECKING:` are
left out: they are never executed, so they tie no module to another when the code runs,
and only annotations use them.

Nodes of the package graph are the subpackages (accelbench.job, accelbench.families, ...)
and the top-level modules (accelbench.grid, accelbench.config, ...).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "accelbench"

# Cycles that may stay, by the package nodes they pass through; empty: none may.
ALLOWED_CYCLE_NODES: frozenset[str] = frozenset()

# The job chain: running one experiment and writing its record, for every family alike.
JOB_CHAIN = "accelbench.job"
# What the job chain may not import: the families' declarations and their measuring code.
# It asks the declaration (accelbench.families.base.family_of) for the family's hooks,
# which are "module:function" names imported by name.
FAMILY_CODE = ("accelbench.kernels", "accelbench.datasci", "accelbench.train", "accelbench.roofs")
DECLARATIONS = "accelbench.families."
GENERIC_DECLARATION = "accelbench.families.base"
# Registries: they list every family (FAMILIES) or every unit (the catalogues), so
# they import the declarations or find the units by name. The job chain may reach them
# (a record's schema names every family); the walk does not go on through them.
REGISTRIES = ("accelbench.families", "accelbench.registry")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module
    line: int

    def __str__(self) -> str:
        return f"{self.source} imports {self.target} (line {self.line})"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in the tree, outside `if TYPE_CHECKING:` blocks."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking_only(node):
            yield from (n for child in node.orelse for n in _import_nodes_of(child))
            continue
        yield from _import_nodes_of(node)


def _import_nodes_of(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    else:
        yield from _import_nodes(node)


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def imports_of(module: str) -> list[Import]:
    """The accelbench modules `module` imports: `from P import name` counts as P.name where
    that is a module, else as P."""
    path = MODULES[module]
    found = []
    for node in _import_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:  # relative: from the importing module's package
                package = _package_of(module, path).split(".")
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        for name in names:
            while name and name not in MODULES:  # `import accelbench.x.y` of a package
                name = name.rpartition(".")[0]
            if name.startswith("accelbench") and name != module:
                found.append(Import(module, name, node.lineno))
    return found


IMPORTS = {module: imports_of(module) for module in MODULES}


def node_of(module: str) -> str:
    """The package graph's node: accelbench.X for any module of subpackage X, a top-level
    module itself."""
    return ".".join(module.split(".")[:2])


def package_graph() -> dict[str, dict[str, Import]]:
    """node -> the nodes it imports, each with one import that makes the edge."""
    graph: dict[str, dict[str, Import]] = {node_of(module): {} for module in MODULES}
    for module, found in IMPORTS.items():
        for edge in found:
            source, target = node_of(module), node_of(edge.target)
            if source != target and target != "accelbench":
                graph[source].setdefault(target, edge)
    return graph


def strongly_connected(graph: dict[str, dict[str, Import]]) -> list[list[str]]:
    """The sets of nodes that reach each other (Tarjan), those of more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def shortest_cycle(graph: dict[str, dict[str, Import]], component: list[str]) -> list[Import]:
    """The imports of one shortest cycle through the component's first node."""
    start = component[0]
    came_by: dict[str, Import] = {}
    todo = [start]
    while todo:
        node = todo.pop(0)
        for target, edge in sorted(graph[node].items()):
            if target not in component or target in came_by:
                continue
            came_by[target] = edge
            if target == start:
                todo = []
                break
            todo.append(target)
    cycle = [came_by[start]]
    while node_of(cycle[0].source) != start:
        cycle.insert(0, came_by[node_of(cycle[0].source)])
    return cycle


def test_the_import_graph_reads_every_kind_of_import():
    assert Import("accelbench.job.measurement", "accelbench.families.base", 0).target in {
        edge.target for edge in IMPORTS["accelbench.job.measurement"]
    }
    # Inside a function: the fork server imports the measuring code only where it runs.
    assert "accelbench.job.measurement" in {
        edge.target for edge in IMPORTS["accelbench.job.fork_server"]
    }
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\nimport b\n"
    )
    assert [alias.name for node in _import_nodes(tree) for alias in node.names] == [
        "TYPE_CHECKING",
        "b",
    ]


def test_no_two_packages_import_each_other():
    graph = package_graph()
    mutual = [
        f"{graph[a][b]} and {graph[b][a]}"
        for a in sorted(graph)
        for b in sorted(graph[a])
        if a < b and a in graph.get(b, {}) and not {a, b} <= ALLOWED_CYCLE_NODES
    ]
    assert not mutual, "packages that import each other:\n" + "\n".join(mutual)


def test_no_cycle_among_the_packages():
    graph = package_graph()
    cycles = [
        component
        for component in strongly_connected(graph)
        if not set(component) <= ALLOWED_CYCLE_NODES
    ]
    described = ["; ".join(map(str, shortest_cycle(graph, component))) for component in cycles]
    assert not cycles, "packages in a cycle, by the imports that close it:\n" + "\n".join(described)


def _forbidden(module: str) -> bool:
    declaration = module.startswith(DECLARATIONS) and module != GENERIC_DECLARATION
    code = any(module == name or module.startswith(name + ".") for name in FAMILY_CODE)
    return declaration or code


def job_chain_reaches() -> dict[str, list[Import]]:
    """Each module the job chain reaches, with the chain of imports from a job module;
    the walk goes through every module but a registry."""
    paths: dict[str, list[Import]] = {}
    todo = [module for module in MODULES if module.startswith(JOB_CHAIN)]
    paths.update((module, []) for module in todo)
    while todo:
        module = todo.pop()
        if module in REGISTRIES or _forbidden(module):
            continue
        for edge in IMPORTS[module]:
            if edge.target not in paths:
                paths[edge.target] = [*paths[module], edge]
                todo.append(edge.target)
    return paths


def test_the_job_chain_imports_no_family_declaration_and_no_familys_code():
    reached = job_chain_reaches()
    offending = [
        " -> ".join(str(edge) for edge in chain)
        for module, chain in sorted(reached.items())
        if _forbidden(module)
    ]
    assert not offending, (
        "the job chain imports a family's declaration or code (ask the declaration's "
        "hooks instead, accelbench.families.base.family_of):\n" + "\n".join(offending)
    )
    assert GENERIC_DECLARATION in reached  # the walk does reach the families' package


@pytest.mark.parametrize("name", ["accelbench.families.kernel", "accelbench.train.loop"])
def test_the_walk_names_the_import_that_reaches_a_familys_code(monkeypatch, name):
    planted = Import("accelbench.job.supervisor", name, 7)
    monkeypatch.setitem(IMPORTS, "accelbench.job.supervisor", [planted])
    reached = job_chain_reaches()
    assert reached[name] == [planted]
    assert str(planted) == f"accelbench.job.supervisor imports {name} (line 7)"


def _study_of(module: str) -> str | None:
    """The study a module belongs to (accelbench.studies.<name>), None outside the studies."""
    parts = module.split(".")
    in_a_study = parts[:2] == ["accelbench", "studies"] and len(parts) > 2
    return ".".join(parts[:3]) if in_a_study else None


def test_a_study_is_named_nowhere_else():
    # The core finds a study through its folder (accelbench.studies: rules, titles,
    # commands), and a study builds on the core, never on another study.
    offending = [
        str(edge)
        for module, found in IMPORTS.items()
        for edge in found
        if _study_of(edge.target) and _study_of(edge.target) != _study_of(module)
    ]
    assert not offending, "a study imported from outside its folder:\n" + "\n".join(offending)

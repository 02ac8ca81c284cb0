"""The code stays in pieces a reader can take in at once: no function in
src/accelbench/analysis or src/accelbench/studies is longer than MAX_FUNCTION_LINES, and
none anywhere in the package longer than PACKAGE_MAX_FUNCTION_LINES."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "src" / "accelbench"
ANALYSIS = PACKAGE / "analysis"
STUDIES = PACKAGE / "studies"
MAX_FUNCTION_LINES = 60  # from the def line to the last line of the body
# Measuring, jobs and the CLI hold longer sequences of steps that belong together.
PACKAGE_MAX_FUNCTION_LINES = 80


def long_functions(root: Path, limit: int) -> list[str]:
    """'path:line name (N lines)' for every function or method under `root` longer than
    `limit` lines, paths relative to `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    where = path.relative_to(root)
                    found.append(f"{where}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_analysis_function_is_longer_than_sixty_lines():
    assert long_functions(ANALYSIS, MAX_FUNCTION_LINES) == []
    assert long_functions(STUDIES, MAX_FUNCTION_LINES) == []


def test_no_function_in_the_package_is_longer_than_eighty_lines():
    assert long_functions(PACKAGE, PACKAGE_MAX_FUNCTION_LINES) == []


def test_a_method_one_line_over_the_limit_is_named_and_one_at_the_limit_is_not(tmp_path):
    statements = [f"x{index} = {index}" for index in range(59)]
    at_limit = "\n".join(["def fits():", *(f"    {line}" for line in statements)])
    over = "\n".join(
        ["class Holder:", "    def too_long(self):", *(f"        {line}" for line in statements)]
    )
    (tmp_path / "shapes.py").write_text(f"{at_limit}\n\n\n{over}\n        return x0\n")
    assert long_functions(tmp_path, 60) == ["shapes.py:64 too_long (61 lines)"]

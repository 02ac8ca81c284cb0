"""The conda environments of the rules (--sdm conda): one per role, pinned as the locks pin.

No conda here: the tests read the rules as Snakemake loads them, and run each aggregation
script's imports with the GPU stack's packages made unimportable.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from snakemake.common import get_snakemake_searchpaths

from conftest import REPO_ROOT, copy_workflow

ENVS = REPO_ROOT / "envs"
ANALYSIS_ENV = ENVS / "accelbench-analysis.yaml"
STACK_ENVS = {cuda: ENVS / f"accelbench-cuda{cuda}.yaml" for cuda in ("13", "12")}
# Everything after the measurement: records -> tables, figures, report pages, cluster analysis.
AGGREGATION_RULES = {
    "tidy",
    "summary",
    "tables",
    "figures",
    "shi2016_comparison",
    "provenance",
    "sacct_query",
    "queue_wait",
    "offload_break_even",
    "roofline",
    "kernel_crossover",
}

RULES_AS_LOADED = """
import json
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import OutputSettings, ResourceSettings

with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
    workflow = api.workflow(ResourceSettings(), snakefile=Path("Snakefile"))._workflow
    print(
        json.dumps(
            {
                rule.name: [
                    rule.conda_env,
                    rule.script and str(Path(rule.snakefile).parent / rule.script),
                ]
                for rule in workflow.rules
            }
        )
    )
"""

# Makes the listed top-level modules unimportable, then runs each script's import
# statements (one interpreter for all: the imports are slow) and prints what failed.
IMPORTS_WITHOUT = """
import json
import sys
from importlib.abc import MetaPathFinder

class Missing(MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the analysis env)")

BLOCKED = set(sys.argv[1].split(","))
sys.meta_path.insert(0, Missing())
failed = {}
for script, imports in json.loads(sys.argv[2]).items():
    try:
        exec(imports)
    except ImportError as err:
        failed[script] = str(err)
print(json.dumps(failed))
"""


def exact_pins(lines: list[str]) -> dict[str, str]:
    """{name: version} of the requirement lines that pin one version with ==."""
    pins = {}
    for line in lines:
        if not line.strip() or line.startswith(("-", "#")):
            continue
        versions = [s.version for s in Requirement(line).specifier if s.operator == "=="]
        if versions:
            pins[canonicalize_name(Requirement(line).name)] = versions[0]
    return pins


def env_pins(path: Path) -> dict[str, str]:
    """{name: version} of an env file's pip pins."""
    dependencies = yaml.safe_load(path.read_text())["dependencies"]
    (pip,) = [dep["pip"] for dep in dependencies if isinstance(dep, dict)]
    return exact_pins(pip)


def lock_pins(path: Path) -> dict[str, str]:
    """{name: version} of a lock (its requirement lines; hashes follow on their own)."""
    lines = [line.split(" ")[0] for line in path.read_text().splitlines()]
    return exact_pins([line for line in lines if line[:1].isalnum()])


@pytest.fixture(scope="module")
def rules(tmp_path_factory) -> dict[str, list[str | None]]:
    """{rule: [conda env, script by its full path]} as Snakemake loads them (in a copy: it
    writes a log)."""
    done = subprocess.run(
        [sys.executable, "-c", RULES_AS_LOADED],
        cwd=copy_workflow(tmp_path_factory.mktemp("workflow")),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_aggregation_rules_use_the_analysis_env_and_measuring_rules_the_stack_env(rules):
    with_env = {name: env for name, (env, _) in rules.items() if env}
    analysis = {name for name, env in with_env.items() if env.endswith(ANALYSIS_ENV.name)}
    assert analysis == AGGREGATION_RULES
    for name in with_env.keys() - analysis:
        assert with_env[name].endswith(STACK_ENVS["13"].name), name


def test_the_analysis_env_is_enough_to_import_each_aggregation_script(rules):
    """The scripts import no torch, Numba, CuPy, scikit-learn... when they start."""
    stack_only = env_pins(STACK_ENVS["13"]).keys() - env_pins(ANALYSIS_ENV).keys()
    blocked = sorted(
        module
        for module, distributions in packages_distributions().items()
        if {canonicalize_name(d) for d in distributions} <= stack_only
    )
    assert {"torch", "numba", "cupy", "sklearn"} <= set(blocked)
    imports = {}
    for name in sorted(AGGREGATION_RULES):
        script = Path(rules[name][1]).resolve()
        tree = ast.parse(script.read_text())
        statements = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
        imports[script.name] = "\n".join(map(ast.unparse, statements))
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS_WITHOUT, ",".join(blocked), json.dumps(imports)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {}


@pytest.mark.parametrize("cuda", STACK_ENVS)
def test_each_env_pins_what_the_stacks_lock_pins(cuda):
    locked = lock_pins(REPO_ROOT / f"requirements-cuda{cuda}.lock")
    if cuda == "12":  # torch's CUDA 12 build is pinned beside the lock (the PyTorch index)
        locked |= exact_pins((REPO_ROOT / "requirements-cuda12.txt").read_text().splitlines())
    for env in (STACK_ENVS[cuda], ANALYSIS_ENV):
        pins = env_pins(env)
        assert {name: locked.get(name) for name in pins} == pins, env.name


def test_no_env_installs_accelbench_from_a_post_deploy_script():
    """Snakemake runs a post-deploy script from its copy beside the env in .snakemake/conda/,
    where the script's own folder says nothing of the checkout, and a copy of the package in
    the env would outlive changes to it. The rule scripts import the accelbench of the
    Snakemake that runs them instead (next test)."""
    assert sorted(ENVS.glob("*.post-deploy.sh")) == []


def test_a_rule_script_in_an_env_without_accelbench_imports_the_running_one():
    """Snakemake's script preamble appends its own import path (get_snakemake_searchpaths) to
    the env's; a Python that has no site-packages at all stands in for the env."""
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            f"import sys; sys.path.extend({get_snakemake_searchpaths()!r}); "
            "import accelbench; print(accelbench.__file__)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == importlib.util.find_spec("accelbench").origin

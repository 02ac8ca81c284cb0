"""Build hook: a wheel carries the Snakemake workflow inside the package.

The workflow's files stay at the top of the checkout, where Snakemake and people
find them. A wheel copies them into accelbench/workflow/, where
accelbench.config.workflow_root() finds them after a plain `pip install`; an
editable install keeps using the checkout itself. Everything else is declared in
pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

# The top-level parts `snakemake` needs beside its Snakefile (rules, schema, report
# captions, default config, profile, conda envs, rule scripts).
WORKFLOW_PARTS = ("Snakefile", "workflow", "config", "profiles", "envs", "scripts")
PACKAGED_WORKFLOW = Path("accelbench") / "workflow"


class BuildPyWithWorkflow(build_py):
    """build_py that also copies the workflow into the built package."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / PACKAGED_WORKFLOW
        shutil.rmtree(target, ignore_errors=True)  # no file survives its removal upstream
        target.mkdir(parents=True)
        for part in map(Path, WORKFLOW_PARTS):
            if part.is_dir():
                shutil.copytree(
                    part, target / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
                )
            else:
                shutil.copy2(part, target / part)


setup(cmdclass={"build_py": BuildPyWithWorkflow})

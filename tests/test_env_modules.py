"""`--sdm env-modules`: a site's modules (slurm.modules) are loaded for each experiment on Slurm.

Needs the local Slurm and the Environment Modules package that
tools/slurm-local/start.sh installs (`make slurm-up`); without them this test
skips, except in CI (CI=true), where that is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_slurm import SLURM_ARGS

from accelbench.records.record import load_record

from conftest import snakemake

pytestmark = pytest.mark.slurm

MODULES_INIT = Path("/usr/share/modules/init/bash")
TARGET = "results/kernels/saxpy/cpu1/numpy/float64/n1000.json"
MODULEFILE = """\
#%Module1.0
setenv ACCELBENCH_PROBE loaded
"""


@pytest.fixture(scope="module")
def environment_modules():
    if not MODULES_INIT.is_file():
        message = f"no Environment Modules ({MODULES_INIT}); `make slurm-up` installs them"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def test_configured_modules_are_loaded_in_the_job(
    slurm, environment_modules, workflow_dir, tmp_path
):
    module_dir = tmp_path / "modulefiles" / "accelbench-probe"
    module_dir.mkdir(parents=True)
    (module_dir / "1.0").write_text(MODULEFILE)
    (workflow_dir / "config" / "modules.yaml").write_text(
        "slurm:\n  modules: [accelbench-probe/1.0]\n"
    )
    # As on a cluster: the `module` function in every shell, the site's module path.
    env = {"BASH_ENV": str(MODULES_INIT), "MODULEPATH": str(tmp_path / "modulefiles")}
    configs = ("--configfile", "config/tiny.yaml", "config/modules.yaml")
    with_modules = (TARGET, "--sdm", "env-modules", *configs)
    done = snakemake(workflow_dir, *with_modules, *SLURM_ARGS, extra_env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = load_record(workflow_dir / TARGET)
    assert record["status"] == "ok", record["reason"]
    assert record["provenance"]["modules"] == ["accelbench-probe/1.0"]
    assert record["provenance"]["slurm"]["partition"] == "medium"

    # Where modules are loaded they are the experiment's environment: others re-measure it.
    (workflow_dir / "config" / "modules.yaml").write_text(
        "slurm:\n  modules: [accelbench-probe/2.0]\n"
    )
    changed = snakemake(workflow_dir, "-n", *with_modules)
    assert changed.returncode == 0, changed.stdout[-3000:] + changed.stderr[-3000:]
    assert "Software environment definition has changed" in changed.stdout + changed.stderr

"""Every table and figure is declared once (accelbench.analysis.outputs): the rules, the
report and the summary follow from the declaration."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench import config as accelbench_config
from accelbench import grid
from accelbench.analysis import fillable, outputs

from conftest import REPO_ROOT, copy_workflow

# The rules that make the declared outputs.
RULES = ("tables", "figures", "kernel_crossover")
# Each of RULES' output files as the Snakefile loads them with the config files given:
# its path, and its report caption (below workflow/report), category, subcategory and label.
OUTPUTS_AS_LOADED = """
import json
import sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

def item(file):
    found = file.flags.get("report")
    if found is None:
        return None
    caption = Path(found.caption.get_path_or_uri(secret_free=True)).resolve()
    shown = caption.relative_to(Path("workflow/report").resolve())
    return [str(shown), found.category, found.subcategory, found.labels["item"]]

configs = ConfigSettings(configfiles=[Path(name) for name in sys.argv[2:]])
with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
    workflow = api.workflow(ResourceSettings(), configs, snakefile=Path("Snakefile"))._workflow
    print(
        json.dumps(
            {
                name: [[str(file), item(file)] for file in workflow.get_rule(name).output]
                for name in sys.argv[1].split(",")
            }
        )
    )
"""


def test_every_output_has_a_title_and_its_report_caption():
    """The report refuses an item whose caption file is missing."""
    report = REPO_ROOT / "workflow" / "report"
    assert [out.name for out in outputs.OUTPUTS if not out.title] == []
    assert [out.caption for out in outputs.OUTPUTS if not (report / out.caption).is_file()] == []


def test_each_output_is_declared_once_and_the_answer_first():
    declared = [(out.name, out.kind) for out in outputs.OUTPUTS]
    assert len(declared) == len(set(declared))
    assert declared[0] == ("gpu_vs_cpu", outputs.TABLE)
    assert {out.kind for out in outputs.OUTPUTS} == {outputs.TABLE, outputs.FIGURE}
    # A figure its rule draws with what else it writes has no builder of its own.
    assert all(out.build or out.rule for out in outputs.OUTPUTS)


def expected(configfiles: list[str]) -> dict[str, list]:
    """RULES' files as the declarations of the outputs the planned grid fills say."""
    config = accelbench_config.load([REPO_ROOT / name for name in configfiles])
    plan = fillable.Planned.of(grid.expand(config), fillable.Counters.here(config))
    baseline = config["report"]["baseline_device"]
    files: dict[str, list] = {}
    for rule in RULES:
        found = files.setdefault(rule, [])
        for out in outputs.to_fill(rule, plan, baseline):
            written, shown = out.files
            found += [[path, None] for path in written]
            found.append([shown, [out.caption, out.category, out.subcategory, out.title]])
    return files


@pytest.mark.parametrize("configfiles", [[], ["config/cluster.yaml"]], ids=["default", "cluster"])
def test_the_aggregate_rules_make_what_the_declarations_say(tmp_path, configfiles):
    done = subprocess.run(
        [sys.executable, "-c", OUTPUTS_AS_LOADED, ",".join(RULES), *configfiles],
        cwd=copy_workflow(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.splitlines()[-1])
    # The crossover rule writes which side is ahead at each size besides its figure.
    crossovers = loaded["kernel_crossover"].pop()
    assert Path(crossovers[0]).name == "kernel_crossovers.csv"
    assert loaded == expected(configfiles)
    if configfiles:  # the cluster grid draws the crossover figure
        assert loaded["kernel_crossover"]

"""accelbench: does the GPU pay off for this workload, and by how much?

This file only wires things: configuration and its validation, the rule files,
the default target and the check of the targets asked for. The logic lives in the
accelbench package (src/).
"""

import os
import sys

from snakemake.utils import min_version

from accelbench import studies
from accelbench.run import config as run_config
from accelbench.config import check_configfile_options, check_configfiles, check_loaded

min_version("9.0")


# Results, logs and .snakemake/ live beside this Snakefile wherever Snakemake is
# started (`-s ../Snakefile` from a subdirectory), unless --directory names a place
# (`accelbench run` names the current one: an installed package's workflow lies in
# site-packages).
workdir: workflow.basedir


# By its full path: under --directory DIR a relative one would be looked for in DIR, and
# Snakemake skips a config file it cannot find when --configfile names others.
DEFAULT_CONFIG = f"{workflow.basedir}/config/config.yaml"


configfile: DEFAULT_CONFIG


# `snakemake --report` given no --configfile reports the run last started here, with its
# config (results/logs/run_config.yaml), not the default grid.
REPORTED_RUN = run_config.for_report(workflow.overwrite_configfiles, sys.argv)
if REPORTED_RUN:

    configfile: REPORTED_RUN


check_configfiles(workflow.overwrite_configfiles)
if workflow.is_main_process:
    check_configfile_options(sys.argv)
# Before anything reads the config: each file's size, depth and repeated keys, the
# schema (workflow/schemas/, filling in its defaults) and the names it cannot know.
CONFIG_SOURCES = check_loaded(
    config,
    [DEFAULT_CONFIG, *workflow.overwrite_configfiles, *filter(None, [REPORTED_RUN])],
    workflow.basedir,
)
# A command given no --configfile after a run with one plans the default grid: say so.
OTHER_CONFIG = run_config.other_config_note(config, workflow.overwrite_configfiles)
if workflow.is_main_process and OTHER_CONFIG:
    print(OTHER_CONFIG, file=sys.stderr)


report: "workflow/report/workflow.rst"


# The conda environments of the rules (--sdm conda), relative to the rule files: the
# configured CUDA stack's (cuda_stack: 13 or 12) for the rules that measure, a small one
# without the GPU stack for the rules that aggregate and draw.
CONDA_ENV = f"../../envs/accelbench-cuda{config['cuda_stack']}.yaml"
ANALYSIS_ENV = "../../envs/accelbench-analysis.yaml"
# The studies' rule files lie in the package (src/accelbench/studies/, or site-packages),
# not beside envs/: theirs by its full path.
STUDY_ANALYSIS_ENV = f"{workflow.basedir}/envs/accelbench-analysis.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/kernels.smk"
include: "workflow/rules/datasci.smk"
include: "workflow/rules/roofs.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/aggregate.smk"


# The studies apart from the core (accelbench.studies), each with its own rules; they add
# what the default target makes of them to STUDY_TARGETS.
STUDY_TARGETS = []
for study_rules in studies.rule_files():

    include: study_rules


onsuccess:
    fork_server.stop()
    if profile_warning():
        print(profile_warning(), file=sys.stderr)
    # Invalid records do not stop the run; the user must still hear of them at its end.
    warning = tidy.problems_warning(rules.tidy.output.problems)
    if warning:
        print(warning, file=sys.stderr)
    # Cells that ran busy or stayed imprecise are marked, not hidden: say which.
    flagged = tidy.flagged_warning(rules.tidy.output.parquet)
    if flagged:
        print(flagged, file=sys.stderr)


rule all:
    default_target: True
    input:
        # The records themselves, not only the tidy table made from them: Snakemake
        # does not rebuild a missing input of an up-to-date output, so a deleted
        # record is measured again only because it is a target here.
        GRID.paths,
        rules.tidy.output,
        rules.summary.output,
        rules.tables.output,
        rules.figures.output,
        rules.provenance.output,
        rules.kernel_crossover.output if plans("kernel_crossover") else [],
        STUDY_TARGETS,


# Last, once every rule is known: a target no rule makes is refused with its wrong part
# named (an absolute path, a part of no record's shape), not Snakemake's "No rule to produce".
if workflow.is_main_process:
    grid.check_targets(targets.requested(), made_by_a_rule, os.getcwd())

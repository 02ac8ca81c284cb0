"""accelbench: does the GPU pay off for this workload, and by how much?

This file only wires things: configuration and its validation, the rule files,
and the default target. The logic lives in the accelbench package (src/).
"""

import sys

from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


report: "workflow/report/workflow.rst"


# The conda environment of every rule (--sdm conda), relative to the rule files: the
# configured CUDA stack's (cuda_stack: 13 or 12).
CONDA_ENV = f"../../envs/accelbench-cuda{config['cuda_stack']}.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/kernels.smk"
include: "workflow/rules/roofs.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/cluster.smk"
include: "workflow/rules/roofline.smk"


onsuccess:
    fork_server.stop()
    # Invalid records do not stop the run; the user must still hear of them at its end.
    warning = tidy.problems_warning(rules.tidy.output.problems)
    if warning:
        print(warning, file=sys.stderr)


rule all:
    default_target: True
    input:
        rules.tidy.output,
        rules.tables.output,
        rules.figures.output,
        CLUSTER_TARGETS,
        rules.provenance.output,
        rules.roofline.output,

# Roofline and offload (accelbench.studies.roofline): kernels against the measured roofs,
# and the offload break-even model from the kernel results. Cheap, so they run where
# Snakemake runs.

from accelbench.studies import roofline as roofline_study


localrules:
    roofline,
    offload_break_even,


rule roofline:
    """Percent of the measured roof per kernel, roofline figure."""
    input:
        rules.tidy.output.parquet,
    output:
        percent=report(
            "results/tables/kernel_roof_percent.csv",
            caption="report/kernel_roof_percent.rst",
            category="Kernels",
            subcategory="Tables",
            labels={"item": roofline_study.TITLES["kernel_roof_percent"]},
        ),
        roofline_pdf="results/figures/roofline.pdf",
        roofline_png=report(
            "results/figures/roofline.png",
            caption="report/roofline.rst",
            category="Kernels",
            labels={"item": roofline_study.TITLES["roofline"]},
        ),
    log:
        "results/logs/roofline.log",
    conda:
        STUDY_ANALYSIS_ENV
    script:
        "scripts/roofline.py"


rule offload_break_even:
    """Offload break-even intensity and crossover size per kernel: model and measurement."""
    input:
        rules.tidy.output.parquet,
    output:
        table=multiext("results/tables/offload_break_even", ".md", ".tex"),
        table_csv=report(
            "results/tables/offload_break_even.csv",
            caption="report/offload_break_even_table.rst",
            category="Kernels",
            subcategory="Tables",
            labels={"item": roofline_study.TITLES["offload_break_even"]},
        ),
        figure_pdf="results/figures/offload_break_even.pdf",
        figure_png=report(
            "results/figures/offload_break_even.png",
            caption="report/offload_break_even.rst",
            category="Kernels",
            labels={"item": roofline_study.TITLES["offload_break_even"]},
        ),
    log:
        "results/logs/cluster/offload_break_even.log",
    conda:
        STUDY_ANALYSIS_ENV
    script:
        "scripts/offload_break_even.py"


# The default target's share: the roofline where kernels and roofs run, the break-even where
# kernels run on a CPU and a GPU.
STUDY_TARGETS.extend(rules.roofline.output if fills("roofline", roofline_study.NEEDS) else [])
STUDY_TARGETS.extend(
    rules.offload_break_even.output if fills("offload_break_even", roofline_study.NEEDS) else []
)

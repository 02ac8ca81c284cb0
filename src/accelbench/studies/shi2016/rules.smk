# Shi et al. (2016) (accelbench.studies.shi2016): the paper's networks beside its Table 7.
# Cheap, so it runs where Snakemake runs.

from accelbench.studies import shi2016 as shi2016_study


localrules:
    shi2016_comparison,


rule shi2016_comparison:
    """Shi et al. (2016) networks: time per mini-batch and thread scaling beside the paper's."""
    input:
        rules.tidy.output.parquet,
    output:
        table=multiext("results/tables/shi2016_comparison", ".md", ".tex"),
        table_csv=report(
            "results/tables/shi2016_comparison.csv",
            caption="report/shi2016_comparison_table.rst",
            category="Training",
            subcategory="Tables",
            labels={"item": shi2016_study.TITLES["shi2016_comparison"]},
        ),
        figure_pdf="results/figures/shi2016_comparison.pdf",
        figure_png=report(
            "results/figures/shi2016_comparison.png",
            caption="report/shi2016_comparison.rst",
            category="Training",
            labels={"item": shi2016_study.TITLES["shi2016_comparison"]},
        ),
        scaling_pdf="results/figures/shi2016_scaling.pdf",
        scaling_png=report(
            "results/figures/shi2016_scaling.png",
            caption="report/shi2016_scaling.rst",
            category="Training",
            labels={"item": shi2016_study.TITLES["shi2016_scaling"]},
        ),
    log:
        "results/logs/shi2016_comparison.log",
    conda:
        STUDY_ANALYSIS_ENV
    params:
        width=config["report"]["figure_width"],
    script:
        "scripts/shi2016_comparison.py"


# The default target's share: where the grid plans some of the paper's networks.
STUDY_TARGETS.extend(
    rules.shi2016_comparison.output if fills("shi2016_comparison", shi2016_study.NEEDS) else []
)

# Kernels against the measured roofs. Cheap, so it runs where Snakemake runs.


localrules:
    roofline,


rule roofline:
    """Percent of the measured roof per kernel, roofline figure."""
    input:
        rules.tidy.output.parquet,
    output:
        percent=report(
            "results/tables/kernel_roof_percent.csv",
            caption="../report/kernel_roof_percent.rst",
            category="Kernels",
            subcategory="Tables",
            labels={"item": titles.TITLES["kernel_roof_percent"]},
        ),
        roofline_pdf="results/figures/roofline.pdf",
        roofline_png=report(
            "results/figures/roofline.png",
            caption="../report/roofline.rst",
            category="Kernels",
            labels={"item": titles.TITLES["roofline"]},
        ),
    log:
        "results/logs/roofline.log",
    conda:
        ANALYSIS_ENV
    script:
        "../../scripts/roofline.py"

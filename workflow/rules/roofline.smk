# Kernels against the measured roofs. Cheap, so it runs where Snakemake runs.


localrules:
    roofline,


rule roofline:
    """Percent of the measured roof per kernel, CPU/GPU crossovers, roofline figures."""
    input:
        rules.tidy.output.parquet,
    output:
        percent="results/tables/kernel_roof_percent.csv",
        crossovers="results/tables/kernel_crossovers.csv",
        roofline_pdf="results/figures/roofline.pdf",
        roofline_png=report(
            "results/figures/roofline.png",
            caption="../report/roofline.rst",
            category="Kernels",
        ),
        crossover_pdf="results/figures/kernel_crossover.pdf",
        crossover_png=report(
            "results/figures/kernel_crossover.png",
            caption="../report/kernel_crossover.rst",
            category="Kernels",
        ),
    log:
        "results/logs/roofline.log",
    conda:
        CONDA_ENV
    script:
        "../../scripts/roofline.py"

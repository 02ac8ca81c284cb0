# Records -> tidy table -> comparison tables and figures. Cheap, so they run
# where Snakemake runs (the login node on a cluster), never as Slurm jobs.


localrules:
    tidy,
    tables,
    figures,


rule tidy:
    """All records of the grid -> one row per record (Parquet and CSV)."""
    input:
        GRID.paths,
    output:
        parquet="results/tidy.parquet",
        csv="results/tidy.csv",
        problems="results/record_problems.csv",
        excluded="results/excluded.csv",
    params:
        excluded=[(exp.path, reason) for exp, reason in GRID.excluded],
    log:
        "results/logs/tidy.log",
    conda:
        "../../envs/accelbench.yaml"
    script:
        "../../scripts/tidy.py"


rule tables:
    """Shi et al.-style comparison tables: rows x devices, median [95% CI]."""
    input:
        rules.tidy.output.parquet,
    output:
        multiext("results/tables/train_time_per_batch", ".md", ".tex", ".csv"),
        multiext("results/tables/kernel_time", ".md", ".tex", ".csv"),
    log:
        "results/logs/tables.log",
    conda:
        "../../envs/accelbench.yaml"
    script:
        "../../scripts/tables.py"


rule figures:
    """Paper-ready figures, vector PDF and 300 dpi PNG."""
    input:
        rules.tidy.output.parquet,
    output:
        "results/figures/train_time_per_batch.pdf",
        report(
            "results/figures/train_time_per_batch.png",
            caption="../report/train_time_per_batch.rst",
            category="Training",
        ),
        "results/figures/kernel_throughput.pdf",
        report(
            "results/figures/kernel_throughput.png",
            caption="../report/kernel_throughput.rst",
            category="Kernels",
        ),
    log:
        "results/logs/figures.log",
    conda:
        "../../envs/accelbench.yaml"
    script:
        "../../scripts/figures.py"

# Records -> tidy table -> comparison tables, figures and provenance. Cheap, so they
# run where Snakemake runs (the login node on a cluster), never as Slurm jobs. The
# files a rule declares choose what its script builds (by file name).


localrules:
    tidy,
    tables,
    figures,
    provenance,


rule tidy:
    """All records of the grid -> one row per record (Parquet and CSV)."""
    input:
        GRID.paths,
    output:
        parquet="results/tidy.parquet",
        csv="results/tidy.csv",
        problems="results/record_problems.csv",
        excluded="results/excluded.csv",
    log:
        "results/logs/tidy.log",
    conda:
        CONDA_ENV
    params:
        excluded=[(exp.path, reason) for exp, reason in GRID.excluded],
    script:
        "../../scripts/tidy.py"


rule tables:
    """Shi et al.-style comparison tables: rows x devices, median [95% CI]."""
    input:
        rules.tidy.output.parquet,
    output:
        table_files("train_time_per_batch", "Training"),
        table_files("train_speedup", "Training"),
        table_files("train_precision", "Training"),
        table_files("train_scaling", "Training"),
        for_multi_node(table_files("train_node_scaling", "Training")),
        table_files("train_energy", "Training"),
        table_files("kernel_time", "Kernels"),
        table_files("kernel_speedup", "Kernels"),
        table_files("kernel_energy", "Kernels"),
        table_files("datasci_time", "Data science"),
    log:
        "results/logs/tables.log",
    conda:
        CONDA_ENV
    params:
        baseline=config["report"]["baseline_device"],
    script:
        "../../scripts/tables.py"


rule figures:
    """Paper-ready figures, vector PDF and 300 dpi PNG."""
    input:
        rules.tidy.output.parquet,
    output:
        figure_files("train_time_per_batch", "Training"),
        figure_files("train_speedup", "Training"),
        figure_files("train_thread_scaling", "Training"),
        figure_files("train_precision", "Training"),
        figure_files("train_gpu_scaling", "Training"),
        for_multi_node(figure_files("train_node_scaling", "Training")),
        figure_files("train_energy", "Training"),
        figure_files("kernel_throughput", "Kernels"),
        figure_files("kernel_energy", "Kernels"),
        figure_files("datasci_throughput", "Data science"),
    log:
        "results/logs/figures.log",
    conda:
        CONDA_ENV
    params:
        baseline=config["report"]["baseline_device"],
        width=config["report"]["figure_width"],
    script:
        "../../scripts/figures.py"


rule provenance:
    """Where and with what the records were measured, and the configuration as run."""
    input:
        rules.tidy.output.parquet,
    output:
        multiext("results/provenance", ".md", ".tex", ".csv"),
        table=report(
            "results/provenance.html",
            caption="../report/provenance.rst",
            category="Provenance",
        ),
        config=report(
            "results/config.yaml",
            caption="../report/config.rst",
            category="Provenance",
        ),
    log:
        "results/logs/provenance.log",
    conda:
        CONDA_ENV
    params:
        config=config,
    script:
        "../../scripts/provenance.py"

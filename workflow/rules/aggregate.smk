# Records -> tidy table -> comparison tables, figures and provenance. Cheap, so they
# run where Snakemake runs (the login node on a cluster), never as Slurm jobs. The
# files a rule declares choose what its script builds (by file name): the tables and
# figures the grid can fill, as each is declared (accelbench.analysis.outputs).


localrules:
    tidy,
    summary,
    tables,
    figures,
    kernel_crossover,
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
        ANALYSIS_ENV
    params:
        excluded=[(exp.path, reason) for exp, reason in GRID.excluded],
    script:
        "../../scripts/tidy.py"


rule summary:
    """The report's first page: the answer (the GPU against the CPU of the same machine),
    fastest backends and devices, crossovers, the cells the committed references share,
    cells to look at."""
    input:
        rules.tidy.output.parquet,
        # Made again when a reference is measured anew.
        references=machines.reference_files(accelbench_config.workflow_root()),
    output:
        report(
            "results/summary.html",
            caption="../report/summary.rst",
            category="Summary",
            labels={"item": outputs.PAGE_TITLES["summary"]},
        ),
        attention=report(
            "results/attention.csv",
            caption="../report/attention.rst",
            category="Summary",
            labels={"item": outputs.PAGE_TITLES["attention"]},
        ),
    log:
        "results/logs/summary.log",
    conda:
        ANALYSIS_ENV
    params:
        baseline=config["report"]["baseline_device"],
        # The figures the grid does not fill where their tables are made, and why.
        not_drawn=outputs.not_drawn(PLANNED, config["report"]["baseline_device"]),
    script:
        "../../scripts/summary.py"


rule tables:
    """The answer first (the GPU against the CPU of the same machine), then Shi et
    al.-style comparison tables: rows x devices, median [95% CI]."""
    input:
        rules.tidy.output.parquet,
    output:
        outputs_to_fill("tables"),
    log:
        "results/logs/tables.log",
    conda:
        ANALYSIS_ENV
    params:
        baseline=config["report"]["baseline_device"],
    script:
        "../../scripts/tables.py"


rule figures:
    """Paper-ready figures, vector PDF and 300 dpi PNG."""
    input:
        rules.tidy.output.parquet,
    output:
        outputs_to_fill("figures"),
    log:
        "results/logs/figures.log",
    conda:
        ANALYSIS_ENV
    params:
        baseline=config["report"]["baseline_device"],
        width=config["report"]["figure_width"],
    script:
        "../../scripts/figures.py"


rule kernel_crossover:
    """Which side is ahead at each size, per kernel, and the crossovers the sizes
    bracket: table, and figure where the grid plans two sizes on both sides."""
    input:
        rules.tidy.output.parquet,
    output:
        outputs_to_fill("kernel_crossover"),
        crossovers=report(
            "results/tables/kernel_crossovers.csv",
            caption="../report/kernel_crossovers.rst",
            category="Kernels",
            subcategory="Tables",
            labels={"item": outputs.PAGE_TITLES["kernel_crossovers"]},
        ),
    log:
        "results/logs/kernel_crossover.log",
    conda:
        ANALYSIS_ENV
    script:
        "../../scripts/kernel_crossover.py"


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
            labels={"item": outputs.PAGE_TITLES["provenance"]},
        ),
        config=report(
            "results/config.yaml",
            caption="../report/config.rst",
            category="Provenance",
            labels={"item": outputs.PAGE_TITLES["config"]},
        ),
    log:
        "results/logs/provenance.log",
    conda:
        ANALYSIS_ENV
    params:
        config=config,
    script:
        "../../scripts/provenance.py"

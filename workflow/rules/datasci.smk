rule datasci_benchmark:
    """One data science workload on one library, device and size -> one result record."""
    input:
        grid.target_check("datasci", config),
    output:
        FAMILIES["datasci"].pattern,
    log:
        "results/logs/datasci/{workload}/{device}/{backend}/n{size}.log",
    retries: RETRIES
    # Short like kernel experiments: on a cluster they share the kernels' submissions
    # of the same device (profiles/default sets how many); locally, groups have no effect.
    group:
        "kernels_{device}"
    conda:
        CONDA_ENV
    envmodules:
        *ENV_MODULES,
    threads: experiment_threads
    resources:
        **experiment_resources("datasci"),
    params:
        settings=family_settings("datasci"),
    script:
        "../../scripts/run_experiment.py"


# The comparison groups of the grid's datasci experiments: each measured by one job, its
# cells' runs interleaved in rounds (accelbench.job.group). Their rules name their
# outputs without wildcards, so Snakemake prefers them to the one-cell rule above.
for cells in groups_of("datasci"):

    rule:
        name:
            cells.rule
        input:
            group_retry_flags(cells),
        output:
            cells.paths,
        log:
            cells.log,
        priority: cells.priority
        retries: RETRIES
        group:
            short_jobs_group(cells)
        conda:
            CONDA_ENV
        envmodules:
            *ENV_MODULES,
        threads: group_threads(cells)
        resources:
            **group_resources(cells),
        params:
            group=cells.id,
            settings=group_settings(cells),
        script:
            "../../scripts/run_group.py"

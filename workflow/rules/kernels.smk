rule kernel_benchmark:
    """One kernel on one backend, device, dtype and size -> one result record."""
    input:
        grid.target_check("kernel", config),
    output:
        FAMILIES["kernel"].pattern,
    log:
        "results/logs/kernels/{kernel}/{device}/{backend}/{dtype}/n{size}.log",
    retries: RETRIES
    # On a cluster, short kernel experiments of one device share a submission
    # (profiles/default sets how many); locally, groups have no effect.
    group:
        "kernels_{device}"
    conda:
        CONDA_ENV
    envmodules:
        *ENV_MODULES,
    threads: experiment_threads
    resources:
        **experiment_resources("kernel"),
    params:
        settings=family_settings("kernel"),
    script:
        "../../scripts/run_experiment.py"


# The comparison groups of the grid's kernel experiments: each measured by one job, its
# cells' runs interleaved in rounds (accelbench.job.group). Their rules name their
# outputs without wildcards, so Snakemake prefers them to the one-cell rule above.
for cells in groups_of("kernel"):

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

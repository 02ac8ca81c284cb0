rule roof_benchmark:
    """The measured ceilings of one device in one dtype -> one result record."""
    input:
        grid.target_check("roof", config),
        # A roof in another dtype times the float32 roof's byte-ceiling winners.
        search_from=roof_search_source,
    output:
        FAMILIES["roof"].pattern,
    log:
        "results/logs/roofs/{device}/{dtype}.log",
    retries: RETRIES
    # On a cluster the roofs join the batches of their device's kernels, so that
    # roofs and the kernels they bound are measured on the same kind of allocation.
    group:
        "kernels_{device}"
    conda:
        CONDA_ENV
    envmodules:
        *ENV_MODULES,
    threads: experiment_threads
    resources:
        **experiment_resources("roof"),
    params:
        settings=family_settings("roof"),
    script:
        "../../scripts/run_experiment.py"

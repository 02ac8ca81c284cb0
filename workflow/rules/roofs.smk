rule roof_benchmark:
    """The measured ceilings of one device in one dtype -> one result record."""
    input:
        grid.target_check("roof"),
    output:
        grid.ROOF_PATTERN,
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
        **experiment_resources("kernels"),
    params:
        settings=ROOF_SETTINGS,
    script:
        "../../scripts/run_experiment.py"

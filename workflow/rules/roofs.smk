rule roof_benchmark:
    """The measured ceilings of one device in one dtype -> one result record."""
    input:
        check_roof_target,
    output:
        grid.ROOF_PATTERN,
    log:
        "results/logs/roofs/{device}/{dtype}.log",
    params:
        settings=ROOF_SETTINGS,
    # On a cluster the roofs join the batches of their device's kernels, so that
    # roofs and the kernels they bound are measured on the same kind of allocation.
    group:
        "kernels_{device}"
    threads: experiment_threads
    retries: RETRIES
    resources:
        **experiment_resources("kernels"),
    conda:
        CONDA_ENV
    envmodules:
        *ENV_MODULES,
    script:
        "../../scripts/run_experiment.py"

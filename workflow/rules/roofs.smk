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

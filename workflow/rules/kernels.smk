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

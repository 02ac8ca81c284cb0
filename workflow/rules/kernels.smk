rule kernel_benchmark:
    """One kernel on one backend, device, dtype and size -> one result record."""
    input:
        check_kernel_target,
    output:
        grid.KERNEL_PATTERN,
    log:
        "results/logs/kernels/{kernel}/{device}/{backend}/{dtype}/n{size}.log",
    params:
        settings=KERNEL_SETTINGS,
    threads: experiment_threads
    resources:
        **experiment_resources("kernels"),
    conda:
        "../../envs/accelbench.yaml"
    script:
        "../../scripts/run_experiment.py"

rule train_benchmark:
    """One model trained on one device, precision, strategy and batch size -> one record."""
    input:
        check_train_target,
    output:
        grid.TRAIN_PATTERN,
    log:
        "results/logs/train/{model}/{device}/{precision}/{strategy}/bs{batch}.log",
    params:
        settings=TRAIN_SETTINGS,
    threads: experiment_threads
    retries: config["retries"]
    resources:
        **experiment_resources("train"),
    conda:
        "../../envs/accelbench.yaml"
    envmodules:
        *config["slurm"]["modules"],
    script:
        "../../scripts/run_experiment.py"

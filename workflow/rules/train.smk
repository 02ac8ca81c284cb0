rule train_benchmark:
    """One model trained on one device, precision, strategy and batch size -> one record."""
    input:
        grid.target_check("train", config),
    output:
        FAMILIES["train"].pattern,
    log:
        "results/logs/train/{model}/{device}/{precision}/{strategy}/bs{batch}.log",
    retries: RETRIES
    conda:
        CONDA_ENV
    envmodules:
        *ENV_MODULES,
    threads: experiment_threads
    resources:
        **experiment_resources("train"),
    params:
        settings=family_settings("train"),
    script:
        "../../scripts/run_experiment.py"


# Real datasets are fetched where Snakemake runs (the login node has the network);
# experiments use them when present. `snakemake --cores 1 datasets` fetches all.
localrules:
    download_dataset,
    datasets,


rule download_dataset:
    """One real dataset (CIFAR-10, MNIST, Penn Treebank) into train.data_dir."""
    output:
        directory(DATASET_PATTERN),
    log:
        "results/logs/data/{dataset}.log",
    conda:
        CONDA_ENV
    script:
        "../../scripts/download_dataset.py"


rule datasets:
    """Every real dataset the training models can use."""
    input:
        expand(DATASET_PATTERN, dataset=list(datasets.DATASETS)),

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


# The comparison groups of the grid's train experiments: each measured by one job, its
# cells' runs interleaved in rounds (accelbench.job.group). Their rules name their
# outputs without wildcards, so Snakemake prefers them to the one-cell rule above.
for cells in groups_of("train"):

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

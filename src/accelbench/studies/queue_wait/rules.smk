# Queue wait (accelbench.studies.queue_wait): queue wait per partition from sacct
# accounting data. Cheap, so it runs where Snakemake runs (the login node on a cluster,
# where sacct answers). It needs Slurm or a sacct dump: it joins the default target
# only with cluster_analysis.queue_wait; otherwise name its outputs as targets.

from accelbench.studies import queue_wait as queue_wait_study
from accelbench.studies.queue_wait import sacct

CLUSTER = config["cluster_analysis"]
SACCT_DUMP = CLUSTER["sacct_dump"] or "results/cluster/sacct.txt"


localrules:
    sacct_query,
    queue_wait,


rule sacct_query:
    """sacct of the configured partitions and window -> the raw text the analysis reads."""
    output:
        "results/cluster/sacct.txt",
    log:
        "results/logs/cluster/sacct_query.log",
    conda:
        STUDY_ANALYSIS_ENV
    params:
        partitions=sacct.configured_partitions(config),
        since=CLUSTER["since"],
        until=CLUSTER["until"],
    script:
        "scripts/sacct_query.py"


rule queue_wait:
    """Queue wait per partition, binned by requested CPU-hours and GB-hours."""
    input:
        SACCT_DUMP,
    output:
        cpu_hours_table=multiext("results/tables/queue_wait_cpu_hours", ".md", ".tex", ".csv"),
        gb_hours_table=multiext("results/tables/queue_wait_gb_hours", ".md", ".tex", ".csv"),
        figure_pdf="results/figures/queue_wait.pdf",
        figure_png=report(
            "results/figures/queue_wait.png",
            caption="report/queue_wait.rst",
            category="Cluster",
            labels={"item": queue_wait_study.TITLES["queue_wait"]},
        ),
        jobs="results/cluster/sacct_jobs.csv",
        problems="results/cluster/sacct_problems.csv",
    log:
        "results/logs/cluster/queue_wait.log",
    conda:
        STUDY_ANALYSIS_ENV
    params:
        partitions=sacct.configured_partitions(config),
        cpu_hour_bins=CLUSTER["cpu_hour_bins"],
        gb_hour_bins=CLUSTER["gb_hour_bins"],
        min_jobs=CLUSTER["min_jobs"],
    script:
        "scripts/queue_wait.py"


# The default target's share: the queue wait where configured.
STUDY_TARGETS.extend(rules.queue_wait.output if CLUSTER["queue_wait"] else [])

# Helpers that turn config and wildcards into inputs, params and resources.
# They only call the accelbench package, where the logic is tested.

import functools
import os
import sys
from dataclasses import asdict
from pathlib import Path

from snakemake.settings.types import DeploymentMethod

from accelbench import grid
from accelbench.slurm import resources as cluster, group_errors, interrupts
from accelbench.run import (
    progress,
    config as run_config,
    profile as run_profile,
    start as run_start,
    targets,
)
from accelbench import config as accelbench_config
from accelbench.analysis import fillable, machines, outputs, tidy
from accelbench.platform.devices import parse_device
from accelbench.families import FAMILIES
from accelbench.families import roof as roof_family
from accelbench.job import fork_server
from accelbench.train import datasets

GRID = grid.expand(config)
# The cells that comparison tables set side by side, each set measured by one job.
GROUPS = grid.comparison_groups(GRID.experiments)
# Energy counters are probed here: an energy figure is asked for only where one can be read.
PLANNED = fillable.Planned.of(GRID, fillable.Counters.here(config))
# A site config copied from the default with lines deleted keeps what it deleted.
KEPT_DEFAULTS = accelbench_config.kept_defaults_warning(CONFIG_SOURCES, GRID)
if workflow.is_main_process and KEPT_DEFAULTS:
    print(KEPT_DEFAULTS, file=sys.stderr)


wildcard_constraints:
    **grid.wildcard_constraints(),
    dataset="|".join(datasets.DATASETS),


def under_slurm():
    """True in the Snakemake that submits to Slurm and in those that run its jobs.

    There a ddp/fsdp experiment is a job of one Slurm task per process; run
    locally it starts its processes itself. Known once the run starts (the
    executor is not set while the Snakefile is parsed); a job runs in a Snakemake
    of its own (remote mode, local executor) inside the Slurm allocation.
    """
    executor = getattr(workflow.executor_plugin, "name", None)
    in_slurm_job = not workflow.is_main_process and "SLURM_JOB_ID" in os.environ
    return executor in ("slurm", "slurm-jobstep") or in_slurm_job


@functools.cache
def placement(device, strategy, slurm_tasks):
    """Partition, cores, GPUs and tasks of one device and strategy (asked once per resource)."""
    return cluster.job_resources(parse_device(device), strategy, config, slurm_tasks=slurm_tasks)


def experiment_resources(family):
    """Scheduler resources of one experiment of `family`, from its device and strategy
    wildcards and the config (its family's section of `resources`)."""
    section = FAMILIES[family].resources

    def resource(key):
        # A key placement does not give evaluates to None, which Snakemake leaves out.
        return lambda wc: placement(wc.device, wc.get("strategy", "single"), under_slurm()).get(key)

    resources = {key: resource(key) for key in cluster.JOB_RESOURCE_KEYS}
    resources.update(
        {
            "mem_mb": lambda wc, attempt: cluster.scaled(config, section, "mem_mb", attempt),
            "runtime": lambda wc, attempt: cluster.scaled(config, section, "runtime", attempt),
            # The job's own attempt number: its last attempt records a failure instead of retrying.
            "attempt": lambda wc, attempt: attempt,
            # Local runs take this slot so that no two benchmarks share the machine.
            "benchmark_slots": 1,
            "slurm_account": lambda wc: slurm_account(),
        }
    )
    optional = {
        "qos": config["slurm"]["qos"],
        "constraint": config["slurm"]["constraint"],
    }
    resources.update({key: value for key, value in optional.items() if value})
    return resources


def groups_of(family):
    """The comparison groups of `family`'s experiments."""
    return [cells for cells in GROUPS if cells.family == family]


def group_resources(cells):
    """Scheduler resources of a comparison group's job: what its largest cell needs
    (cluster.group_device), for as long as its cells take one after another."""
    device = group_device(cells)
    section = FAMILIES[cells.family].resources

    def resource(key):
        return lambda wc: placement(device.name, "single", under_slurm()).get(key)

    resources = {key: resource(key) for key in cluster.JOB_RESOURCE_KEYS}
    resources.update(
        {
            "mem_mb": lambda wc, attempt: cluster.scaled(config, section, "mem_mb", attempt),
            "runtime": lambda wc, attempt: cluster.scaled(config, section, "runtime", attempt)
            * len(cells.experiments),
            "attempt": lambda wc, attempt: attempt,
            "benchmark_slots": 1,
            "slurm_account": lambda wc: slurm_account(),
        }
    )
    optional = {
        "qos": config["slurm"]["qos"],
        "constraint": config["slurm"]["constraint"],
    }
    resources.update({key: value for key, value in optional.items() if value})
    return resources


def group_device(cells):
    """The device a comparison group's job asks for (cluster.group_device)."""
    return cluster.group_device(parse_device(exp.device) for exp in cells.experiments)


def group_threads(cells):
    return cluster.local_threads(group_device(cells))


def short_jobs_group(cells):
    """The rule group of the short experiments of the group's device, which share a Slurm
    submission (profiles/default, group-components), as their one-cell rules do."""
    return f"kernels_{group_device(cells).name}"


def group_settings(cells):
    """Each cell's settings, in the order of the group's outputs (family_settings)."""
    family = FAMILIES[cells.family]
    return [
        family.settings(
            config, {name: str(value) for name, value in asdict(exp).items()}
        ).as_params()
        for exp in cells.experiments
    ]


def group_retry_flags(cells):
    """The retry flags of the group's cells that have one (grid.target_check)."""
    return lambda wc: [str(flag) for flag in map(grid.retry_flag, cells.paths) if flag.exists()]


def slurm_account():
    """The account of every Slurm submission: slurm.account, else the user's default one.

    Named, the Slurm plugin neither guesses one nor warns that it could not; asked only
    by the Snakemake that submits.
    """
    return site_account() if workflow.is_main_process and under_slurm() else None


@functools.cache
def site_account():
    return cluster.submission_account(config)


def made_by_a_rule(target):
    """Whether a target names a rule or a file some rule makes."""
    return workflow.is_rule(target) or any(rule.is_producer(target) for rule in workflow.rules)


def experiment_threads(wildcards):
    return cluster.local_threads(parse_device(wildcards.device))


# Retries belong to the Snakemake that submits jobs; the one running a job inside
# its Slurm allocation must not retry it again in place.
RETRIES = config["retries"] if workflow.is_main_process else 0
NEEDS_GPU = any(parse_device(exp.device).is_gpu for exp in GRID.experiments)
# Modules are part of a job's software environment only where they are loaded: a
# change to slurm.modules re-measures the grid under --sdm env-modules, not otherwise.
ENV_MODULES = (
    cluster.env_modules(config)
    if DeploymentMethod.ENV_MODULES in workflow.deployment_settings.deployment_method
    else []
)


@functools.cache
def profile_warning():
    """Settings of profiles/default this run lacks, named when it starts and when it ends.

    Asked once the run starts: the executor is not known while the Snakefile is parsed.
    """
    return run_profile.warning(
        run_profile.missing_settings(
            executor=workflow.executor_plugin.name,
            resources=workflow.global_resources.keys(),
            group_components=workflow.group_settings.group_components,
            keep_going=workflow.execution_settings.keep_going,
        )
    )


onstart:
    if profile_warning():
        print(profile_warning(), file=sys.stderr)
    # Before anything is submitted: the partitions and account must exist.
    if workflow.executor_plugin.name == "slurm":
        batch_size = workflow.group_settings.group_components.get(run_profile.KERNEL_GROUP, 1)
        cluster.check_slurm_site(
            config,
            needs_gpu=NEEDS_GPU,
            shapes=cluster.job_shapes(GRID.experiments, config, batch_size),
            modules_loaded=bool(ENV_MODULES),
        )
        interrupts.interrupt_once()
        group_errors.show_group_messages()
    # The plan, and a copy of each record about to be measured again.
    jobs = list(workflow.dag.needrun_jobs())
    print(run_start.start(jobs, GRID, Path("results")), file=sys.stderr)
    # For the commands that follow without --configfile (the report, accelbench status).
    run_config.write(config, workflow.overwrite_configfiles)
    # Local experiment jobs get their measuring processes from one server, pre-imported for
    # the families they measure; a run that measures nothing starts none.
    measured = run_start.measured_families(jobs)
    if workflow.executor_plugin.name == "local" and measured:
        fork_server.start("results/logs/fork_server.log", measured)


onerror:
    fork_server.stop()
    if profile_warning():
        print(profile_warning(), file=sys.stderr)
    # Snakemake ends with "At least one job did not complete successfully": say which.
    unfinished = progress.unfinished_in(workflow)
    if unfinished:
        print(unfinished, file=sys.stderr)


# Where `download_dataset` puts dataset {dataset}: train.data_dir, or data/ when that is empty.
DATASET_PATTERN = str(datasets.dataset_root(config["train"].get("data_dir") or "data", "{dataset}"))


def roof_search_source(wildcards):
    """The roof record a roof's byte ceilings take their winners from, if any."""
    found = roof_family.search_source(config, wildcards.device, wildcards.dtype)
    return [found] if found else []


def family_settings(family):
    """The params of one experiment of `family`: the settings its declaration takes from the
    config for these wildcards, as a plain mapping (a change re-measures the experiment, and
    only it)."""
    return lambda wildcards: FAMILIES[family].settings(config, wildcards).as_params()


def fills(name, needs):
    """Whether the grid plans what a study's output `name` shows, by its NEEDS
    (accelbench.studies)."""
    return needs[name](PLANNED, config["report"]["baseline_device"])


def plans(rule):
    """Whether the grid plans what some table or figure of `rule` shows: then the rule
    runs, though a figure it draws may compare more than is planned."""
    return outputs.planned(rule, PLANNED, config["report"]["baseline_device"])


def outputs_to_fill(rule):
    """The files of each table or figure `rule` makes that the grid fills
    (accelbench.analysis.outputs), each output's report item last."""
    files = []
    for output in outputs.to_fill(rule, PLANNED, config["report"]["baseline_device"]):
        written, shown = output.files
        item = report(
            shown,
            caption=f"../report/{output.caption}",
            category=output.category,
            subcategory=output.subcategory,
            labels={"item": output.title},
        )
        files += [*written, item]
    return files

"""Site checks before submission, GPU allocation guard, and the supervised job."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace

import pytest
import yaml

from accelbench import grid
from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.families.train import TrainExperiment
from accelbench.job import supervisor
from accelbench.job.context import JobContext
from accelbench.measuring.outcome import RetryableFailure
from accelbench.platform import provenance
from accelbench.platform.devices import parse_device, slurm_gpu_shortfall
from accelbench.records.record import load_record
from accelbench.slurm import resources as cluster
from accelbench.train.settings import TrainSettings

from conftest import REPO_ROOT


@pytest.fixture
def config():
    return yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())


# What a site reports: partitions, the user's accounts with their QOS, and the partitions' nodes.
PARTITIONS = ["gpu", "medium"]
ASSOCIATIONS = {"physics": ["long", "normal"], "root": ["normal"]}
NODES = {
    "medium": cluster.PartitionNodes(features=frozenset({"skylake", "ib"})),
    "gpu": cluster.PartitionNodes(
        has_gpus=True, gpu_types=frozenset({"a100", "h100"}), features=frozenset({"skylake"})
    ),
}


def check(config, needs_gpu=True, *, partitions=PARTITIONS, associations=ASSOCIATIONS, nodes=NODES):
    problems = cluster.site_problems(
        config,
        needs_gpu=needs_gpu,
        partitions=partitions,
        associations=associations,
        nodes=nodes,
    )
    if problems:
        raise cluster.SiteError(problems)


def test_site_check_accepts_what_the_cluster_has(config):
    config["slurm"].update(
        account="physics", qos="long", gpu_model="a100", constraint="[skylake*2]"
    )
    check(config)


@pytest.mark.parametrize(
    ("change", "needs_gpu", "message"),
    [
        (
            {"cpu_partition": "short"},
            False,
            "config key slurm.cpu_partition: partition 'short' does not exist on this cluster; "
            "partitions: gpu, medium",
        ),
        (
            {"gpu_partition": "a100"},
            True,
            "config key slurm.gpu_partition: partition 'a100' does not exist",
        ),
        ({"gpu_partition": None}, True, "has no GPU partition: set slurm.gpu_partition"),
        (
            {"account": "chemistry"},
            False,
            "config key slurm.account: account 'chemistry' is not one of yours; "
            "accounts: physics, root",
        ),
        (
            {"gpu_model": "v100"},
            True,
            "config key slurm.gpu_model: GPU model 'v100' is on no node of partition 'gpu'; "
            "its GPU models: a100, h100",
        ),
        (
            {"qos": "long", "account": "root"},
            False,
            "config key slurm.qos: QOS 'long' is not one account 'root' may use; QOS: normal",
        ),
        (
            {"qos": "high"},
            False,
            "config key slurm.qos: QOS 'high' is not one your accounts may use; QOS: long, normal",
        ),
        (
            {"constraint": "skylake&haswell"},
            False,
            "config key slurm.constraint: feature 'haswell' is on no node of this cluster; "
            "features: ib, skylake",
        ),
        (
            # sbatch refuses an unknown alternative too, though the other one exists.
            {"constraint": "[haswell|skylake]"},
            False,
            "config key slurm.constraint: feature 'haswell' is on no node of this cluster",
        ),
        (
            {"constraint": "skylake,ib"},
            True,
            "config key slurm.constraint: feature 'ib' is on no node of partition 'gpu' "
            "(slurm.gpu_partition); its features: skylake",
        ),
    ],
)
def test_site_check_refuses_what_the_cluster_lacks(config, change, needs_gpu, message):
    config["slurm"].update(change)
    with pytest.raises(cluster.SiteError) as err:
        check(config, needs_gpu)
    assert message in str(err.value)


def test_gpu_model_on_untyped_or_no_gpus_is_refused(config):
    """Slurm refuses --gpus=a100:1 where the nodes declare only gpu:N: no node has that type."""
    config["slurm"]["gpu_model"] = "a100"
    untyped = {**NODES, "gpu": cluster.PartitionNodes(has_gpus=True)}
    with pytest.raises(cluster.SiteError) as err:
        check(config, nodes=untyped)
    assert str(err.value) == (
        "config key slurm.gpu_model: the nodes of partition 'gpu' declare their GPUs without a "
        "model (Gres gpu:N), so Slurm refuses --gpus=a100:K there; leave slurm.gpu_model empty"
    )
    config["slurm"]["gpu_model"] = ""
    check(config, nodes=untyped)
    without_gpus = {**NODES, "gpu": cluster.PartitionNodes()}
    with pytest.raises(cluster.SiteError, match="config key slurm.gpu_partition: the nodes of "):
        check(config, nodes=without_gpus)
    # Without GPU experiments neither the GPU partition nor the model matters.
    config["slurm"]["gpu_model"] = "v100"
    check(config, needs_gpu=False, nodes=without_gpus)


def test_alternatives_need_only_exist_somewhere_in_the_cluster(config):
    """a|b may be met by a on one partition's nodes and b on the other's."""
    config["slurm"]["constraint"] = "ib|skylake"
    check(config)
    config["slurm"]["constraint"] = "ib"
    with pytest.raises(cluster.SiteError, match="'ib' is on no node of partition 'gpu'"):
        check(config)
    check(config, needs_gpu=False)


def test_site_check_without_cluster_facts_leaves_it_to_sbatch(config):
    config["slurm"].update(
        gpu_partition="nonexistent", account="x", qos="y", gpu_model="z", constraint="w"
    )
    check(config, partitions=None, associations=None, nodes=None)
    # An account without listed QOS: what it may use is unknown.
    config["slurm"].update(gpu_partition="gpu", account="", gpu_model="", constraint="")
    check(config, associations={"root": []})


def test_site_check_without_gpu_experiments_ignores_gpu_partition(config):
    config["slurm"]["gpu_partition"] = "nonexistent"
    check(config, needs_gpu=False, partitions=["medium"], associations=None)


# A cluster of untyped GPUs (Gres gpu:2) and 48 GB nodes, as sinfo and sacctmgr print it.
SITE_ANSWERS = {
    "--format=%R": ["medium", "gpu"],
    "--format=%R|%G|%f": ["medium|(null)|(null)", "gpu|gpu:2|(null)"],
    "--format=%R|%m|%c|%l|%G": [
        "medium|48000|16|1-00:00:00|(null)",
        "gpu|48000|16|1-00:00:00|gpu:2",
    ],
    "format=account,qos": ["physics|normal"],
    "format=defaultaccount": ["physics"],
}


@pytest.fixture
def site(monkeypatch):
    """The Slurm clients answer as SITE_ANSWERS says, by the format they were asked for."""

    def answer(command):
        (asked,) = [word for word in command if word in SITE_ANSWERS]
        return SITE_ANSWERS[asked]

    monkeypatch.setattr(cluster, "_query", answer)


def test_every_problem_of_a_site_config_is_named_at_once(config, site):
    """A first site config wrong in four places is told all four in one run, not one a run."""
    site_config = yaml.safe_load(
        """
        slurm: {account: myproject, gpu_model: a100, modules: [cuda/12.4, python/3.11]}
        train: {devices: [cpu2, cuda1], strategies: [single]}
        resources: {train: {mem_mb: 32000, runtime: 120}}
        """
    )
    for section, values in site_config.items():
        config[section].update(values)
    config.update(retries=1, cuda_stack=13)
    experiments = grid.expand(config).experiments
    with pytest.raises(cluster.SiteError) as err:
        cluster.check_slurm_site(
            config,
            needs_gpu=True,
            shapes=cluster.job_shapes(experiments, config, 25),
            modules_loaded=True,
        )
    problems = err.value.problems
    assert [problem.split(":")[0] for problem in problems] == [
        "config key slurm.gpu_model",
        "config key slurm.account",
        "config key resources.train.mem_mb",
        "config key resources.train.mem_mb",
        "config key slurm.modules",
    ]
    assert "account 'myproject' is not one of yours; accounts: physics" in problems[1]
    assert "would ask for 64000 MB on attempt 2" in problems[2]
    assert "module 'cuda/12.4' loads CUDA 12, but the config's cuda_stack is 13" in problems[4]
    assert str(err.value).startswith("5 problems in the config for this cluster:\n  - config key")
    assert str(err.value).count("\n  - ") == 5
    # Fixed, it passes; one problem alone is its own message.
    config["slurm"].update(account="", gpu_model="", modules=["python/3.11"])
    config["resources"]["train"]["mem_mb"] = 16000
    cluster.check_slurm_site(config, needs_gpu=True, shapes=[], modules_loaded=True)
    config["slurm"]["modules"] = ["CUDA/12.4.0"]
    with pytest.raises(cluster.SiteError) as err:
        cluster.check_slurm_site(config, needs_gpu=True, shapes=[], modules_loaded=True)
    assert str(err.value) == err.value.problems[0]
    assert str(err.value).endswith("or set cuda_stack: 12")
    # Modules not loaded (no --sdm env-modules) are no problem.
    cluster.check_slurm_site(config, needs_gpu=True, shapes=[], modules_loaded=False)


@pytest.mark.parametrize(
    ("modules", "stack", "refused"),
    [
        (["cuda/13.0", "gcc/12"], 13, []),
        (["cudatoolkit/11.8"], 13, ["cudatoolkit/11.8"]),
        (["cuda-12.6", "cudnn/9"], 12, []),
        (["cuda/13.0"], 12, ["cuda/13.0"]),
        (["nvhpc/24.5", "python/3.11"], 13, []),
    ],
)
def test_a_cuda_module_of_another_major_version_than_the_stack_is_a_problem(
    config, modules, stack, refused
):
    config["slurm"]["modules"] = modules
    config["cuda_stack"] = stack
    problems = cluster.module_problems(config)
    assert [re.search(r"module '([^']+)'", problem)[1] for problem in problems] == refused
    # CUDA 11 has no stack of the project's to switch to.
    assert all("or set cuda_stack: 11" not in problem for problem in problems)


def test_jobs_name_the_default_account_so_the_plugin_need_not_guess(config, site):
    assert cluster.submission_account(config) == "physics"
    config["slurm"]["account"] = "chemistry"
    assert cluster.submission_account(config) == "chemistry"
    assert cluster.default_account([]) is None and cluster.default_account(None) is None


@pytest.mark.parametrize(
    ("constraint", "features"),
    [
        ("", []),
        ("skylake", ["skylake"]),
        ("skylake&ib", ["skylake", "ib"]),
        ("a100|h100", ["a100", "h100"]),
        ("[rack1*2&rack2*4]", ["rack1", "rack2"]),
        ("(a|b)&c,a", ["a", "b", "c"]),
        ("!knl", ["knl"]),
    ],
)
def test_constraint_features_are_the_names_in_the_expression(constraint, features):
    assert cluster.constraint_features(constraint) == features


def test_partition_nodes_are_read_from_sinfo_output():
    lines = [
        "medium|(null)|(null)",
        "gpu|gpu:a100:4(S:0-1)|skylake,ib",
        "gpu|gpu:h100:2(S:0,2),gpu:4,mps:400|skylake",
        "gpu|gpu:8|(null)",
        "debug|gpu:2|(null)",
    ]
    nodes = cluster.parse_partition_nodes(lines)
    assert nodes["medium"] == cluster.PartitionNodes()
    assert nodes["gpu"] == cluster.PartitionNodes(
        has_gpus=True, gpu_types=frozenset({"a100", "h100"}), features=frozenset({"skylake", "ib"})
    )
    assert nodes["debug"] == cluster.PartitionNodes(has_gpus=True)


def test_gpu_shortfall_is_reported_under_slurm(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert "Slurm gave this job 1 GPU(s)" in slurm_gpu_shortfall(parse_device("cuda2"))
    assert slurm_gpu_shortfall(parse_device("cuda1")) is None
    assert slurm_gpu_shortfall(parse_device("cpu4")) is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert slurm_gpu_shortfall(parse_device("cuda2")) is None
    monkeypatch.delenv("SLURM_JOB_ID")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert slurm_gpu_shortfall(parse_device("cuda2")) is None


def test_time_limit_leaves_a_margin():
    assert supervisor.time_limit_seconds(1) == 50.0
    assert supervisor.time_limit_seconds(60) == 3600 - 180


KERNEL = KernelExperiment("matmul", "cpu1", "numpy", "float64", 8)
SETTINGS = KernelSettings(min_run_time=0.01, samples=3)
CONTEXT = JobContext("t")
# ResNet-18 at 32 px has 1x1 feature maps in its last block: batch norm cannot
# train on a batch of one there, a real and deterministic failure.
FAILING = TrainExperiment("resnet18", "cpu1", "fp32", "single", 1)
FAILING_SETTINGS = TrainSettings(seed=0, steps=3, warmup_steps=1, image_size=32)


def test_supervised_success_writes_the_childs_record(tmp_path):
    out = tmp_path / "r.json"
    supervisor.run_supervised(
        KERNEL, SETTINGS, str(out), context=CONTEXT, attempt=1, max_attempts=2, time_limit=300
    )
    assert load_record(out)["status"] == "ok"


def test_failure_before_the_last_attempt_retries_without_a_record(tmp_path):
    out = tmp_path / "r.json"
    with pytest.raises(RetryableFailure):
        supervisor.run_supervised(
            FAILING,
            FAILING_SETTINGS,
            str(out),
            context=CONTEXT,
            attempt=1,
            max_attempts=2,
            time_limit=300,
        )
    assert not out.exists()


def test_failure_on_the_last_attempt_is_recorded(tmp_path):
    out = tmp_path / "r.json"
    supervisor.run_supervised(
        FAILING,
        FAILING_SETTINGS,
        str(out),
        context=CONTEXT,
        attempt=2,
        max_attempts=2,
        time_limit=300,
    )
    record = load_record(out)
    assert record["status"] == "failed"
    assert "Expected more than 1 value per channel" in record["reason"]


def test_time_limit_stops_the_child_and_records_it_on_the_last_attempt(tmp_path):
    out = tmp_path / "r.json"
    slow = replace(SETTINGS, min_run_time=120.0)
    supervisor.run_supervised(
        KERNEL, slow, str(out), context=CONTEXT, attempt=1, max_attempts=1, time_limit=5
    )
    record = json.loads(out.read_text())
    assert record["status"] == "failed"
    assert "exceeded the job's time limit: stopped after 5 s" in record["reason"]


def test_launcher_prefix_starts_the_child(tmp_path):
    """The child runs under the launcher's command line (srun on a cluster; env here)."""
    out = tmp_path / "r.json"
    supervisor.run_supervised(
        KERNEL,
        SETTINGS,
        str(out),
        context=CONTEXT,
        attempt=1,
        max_attempts=1,
        time_limit=300,
        launcher=["env", "SLURM_JOB_ID=77"],
    )
    record = load_record(out)
    assert record["status"] == "ok"
    assert record["provenance"]["slurm"]["job_id"] == "77"


def test_failing_launcher_is_recorded_on_the_last_attempt(tmp_path):
    out = tmp_path / "r.json"
    supervisor.run_supervised(
        KERNEL,
        SETTINGS,
        str(out),
        context=CONTEXT,
        attempt=1,
        max_attempts=1,
        time_limit=300,
        launcher=["false"],
    )
    record = load_record(out)
    assert record["status"] == "failed"
    assert record["reason"] == (
        "the tasks started by `false` exited with code 1 without a record or an error of its "
        "own; a passing fault: the next run measures it again"
    )
    assert record["transient"] is True


# Runs the command it is given as two tasks of one job step, as srun would
# (minus the allocation): every task gets its rank; the exit status is the worst.
TWO_TASKS = """\
import os, subprocess, sys
env = {"SLURM_JOB_ID": "5", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "2",
       "SLURM_JOB_NODELIST": "localhost"}
tasks = [
    subprocess.Popen(sys.argv[1:], env={**os.environ, **env, "SLURM_PROCID": str(rank),
                                        "SLURM_LOCALID": str(rank)})
    for rank in range(2)
]
sys.exit(max(task.wait() for task in tasks))
"""


@pytest.fixture
def two_tasks(tmp_path):
    script = tmp_path / "two_tasks.py"
    script.write_text(TWO_TASKS)
    return [sys.executable, str(script)]


def test_a_failed_task_reports_its_own_error(tmp_path, two_tasks):
    """Both tasks fail; rank 1's note, not a generic exit status, goes into the record."""
    out = tmp_path / "results" / "r.json"
    supervisor.run_supervised(
        FAILING,
        FAILING_SETTINGS,
        str(out),
        context=CONTEXT,
        attempt=2,
        max_attempts=2,
        time_limit=300,
        launcher=two_tasks,
    )
    record = load_record(out)
    assert record["status"] == "failed"
    assert record["reason"].startswith("rank 1: ValueError: Expected more than 1 value per channel")
    # The notes' folder is gone: only the record is left next to it.
    assert [path.name for path in out.parent.iterdir()] == ["r.json"]


def test_a_failed_task_before_the_last_attempt_retries(tmp_path, two_tasks):
    out = tmp_path / "r.json"
    with pytest.raises(RetryableFailure, match="rank 1: ValueError"):
        supervisor.run_supervised(
            FAILING,
            FAILING_SETTINGS,
            str(out),
            context=CONTEXT,
            attempt=1,
            max_attempts=2,
            time_limit=300,
            launcher=two_tasks,
        )
    assert not out.exists()


@pytest.mark.parametrize(
    ("device", "strategy", "layout"),
    [
        ("cpu4", "single", None),
        ("cuda4", "dp", None),
        ("cuda2", "pipeline", None),
        (
            "cpu4",
            "ddp",
            cluster.TaskLayout(nodes=1, tasks_per_node=4, cpus_per_task=1, gpus_per_node=0),
        ),
        (
            "cuda4",
            "fsdp",
            cluster.TaskLayout(nodes=1, tasks_per_node=4, cpus_per_task=8, gpus_per_node=4),
        ),
        (
            "2x4cuda",
            "ddp",
            cluster.TaskLayout(nodes=2, tasks_per_node=4, cpus_per_task=8, gpus_per_node=4),
        ),
        (
            "3x1cuda",
            "ddp",
            cluster.TaskLayout(nodes=3, tasks_per_node=1, cpus_per_task=8, gpus_per_node=1),
        ),
    ],
)
def test_multi_process_experiments_are_one_task_per_process(config, device, strategy, layout):
    config["slurm"]["cpus_per_gpu"] = 8
    assert cluster.task_layout(parse_device(device), strategy, config) == layout


def test_task_jobs_ask_for_nodes_tasks_and_gpus_per_node(config):
    config["slurm"]["gpu_model"] = "a100"
    config["slurm"]["cpus_per_gpu"] = 8
    resources = cluster.job_resources(parse_device("2x4cuda"), "ddp", config, slurm_tasks=True)
    assert resources == {
        "slurm_partition": "gpu",
        "mpi": "srun",
        "nodes": 2,
        "tasks_per_node": 4,
        "cpus_per_task": 8,
        "slurm_extra": "--gpus-per-node=a100:4",
    }
    # One task per node: the plugin takes the total instead of tasks_per_node=1.
    resources = cluster.job_resources(parse_device("2x1cuda"), "ddp", config, slurm_tasks=True)
    assert resources["tasks"] == 2 and "tasks_per_node" not in resources
    cpu = cluster.job_resources(parse_device("cpu2"), "ddp", config, slurm_tasks=True)
    assert cpu == {
        "slurm_partition": "medium",
        "mpi": "srun",
        "nodes": 1,
        "tasks_per_node": 2,
        "cpus_per_task": 1,
    }
    assert set(resources) | set(cpu) <= set(cluster.JOB_RESOURCE_KEYS)


def test_single_process_jobs_and_local_runs_ask_for_cores_and_gpus(config):
    config["slurm"]["cpus_per_gpu"] = 8
    assert cluster.job_resources(parse_device("cuda2"), "ddp", config, slurm_tasks=False) == {
        "slurm_partition": "gpu",
        "cpus_per_task": 16,
        "gpu": 2,
    }
    config["slurm"]["gpu_model"] = "h100"
    assert cluster.job_resources(parse_device("cuda1"), "single", config, slurm_tasks=True) == {
        "slurm_partition": "gpu",
        "cpus_per_task": 8,
        "gpu": 1,
        "gpu_model": "h100",
    }
    assert cluster.job_resources(parse_device("cpu4"), "single", config, slurm_tasks=True) == {
        "slurm_partition": "medium",
        "cpus_per_task": 4,
        "gpu": 0,
    }


def test_task_jobs_are_started_with_srun_and_explicit_counts(config):
    config["slurm"]["cpus_per_gpu"] = 8
    assert cluster.task_launcher(parse_device("2x4cuda"), "ddp", config, slurm_tasks=True) == [
        "srun",
        "--nodes=2",
        "--ntasks=8",
        "--ntasks-per-node=4",
        "--cpus-per-task=8",
        "--kill-on-bad-exit=1",
    ]
    assert cluster.task_launcher(parse_device("2x4cuda"), "ddp", config, slurm_tasks=False) is None
    assert cluster.task_launcher(parse_device("cuda1"), "single", config, slurm_tasks=True) is None


def test_allocation_is_read_from_scontrol_output():
    line = (
        "JobId=211 JobName=wrap NumNodes=1 NumCPUs=1 NumTasks=1 "
        "TRES=cpu=1,mem=700M,node=1,billing=1,gres/gpu=1 MinMemoryNode=700M"
    )
    assert provenance.parse_tres(line) == {
        "cpu": "1",
        "mem": "700M",
        "node": "1",
        "billing": "1",
        "gres/gpu": "1",
    }
    assert provenance.parse_tres("JobId=3 JobState=PENDING") is None


def test_exclusive_jobs_ask_for_whole_nodes(config):
    config["slurm"]["exclusive"] = True
    single = cluster.job_resources(parse_device("cpu4"), "single", config, slurm_tasks=True)
    assert single["slurm_extra"] == "--exclusive"
    config["slurm"]["cpus_per_gpu"] = 8
    tasks = cluster.job_resources(parse_device("2x4cuda"), "ddp", config, slurm_tasks=True)
    assert tasks["slurm_extra"] == "--gpus-per-node=4 --exclusive"
    config["slurm"]["exclusive"] = False
    assert "slurm_extra" not in cluster.job_resources(
        parse_device("cpu4"), "single", config, slurm_tasks=True
    )


def test_whether_the_node_was_shared_is_read_from_scontrol_output():
    assert provenance.parse_exclusive("JobId=5 OverSubscribe=NO Contiguous=0") is True
    assert provenance.parse_exclusive("JobId=5 OverSubscribe=OK Contiguous=0") is False
    assert provenance.parse_exclusive("JobId=5 JobState=PENDING") is None


@pytest.mark.parametrize(
    ("limit", "minutes"),
    [
        ("1-00:00:00", 1440),
        ("4:00:00", 240),
        ("30:00", 30),
        ("45", 45),
        ("2-12", 3600),
        ("1-02:30", 1590),
        ("infinite", None),
    ],
)
def test_slurm_time_limits_in_minutes(limit, minutes):
    assert cluster.slurm_minutes(limit) == minutes


def test_partition_limits_are_the_biggest_node_of_each_partition():
    lines = [
        "gpu|512000|64|2-00:00:00|gpu:a100:4(S:0-1)",
        "gpu|256000+|32|2-00:00:00|gpu:a100:8",
        "medium|192000|48|4:00:00|(null)",
    ]
    assert cluster.parse_partition_limits(lines) == {
        "gpu": cluster.PartitionLimits(512000, 64, 8, 2880),
        "medium": cluster.PartitionLimits(192000, 48, 0, 240),
    }


def test_job_shapes_are_kernel_batches_and_training_jobs(config):
    config["train"].update(devices=["cpu2", "cuda4"], strategies=["single", "ddp"])
    config["slurm"]["cpus_per_gpu"] = 8
    experiments = grid.expand(config).experiments
    shapes = {shape.what: shape for shape in cluster.job_shapes(experiments, config, 25)}
    assert shapes["training jobs on cuda4 (ddp)"] == cluster.JobShape(
        "training jobs on cuda4 (ddp)", "train", "gpu", 32, 4, 1
    )
    assert shapes["training jobs on cpu2 (single)"].cpus_per_node == 2
    batched = {}
    for exp in experiments:
        if exp.family != "train":
            batched[exp.device] = batched.get(exp.device, 0) + 1
    batches = [shape for shape in shapes.values() if shape.family == "kernels"]
    assert sorted((shape.partition, shape.batch) for shape in batches) == sorted(
        ("medium", min(25, count)) for count in batched.values()
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"resources": {"kernels": {"mem_mb": 3000, "runtime": 1}}},
            "config key resources.kernels.mem_mb: kernel batches on cpu1 (25 experiments "
            "each) would ask for 6000 MB on attempt 2",
        ),
        (
            {"resources": {"kernels": {"mem_mb": 100, "runtime": 5}}},
            "config key resources.kernels.runtime: kernel batches on cpu1 (25 experiments "
            "each) would ask for 250 min on attempt 2 (runtime x attempt x experiments per "
            "batch), more than the time limit of partition 'medium' (240 min)",
        ),
    ],
)
def test_jobs_beyond_every_node_or_the_time_limit_are_refused(config, change, message):
    config["retries"] = 1
    config["resources"].update(change["resources"])
    shape = cluster.JobShape(
        "kernel batches on cpu1 (25 experiments each)", "kernels", "medium", 1, 0, 25
    )
    limits = {"medium": cluster.PartitionLimits(4000, 8, 0, 240)}
    (problem,) = cluster.limit_problems(config, [shape], limits)
    assert message in problem
    config["resources"]["kernels"] = {"mem_mb": 2000, "runtime": 4}
    assert cluster.limit_problems(config, [shape], limits) == []


def test_cores_and_gpus_beyond_every_node_are_refused(config):
    limits = {"gpu": cluster.PartitionLimits(10**6, 16, 4, None)}
    config["resources"]["train"] = {"mem_mb": 1000, "runtime": 10**6}
    wide = cluster.JobShape("training jobs on cuda4 (single)", "train", "gpu", 32, 4, 1)
    (problem,) = cluster.limit_problems(config, [wide], limits)
    assert re.search("need 32 cores on one node.*at most 16", problem)
    many = cluster.JobShape("training jobs on cuda8 (single)", "train", "gpu", 16, 8, 1)
    (problem,) = cluster.limit_problems(config, [many], limits)
    assert re.search("need 8 GPUs on one node.*at most 4", problem)


def test_srun_reports_name_the_task_that_ended():
    assert supervisor.task_end("srun: error: node2: task 2: Killed") == supervisor.TaskEnd(
        "node2", 2, "Killed"
    )
    assert supervisor.task_end(
        "srun: error: node1: tasks 0-1: Exited with exit code 1\n"
    ) == supervisor.TaskEnd("node1", 0, "Exited with exit code 1")
    assert supervisor.task_end("srun: launch/slurm: _step_signal: Terminating StepId=546.0") is None
    assert supervisor.task_end("slurmstepd-node1: error: *** STEP 546.0 CANCELLED ***") is None


PEER_LOST = {"rank": 1, "status": "failed", "reason": "RuntimeError: Connection reset by peer"}


def test_a_task_killed_without_a_word_is_the_cause_not_its_peers_lost_connection():
    """What srun printed when task 2 of a two-node gloo step was killed (a real run)."""
    ends = [
        supervisor.TaskEnd("node2", 2, "Killed"),
        supervisor.TaskEnd("node2", 3, "Terminated"),
        supervisor.TaskEnd("node1", 0, "Terminated"),
    ]
    failure = supervisor.first_failure([PEER_LOST], ends)
    assert failure.reason.startswith(
        "rank 2 on node2: Killed (as srun reports it; the task wrote no error of its own)"
    )
    # Killed is any SIGKILL; Slurm's memory cgroup makes srun say "Out Of Memory" instead.
    assert (failure.status, failure.transient) == ("failed", True)


def test_a_task_slurm_killed_for_memory_is_oom_and_a_crash_stays():
    oom = supervisor.first_failure([], [supervisor.TaskEnd("node1", 0, "Out Of Memory")])
    assert (oom.status, oom.transient) == ("oom", False)
    assert oom.reason.startswith("rank 0 on node1: Out Of Memory (as srun reports it")
    crash = supervisor.first_failure([], [supervisor.TaskEnd("node1", 1, "Segmentation fault")])
    assert (crash.status, crash.transient) == ("failed", False)


def test_a_task_that_failed_first_is_named_in_its_own_words():
    ends = [
        supervisor.TaskEnd("node1", 1, "Exited with exit code 1"),
        supervisor.TaskEnd("node1", 0, "Terminated"),
    ]
    failure = supervisor.first_failure([PEER_LOST], ends)
    assert (failure.reason, failure.status) == (
        "rank 1: RuntimeError: Connection reset by peer",
        "failed",
    )
    # Without srun's reports (another launcher): the lowest rank's note.
    failure = supervisor.first_failure([PEER_LOST, {**PEER_LOST, "rank": 3}], [])
    assert (failure.reason, failure.status) == (
        "rank 1: RuntimeError: Connection reset by peer",
        "failed",
    )
    assert supervisor.first_failure([], []) is None

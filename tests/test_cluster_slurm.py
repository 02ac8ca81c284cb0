"""The real local Slurm: the site check before submission agrees with what sbatch
accepts, and sacct reads back tiny jobs sent to both partitions (query, rule and command).

The scheduler is the one tools/slurm-local/start.sh starts. Without it these
tests skip, except in CI (CI=true), where a missing Slurm is a failure.
"""

from __future__ import annotations

import math
import subprocess
import time
from datetime import datetime, timedelta

import pytest
import yaml

from accelbench import cli, grid
from accelbench.slurm import resources as cluster
from accelbench.studies.queue_wait import sacct

from conftest import REPO_ROOT, snakemake

pytestmark = pytest.mark.slurm

# No slurm-<id>.out files in the working directory.
JOB = ["-t", "1", "--mem=100M", "--job-name=accelbench-sacct-test", "--output=/dev/null"]
JOB += ["--wrap", "true"]
SUBMISSIONS = {
    "medium": ["-p", "medium", *JOB],
    "array": ["-p", "medium", "--array=1-2", *JOB],
    "gpu": ["-p", "gpu", "--gpus=1", *JOB],
}


@pytest.fixture
def config():
    return yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())


def sbatch_test_only(config, partition, gpus=0):
    """sbatch --test-only of a tiny job as the workflow would ask for it: (exit status, message).

    Nothing is queued; sbatch says where the job would start, or why it cannot.
    """
    slurm = config["slurm"]
    options = ["-p", partition, "-t", "1", "--mem=100M", "--output=/dev/null"]
    if gpus:
        options.append(
            f"--gpus={slurm['gpu_model']}:{gpus}" if slurm["gpu_model"] else f"--gpus={gpus}"
        )
    if slurm["account"]:
        options += ["-A", slurm["account"]]
    if slurm["qos"]:
        options.append(f"--qos={slurm['qos']}")
    if slurm["constraint"]:
        options += ["-C", slurm["constraint"]]
    done = subprocess.run(
        ["sbatch", "--test-only", *options, "--wrap", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stderr.strip()


def test_site_check_reads_the_local_cluster(slurm):
    """Untyped GPUs (Gres gpu:2), no node features, in every partition (the two namespace
    nodes' too); root's accounts may use QOS normal."""
    nodes = cluster.slurm_partition_nodes()
    assert nodes == {
        "medium": cluster.PartitionNodes(has_gpus=True),
        "gpu": cluster.PartitionNodes(has_gpus=True),
        "multinode": cluster.PartitionNodes(has_gpus=True),
    }
    assert cluster.slurm_associations() == {"accelbench": ["normal"], "root": ["normal"]}


def test_site_check_accepts_what_the_cluster_has_and_sbatch_agrees(slurm, config):
    config["slurm"].update(account="accelbench", qos="normal", gpu_model="", constraint="")
    shapes = cluster.job_shapes(grid.expand(config).experiments, config, 25)
    cluster.check_slurm_site(config, needs_gpu=True, shapes=shapes, modules_loaded=False)
    for partition, gpus in (("medium", 0), ("gpu", 1)):
        status, message = sbatch_test_only(config, partition, gpus)
        assert status == 0, message
        assert f"in partition {partition}" in message


@pytest.mark.parametrize(
    ("change", "message", "sbatch_error"),
    [
        (
            {"gpu_model": "a100"},
            "config key slurm.gpu_model: the nodes of partition 'gpu' declare their GPUs without a "
            "model (Gres gpu:N), so Slurm refuses --gpus=a100:K there; leave slurm.gpu_model empty",
            "Requested node configuration is not available",
        ),
        (
            {"constraint": "skylake&ib"},
            "2 problems in the config for this cluster:\n"
            "  - config key slurm.constraint: feature 'skylake' is on no node of this cluster; "
            "features: none\n"
            "  - config key slurm.constraint: feature 'ib' is on no node of this cluster; "
            "features: none",
            "Invalid feature specification",
        ),
    ],
)
def test_site_check_refuses_what_sbatch_refuses(slurm, config, change, message, sbatch_error):
    config["slurm"].update(change)
    with pytest.raises(cluster.SiteError) as err:
        cluster.check_slurm_site(config, needs_gpu=True, shapes=[], modules_loaded=False)
    assert str(err.value) == message
    status, said = sbatch_test_only(config, "gpu", gpus=1)
    assert status != 0 and sbatch_error in said


@pytest.mark.parametrize(
    ("account", "message"),
    [
        ("", "config key slurm.qos: QOS 'high' is not one your accounts may use; QOS: normal"),
        (
            "accelbench",
            "config key slurm.qos: QOS 'high' is not one account 'accelbench' may use; QOS: normal",
        ),
    ],
)
def test_site_check_refuses_a_qos_the_user_may_not_use(slurm, config, account, message):
    config["slurm"].update(account=account, qos="high")
    with pytest.raises(cluster.SiteError) as err:
        cluster.check_slurm_site(config, needs_gpu=False, shapes=[], modules_loaded=False)
    assert str(err.value) == message


def test_a_job_bigger_than_every_node_is_refused_as_sbatch_would(slurm, config):
    limits = cluster.slurm_partition_limits()
    node_mb = limits["medium"].memory_mb
    assert limits["medium"].time_minutes == 24 * 60
    config["resources"]["kernels"]["mem_mb"] = node_mb  # fits; the retry's double does not
    shapes = cluster.job_shapes(grid.expand(config).experiments, config, 25)
    with pytest.raises(cluster.SiteError) as err:
        cluster.check_slurm_site(config, needs_gpu=False, shapes=shapes, modules_loaded=False)
    # One problem per device's batches, all named at once.
    assert len(err.value.problems) == len(config["kernels"]["devices"])
    for problem in err.value.problems:
        assert problem.startswith("config key resources.kernels.mem_mb: kernel batches on")
        assert problem.endswith(
            f"would ask for {2 * node_mb} MB on attempt 2 (mem_mb x attempt), more than any node "
            f"of partition 'medium' has ({node_mb} MB); lower it or retries"
        )
    done = subprocess.run(
        ["sbatch", "--test-only", "-p", "medium", f"--mem={2 * node_mb}", "--wrap", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "Requested node configuration is not available" in done.stderr


def held_job(*options):
    """Submit a held tiny job, read its Account and QOS back, cancel it; or sbatch's error."""
    done = subprocess.run(
        ["sbatch", "--parsable", "--hold", "--job-name=accelbench-site-check-test", *options]
        + ["-p", "medium", "-t", "1", "--mem=100M", "--output=/dev/null", "--wrap", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        return done.stderr.strip()
    job_id = done.stdout.split(";")[0].strip()
    try:
        shown = subprocess.run(
            ["scontrol", "--oneliner", "show", "job", job_id],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    finally:
        subprocess.run(["scancel", job_id], check=False)
    fields = dict(item.split("=", 1) for item in shown.split() if "=" in item)
    return {"account": fields["Account"], "qos": fields["QOS"]}


def test_sbatch_honours_the_qos_the_check_accepts_and_not_one_it_refuses(slurm):
    """--test-only does not look at the QOS: a held job shows what Slurm made of it.

    Without enforcement (the local cluster) sbatch takes a job with a QOS the
    user may not use and drops the QOS; with it, sbatch refuses the job.
    """
    assert held_job("-A", "accelbench", "--qos=normal") == {
        "account": "accelbench",
        "qos": "normal",
    }
    refused = held_job("--qos=high")
    if isinstance(refused, str):
        assert "Invalid qos specification" in refused
    else:
        assert refused["qos"] != "high"


@pytest.fixture(scope="module")
def jobs(slurm):
    """Submit the tiny jobs together, wait for them; (job ids by name, window start)."""
    since = (datetime.now() - timedelta(minutes=1)).isoformat(timespec="seconds")
    running = {
        name: subprocess.Popen(
            ["sbatch", "--parsable", "--wait", *args], stdout=subprocess.PIPE, text=True
        )
        for name, args in SUBMISSIONS.items()
    }
    ids = {}
    try:
        for name, process in running.items():
            out, _ = process.communicate(timeout=300)
            assert process.returncode == 0, (name, out)
            ids[name] = out.split(";")[0].strip()
        yield ids, since
    finally:
        for process in running.values():
            if process.poll() is None:
                process.kill()
        if ids:
            subprocess.run(["scancel", *ids.values()], check=False)


def query_until_recorded(ids: dict[str, str], since: str) -> tuple[str, sacct.ParsedDump]:
    """Accounting reaches slurmdbd shortly after a job ends: ask again until all are there."""
    wanted = {ids["medium"], ids["gpu"], f"{ids['array']}_1", f"{ids['array']}_2"}
    for _ in range(30):
        text = sacct.query(["medium", "gpu"], since, "now")
        parsed = sacct.parse(text)
        done = parsed.jobs[parsed.jobs["state"] == "COMPLETED"]
        if wanted <= set(done["job_id"]):
            return text, parsed
        time.sleep(1)
    pytest.fail(f"sacct did not report {sorted(wanted)} as completed: {text}")


def test_query_reads_back_the_jobs_of_both_partitions(jobs):
    ids, since = jobs
    text, parsed = query_until_recorded(ids, since)
    assert text.splitlines()[0] == "|".join(sacct.SACCT_FIELDS)
    assert not parsed.problems
    rows = parsed.jobs.set_index("job_id")
    assert rows.loc[ids["medium"], "partition"] == "medium"
    assert rows.loc[ids["gpu"], "partition"] == "gpu"
    assert rows.loc[ids["gpu"], "req_gpus"] == 1
    for job_id in (ids["medium"], ids["gpu"], f"{ids['array']}_1", f"{ids['array']}_2"):
        job = rows.loc[job_id]
        assert job["timelimit_h"] == pytest.approx(1 / 60)
        assert job["cpu_hours"] == pytest.approx(job["req_cpus"] / 60)
        assert job["req_mem_gb"] == pytest.approx(100 / 1024)  # --mem=100M
        assert math.isfinite(job["wait_s"]) and job["wait_s"] >= 0
    assert set(rows.loc[[f"{ids['array']}_1", f"{ids['array']}_2"], "partition"]) == {"medium"}


def test_query_of_a_missing_partition_lists_the_real_ones(slurm):
    with pytest.raises(sacct.SacctError) as err:
        sacct.query(["medium", "no-such-partition"], "now-1hours", "now")
    message = str(err.value)
    assert message.startswith("partition(s) no-such-partition do not exist on this cluster")
    assert "medium" in message.split("partitions: ")[1]
    assert "gpu" in message.split("partitions: ")[1]


def test_rule_queries_and_analyses(jobs, workflow_dir):
    ids, since = jobs
    query_until_recorded(ids, since)
    (workflow_dir / "config" / "sacct.yaml").write_text(
        f"cluster_analysis:\n  queue_wait: true\n  partitions: [medium, gpu]\n  since: '{since}'\n"
    )
    done = snakemake(
        workflow_dir,
        "results/tables/queue_wait_cpu_hours.md",
        "--cores",
        "1",
        "--configfile",
        "config/sacct.yaml",
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    dump = (workflow_dir / "results" / "cluster" / "sacct.txt").read_text()
    assert f"\n{ids['gpu']}|gpu|" in dump and f"\n{ids['array']}_2|medium|" in dump
    table = (workflow_dir / "results" / "tables" / "queue_wait_cpu_hours.md").read_text()
    assert "| Requested CPU-hours | medium | gpu |" in table
    small = next(line for line in table.splitlines() if line.startswith("| < 4 |"))
    assert "–; n = 0" not in small  # both partitions have started jobs under 4 CPU-hours


def test_command_writes_the_dump(jobs, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)  # the command reads config/config.yaml
    ids, since = jobs
    query_until_recorded(ids, since)
    output = tmp_path / "dump.txt"
    argv = ["sacct", "--partition", "gpu", "--since", since, "--output", str(output)]
    assert cli.main(argv) == 0
    parsed = sacct.read(output)
    assert ids["gpu"] in set(parsed.jobs["job_id"])
    assert set(parsed.jobs["partition"]) == {"gpu"}
    assert f"{output}: " in capsys.readouterr().err
    assert cli.main(["sacct", "--partition", "gpuu", "--output", str(output)]) == 2
    assert "partition(s) gpuu do not exist on this cluster" in capsys.readouterr().err

"""sacct against the real local Slurm: tiny jobs go to both partitions, then the query,
the rule and the command read them back.

The scheduler is the one tools/slurm-local/start.sh starts. Without it these
tests skip, except in CI (CI=true), where a missing Slurm is a failure.
"""

from __future__ import annotations

import math
import subprocess
import time
from datetime import datetime, timedelta

import pytest

from accelbench import cli
from accelbench.analysis import sacct

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

"""sacct dumps: every parsing case, from shipped fixtures, and the query's command line.

tests/data/sacct_parsing_cases.txt holds one line per case (old memory
suffixes, time-limit forms, jobs not started, arrays, heterogeneous jobs,
steps, several partitions, "CANCELLED by N") and nine lines that cannot be
read. tests/data/sacct_local_slurm.txt is real output of the local Slurm 22.05.
tests/data/sacct_several_partitions_and_gpus.txt: jobs submitted to several
partitions (its first three jobs are real Slurm 22.05 output of `sbatch -p
gpu,medium` and `-p medium,gpu`) and the forms of a GPU request in ReqTRES.
tests/data/sacct_hand_made_old_slurm.txt: a dump written by hand with fewer
fields, no node counts but ReqTRES, from a Slurm before 21.08 (memory per node
and per CPU).
"""

from __future__ import annotations

import math
import subprocess

import pytest

from accelbench.slurm import resources as cluster
from accelbench.studies.queue_wait import sacct

from conftest import REPO_ROOT

DATA = REPO_ROOT / "tests" / "data"
CASES = DATA / "sacct_parsing_cases.txt"
LOCAL = DATA / "sacct_local_slurm.txt"
SEVERAL = DATA / "sacct_several_partitions_and_gpus.txt"
HAND_MADE = DATA / "sacct_hand_made_old_slurm.txt"


@pytest.fixture(scope="module")
def cases() -> sacct.ParsedDump:
    return sacct.read(CASES)


def job(parsed: sacct.ParsedDump, job_id: str, partition: str | None = None) -> dict:
    rows = parsed.jobs[parsed.jobs["job_id"] == job_id]
    if partition is not None:
        rows = rows[rows["partition"] == partition]
    assert len(rows) == 1, (job_id, rows)
    return rows.iloc[0].to_dict()


def test_counts_jobs_steps_and_unreadable_lines(cases):
    assert cases.lines_read == 28
    assert len(cases.jobs) == 17  # 16 job lines, one of them in two partitions
    assert cases.steps_skipped == 3  # 1006_4.batch, 1008+0.0, 1009.extern
    assert [number for number, _, _ in cases.problems] == list(range(21, 30))
    assert cases.summary() == "28 lines: 17 job rows, 3 job steps skipped, 9 unreadable"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (21, "3 fields, expected 15"),
        (22, "memory 'lots' is not a Slurm size"),
        (23, "time 'yesterday' is not ISO 8601"),
        (24, "job id 'abc' is malformed"),
        (25, "partition is empty"),  # a job, not a step, in no partition: counted nowhere
        (26, "is before submit/eligible time"),
        (27, "duration '1:2:3:4' is not a Slurm time"),
        (28, "state 'cancelled' is not a Slurm job state"),
        (29, "ReqCPUS is empty"),
    ],
)
def test_unreadable_line_is_reported_with_its_reason(cases, line, reason):
    problems = {number: (text, why) for number, text, why in cases.problems}
    text, why = problems[line]
    assert reason in why
    assert text == CASES.read_text().splitlines()[line - 1]
    assert list(cases.problems_frame().columns) == ["line", "text", "problem"]


@pytest.mark.parametrize(
    ("job_id", "memory_gb"),
    [
        ("1001", 2 * 4000 / 1024),  # 4000Mn on 2 nodes (old per-node suffix)
        ("1002", 4 * 2.0),  # 2Gc with 4 CPUs (old per-CPU suffix)
        ("1003", 500 / 1024),  # 500M
        ("1012", 8.0),  # 8G
        ("1014", 3.0),  # ReqMem empty: taken from ReqTRES mem=3G
    ],
)
def test_memory_units_and_suffixes(cases, job_id, memory_gb):
    assert job(cases, job_id)["req_mem_gb"] == pytest.approx(memory_gb)


def test_whole_node_memory_has_no_size(cases):
    row = job(cases, "1015")  # ReqMem 0: the whole node, amount unknown
    assert math.isnan(row["req_mem_gb"]) and math.isnan(row["gb_hours"])
    assert row["cpu_hours"] == 16.0


@pytest.mark.parametrize(
    ("job_id", "hours"),
    [
        ("1001", 60.0),  # 2-12:00:00
        ("1002", 0.5),  # 30:00 is MM:SS
        ("1003", 0.75),  # 45 is minutes
        ("1006_4", 30.0),  # 1-06 is D-HH
        ("1012", 4.0),  # 04:00:00
    ],
)
def test_time_limit_forms(cases, job_id, hours):
    row = job(cases, job_id)
    assert row["timelimit_h"] == pytest.approx(hours)
    assert row["cpu_hours"] == pytest.approx(hours * row["req_cpus"])
    assert row["gb_hours"] == pytest.approx(hours * row["req_mem_gb"])


@pytest.mark.parametrize("job_id", ["1004", "1005"])  # UNLIMITED, Partition_Limit
def test_no_finite_time_limit_has_no_size(cases, job_id):
    row = job(cases, job_id)
    assert math.isnan(row["timelimit_h"]) and math.isnan(row["cpu_hours"])


def test_jobs_not_started(cases):
    pending = job(cases, "1004")  # Start=Unknown
    assert pending["state"] == "PENDING" and math.isnan(pending["wait_s"])
    cancelled = job(cases, "1005")  # Start=None, cancelled by uid 1000 while pending
    assert cancelled["state"] == "CANCELLED" and cancelled["cancelled_by"] == 1000
    assert math.isnan(cancelled["wait_s"])


def test_cancelled_by_root_after_start(cases):
    row = job(cases, "1011")  # "CANCELLED by 0"
    assert (row["state"], row["cancelled_by"], row["wait_s"]) == ("CANCELLED", 0, 600.0)


def test_waits_of_started_jobs(cases):
    assert job(cases, "1001")["wait_s"] == 300.0
    assert job(cases, "1002")["wait_s"] == 7200.0
    assert job(cases, "1012")["wait_s"] == 1800.0  # running: started, not ended
    # Held back by a dependency until 10:00: the wait counts from Eligible, not Submit.
    assert job(cases, "1013")["wait_s"] == 900.0


def test_array_jobs(cases):
    task = job(cases, "1006_4")
    assert (task["array_tasks"], task["wait_s"]) == (1, 1200.0)
    assert job(cases, "1006_[5-9]")["array_tasks"] == 5  # pending tasks, one line
    assert job(cases, "1007_[1-3,7%2]")["array_tasks"] == 4  # list with a throttle


def test_heterogeneous_job_components(cases):
    first, second = job(cases, "1008+0"), job(cases, "1008+1")
    assert (first["partition"], second["partition"]) == ("medium", "gpu")
    assert first["wait_s"] == second["wait_s"] == 60.0
    assert (first["req_cpus"], second["req_cpus"], second["req_gpus"]) == (1, 2, 1)


def test_job_waiting_in_several_partitions_counts_in_each(cases):
    for partition in ("medium", "gpu"):
        row = job(cases, "1010", partition)
        assert row["state"] == "PENDING" and math.isnan(row["wait_s"])
        assert row["partitions_listed"] == 2
    assert job(cases, "1001")["partitions_listed"] == 1


def test_gpus_from_requested_tres(cases):
    assert job(cases, "1014")["req_gpus"] == 2
    assert job(cases, "1001")["req_gpus"] == 0


@pytest.fixture(scope="module")
def several() -> sacct.ParsedDump:
    return sacct.read(SEVERAL)


def test_started_job_of_several_partitions_is_listed_where_it_ran(several):
    # Real Slurm 22.05: submitted with -p gpu,medium (12) and -p medium,gpu (14), each
    # started, and sacct names the one partition it ran in; 13 was cancelled while
    # pending and keeps the list.
    assert (job(several, "12")["partition"], job(several, "12")["partitions_listed"]) == ("gpu", 1)
    assert (job(several, "14")["partition"], job(several, "14")["wait_s"]) == ("medium", 6.0)
    for partition in ("medium", "gpu"):
        row = job(several, "13", partition)
        assert row["partitions_listed"] == 2 and math.isnan(row["wait_s"])


def test_started_job_listing_several_partitions_keeps_its_wait_in_each(several):
    # Started, yet sacct lists gpu,medium: it does not say where the job ran, so the
    # job counts in each listed partition with its wait, flagged by partitions_listed.
    assert not several.problems
    rows = several.jobs[several.jobs["job_id"] == "4001"]
    assert list(rows["partition"]) == ["gpu", "medium"]
    assert list(rows["wait_s"]) == [1200.0, 1200.0]
    assert list(rows["partitions_listed"]) == [2, 2]
    assert (job(several, "4001", "gpu")["cpu_hours"], job(several, "4001", "gpu")["gb_hours"]) == (
        4.0,
        8.0,
    )


@pytest.mark.parametrize(
    ("job_id", "gpus"),
    [
        ("4002", 2),  # gres/gpu:a100=2 only (the type is tracked, the total is not)
        ("4003", 4),  # gres/gpu:a100=4 only
        ("4004", 4),  # gres/gpu=4,gres/gpu:a100=4: one request of 4, not 8
        ("4005", 4),  # the same, the other way round
        ("4006", 3),  # gres/gpu:a100=2,gres/gpu:v100=1: two types add up
        ("4007", 3),  # gres/gpu=3 with both types: the total
        ("4008", 1),  # gres/gpumem is memory, not GPUs
        ("12", 0),
    ],
)
def test_typed_gpu_requests(several, job_id, gpus):
    assert all(several.jobs.loc[several.jobs["job_id"] == job_id, "req_gpus"] == gpus)


@pytest.mark.parametrize(
    ("tres", "gpus"),
    [
        ({}, 0),
        ({"gres/gpu": "2"}, 2),
        ({"gres/gpu:a100": "4"}, 4),
        ({"gres/gpu": "4", "gres/gpu:a100": "4"}, 4),
        ({"gres/gpu:a100": "1", "gres/gpu:1g.5gb": "2"}, 3),  # MIG slices are a type
        ({"gres/gpumem": "40G", "gres/gpuutil": "100"}, 0),
    ],
)
def test_requested_gpus(tres, gpus):
    assert sacct.requested_gpus(tres) == gpus


@pytest.fixture(scope="module")
def hand_made() -> sacct.ParsedDump:
    return sacct.read(HAND_MADE)


@pytest.mark.parametrize(
    ("job_id", "memory_gb", "wait_s"),
    [
        ("5001", 8.0, 600.0),  # 8Gn, node=1 in ReqTRES
        ("5002", 16.0, 1800.0),  # 8Gn, node=2 in ReqTRES
        ("5003", 4.0, 300.0),  # 1Gc with 4 CPUs
        ("5004", 64.0, 3600.0),  # 64Gn, node=1
    ],
)
def test_per_node_memory_with_the_node_count_in_req_tres(hand_made, job_id, memory_gb, wait_s):
    row = job(hand_made, job_id)
    assert (row["req_mem_gb"], row["wait_s"]) == (memory_gb, wait_s)
    assert row["gb_hours"] == memory_gb * row["timelimit_h"]


def test_hand_made_dump_keeps_every_readable_job(hand_made):
    assert list(hand_made.jobs["job_id"]) == ["5001", "5002", "5003", "5004"]
    assert job(hand_made, "5004")["req_gpus"] == 4  # gres/gpu:a100=4,gres/gpu=4
    ((line, _, problem),) = hand_made.problems  # a size that is not one: still reported
    assert (line, problem) == (6, "memory '8Xn' is not a Slurm size (e.g. 500M, 4000Mn, 2Gc)")


def test_node_count_order_req_nodes_then_req_tres_then_n_nodes():
    header = "JobID|Partition|Submit|Start|ReqCPUS|ReqMem|ReqNodes|NNodes|Timelimit|State|ReqTRES\n"
    common = "medium|2020-06-01T09:00:00|2020-06-01T09:01:00|4|1Gn"
    parsed = sacct.parse(
        header
        + f"1|{common}|2-4|3|01:00:00|COMPLETED|cpu=4,node=2\n"  # ReqNodes, a range: 2
        + f"2|{common}||3|01:00:00|COMPLETED|cpu=4,node=2\n"  # ReqTRES node=2
        + f"3|{common}||3|01:00:00|COMPLETED|cpu=4\n"  # NNodes 3
    )
    assert not parsed.problems
    assert list(parsed.jobs["req_mem_gb"]) == [2.0, 2.0, 3.0]


def test_per_node_memory_without_any_node_count_keeps_the_job():
    # A dump without node counts or ReqTRES: the memory is unknown, the wait is not.
    parsed = sacct.parse(
        "JobID|Partition|Submit|Start|ReqCPUS|ReqMem|Timelimit|State\n"
        "9|medium|2020-06-01T09:00:00|2020-06-01T09:02:00|4|8Gn|01:00:00|COMPLETED\n"
    )
    assert not parsed.problems
    row = parsed.jobs.iloc[0]
    assert row["wait_s"] == 120.0 and row["cpu_hours"] == 4.0
    assert math.isnan(row["req_mem_gb"]) and math.isnan(row["gb_hours"])


def test_dump_without_header_in_the_query_field_order(cases):
    lines = CASES.read_text().splitlines()
    assert lines[0] == "|".join(sacct.SACCT_FIELDS)
    bare = sacct.parse("\n".join(lines[1:]) + "\n")
    assert bare.jobs.equals(cases.jobs)
    assert [line - 1 for line, _, _ in cases.problems] == [line for line, _, _ in bare.problems]


def test_parsable_with_trailing_separator(cases):
    text = "".join(line + "|\n" for line in CASES.read_text().splitlines())
    parsed = sacct.parse(text)
    assert parsed.jobs.equals(cases.jobs)
    assert len(parsed.problems) == len(cases.problems)


def test_header_in_another_order_and_blank_lines():
    text = (
        "State|JobID|Partition|ReqCPUS|ReqMem|Timelimit|Submit|Start\n\n"
        "COMPLETED|7|medium|2|1G|01:00:00|2024-01-01T00:00:00|2024-01-01T00:00:42\n"
    )
    parsed = sacct.parse(text)
    assert parsed.lines_read == 1 and not parsed.problems
    row = parsed.jobs.iloc[0]
    assert (row["job_id"], row["cpu_hours"], row["gb_hours"], row["wait_s"]) == ("7", 2, 1, 42)


def test_times_with_and_without_zone_do_not_mix():
    text = (
        "JobID|Partition|Submit|Start|ReqCPUS|ReqMem|Timelimit|State\n"
        "8|medium|2024-01-01T00:00:00|2024-01-01T00:01:00+01:00|1|1G|10|COMPLETED\n"
    )
    (problem,) = sacct.parse(text).problems
    assert problem[0] == 2 and problem[2] == "start and submit/eligible times mix time zones"


def test_header_without_needed_fields_names_them():
    with pytest.raises(sacct.SacctError, match="lacks the fields Submit, Start, ReqMem"):
        sacct.parse("JobID|Partition|ReqCPUS|Timelimit|State\n1|a|1|1|COMPLETED\n")


def test_empty_dump():
    parsed = sacct.parse("")
    assert parsed.jobs.empty and list(parsed.jobs.columns) == list(sacct.JOB_COLUMNS)
    assert parsed.summary() == "0 lines: 0 job rows, 0 job steps skipped, 0 unreadable"


def test_real_dump_of_the_local_slurm():
    parsed = sacct.read(LOCAL)
    assert not parsed.problems
    assert parsed.steps_skipped == 25  # .batch and .0 steps: the dump was taken without -X
    assert set(parsed.jobs["partition"]) == {"medium", "gpu"}
    assert job(parsed, "9")["cancelled_by"] == 0  # "CANCELLED by 0" with Start=None
    assert math.isnan(job(parsed, "9")["wait_s"])
    assert job(parsed, "18_[1-3,7]")["array_tasks"] == 4
    assert math.isnan(job(parsed, "16")["timelimit_h"])  # Partition_Limit
    assert {job(parsed, "17", name)["partition"] for name in ("medium", "gpu")} == {
        "medium",
        "gpu",
    }
    assert job(parsed, "20+1")["req_gpus"] == 1
    assert job(parsed, "22_2")["wait_s"] == 15.0
    assert job(parsed, "5")["wait_s"] == 8.0
    assert job(parsed, "15")["req_mem_gb"] == pytest.approx(40000 / 1024)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("45", 45 * 60),
        ("30:00", 30 * 60),
        ("01:02:03", 3723),
        ("2-00:00:00", 2 * 86400),
        ("1-06", 30 * 3600),
        ("1-06:30", 30 * 3600 + 1800),
        ("00:00:01.500", 1.5),
        ("UNLIMITED", None),
        ("Partition_Limit", None),
    ],
)
def test_parse_duration(text, seconds):
    assert sacct.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1:2:3:4", "-1", "1h", "1-"])
def test_parse_duration_refuses(text):
    with pytest.raises(ValueError, match="is not a Slurm time"):
        sacct.parse_duration(text)


@pytest.mark.parametrize(
    ("text", "cpus", "nodes", "gb"),
    [
        ("500M", 4, 2, 500 / 1024),
        ("4000Mn", 1, 3, 3 * 4000 / 1024),
        ("2Gc", 8, 1, 16.0),
        ("1T", 1, 1, 1024.0),
        ("2048K", 1, 1, 2 / 1024),
        ("1.5G", 1, 1, 1.5),
        ("100", 1, 1, 100 / 1024),  # no unit: MB, as in --mem=100
        ("0", 1, 1, None),
        ("", 1, 1, None),
    ],
)
def test_parse_memory(text, cpus, nodes, gb):
    result = sacct.parse_memory(text, cpus, nodes)
    assert result == (None if gb is None else pytest.approx(gb))


def test_parse_memory_refuses():
    with pytest.raises(ValueError, match="is not a Slurm size"):
        sacct.parse_memory("4GB", 1, 1)


def test_per_node_memory_without_a_node_count_is_unknown():
    assert sacct.parse_memory("4Gn", 1, None) is None


@pytest.mark.parametrize(
    ("task", "count"),
    [(None, 1), ("4", 1), ("[5-9]", 5), ("[1-3,7%2]", 4), ("[0-10:5]", 3), ("[3]", 1)],
)
def test_array_task_count(task, count):
    assert sacct.array_task_count(task) == count


@pytest.mark.parametrize("task", ["[9-5]", "[a-b]", "[1-4:0]"])
def test_array_task_count_refuses(task):
    with pytest.raises(ValueError, match="malformed"):
        sacct.array_task_count(task)


class FakeSacct:
    """Stands in for subprocess.run of sacct: answers with the local dump, records commands."""

    def __init__(self, returncode=0):
        self.returncode, self.calls = returncode, []

    def __call__(self, command, **kwargs):
        self.calls.append((command, kwargs))
        if self.returncode:
            return subprocess.CompletedProcess(command, self.returncode, "", "Invalid time")
        return subprocess.CompletedProcess(command, 0, LOCAL.read_text(), "")


@pytest.fixture
def sinfo(monkeypatch):
    """The partitions sinfo reports; None: sinfo absent or failing."""
    answer = {"partitions": ["gpu", "medium"]}
    monkeypatch.setattr(cluster, "slurm_partitions", lambda: answer["partitions"])
    return answer


def test_query_asks_sacct_for_the_fixed_fields_partitions_and_window(sinfo):
    fake = FakeSacct()
    text = sacct.query(["medium", "gpu"], "2024-01-01", "now", runner=fake)
    assert text == LOCAL.read_text()
    ((command, kwargs),) = fake.calls
    assert command[0] == "sacct"
    assert {"--allusers", "--allocations", "--parsable2"} <= set(command)
    assert f"--format={','.join(sacct.SACCT_FIELDS)}" in command
    assert "--partition=medium,gpu" in command
    assert {"--starttime=2024-01-01", "--endtime=now"} <= set(command)
    assert kwargs["env"]["SLURM_TIME_FORMAT"] == "standard"


def test_query_of_a_missing_partition_lists_the_existing_ones(sinfo):
    fake = FakeSacct()
    with pytest.raises(sacct.SacctError) as err:
        sacct.query(["medium", "gpuu"], "now-1days", "now", runner=fake)
    assert str(err.value) == (
        "partition(s) gpuu do not exist on this cluster; partitions: gpu, medium"
    )
    assert not fake.calls


def test_query_reports_sacct_failure(sinfo):
    with pytest.raises(sacct.SacctError, match=r"failed \(exit 1\): Invalid time"):
        sacct.query(["medium"], "yesterday-ish", "now", runner=FakeSacct(returncode=1))


def test_query_without_slurm(sinfo):
    def missing(command, **kwargs):
        raise FileNotFoundError(command[0])

    with pytest.raises(sacct.SacctError, match="sacct not found: run this on a Slurm login node"):
        sacct.query(["medium"], "now-1days", "now", runner=missing)
    sinfo["partitions"] = None
    with pytest.raises(sacct.SacctError, match="sinfo did not answer: run this on a Slurm login"):
        sacct.query(["medium"], "now-1days", "now", runner=missing)
    with pytest.raises(sacct.SacctError, match="no partitions to query"):
        sacct.query([], "now-1days", "now", runner=missing)


def test_configured_partitions():
    config = {
        "cluster_analysis": {"partitions": []},
        "slurm": {"cpu_partition": "cpu", "gpu_partition": "gpu"},
    }
    assert sacct.configured_partitions(config) == ["cpu", "gpu"]
    config["slurm"]["gpu_partition"] = None  # a site without GPUs
    assert sacct.configured_partitions(config) == ["cpu"]
    config["cluster_analysis"]["partitions"] = ["long", "long", "short"]
    assert sacct.configured_partitions(config) == ["long", "short"]


def test_write_dump_leaves_only_the_file(tmp_path):
    target = tmp_path / "cluster" / "sacct.txt"
    sacct.write_dump("JobID\n", target)
    assert target.read_text() == "JobID\n"
    assert [path.name for path in target.parent.iterdir()] == ["sacct.txt"]

"""Time to result: queue wait per partition plus measured run time, and `accelbench advise`.

The accounting data: five jobs in medium that waited 30-120 s (median 60 s),
five in gpu that waited 1-4 h (median 2 h). The measurements: GEMM n=4096
takes 2 s on cpu2, 3.5 s on cpu1 and 0.1 s on cuda1 with the copies; their
jobs took 14 s, 30 s and 20 s from start to finish. CuPy was unavailable on
cuda1.
"""

from __future__ import annotations

import re

import pandas as pd
import pytest

from accelbench import cli
from accelbench import config as workflow_config
from accelbench.studies.queue_wait import advisor, sacct

from conftest import REPO_ROOT

HEADER = "JobID|Partition|Submit|Start|ReqCPUS|ReqMem|Timelimit|State\n"
WAITS = {"medium": (30, 60, 60, 90, 120), "gpu": (3600, 7200, 7200, 10800, 14400)}
CPU_EDGES, GB_EDGES = [4, 16, 64], [16, 64, 256]
PATTERN = "kernels/matmul/*/*/float64/n4096"


def dump_text() -> str:
    lines, job = [HEADER], 100
    for partition, waits in WAITS.items():
        for wait in waits:
            start = pd.Timestamp("2024-03-01T00:00:00") + pd.Timedelta(seconds=wait)
            lines.append(
                f"{job}|{partition}|2024-03-01T00:00:00|{start.isoformat()}|1|1G|01:00:00|"
                "COMPLETED\n"
            )
            job += 1
    return "".join(lines)


def tidy_frame() -> pd.DataFrame:
    rows = [
        ("kernels/matmul/cpu2/numpy/float64/n4096", "kernel", "ok", "cpu2", "numpy", 2.0, None, 14),
        ("kernels/matmul/cpu1/numpy/float64/n4096", "kernel", "ok", "cpu1", "numpy", 3.5, None, 30),
        (
            "kernels/matmul/cuda1/torch/float64/n4096",
            "kernel",
            "ok",
            "cuda1",
            "torch",
            0.01,
            0.1,
            20,
        ),
        ("kernels/matmul/cuda1/cupy/float64/n4096", "kernel", "unavailable", "cuda1", "cupy"),
        ("kernels/matmul/cpu2/numpy/float64/n128", "kernel", "ok", "cpu2", "numpy", 1e-4, None, 3),
    ]
    columns = ["id", "experiment", "status", "device", "backend", "time_median"]
    columns += ["end_to_end_time_median", "wall_s"]
    frame = pd.DataFrame([dict(zip(columns, row, strict=False)) for row in rows])
    frame["reason"] = pd.Series([None, None, None, "cupy is not installed", None], dtype="str")
    started = pd.Timestamp("2024-03-01T12:00:00", tz="UTC")
    frame["started"] = pd.Series(started, index=frame.index).where(frame["wall_s"].notna())
    frame["finished"] = frame["started"] + pd.to_timedelta(frame.pop("wall_s"), unit="s")
    train = {
        "id": "train/resnet18/cpu2/fp32/single/bs16",
        "experiment": "train",
        "status": "ok",
        "device": "cpu2",
        "time_per_batch_median": 0.5,
    }
    return pd.concat([frame, pd.DataFrame([train])], ignore_index=True)


@pytest.fixture
def jobs() -> pd.DataFrame:
    return sacct.parse(dump_text()).jobs


def config(runtime_minutes: int = 1440) -> dict:
    base = workflow_config.load()
    base["resources"]["kernels"]["runtime"] = runtime_minutes
    return base


def ranked(jobs, count, runtime_minutes=1440, frame=None):
    frame = tidy_frame() if frame is None else frame
    options, _ = advisor.experiment_options(frame, PATTERN, config(runtime_minutes), count)
    return advisor.rank(jobs, options, CPU_EDGES, GB_EDGES, min_jobs=5)


def test_options_follow_the_device_to_partition_and_resources():
    options, _ = advisor.experiment_options(tidy_frame(), f"results/{PATTERN}.json", config(), 1)
    by_label = {option.label: option for option in options}
    assert sorted(by_label) == ["cpu1 numpy", "cpu2 numpy", "cuda1 torch"]
    gpu = by_label["cuda1 torch"]
    assert (gpu.partition, gpu.compute_s, gpu.compute_units) == ("gpu", 0.1, "1 x end_to_end_time")
    assert gpu.request.cpus == 4  # slurm.cpus_per_gpu
    assert gpu.request.mem_gb == pytest.approx(2000 / 1024)  # resources.kernels.mem_mb
    assert gpu.request.hours == 24.0
    assert by_label["cpu2 numpy"].partition == "medium"


def test_run_time_is_the_measured_job_plus_the_compute():
    options, _ = advisor.experiment_options(tidy_frame(), PATTERN, config(), 4)
    cpu2 = next(option for option in options if option.label == "cpu2 numpy")
    assert (cpu2.compute_s, cpu2.job_wall_s, cpu2.run_s) == (8.0, 14.0, 22.0)
    assert cpu2.run_counts == advisor.JOB_AND_COMPUTE


def test_run_time_without_start_and_finish_says_compute_only(jobs):
    frame = tidy_frame()
    frame[["started", "finished"]] = pd.NaT
    table = ranked(jobs, count=1, frame=frame)
    assert set(table["run_counts"]) == {advisor.COMPUTE_ONLY}
    best = table.iloc[0]
    assert (best["option"], best["run_s"]) == ("cpu2 numpy", 2.0)
    shown = advisor.display(table)
    assert shown.loc[0, "Job wall time"] == "not recorded"
    assert shown.loc[0, "Run time"] == "2.0 s, compute only"
    assert "compute only" in advisor.verdict(table)
    assert "the job's set-up, imports and warm-up are not counted" in advisor.verdict(table)


def test_short_job_finishes_first_where_the_queue_is_short(jobs):
    table = ranked(jobs, count=1)
    best = table.iloc[0]
    assert (best["partition"], best["option"], best["best"]) == ("medium", "cpu2 numpy", True)
    assert best["wait_median_s"] == 60 and best["total_median_s"] == 76  # 14 s job + 2 s
    assert (best["total_q1_s"], best["total_q3_s"]) == (76, 106)
    assert best["wait_basis"] == "all jobs of the partition"
    assert list(table["partition"]) == ["medium", "medium", "gpu"]
    assert table["best"].sum() == 1
    shown = advisor.display(table)
    assert list(shown.loc[0, ["Compute", "Job wall time", "Run time"]]) == [
        "2.0 s (1 x time)",
        "14 s",
        "16 s",
    ]


def test_long_job_finishes_first_on_the_fast_device(jobs):
    table = ranked(jobs, count=10_000)  # cpu2 14 s + 20000 s + 60 s; cuda1 20 s + 1000 s + 7200 s
    best = table.iloc[0]
    assert (best["partition"], best["total_median_s"]) == ("gpu", pytest.approx(8220))
    assert "First result: partition gpu (cuda1 torch)" in advisor.verdict(table)
    assert "Next: medium (cpu2 numpy)" in advisor.verdict(table)


def test_run_longer_than_the_time_limit_ranks_last(jobs):
    table = ranked(jobs, count=10_000, runtime_minutes=20)  # 1200 s limit
    assert list(table["fits_limit"]) == [True, False, False]
    assert table.iloc[0]["partition"] == "gpu"
    shown = advisor.display(table)
    assert shown.loc[1, "Run time"] == "5.6 h > limit 20 min"


def test_records_that_did_not_run_are_listed_with_the_reason(jobs):
    options, not_ranked = advisor.experiment_options(tidy_frame(), PATTERN, config(), 1)
    assert "cuda1 cupy" not in {option.label for option in options}
    assert [str(item) for item in not_ranked] == [
        "gpu: cuda1 cupy: unavailable (cupy is not installed)"
    ]
    table = advisor.rank(jobs, options, CPU_EDGES, GB_EDGES, min_jobs=5)
    assert "Not ranked: gpu: cuda1 cupy: unavailable (cupy is not installed)" in advisor.notes(
        table, not_ranked
    )


def test_site_without_gpu_partition_offers_only_the_cpus():
    site = config()
    site["slurm"]["gpu_partition"] = None
    options, not_ranked = advisor.experiment_options(tidy_frame(), PATTERN, site, 1)
    assert {option.partition for option in options} == {"medium"}
    assert [str(item) for item in not_ranked] == [
        "no partition: cuda1 torch: the site has no GPU partition (config slurm)",
        "no partition: cuda1 cupy: unavailable (cupy is not installed)",
    ]


def test_training_runs_by_time_per_batch(jobs):
    options, _ = advisor.experiment_options(
        tidy_frame(), "train/resnet18/*/fp32/single/bs16", config(), 100
    )
    assert [(option.label, option.compute_units, option.run_s) for option in options] == [
        ("cpu2", "100 x time_per_batch", 50.0)
    ]


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        (
            "kernels/fft/*/*/float64/n4096",
            "no record matches 'kernels/fft/*/*/float64/n4096' in the tidy table (6 records); "
            "closest ids: kernels/matmul/cpu1/numpy/float64/n4096, "
            "kernels/matmul/cpu2/numpy/float64/n4096, ",
        ),
        (
            "train/resnet81/*/fp32/single/bs16",
            "closest ids: train/resnet18/cpu2/fp32/single/bs16",
        ),
        (
            "kernels/matmul/cuda1/cupy/*/*",
            "ran: kernels/matmul/cuda1/cupy/float64/n4096: unavailable (cupy is not installed)",
        ),
    ],
)
def test_experiment_errors(pattern, message):
    with pytest.raises(advisor.AdviceError) as err:
        advisor.experiment_options(tidy_frame(), pattern, config(), 1)
    assert message in str(err.value)


def test_no_match_in_an_empty_table_says_so():
    with pytest.raises(advisor.AdviceError, match="results/tidy.parquet has no records"):
        advisor.experiment_options(
            tidy_frame().iloc[:0], PATTERN, config(), 1, "results/tidy.parquet"
        )


def test_job_size_options(jobs):
    options = advisor.job_size_options(
        ["medium", "gpu"], 1, "1G", "1:00:00", ["medium=3:00:00", "gpu=10:00"]
    )
    assert [(option.partition, option.run_s) for option in options] == [
        ("medium", 10800.0),
        ("gpu", 600.0),
    ]
    table = advisor.rank(jobs, options, CPU_EDGES, GB_EDGES, min_jobs=5)
    assert table.iloc[0]["partition"] == "gpu"
    assert not table.iloc[1]["fits_limit"]  # 3 h run in a 1 h limit


def test_job_size_without_run_times_ranks_by_wait_and_says_so(jobs):
    options = advisor.job_size_options(["gpu", "medium"], 1, "1G", "1:00:00", [])
    table = advisor.rank(jobs, options, CPU_EDGES, GB_EDGES, min_jobs=5)
    assert list(table["partition"]) == ["medium", "gpu"]
    shown = advisor.display(table)
    assert list(shown.loc[0, ["Run time", "Result after (quartiles)"]]) == [
        "not given",
        "not known: no run time",
    ]
    assert advisor.verdict(table) == (
        "Run time not given: ranked by queue wait alone, not by time to result. "
        "Shortest expected wait: partition medium, median 60 s. "
        "Give --runtime PARTITION=TIME for each partition to rank by time to result."
    )
    assert any("queue wait alone" in note for note in advisor.notes(table, []))


def test_partition_without_run_time_ranks_after_those_with_one(jobs):
    options = advisor.job_size_options(["medium", "gpu"], 1, "1G", "1:00:00", ["gpu=10:00"])
    table = advisor.rank(jobs, options, CPU_EDGES, GB_EDGES, min_jobs=5)
    assert list(table["partition"]) == ["gpu", "medium"]  # medium waits less, run time unknown
    assert advisor.verdict(table).endswith("Not compared, run time not given: medium.")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((None, "1G", "1:00:00", []), "give an experiment, or a job size"),
        ((1, "lots", "1:00:00", []), "job size: memory 'lots' is not a Slurm size"),
        ((1, "1G", "UNLIMITED", []), "memory and time limit must be finite"),
        ((1, "1G", "1:00:00", ["gpu:10"]), "run time 'gpu:10' is not PARTITION=TIME"),
        ((1, "1G", "1:00:00", ["long=10"]), r"run time given for \['long'\]"),
    ],
)
def test_job_size_errors(args, message):
    with pytest.raises(advisor.AdviceError, match=message):
        advisor.job_size_options(["medium", "gpu"], *args)


def test_partition_without_accounting_data_is_not_ranked(jobs):
    options = advisor.job_size_options(["long", "medium"], 1, "1G", "1:00:00", [])
    table = advisor.rank(jobs, options, CPU_EDGES, GB_EDGES, min_jobs=5)
    assert list(table["partition"]) == ["medium", "long"]
    assert table.iloc[1]["wait_basis"].startswith("no started job of the partition")


def test_named_partitions_must_have_jobs(jobs):
    advisor.require_jobs_in(jobs, ["gpu", "medium"])
    advisor.require_jobs_in(jobs, [])  # none named: the configured ones are compared
    with pytest.raises(advisor.AdviceError) as err:
        advisor.require_jobs_in(jobs, ["medium", "long", "gpuu"])
    assert str(err.value) == (
        "partition(s) long, gpuu have no job in the accounting data; "
        "partitions with jobs: gpu, medium"
    )
    with pytest.raises(advisor.AdviceError, match="partitions with jobs: none$"):
        advisor.require_jobs_in(sacct.parse("").jobs, ["medium"])


def test_command_for_named_partitions(files, capsys):
    dump, _, _ = files
    argv = ["advise", "--sacct", str(dump), "--cpus", "1", "--mem", "1G", "--time", "1:00:00"]
    assert cli.main([*argv, "--partition", "gpu", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| gpu | job | not given | 2.0 h (2.0 h – 3.0 h) |" in out
    assert "| medium |" not in out
    assert "Run time not given: ranked by queue wait alone" in out


def test_nothing_to_rank():
    table = advisor.rank(sacct.parse("").jobs, [], CPU_EDGES, GB_EDGES, min_jobs=5)
    assert advisor.verdict(table).startswith("No option can be ranked")


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    dump = tmp_path / "sacct.txt"
    dump.write_text(dump_text())
    tidy = tmp_path / "tidy.parquet"
    tidy_frame().to_parquet(tidy)
    site = tmp_path / "site.yaml"
    site.write_text("resources:\n  kernels: {mem_mb: 2000, runtime: 1440}\n")
    return dump, tidy, site


def test_command_for_an_experiment(files, capsys):
    dump, tidy, site = files
    argv = ["advise", "--sacct", str(dump), "--tidy", str(tidy), "--configfile", str(site)]
    assert cli.main([*argv, "--experiment", PATTERN, "--count", "10000"]) == 0
    out = capsys.readouterr().out
    assert "Time to result" in out
    assert "\\" not in out and "|" not in out  # plain text for the terminal: no Markdown
    row = next(line for line in out.splitlines() if line.startswith("gpu "))
    assert re.split(r"\s{2,}", row)[:5] == [
        "gpu",
        "cuda1 torch",
        "17 min (10000 x end_to_end_time)",
        "20 s",
        "17 min",
    ]
    words = " ".join(out.split())  # notes are wrapped to the terminal's width
    assert "First result: partition gpu" in words
    assert "Not ranked: gpu: cuda1 cupy: unavailable (cupy is not installed)" in words
    assert "sacct.txt: 10 lines: 10 job rows, 0 job steps skipped, 0 unreadable" in words


def test_command_markdown_on_request(files, capsys):
    dump, tidy, site = files
    argv = ["advise", "--sacct", str(dump), "--tidy", str(tidy), "--configfile", str(site)]
    assert cli.main([*argv, "--experiment", PATTERN, "--count", "10000", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "Table: Time to result" in out
    assert "| gpu | cuda1 torch | 17 min (10000 x end\\_to\\_end\\_time) | 20 s | 17 min |" in out


def test_command_for_a_job_size(files, capsys):
    dump, _, _ = files
    argv = ["advise", "--sacct", str(dump), "--cpus", "1", "--mem", "1G", "--time", "1:00:00"]
    assert cli.main([*argv, "--runtime", "gpu=5", "--runtime", "medium=50", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| medium | job | 50 min | 60 s (60 s – 90 s) |" in out
    assert "First result: partition medium (job), after about 51 min" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--experiment", "kernels/fft/*/*/*/*"],
            "no record matches 'kernels/fft/*/*/*/*' in {tidy} (6 records); closest ids: "
            "kernels/matmul/",
        ),
        (["--cpus", "2"], "give an experiment, or a job size"),
        (["--tidy", "missing.parquet", "--experiment", PATTERN], "missing.parquet does not exist"),
        (
            ["--cpus", "1", "--mem", "1G", "--time", "1:00:00", "--partition", "long"],
            "partition(s) long have no job in the accounting data; partitions with jobs: gpu, "
            "medium",
        ),
    ],
)
def test_command_errors(files, capsys, extra, message):
    dump, tidy, _ = files
    argv = ["advise", "--sacct", str(dump)]
    if "--tidy" not in extra:
        argv += ["--tidy", str(tidy)]
    assert cli.main([*argv, *extra]) == 2
    assert message.format(tidy=tidy) in capsys.readouterr().err

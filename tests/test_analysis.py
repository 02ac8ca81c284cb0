"""Records -> tidy table -> comparison tables and figures, on small hand-made record sets."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from matplotlib.colors import to_rgb

from accelbench.analysis import (
    figures,
    marks,
    outputs,
    provenance_summary,
    ratios,
    style,
    summary,
    tables,
    tidy,
)
from accelbench.measuring import precision, statistics
from accelbench.records.record import write_record

from records import (
    FAILED,
    GPU_TRAIN,
    KERNELS,
    NO_GPU,
    NODE_TRAIN,
    OOM,
    TRAIN,
    steps,
    train_record,
    write_records,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def record_files(tmp_path):
    paths = write_records(tmp_path / "results", TRAIN + KERNELS)
    invalid = tmp_path / "results" / "kernels" / "broken.json"
    invalid.write_text("{not json", encoding="utf-8")
    _, incomplete = train_record("alexnet", "cpu1", samples=steps(1.0, 0.1))
    del incomplete["check"]
    lacking = tmp_path / "results" / "train" / "lacking.json"
    lacking.write_text(json.dumps(incomplete), encoding="utf-8")
    return paths, invalid, lacking


@pytest.fixture
def frame(record_files):
    paths, invalid, lacking = record_files
    collected, _ = tidy.collect([*paths, invalid, lacking])
    return collected


# --- tidy -------------------------------------------------------------------------------------


def test_collect_reports_bad_files_and_keeps_the_rest(record_files):
    paths, invalid, lacking = record_files
    collected, problems = tidy.collect([*paths, invalid, lacking])
    assert [path for path, _ in problems] == [str(invalid), str(lacking)]
    assert "not valid JSON" in problems[0][1]
    assert problems[1][1] == f"{lacking}: 'check' is missing"
    assert len(collected) == len(TRAIN) + len(KERNELS)
    assert list(collected["id"]) == sorted(exp_id for exp_id, _ in TRAIN + KERNELS)
    assert collected["status"].value_counts().to_dict() == {
        "ok": 9,
        "unavailable": 4,
        "failed": 1,
        "oom": 1,
    }


def test_collect_columns_dtypes_and_units(frame):
    columns = list(frame.columns)
    assert columns[:4] == ["id", "experiment", "status", "reason"]
    # The families' grid parameters (FAMILIES' order): those that name rows first.
    assert columns[4:14] == [
        "kernel",
        "model",
        "workload",
        "device",
        "backend",
        "dtype",
        "size",
        "precision",
        "strategy",
        "batch",
    ]
    assert columns[-39:] == [
        "check_passed",
        "check_relative_error",
        "busy",
        "imprecise",
        "imprecise_reason",
        "reached_half_width",
        "other_cpus",
        "steal_cpus",
        "host_slowed_runs",
        "host_slowdown",
        "host_speed_of_best",
        "group_measurement",
        "run_medians",
        "implementation",
        "timer",
        "unit_origin",
        "unit_digest",
        "energy_status",
        "energy_reason",
        "energy_method",
        "energy_baseline_w",
        "host",
        "cpu_model",
        "cpu_topology",
        "gpu",
        "gpu_count",
        "driver",
        "cuda_runtime",
        "python",
        "git_commit",
        "git_dirty",
        "config_hash",
        "slurm_job_id",
        "slurm_partition",
        "slurm_node",
        "slurm_exclusive",
        "started",
        "finished",
        "torch_version",
    ]
    start = columns.index("time_per_batch_median")
    assert columns[start : start + 7] == [
        f"time_per_batch_{field}"
        for field in ("median", "q1", "q3", "ci_low", "ci_high", "ci_level", "n")
    ]
    assert str(frame["size"].dtype) == "Int64"
    assert str(frame["batch"].dtype) == "Int64"
    assert str(frame["time_median"].dtype) == "float64"
    assert str(frame["time_n"].dtype) == "Int64"
    assert str(frame["check_passed"].dtype) == "boolean"
    assert str(frame["started"].dtype) == "datetime64[us, UTC]"
    row = frame.set_index("id").loc["train/resnet18/cpu16/fp32/single/bs16"]
    assert row["time_per_batch_median"] == pytest.approx(0.1045)
    assert row["time_per_batch_n"] == 10
    assert row["throughput_median"] == pytest.approx(16 / 0.1045)
    assert row["peak_memory"] == 123456789
    assert pd.isna(row["size"]) and pd.isna(row["gpu"])
    assert row["slurm_job_id"] == "42" and row["slurm_partition"] == "medium"
    assert (row["torch_version"], row["python"], row["git_dirty"]) == ("2.5.0", "3.11.9", False)
    assert row["gpu_count"] == 0 and pd.isna(row["driver"])
    kernel = frame.set_index("id").loc["kernels/matmul/cuda1/numba/float32/n256"]
    assert kernel["gpu"] == "NVIDIA H100" and kernel["reason"] == NO_GPU
    assert pd.isna(kernel["time_median"])
    units = frame.attrs["units"]
    assert units["time_per_batch_median"] == "s"
    assert units["gflops_ci_high"] == "GFLOP/s"
    assert units["peak_memory"] == "bytes"
    assert "time_n" not in units


def test_collect_reports_records_that_do_not_fit_the_table(tmp_path):
    exp_id, record = train_record("resnet18", "cpu1", samples=steps(1.0, 0.1))
    first = write_record(tmp_path / "a" / f"{exp_id}.json", record)
    second = write_record(tmp_path / "b" / f"{exp_id}.json", record)
    other_id, other = train_record("resnet18", "cpu2", samples=steps(1.0, 0.1))
    other["metrics"]["time_per_batch"]["unit"] = "GFLOP/s"
    third = write_record(tmp_path / "c" / f"{other_id}.json", other)
    clashing_id, clashing = train_record("resnet18", "cpu4", samples=steps(1.0, 0.1))
    clashing["params"]["host"] = "elsewhere"
    fourth = write_record(tmp_path / "d" / f"{clashing_id}.json", clashing)
    odd_id, odd = train_record("resnet18", "cpu8", samples=steps(1.0, 0.1))
    fifth = write_record(tmp_path / "e" / f"{odd_id}.json", odd)
    odd["provenance"]["accelerator"] = "none"
    fifth.write_text(json.dumps(odd))
    collected, problems = tidy.collect([fifth, fourth, third, second, first])
    assert list(collected["id"]) == [exp_id]
    assert [path for path, _ in problems] == [str(path) for path in (second, third, fourth, fifth)]
    assert "already read" in problems[0][1]
    assert (
        "unit mismatch: time_per_batch_median in 'GFLOP/s', earlier records use 's'"
        in problems[1][1]
    )
    assert "columns ['host'] named twice" in problems[2][1]
    assert 'provenance.accelerator: "none" is not an object' in problems[3][1]


def test_tidy_round_trips_through_parquet_and_csv(frame, tmp_path):
    parquet, csv = tmp_path / "out" / "tidy.parquet", tmp_path / "out" / "csv" / "tidy.csv"
    tidy.write(frame, parquet, csv)
    back = pd.read_parquet(parquet)
    pd.testing.assert_frame_equal(back, frame)
    assert back.attrs["units"] == frame.attrs["units"]
    text = pd.read_csv(csv)
    assert list(text.columns) == list(frame.columns)
    assert list(text["id"]) == list(frame["id"])
    pd.testing.assert_series_equal(
        text["time_per_batch_median"], frame["time_per_batch_median"], check_dtype=False
    )


def test_collect_of_nothing_is_an_empty_table():
    collected, problems = tidy.collect([])
    assert collected.empty and problems == []
    assert list(collected.columns[:4]) == ["id", "experiment", "status", "reason"]


def test_natural_device_order():
    assert tidy.natural_devices(["cuda2", "cpu16", "cuda1", "cpu2", "cpu1", "cpu2"]) == [
        "cpu1",
        "cpu2",
        "cpu16",
        "cuda1",
        "cuda2",
    ]


# --- tables -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("numbers", "expected"),
    [
        ((0.1672, 0.1421, 0.1783), "0.167 [0.142, 0.178]"),
        ((0.55, 0.51, 0.59), "0.550 [0.510, 0.590]"),
        ((1.5, 1.5, 1.5), "1.5 [1.5, 1.5]"),
        ((2.0, 1.0, 3.0), "2.0 [1.0, 3.0]"),
        ((1.0, 0.1, 10.0), "1.0 [0.1, 10.0]"),
        ((123.456789, 123.4, 123.5), "123.457 [123.400, 123.500]"),
        ((12345.6, 11890.0, 12710.0), "12350 [11890, 12710]"),
        ((1.234e-6, 1.2e-6, 1.27e-6), "1.234e-06 [1.200e-06, 1.270e-06]"),
        ((2.5e7, 2.4e7, 2.6e7), "2.50e+07 [2.40e+07, 2.60e+07]"),
        ((float("nan"), 1.0, 2.0), "–"),
    ],
)
def test_format_with_ci(numbers, expected):
    assert tables.format_with_ci(*numbers) == expected


def test_a_row_shares_one_power_of_ten():
    assert tables.shared_exponent([0.5, 20.0, float("nan")]) == 0
    assert tables.shared_exponent([1.645e-3, 9.45e-4]) == -3
    assert tables.shared_exponent([3e6, 5e5]) == 6
    assert tables.format_with_ci(9.45e-4, 9.1e-4, 9.8e-4, exponent=-3) == (
        "0.945e-03 [0.910e-03, 0.980e-03]"
    )


def test_train_table_golden(frame):
    table, footnotes = tables.comparison_table(frame, experiment="train")
    assert list(table.columns) == ["cpu1", "cpu2", "cpu16", "cuda1"]
    # Each row in the unit of its largest time, named beside it where the rows' units differ.
    assert list(table.index) == ["resnet18 (ms)", "resnet50 (s)", "vgg11 (s)"]
    assert table.to_dict("index") == {
        "resnet18 (ms)": {
            "cpu1": "550 [510, 590]",
            "cpu2": "325 [305, 345]",
            "cpu16": "104.5 [101.0, 108.0]",
            "cuda1": "n/a (a)",
        },
        "resnet50 (s)": {
            "cpu1": "1.00 [0.80, 1.20]",
            "cpu2": "–",
            "cpu16": "–",
            "cuda1": "n/a (a)",
        },
        "vgg11 (s)": {
            "cpu1": "1.45 [1.10, 1.80]",
            "cpu2": "failed (b)",
            "cpu16": "–",
            "cuda1": "OOM (c)",
        },
    }
    assert table.attrs["caption"] == "Time per mini-batch, median [95% CI]; fp32, single, batch 16"
    # A row with one number has nothing to be best against: only resnet18 has a bold cell.
    assert table.attrs["best"] == [["resnet18 (ms)", "cpu16"]]
    assert footnotes == [
        f"(a) n/a: {NO_GPU}",
        f"(b) failed: {FAILED}",
        f"(c) OOM: {OOM}",
        "Too few samples for a 95% interval in 1 cell: theirs have a level of 94% or more "
        "(the summary lists them)",
    ]


def test_train_table_writers(frame, tmp_path):
    table, footnotes = tables.comparison_table(frame, experiment="train")
    paths = tables.write_table(table, footnotes, tmp_path / "tables" / "train_time")
    assert [path.name for path in paths] == [
        "train_time.md",
        "train_time.tex",
        "train_time.csv",
        "train_time.html",
    ]
    markdown = paths[0].read_text(encoding="utf-8")
    pad = "\u2008\u2007\u2007"  # what 550 lacks of 1.00: a point and two digits
    assert markdown.splitlines()[:7] == [
        "Table: Time per mini-batch, median [95% CI]; fp32, single, batch 16",
        "",
        "| Model | cpu1 |  | cpu2 |  | cpu16 |  | cuda1 |",
        "|:---|---:|:---|---:|:---|---:|:---|---:|",
        f"| resnet18 (ms) | 550{pad} | [510, 590] | 325 | [305, 345] | **104.5** "
        "| **[101.0, 108.0]** | n/a (a) |",
        "| resnet50 (s) | 1.00 | [0.80, 1.20] | – |  | – |  | n/a (a) |",
        "| vgg11 (s) | 1.45 | [1.10, 1.80] | failed (b) |  | – |  | OOM (c) |",
    ]
    assert "(b) failed: RuntimeError: 100% of threads\\_busy" in markdown

    latex = paths[1].read_text(encoding="utf-8")
    for line in (
        r"\toprule",
        r"\midrule",
        r"\bottomrule",
        r"\begin{tabular}{lr@{\ }lr@{\ }lr@{\ }l}",
        r"\caption{Time per mini-batch, median [95\% CI]; fp32, single, batch 16}",
        r"Model & \multicolumn{2}{c}{cpu1} & \multicolumn{2}{c}{cpu2} & \multicolumn{2}{c}{cpu16}"
        r" \\",
        r"resnet18 (ms) & 550\phantom{.00} & [510, 590] & 325 & [305, 345] & \textbf{104.5} & "
        r"\textbf{[101.0, 108.0]} \\",
        r"resnet50 (s) & 1.00 & [0.80, 1.20] & \multicolumn{2}{c}{--} & \multicolumn{2}{c}{--} \\",
        # The column that does not fit beside them goes on in a tabular of its own, named.
        r"Table~\thetable{} (continued)\par\smallskip",
        r"Model & cuda1 \\",
        r"vgg11 (s) & OOM (c) \\",
    ):
        assert line in latex.splitlines()
    assert r"RuntimeError: 100\% of threads\_busy" in latex
    assert "CUDA\\_VISIBLE\\_DEVICES=''" in latex

    cells = pd.read_csv(paths[2])
    assert list(cells.columns) == ["row", "device", *tables.CSV_COLUMNS[2:]]
    assert len(cells) == 12
    best = cells[(cells["row"] == "resnet18") & (cells["device"] == "cpu16")].iloc[0]
    assert best["status"] == "ok" and bool(best["best"]) and best["unit"] == "s"
    assert (best["median"], best["ci_low"], best["ci_high"]) == pytest.approx(
        (0.1045, 0.101, 0.108)
    )
    oom = cells[(cells["row"] == "vgg11") & (cells["device"] == "cuda1")].iloc[0]
    assert oom["status"] == "oom" and oom["reason"] == OOM and pd.isna(oom["median"])
    assert (
        cells.loc[(cells["row"] == "vgg11") & (cells["device"] == "cpu16"), "status"].item()
        == "missing"
    )


def test_kernel_table(frame):
    table, footnotes = tables.comparison_table(frame, experiment="kernel")
    assert list(table.columns) == ["cpu1", "cpu2", "cuda1"]
    assert table.index.name == "Kernel"
    # Each row in the unit of its largest time (204.5 µs; 1645 µs is 1.645 ms), named
    # beside it: the rows' units differ; rows without a number have none.
    assert list(table.index) == [
        "matmul, numba, n=256",
        "matmul, numba, n=512",
        "matmul, torch, n=256 (µs)",
        "matmul, torch, n=512 (ms)",
    ]
    assert table.attrs["caption"] == "Kernel time, median [95% CI]; float32"
    assert table.loc["matmul, torch, n=256 (µs)"].tolist() == [
        "204.5 [201.0, 208.0]",
        "114.5 [111.0, 118.0]",
        "–",
    ]
    assert table.loc["matmul, torch, n=512 (ms)"].tolist() == [
        "1.645 [1.610, 1.680]",
        "0.945 [0.910, 0.980]",
        "–",
    ]
    assert table.loc["matmul, numba, n=512"].tolist() == ["–", "–", "n/a (a)"]
    assert table.attrs["best"] == [
        ["matmul, torch, n=256 (µs)", "cpu2"],
        ["matmul, torch, n=512 (ms)", "cpu2"],
    ]
    assert footnotes == [f"(a) n/a: {NO_GPU}"]


def test_tables_of_nothing_and_of_only_failures(tmp_path):
    empty, _ = tidy.collect([])
    table, footnotes = tables.comparison_table(empty, experiment="train")
    assert table.empty and footnotes == ["No train records."]
    tables.write_table(table, footnotes, tmp_path / "empty")
    assert (tmp_path / "empty.md").read_text(encoding="utf-8") == "No train records.\n"

    paths = write_records(tmp_path / "results", [TRAIN[3], TRAIN[7], TRAIN[8]])
    failures, _ = tidy.collect(paths)
    table, footnotes = tables.comparison_table(failures, experiment="train")
    assert table.to_dict("index") == {
        "resnet18": {"cpu2": "–", "cuda1": "n/a (a)"},
        "vgg11": {"cpu2": "failed (b)", "cuda1": "OOM (c)"},
    }
    assert table.attrs["best"] == [] and len(footnotes) == 3
    assert table.attrs["caption"] == "Time per mini-batch, median [95% CI]; fp32, single, batch 16"


@pytest.fixture
def gpu_frame(tmp_path):
    collected, problems = tidy.collect(write_records(tmp_path / "gpu", GPU_TRAIN))
    assert problems == []
    return collected


@pytest.mark.parametrize(
    ("unit", "medians", "expected"),
    [
        ("s", [2.5, 30.0], ("s", 1.0)),
        ("s", [0.1045, 0.45], ("ms", 1e-3)),  # 104.5 and 450 ms
        ("s", [0.1045, 1.45], ("s", 1.0)),  # 0.1045 and 1.45 s, not 1450 ms
        ("s", [0.5, 1.45, 3.0, 4.0], ("s", 1.0)),
        ("s", [2.0e-4, 1.6e-3, float("nan")], ("ms", 1e-3)),
        ("s", [2e-6, 44e-3], ("ms", 1e-3)),  # 0.0020 to 44 ms, not 2 to 44000 µs
        ("s", [6e-5, 2e-3, 0.13], ("ms", 1e-3)),  # 0.060 to 130 ms
        ("s", [5e-10], ("ns", 1e-9)),
        ("J", [-1.8e-4, 5e-5], ("µJ", 1e-6)),  # an energy above idle may be negative
        ("GFLOP/s", [0.001], ("GFLOP/s", 1.0)),
        ("GFLOP/s", [850.0, 66900.0], ("TFLOP/s", 1e3)),
        ("s", [float("nan")], ("s", 1.0)),
    ],
)
def test_readable_unit(unit, medians, expected):
    assert tables.readable_unit(unit, medians) == expected


def test_speedup_table_golden(frame):
    table, footnotes = tables.speedup_table(frame, "train", "cpu1")
    assert table.attrs["caption"] == (
        "Speedup over cpu1: time per mini-batch on cpu1 / time per mini-batch on the device (×), "
        "median [interval from both 95% CIs, level ≥ 90%]; fp32, single, batch 16"
    )
    # 0.55 s / 0.325 s = 1.69; the interval runs from 0.51/0.345 to 0.59/0.305.
    assert table.to_dict("index") == {
        "resnet18": {"cpu2": "1.69 [1.48, 1.93]", "cpu16": "5.3 [4.7, 5.8]", "cuda1": "n/a (a)"},
        "resnet50": {"cpu2": "–", "cpu16": "–", "cuda1": "n/a (a)"},
        "vgg11": {"cpu2": "failed (b)", "cpu16": "–", "cuda1": "OOM (c)"},
    }
    assert table.attrs["best"] == [["resnet18", "cpu16"]]
    assert footnotes[1:] == [
        f"(b) failed: {FAILED}",
        f"(c) OOM: {OOM}",
    ]
    cell = next(c for c in table.attrs["cells"] if c["row"] == "resnet18" and c["column"] == "cpu2")
    assert (cell["median"], cell["ci_low"], cell["ci_high"]) == pytest.approx(
        (0.55 / 0.325, 0.51 / 0.345, 0.59 / 0.305)
    )


def test_speedup_table_says_when_the_baseline_is_missing_or_did_not_run(frame):
    table, footnotes = tables.speedup_table(frame, "train", "cpu2")
    assert list(table.columns) == ["cpu1", "cpu16", "cuda1"]
    assert table.loc["resnet18"].tolist() == ["0.59 [0.52, 0.68]", "3.11 [2.82, 3.42]", "n/a (a)"]
    assert table.loc["resnet50", "cpu1"] == "– (b)"
    assert table.loc["vgg11", "cpu1"] == "– (c)"
    assert footnotes[1:3] == [
        "(b) no baseline: no record on the baseline cpu2",
        "(c) no baseline: the baseline cpu2 did not run (failed)",
    ]
    table, footnotes = tables.speedup_table(frame, "train", "cuda8")
    assert set(table.loc["resnet18"]) == {"– (a)", "n/a (b)"}
    assert footnotes[0] == "(a) no baseline: no record on the baseline cuda8"


def test_kernel_speedup_table(frame):
    table, _ = tables.speedup_table(frame, "kernel", "cpu1")
    assert table.attrs["caption"].startswith("Speedup over cpu1: kernel time on cpu1 / kernel")
    assert table.loc["matmul, torch, n=256"].tolist() == ["1.79 [1.70, 1.87]", "–"]


def test_precision_table_keeps_rows_measured_in_two_precisions(gpu_frame):
    table, footnotes = tables.comparison_table(gpu_frame, "train", across="precision")
    assert table.attrs["caption"] == (
        "Time per mini-batch by precision (ms), median [95% CI]; single, batch 16, cuda1"
    )
    assert list(table.columns) == ["fp32", "bf16", "fp16"]
    assert table.to_dict("index") == {
        "lstm": {
            "fp32": "7.84 [7.58, 8.10]",
            "bf16": "4.70 [4.54, 4.86]",
            "fp16": "3.92 [3.79, 4.05]",
        },
        "resnet18": {
            "fp32": "13.06 [12.62, 13.50]",
            "bf16": "7.84 [7.58, 8.10]",
            "fp16": "6.53 [6.31, 6.75]",
        },
    }
    assert table.attrs["best"] == [["lstm", "fp16"], ["resnet18", "fp16"]]
    assert footnotes == []


def test_precision_table_of_one_precision_is_empty_and_says_why(frame):
    table, footnotes = tables.comparison_table(frame, "train", across="precision")
    assert table.empty
    assert footnotes == ["No train configuration was measured in more than one precision."]


def test_scaling_table_golden(gpu_frame):
    table, footnotes = tables.scaling_table(gpu_frame)
    assert list(table.columns) == ["cpu2", "cpu4", "cuda2", "cuda4"]
    # DDP records count the batch over all GPUs (32 on two, 64 on four): their baseline is
    # batch 16 on one GPU, and both make one row named after it.
    assert table.to_dict("index") == {
        "lstm, fp32, ddp, batch 16": {
            "cpu2": "–",
            "cpu4": "–",
            "cuda2": "0.556 [0.520, 0.594]",
            "cuda4": "0.556 [0.520, 0.594]",
        },
        "lstm, fp32, single, batch 16": {
            "cpu2": "0.87 [0.81, 0.93]",
            "cpu4": "0.76 [0.71, 0.81]",
            "cuda2": "–",
            "cuda4": "–",
        },
        "resnet18, fp32, ddp, batch 16": {
            "cpu2": "–",
            "cpu4": "–",
            "cuda2": "0.556 [0.520, 0.594]",
            "cuda4": "0.556 [0.520, 0.594]",
        },
        "resnet18, fp32, single, batch 16": {
            "cpu2": "0.87 [0.81, 0.93]",
            "cpu4": "0.76 [0.71, 0.81]",
            "cuda2": "–",
            "cuda4": "–",
        },
        "vgg11, fp32, ddp, batch 16": {
            "cpu2": "–",
            "cpu4": "–",
            "cuda2": "failed (a)",
            "cuda4": "–",
        },
    }
    assert table.attrs["caption"].startswith(
        "Scaling efficiency: throughput on K devices / (K × throughput on one; strategy single)"
    )
    assert footnotes[0] == f"(a) failed: {FAILED}"
    # What the loader does: a record's batch is the global mini-batch, split over devices.
    assert footnotes[-1].startswith("Batch sizes are global mini-batches, split over the K")
    assert "per device" not in footnotes[-1].split("(")[0]


def test_scaling_with_a_batch_per_device_and_a_missing_baseline(tmp_path):
    records = [
        train_record("resnet18", "cuda1", samples=steps(0.100, 0.001)),
        train_record("resnet18", "cuda2", samples=steps(0.125, 0.001), strategy="ddp"),
        train_record("resnet18", "cuda4", "oom", reason=OOM, strategy="ddp"),
        train_record("lstm", "cuda2", samples=steps(0.1, 0.001), strategy="ddp"),
    ]
    collected, _ = tidy.collect(write_records(tmp_path, records))
    cells, _ = ratios.scaling(collected)
    ddp = cells[cells["device"] == "cuda2"].set_index("label")
    # Throughput 16 / 0.1295 s on two GPUs against 16 / 0.1045 s on one: 0.81x, 0.40 each.
    assert ddp.loc["resnet18, ddp", "median"] == pytest.approx(0.1045 / 0.1295)
    assert ddp.loc["resnet18, ddp", "efficiency_median"] == pytest.approx(0.1045 / 0.1295 / 2)
    assert ddp.loc["lstm, ddp", "status"] == ratios.NO_BASELINE
    assert "no record on the baseline cuda1" in ddp.loc["lstm, ddp", "reason"]
    oom = cells[cells["device"] == "cuda4"].iloc[0]
    assert oom["status"] == "oom" and pd.isna(oom["efficiency_median"])


def test_labels_name_other_parameters_only_where_they_tell_records_apart(tmp_path):
    # Two runs' tables side by side: one cell measured at two image sizes (one path, so two
    # result folders; their rows told apart by id).
    small = train_record("resnet18", "cpu1", samples=steps(1.0, 0.1))
    small[1]["params"]["image_size"] = 32
    collected, _ = tidy.collect(write_records(tmp_path, [small]))
    large = collected.assign(id=collected["id"] + " (large)", image_size=224)
    large["time_per_batch_median"] *= 2
    both = pd.concat([collected, large], ignore_index=True)
    both.attrs = collected.attrs
    table, _ = tables.comparison_table(both)
    assert list(table.index) == ["resnet18, image_size=32", "resnet18, image_size=224"]


def test_every_registered_table_writes_four_formats(frame, gpu_frame, tmp_path):
    empty, _ = tidy.collect([])
    for name, build in outputs.TABLES.items():
        for index, records in enumerate((frame, gpu_frame, empty)):
            table, footnotes = build(records, "cpu1")
            paths = tables.write_table(table, footnotes, tmp_path / str(index) / name)
            assert [path.suffix for path in paths] == [".md", ".tex", ".csv", ".html"]
            assert all(path.stat().st_size > 0 for path in paths)
            if table.empty:
                assert footnotes, name  # an empty table says why


def test_latex_and_html_of_units_and_bold(gpu_frame, tmp_path):
    table, footnotes = tables.speedup_table(gpu_frame, "train", "cpu1")
    tex, page = tables.to_latex(table, footnotes, "x"), tables.to_html(table, footnotes)
    assert r"($\times$)" in tex and r"level $\geq$ 90\%" in tex
    assert "<strong>40.0 [37.4, 42.8]</strong>" in page
    assert "<caption>Speedup over cpu1" in page and (
        '<p class="note">Not shown, no baseline: no record on the baseline cpu1' in page
    )
    kernel, _ = tables.comparison_table(tidy.collect(write_records(tmp_path, KERNELS))[0], "kernel")
    assert r"matmul, torch, n=256 (\textmu{}s)" in tables.to_latex(kernel, [], "k")


def test_provenance_summary(frame, gpu_frame):
    table, footnotes = provenance_summary.summary_table(frame)
    values = table["Value (records)"].to_dict()
    assert values["Status"] == "ok (9); n/a (4); OOM (1); failed (1)"
    assert values["GPU"] == "none (13); NVIDIA H100 (2)"
    assert values["CPU topology"] == (
        "1 socket, 1 NUMA node, 8 cores x 2 threads (SMT on), 16 CPUs usable (15)"
    )
    assert values["torch"] == "2.5.0 (15)"
    assert values["Uncommitted changes"] == "no (15)"
    assert values["Measured"] == "2024-05-01 12:00 – 2024-05-01 12:00 UTC (15)"
    assert footnotes == [
        "More than one value of GPU, GPUs per job, Slurm partition: compare numbers measured "
        "with the same setup (see the tidy table's provenance columns)."
    ]
    cells = pd.DataFrame(table.attrs["cells"])
    assert cells[cells["field"] == "GPU"].to_dict("records") == [
        {"field": "GPU", "value": "none", "records": 13},
        {"field": "GPU", "value": "NVIDIA H100", "records": 2},
    ]


# --- figures ----------------------------------------------------------------------------------


def assert_saved(fig, stem):
    pdf, png = style.save(fig, stem)
    assert pdf.read_bytes().startswith(b"%PDF") and pdf.stat().st_size > 1000
    assert png.read_bytes().startswith(PNG_MAGIC) and png.stat().st_size > 1000


def texts(fig):
    return [text.get_text() for ax in fig.axes for text in ax.texts]


def points(ax) -> list[tuple[float, float]]:
    """(x, median) of every point drawn with its interval, left to right."""
    found = [
        (float(c.lines[0].get_xdata()[0]), float(c.lines[0].get_ydata()[0]))
        for c in ax.containers
        if hasattr(c, "has_yerr")
    ]
    return sorted(found)


def test_time_per_batch_figure(frame, tmp_path):
    fig = figures.time_per_batch_by_device(frame)
    ax = fig.axes[0]
    # The unit of the largest time (1.45 s on cpu1), on a log axis: 0.1 s on cpu16 to
    # 1.45 s on cpu1 is more than a decade.
    assert (ax.get_ylabel(), ax.get_xlabel()) == ("Time per mini-batch (s)", "Model")
    assert ax.get_yscale() == "log"
    assert not ax.patches  # points with intervals: a bar's length means nothing on a log axis
    found = points(ax)
    assert len(found) == 5 and max(median for _, median in found) == pytest.approx(1.45)
    assert [label.get_text() for label in ax.get_xticklabels()] == ["resnet18", "resnet50", "vgg11"]
    # Within a model the fastest device comes first.
    for group in range(3):
        medians = [median for x, median in found if abs(x - group) < 0.5]
        assert medians == sorted(medians)
    assert sorted(texts(fig)) == ["OOM", "failed", "n/a", "n/a"]
    legend = [text.get_text() for text in fig.legends[0].get_texts()]
    assert legend[:5] == ["cpu1", "cpu2", "cpu16", "cuda1", "bar: 95% CI"]
    assert_saved(fig, tmp_path / "figs" / "train")


def test_time_per_batch_figure_switches_to_log_scale(tmp_path):
    paths = write_records(
        tmp_path,
        [
            train_record("resnet18", "cpu1", samples=steps(10.0, 0.1)),
            train_record("resnet18", "cuda1", samples=steps(0.01, 1e-4)),
        ],
    )
    collected, _ = tidy.collect(paths)
    assert figures.time_per_batch_by_device(collected).axes[0].get_yscale() == "log"
    paths = write_records(
        tmp_path / "close",
        [
            train_record("resnet18", "cpu1", samples=steps(0.50, 0.01)),
            train_record("resnet18", "cpu2", samples=steps(0.30, 0.01)),
        ],
    )
    collected, _ = tidy.collect(paths)
    assert figures.time_per_batch_by_device(collected).axes[0].get_yscale() == "linear"


def test_kernel_figure(frame, tmp_path):
    fig = figures.kernel_throughput_by_size(frame)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    # cuda1 measured nothing (n/a, as the table says): no panel of nothing.
    assert [ax.get_title() for ax in visible] == ["matmul, cpu1", "matmul, cpu2"]
    assert visible[0].get_ylabel() == "Throughput (GFLOP/s)"
    assert visible[0].get_xlabel() == "Problem size n"
    # 256 and 512, GFLOP/s within a decade: linear axes, the rates from zero.
    assert (visible[0].get_xscale(), visible[0].get_yscale()) == ("linear", "linear")
    assert visible[0].get_ylim()[0] == 0
    assert texts(fig) == []
    assert [text.get_text() for text in fig.legends[0].get_texts()][0] == "torch"
    assert_saved(fig, tmp_path / "kernel")


def test_figures_of_only_failures_and_of_nothing(tmp_path):
    paths = write_records(tmp_path / "results", [TRAIN[3], TRAIN[7], TRAIN[8]] + KERNELS[4:])
    failures, _ = tidy.collect(paths)
    fig = figures.time_per_batch_by_device(failures)
    # vgg11 failed on cpu2 and ran out of memory on cuda1; resnet18 on cuda1 alone is not
    # set beside another device.
    assert sorted(texts(fig)) == ["OOM", "failed"]
    assert list(fig.axes[0].get_yticks()) == []
    assert_saved(fig, tmp_path / "fail_train")
    fig = figures.kernel_throughput_by_size(failures)
    assert texts(fig) == ["no kernel measured at two sizes or beside another"]
    assert_saved(fig, tmp_path / "fail_kernel")

    empty, _ = tidy.collect([])
    for function, message in (
        (figures.time_per_batch_by_device, "no training configuration measured on two devices"),
        (figures.kernel_throughput_by_size, "no kernel measured at two sizes or beside another"),
    ):
        fig = function(empty)
        assert texts(fig) == [message]
        assert_saved(fig, tmp_path / function.__name__)


def failures_only(tmp_path):
    paths = write_records(tmp_path / "failures", [TRAIN[3], TRAIN[7], TRAIN[8], *KERNELS[4:]])
    return tidy.collect(paths)[0]


def test_every_figure_renders_on_records_on_failures_and_on_nothing(gpu_frame, tmp_path):
    empty, _ = tidy.collect([])
    for name, draw in outputs.FIGURES.items():
        for kind, records in (
            ("gpu", gpu_frame),
            ("failures", failures_only(tmp_path)),
            ("empty", empty),
        ):
            assert_saved(draw(records, "cpu1", None), tmp_path / kind / name)


def test_speedup_heatmap(gpu_frame, tmp_path):
    fig = figures.speedup_heatmap(gpu_frame, "cpu1")
    ax = fig.axes[0]
    # The GPUs over the CPU baseline: cpu2 and cpu4 over cpu1 are the thread scaling's,
    # and the rows with no cell compared (bf16, fp16, DDP on four GPUs) compare nothing.
    assert [t.get_text() for t in ax.get_xticklabels()] == ["cuda1", "cuda2"]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "lstm, fp32, single, batch 16",
        "resnet18, fp32, single, batch 16",
        "vgg11, fp32, ddp, batch 32",
        "vgg11, fp32, single, batch 16",
    ]
    shown = texts(fig)
    # The medians as the table prints them; grey cells say why they have none.
    assert {"40.0", "failed", "OOM"} <= set(shown) and "1.74" not in shown
    assert fig.axes[1].get_ylabel() == "Speedup over cpu1 (×)"
    assert_saved(fig, tmp_path / "heat")
    fig = figures.speedup_heatmap(gpu_frame, "cuda1", width=style.WIDTHS["double"])
    assert fig.get_figwidth() == 7.0
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["cpu1", "cpu2", "cpu4"]
    assert "0.0250" in texts(fig)  # cpu1 is 40 times slower than cuda1
    assert "1/16" in [t.get_text() for t in fig.axes[1].get_yticklabels()]


def test_cpu_thread_scaling(gpu_frame, frame, tmp_path):
    fig = figures.cpu_thread_scaling(gpu_frame)
    ax = fig.axes[0]
    # 1 to 4 threads, speedups 1 to 3: less than a decade, linear axes from zero.
    assert (ax.get_xscale(), ax.get_yscale()) == ("linear", "linear")
    assert ax.get_ylim()[0] == 0
    assert list(ax.get_xticks()) == [1, 2, 4]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("CPU threads", "Speedup over 1 thread (×)")
    ideal = ax.get_lines()[0]
    assert list(ideal.get_xdata()) == list(ideal.get_ydata()) == [1, 2, 4]
    assert [t.get_text() for t in fig.legends[0].get_texts()][:3] == [
        "ideal",
        "lstm, fp32, single, batch 16",
        "resnet18, fp32, single, batch 16",
    ]
    assert_saved(fig, tmp_path / "threads")
    # resnet18 on 1, 2 and 16 threads (a decade: a log2 axis), resnet50 on one only (no
    # line), vgg11 failed on cpu2: its failure said where it would be, no line.
    fig = figures.cpu_thread_scaling(frame)
    assert fig.axes[0].get_xscale() == "log"
    assert [t.get_text() for t in fig.legends[0].get_texts()][:3] == [
        "ideal",
        "resnet18",
        "vgg11",
    ]
    assert texts(fig) == ["failed"]


def test_multi_gpu_scaling_efficiency(gpu_frame, frame, tmp_path):
    fig = figures.scaling_efficiency(gpu_frame)
    ax = fig.axes[0]
    assert ax.get_ylim() == (0, 110)
    assert ax.get_ylabel() == "Scaling efficiency (%)"
    assert list(ax.get_xticks()) == [1, 2, 4] and ax.get_xlabel() == "GPUs"
    assert [t.get_text() for t in fig.legends[0].get_texts()][:4] == [
        "ideal",
        "lstm, fp32, ddp, batch 16",
        "resnet18, fp32, ddp, batch 16",
        "vgg11, fp32, ddp, batch 16",
    ]
    # lstm and resnet18: 1.8 times the one-GPU time per step for twice (four times) the
    # samples on two (four) GPUs: efficiency 100 / 1.8 % at both counts, from 100% on one.
    medians = [list(container.lines[0].get_ydata()) for container in ax.containers]
    assert medians == [pytest.approx([100, 100 / 1.8, 100 / 1.8])] * 2
    assert texts(fig) == ["failed"]
    assert_saved(fig, tmp_path / "efficiency")
    assert texts(figures.scaling_efficiency(frame)) == ["no multi-GPU records"]


@pytest.fixture
def node_frame(tmp_path):
    collected, problems = tidy.collect(write_records(tmp_path / "nodes", NODE_TRAIN))
    assert problems == []
    return collected


def test_scaling_across_nodes_is_against_one_node_with_the_same_devices(node_frame):
    cells, _ = ratios.node_scaling(node_frame)
    cells = cells.set_index("device")
    assert sorted(cells.index) == ["2x1cpu", "2x2cpu", "2x4cpu", "4x2cpu"]
    assert cells.loc["2x1cpu", "efficiency_median"] == pytest.approx(0.75)
    assert cells.loc["2x2cpu", "efficiency_median"] == pytest.approx(0.9)
    assert cells.loc["4x2cpu", "efficiency_median"] == pytest.approx(0.8)
    assert list(cells.loc[["2x2cpu", "4x2cpu"], "count"]) == [2, 4]  # nodes
    assert list(cells.loc[["2x1cpu", "2x2cpu"], "per_node"]) == [1, 2]
    assert cells.loc["2x4cpu", "status"] == "failed"
    # Against one device, the same records scale over all their processes.
    devices, _ = ratios.scaling(node_frame)
    four = devices.set_index("device").loc["2x2cpu"]
    assert (four["count"], four["nodes"]) == (4, 2)


def test_node_scaling_table_and_figure(node_frame, frame, tmp_path):
    table, footnotes = tables.node_scaling_table(node_frame)
    assert list(table.columns) == ["2x1cpu", "2x2cpu", "2x4cpu", "4x2cpu"]
    assert table.loc["fcn, ddp", "2x2cpu"].startswith("0.90")
    assert table.loc["fcn, ddp", "2x4cpu"] == "failed (a)"
    assert table.attrs["caption"].startswith("Scaling across nodes: throughput on N nodes")
    assert footnotes[-1].startswith("Batch sizes are global mini-batches")
    empty, footnotes = tables.node_scaling_table(frame)
    assert empty.empty
    assert footnotes == ["No train configuration was measured on more than one node."]

    fig = figures.node_scaling_efficiency(node_frame)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "Efficiency over one node (%)" and ax.get_xlabel() == "Nodes"
    assert list(ax.get_xticks()) == [1, 2, 4]
    assert [t.get_text() for t in fig.legends[0].get_texts()][:4] == [
        "ideal",
        "fcn, ddp; 1 processes per node",
        "fcn, ddp; 2 processes per node",
        "fcn, ddp; 4 processes per node",
    ]
    medians = [list(container.lines[0].get_ydata()) for container in ax.containers]
    assert medians == [pytest.approx([100, 75]), pytest.approx([100, 90, 80])]
    assert texts(fig) == ["failed"]
    assert_saved(fig, tmp_path / "nodes")
    assert texts(figures.node_scaling_efficiency(frame)) == ["no multi-node records"]


def test_precision_comparison(gpu_frame, frame, tmp_path):
    fig = figures.precision_comparison(gpu_frame)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["cuda1"]
    assert [t.get_text() for t in visible[0].get_xticklabels()] == ["lstm", "resnet18"]
    assert len(points(visible[0])) == 6
    assert [t.get_text() for t in fig.legends[0].get_texts()][:3] == ["fp32", "bf16", "fp16"]
    assert visible[0].get_ylabel() == "Time per mini-batch (ms)"
    assert_saved(fig, tmp_path / "precision")
    assert texts(figures.precision_comparison(frame)) == ["no model measured in two precisions"]


def test_a_record_copied_to_another_cells_path_is_a_problem(tmp_path):
    (exp_id, rec), (other_id, _) = TRAIN[0], TRAIN[1]
    paths = write_records(tmp_path, [(exp_id, rec)])
    foreign = tmp_path / f"{other_id}.json"
    foreign.parent.mkdir(parents=True, exist_ok=True)
    foreign.write_text(paths[0].read_text())
    collected, problems = tidy.collect([*paths, foreign])
    assert list(collected["id"]) == [exp_id]
    assert problems == [(str(foreign), f"{foreign}: record id {exp_id!r} does not match its path")]


def test_an_invalid_record_keeps_its_cell_marked(tmp_path):
    paths = write_records(tmp_path / "results", TRAIN)
    paths[0].write_text('{"status": "ok"')  # truncated
    frame, problems = tidy.collect(paths)
    frame = tidy.with_invalid_records(frame, problems)
    table, footnotes = outputs.TABLES["train_time_per_batch"](frame, "cpu1")
    assert table.loc["resnet18 (ms)", "cpu1"] == "invalid record (a)"
    assert footnotes[0].startswith(f"(a) invalid record: {paths[0]}: not valid JSON")
    csv = tmp_path / "problems.csv"
    pd.DataFrame(problems, columns=["path", "problem"]).to_csv(csv, index=False)
    assert tidy.problems_warning(csv).startswith("WARNING: 1 result record(s) are invalid")
    pd.DataFrame(columns=["path", "problem"]).to_csv(csv, index=False)
    assert tidy.problems_warning(csv) is None


def busy_frame(tmp_path):
    quiet = train_record("resnet18", "cpu1", samples=steps(0.50, 0.01))
    busy = train_record("resnet18", "cpu2", samples=steps(0.90, 0.01))
    busy[1]["conditions"] = {"busy": True, "other_cpus": 1.2, "steal_cpus": 0.0}
    frame, problems = tidy.collect(write_records(tmp_path, [quiet, busy]))
    assert problems == []
    return frame


def test_a_cell_measured_on_a_busy_machine_is_marked_in_tables(tmp_path):
    frame = busy_frame(tmp_path)
    busy = frame.set_index("device")["busy"].map(tidy.flagged).to_dict()
    assert busy == {"cpu1": False, "cpu2": True}
    table, footnotes = tables.comparison_table(frame, experiment="train")
    assert table.loc["resnet18", "cpu2"].endswith(tables.BUSY_MARK)
    assert not table.loc["resnet18", "cpu1"].endswith(tables.BUSY_MARK)
    assert footnotes == [f"{tables.BUSY_MARK} {tables.BUSY_NOTE}"]
    assert [cell["busy"] for cell in table.attrs["cells"]] == [False, True]
    # A speedup is as disturbed as either of its two measurements.
    speedup, notes = tables.speedup_table(frame, "train", "cpu1")
    assert speedup.loc["resnet18", "cpu2"].endswith(tables.BUSY_MARK) and notes


def hollow(ax) -> int:
    """How many points `ax` draws hollow: white inside, their colour at the edge."""
    return sum(len(line.get_xdata()) for line in ax.lines if line.get_markerfacecolor() == "white")


def test_a_cell_measured_on_a_busy_machine_is_drawn_hollow(tmp_path):
    fig = figures.time_per_batch_by_device(busy_frame(tmp_path))
    assert hollow(fig.axes[0]) == 1  # the cpu2 point
    legend = [text.get_text() for text in fig.legends[0].get_texts()]
    assert legend[-1] == style.FLAGGED_LABEL


def imprecise_frame(tmp_path):
    """resnet18 on cpu1 (precise), on cpu2 (its interval spans more than a factor of 2),
    and on cpu4, busy, with an interval from 1 ms to 1000 s."""
    quiet = train_record("resnet18", "cpu1", samples=steps(0.50, 0.01))
    loose = train_record("resnet18", "cpu2", samples=steps(0.30, 0.01))
    loose[1]["metrics"]["time_per_batch"].update(ci_low=0.2, ci_high=0.45)
    wild = train_record("resnet18", "cpu4", samples=steps(0.20, 0.01))
    metric = wild[1]["metrics"]["time_per_batch"]
    metric["ci_low"], metric["ci_high"] = 1e-3, 1e3
    wild[1]["conditions"] = {"busy": True}
    frame, problems = tidy.collect(write_records(tmp_path, [quiet, loose, wild]))
    assert problems == []
    return frame


def test_a_cell_less_precise_than_asked_is_marked_in_tables(tmp_path):
    frame = imprecise_frame(tmp_path)
    table, footnotes = tables.comparison_table(frame, experiment="train")
    assert table.loc["resnet18", "cpu2"].endswith(tables.IMPRECISE_MARK)
    assert not table.loc["resnet18", "cpu1"].endswith(tables.IMPRECISE_MARK)
    assert f"{tables.IMPRECISE_MARK} {tables.IMPRECISE_NOTE}" in footnotes
    assert [cell["imprecise"] for cell in table.attrs["cells"]] == [False, True, True]
    speedup, notes = tables.speedup_table(frame, "train", "cpu1")
    assert tables.IMPRECISE_MARK in speedup.loc["resnet18", "cpu2"]
    assert r"$\diamond$" in tables.to_latex(table, footnotes, "t")


def test_flagged_cells_are_hollow_and_their_intervals_do_not_set_the_axis(tmp_path):
    frame = imprecise_frame(tmp_path)
    ax = figures.time_per_batch_by_device(frame).axes[0]
    assert hollow(ax) == 2  # the imprecise cpu2 and the busy cpu4 point
    # ms: the medians and the precise interval, not 1 ms to 1000 s; less than a decade,
    # so a linear axis from zero.
    low, high = ax.get_ylim()
    medians = frame["time_per_batch_median"].to_numpy(float) * 1e3
    assert low == 0 and medians.max() < high < 1000
    # The busy cell's interval leaves the axis at the top: an arrow there says so.
    (arrow,) = ax.findobj(lambda artist: artist.get_gid() == marks.BEYOND)
    assert arrow.get_edgecolor()[:3] == to_rgb(style.look("device", "cpu4").color)


def test_the_summary_and_the_end_of_a_run_list_flagged_cells_with_why(tmp_path):
    frame = imprecise_frame(tmp_path)
    listed = summary.attention(frame).groupby("record")["why"].agg(list)
    assert listed["train/resnet18/cpu2/fp32/single/bs16"] == [precision.SPAN_TEXT]
    assert listed["train/resnet18/cpu4/fp32/single/bs16"] == [summary.BUSY, precision.SPAN_TEXT]
    assert "train/resnet18/cpu1/fp32/single/bs16" not in listed
    tidy.write(frame, tmp_path / "tidy.parquet", tmp_path / "tidy.csv")
    note = tidy.flagged_warning(tmp_path / "tidy.parquet")
    assert note.startswith("NOTE: 2 of 3 measured records are flagged busy or imprecise")
    assert f"  train/resnet18/cpu2/fp32/single/bs16: {precision.SPAN_TEXT}" in note
    assert tidy.flagged_warning(tmp_path / "nowhere.parquet") is None


def test_the_caption_names_the_interval_the_records_hold(tmp_path):
    frame = busy_frame(tmp_path)
    table, _ = tables.comparison_table(frame, experiment="train")
    assert "median [95% CI]" in table.attrs["caption"]
    frame["interval"] = statistics.RERUN_INTERVAL
    table, _ = tables.comparison_table(frame, experiment="train")
    assert "median [95% rerun interval]" in table.attrs["caption"]
    # With the host's spread and drift, mixed with the cell's own, or as an older record
    # words it (another module path): still rerun intervals, all of them.
    frame["interval"] = statistics.HOST_RERUN_INTERVAL
    frame.loc[frame.index[0], "interval"] = statistics.RERUN_INTERVAL.replace(
        "accelbench.measuring.statistics", "accelbench.timing"
    )
    table, _ = tables.comparison_table(frame, experiment="train")
    assert "median [95% rerun interval]" in table.attrs["caption"]
    frame.loc[frame.index[-1], "interval"] = statistics.WITHIN_RUN_INTERVAL
    table, _ = tables.comparison_table(frame, experiment="train")
    assert "median [95% CI]" in table.attrs["caption"]


def test_a_grid_whose_every_kernel_record_is_invalid_keeps_its_cells(tmp_path):
    paths = write_records(tmp_path / "results", KERNELS[:2])
    for path in paths:
        path.write_text("{")
    frame, problems = tidy.collect(paths)
    frame = tidy.with_invalid_records(frame, problems)
    assert list(frame["size"]) == [256, 512] and str(frame["size"].dtype) == "Int64"
    assert str(frame["busy"].dtype) == "boolean"
    table, _ = tables.comparison_table(frame, "kernel")
    assert list(table.index) == ["matmul, n=256", "matmul, n=512"]
    # Nothing measured, nothing to compare: the figure (declared for the grid) says so.
    figure = figures.kernel_throughput_by_size(frame)
    assert texts(figure) == ["no kernel measured at two sizes or beside another"]

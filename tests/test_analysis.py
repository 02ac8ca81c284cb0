"""Records -> tidy table -> comparison tables and figures, on small hand-made record sets."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from accelbench.analysis import figures, style, tables, tidy
from accelbench.results import make_record, write_record
from accelbench.timing import rate_from_time, summarize, value

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NO_GPU = "no CUDA device available to PyTorch on this host (CUDA_VISIBLE_DEVICES='')"
FAILED = "RuntimeError: 100% of threads_busy"
OOM = "OutOfMemoryError: CUDA out of memory"


def provenance(gpus=(), slurm=None):
    return {
        "host": "node01",
        "platform": "Linux",
        "cpu_model": "Test CPU",
        "cpu_count": 16,
        "usable_cpus": 16,
        "python": "3.11.9",
        "libraries": {"torch": "2.5.0"},
        "accelerator": {"cuda_runtime": None, "cudnn": None, "gpus": list(gpus), "driver": None},
        "cuda_visible_devices": None,
        "git": {"commit": "abc123", "dirty": False},
        "config_hash": "0123456789abcdef",
        "slurm": slurm,
        "seed": 0,
        "started": "2024-05-01T12:00:00.000+00:00",
        "finished": "2024-05-01T12:00:05.000+00:00",
    }


def train_record(model, device, status="ok", samples=None, reason=None):
    exp_id = f"train/{model}/{device}/fp32/single/bs16"
    params = {
        "model": model,
        "device": device,
        "precision": "fp32",
        "strategy": "single",
        "batch": 16,
        "steps": len(samples or []),
        "warmup_steps": 3,
        "image_size": 64,
        "seed": 0,
    }
    metrics = None
    if status == "ok":
        time = summarize(samples, "s")
        metrics = {
            "time_per_batch": time,
            "throughput": rate_from_time(time, 16, "samples/s"),
            "peak_memory": value(123456789, "bytes"),
            "loss_first": value(2.5, "loss"),
            "loss_last": value(2.1, "loss"),
            "parameters": value(11_000_000, "count"),
        }
    slurm = {
        "job_id": "42",
        "partition": "medium",
        "node": "node01",
        "cpus_per_task": "16",
        "job_gpus": None,
        "ntasks": "1",
        "mem_per_node_mb": "4000",
    }
    return exp_id, make_record(
        experiment="train",
        experiment_id=exp_id,
        status=status,
        params=params,
        provenance=provenance(slurm=slurm),
        metrics=metrics,
        reason=reason,
    )


def kernel_record(backend, device, size, status="ok", samples=None, reason=None):
    exp_id = f"kernels/matmul/{device}/{backend}/float32/n{size}"
    params = {
        "kernel": "matmul",
        "device": device,
        "backend": backend,
        "dtype": "float32",
        "size": size,
        "seed": 0,
        "min_run_time": 0.3,
        "samples": 10,
    }
    metrics = check = None
    if status == "ok":
        time = summarize(samples, "s")
        flops = 2 * size**3
        metrics = {
            "time": time,
            "gflops": rate_from_time(time, flops / 1e9, "GFLOP/s"),
            "bandwidth": rate_from_time(time, 12 * size**2 / 1e9, "GB/s"),
            "arithmetic_intensity": value(flops / (12 * size**2), "flop/byte"),
            "first_call_time": value(0.01, "s"),
            "threads": value(1, "threads"),
        }
        check = {
            "passed": True,
            "relative_error": 1e-7,
            "tolerance": 1e-4,
            "reference": "numpy float64",
        }
    gpus = ["NVIDIA H100"] if device.startswith("cuda") else []
    return exp_id, make_record(
        experiment="kernel",
        experiment_id=exp_id,
        status=status,
        params=params,
        provenance=provenance(gpus),
        metrics=metrics,
        check=check,
        reason=reason,
    )


def steps(start, stride, count=10):
    return [start + stride * i for i in range(count)]


TRAIN = [
    train_record(
        "resnet18", "cpu1", samples=[0.50, 0.51, 0.52, 0.53, 0.54, 0.56, 0.57, 0.58, 0.59, 0.60]
    ),
    train_record(
        "resnet18",
        "cpu2",
        samples=[0.300, 0.305, 0.310, 0.315, 0.320, 0.330, 0.335, 0.340, 0.345, 0.350],
    ),
    train_record("resnet18", "cpu16", samples=steps(0.100, 0.001)),
    train_record("resnet18", "cuda1", "unavailable", reason=NO_GPU),
    train_record("resnet50", "cpu1", samples=[0.8, 0.9, 1.0, 1.1, 1.2]),
    train_record("resnet50", "cuda1", "unavailable", reason=NO_GPU),
    train_record("vgg11", "cpu1", samples=steps(1.0, 0.1)),
    train_record("vgg11", "cpu2", "failed", reason=FAILED),
    train_record("vgg11", "cuda1", "oom", reason=OOM),
]
KERNELS = [
    kernel_record("torch", "cpu1", 256, samples=steps(2.00e-4, 0.01e-4)),
    kernel_record("torch", "cpu1", 512, samples=steps(1.60e-3, 0.01e-3)),
    kernel_record("torch", "cpu2", 256, samples=steps(1.10e-4, 0.01e-4)),
    kernel_record("torch", "cpu2", 512, samples=steps(0.90e-3, 0.01e-3)),
    kernel_record("numba", "cuda1", 256, "unavailable", reason=NO_GPU),
    kernel_record("numba", "cuda1", 512, "unavailable", reason=NO_GPU),
]


def write_records(root, records):
    paths = []
    for exp_id, record in records:
        paths.append(write_record(root / f"{exp_id}.json", record))
    return paths


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
    assert "missing keys ['check']" in problems[1][1]
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
    assert columns[4:13] == [
        "kernel",
        "model",
        "device",
        "backend",
        "dtype",
        "size",
        "precision",
        "strategy",
        "batch",
    ]
    assert columns[-18:] == [
        "check_passed",
        "check_relative_error",
        "host",
        "cpu_model",
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
    first = write_record(tmp_path / "a.json", record)
    second = write_record(tmp_path / "b.json", record)
    _, other = train_record("resnet18", "cpu2", samples=steps(1.0, 0.1))
    other["metrics"]["time_per_batch"]["unit"] = "ms"
    third = write_record(tmp_path / "c.json", other)
    _, clashing = train_record("resnet18", "cpu4", samples=steps(1.0, 0.1))
    clashing["params"]["host"] = "elsewhere"
    fourth = write_record(tmp_path / "d.json", clashing)
    _, odd = train_record("resnet18", "cpu8", samples=steps(1.0, 0.1))
    odd["provenance"]["accelerator"] = "none"
    fifth = write_record(tmp_path / "e.json", odd)
    collected, problems = tidy.collect([fifth, fourth, third, second, first])
    assert list(collected["id"]) == [exp_id]
    assert [path for path, _ in problems] == [str(path) for path in (second, third, fourth, fifth)]
    assert "already read" in problems[0][1]
    assert "unit mismatch: time_per_batch_median in 'ms', earlier records use 's'" in problems[1][1]
    assert "columns ['host'] named twice" in problems[2][1]
    assert "malformed record (AttributeError" in problems[3][1]


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
    assert list(table.index) == ["resnet18", "resnet50", "vgg11"]
    assert table.to_dict("index") == {
        "resnet18": {
            "cpu1": "550 [510, 590]",
            "cpu2": "325 [305, 345]",
            "cpu16": "104.5 [101.0, 108.0]",
            "cuda1": "n/a (a)",
        },
        "resnet50": {"cpu1": "1000 [800, 1200]", "cpu2": "–", "cpu16": "–", "cuda1": "n/a (a)"},
        "vgg11": {
            "cpu1": "1450 [1100, 1800]",
            "cpu2": "failed (b)",
            "cpu16": "–",
            "cuda1": "OOM (c)",
        },
    }
    assert table.attrs["caption"] == (
        "Time per mini-batch (ms), median [95% CI]; fp32, single, batch 16"
    )
    # A row with one number has nothing to be best against: only resnet18 has a bold cell.
    assert table.attrs["best"] == [["resnet18", "cpu16"]]
    assert footnotes == [
        f"(a) n/a: {NO_GPU} [resnet18 on cuda1; resnet50 on cuda1]",
        f"(b) failed: {FAILED} [vgg11 on cpu2]",
        f"(c) OOM: {OOM} [vgg11 on cuda1]",
        "Too few samples for a 95% interval; the interval shown has the level "
        "in parentheses: resnet50 on cpu1 (94%)",
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
    assert markdown.splitlines()[:7] == [
        "Table: Time per mini-batch (ms), median [95% CI]; fp32, single, batch 16",
        "",
        "| Model | cpu1 | cpu2 | cpu16 | cuda1 |",
        "|:---|---:|---:|---:|---:|",
        "| resnet18 | 550 [510, 590] | 325 [305, 345] | **104.5 [101.0, 108.0]** | n/a (a) |",
        "| resnet50 | 1000 [800, 1200] | – | – | n/a (a) |",
        "| vgg11 | 1450 [1100, 1800] | failed (b) | – | OOM (c) |",
    ]
    assert "(b) failed: RuntimeError: 100% of threads\\_busy [vgg11 on cpu2]" in markdown

    latex = paths[1].read_text(encoding="utf-8")
    for line in (
        r"\toprule",
        r"\midrule",
        r"\bottomrule",
        r"\begin{tabular}{lrrrr}",
        r"\caption{Time per mini-batch (ms), median [95\% CI]; fp32, single, batch 16}",
        r"Model & cpu1 & cpu2 & cpu16 & cuda1 \\",
        r"resnet18 & 550 [510, 590] & 325 [305, 345] & \textbf{104.5 [101.0, 108.0]} & n/a (a) \\",
        r"resnet50 & 1000 [800, 1200] & -- & -- & n/a (a) \\",
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
    assert list(table.index) == [
        "matmul, numba, n=256",
        "matmul, numba, n=512",
        "matmul, torch, n=256",
        "matmul, torch, n=512",
    ]
    # Kernel times read in µs, the unit that makes the smallest median at least 1.
    assert table.attrs["caption"] == "Kernel time (µs), median [95% CI]; float32"
    assert table.loc["matmul, torch, n=256"].tolist() == [
        "204.5 [201.0, 208.0]",
        "114.5 [111.0, 118.0]",
        "–",
    ]
    assert table.loc["matmul, torch, n=512"].tolist() == ["1645 [1610, 1680]", "945 [910, 980]", "–"]
    assert table.loc["matmul, numba, n=512"].tolist() == ["–", "–", "n/a (a)"]
    assert table.attrs["best"] == [
        ["matmul, torch, n=256", "cpu2"],
        ["matmul, torch, n=512", "cpu2"],
    ]
    assert footnotes == [
        f"(a) n/a: {NO_GPU} [matmul, numba, n=256 on cuda1; matmul, numba, n=512 on cuda1]"
    ]


def test_tables_of_nothing_and_of_only_failures(tmp_path):
    empty, _ = tidy.collect([])
    table, footnotes = tables.comparison_table(empty, experiment="train")
    assert table.empty and footnotes == []
    tables.write_table(table, footnotes, tmp_path / "empty")
    assert "| Model |" in (tmp_path / "empty.md").read_text(encoding="utf-8")

    paths = write_records(tmp_path / "results", [TRAIN[3], TRAIN[7], TRAIN[8]])
    failures, _ = tidy.collect(paths)
    table, footnotes = tables.comparison_table(failures, experiment="train")
    assert table.to_dict("index") == {
        "resnet18": {"cpu2": "–", "cuda1": "n/a (a)"},
        "vgg11": {"cpu2": "failed (b)", "cuda1": "OOM (c)"},
    }
    assert table.attrs["best"] == [] and len(footnotes) == 3
    assert table.attrs["caption"] == "Time per mini-batch, median [95% CI]; fp32, single, batch 16"


# --- figures ----------------------------------------------------------------------------------


def assert_saved(fig, stem):
    pdf, png = style.save(fig, stem)
    assert pdf.read_bytes().startswith(b"%PDF") and pdf.stat().st_size > 1000
    assert png.read_bytes().startswith(PNG_MAGIC) and png.stat().st_size > 1000


def texts(fig):
    return [text.get_text() for ax in fig.axes for text in ax.texts]


def test_time_per_batch_figure(frame, tmp_path):
    fig = figures.time_per_batch_by_device(frame)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "Time per mini-batch (s)"
    assert ax.get_yscale() == "linear"
    assert [label.get_text() for label in ax.get_xticklabels()] == ["resnet18", "resnet50", "vgg11"]
    assert sum(len(container) for container in ax.containers if hasattr(container, "patches")) == 5
    assert sorted(texts(fig)) == ["OOM", "failed", "n/a", "n/a"]
    assert [text.get_text() for text in fig.legends[0].get_texts()] == [
        "cpu1",
        "cpu2",
        "cpu16",
        "cuda1",
    ]
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


def test_kernel_figure(frame, tmp_path):
    fig = figures.kernel_throughput_by_size(frame)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["cpu1", "cpu2", "cuda1"]
    assert visible[0].get_ylabel() == "Throughput (GFLOP/s)"
    assert visible[0].get_xlabel() == "Problem size n"
    assert (visible[0].get_xscale(), visible[0].get_yscale()) == ("log", "log")
    assert texts(fig) == ["n/a", "n/a"]
    assert [text.get_text() for text in fig.legends[0].get_texts()] == ["numba", "torch", "float32"]
    assert_saved(fig, tmp_path / "kernel")


def test_figures_of_only_failures_and_of_nothing(tmp_path):
    paths = write_records(tmp_path / "results", [TRAIN[3], TRAIN[7], TRAIN[8]] + KERNELS[4:])
    failures, _ = tidy.collect(paths)
    fig = figures.time_per_batch_by_device(failures)
    assert sorted(texts(fig)) == ["OOM", "failed", "n/a"]
    assert list(fig.axes[0].get_yticks()) == []
    assert_saved(fig, tmp_path / "fail_train")
    fig = figures.kernel_throughput_by_size(failures)
    assert texts(fig) == ["n/a", "n/a"]
    assert_saved(fig, tmp_path / "fail_kernel")

    empty, _ = tidy.collect([])
    for function, message in (
        (figures.time_per_batch_by_device, "no training records"),
        (figures.kernel_throughput_by_size, "no kernel records"),
    ):
        fig = function(empty)
        assert texts(fig) == [message]
        assert_saved(fig, tmp_path / function.__name__)

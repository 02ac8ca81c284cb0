"""The result record contract and its atomic write."""

from __future__ import annotations

import json
import math
import os
import stat

import pytest

from accelbench.measuring import statistics
from accelbench.records import record as results

from records import datasci_record, kernel_record, roof_record, steps, train_record


def record(**change):
    fields = dict(
        experiment="kernel",
        experiment_id="kernels/matmul/cpu1/numpy/float64/n8",
        status="ok",
        params={"kernel": "matmul", "device": "cpu1", "backend": "numpy", "dtype": "float64"}
        | {"size": 8},
        provenance={"host": "h"},
        metrics={"time": statistics.summarize([1.0, 2.0, 3.0], "s")},
    )
    fields.update(change)
    return results.make_record(**fields)


def test_write_then_load_round_trips(tmp_path):
    path = results.write_record(tmp_path / "a" / "r.json", record())
    assert results.load_record(path) == record()
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"status": "crashed"}, 'status: "crashed" is not one of "ok", "unavailable"'),
        ({"status": "unavailable", "metrics": {}}, "reason: null is not a string"),
        ({"metrics": {}}, r"metrics: has 0 entries, fewer than 1 \(an ok record has metrics"),
        ({"metrics": {"time": {"median": 1.0}}}, "metrics.time: 'unit' is missing"),
        (
            {"metrics": {"time": {**statistics.summarize([1.0], "s"), "median": "fast"}}},
            'metrics.time.median: "fast" is not a number',
        ),
    ],
)
def test_invalid_records_are_refused_before_writing(change, message):
    with pytest.raises(results.RecordError, match=message):
        record(**change)


def test_non_finite_numbers_become_null_where_null_is_allowed(tmp_path):
    rec = record(check={"passed": True, "relative_error": math.inf})
    path = results.write_record(tmp_path / "r.json", rec)
    assert json.loads(path.read_text())["check"]["relative_error"] is None
    with pytest.raises(results.RecordError, match="metrics.rate.value: Infinity is not a finite"):
        record(metrics={"time": rec["metrics"]["time"], "rate": statistics.value(math.inf, "GB/s")})


def test_a_file_with_nan_anywhere_is_not_json(tmp_path):
    path = results.write_record(tmp_path / "r.json", record())
    path.write_text(path.read_text().replace('"size": 8', '"size": 8, "seed": NaN', 1))
    with pytest.raises(results.RecordError, match=r"r\.json: not valid JSON \(NaN is not JSON"):
        results.load_record(path)


def test_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(results.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        results.write_record(tmp_path / "r.json", record())
    assert list(tmp_path.iterdir()) == []


def test_load_reports_the_file_and_the_defect(tmp_path):
    truncated = tmp_path / "t.json"
    truncated.write_text('{"status": "ok", "metr')
    with pytest.raises(results.RecordError, match=r"t\.json: not valid JSON"):
        results.load_record(truncated)
    partial = tmp_path / "p.json"
    partial.write_text(json.dumps({"status": "ok"}))
    with pytest.raises(results.RecordError, match=r"p\.json: 'schema_version' is missing"):
        results.load_record(partial)


def test_series_round_trip_with_non_finite_values_as_null(tmp_path):
    rec = record(series={"loss": {"unit": "loss", "values": [2.5, 1.0, math.nan]}})
    path = results.write_record(tmp_path / "r.json", rec)
    assert results.load_record(path)["series"] == {
        "loss": {"unit": "loss", "values": [2.5, 1.0, None]}
    }
    assert "series" not in record(), "records without per-step values have no series key"


@pytest.mark.parametrize(
    ("series", "message"),
    [
        ([1.0, 2.0], "series: \\[1.0, 2.0\\] is not an object"),
        ({"loss": [1.0]}, "series.loss: \\[1.0\\] is not an object"),
        ({"loss": {"unit": "loss", "values": [1.0], "n": 1}}, "series.loss: unknown key 'n'"),
        ({"loss": {"unit": 1, "values": [1.0]}}, "series.loss.unit: 1 is not one of"),
        ({"loss": {"unit": "loss", "values": 1.0}}, "series.loss.values: 1.0 is not a list"),
        ({"loss": {"unit": "loss", "values": [1.0, "x"]}}, 'series.loss.values.1: "x" is not'),
        ({"loss": {"unit": "loss", "values": [True]}}, "series.loss.values.0: true is not"),
    ],
)
def test_malformed_series_are_refused(series, message):
    rec = record()
    rec["series"] = series
    with pytest.raises(results.RecordError, match=message):
        results.validate_record(rec)


def test_raw_samples_and_what_measured_round_trip(tmp_path):
    raw = {"time": statistics.raw_samples("s", [[1.0, 2.0], [3.0, math.inf]])}
    measured_by = {"implementation": "accelbench.kernels.matmul:numpy", "timer": "t"}
    rec = record(raw=raw, measured_by=measured_by)
    loaded = results.load_record(results.write_record(tmp_path / "r.json", rec))
    assert loaded["raw"] == {"time": {"unit": "s", "runs": [[1.0, 2.0], [3.0, None]]}}
    assert loaded["measured_by"] == measured_by
    assert "raw" not in record() and "measured_by" not in record()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("raw", [1.0], "raw: \\[1.0\\] is not an object"),
        ("raw", {"time": {"unit": "s", "values": [1.0]}}, "raw.time: 'runs' is missing"),
        ("raw", {"time": {"unit": "s", "runs": [1.0, 2.0]}}, "raw.time.runs.0: 1.0 is not a list"),
        ("raw", {"time": {"unit": "s", "runs": [[1.0], ["x"]]}}, 'raw.time.runs.1.0: "x" is not'),
        ("raw", {"time": {"unit": "s", "runs": [[True]]}}, "raw.time.runs.0.0: true is not"),
        ("raw", {"time": {"unit": "s", "runs": [[-1.0]]}}, "raw.time.runs.0.0: -1.0 is below 0"),
        ("measured_by", "numpy", 'measured_by: "numpy" is not an object'),
        ("measured_by", {"implementation": "m:numpy"}, "measured_by: 'timer' is missing"),
    ],
)
def test_malformed_raw_samples_or_measured_by_are_refused(key, value, message):
    rec = record()
    rec[key] = value
    with pytest.raises(results.RecordError, match=message):
        results.validate_record(rec)


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_records_get_the_mode_the_umask_gives_every_new_file(tmp_path, umask, mode):
    previous = os.umask(umask)
    try:
        path = results.write_record(tmp_path / "r.json", record())
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_records_measured_again_are_kept_first(tmp_path):
    root = tmp_path / "results"
    record = root / "kernels" / "saxpy" / "cpu1" / "numpy" / "float64" / "n8.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"status": "ok"}')
    missing = root / "kernels" / "saxpy" / "cpu1" / "numpy" / "float64" / "n16.json"
    log = root / "logs" / "n8.log"
    archive = root / "replaced" / "run"
    kept = results.keep_replaced([record, missing, log], root, archive)
    assert kept == [archive / "kernels" / "saxpy" / "cpu1" / "numpy" / "float64" / "n8.json"]
    assert kept[0].read_text() == '{"status": "ok"}' and record.exists()


def valid(family="kernel"):
    """A record of `family` as the measuring code writes it (tests/records.py)."""
    made = {
        "kernel": lambda: kernel_record("torch", "cpu1", 64, samples=steps(2e-4, 1e-6)),
        "train": lambda: train_record("resnet18", "cpu1", samples=steps(0.5, 0.01)),
        "datasci": lambda: datasci_record("groupby", "cpu1", 1000, 1e-3),
        "roof": lambda: roof_record("cuda1", host_copy=25.0),
    }[family]()
    return json.loads(json.dumps(made[1]))


def set_in(record, where, new):
    *parents, key = where.split(".")
    for part in parents:
        record = record[part]
    record[key] = new


def drop(record, where):
    *parents, key = where.split(".")
    for part in parents:
        record = record[part]
    del record[key]


# (family, how the record lies, what the message names)
LIES = [
    ("kernel", lambda r: set_in(r, "metrics.time.median", True), "metrics.time.median"),
    ("kernel", lambda r: set_in(r, "metrics.time.median", -1e6), "metrics.time.median"),
    ("kernel", lambda r: set_in(r, "metrics.time.median", math.nan), "metrics.time.median"),
    ("kernel", lambda r: set_in(r, "metrics.time.ci_high", math.inf), "metrics.time.ci_high"),
    ("kernel", lambda r: set_in(r, "metrics.time.median", None), "metrics.time.median"),
    ("kernel", lambda r: set_in(r, "metrics.time.median", "0.1"), "metrics.time.median"),
    ("kernel", lambda r: set_in(r, "metrics.gflops.min", -1.0), "metrics.gflops.min"),
    ("kernel", lambda r: set_in(r, "metrics.time.n", True), "metrics.time.n"),
    ("kernel", lambda r: set_in(r, "metrics.time.n", 0), "metrics.time.n"),
    ("kernel", lambda r: set_in(r, "metrics.time.n", 10.0), "metrics.time.n"),
    ("kernel", lambda r: set_in(r, "metrics.time.ci_level", 1.5), "metrics.time.ci_level"),
    ("kernel", lambda r: set_in(r, "metrics.time.iqr", -1e-6), "metrics.time.iqr"),
    ("kernel", lambda r: set_in(r, "metrics.time.unit", "parsecs"), "metrics.time.unit"),
    ("kernel", lambda r: set_in(r, "metrics.time.fastest", 1e-4), "unknown key 'fastest'"),
    ("kernel", lambda r: drop(r, "metrics.time.q1"), "metrics.time: 'q1' is missing"),
    ("kernel", lambda r: set_in(r, "metrics.time.ci_low", 1.0), "metrics.time: ci_low"),
    ("kernel", lambda r: set_in(r, "metrics.time.q3", 0.0), "is above q3 0.0"),
    ("kernel", lambda r: set_in(r, "metrics.time.min", 1.0), "metrics.time: min"),
    ("kernel", lambda r: set_in(r, "metrics.threads.value", -1), "metrics.threads.value"),
    ("kernel", lambda r: set_in(r, "metrics.threads.value", 1.5), "metrics.threads.value"),
    ("kernel", lambda r: set_in(r, "metrics.threads.median", 1), "unknown key 'median'"),
    ("kernel", lambda r: drop(r, "metrics.time"), "metrics: 'time' is missing"),
    ("train", lambda r: drop(r, "metrics.time_per_batch"), "'time_per_batch' is missing"),
    ("datasci", lambda r: drop(r, "metrics.time"), "metrics: 'time' is missing"),
    ("roof", lambda r: drop(r, "metrics.memory_bandwidth"), "has memory_bandwidth or says why"),
    ("roof", lambda r: drop(r, "metrics.h2d_bandwidth"), "has h2d_bandwidth or says why not"),
    ("train", lambda r: set_in(r, "metrics.peak_memory.value", -5), "peak_memory.value"),
    ("kernel", lambda r: set_in(r, "surprise", 1), "'surprise'"),
    ("kernel", lambda r: set_in(r, "schema_version", True), "schema_version"),
    ("kernel", lambda r: set_in(r, "status", "crashed"), "status"),
    ("kernel", lambda r: set_in(r, "experiment", "train"), "experiment"),
    ("kernel", lambda r: set_in(r, "check.passed", False), "check.passed"),
    ("kernel", lambda r: set_in(r, "params.size", 4096), "params.size"),
    ("kernel", lambda r: set_in(r, "params.size", "64"), "params.size"),
    ("kernel", lambda r: set_in(r, "params.size", True), "params.size"),
    ("kernel", lambda r: set_in(r, "params.device", "cpu2"), "params.device"),
    ("kernel", lambda r: drop(r, "params.backend"), "params: 'backend' is missing"),
    ("train", lambda r: set_in(r, "params.batch", 32), "params.batch"),
    ("train", lambda r: set_in(r, "params.precision", "bf16"), "params.precision"),
    ("datasci", lambda r: set_in(r, "params.workload", "kmeans"), "params.workload"),
    ("roof", lambda r: set_in(r, "params.dtype", "float64"), "params.dtype"),
    ("kernel", lambda r: set_in(r, "id", "kernels/matmul/cpu1/torch/float32/n-64"), "id"),
    ("kernel", lambda r: set_in(r, "id", "somewhere/else"), "id"),
    ("kernel", lambda r: set_in(r, "conditions", {"busy": "yes"}), "conditions.busy"),
    ("kernel", lambda r: set_in(r, "provenance.accelerator.gpus", "H100"), "gpus"),
    ("kernel", lambda r: set_in(r, "provenance.host", 7), "provenance.host"),
    ("train", lambda r: r.update(status="failed", reason="RuntimeError: x"), "metrics"),
    ("kernel", lambda r: set_in(r, "transient", True), 'status: "ok" is not "failed"'),
    ("train", lambda r: set_in(r, "transient", False), "transient: false is not true"),
]


@pytest.mark.parametrize(
    ("family", "lie", "named"), LIES, ids=[f"{case[0]}-{case[2]}" for case in LIES]
)
def test_a_record_that_lies_is_refused_naming_the_key(family, lie, named):
    record = valid(family)
    results.validate_record(record)
    lie(record)
    with pytest.raises(results.RecordError) as refused:
        results.validate_record(record, "results/r.json")
    assert str(refused.value).startswith("results/r.json: ")
    assert named in str(refused.value)


def test_a_loss_and_an_energy_below_the_idle_baseline_may_be_negative():
    record = valid("train")
    record["metrics"]["loss_last"]["value"] = -0.3
    record["metrics"]["energy_per_step_above_idle"] = statistics.summarize([-0.2, 0.1, 0.3], "J")
    results.validate_record(record)
    record["metrics"]["energy_per_step"] = statistics.summarize([-0.2, 0.1, 0.3], "J")
    with pytest.raises(results.RecordError, match=r"metrics\.energy_per_step\.\w+: -"):
        results.validate_record(record)


def test_a_roof_without_a_ceiling_says_why():
    record = valid("roof")
    del record["metrics"]["memory_bandwidth"]
    record["check"]["unmeasured"] = {"memory_bandwidth": "no backend reads float16 arrays"}
    results.validate_record(record)
    record["check"]["unmeasured"] = {"peak_gflops": "no float16 GEMM"}
    with pytest.raises(results.RecordError, match=r"check\.unmeasured: 'memory_bandwidth' is"):
        results.validate_record(record)


def test_every_family_of_records_is_valid_as_written():
    for family in ("kernel", "train", "datasci", "roof"):
        results.validate_record(valid(family))

"""The result record contract and its atomic write."""

from __future__ import annotations

import json
import math
import os
import stat

import pytest

from accelbench import results, timing


def record(**change):
    fields = dict(
        experiment="kernel",
        experiment_id="kernels/matmul/cpu1/numpy/float64/n8",
        status="ok",
        params={"kernel": "matmul"},
        provenance={"host": "h"},
        metrics={"time": timing.summarize([1.0, 2.0, 3.0], "s")},
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
        ({"status": "crashed"}, "status 'crashed' is not one of"),
        ({"status": "unavailable", "metrics": {}}, "needs a reason"),
        ({"metrics": {}}, "status 'ok' but no metrics"),
        ({"metrics": {"time": {"median": 1.0}}}, "must be an object with a 'unit'"),
        ({"metrics": {"time": {"unit": "s", "median": "fast"}}}, "is not a number"),
    ],
)
def test_invalid_records_are_refused_before_writing(change, message):
    with pytest.raises(results.RecordError, match=message):
        record(**change)


def test_non_finite_numbers_become_null(tmp_path):
    rec = record(metrics={"rate": timing.value(math.inf, "GB/s")})
    path = results.write_record(tmp_path / "r.json", rec)
    assert json.loads(path.read_text())["metrics"]["rate"]["value"] is None


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
    with pytest.raises(results.RecordError, match=r"p\.json: missing keys"):
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
        ([1.0, 2.0], "'series' must be an object"),
        ({"loss": [1.0]}, "series 'loss' must be an object with 'unit' and 'values'"),
        ({"loss": {"unit": "loss", "values": [1.0], "n": 1}}, "with 'unit' and 'values'"),
        ({"loss": {"unit": 1, "values": [1.0]}}, "needs a text 'unit' and a list 'values'"),
        ({"loss": {"unit": "loss", "values": 1.0}}, "needs a text 'unit' and a list 'values'"),
        ({"loss": {"unit": "loss", "values": [1.0, "x"]}}, "series loss\\[1\\] is not a number"),
        ({"loss": {"unit": "loss", "values": [True]}}, "series loss\\[0\\] is not a number"),
    ],
)
def test_malformed_series_are_refused(series, message):
    rec = record()
    rec["series"] = series
    with pytest.raises(results.RecordError, match=message):
        results.validate_record(rec)


def test_raw_samples_and_what_measured_round_trip(tmp_path):
    raw = {"time": timing.raw_samples("s", [[1.0, 2.0], [3.0, math.inf]])}
    measured_by = {"implementation": "accelbench.kernels.matmul:numpy", "timer": "t"}
    rec = record(raw=raw, measured_by=measured_by)
    loaded = results.load_record(results.write_record(tmp_path / "r.json", rec))
    assert loaded["raw"] == {"time": {"unit": "s", "runs": [[1.0, 2.0], [3.0, None]]}}
    assert loaded["measured_by"] == measured_by
    assert "raw" not in record() and "measured_by" not in record()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("raw", [1.0], "'raw' must be an object"),
        ("raw", {"time": {"unit": "s", "values": [1.0]}}, "raw 'time' must be an object"),
        ("raw", {"time": {"unit": "s", "runs": [1.0, 2.0]}}, "a list of lists of samples"),
        ("raw", {"time": {"unit": "s", "runs": [[1.0], ["x"]]}}, "raw time, run 2: a sample"),
        ("raw", {"time": {"unit": "s", "runs": [[True]]}}, "raw time, run 1: a sample"),
        ("measured_by", "numpy", "'measured_by' must be an object"),
        ("measured_by", {"implementation": "m:numpy"}, "text 'implementation' and 'timer'"),
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

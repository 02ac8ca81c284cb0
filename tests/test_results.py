"""The result record contract and its atomic write."""

from __future__ import annotations

import json
import math

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

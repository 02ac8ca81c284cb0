"""A host's first cells (accelbench.run.first_cells): the records whose interval came from
their own runs alone, listed for `make run` to measure again once the host knows its
drift, and only then."""

from __future__ import annotations

import json

from accelbench import cli
from accelbench.measuring import rerun
from accelbench.measuring.statistics import HOST_RERUN_INTERVAL, RERUN_INTERVAL
from accelbench.records.record import REPLACED_DIR, write_record
from accelbench.run.first_cells import first_cells

from records import kernel_record

SAMPLES = [0.010, 0.011, 0.012]


def planted(results, size, device="cpu2", interval=RERUN_INTERVAL, runs=3, status="ok"):
    """A matmul record of `runs` runs whose interval is `interval`, under `results`; one
    with the host's interval keeps the host's spread and drift, as a measured one does."""
    exp_id, record = kernel_record("numpy", device, size, status, SAMPLES, "it failed")
    if status == "ok":
        record["params"]["interval"] = interval
        record["conditions"] = {"busy": False, "runs": runs}
        if interval == HOST_RERUN_INTERVAL:
            record["conditions"].update(rerun.Spread(host=0.02, drift=0.03).as_record())
    return write_record(results / f"{exp_id}.json", record)


def knowing(kind: str) -> rerun.HostSpreads:
    """A host that has measured enough recent cells of `kind` to say its spread and drift."""
    spreads = rerun.HostSpreads([])
    for _ in range(rerun.LEAST_CELLS):
        spreads.add(kind, [0.0, 0.02, 0.05])
    return spreads


def test_only_cells_measured_alone_that_the_host_now_knows_are_listed(tmp_path):
    results = tmp_path / "results"
    alone = planted(results, 8)
    planted(results, 16, interval=HOST_RERUN_INTERVAL)  # had the host's word
    planted(results, 32, runs=1)  # one run: no interval across runs
    planted(results, 64, status="failed")
    planted(results, 128, device="cuda1")  # a kind the host has not measured yet
    replaced = planted(results, 256)
    (results / REPLACED_DIR).mkdir()
    replaced.rename(results / REPLACED_DIR / replaced.name)  # an earlier version: not a cell
    (results / "broken.json").write_text("{")  # the aggregation's to list

    assert first_cells(results, knowing("cpu")) == [alone]
    assert first_cells(results, rerun.HostSpreads([])) == []  # nothing known: left alone


def test_a_record_of_an_earlier_version_measured_alone_is_listed(tmp_path):
    """Its interval is worded as that version worded it (three runs' MADn, before the
    range): what tells it was measured alone is that it keeps no host spread."""
    results = tmp_path / "results"
    earlier = planted(
        results, 8, interval=RERUN_INTERVAL.replace("S(log run medians)", "MADn(log run medians)")
    )
    assert first_cells(results, knowing("cpu")) == [earlier]


def test_the_command_names_them_from_this_hosts_spreads(tmp_path, capsys):
    results = tmp_path / "results"
    alone = planted(results, 8)
    assert cli.main(["first-cells", str(results)]) == 0
    assert capsys.readouterr().out == ""  # a fresh host: measuring again would not help
    spreads = knowing("cpu")
    spreads.path = rerun.spreads_file()  # this host's, in the test's temporary folder
    spreads.add("cpu", [0.0, 0.01, 0.03])
    assert json.loads(spreads.path.read_text())
    assert cli.main(["first-cells", str(results)]) == 0
    assert capsys.readouterr().out.splitlines() == [str(alone)]

"""The report's summary page, from fixed records."""

from __future__ import annotations

import copy
import html
import subprocess
import sys

import pandas as pd
import pytest

from accelbench import studies
from accelbench.analysis import outputs, summary, tables, tidy
from accelbench.measuring import precision, statistics
from accelbench.records.record import make_record

from records import (
    FAILED,
    GPU_TRAIN,
    KERNELS,
    NO_GPU,
    TRAIN,
    datasci_records,
    kernel_record,
    timed_kernel,
    write_records,
)


@pytest.fixture
def frame(tmp_path):
    records = [*KERNELS, *TRAIN]
    busy_id, busy = next((exp_id, r) for exp_id, r in records if r["status"] == "ok")
    busy = copy.deepcopy(busy)
    busy["conditions"] = {**(busy.get("conditions") or {}), "busy": True}
    failed = make_record(
        experiment="kernel",
        experiment_id="kernels/matmul/cpu1/numba/float64/n64",
        status="failed",
        reason="result differs from the float64 reference",
        params={
            "kernel": "matmul",
            "device": "cpu1",
            "backend": "numba",
            "dtype": "float64",
            "size": 64,
        },
        provenance={},
    )
    records = [(i, busy if i == busy_id else r) for i, r in records] + [(failed["id"], failed)]
    found, problems = tidy.collect(write_records(tmp_path, records))
    assert problems == []
    return found


def test_the_fastest_backend_of_each_kernel_cell_is_the_smallest_median(frame):
    best = summary.best_backends(frame)
    assert not best.empty
    ok = frame[(frame["experiment"] == "kernel") & (frame["status"] == "ok")]
    for _, row in best.iterrows():
        cell = ok[
            (ok["kernel"] == row["kernel"])
            & (ok["dtype"] == row["dtype"])
            & (ok["size"] == row["size"])
            & (ok["device"] == row["device"])
        ]
        fastest = cell.loc[cell["time_median"].astype(float).idxmin(), "backend"]
        assert row["fastest backend"] == fastest and row["backends"] == len(cell)


def test_the_fastest_device_has_its_speedup_over_the_baseline(frame):
    found = summary.fastest_devices(frame, "cpu1")
    assert not found.empty
    ok = frame[(frame["experiment"] == "train") & (frame["status"] == "ok")]
    row = found.iloc[0]
    cell = ok[(ok["model"] == row["model"]) & (ok["batch"] == row["batch"])]
    cell = cell[(cell["precision"] == row["precision"]) & (cell["strategy"] == row["strategy"])]
    times = cell.set_index("device")["time_per_batch_median"].astype(float)
    assert row["fastest device"] == times.idxmin()
    if "cpu1" in times:
        assert row["speedup over cpu1"] == f"{times['cpu1'] / times.min():.2f}x"


def test_failed_and_busy_cells_are_listed_with_why(frame):
    listed = summary.attention(frame).set_index("record")
    failed = listed.loc["kernels/matmul/cpu1/numba/float64/n64"]
    assert failed["why"] == "did not run: failed"
    assert failed["detail"].startswith("result differs")
    assert (listed["why"] == summary.BUSY).sum() == 1


def test_the_page_has_its_four_sections_and_says_why_one_is_empty(frame):
    page = summary.summary_html(frame, "cpu1")
    for title in (
        "Fastest backend per kernel and device",
        "Fastest device per training configuration",
        "Where the GPU overtakes the CPU of its host",
        "Cells that need attention",
    ):
        assert f"<h2>{title}</h2>" in page
    empty = summary.summary_html(frame[frame["experiment"] == "train"], "cpu1")
    assert "No kernel ran in this run." in empty
    assert "No kernel or data science workload ran on both a GPU and the CPU of its host." in empty


def test_every_report_item_has_a_human_title():
    assert all(out.title for out in outputs.OUTPUTS)
    pages = {"kernel_crossovers", "provenance", "config", "summary", "attention"}
    assert pages <= set(outputs.PAGE_TITLES)
    by_rules = {"kernel_roof_percent", "shi2016_scaling", "queue_wait"}
    assert set(studies.needs()) | by_rules <= set(studies.titles())
    names = {out.name for out in outputs.OUTPUTS} | set(outputs.PAGE_TITLES)
    assert names.isdisjoint(studies.titles())


def collect(tmp_path, records):
    found, problems = tidy.collect(write_records(tmp_path, records))
    assert problems == []
    return found


def test_a_cpu_only_run_says_which_lines_to_add_to_see_where_the_gpu_pays_off(tmp_path):
    cpu_only = [
        (i, r) for i, r in [*KERNELS, *TRAIN] if not r["params"]["device"].startswith("cuda")
    ]
    (answer,) = summary.headline(collect(tmp_path, cpu_only))
    assert answer.startswith("This run measured CPUs only")
    assert "kernels.devices: [cpu1, cpu2, cuda1]" in answer
    assert "train.devices: [cpu1, cpu2, cpu16, cuda1]" in answer
    assert "datasci.devices" not in answer  # no data science in this run
    assert "config/cluster.yaml" in answer and "GPU partition" in answer
    page = summary.summary_html(collect(tmp_path / "again", cpu_only), "cpu1")
    assert page.index("<h2>Does the GPU pay off?</h2>") < page.index("<h2>Fastest backend")


def test_gpu_cells_that_did_not_run_are_named_with_why(frame):
    (answer,) = summary.headline(frame)  # KERNELS and TRAIN: every cuda1 cell unavailable
    assert answer.startswith("No GPU cell ran in this run (5 planned)")
    assert NO_GPU in answer


def test_where_a_gpu_ran_the_answer_quotes_each_workload_and_model_against_the_cpu(tmp_path):
    found = collect(tmp_path, [*GPU_TRAIN, *datasci_records(["cpu2", "cuda1"])])
    lines = summary.headline(found)
    # Per model its fp32 row and its fastest precision (fp16); per workload its two ends.
    assert [line.split(":")[0] for line in lines] == [
        "lstm, fp32, single, batch 16",
        "lstm, fp16, single, batch 16",
        "resnet18, fp32, single, batch 16",
        "resnet18, fp16, single, batch 16",
        "groupby, n=1000",
        "groupby, n=1M",
        "kmeans, n=1000",
        "kmeans, n=1M",
        "pagerank, n=1000",
        "pagerank, n=1M",
    ]
    # resnet18 fp32 single: cpu4 (4^-0.8 of one thread's time) against cuda1 (1/40).
    assert lines[2] == (
        f"resnet18, fp32, single, batch 16: the GPU (cuda1) is {4**-0.8 * 40:.1f}x [12.3, "
        "14.1] faster than the best CPU (4 threads)."
    )
    assert lines[4].startswith("groupby, n=1000: the CPU (pandas, 2 threads) is 20x [15, 27]")


def test_a_host_slow_throughout_is_stated_once_and_a_fast_one_not_at_all(frame):
    slow = frame.assign(host_speed_of_best=0.5)
    assert summary.host_speed_text(slow).startswith(
        "The host ran this machine's CPUs at about 50% of the speed it showed at its best"
    )
    page = summary.summary_html(slow, "cpu1")
    assert page.count("50% of the speed") == 1
    assert summary.host_speed_text(frame.assign(host_speed_of_best=0.97)) is None
    assert summary.host_speed_text(frame) is None  # records measured without the probe


def test_a_cell_whose_interval_has_a_lower_level_than_asked_needs_attention(frame):
    ran = frame.index[frame["status"] == "ok"][0]
    weak = frame.copy()
    metric = "time" if weak.loc[ran, "experiment"] == "kernel" else "time_per_batch"
    weak.loc[ran, f"{metric}_ci_level"] = 0.8
    listed = summary.attention(weak)
    row = listed[(listed["record"] == weak.loc[ran, "id"]) & (listed["why"] == summary.WEAK)]
    assert row["detail"].tolist() == ["level 80%"]


def test_no_table_footnote_names_a_cell(frame):
    """Marks are symbols with one legend line; the summary names the marked cells."""
    marked = frame.assign(imprecise=frame["status"] == "ok")
    for table, footnotes in (
        tables.comparison_table(marked, "kernel"),
        tables.comparison_table(marked, "train"),
    ):
        labels = [str(label) for label in table.index]
        assert footnotes and not [note for note in footnotes if any(x in note for x in labels)]


def test_the_summary_starts_without_the_plotting_libraries():
    """The summary rule runs in every aggregation and needs numbers only (the crossovers
    among them): matplotlib and seaborn cost it a second or two to import."""
    code = (
        "import sys\n"
        "from accelbench.analysis import summary\n"
        "print(sorted(name for name in ('matplotlib', 'seaborn') if name in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def with_interval(record, width):
    """`record` (id, record) with its time's 95% interval at +-`width` of its median, as a
    rerun interval is: the same factor below and above."""
    exp_id, found = copy.deepcopy(record)
    found["params"]["interval"] = statistics.HOST_RERUN_INTERVAL
    metric = found["metrics"]["time"]
    median = metric["median"]
    metric["ci_low"], metric["ci_high"] = median / (1 + width), median * (1 + width)
    return exp_id, found


def host_cells(widths, device="cpu2", first_size=1000):
    """saxpy cells of one host on `device`, one for each of `widths` (sizes from
    `first_size` up in its steps)."""
    return [
        with_interval(timed_kernel("saxpy", device, "numpy", first_size * (i + 1), 1e-3), width)
        for i, width in enumerate(widths)
    ]


def test_the_summary_states_once_what_a_noisy_host_resolves_on_each_device_kind(tmp_path):
    cpu = host_cells([0.17, 0.18, 0.19, 0.19, 0.2, 0.9])  # one odd cell moves no median
    gpu = host_cells([0.018, 0.019, 0.02, 0.021, 0.022], device="cuda1")
    frame = collect(tmp_path, [*cpu, *gpu])
    sentence = (
        "On this machine an independent rerun moves a median by up to ±19% on its CPUs and "
        "±2.0% on its GPUs (the typical spread of its cells, 95%); differences smaller than "
        "that are not decided here."
    )
    assert summary.resolution_text(frame) == sentence
    assert summary.summary_html(frame, "cpu2").count(html.escape(sentence)) == 1
    assert summary.resolution_text(frame[frame["device"] == "cpu2"]).endswith(
        "±19% on its CPUs (the typical spread of its cells, 95%); differences smaller than "
        "that are not decided here."
    )
    assert summary.resolution_text(frame.head(4)) is None  # too few cells to tell


def test_a_cell_within_the_hosts_typical_spread_is_not_marked_one_twice_as_wide_is(tmp_path):
    cells = host_cells([0.18, 0.19, 0.19, 0.2, 0.21, 0.19, 0.41])
    # What an older record says of itself (short of a +-5% target) is not the mark.
    cells[0][1]["conditions"] = {
        "busy": False,
        "imprecise": True,
        "imprecise_reason": "time budget of 0 s spent after 3 runs",
    }
    frame = collect(tmp_path, cells)
    assert frame["imprecise"].tolist() == [False] * 6 + [True]
    assert frame["imprecise_reason"].iloc[-1] == precision.WIDE_TEXT  # 0.41 > 2 x 0.19
    table, notes = tables.comparison_table(frame, "kernel")
    assert sum(tables.IMPRECISE_MARK in str(value) for value in table.to_numpy().ravel()) == 1


def test_a_factor_of_two_interval_is_marked_where_the_host_resolves_finer_or_cannot_say(
    tmp_path,
):
    # (1.45)^2 = 2.1 from low to high; the host's typical cell is +-19%, or unknown.
    frame = collect(tmp_path, host_cells([0.19, 0.18, 0.2, 0.19, 0.19, 0.45]))
    assert frame["imprecise"].tolist() == [False] * 5 + [True]
    few = tidy.judged(frame.tail(3))
    assert few["imprecise"].tolist() == [False, False, True]
    assert few["imprecise_reason"].iloc[-1] == precision.SPAN_TEXT


def test_where_the_host_spans_a_factor_of_two_anyway_it_is_said_once_not_marked_everywhere(
    tmp_path,
):
    frame = collect(tmp_path, host_cells([0.9, 1.0, 1.1, 1.0, 1.05, 3.5]))
    assert frame["imprecise"].tolist() == [False] * 5 + [True]  # 3.5 > 2 x 1.0
    assert "up to a factor of 2.0 on its CPUs" in summary.resolution_text(frame)


def busy(record):
    exp_id, found = copy.deepcopy(record)
    found["conditions"] = {"busy": True, "other_cpus": 1.5}
    return exp_id, found


def test_fifty_cells_that_need_attention_are_counted_by_why_and_listed_in_full(tmp_path):
    records = [
        *host_cells([0.19] * 15),
        *map(busy, host_cells([0.19] * 10, first_size=100_000)),
        *host_cells([0.6] * 20, device="cpu1"),
        *(kernel_record("numba", "cpu1", n, "failed", reason=FAILED) for n in range(1, 11)),
        *(kernel_record("torch", "cuda1", n, "unavailable", reason=NO_GPU) for n in range(1, 11)),
    ]
    frame = collect(tmp_path, records)
    page = summary.summary_html(frame, "cpu2")
    section = page.split("<h2>Cells that need attention</h2>")[1]
    assert section.startswith("\n<p>50 of 65 records, counted under each reason they have")
    assert section.count("<tr>") <= 1 + 10  # the header, a line for each reason
    counts = summary.attention_groups(summary.attention(frame)).set_index("why")["cells"]
    assert counts.to_dict() == {
        summary.NOT_RUN["failed"]: 10,
        summary.NOT_RUN["unavailable"]: 10,
        summary.BUSY: 10,
        precision.WIDE_TEXT: 20,
    }
    assert "time budget" not in section and "of the median" not in section
    summary.write_attention(frame, tmp_path / "attention.csv")
    listed = pd.read_csv(tmp_path / "attention.csv")
    assert list(listed.columns) == summary.ATTENTION_COLUMNS and len(listed) == 50
    failed = listed[listed["why"] == summary.NOT_RUN["failed"]]
    assert (failed["detail"] == FAILED).all()
    wide = listed[listed["why"] == precision.WIDE_TEXT].iloc[0]
    assert wide["detail"] == (
        "its 95% interval reaches ±60% from its median (high / low 2.6); the typical one of "
        "its kind here, ±19%"
    )
    assert wide["half_width"] == pytest.approx(0.6) and wide["span"] == pytest.approx(2.56)

"""The answer: the best GPU against the best CPU of the same machine, in the first table
and the summary's first sentences."""

from __future__ import annotations

import pytest

from accelbench import config as accelbench_config
from accelbench.analysis import fillable, gpu_vs_cpu, outputs, summary, tables, tidy
from accelbench.grid import expand

from records import GPU_HOST, scaled, timed_kernel, train_record, write_records


def collect(tmp_path, records):
    frame, problems = tidy.collect(write_records(tmp_path, records))
    assert problems == []
    return frame


def cells(frame, copies="copies excluded"):
    found = gpu_vs_cpu.compare(frame).cells
    return found[found["copies"] == copies].set_index("label")


@pytest.fixture
def gpu_host(tmp_path):
    return collect(tmp_path, GPU_HOST)


def test_the_fastest_gpu_record_is_set_against_the_fastest_cpu_record_of_its_host(gpu_host):
    found = cells(gpu_host)
    row = found.loc["matmul, float32, n=1024"]
    # numpy (5 ms) beats torch on the CPU, torch (0.5 ms) beats cupy on the GPU: 10x.
    assert (row["gpu"], row["cpu"], row["host"]) == ("torch", "numpy, 16 threads", "gpu01")
    assert row["median"] == pytest.approx(10.0)
    assert row["ci_low"] < 10.0 < row["ci_high"] and row["ci_level"] >= 0.9
    assert row["gpu_record"] == "kernels/matmul/cuda1/torch/float32/n1024"
    assert row["cpu_record"] == "kernels/matmul/cpu16/numpy/float32/n1024"
    # With the copies the fastest GPU record is another: cupy's 0.9 ms end to end.
    copied = cells(gpu_host, "copies included").loc["matmul, float32, n=1024"]
    assert copied["gpu"] == "cupy" and copied["median"] == pytest.approx(5e-3 / 9e-4)


def test_the_answer_is_the_first_table_and_names_both_sides(gpu_host, tmp_path):
    assert next(iter(outputs.TABLES)) == "gpu_vs_cpu"
    table, footnotes = outputs.TABLES["gpu_vs_cpu"](gpu_host, "cpu1")
    assert list(table.columns) == ["copies excluded", "copies included", "GPU", "best CPU"]
    assert list(table.index) == [
        "matmul, float32, n=256",
        "matmul, float32, n=1024",
        "matmul, float32, n=4096",
        "saxpy, float32, n=10M",
    ]
    assert table.loc["matmul, float32, n=1024", "GPU"] == "torch; cupy with copies"
    assert table.loc["matmul, float32, n=4096", "best CPU"] == "numpy, 16 threads"
    assert table.loc["matmul, float32, n=4096", "copies excluded"] == "50.0 [46.8, 53.5]"
    assert "above 1 the GPU is faster, below 1 the CPU" in table.attrs["caption"]
    assert any(note.startswith("Each row: the fastest GPU record") for note in footnotes)
    markdown, latex, csv, page = tables.write_table(table, footnotes, tmp_path / "gpu_vs_cpu")
    assert "| matmul, float32, n=4096 | 50" in markdown.read_text(encoding="utf-8")
    assert r"\begin{tabular}" in latex.read_text(encoding="utf-8")
    lines = csv.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("row,copies,status,median,ci_low,ci_high,ci_level,gpu,cpu,host")
    assert len(lines) == 1 + 2 * len(table)
    assert "torch; cupy with copies" in page.read_text(encoding="utf-8")


def test_where_the_cpu_is_faster_the_answer_says_by_how_much(gpu_host):
    row = cells(gpu_host).loc["matmul, float32, n=256"]
    assert row["ci_high"] < 1  # numpy 0.1 ms against torch 0.4 ms on the GPU
    lines = summary.headline(gpu_host)
    assert lines[0].startswith(
        "matmul, float32, n=256: the CPU (numpy, 16 threads) is 4.00x [3.74, 4.28] faster "
        "than the best GPU (torch); copies included, the CPU is 6.00x [5.61, 6.42] faster."
    )


def test_copies_included_hand_the_win_to_the_cpu_where_the_transfer_dominates(gpu_host):
    alone = cells(gpu_host).loc["saxpy, float32, n=10M"]
    copied = cells(gpu_host, "copies included").loc["saxpy, float32, n=10M"]
    assert alone["ci_low"] > 1 and alone["median"] == pytest.approx(4.0)
    assert copied["ci_high"] < 1 and copied["median"] == pytest.approx(4e-3 / 8e-2)
    (line,) = [line for line in summary.headline(gpu_host) if line.startswith("saxpy")]
    assert line == (
        "saxpy, float32, n=10M: the GPU (torch) is 4.00x [3.74, 4.28] faster than the "
        "best CPU (numpy, 16 threads); copies included, the CPU is 20.0x [18.7, 21.4] faster."
    )


def test_the_summary_quotes_the_smallest_and_largest_size_of_each_kernel_first(gpu_host):
    lines = summary.headline(gpu_host)
    assert [line.split(":")[0] for line in lines] == [
        "matmul, float32, n=256",
        "matmul, float32, n=4096",
        "saxpy, float32, n=10M",
    ]
    assert lines[1] == (
        "matmul, float32, n=4096: the GPU (torch) is 50.0x [46.8, 53.5] faster than the best "
        "CPU (numpy, 16 threads); copies included, the GPU is 30.0x [28.1, 32.1] faster."
    )
    page = summary.summary_html(gpu_host, "cpu16")
    answer = page.index("<h2>Does the GPU pay off?</h2>")
    assert answer < page.index(f"<p>{lines[0]}") < page.index("<th>copies excluded</th>")
    assert page.index("<th>copies excluded</th>") < page.index("records: ")


def test_a_gpu_cell_without_a_cpu_counterpart_is_left_out_and_named(tmp_path):
    lonely = timed_kernel("matmul", "cuda1", "cupy", 4096, 3e-3, 5e-3, dtype="float16")
    frame = collect(tmp_path, [*GPU_HOST, lonely])
    table, footnotes = tables.headline_table(frame)
    assert "matmul, float16, n=4096" not in table.index and len(table) == 4
    assert "Not compared: 1 GPU cell without the same cell on the CPU of the same host " in (
        " ".join(footnotes)
    )
    page = summary.summary_html(frame, "cpu16")
    assert (
        "The 1 GPU cell without the same cell on the CPU of the same host, not compared: "
        "no CPU record of it (1): matmul, float16, n=4096."
    ) in page


def test_records_of_two_hosts_are_never_paired(tmp_path):
    records = [
        timed_kernel("stencil", "cuda1", "torch", 4096, 1e-4, 2e-4, host="gpu01"),
        timed_kernel("stencil", "cpu16", "numpy", 4096, 1e-2, host="cpu02"),
    ]
    comparison = gpu_vs_cpu.compare(collect(tmp_path, records))
    assert comparison.cells.empty
    (unpaired,) = comparison.unpaired.itertuples()
    assert (unpaired.label, unpaired.host) == ("stencil, float32, n=4096", "gpu01")
    assert unpaired.reason == "its CPU records are of another host (cpu02)"


def test_each_host_pairs_its_own_gpu_and_cpu_and_says_which_it_is(tmp_path):
    records = [
        timed_kernel("stencil", device, backend, size, seconds * size / 4096, host=host)
        for host, size in (("gpu01", 4096), ("gpu02", 8192))
        for device, backend, seconds in (("cuda1", "torch", 1e-4), ("cpu16", "numpy", 1e-2))
    ]
    found = cells(collect(tmp_path, records))
    assert list(found.index) == [
        "stencil, float32, n=4096, host gpu01",
        "stencil, float32, n=8192, host gpu02",
    ]
    assert found["median"].tolist() == pytest.approx([100.0, 100.0])


def test_a_model_in_bf16_on_the_gpu_is_set_against_fp32_on_the_cpu(tmp_path):
    records = [
        train_record("resnet18", "cpu16", samples=scaled(0.4, 1.0)),
        train_record("resnet18", "cpu4", samples=scaled(0.8, 1.0)),
        train_record("resnet18", "cpu16", samples=scaled(0.3, 1.0), precision="bf16"),
        train_record("resnet18", "cuda1", samples=scaled(0.02, 1.0)),
        train_record("resnet18", "cuda1", samples=scaled(0.01, 1.0), precision="bf16"),
    ]
    frame = collect(tmp_path, records)
    found = cells(frame)
    bf16 = found.loc["resnet18, bf16, single, batch 16"]
    assert bf16["median"] == pytest.approx(40.0)  # fp32 on 16 CPUs, not bf16 on them
    assert bf16["cpu"] == "fp32, 16 threads" and bf16["gpu"] == "cuda1"
    assert bf16["baseline"] == "bf16 on the GPU vs fp32 on the CPU"
    assert found.loc["resnet18, fp32, single, batch 16", "cpu"] == "16 threads"
    copied = cells(frame, "copies included").loc["resnet18, bf16, single, batch 16"]
    assert copied["status"] == "unavailable" and "end_to_end_time_per_batch" in copied["reason"]
    table, footnotes = tables.headline_table(frame)
    assert table.loc["resnet18, bf16, single, batch 16", "copies included"] == "n/a (a)"
    assert any(
        "a row in another precision sets that precision on the GPU" in note for note in footnotes
    )
    assert summary.headline(frame) == [
        "resnet18, fp32, single, batch 16: the GPU (cuda1) is 20.0x [18.7, 21.4] faster than "
        "the best CPU (16 threads).",
        "resnet18, bf16, single, batch 16: the GPU (cuda1) is 40.0x [37.4, 42.8] faster than "
        "the best CPU (fp32, 16 threads) (bf16 on the GPU vs fp32 on the CPU).",
    ]


def test_a_factor_whose_interval_holds_one_is_undecided(tmp_path):
    records = [
        timed_kernel("reduction", "cpu16", "numpy", 10**6, 1e-3),
        timed_kernel("reduction", "cuda1", "torch", 10**6, 1.02e-3, end_to_end=3e-3),
    ]
    assert summary.headline(collect(tmp_path, records)) == [
        "reduction, float32, n=1M: undecided: the GPU (torch) runs it 0.98x [0.92, 1.05] "
        "as fast as the best CPU (numpy, 16 threads); copies included, the CPU is 3.00x "
        "[2.81, 3.21] faster."
    ]


def test_a_run_without_gpu_records_still_says_which_devices_to_add(tmp_path):
    cpu_only = [record for record in GPU_HOST if "cuda" not in record[0]]
    frame = collect(tmp_path, cpu_only)
    (answer,) = summary.headline(frame)
    assert answer.startswith("This run measured CPUs only")
    assert summary.cpu_only_answer(frame) == [answer]
    table, footnotes = tables.headline_table(frame)
    assert table.empty
    assert footnotes == ["No cell of work was measured on a GPU and on the CPU of the same host."]


def answer_fills(plan: fillable.Planned) -> bool:
    """Whether the planned grid fills the answer, the report's first output."""
    return outputs.OUTPUTS[0].fills(plan, "cpu1")


def test_the_answer_table_is_asked_for_where_the_grid_plans_a_cell_on_both_sides(tmp_path):
    both = tmp_path / "both.yaml"
    both.write_text(
        "kernels: {devices: [cpu2, cuda1], backends: [numpy, torch], dtypes: [float32],\n"
        "  sizes: {matmul: [64], mandelbrot: [], saxpy: [], reduction: [], stencil: [],\n"
        "  fft1d: [], fft2d: [], transfer-d2d: []}, overrides: {}}\n"
        "datasci: {devices: []}\ntrain: {devices: [cpu2]}\n"
    )
    plan = fillable.Planned.of(expand(accelbench_config.load([both])))
    assert answer_fills(plan)
    for precisions, fills in (("[fp32, bf16]", True), ("[bf16]", False)):
        models = tmp_path / "models.yaml"
        models.write_text(
            "kernels: {devices: [cpu2]}\ndatasci: {devices: []}\n"
            f"train: {{devices: [cpu2, cuda1], precisions: {precisions}, strategies: [single]}}\n"
        )
        plan = fillable.Planned.of(expand(accelbench_config.load([models])))
        # A model is set against the CPU in fp32 only.
        assert answer_fills(plan) is fills


def test_the_report_declares_the_answer_first():
    """The tables rule makes the outputs in their declared order (test_outputs)."""
    answer = outputs.OUTPUTS[0]
    assert (answer.name, answer.kind, answer.category) == ("gpu_vs_cpu", outputs.TABLE, "Summary")

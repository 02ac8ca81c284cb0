"""Percent of the measured roof, CPU/GPU crossovers and the roofline figures, from records."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from test_figure_layout import layout_problems

from accelbench.analysis import crossovers, roof_percent, style, tidy
from accelbench.measuring.statistics import rate_from_time, summarize, value
from accelbench.records.record import make_record, write_record
from accelbench.studies.roofline import roofline

SAMPLES = 5


def times(median: float) -> dict:
    return summarize([median * factor for factor in (0.98, 0.99, 1.0, 1.01, 1.02)], "s")


def kernel_record(kernel, device, backend, size, seconds, flops, nbytes, end_to_end=None):
    exp_id = f"kernels/{kernel}/{device}/{backend}/float32/n{size}"
    time = times(seconds)
    metrics = {"time": time}
    if flops:
        metrics["gflops"] = rate_from_time(time, flops / 1e9, "GFLOP/s")
    metrics["bandwidth"] = rate_from_time(time, nbytes / 1e9, "GB/s")
    metrics["arithmetic_intensity"] = value(flops / nbytes, "flop/byte")
    if end_to_end is not None:
        metrics["transfer_time"] = times(end_to_end - seconds)
        metrics["end_to_end_time"] = times(end_to_end)
        metrics["end_to_end_gflops"] = rate_from_time(
            metrics["end_to_end_time"], flops / 1e9, "GFLOP/s"
        )
    params = {
        "kernel": kernel,
        "device": device,
        "backend": backend,
        "dtype": "float32",
        "size": size,
    }
    return exp_id, make_record(
        experiment="kernel",
        experiment_id=exp_id,
        status="ok",
        params=params,
        provenance={},
        metrics=metrics,
        check={"passed": True, "relative_error": 0.0},
    )


def roof_record(device, peak, copy, h2d=None, status="ok"):
    """A roof record; a ceiling given as None was not measured."""
    exp_id = f"roofs/{device}/float32"
    metrics, check = {}, None
    if status == "ok":
        ceilings = {"peak_gflops": (peak, "GFLOP/s"), "memory_bandwidth": (copy, "GB/s")}
        if device.startswith("cuda"):
            ceilings |= {"h2d_bandwidth": (h2d, "GB/s")}
            ceilings |= {"d2h_bandwidth": (h2d and h2d / 2, "GB/s")}
        for name, (rate, unit) in ceilings.items():
            if rate is not None:
                metrics[name] = rate_from_time(times(1.0), rate, unit)
        check = {"passed": True, "relative_error": 0.0}
        unmeasured = [name for name in ceilings if name not in metrics]
        if unmeasured:
            check["unmeasured"] = dict.fromkeys(unmeasured, "no backend can measure it here")
    return exp_id, make_record(
        experiment="roof",
        experiment_id=exp_id,
        status=status,
        reason=None if status == "ok" else "no GPU",
        params={"device": device, "dtype": "float32", "gemm_size": 64},
        provenance={},
        metrics=metrics,
        check=check,
    )


def saxpy(device, backend, n, seconds, end_to_end=None):
    return kernel_record("saxpy", device, backend, n, seconds, 2.0 * n, 12.0 * n, end_to_end)


def matmul(device, backend, n, seconds, end_to_end=None):
    return kernel_record(
        "matmul", device, backend, n, seconds, 2.0 * n**3, 12.0 * n * n, end_to_end
    )


# CPU: fast at small sizes. GPU: slow at small sizes (launch overhead), fast at large ones;
# its end-to-end time adds the copies, which moves the crossover up.
RECORDS = [
    roof_record("cpu2", peak=100.0, copy=20.0),
    roof_record("cuda1", peak=10000.0, copy=2000.0, h2d=25.0),
    matmul("cpu2", "numpy", 64, 2 * 64**3 / 50e9),  # 50 GFLOP/s
    matmul("cpu2", "numpy", 256, 2 * 256**3 / 80e9),
    matmul("cpu2", "numpy", 1024, 2 * 1024**3 / 90e9),
    matmul("cpu2", "numba", 1024, 2 * 1024**3 / 9e9),
    matmul("cuda1", "cupy", 64, 1e-5, end_to_end=1e-4),  # 52 GFLOP/s
    matmul("cuda1", "cupy", 256, 1e-5, end_to_end=2e-3),  # 3355; e2e 16.8 GFLOP/s
    matmul("cuda1", "cupy", 1024, 3e-4, end_to_end=2.3e-3),  # 7158; e2e 934
    saxpy("cpu2", "numpy", 1000, 12e3 / 15e9),  # 15 GB/s: 2.5 GFLOP/s
    saxpy("cuda1", "cupy", 1000, 12e3 / 1500e9),
    kernel_record("transfer-d2d", "cpu2", "numpy", 1000, 8e3 / 18e9, 0.0, 8e3),
    kernel_record("transfer-h2d-pinned", "cuda1", "torch", 1000, 4e3 / 20e9, 0.0, 4e3),
]


@pytest.fixture
def frame(tmp_path):
    paths = [write_record(tmp_path / f"{exp_id}.json", record) for exp_id, record in RECORDS]
    collected, problems = tidy.collect(paths)
    assert problems == []
    return collected


def row(table, kernel, device, backend, size):
    match = table[
        (table["kernel"] == kernel)
        & (table["device"] == device)
        & (table["backend"] == backend)
        & (table["size"] == size)
    ]
    assert len(match) == 1
    return match.iloc[0]


def test_roofs_table(frame):
    table = roof_percent.roofs(frame).set_index("device")
    assert table.loc["cpu2", "peak_gflops"] == pytest.approx(100.0)
    assert table.loc["cuda1", "h2d_bandwidth"] == pytest.approx(25.0)
    assert math.isnan(table.loc["cpu2", "h2d_bandwidth"])


def test_roof_percent_follows_the_roofline(frame):
    table = roof_percent.add_roof_percent(frame)
    assert table.attrs["units"]["roof_percent"] == "%"
    assert len(table) == len(frame)
    # GEMM at intensity n/6 >> ridge point: compute bound, against peak GEMM.
    gemm = row(table, "matmul", "cpu2", "numpy", 1024)
    assert gemm["roof_bound"] == "peak_gflops"
    assert gemm["roof_percent"] == pytest.approx(90.0)
    assert row(table, "matmul", "cpu2", "numba", 1024)["roof_percent"] == pytest.approx(9.0)
    # saxpy at 1/6 flop/byte: memory bound, against 20 GB/s x 1/6 = 3.33 GFLOP/s.
    axpy = row(table, "saxpy", "cpu2", "numpy", 1000)
    assert axpy["roof_bound"] == "memory_bandwidth"
    assert axpy["roof_percent"] == pytest.approx(75.0)
    # Copies, which do no arithmetic, against the bandwidth of their path.
    copy = row(table, "transfer-d2d", "cpu2", "numpy", 1000)
    assert copy["roof_bound"] == "memory_bandwidth"
    assert copy["roof_percent"] == pytest.approx(90.0)
    link = row(table, "transfer-h2d-pinned", "cuda1", "torch", 1000)
    assert link["roof_bound"] == "h2d_bandwidth"
    assert link["roof_percent"] == pytest.approx(80.0)
    # Roof rows themselves get no percent.
    assert table.loc[table["experiment"] == "roof", "roof_percent"].isna().all()


def test_roof_percent_is_nan_without_a_roof(frame):
    no_gpu_roof = frame[~((frame["experiment"] == "roof") & (frame["device"] == "cuda1"))]
    table = roof_percent.add_roof_percent(no_gpu_roof)
    assert math.isnan(row(table, "matmul", "cuda1", "cupy", 256)["roof_percent"])
    assert pd.isna(row(table, "matmul", "cuda1", "cupy", 256)["roof_bound"])
    assert row(table, "matmul", "cpu2", "numpy", 256)["roof_percent"] == pytest.approx(80.0)
    only_kernels = frame[frame["experiment"] == "kernel"]
    assert roof_percent.add_roof_percent(only_kernels)["roof_percent"].isna().all()


def partial_roofs(tmp_path):
    """cpu4 measured only its GEMM peak, cpu8 only its memory bandwidth."""
    records = [
        roof_record("cpu4", peak=100.0, copy=None),
        roof_record("cpu8", peak=None, copy=20.0),
        *(matmul(device, "numpy", 1024, 2 * 1024**3 / 50e9) for device in ("cpu4", "cpu8")),
        *(saxpy(device, "numpy", 1000, 12e3 / 15e9) for device in ("cpu4", "cpu8")),
        *(
            kernel_record("transfer-d2d", device, "numpy", 1000, 8e3 / 18e9, 0.0, 8e3)
            for device in ("cpu4", "cpu8")
        ),
    ]
    paths = [write_record(tmp_path / f"{exp_id}.json", record) for exp_id, record in records]
    frame, problems = tidy.collect(paths)
    assert problems == []
    return frame


def test_a_kernel_needs_both_ceilings_of_its_roofline_and_a_copy_only_its_path(tmp_path):
    frame = partial_roofs(tmp_path)
    ceilings = roof_percent.roofs(frame).set_index("device")
    assert ceilings.loc["cpu4", "peak_gflops"] == pytest.approx(100.0)
    assert math.isnan(ceilings.loc["cpu4", "memory_bandwidth"])
    assert math.isnan(ceilings.loc["cpu8", "peak_gflops"])
    table = roof_percent.add_roof_percent(frame)
    for device in ("cpu4", "cpu8"):
        for kernel, size in (("matmul", 1024), ("saxpy", 1000)):
            found = row(table, kernel, device, "numpy", size)
            assert math.isnan(found["roof_percent"]), (kernel, device)
            assert pd.isna(found["roof_bound"]), (kernel, device)
    assert math.isnan(row(table, "transfer-d2d", "cpu4", "numpy", 1000)["roof_percent"])
    copy = row(table, "transfer-d2d", "cpu8", "numpy", 1000)
    assert copy["roof_percent"] == pytest.approx(90.0)
    assert copy["roof_bound"] == "memory_bandwidth"


def test_the_roofline_draws_the_ceiling_a_roof_has_and_names_the_one_it_lacks(tmp_path):
    fig = roofline.roofline_figure(partial_roofs(tmp_path))
    axes = {ax.get_title().splitlines()[0]: ax for ax in fig.axes if ax.get_visible()}
    assert set(axes) == {"cpu4, float32", "cpu8, float32"}
    assert axes["cpu4, float32"].get_title().splitlines()[1] == (
        "GEMM 100 GFLOP/s, memory not measured"
    )
    assert axes["cpu8, float32"].get_title().splitlines()[1] == (
        "GEMM not measured, memory 20 GB/s"
    )
    flat = axes["cpu4, float32"].lines[0].get_ydata()  # the GEMM peak alone: flat
    assert np.min(flat) == pytest.approx(100.0) and np.max(flat) == pytest.approx(100.0)
    slope = axes["cpu8, float32"].lines[0]  # the memory ceiling alone: intensity x 20 GB/s
    np.testing.assert_allclose(slope.get_ydata(), 20.0 * slope.get_xdata())
    assert layout_problems("partial roofline", fig) == []


def test_a_value_is_written_in_the_si_prefix_that_keeps_three_figures():
    assert roofline.scaled(669_016, "GFLOP/s") == "669 TFLOP/s"
    assert roofline.scaled(4_347, "GB/s") == "4.35 TB/s"
    assert roofline.scaled(999.7, "GB/s") == "1 TB/s"
    assert roofline.scaled(55.2, "GB/s") == "55.2 GB/s"
    assert roofline.scaled(1_234, "flop/byte") == "1.23e+03 flop/byte"


def test_roof_table_lists_the_kernels_that_ran(frame):
    table = roofline.roof_table(frame)
    assert len(table) == sum(1 for _, r in RECORDS if r["experiment"] == "kernel")
    assert list(table.columns)[-5:] == [
        "roof_bound",
        "roof_percent",
        "above_roof",
        "busy",
        "imprecise",
    ]


def test_crossovers_follow_the_sizes_alone_and_with_the_copies(frame):
    """Brackets, undecided sizes and their words: tests/test_crossovers.py."""
    alone = crossovers.crossovers(frame).set_index("kernel")
    assert set(alone.index) == {"matmul", "saxpy"}
    # matmul: CPU 50 vs GPU 52.4 GFLOP/s at n=64 already, their intervals apart.
    assert alone.loc["matmul", "says"] == "GPU ahead at all 3 sizes measured, from n=64 to n=1024"
    copied = crossovers.crossovers(frame, with_transfer=True).set_index("kernel")
    # End to end the GPU loses at 64 (5.2 < 50) and 256 (16.8 < 80), wins at 1024 (934 > 90).
    assert (copied.loc["matmul", "crossover_low"], copied.loc["matmul", "crossover_high"]) == (
        256,
        1024,
    )
    # saxpy's GPU record has no end-to-end time: nothing to compare with the transfer.
    assert "saxpy" not in copied.index


def test_crossovers_need_both_sides(frame):
    cpu_only = frame[frame["device"] != "cuda1"]
    assert crossovers.crossovers(cpu_only).empty


@pytest.mark.parametrize(
    ("figure", "named"),
    [
        (roofline.roofline_figure, {"matmul", "saxpy"}),  # the kernels, each in its look
        (crossovers.crossover_figure, {"copies excluded", "copies included"}),
    ],
)
def test_figures_draw_and_save(frame, figure, named, tmp_path):
    fig = figure(frame)
    assert isinstance(fig, Figure)
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    assert named <= set(labels)
    paths = style.save(fig, tmp_path / "figure")
    assert paths[0].read_bytes().startswith(b"%PDF")
    assert paths[1].read_bytes().startswith(b"\x89PNG")


def test_roofline_figure_draws_measured_ceilings(frame):
    fig = roofline.roofline_figure(frame)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    # The ceilings under the device and dtype, outside the axes where points go.
    assert [ax.get_title().splitlines()[0] for ax in axes] == ["cpu2, float32", "cuda1, float32"]
    assert axes[0].get_title().splitlines()[1] == "GEMM 100 GFLOP/s, memory 20 GB/s"
    # In the prefix that keeps three figures: 1e+04 GFLOP/s made a GPU's title too wide.
    assert axes[1].get_title().splitlines()[1].startswith("GEMM 10 TFLOP/s, memory ")
    assert axes[1].get_title().splitlines()[2].startswith("host→device")
    assert not any(ax.texts for ax in axes)
    assert layout_problems("roofline", fig) == []
    gpu = axes[1]
    ceiling = gpu.lines[0].get_ydata()
    assert np.max(ceiling) == pytest.approx(10000.0)
    assert gpu.lines[1].get_linestyle() == "--"  # host->device roof on the GPU only
    # One point per (kernel, backend) that does arithmetic, at its largest size: matmul
    # numpy, matmul numba, saxpy numpy; a kernel's fastest backend large, the other small.
    marks_drawn = [
        line
        for line in axes[0].lines
        if line.get_linestyle() == "None" and line.get_marker() not in ("_", "|")
    ]
    points = {
        (x, y, line.get_markersize())
        for line in marks_drawn
        for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
    }
    assert len({(x, y) for x, y, _ in points}) == 3
    sizes = sorted(size for _, _, size in points)
    assert sizes[0] == roofline.OTHER_BACKEND_SIZE < sizes[-1]


def test_crossover_figure_marks_the_crossover(frame):
    fig = crossovers.crossover_figure(frame)
    titles = dict(ax.get_title().partition("\n")[::2] for ax in fig.axes)
    # saxpy, compared at one size, has no curve: its one factor is the answer's table's.
    assert titles == {
        "matmul, float32": "copies excluded: GPU ahead at all 3 sizes measured\n"
        "copies included: GPU overtakes between n=256 and 1024"
    }
    assert not any(ax.texts for ax in fig.axes)  # said under the title, off the points


@pytest.mark.parametrize("figure", [roofline.roofline_figure, crossovers.crossover_figure])
def test_figures_without_records_say_so(frame, figure):
    empty = frame[frame["experiment"] == "train"]
    fig = figure(empty)
    assert fig.axes[0].texts[0].get_text().startswith("no ")


def test_a_kernel_above_its_roof_beyond_the_roofs_interval_is_reported(tmp_path):
    records = [
        roof_record("cpu2", peak=100.0, copy=20.0),  # GEMM roof interval up to 100/0.98
        matmul("cpu2", "torch", 1024, 2 * 1024**3 / 110e9),  # 110 GFLOP/s: above
        matmul("cpu2", "numpy", 1024, 2 * 1024**3 / 101e9),  # inside the roof's interval
        saxpy("cpu2", "numba", 10**6, 12e6 / 30e9),  # 30 GB/s against a 20 GB/s memory roof
    ]
    paths = [write_record(tmp_path / f"{exp_id}.json", record) for exp_id, record in records]
    frame, _ = tidy.collect(paths)
    table = roofline.roof_table(frame)
    flagged = {(row.kernel, row.backend): bool(row.above_roof) for row in table.itertuples()}
    assert flagged == {
        ("matmul", "torch"): True,
        ("matmul", "numpy"): False,
        ("saxpy", "numba"): True,
    }
    note = roofline.above_roof_note(table)
    assert "matmul torch float32 n=1024 on cpu2" in note and "saxpy numba" in note
    assert "matmul numpy" not in note
    fig = roofline.roofline_figure(frame)
    (panel,) = [ax for ax in fig.axes if ax.get_visible()]
    assert panel.get_title().splitlines()[-1] == "2 above the roof (circled)"


def test_no_note_when_every_kernel_is_under_its_roof(frame):
    assert roofline.above_roof_note(roofline.roof_table(frame)) is None


@pytest.mark.parametrize("figure", [roofline.roofline_figure, crossovers.crossover_figure])
def test_figures_are_laid_out_for_print(frame, figure):
    assert layout_problems(figure.__name__, figure(frame)) == []


def test_no_crossover_figure_without_a_gpu(frame):
    fig = crossovers.crossover_figure(frame[frame["device"] != "cuda1"])
    assert fig.axes[0].texts[0].get_text() == (
        "no kernel or workload compared with the CPU of its host at two sizes"
    )
    assert fig.get_figheight() < 1

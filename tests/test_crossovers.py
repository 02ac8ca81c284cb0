"""Crossovers from the sizes measured: named only where two measured sizes bracket them,
undecided where a size's interval holds 1, never extrapolated."""

from __future__ import annotations

import pytest
from matplotlib.patches import Polygon, Rectangle

from accelbench.analysis import crossovers, summary, tidy

from records import GPU_HOST, timed_kernel, write_records


def curve(tmp_path, times, kernel="stencil"):
    """A kernel on gpu01's CPU and GPU: (size, CPU seconds, GPU seconds) at each size, the
    GPU's end-to-end time twice its time."""
    records = [
        record
        for size, cpu, gpu in times
        for record in (
            timed_kernel(kernel, "cpu16", "numpy", size, cpu),
            timed_kernel(kernel, "cuda1", "torch", size, gpu, end_to_end=2 * gpu),
        )
    ]
    frame, problems = tidy.collect(write_records(tmp_path, records))
    assert problems == []
    return frame


def said(frame, with_transfer=False):
    (line,) = crossovers.crossovers(frame, with_transfer).to_dict("records")
    return line


def test_a_crossover_is_named_between_the_two_measured_sizes_that_bracket_it(tmp_path):
    frame, _ = tidy.collect(write_records(tmp_path, GPU_HOST))
    found = crossovers.crossovers(frame).set_index("kernel")
    matmul = found.loc["matmul"]
    assert matmul["says"] == (
        "CPU ahead at n = 256, GPU ahead at n = 1,024 and 4,096: the GPU overtakes the CPU "
        "between n = 256 and n = 1,024"
    )
    assert (matmul["crossover_low"], matmul["crossover_high"]) == (256, 1024)
    assert (matmul["cpu_ahead"], matmul["gpu_ahead"], matmul["undecided"]) == (
        "256",
        "1024 4096",
        "",
    )
    assert matmul["host"] == "gpu01" and not matmul["with_transfer"]


@pytest.mark.parametrize(
    ("times", "says"),
    [
        (
            [(64, 1e-3, 1e-5), (256, 1e-2, 1e-5), (1024, 1.0, 1e-4)],
            "GPU ahead at all 3 sizes measured, from n = 64 to n = 1,024",
        ),
        (
            [(64, 1e-5, 1e-3), (256, 1e-4, 1e-3)],
            "CPU ahead at all 2 sizes measured, from n = 64 to n = 256",
        ),
        ([(2048, 1e-2, 1e-4)], "GPU ahead at the one size measured, n = 2,048"),
        ([(2048, 1e-3, 1e-3)], "undecided at the one size measured, n = 2,048"),
    ],
    ids=["all-gpu", "all-cpu", "one-size", "one-size-undecided"],
)
def test_sizes_that_bracket_no_crossover_say_which_side_was_ahead(tmp_path, times, says):
    line = said(curve(tmp_path, times))
    assert line["says"] == says
    assert line["crossover_low"] != line["crossover_low"]  # NaN: no crossover named


def test_a_size_whose_intervals_overlap_decides_nothing(tmp_path):
    # CPU ahead at 1,000, level at 10,000, the GPU ahead at 100,000.
    frame = curve(tmp_path, [(1000, 1e-5, 1e-4), (10_000, 1e-4, 1.01e-4), (100_000, 1e-2, 1e-4)])
    line = said(frame)
    assert line["says"] == (
        "CPU ahead at n = 1,000, undecided at n = 10,000, GPU ahead at n = 100,000: the GPU "
        "overtakes the CPU between n = 1,000 and n = 100,000"
    )
    assert line["undecided"] == "10000"
    # With the copies (twice the GPU's time) the CPU stays ahead up to 10,000.
    assert said(frame, with_transfer=True)["says"] == (
        "CPU ahead at n = 1,000 and 10,000, GPU ahead at n = 100,000: the GPU overtakes the "
        "CPU between n = 10,000 and n = 100,000"
    )


def test_undecided_sizes_beside_one_side_only_name_no_crossover(tmp_path):
    line = said(curve(tmp_path, [(64, 1e-4, 1.01e-4), (256, 1e-3, 1e-4), (1024, 1e-2, 1e-4)]))
    assert line["says"] == (
        "undecided at n = 64, GPU ahead at n = 256 and 1,024; no size has the CPU ahead, so "
        "no crossover is named"
    )


def test_the_cpu_can_take_the_lead_back_at_a_larger_size(tmp_path):
    times = [(64, 1e-3, 1e-4), (256, 2e-3, 1e-4), (1024, 4e-3, 1e-4), (4096, 1e-2, 1e-1)]
    assert said(curve(tmp_path, times))["says"] == (
        "GPU ahead at the 3 sizes from n = 64 to n = 1,024, CPU ahead at n = 4,096: the CPU "
        "overtakes the GPU between n = 1,024 and n = 4,096"
    )


def test_the_summary_says_what_the_sizes_say_alone_and_with_the_copies(tmp_path):
    frame = curve(tmp_path, [(2048, 1e-2, 1e-4)])
    table = summary.crossovers(frame)
    assert table.to_dict("records") == [
        {
            "kernel or workload": "stencil, float32",
            "copies excluded": "GPU ahead at the one size measured, n = 2,048",
            "copies included": "GPU ahead at the one size measured, n = 2,048",
        }
    ]
    page = summary.summary_html(frame, "cpu16")
    assert "<h2>Where the GPU overtakes the CPU of its host</h2>" in page
    assert "GPU faster from n" not in page


def test_the_figure_shades_the_bracket_and_marks_no_size_nobody_measured(tmp_path):
    frame, _ = tidy.collect(write_records(tmp_path, GPU_HOST))
    figure = crossovers.crossover_figure(frame)
    panels = {ax.get_title().split("\n")[0]: ax for ax in figure.axes if ax.get_title()}
    matmul = panels["matmul, float32, kernel only"]
    assert matmul.get_title().split("\n")[1] == "GPU overtakes between n = 256 and 1,024"
    (band,) = [patch for patch in matmul.patches if isinstance(patch, Polygon | Rectangle)]
    corners = band.get_patch_transform().transform(band.get_path().vertices)
    xs = sorted({round(x) for x, _ in corners})
    assert xs == [256, 1024]
    assert not [line for line in matmul.lines if len(set(line.get_xdata())) == 1]
    saxpy = panels["saxpy, float32, with transfer"]
    assert saxpy.get_title().split("\n")[1] == "CPU ahead at the one size measured"
    assert not saxpy.patches

"""Crossovers from the sizes measured: named only where two measured sizes bracket them,
undecided where a size's interval holds 1, never extrapolated."""

from __future__ import annotations

import pytest
from matplotlib.patches import Polygon, Rectangle

from accelbench.analysis import crossovers, figures, sizes, summary, tidy

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
        "CPU ahead at n=256, GPU ahead at n=1024 and 4096: the GPU overtakes the CPU "
        "between n=256 and n=1024"
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
            "GPU ahead at all 3 sizes measured, from n=64 to n=1024",
        ),
        (
            [(64, 1e-5, 1e-3), (256, 1e-4, 1e-3)],
            "CPU ahead at all 2 sizes measured, from n=64 to n=256",
        ),
        ([(2048, 1e-2, 1e-4)], "GPU ahead at the one size measured, n=2048"),
        ([(2048, 1e-3, 1e-3)], "undecided at the one size measured, n=2048"),
    ],
    ids=["all-gpu", "all-cpu", "one-size", "one-size-undecided"],
)
def test_sizes_that_bracket_no_crossover_say_which_side_was_ahead(tmp_path, times, says):
    line = said(curve(tmp_path, times))
    assert line["says"] == says
    assert line["crossover_low"] != line["crossover_low"]  # NaN: no crossover named


def test_a_size_whose_intervals_overlap_decides_nothing(tmp_path):
    # CPU ahead at 1000, level at 10k, the GPU ahead at 100k.
    frame = curve(tmp_path, [(1000, 1e-5, 1e-4), (10_000, 1e-4, 1.01e-4), (100_000, 1e-2, 1e-4)])
    line = said(frame)
    assert line["says"] == (
        "CPU ahead at n=1000, undecided at n=10k, GPU ahead at n=100k: the GPU "
        "overtakes the CPU between n=1000 and n=100k"
    )
    assert line["undecided"] == "10000"
    # With the copies (twice the GPU's time) the CPU stays ahead up to 10k.
    assert said(frame, with_transfer=True)["says"] == (
        "CPU ahead at n=1000 and 10k, GPU ahead at n=100k: the GPU overtakes the "
        "CPU between n=10k and n=100k"
    )


def test_undecided_sizes_beside_one_side_only_name_no_crossover(tmp_path):
    line = said(curve(tmp_path, [(64, 1e-4, 1.01e-4), (256, 1e-3, 1e-4), (1024, 1e-2, 1e-4)]))
    assert line["says"] == (
        "undecided at n=64, GPU ahead at n=256 and 1024; no size has the CPU ahead, so "
        "no crossover is named"
    )


def test_the_cpu_can_take_the_lead_back_at_a_larger_size(tmp_path):
    times = [(64, 1e-3, 1e-4), (256, 2e-3, 1e-4), (1024, 4e-3, 1e-4), (4096, 1e-2, 1e-1)]
    assert said(curve(tmp_path, times))["says"] == (
        "GPU ahead at the 3 sizes from n=64 to n=1024, CPU ahead at n=4096: the CPU "
        "overtakes the GPU between n=1024 and n=4096"
    )


def test_the_summary_says_what_the_sizes_say_alone_and_with_the_copies(tmp_path):
    frame = curve(tmp_path, [(2048, 1e-2, 1e-4)])
    table = summary.crossovers(frame)
    assert table.to_dict("records") == [
        {
            "kernel or workload": "stencil, float32",
            "copies excluded": "GPU ahead at the one size measured, n=2048",
            "copies included": "GPU ahead at the one size measured, n=2048",
        }
    ]
    page = summary.summary_html(frame, "cpu16")
    assert "<h2>Where the GPU overtakes the CPU of its host</h2>" in page
    assert "GPU faster from n" not in page


def test_the_figure_shades_the_bracket_and_marks_no_size_nobody_measured(tmp_path):
    frame, _ = tidy.collect(write_records(tmp_path, GPU_HOST))
    figure = crossovers.crossover_figure(frame)
    # saxpy, compared at one size only, has no curve to draw.
    panels = {ax.get_title().split("\n")[0]: ax for ax in figure.axes if ax.get_title()}
    assert list(panels) == ["matmul, float32"]
    matmul = panels["matmul, float32"]
    assert matmul.get_title().split("\n")[1:] == [
        "copies excluded: GPU overtakes between n=256 and 1024",
        "copies included: GPU overtakes between n=256 and 1024",
    ]
    assert matmul.get_ylabel() == "GPU speedup over the CPU (×)"
    bands = [patch for patch in matmul.patches if isinstance(patch, Polygon | Rectangle)]
    for band in bands:  # one per series, in its colour
        corners = band.get_patch_transform().transform(band.get_path().vertices)
        assert sorted({round(x) for x, _ in corners}) == [256, 1024]
    assert len(bands) == 2
    # Only the sizes measured: no line stands at a size nobody measured.
    lines = [line for line in matmul.lines if line.get_linestyle() != "None"]
    assert not [line for line in lines if len(set(line.get_xdata())) == 1]


def test_a_size_reads_the_same_in_the_crossover_table_and_on_a_figures_size_axis(tmp_path):
    times = [(4096, 1e-4, 1e-3), (2**20, 2e-3, 1e-3), (4_000_000, 1e-2, 1e-3)]
    frame = curve(tmp_path, times, kernel="saxpy")
    says = said(frame)["says"]
    assert says == (
        "CPU ahead at n=4096, GPU ahead at n=2²⁰ and 4M: the GPU overtakes the CPU "
        "between n=4096 and n=2²⁰"
    )
    drawn = figures.kernel_throughput_by_size(frame)
    ticks = {label.get_text() for ax in drawn.axes for label in ax.get_xticklabels()}
    assert ticks == {sizes.size_text(size) for size, _, _ in times} == {"4096", "2²⁰", "4M"}
    assert all(tick in says for tick in ticks)

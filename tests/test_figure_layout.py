"""Every figure, rendered on fixed records, checked for what a reader sees: no text over
other text or over a plotted point, labelled axes with units, no empty axes, a size that
fits a page, and a small note instead of empty axes when there is nothing to draw."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image

from accelbench.analysis import figures, outputs, style, tidy
from accelbench.measuring.statistics import rate_from_time, summarize, value

from records import (
    GPU_TRAIN,
    NO_GPU,
    NODE_TRAIN,
    datasci_records,
    device_record,
    scaled,
    with_energy,
    write_records,
)

PAGE = (7.0, 9.0)  # inches: full text width, a page less its caption
UNIT = re.compile(r"[(\[].+[)\]]")
# Flop and byte counts per element of each kernel's problem of size n.
KERNEL_WORK = {
    "matmul": (lambda n: 2 * n**3, lambda n: 12 * n**2),
    "saxpy": (lambda n: 2 * n, lambda n: 12 * n),
    "reduction": (lambda n: n, lambda n: 4 * n),
    "transfer-d2d": (lambda n: 0, lambda n: 8 * n),
}


def kernel_record(kernel, device, backend, dtype, size, seconds=None, status="ok"):
    exp_id = f"kernels/{kernel}/{device}/{backend}/{dtype}/n{size}"
    params = {"kernel": kernel, "device": device, "backend": backend, "dtype": dtype}
    params |= {"size": size, "seed": 0, "min_run_time": 0.1, "samples": 10}
    metrics = check = None
    if status == "ok":
        time = summarize(scaled(seconds, 1.0, spread=0.05), "s")
        flops, moved = (work(size) for work in KERNEL_WORK[kernel])
        metrics = {
            "time": time,
            "bandwidth": rate_from_time(time, moved / 1e9, "GB/s"),
            "arithmetic_intensity": value(flops / moved, "flop/byte"),
        }
        if flops:  # a copy does no arithmetic: it has no GFLOP/s
            metrics["gflops"] = rate_from_time(time, flops / 1e9, "GFLOP/s")
        check = {"passed": True, "relative_error": 0.0, "tolerance": 1e-4, "reference": "numpy"}
    reason = None if status == "ok" else NO_GPU
    return device_record("kernel", exp_id, status, params, metrics, check, reason)


def kernel_records(devices):
    """Sizes from 128 to 16M across kernels, two dtypes of matmul, a copy, a cell that
    could not run: the mix that once made panels share one unreadable axis. Speeds differ
    by device, backend, dtype and size, as measured ones do."""
    records = []
    for device in devices:
        speed = 40.0 if device.startswith("cuda") else int(device[3:])

        def seconds(work, backend, dtype, n, device_speed=speed):
            rate = device_speed * {"numpy": 1.0, "torch": 1.6}[backend] * (1 + math.log2(n) / 8)
            return work / 1e9 / rate * (2 if dtype == "float64" else 1)

        for backend, dtype, n in itertools.product(
            ("numpy", "torch"), ("float32", "float64"), (128, 512, 2048)
        ):
            time = seconds(n**3, backend, dtype, n)
            records.append(kernel_record("matmul", device, backend, dtype, n, time))
        for kernel, n in itertools.product(("saxpy", "reduction"), (1_000_000, 16_000_000)):
            time = seconds(n, "numpy", "float32", n)
            records.append(kernel_record(kernel, device, "numpy", "float32", n, time))
        time = seconds(4e6, "numpy", "float32", 4_000_000)
        records.append(kernel_record("transfer-d2d", device, "numpy", "float32", 4_000_000, time))
    records.append(
        kernel_record("saxpy", "cuda1", "numba", "float32", 1_000_000, status="unavailable")
    )
    return records


@pytest.fixture
def mixed(tmp_path):
    """CPU and GPU devices, thread counts, precisions, multi-GPU and multi-node training,
    several kernels, their energy (but not on cpu4, where it could not be read), data
    science workloads on a CPU and a GPU."""
    records = with_energy([*GPU_TRAIN, *NODE_TRAIN, *kernel_records(["cpu1", "cpu2", "cuda1"])])
    records += datasci_records(["cpu2", "cuda1"])
    frame, problems = tidy.collect(write_records(tmp_path / "mixed", records))
    assert problems == []
    return frame


@pytest.fixture
def cpu_only(tmp_path):
    """What the default grid gives on a machine without a GPU."""
    train = [record for record in GPU_TRAIN if record[0].split("/")[2].startswith("cpu")]
    records = [*train, *kernel_records(["cpu1", "cpu2"]), *datasci_records(["cpu2"])]
    frame, problems = tidy.collect(write_records(tmp_path / "cpu", records))
    assert problems == []
    return frame


def rendered(fig):
    """The figure laid out and drawn, as saving it would, and its renderer."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def tick_labels(axis):
    """The tick labels the reader sees: visible, not empty, at ticks inside the view."""
    low, high = sorted(axis.get_view_interval())
    shown = []
    for locations, ticks in (
        (axis.get_majorticklocs(), axis.get_major_ticks()),
        (axis.get_minorticklocs(), axis.get_minor_ticks()),
    ):
        for location, tick in zip(locations, ticks, strict=False):
            if low * (1 - 1e-9) <= location <= high * (1 + 1e-9):
                shown += [
                    label
                    for label in (tick.label1, tick.label2)
                    if label.get_visible() and label.get_text()
                ]
    return shown


def texts(fig):
    """Every text drawn in the figure: titles, axis and tick labels, notes, legends."""
    found = [text for text in fig.texts if text.get_text()]
    for legend in fig.legends:
        found += legend.get_texts()
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        found += [text for text in (ax.title, ax.xaxis.label, ax.yaxis.label) if text.get_text()]
        found += tick_labels(ax.xaxis) + tick_labels(ax.yaxis) + list(ax.texts)
        if ax.get_legend():
            found += ax.get_legend().get_texts()
    return found


def overlaps(fig, renderer):
    boxes = [(text.get_text(), text.get_window_extent(renderer)) for text in texts(fig)]
    boxes = [(name, box.expanded(0.98, 0.9)) for name, box in boxes]  # glyph padding
    return [
        (first, second)
        for (first, a), (second, b) in itertools.combinations(boxes, 2)
        if a.overlaps(b)
    ]


def covered_points(fig, renderer):
    """(text, axes title) of every note inside an axes that sits on a plotted marker."""
    covered = []
    for ax in (ax for ax in fig.axes if ax.get_visible()):
        boxes = [(text.get_text(), text.get_window_extent(renderer)) for text in ax.texts]
        # Points, not the caps of error bars (markers _ and |).
        markers = [
            line for line in ax.lines if line.get_marker() not in (None, "None", "", " ", "_", "|")
        ]
        for line in markers:
            points = np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float)
            shown = ax.transData.transform(points[np.isfinite(points).all(axis=1)])
            for name, box in boxes:
                if name and any(box.contains(x, y) for x, y in shown):
                    covered.append((name, ax.get_title()))
    return covered


def has_data(ax):
    return bool(ax.lines or ax.collections or ax.patches or ax.images)


def numeric(labels):
    return all(
        re.fullmatch(r"[\d.,−\-+e×/ $^{}\\mathdefault]+", text.get_text()) for text in labels
    )


def layout_problems(name, fig):
    renderer = rendered(fig)  # one drawing serves every check below
    problems = [
        f"{name}: {first!r} overlaps {second!r}" for first, second in overlaps(fig, renderer)
    ]
    problems += [
        f"{name}: {text!r} covers a point in {title!r}"
        for text, title in covered_points(fig, renderer)
    ]
    width, height = fig.get_size_inches()
    if width > PAGE[0] + 1e-6 or height > PAGE[1] + 1e-6:
        problems.append(f"{name}: {width:.2f} x {height:.2f} in is larger than a page")
    for ax in (ax for ax in fig.axes if ax.get_visible()):
        if not (has_data(ax) or ax.texts):
            problems.append(f"{name}: axes {ax.get_title()!r} hold nothing")
        if not has_data(ax):
            continue
        if ax.get_label() == "<colorbar>":
            if not UNIT.search(ax.get_ylabel()):
                problems.append(f"{name}: colour bar {ax.get_ylabel()!r} has no unit")
            continue
        if not (ax.get_xlabel() and ax.get_ylabel()):
            problems.append(f"{name}: axes {ax.get_title()!r} lack an x or y label")
        if numeric(tick_labels(ax.yaxis)) and not UNIT.search(ax.get_ylabel()):
            problems.append(f"{name}: y label {ax.get_ylabel()!r} has no unit")
    return problems


@pytest.mark.parametrize("width", ["single", "double"])
def test_every_figure_is_laid_out_for_print_at_either_width(mixed, width):
    """At the width each figure picks itself, on three grids: tests/test_figure_review.py."""
    problems = []
    for name, draw in outputs.FIGURES.items():
        fig = draw(mixed, "cpu1", style.figure_width(width))
        problems += layout_problems(f"{name} ({width})", fig)
    assert problems == []


def test_a_figure_with_nothing_to_show_is_a_small_note(cpu_only, tmp_path):
    fig = outputs.FIGURES["train_gpu_scaling"](cpu_only, "cpu1", None)
    (ax,) = fig.axes
    assert [text.get_text() for text in ax.texts] == ["no multi-GPU records"]
    assert not ax.axison and fig.get_figheight() < 1.0
    assert layout_problems("note", fig) == []
    empty, _ = tidy.collect([])
    for name, draw in outputs.FIGURES.items():
        fig = draw(empty, "cpu1", None)
        assert len(fig.axes) == 1 and fig.get_figheight() < 1.0, name
        pdf, png = style.save(fig, tmp_path / name)
        assert pdf.stat().st_size > 1000 and png.stat().st_size > 1000


def test_kernel_panels_have_their_own_sizes_and_the_metric_that_fits(mixed):
    fig = figures.kernel_throughput_by_size(mixed)
    rendered(fig)
    panels = {ax.get_title(): ax for ax in fig.axes}
    # Three kernels at two sizes or more on each device; the copy at its one size joins
    # the other copies measured at one size, side by side.
    curves = {
        f"{kernel}, {device}"
        for kernel in ("matmul", "reduction", "saxpy")
        for device in ("cpu1", "cpu2", "cuda1")
    }
    assert set(panels) == curves | {"float32, at one size each"}
    assert panels["matmul, cuda1"].get_ylabel() == "Throughput (GFLOP/s)"
    for kernel in ("saxpy", "reduction"):
        assert panels[f"{kernel}, cpu2"].get_ylabel() == "Bandwidth (GB/s)", kernel
    assert [t.get_text() for t in tick_labels(panels["matmul, cpu1"].xaxis)] == [
        "128",
        "512",
        "2048",
    ]
    assert [t.get_text() for t in tick_labels(panels["saxpy, cpu1"].xaxis)] == ["1M", "16M"]
    copies = panels["float32, at one size each"]
    assert copies.get_ylabel() == "Bandwidth (GB/s)"
    assert [t.get_text() for t in tick_labels(copies.xaxis)] == [
        f"transfer-d2d, {device}, n=4M" for device in ("cpu1", "cpu2", "cuda1")
    ]
    # Each copy is a point with an error bar from its interval.
    assert all(len(bar.lines[2][0].get_segments()) == 1 for bar in copies.containers)
    assert [t.get_text() for t in panels["saxpy, cuda1"].texts] == ["n/a"]


def test_time_per_batch_is_in_the_tables_unit_on_a_log_axis(mixed):
    ax = figures.time_per_batch_by_device(mixed).axes[0]
    # The unit of the largest time, as a table's row has it: 7.5 ms on a GPU to 3 s on one
    # thread reads in s.
    assert ax.get_ylabel() == "Time per mini-batch (s)"
    assert ax.get_yscale() == "log"


def test_the_legend_stays_compact(mixed):
    fig = figures.cpu_thread_scaling(mixed)
    rendered(fig)
    legend = fig.legends[0].get_window_extent()
    (ax,) = fig.axes
    assert legend.height < 0.3 * fig.bbox.height
    assert ax.get_window_extent().height > 0.5 * fig.bbox.height


def test_energy_is_drawn_against_time_per_sample_in_the_tables_units(mixed, cpu_only):
    fig = figures.energy_against_time(mixed, "train")
    panels = {ax.get_title(): ax for ax in fig.axes}
    # vgg11's energy was read on one device only (cpu1; OOM on the GPU): nothing beside it.
    assert set(panels) == {"fcn", "lstm", "resnet18"}
    ax = panels["resnet18"]
    assert ax.get_xlabel() == "Time per sample (ms)"  # the unit of the largest, 31 ms
    assert ax.get_ylabel() == "Energy per sample (J)"  # the unit of the largest
    assert ax.get_xscale() == "log"  # 0.4 ms per sample on a GPU to 31 ms on one thread
    legend = [text.get_text() for text in fig.legends[0].get_texts()]
    assert "cpu4" not in legend  # its energy could not be read: no point
    assert {"cpu1", "cuda1", "cuda4", "fp32", "bf16"} <= set(legend)
    # A precision keeps its colour; with several devices, the device's marker tells them.
    (fp32,) = [h for h in fig.legends[0].legend_handles if h.get_label() == "fp32"]
    assert fp32.get_color() == style.look("precision", "fp32").color
    note = figures.energy_against_time(cpu_only, "train")
    assert [text.get_text() for text in note.axes[0].texts] == [
        "no train cells whose energy was measured beside another's"
    ]


def test_the_png_is_300_dpi(mixed, tmp_path):
    _, png = style.save(figures.kernel_throughput_by_size(mixed), tmp_path / "kernel")
    with Image.open(png) as image:
        assert image.info["dpi"] == pytest.approx((style.PNG_DPI, style.PNG_DPI), abs=0.1)

"""Every figure a grid declares, drawn from four grids and looked at as a reviewer would.

The grids: a CPU-only one like the default (tests/planted.py: one record per planned
experiment, on a host whose energy counters cannot be read), the committed H200 reference
(its own records and config), a user's own workload (a kernel, a backend, a model and a
data science step no table of looks has heard of), and two machines' shared cells. Each
figure a grid declares (accelbench.analysis.outputs, and the roofline study's) is drawn
once per module and laid out; the tests read what was drawn, artist by artist, and fail
on: a figure with no data (a sentence in place of a plot), a panel with one point, a line
through one point, text over text or beyond the figure, a legend larger than its axes,
an interval cut off at an edge without its arrow, a log axis over less than a decade, raw
math in an axis label, a name drawn in two colours (in two figures, two grids, or its
legend and its marks), and two figures that draw the same numbers.
"""

from __future__ import annotations

import itertools
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import QuadMesh
from matplotlib.colors import to_hex
from matplotlib.container import ErrorbarContainer
from matplotlib.lines import Line2D
from test_figure_layout import layout_problems, rendered, texts

from accelbench import config as accelbench_config
from accelbench import grid, studies
from accelbench.analysis import (
    crossovers,
    figures,
    fillable,
    machines,
    marks,
    outputs,
    style,
    summary,
    tidy,
)
from accelbench.measuring.statistics import rate_from_time, summarize, value
from accelbench.studies.roofline import offload, roofline

import planted
from conftest import REPO_ROOT
from records import NO_RAPL, device_record, scaled, train_record, write_records

H200 = REPO_ROOT / "reference" / "nvidia-h200"
CPU_ONLY = fillable.Counters(frozenset({"cuda"}), {"cpu": NO_RAPL})
# The figures the workflow draws, by file name: draw(frame, baseline device).
DRAW = {
    **{
        name: (lambda frame, baseline, draw=draw: draw(frame, baseline, None))
        for name, draw in outputs.FIGURES.items()
    },
    "kernel_crossover": lambda frame, baseline: crossovers.crossover_figure(frame),
    "roofline": lambda frame, baseline: roofline.roofline_figure(frame),
    "offload_break_even": lambda frame, baseline: offload.figure(
        frame, offload.break_even_table(frame)
    ),
}
# The colours that name nothing: black reference lines and style entries, the grey of
# another machine's numbers, white.
UNNAMED = {style.NEUTRAL, style.REFERENCE, "#ffffff"}


def declared(configfiles: list[Path], counters: fillable.Counters) -> tuple[set[str], str]:
    """The figures a grid's default target asks for, and its baseline device."""
    config = accelbench_config.load(configfiles)
    plan = fillable.Planned.of(grid.expand(config), counters)
    baseline = config["report"]["baseline_device"]
    found = {
        out.name
        for out in outputs.OUTPUTS
        if out.kind == outputs.FIGURE and out.name in DRAW and out.fills(plan, baseline)
    }
    found |= {name for name, need in studies.needs().items() if name in DRAW and need(plan, "")}
    return found, baseline


def _kernel(name, device, backend, size, seconds, intensity):
    """A kernel record of a user's own kernel, `seconds` a call (samples 1% apart)."""
    exp_id = f"kernels/{name}/{device}/{backend}/float32/n{size}"
    params = {"kernel": name, "device": device, "backend": backend, "dtype": "float32"}
    params |= {"size": size, "seed": 0, "min_run_time": 0.1, "samples": 10}
    time = summarize(scaled(seconds, 1.0), "s")
    metrics = {
        "time": time,
        "gflops": rate_from_time(time, size / 1e9, "GFLOP/s"),
        "bandwidth": rate_from_time(time, size / intensity / 1e9, "GB/s"),
        "arithmetic_intensity": value(intensity, "flop/byte"),
    }
    check = {"passed": True, "relative_error": 0.0, "tolerance": 0.0, "reference": "numpy"}
    return device_record("kernel", exp_id, "ok", params, metrics, check, None)


def plugin_records():
    """A user's own units on two CPU devices: a kernel "twice" in NumPy and in a backend
    of the user's ("mlx"), at three sizes; a model "tinynet" on one and two threads; a
    workload "clip" in pandas at two sizes."""
    records = [
        _kernel("twice", device, backend, size, size * 1e-9 / speed / threads, 0.125)
        for device, threads in (("cpu1", 1), ("cpu2", 2))
        for backend, speed in (("numpy", 1.0), ("mlx", 1.7))
        for size in (2**16, 2**20, 2**24)
    ]
    records += [
        train_record("tinynet", f"cpu{n}", samples=scaled(0.1 / n**0.8, 1.0)) for n in (1, 2)
    ]
    for device, size in itertools.product(("cpu1", "cpu2"), (10_000, 1_000_000)):
        exp_id = f"datasci/clip/{device}/pandas/n{size}"
        params = {"workload": "clip", "device": device, "backend": "pandas", "size": size}
        params |= {"seed": 0, "min_run_time": 0.1, "samples": 10, "item": "rows"}
        time = summarize(scaled(size * 1e-8, 1.0), "s")
        metrics = {"time": time, "item_throughput": rate_from_time(time, size, "items/s")}
        check = {"passed": True, "relative_error": 0.0, "tolerance": 0.0, "reference": "pandas"}
        records.append(device_record("datasci", exp_id, "ok", params, metrics, check, None))
    return records


PLUGIN_FIGURES = {
    "kernel_throughput",
    "datasci_throughput",
    "train_time_per_batch",
    "train_thread_scaling",
}


def _cpu_grid(root: Path) -> tuple:
    planted.plant(root, [])
    frame, problems = tidy.collect(sorted(str(path) for path in root.rglob("*.json")))
    assert problems == []
    names, baseline = declared([], CPU_ONLY)
    return frame, names, baseline


def _gpu_grid(root: Path) -> tuple:
    shutil.copytree(H200 / "records", root, dirs_exist_ok=True)
    frame, problems = tidy.collect(sorted(str(path) for path in root.rglob("*.json")))
    assert problems == []
    names, baseline = declared([H200 / "config.yaml"], CPU_ONLY)
    return frame, names, baseline


def _plugin_grid(root: Path) -> tuple:
    frame, problems = tidy.collect(write_records(root, plugin_records()))
    assert problems == []
    return frame, PLUGIN_FIGURES, "cpu1"


GRIDS = {"cpu only": _cpu_grid, "H200 reference": _gpu_grid, "own units": _plugin_grid}


def _two_machines(root: Path):
    """The times of the cells two machines share (`accelbench compare-machines`): the
    default grid's training planted on host node01, and again on node02."""
    planted.plant(root / "here", [])
    for path in (root / "here" / "train").rglob("*.json"):
        other = root / "there" / path.relative_to(root / "here")
        other.parent.mkdir(parents=True, exist_ok=True)
        other.write_text(path.read_text().replace('"host": "node01"', '"host": "node02"'))
    joined = machines.join([machines.load(root / "here"), machines.load(root / "there")])
    return figures.machine_times(joined)


@pytest.fixture(scope="module")
def drawn(tmp_path_factory) -> dict[str, dict]:
    """grid -> figure name -> (figure, its renderer): each declared figure drawn and laid
    out once."""
    found = {}
    for name, make in GRIDS.items():
        frame, names, baseline = make(tmp_path_factory.mktemp(name.replace(" ", "-")))
        figs = {figure: DRAW[figure](frame, baseline) for figure in sorted(names)}
        found[name] = {figure: (fig, rendered(fig)) for figure, fig in figs.items()}
    fig = _two_machines(tmp_path_factory.mktemp("machines"))
    found["two machines"] = {"machines": (fig, rendered(fig))}
    return found


def each(drawn):
    for grid_name, figs in drawn.items():
        for name, (fig, renderer) in figs.items():
            yield f"{name} ({grid_name})", fig, renderer


def data_axes(fig):
    return [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]


def points(ax) -> set[tuple[float, float]]:
    """The data points of `ax`: the medians of its marks and the cells of a heat map."""
    found = set()
    lines = [line for line in ax.lines if line.get_marker() not in (None, "None", "", " ")]
    for line in lines:
        xy = np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float)
        found |= {(x, y) for x, y in xy if math.isfinite(x) and math.isfinite(y)}
    for mesh in (c for c in ax.collections if isinstance(c, QuadMesh)):
        values = np.ma.masked_invalid(mesh.get_array())
        found |= {(float(i), 0.0) for i in np.flatnonzero(~np.ma.getmaskarray(values))}
    return found


def test_each_grid_declares_what_it_compares_and_no_sentence(drawn):
    assert set(drawn["cpu only"]) >= {"kernel_throughput", "train_thread_scaling", "roofline"}
    # No GPU, no counter to read: no energy figure, no speedup over another kind.
    assert not {"kernel_energy", "train_energy", "datasci_energy"} & set(drawn["cpu only"])
    # One device for ResNet-50: its two precisions are the precision figure's, not the
    # device figure's; Mandelbrot at one size has no crossover curve.
    h200 = set(drawn["H200 reference"])
    assert {"train_precision", "train_energy", "kernel_energy"} <= h200
    assert not {"train_time_per_batch", "kernel_crossover"} & h200
    placeholders = [
        where
        for where, fig, _ in each(drawn)
        if not any(points(ax) or ax.lines for ax in data_axes(fig))
    ]
    assert placeholders == []


def test_no_panel_holds_a_single_point(drawn):
    lonely = [
        f"{where}: {ax.get_title()!r}"
        for where, fig, _ in each(drawn)
        for ax in data_axes(fig)
        if len(points(ax)) < 2
    ]
    assert lonely == []


def test_a_line_joins_two_points_and_a_size_axis_holds_two_sizes(drawn):
    """A line through one point draws nothing; an axis of sizes with one says nothing."""
    problems = []
    for where, fig, _ in each(drawn):
        for ax in data_axes(fig):
            lines = [line for line in ax.lines if line.get_linestyle() not in ("None", "", " ")]
            for line in (line for line in lines if line.get_marker() not in (None, "None", "")):
                shown = np.isfinite(np.asarray(line.get_ydata(), float)).sum()
                if shown < 2:
                    problems.append(f"{where}: {ax.get_title()!r} a line through {shown} point")
            sizes = {x for x, _ in points(ax)}
            if ax.get_xlabel() == "Problem size n" and len(sizes) < 2:
                problems.append(f"{where}: {ax.get_title()!r} at one size")
    assert problems == []


def test_no_text_overlaps_another_or_leaves_the_figure(drawn):
    problems = []
    for where, fig, renderer in each(drawn):
        problems += layout_problems(where, fig)
        bounds = fig.bbox.expanded(1.0, 1.0)
        for text in texts(fig):
            box = text.get_window_extent(renderer)
            corners = ((box.x0 + 1, box.y0 + 1), (box.x1 - 1, box.y1 - 1))
            if box.width and not all(bounds.contains(x, y) for x, y in corners):
                problems.append(f"{where}: {text.get_text()!r} leaves the figure")
    assert problems == []


def test_a_legend_is_smaller_than_the_axes_it_explains(drawn):
    problems = []
    for where, fig, renderer in each(drawn):
        axes = [ax.get_window_extent(renderer) for ax in data_axes(fig)]
        area = sum(box.width * box.height for box in axes)
        for legend in fig.legends:
            box = legend.get_window_extent(renderer)
            if box.width * box.height >= area or box.height >= max(b.height for b in axes) * 1.5:
                problems.append(f"{where}: legend {box.width:.0f} x {box.height:.0f} px")
    assert problems == []


def cut_off(ax) -> int:
    """How many ends of error bars lie beyond the edges of `ax`."""
    views = {"x": ax.get_xlim(), "y": ax.get_ylim()}
    count = 0
    for container in (c for c in ax.containers if isinstance(c, ErrorbarContainer)):
        for collection in container.lines[2]:
            for segment in collection.get_segments():
                (x0, y0), (x1, _) = segment
                axis, at = ("y", x0) if x0 == x1 else ("x", y0)
                across = views["x" if axis == "y" else "y"]
                if min(across) <= at <= max(across):
                    count += len(marks.beyond(segment, views[axis], axis))
    return count


def test_an_interval_cut_off_at_an_edge_has_its_arrow(drawn):
    found = [
        (where, ax.get_title(), cut_off(ax), arrows)
        for where, fig, _ in each(drawn)
        for ax in data_axes(fig)
        if cut_off(ax) != (arrows := len(ax.findobj(lambda a: a.get_gid() == marks.BEYOND)))
    ]
    assert found == []
    assert sum(cut_off(ax) for _, fig, _ in each(drawn) for ax in data_axes(fig)) > 0


def test_a_log_axis_spans_a_decade(drawn):
    narrow = []
    for where, fig, _ in each(drawn):
        for ax in data_axes(fig):
            for axis, scale, limits in (
                ("x", ax.get_xscale(), ax.get_xlim()),
                ("y", ax.get_yscale(), ax.get_ylim()),
            ):
                low, high = sorted(limits)
                if scale == "log" and high / low < marks.DECADE:
                    narrow.append(f"{where}: {ax.get_title()!r} {axis} {low:.3g} to {high:.3g}")
    assert narrow == []


def test_math_is_typeset_in_every_axis_label(drawn):
    """t_CPU, not a raw underscore: outside $...$ a label holds none."""
    problems = [
        f"{where}: {label!r}"
        for where, fig, _ in each(drawn)
        for ax in data_axes(fig)
        for label in (ax.get_xlabel(), ax.get_ylabel())
        if "_" in re.sub(r"\$[^$]*\$", "", label) or label.count("$") % 2
    ]
    assert problems == []


def legend_colours(fig) -> dict[str, str]:
    """Each named legend entry's colour; entries for a style alone and unnamed colours left
    out."""
    found = {}
    for legend in fig.legends:
        for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
            if not isinstance(handle, Line2D) or handle.get_gid() == "style":
                continue
            colour = to_hex(handle.get_color())
            if colour not in UNNAMED:
                found[text.get_text()] = colour
    return found


def drawn_colours(fig) -> set[str]:
    found = set()
    for ax in data_axes(fig):
        found |= {to_hex(line.get_color()) for line in ax.lines}
        found |= {to_hex(line.get_markeredgecolor()) for line in ax.lines}
    return found


def test_a_name_has_one_colour_in_every_figure_of_every_grid(drawn):
    seen: dict[str, dict[str, str]] = {}
    unmatched = []
    for where, fig, _ in each(drawn):
        colours = legend_colours(fig)
        for label, colour in colours.items():
            seen.setdefault(label, {})[where] = colour
        unmatched += [
            f"{where}: {label}" for label, c in colours.items() if c not in drawn_colours(fig)
        ]
    twice = {label: by for label, by in seen.items() if len(set(by.values())) > 1}
    assert twice == {}
    assert unmatched == []
    # Backends, devices and precisions are compared across figures and grids by name.
    assert {"torch", "numpy", "cpu1", "cpu2", "fp32", "tf32", "mlx"} <= set(seen)
    assert (
        seen["torch"]["kernel_throughput (H200 reference)"] == style.look("backend", "torch").color
    )


def test_no_two_figures_draw_the_same_numbers(drawn):
    for grid_name, figs in drawn.items():
        values = {
            name: frozenset(round(y, 12) for ax in data_axes(fig) for _, y in points(ax))
            for name, (fig, _) in figs.items()
        }
        same = [
            (first, second)
            for first, second in itertools.combinations(values, 2)
            if values[first] and values[first] == values[second]
        ]
        assert same == [], grid_name


def test_the_summary_names_each_figure_not_drawn_and_why():
    config = accelbench_config.load([])
    plan = fillable.Planned.of(grid.expand(config), CPU_ONLY)
    sentences = outputs.not_drawn(plan, "cpu1")
    energy = [sentence for sentence in sentences if "_energy)" in sentence]
    assert len(energy) == 3 and all(NO_RAPL in sentence for sentence in energy)
    empty, _ = tidy.collect([])
    page = summary.summary_html(empty, "cpu1", not_drawn=sentences)
    assert "<h2>Figures not drawn</h2>" in page and "(kernel_energy) is not drawn" in page


def test_every_declared_look_is_one_of_a_kind_and_an_unknown_name_keeps_its_own():
    for category, looks in style.LOOKS.items():
        pairs = [(look.color, look.marker) for look in looks.values()]
        assert len(pairs) == len(set(pairs)), category
    mine = style.look("backend", "mlx")
    assert mine == style.look("backend", "mlx")  # by name: the same in every run
    assert (mine.color, mine.marker) not in {
        (look.color, look.marker) for look in style.LOOKS["backend"].values()
    }
    assert mine.color in style.COLOURS and mine.marker in style.MARKERS

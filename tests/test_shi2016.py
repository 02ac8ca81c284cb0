"""Shi et al. (2016): the config plans the paper's networks, the whole of its Table 7 ships
with the package, and the comparison puts the measured times beside the paper's Torch and
the best of its five tools, with ratios and thread scaling."""

from __future__ import annotations

import csv
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_figure_layout import layout_problems

from accelbench import config as accelbench_config
from accelbench import grid, studies
from accelbench.analysis import fillable, style, tidy
from accelbench.studies import shi2016 as shi2016_study
from accelbench.studies.shi2016 import comparison as shi2016
from accelbench.studies.shi2016 import paper as shi2016_paper
from accelbench.train import settings
from accelbench.train.models import models, resolve_options

from records import NO_GPU, scaled, train_record, write_records

REPO_ROOT = Path(__file__).resolve().parent.parent
RESNET50 = {"lr": 0.001, "depth": 50, "image_size": 224, "classes": 1000}
SHIPPED = REPO_ROOT / "src" / "accelbench" / "studies" / "shi2016" / "table7.csv"


def paper_record(model, device, samples=None, status="ok", reason=None, batch=16, **options):
    exp_id, record = train_record(
        model, device, status=status, samples=samples, reason=reason, batch=batch
    )
    record["params"]["options"] = options
    return exp_id, record


def fcn_s(device, samples):
    return paper_record("fcn-s", device, samples, batch=64, **shi2016_paper.NETWORKS[0].options)


@pytest.fixture
def frame(tmp_path):
    """ResNet-50 on 1, 2 and 4 threads and a GPU that was not there; one ResNet-50 at the
    default image size (not the paper's network); the LSTM stand-in on one thread; FCN-S
    on 8 threads, where the paper's Torch did not run on the desktop."""
    lstm = shi2016_paper.NETWORKS[-1]
    records = [
        paper_record("resnet50", "cpu1", scaled(10.0, 1.0), **RESNET50),
        paper_record("resnet50", "cpu2", scaled(10.0, 0.6), **RESNET50),
        paper_record("resnet50", "cpu4", scaled(10.0, 0.2), **RESNET50),
        paper_record("resnet50", "cuda1", status="unavailable", reason=NO_GPU, **RESNET50),
        paper_record("lstm", "cpu1", scaled(0.5, 1.0), batch=128, lr=0.002, **lstm.options),
        fcn_s("cpu8", scaled(0.3, 1.0)),
    ]
    small = paper_record("resnet50", "cpu8", scaled(1.0, 1.0), **{**RESNET50, "image_size": 64})
    found, problems = tidy.collect(write_records(tmp_path, [*records, small]))
    assert problems == []
    return found


@pytest.fixture
def gpu_frame(tmp_path):
    """ResNet-50 on one and two threads and on one GPU, FCN-S on one and two threads."""
    records = [
        paper_record("resnet50", "cpu1", scaled(10.0, 1.0), **RESNET50),
        paper_record("resnet50", "cpu2", scaled(10.0, 0.55), **RESNET50),
        paper_record("resnet50", "cuda1", scaled(0.05, 1.0), **RESNET50),
        fcn_s("cpu1", scaled(0.6, 1.0)),
        fcn_s("cpu2", scaled(0.6, 0.7)),
    ]
    found, problems = tidy.collect(write_records(tmp_path, records))
    assert problems == []
    return found


def test_the_config_plans_every_network_of_the_paper_and_nothing_else():
    config = accelbench_config.load([studies.config_file("shi2016")])
    planned = grid.expand(config).experiments
    assert {exp.family for exp in planned} == {"train"}
    assert {(exp.model, exp.batch) for exp in planned} == {
        (network.model, network.batch) for network in shi2016_paper.NETWORKS
    }
    for exp in planned:
        network = next(n for n in shi2016_paper.NETWORKS if n.model == exp.model)
        model_settings = settings.for_model(config, exp.model)
        options = resolve_options(
            models()[exp.model], model_settings["model_options"], model_settings["image_size"]
        )
        assert shi2016_paper.differing_options(network, options) == {}, exp.path
        assert (exp.precision, exp.strategy) == ("fp32", "single")
    plan = fillable.Planned.of(grid.expand(config))
    assert shi2016_study.NEEDS["shi2016_comparison"](plan, "cpu1")


def test_the_default_grid_has_no_network_of_the_paper():
    plan = fillable.Planned.of(grid.expand(accelbench_config.load()))
    assert not shi2016_study.NEEDS["shi2016_comparison"](plan, "cpu1")


def test_every_cell_of_table_7_is_read_from_the_shipped_file():
    with SHIPPED.open(encoding="utf-8") as file:
        lines = list(csv.DictReader(file))
    assert len(lines) == len(shi2016_paper.TABLE7) == 7 * 5 * 13
    for line in lines:
        cell = shi2016_paper.published(
            line["network"], line["tool"], line["platform"], int(line["threads"])
        )
        if line["seconds"]:
            assert cell.seconds == float(line["seconds"])
        else:  # the paper's "-": did not run, never a number
            assert cell.seconds is None and not cell.ran
        assert cell.bold == (line["bold_in_paper"] == "1")
    ran = [cell for cell in shi2016_paper.TABLE7.values() if cell.ran]
    assert len(ran) == 392
    assert shi2016_paper.published("ResNet-50", "Torch", "desktop_cpu", 2).seconds == 7.5
    assert shi2016_paper.published("ResNet-50", "Torch", "desktop_cpu", 16) is None


def test_the_bold_cells_are_each_tools_fastest_setting_per_platform_group():
    """The transcription agrees with the paper's own marks: within the desktop CPU, the
    server CPU and the three GPUs, each tool's one bold cell is its fastest."""
    groups: dict[tuple[str, str, str], list] = {}
    for cell in shi2016_paper.TABLE7.values():
        kind = "gpu" if shi2016_paper.PLATFORMS[cell.platform].is_gpu else cell.platform
        groups.setdefault((cell.network, cell.tool, kind), []).append(cell)
    for key, cells in groups.items():
        ran = [cell for cell in cells if cell.ran]
        bold = [cell for cell in cells if cell.bold]
        assert len(bold) == (1 if ran else 0), key
        if ran:
            assert bold[0].seconds == min(cell.seconds for cell in ran), key


def test_best_of_five_is_the_fastest_tool_that_ran():
    best = shi2016_paper.best("ResNet-50", "desktop_cpu", 1)
    assert (best.tool, best.seconds) == ("Caffe", 11.554)  # Torch: 13.178, CNTK did not run
    best = shi2016_paper.best("ResNet-50", "gpu_gtx1080", 1)
    assert (best.tool, best.seconds) == ("MXNet", 0.136)
    assert shi2016_paper.best("ResNet-50", "server_cpu", 3) is None


def table_text(change) -> str:
    lines = SHIPPED.read_text(encoding="utf-8").splitlines()
    return "\n".join(change(lines)) + "\n"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda lines: lines[:-1],
            "cells of the paper missing: 1, first ('LSTM', 'Torch', 'gpu_tesla_k80', 1)",
        ),
        (lambda lines: [*lines, lines[1]], "line 457: a second cell for ('FCN-S', 'Caffe'"),
        (
            lambda lines: [lines[0], lines[1].replace("1.324", "0"), *lines[2:]],
            "line 2: seconds '0' is not allowed; allowed: a positive number, or empty",
        ),
        (
            lambda lines: [lines[0], lines[1].replace("desktop_cpu", "laptop"), *lines[2:]],
            "line 2: platform 'laptop' is not allowed; allowed: desktop_cpu, server_cpu, gpu_",
        ),
        (
            lambda lines: [lines[0], lines[1].replace(",64,", ",32,"), *lines[2:]],
            "line 2: batch '32' is not allowed; allowed: 64 for FCN-S",
        ),
        (
            lambda lines: [lines[0], lines[5].replace(",1,1.355", ",3,1.355"), *lines[2:]],
            "line 2: threads '3' is not allowed; allowed: 1, 2, 4, 8, 16, 32 on server_cpu",
        ),
    ],
    ids=["a cell lacks", "a cell twice", "zero", "platform", "batch", "threads"],
)
def test_a_damaged_copy_of_the_table_is_refused_naming_the_line(change, message):
    with pytest.raises(shi2016_paper.Table7Error, match="table7.csv") as error:
        shi2016_paper.read_table7(table_text(change), "shi2016_table7.csv")
    assert message in str(error.value)


def test_measured_times_beside_torch_and_the_best_of_five_on_both_cpus(frame):
    numbers, not_compared = shi2016.comparison(frame)
    resnet = numbers[numbers["network"] == "ResNet-50"].set_index(["device", "platform"])
    # Every CPU record meets the desktop and the server at its thread count.
    assert list(resnet.index) == [
        ("cpu1", "desktop_cpu"),
        ("cpu1", "server_cpu"),
        ("cpu2", "desktop_cpu"),
        ("cpu2", "server_cpu"),
        ("cpu4", "desktop_cpu"),
        ("cpu4", "server_cpu"),
        ("cuda1", "gpu_gtx980"),
        ("cuda1", "gpu_gtx1080"),
        ("cuda1", "gpu_tesla_k80"),
    ]
    one = resnet.loc[("cpu1", "desktop_cpu"), "measured_s"]
    two = resnet.loc[("cpu2", "server_cpu"), "measured_s"]
    assert resnet.loc[("cpu1", "desktop_cpu"), "torch_s"] == 13.178
    assert resnet.loc[("cpu1", "desktop_cpu"), ["best_s", "best_tool"]].tolist() == [
        11.554,
        "Caffe",
    ]
    assert resnet.loc[("cpu1", "desktop_cpu"), "best_ratio"] == pytest.approx(one / 11.554)
    assert resnet.loc[("cpu2", "server_cpu"), "torch_ratio"] == pytest.approx(two / 8.391)
    assert resnet.loc[("cpu2", "server_cpu"), "speedup_here"] == pytest.approx(one / two)
    assert resnet.loc[("cpu2", "server_cpu"), "speedup_torch"] == pytest.approx(12.807 / 8.391)
    assert resnet.loc[("cpu4", "desktop_cpu"), "speedup_torch"] == pytest.approx(13.178 / 4.736)
    assert (resnet.loc["cuda1", "status"] == "unavailable").all()
    assert numbers[numbers["network"] == "LSTM"]["faithful"].tolist() == [False, False]
    assert not_compared == [
        "train/resnet50/cpu8/fp32/single/bs16 is not ResNet-50, which has image_size 224"
    ]
    # The paper's "-" stays without a number: Torch did not run FCN-S on 8 desktop threads.
    fcn = numbers[numbers["network"] == "FCN-S"].set_index("platform")
    assert not fcn.loc["desktop_cpu", "torch_ran"] and math.isnan(fcn.loc["desktop_cpu", "torch_s"])
    assert fcn.loc["server_cpu", "torch_s"] == 0.433


def test_a_device_the_paper_has_no_column_for_keeps_one_row_without_one(tmp_path):
    records = [
        paper_record(model="resnet50", device=d, samples=scaled(9.0, 0.5), **RESNET50)
        for d in ("cpu3", "cuda2")
    ]
    frame, _ = tidy.collect(write_records(tmp_path, records))
    numbers, _ = shi2016.comparison(frame)
    assert numbers[["device", "platform"]].values.tolist() == [["cpu3", None], ["cuda2", None]]
    display = shi2016.display_table(numbers)
    assert display["Torch (s)"].tolist() == ["–", "–"]


def test_the_table_names_both_columns_of_the_paper_and_blanks_what_repeats(frame, tmp_path):
    numbers, not_compared = shi2016.comparison(frame)
    display = shi2016.display_table(numbers)
    assert display["Network"].tolist()[:2] == ["FCN-S", ""]  # in the paper's order
    resnet = display.iloc[2:8]
    assert resnet["Network"].tolist() == ["ResNet-50", "", "", "", "", ""]
    assert resnet["Device"].tolist() == ["cpu1", "", "cpu2", "", "cpu4", ""]
    assert resnet["Paper column"].tolist() == ["desktop CPU", "server CPU"] * 3
    assert resnet["Torch (s)"].tolist()[:4] == ["13.178", "12.807", "7.500", "8.391"]
    assert resnet["Best tool"].tolist()[:2] == ["Caffe", "Caffe"]
    # 10 s on one thread, 2 s on four: 5x on 4 threads is above the ideal.
    assert resnet["Speed-up here"].tolist()[4:] == ["5.00‡", ""]
    assert resnet["Speed-up, Torch"].tolist()[4] == f"{13.178 / 4.736:.2f}"
    assert resnet["Measured (s)"].tolist()[1] == ""  # the line above holds it
    gpu = display.iloc[8:11]
    assert gpu["Paper column"].tolist() == ["GTX 980", "GTX 1080", "Tesla K80"]
    assert gpu["Measured (s)"].tolist() == ["n/a", "", ""]
    fcn = display[display["Network"] == "FCN-S"].index[0]
    assert display.loc[fcn, "Torch (s)"] == "did not run"
    assert display.loc[fcn, "Measured / Torch"] == "–"
    assert "LSTM*" in display["Network"].tolist()
    md, tex, csv_path = shi2016.write_table(numbers, not_compared, tmp_path / "shi")
    text = md.read_text()
    assert shi2016_paper.CITATION in text
    assert r"LSTM\* (model lstm, batch 128): stand-in" in text
    assert "ResNet-50 on cuda1: no CUDA device available to PyTorch" in text
    assert text.count("ResNet-50 on cuda1") == 1  # once, not once per GPU of the paper
    assert shi2016.OTHER_GENERATION in text
    assert "‡ above the ideal" in text
    assert "Not compared: train/resnet50/cpu8/fp32/single/bs16" in text
    assert r"\begin{tabular}" in tex.read_text()
    assert len(pd.read_csv(csv_path)) == len(numbers)


def test_a_gpu_here_meets_the_papers_three_gpus_as_another_generation(gpu_frame):
    numbers, _ = shi2016.comparison(gpu_frame)
    gpu = numbers[numbers["device"] == "cuda1"].set_index("platform")
    assert gpu["torch_s"].to_dict() == {
        "gpu_gtx980": 0.208,
        "gpu_gtx1080": 0.144,
        "gpu_tesla_k80": 0.523,
    }
    assert gpu["best_tool"].tolist() == ["MXNet", "MXNet", "MXNet"]
    assert gpu["torch_ratio"].tolist() == pytest.approx(
        [gpu["measured_s"].iloc[0] / seconds for seconds in (0.208, 0.144, 0.523)]
    )
    assert gpu["speedup_here"].isna().all() and gpu["speedup_torch"].isna().all()
    fig = shi2016.figure(numbers)
    panel = next(ax for ax in fig.axes if ax.get_title() == "ResNet-50 (batch 16)")
    flat = {tuple(line.get_ydata()) for line in panel.lines if len(set(line.get_ydata())) == 1}
    assert {(0.208, 0.208), (0.144, 0.144), (0.523, 0.523)} <= flat  # the reference lines
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    assert "GTX 1080, Torch (2016: another generation)" in labels
    assert layout_problems("gpu", fig) == []


@pytest.mark.parametrize("width", [None, "single", "double"])
def test_the_figures_are_laid_out_for_print(frame, gpu_frame, width):
    for records in (frame, gpu_frame):
        numbers, _ = shi2016.comparison(records)
        for draw in (shi2016.figure, shi2016.scaling_figure):
            fig = draw(numbers, style.figure_width(width or "auto"))
            assert layout_problems(f"{draw.__name__} ({width})", fig) == []
    numbers, _ = shi2016.comparison(frame)
    fig = shi2016.figure(numbers, style.figure_width(width or "auto"))
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == [
        "FCN-S (batch 64)",
        "ResNet-50 (batch 16)",
        "LSTM (batch 128, stand-in)",
    ]


def test_the_scaling_figure_sets_the_speedups_beside_the_papers_desktop_and_server(gpu_frame):
    numbers, _ = shi2016.comparison(gpu_frame)
    fig = shi2016.scaling_figure(numbers)
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    assert list(panels) == ["FCN-S (batch 64)", "ResNet-50 (batch 16)"]
    curves = {
        tuple(line.get_xdata()): list(line.get_ydata())
        for line in panels["ResNet-50 (batch 16)"].lines
        if line.get_marker() != "None"  # the ideal is a bare line
    }
    assert curves[(1, 2)] == pytest.approx([1.0, 1 / 0.55], rel=1e-3)  # here
    assert curves[(1, 2, 4, 8)] == pytest.approx(
        [13.178 / seconds for seconds in (13.178, 7.5, 4.736, 4.948)]
    )  # Torch on the paper's desktop
    assert curves[(1, 2, 4, 8, 16, 32)] == pytest.approx(
        [12.807 / seconds for seconds in (12.807, 8.391, 5.471, 4.164, 3.683, 4.422)]
    )
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    assert labels == [
        "measured here",
        "Torch, desktop CPU (2016)",
        "Torch, server CPU (2016)",
        "ideal: N on N threads",
    ]


def test_no_record_of_the_paper_gives_a_note_not_empty_axes(tmp_path):
    empty, _ = tidy.collect([])
    numbers, not_compared = shi2016.comparison(empty)
    assert numbers.empty and not_compared == []
    for draw in (shi2016.figure, shi2016.scaling_figure):
        fig = draw(numbers)
        assert len(fig.axes) == 1 and fig.get_figheight() < 1.0
    md, _, _ = shi2016.write_table(numbers, not_compared, tmp_path / "shi")
    assert "No record of a Shi et al. (2016) network" in md.read_text()


def test_a_network_whose_records_all_failed_is_listed_with_why(tmp_path):
    record = paper_record("resnet50", "cuda1", status="unavailable", reason=NO_GPU, **RESNET50)
    frame, _ = tidy.collect(write_records(tmp_path, [record]))
    numbers, _ = shi2016.comparison(frame)
    assert numbers[["network", "device", "status"]].drop_duplicates().values.tolist() == [
        ["ResNet-50", "cuda1", "unavailable"]
    ]
    assert shi2016.figure(numbers).get_figheight() < 1.0  # nothing measured: a note


def test_a_busy_measurement_is_marked_in_the_table_and_hollow_in_the_figures(tmp_path):
    records = [
        paper_record("resnet50", "cpu1", scaled(10.0, 1.0), **RESNET50),
        paper_record("resnet50", "cpu2", scaled(10.0, 0.6), **RESNET50),
    ]
    records[1][1]["conditions"] = {"busy": True, "other_cpus": 1.5, "steal_cpus": 0.0}
    frame, problems = tidy.collect(write_records(tmp_path, records))
    assert problems == []
    numbers, not_compared = shi2016.comparison(frame)
    assert shi2016.display_table(numbers)["Measured (s)"].tolist()[2].endswith("†")
    for draw in (shi2016.figure, shi2016.scaling_figure):
        fig = draw(numbers)
        hollow = [line for line in fig.axes[0].lines if line.get_markerfacecolor() == "white"]
        assert len(hollow) == 1
        assert style.FLAGGED_LABEL in [text.get_text() for text in fig.legends[0].get_texts()]
        assert layout_problems("busy", fig) == []


def test_the_table_ships_in_the_wheel_and_is_read_where_installed(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(
        REPO_ROOT / "src",
        source / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO_ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", wheels]
    subprocess.run([*build, source], check=True, timeout=300)
    (wheel,) = wheels.glob("accelbench-*.whl")
    install = [*pip, "install", "--no-deps", "--no-index", "--target", site, wheel]
    subprocess.run(install, check=True, timeout=300)
    # -S: no site-packages, so the editable checkout cannot answer instead of the install.
    read = (
        f"import sys; sys.path.insert(0, {str(site)!r}); "
        "from accelbench.studies.shi2016 import paper; "
        "print(paper.TABLE7_FILE); print(sum(cell.ran for cell in paper.TABLE7.values()))"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", read], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    path, ran = done.stdout.split()
    assert Path(path).is_relative_to(site) and Path(path).is_file()
    assert int(ran) == 392
    study = site / "accelbench" / "studies" / "shi2016"
    for name in ("README.md", "config.yaml", "rules.smk", "scripts/shi2016_comparison.py"):
        assert (study / name).is_file(), name
    assert list((study / "report").glob("*.rst"))

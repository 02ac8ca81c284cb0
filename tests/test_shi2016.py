"""Shi et al. (2016): the config plans the paper's networks, and the comparison puts the
measured times beside the published ones with their ratio and thread scaling."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from test_figure_layout import layout_problems

from accelbench import config as accelbench_config
from accelbench import grid
from accelbench.analysis import fillable, shi2016, shi2016_paper, style, tidy
from accelbench.train import settings
from accelbench.train.models import models, resolve_options

from records import NO_GPU, scaled, train_record, write_records

REPO_ROOT = Path(__file__).resolve().parent.parent
RESNET50 = {"lr": 0.001, "depth": 50, "image_size": 224, "classes": 1000}


def paper_record(model, device, samples=None, status="ok", reason=None, batch=16, **options):
    exp_id, record = train_record(
        model, device, status=status, samples=samples, reason=reason, batch=batch
    )
    record["params"]["options"] = options
    return exp_id, record


@pytest.fixture
def frame(tmp_path):
    """ResNet-50 on 1, 2 and 4 threads and a GPU that was not there; one ResNet-50 at the
    default image size (not the paper's network); the LSTM stand-in on one thread."""
    lstm = shi2016_paper.NETWORKS[-1]
    records = [
        paper_record("resnet50", "cpu1", scaled(10.0, 1.0), **RESNET50),
        paper_record("resnet50", "cpu2", scaled(10.0, 0.6), **RESNET50),
        paper_record("resnet50", "cpu4", scaled(10.0, 0.2), **RESNET50),
        paper_record("resnet50", "cuda1", status="unavailable", reason=NO_GPU, **RESNET50),
        paper_record("lstm", "cpu1", scaled(0.5, 1.0), batch=128, lr=0.002, **lstm.options),
    ]
    small = paper_record("resnet50", "cpu8", scaled(1.0, 1.0), **{**RESNET50, "image_size": 64})
    found, problems = tidy.collect(write_records(tmp_path, [*records, small]))
    assert problems == []
    return found


def test_the_config_plans_every_network_of_the_paper_and_nothing_else():
    config = accelbench_config.load([REPO_ROOT / "config" / "shi2016.yaml"])
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
    assert fillable.fills("shi2016_comparison", fillable.Planned.of(grid.expand(config)), "cpu1")


def test_the_default_grid_has_no_network_of_the_paper():
    plan = fillable.Planned.of(grid.expand(accelbench_config.load()))
    assert not fillable.fills("shi2016_comparison", plan, "cpu1")


def test_measured_times_beside_the_published_with_ratio_and_thread_scaling(frame):
    numbers, not_compared = shi2016.comparison(frame)
    resnet = numbers[numbers["network"] == "ResNet-50"].set_index("device")
    assert list(resnet.index) == ["cpu1", "cpu2", "cpu4", "cuda1"]
    one, two = resnet.loc["cpu1", "measured_s"], resnet.loc["cpu2", "measured_s"]
    assert resnet.loc["cpu1", "published_s"] == 13.18
    assert resnet.loc["cpu2", "ratio"] == pytest.approx(two / 7.50)
    assert resnet.loc["cpu2", "speedup_here"] == pytest.approx(one / two)
    assert resnet.loc["cpu2", "speedup_paper"] == pytest.approx(13.18 / 7.50)
    assert pd.isna(resnet.loc["cpu4", "published_s"])  # not transcribed
    assert resnet.loc["cuda1", "status"] == "unavailable"
    assert numbers[numbers["network"] == "LSTM"]["faithful"].tolist() == [False]
    assert not_compared == [
        "train/resnet50/cpu8/fp32/single/bs16 is not ResNet-50, which has image_size 224"
    ]


def test_the_table_marks_stand_ins_gaps_and_speedups_above_the_ideal(frame, tmp_path):
    numbers, not_compared = shi2016.comparison(frame)
    display = shi2016.display_table(numbers).set_index(["Network", "Device"])
    assert display.loc[("ResNet-50", "cpu2"), "Paper (s)"] == "7.50"
    assert display.loc[("ResNet-50", "cpu2"), "Speed-up in paper"] == "1.76"
    assert display.loc[("ResNet-50", "cpu4"), "Paper (s)"] == "not transcribed"
    # 10 s on one thread, 2 s on four: 5x on 4 threads is above the ideal.
    assert display.loc[("ResNet-50", "cpu4"), "Speed-up here"] == "5.00‡"
    assert display.loc[("ResNet-50", "cuda1"), "Measured (s)"] == "n/a"
    assert display.loc[("ResNet-50", "cuda1"), "Paper (s)"] == "–"
    assert ("LSTM*", "cpu1") in display.index
    md, tex, csv = shi2016.write_table(numbers, not_compared, tmp_path / "shi")
    text = md.read_text()
    assert shi2016_paper.CITATION in text
    assert r"LSTM\* (model lstm, batch 128): stand-in" in text
    assert "ResNet-50 on cuda1: no CUDA device available to PyTorch" in text
    assert "‡ above the ideal" in text
    assert "Not compared: train/resnet50/cpu8/fp32/single/bs16" in text
    assert r"\begin{tabular}" in tex.read_text()
    assert len(csv.read_text().splitlines()) == len(numbers) + 1


@pytest.mark.parametrize("width", [None, "single", "double"])
def test_the_figure_is_laid_out_for_print(frame, width):
    numbers, _ = shi2016.comparison(frame)
    fig = shi2016.figure(numbers, style.figure_width(width or "auto"))
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == [
        "ResNet-50 (batch 16)",
        "LSTM (batch 128, stand-in)",
    ]
    assert layout_problems(f"shi2016 ({width})", fig) == []


def test_no_record_of_the_paper_gives_a_note_not_empty_axes(tmp_path):
    empty, _ = tidy.collect([])
    numbers, not_compared = shi2016.comparison(empty)
    assert numbers.empty and not_compared == []
    fig = shi2016.figure(numbers)
    assert len(fig.axes) == 1 and fig.get_figheight() < 1.0
    md, _, _ = shi2016.write_table(numbers, not_compared, tmp_path / "shi")
    assert "No record of a Shi et al. (2016) network" in md.read_text()


def test_a_network_whose_records_all_failed_is_listed_with_why(tmp_path):
    record = paper_record("resnet50", "cuda1", status="unavailable", reason=NO_GPU, **RESNET50)
    frame, _ = tidy.collect(write_records(tmp_path, [record]))
    numbers, _ = shi2016.comparison(frame)
    assert numbers[["network", "device", "status"]].values.tolist() == [
        ["ResNet-50", "cuda1", "unavailable"]
    ]
    assert shi2016.figure(numbers).get_figheight() < 1.0  # nothing measured: a note


def test_a_busy_measurement_is_marked_in_the_table_and_hollow_in_the_figure(tmp_path):
    exp_id, record = paper_record("resnet50", "cpu1", scaled(10.0, 1.0), **RESNET50)
    record["conditions"] = {"busy": True, "other_cpus": 1.5, "steal_cpus": 0.0}
    frame, problems = tidy.collect(write_records(tmp_path, [(exp_id, record)]))
    assert problems == []
    numbers, not_compared = shi2016.comparison(frame)
    assert shi2016.display_table(numbers)["Measured (s)"].tolist()[0].endswith("†")
    fig = shi2016.figure(numbers)
    hollow = [line for line in fig.axes[0].lines if line.get_markerfacecolor() == "white"]
    assert len(hollow) == 1
    assert "hollow: busy machine" in [text.get_text() for text in fig.legends[0].get_texts()]
    assert layout_problems("busy", fig) == []

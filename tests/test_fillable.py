"""The default target asks only for the tables and figures its grid can fill."""

from __future__ import annotations

from accelbench import config as accelbench_config
from accelbench import grid, studies
from accelbench.analysis import fillable, outputs

from conftest import REPO_ROOT


def filled(*configfiles: str) -> set[str]:
    config = accelbench_config.load([REPO_ROOT / "config" / name for name in configfiles])
    plan = fillable.Planned.of(grid.expand(config))
    baseline = config["report"]["baseline_device"]
    core = {out.name for out in outputs.OUTPUTS if out.needs(plan, baseline)}
    return core | {name for name, need in studies.needs().items() if need(plan, baseline)}


def fills(name: str, plan: fillable.Planned, baseline: str = "cpu1") -> bool:
    """Whether the planned grid fills the table of that name."""
    table = next(o for o in outputs.OUTPUTS if (o.name, o.kind) == (name, outputs.TABLE))
    return table.fills(plan, baseline)


def test_the_core_and_the_studies_name_their_outputs_apart():
    assert {out.name for out in outputs.OUTPUTS}.isdisjoint(studies.needs())
    assert {"roofline", "offload_break_even", "shi2016_comparison"} <= set(studies.needs())


def test_the_cpu_only_default_grid_asks_for_no_gpu_node_or_precision_output():
    assert filled() == {
        "train_time_per_batch",
        "train_energy",
        "train_speedup",  # cpu2 against cpu1
        "train_scaling",
        "train_thread_scaling",
        "kernel_time",
        "kernel_throughput",
        "kernel_energy",
        "kernel_speedup",
        "roofline",
        "datasci_time",
        "datasci_throughput",
        "datasci_energy",
    }


def test_the_cluster_grid_asks_for_the_gpu_outputs_too():
    found = filled("cluster.yaml")
    assert {"train_gpu_scaling", "kernel_crossover", "offload_break_even"} <= found
    assert "shi2016_comparison" in found  # its FCN-S and ResNet-50 at batch 16
    assert "train_node_scaling" not in found  # no NxK devices in it


def test_multi_node_devices_ask_for_the_node_scaling(tmp_path):
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        "train:\n  devices: [cpu2, 2x2cpu]\n  strategies: [ddp]\n"
        "  batch_sizes: {fcn: [8], resnet18: [], lstm: []}\n"
    )
    config = accelbench_config.load([nodes])
    plan = fillable.Planned.of(grid.expand(config))
    assert fills("train_node_scaling", plan)
    assert fills("train_scaling", plan) is False  # no cpu1 to scale from
    assert not fills("train_speedup", plan)  # no baseline device


def planned(*configfiles: str, counters=None) -> fillable.Planned:
    config = accelbench_config.load([REPO_ROOT / "config" / name for name in configfiles])
    return fillable.Planned.of(grid.expand(config), counters)


def drawn(plan: fillable.Planned, baseline: str = "cpu1") -> set[str]:
    return {
        out.name
        for out in outputs.OUTPUTS
        if out.kind == outputs.FIGURE and out.fills(plan, baseline)
    }


NO_COUNTER = fillable.Counters(frozenset({"cuda"}), {"cpu": "no RAPL powercap interface here"})


def test_a_figure_is_asked_for_only_where_the_grid_plans_what_it_compares():
    # The default grid on a host whose CPU counters cannot be read: its tables all, but no
    # energy figure, and no heat map of cpu2 over cpu1 (the thread scaling draws it).
    plan = planned(counters=NO_COUNTER)
    assert drawn(plan) == {
        "train_time_per_batch",
        "train_thread_scaling",
        "kernel_throughput",
        "datasci_throughput",
    }
    sentences = outputs.not_drawn(plan, "cpu1")
    assert [s.split("(")[1].split(")")[0] for s in sentences] == [
        "train_speedup",
        "train_energy",
        "kernel_energy",
        "datasci_energy",
    ]
    assert all("no RAPL powercap interface here" in s for s in sentences[1:])
    # Where this host's RAPL counters open, the energy figures are drawn.
    readable = fillable.Counters(frozenset({"cpu", "cuda"}), {})
    assert {"train_energy", "kernel_energy", "datasci_energy"} <= drawn(planned(counters=readable))


def test_the_cluster_grid_draws_the_gpu_against_the_cpu():
    found = drawn(planned("cluster.yaml", counters=NO_COUNTER))
    # GPUs beside the cpu1 baseline, two sizes on both sides, the GPUs' energy counters.
    assert {"train_speedup", "kernel_crossover", "train_energy", "kernel_energy"} <= found


def test_energy_off_draws_no_energy_figure(tmp_path):
    off = tmp_path / "off.yaml"
    off.write_text("energy:\n  enabled: false\n")
    config = accelbench_config.load([off])
    counters = fillable.Counters.here(config)
    assert counters.kinds == frozenset()
    assert "energy.enabled: false" in counters.why_not["cuda"]

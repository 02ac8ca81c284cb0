"""Every table and figure the workflow makes, each declared once, in report order.

A declaration (`Output`) holds all that the rules, their scripts, the report and the
summary know of an output: its file name, kind (table or figure), report category and
title, its builder, its caption file and whether a planned grid fills it
(accelbench.analysis.fillable). The rules declare the files of the outputs the grid
fills (`to_fill`), their scripts build each by its file name (`TABLES`, `FIGURES`), and
the summary names the figures not drawn (`not_drawn`). So adding an output is its
builder, one entry in `OUTPUTS` and its caption file.

A figure asks more than a table: a table lists every cell, a figure only what it
compares, so it is drawn only where the grid plans a comparison (two devices for the same
configuration, two precisions, two sizes on both sides of a crossover): its `beyond`.
Energy tables are asked for wherever their family runs, and say why a cell has no
energy; an energy figure only where some planned device's counters can be read
(fillable.Counters).

The builders' modules are imported where an output is built, so that matplotlib stays out
of the Snakefile's parse, which every Slurm job does again. The report's other items
(the summary, the cells to look at, the crossovers' CSV, the provenance and the
configuration) are made by rules of their own; their titles are `PAGE_TITLES`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from accelbench.analysis.fillable import Planned
from accelbench.families import FAMILIES
from accelbench.platform.devices import Device, parse_device

TABLE, FIGURE = "table", "figure"
# Whether a planned grid (and the speedups' baseline device) has what an output shows.
Need = Callable[[Planned, str], bool]


@dataclass(frozen=True)
class FigureNeed:
    """What a figure compares beyond what the grid plans for it (`need`), and why it is
    not drawn where its grid is planned (`why`), for the summary."""

    need: Need
    why: Callable[[Planned, str], str]


@dataclass(frozen=True)
class Output:
    """One table or figure: results/<kind>s/<name>.*, its report item and caption
    (workflow/report/<kind>s/<name>.rst).

    `build`: a table's (frame, baseline device) -> (table, footnotes), a figure's
    (frame, baseline device, width) -> Figure; None where `rule` draws it with what else
    it writes. `needs`: whether a planned grid has what it shows; `beyond`: what a figure
    compares beyond that. `rule`: the rule that makes it, where not its kind's (`tables`,
    `figures`).
    """

    name: str
    kind: str
    category: str
    title: str
    needs: Need
    build: Callable[..., Any] | None
    beyond: FigureNeed | None = None
    rule: str | None = None

    @property
    def made_by(self) -> str:
        return self.rule or f"{self.kind}s"

    @property
    def caption(self) -> str:
        """Its caption file, under workflow/report."""
        return f"{self.kind}s/{self.name}.rst"

    @property
    def subcategory(self) -> str:
        return f"{self.kind.capitalize()}s"

    @property
    def files(self) -> tuple[list[str], str]:
        """(the files written beside its report item, the report item): a table's
        Markdown, LaTeX and CSV beside its HTML page; a figure's vector PDF beside its
        300 dpi PNG."""
        stem = f"results/{self.kind}s/{self.name}"
        if self.kind == TABLE:
            return [f"{stem}.md", f"{stem}.tex", f"{stem}.csv"], f"{stem}.html"
        return [f"{stem}.pdf"], f"{stem}.png"

    def fills(self, plan: Planned, baseline: str) -> bool:
        """Whether the planned grid has what it shows (a figure: and what it compares)."""
        return self.needs(plan, baseline) and (
            self.beyond is None or self.beyond.need(plan, baseline)
        )


def _tables() -> ModuleType:
    return importlib.import_module("accelbench.analysis.tables")


def _figures() -> ModuleType:
    return importlib.import_module("accelbench.analysis.figures")


def _one_node(device: Device) -> bool:
    return device.nodes == 1


def _besides(devices: frozenset[str], baseline: str) -> bool:
    return baseline in devices and len(devices) > 1


def _trains(plan: Planned, baseline: str) -> bool:
    return bool(plan.train_devices)


def _runs_kernels(plan: Planned, baseline: str) -> bool:
    return bool(plan.kernel_devices)


def _runs_datasci(plan: Planned, baseline: str) -> bool:
    return bool(plan.datasci_devices)


def _train_besides(plan: Planned, baseline: str) -> bool:
    return _besides(plan.train_devices, baseline)


def _compares_precisions(plan: Planned, baseline: str) -> bool:
    return len(plan.precisions) > 1


def _on_nodes(plan: Planned, baseline: str) -> bool:
    return any(parse_device(name).nodes > 1 for name in plan.train_devices)


def _energy(family: str, called: str, devices: Callable[[Planned], frozenset[str]]) -> FigureNeed:
    """An energy figure: some model (kernel, workload) planned in two cells or more on
    devices whose counters can be read, so that a panel sets two beside each other."""

    def why(plan: Planned, baseline: str) -> str:
        if not plan.measures_energy(devices(plan)):
            return (
                f"no planned {called} device has an energy counter this run can read "
                f"({plan.energy_why_not(devices(plan))}); the energy table says so per cell"
            )
        return (
            f"no {FAMILIES[family].primary} is planned in two cells on the devices whose "
            "energy counters this run can read; the energy table has each cell"
        )

    return FigureNeed(
        lambda plan, baseline: max(plan.energy_cells(family).values(), default=0) >= 2, why
    )


def _kernel_devices(plan: Planned) -> frozenset[str]:
    return plan.kernel_devices


def _datasci_devices(plan: Planned) -> frozenset[str]:
    return plan.datasci_devices


def _train_devices(plan: Planned) -> frozenset[str]:
    return plan.train_devices


_ONE_DEVICE = FigureNeed(
    lambda plan, baseline: plan.compares("device"),
    lambda plan, baseline: "no training configuration is planned on two devices",
)
_ONE_PRECISION = FigureNeed(
    lambda plan, baseline: plan.compares("precision"),
    lambda plan, baseline: "no model is planned in two precisions on one device",
)
_OWN_KIND = FigureNeed(
    lambda plan, baseline: plan.beside_kind_of(baseline),
    lambda plan, baseline: (
        f"no training device of another kind than {baseline}, or on several nodes: "
        "the scaling figures draw the speedups of its own kind"
    ),
)
_ONE_SIZE = FigureNeed(
    lambda plan, baseline: plan.sizes_on_both_sides,
    lambda plan, baseline: (
        "no kernel or workload is planned at two sizes on both a CPU and a GPU: the "
        "crossover table says which side is ahead at each size"
    ),
)

# Every table and figure, in report order: the answer first, then per family, a table
# beside the figure of its name.


def _table_and_figure(
    name: str,
    category: str,
    title: str,
    needs: Need,
    table: Callable[..., Any],
    figure: Callable[..., Any],
    beyond: FigureNeed | None = None,
) -> tuple[Output, Output]:
    """A table and the figure of its name: one title, category and condition for both."""
    return (
        Output(name, TABLE, category, title, needs, table),
        Output(name, FIGURE, category, title, needs, figure, beyond=beyond),
    )


OUTPUTS: tuple[Output, ...] = (
    Output(
        "gpu_vs_cpu",
        TABLE,
        "Summary",
        "Does the GPU pay off? The GPU against the CPU of the same machine",
        lambda plan, baseline: plan.compares_gpu_with_cpu,
        lambda frame, baseline: _tables().headline_table(frame),
    ),
    *_table_and_figure(
        "train_time_per_batch",
        "Training",
        "Time per mini-batch, by model and device",
        _trains,
        table=lambda frame, baseline: _tables().comparison_table(frame, "train"),
        figure=lambda frame, baseline, width: _figures().time_per_batch_by_device(frame, width),
        beyond=_ONE_DEVICE,
    ),
    *_table_and_figure(
        "train_speedup",
        "Training",
        "Training speedup over the baseline device",
        _train_besides,
        table=lambda frame, baseline: _tables().speedup_table(frame, "train", baseline),
        figure=lambda frame, baseline, width: _figures().speedup_heatmap(
            frame, baseline, "train", width
        ),
        beyond=_OWN_KIND,
    ),
    Output(
        "train_thread_scaling",
        FIGURE,
        "Training",
        "Training time against CPU threads",
        lambda plan, baseline: plan.scales("cpu", _one_node),
        lambda frame, baseline, width: _figures().cpu_thread_scaling(frame, "train", width),
    ),
    *_table_and_figure(
        "train_precision",
        "Training",
        "Training time by precision",
        _compares_precisions,
        table=lambda frame, baseline: _tables().comparison_table(frame, "train", "precision"),
        figure=lambda frame, baseline, width: _figures().precision_comparison(frame, width),
        beyond=_ONE_PRECISION,
    ),
    Output(
        "train_scaling",
        TABLE,
        "Training",
        "Training scaling efficiency",
        lambda plan, baseline: any(
            plan.scales(kind, lambda device: True) for kind in ("cpu", "cuda")
        ),
        lambda frame, baseline: _tables().scaling_table(frame, "train"),
    ),
    Output(
        "train_gpu_scaling",
        FIGURE,
        "Training",
        "Training scaling across GPUs",
        lambda plan, baseline: plan.scales("cuda", _one_node),
        lambda frame, baseline, width: _figures().scaling_efficiency(frame, "train", "cuda", width),
    ),
    *_table_and_figure(
        "train_node_scaling",
        "Training",
        "Training scaling across nodes",
        _on_nodes,
        table=lambda frame, baseline: _tables().node_scaling_table(frame, "train"),
        figure=lambda frame, baseline, width: _figures().node_scaling_efficiency(
            frame, "train", width
        ),
    ),
    *_table_and_figure(
        "train_energy",
        "Training",
        "Training time and energy per sample",
        _trains,
        table=lambda frame, baseline: _tables().energy_table(frame, "train"),
        figure=lambda frame, baseline, width: _figures().energy_against_time(frame, "train", width),
        beyond=_energy("train", "training", _train_devices),
    ),
    Output(
        "kernel_time",
        TABLE,
        "Kernels",
        "Kernel time per call, by backend and device",
        _runs_kernels,
        lambda frame, baseline: _tables().comparison_table(frame, "kernel"),
    ),
    Output(
        "kernel_speedup",
        TABLE,
        "Kernels",
        "Kernel speedup over the baseline device",
        lambda plan, baseline: _besides(plan.kernel_devices, baseline),
        lambda frame, baseline: _tables().speedup_table(frame, "kernel", baseline),
    ),
    Output(
        "kernel_throughput",
        FIGURE,
        "Kernels",
        "Kernel throughput against problem size",
        _runs_kernels,
        lambda frame, baseline, width: _figures().kernel_throughput_by_size(frame, width),
    ),
    *_table_and_figure(
        "kernel_energy",
        "Kernels",
        "Kernel time and energy per call",
        _runs_kernels,
        table=lambda frame, baseline: _tables().energy_table(frame, "kernel"),
        figure=lambda frame, baseline, width: _figures().energy_against_time(
            frame, "kernel", width
        ),
        beyond=_energy("kernel", "kernel", _kernel_devices),
    ),
    # Drawn by the rule that writes which side is ahead at each size (PAGE_TITLES).
    Output(
        "kernel_crossover",
        FIGURE,
        "Kernels",
        "Where the GPU overtakes the CPU",
        lambda plan, baseline: plan.runs_on_cpu_and_gpu,
        None,
        beyond=_ONE_SIZE,
        rule="kernel_crossover",
    ),
    Output(
        "datasci_time",
        TABLE,
        "Data science",
        "Data science workload time, by size and device",
        _runs_datasci,
        lambda frame, baseline: _tables().datasci_time_table(frame),
    ),
    Output(
        "datasci_throughput",
        FIGURE,
        "Data science",
        "Data science throughput against problem size",
        _runs_datasci,
        lambda frame, baseline, width: _figures().datasci_throughput_by_size(frame, width),
    ),
    *_table_and_figure(
        "datasci_energy",
        "Data science",
        "Data science time and energy per call",
        _runs_datasci,
        table=lambda frame, baseline: _tables().energy_table(frame, "datasci"),
        figure=lambda frame, baseline, width: _figures().energy_against_time(
            frame, "datasci", width
        ),
        beyond=_energy("datasci", "data science", _datasci_devices),
    ),
)
# The builders by file name, as the tables and figures rules' scripts call them.
TABLES = {out.name: out.build for out in OUTPUTS if out.kind == TABLE and out.build}
FIGURES = {out.name: out.build for out in OUTPUTS if out.kind == FIGURE and out.build}
# The titles of the report's items made by rules of their own.
PAGE_TITLES = {
    "kernel_crossovers": "Which side is ahead at each size, and the crossovers bracketed",
    "provenance": "Where and with what the records were measured",
    "config": "The configuration as run",
    "summary": "Summary of the run",
    "attention": "Cells that need attention, each with why",
}


def to_fill(rule: str, plan: Planned, baseline: str) -> list[Output]:
    """The outputs `rule` makes that the planned grid fills (`baseline`: the speedups'
    device), in report order."""
    return [out for out in OUTPUTS if out.made_by == rule and out.fills(plan, baseline)]


def planned(rule: str, plan: Planned, baseline: str) -> bool:
    """Whether the planned grid has what some output of `rule` shows: a rule that writes
    more than its outputs here (the crossovers' table beside their figure) runs then."""
    return any(out.needs(plan, baseline) for out in OUTPUTS if out.made_by == rule)


def not_drawn(plan: Planned, baseline: str) -> list[str]:
    """A sentence for each figure the grid does not fill where what it shows is planned
    (the table of its name is made; for the crossover figure, its table), saying why."""
    return [
        f"The figure “{out.title}” ({out.name}) is not drawn: {out.beyond.why(plan, baseline)}."
        for out in OUTPUTS
        if out.beyond is not None
        and out.needs(plan, baseline)
        and not out.beyond.need(plan, baseline)
    ]

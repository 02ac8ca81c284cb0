"""Shi et al. (2016), the paper the training tables follow: its networks and published times.

Shi, Wang, Xu and Chu timed seven networks at fixed batch sizes with five tools
(Caffe, CNTK, TensorFlow, MXNet, Torch) on a desktop and a server CPU (by thread
count) and on three GPUs: Table 7, seconds per mini-batch. Each network is a
catalogue model here at the paper's batch size and options; the models follow
the authors' Torch scripts (github.com/hclhkbu/dlbench), and `NETWORKS` says for
each where it differs. The whole of Table 7 ships with the package
(accelbench/studies/shi2016/table7.csv, its README beside it) and is read from
that one file: a cell the paper prints as "-" did not run, and stays without a
number. No heavy imports: the grid's planning asks which networks it holds.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Set
from dataclasses import dataclass
from importlib import resources

from accelbench.train.models import Options, OptionValue

CITATION = (
    "S. Shi, Q. Wang, P. Xu and X. Chu, Benchmarking State-of-the-Art Deep Learning "
    "Software Tools, arXiv:1608.07249 (2016), Table 7"
)
PRECISION, STRATEGY = "fp32", "single"
# How every faithful network's training step differs from the paper's scripts.
MOMENTUM = "SGD with momentum 0.9 where the paper's script steps plain SGD"


@dataclass(frozen=True)
class Network:
    """One of the paper's networks as a catalogue model: the options that make it the
    paper's network (its learning rate aside), and how the model here differs."""

    name: str
    model: str
    batch: int
    options: Options
    faithful: bool  # the same layers and shapes as the paper's Torch network
    differs: str


NETWORKS = (
    Network(
        "FCN-S",
        "fcn-s",
        64,
        {"input_dim": 26752, "hidden": [2048, 2048, 2048], "classes": 26752},
        True,
        MOMENTUM,
    ),
    Network(
        "AlexNet-S",
        "alexnet-s",
        16,
        {"image_size": 224, "classes": 1000},
        True,
        MOMENTUM,
    ),
    Network(
        "ResNet-50",
        "resnet50",
        16,
        {"image_size": 224, "classes": 1000},
        True,
        "torchvision's ResNet-50, the layout of fb.resnet.torch that the paper ran",
    ),
    Network(
        "FCN-R",
        "fcn-r",
        1024,
        {"input_dim": 784, "hidden": [2048, 4096, 1024], "classes": 10},
        True,
        MOMENTUM,
    ),
    Network(
        "AlexNet-R",
        "alexnet-r",
        1024,
        {"image_size": 32, "classes": 10},
        True,
        MOMENTUM,
    ),
    Network(
        "ResNet-56",
        "resnet56",
        128,
        {"depth": 56, "width": 16, "classes": 10},
        False,
        "stand-in: He et al.'s block (ReLU after the addition); the paper's Torch network "
        "puts batch normalisation after the addition",
    ),
    Network(
        "LSTM",
        "lstm",
        128,
        {"vocab": 10000, "embed": 256, "hidden": 256, "layers": 2, "seq_len": 32},
        False,
        "stand-in: the same two 256-unit LSTM layers over 32 steps of the Penn Treebank "
        "vocabulary, trained with Adam where the paper's script uses SGD with gradient "
        "clipping",
    ),
)


TABLE7_FILE = resources.files("accelbench.studies.shi2016").joinpath("table7.csv")
TOOLS = ("Caffe", "CNTK", "TF", "MXNet", "Torch")
REFERENCE_TOOL = "Torch"  # the ancestor of PyTorch, which the models here train with


@dataclass(frozen=True)
class Platform:
    """A group of the paper's columns: one machine's CPU by thread count, or one GPU."""

    key: str
    label: str
    threads: tuple[int, ...]

    @property
    def is_gpu(self) -> bool:
        return self.key.startswith("gpu_")


PLATFORMS = {
    platform.key: platform
    for platform in (
        Platform("desktop_cpu", "desktop CPU", (1, 2, 4, 8)),
        Platform("server_cpu", "server CPU", (1, 2, 4, 8, 16, 32)),
        Platform("gpu_gtx980", "GTX 980", (1,)),
        Platform("gpu_gtx1080", "GTX 1080", (1,)),
        Platform("gpu_tesla_k80", "Tesla K80", (1,)),
    )
}


@dataclass(frozen=True)
class Published:
    """One cell of the paper's Table 7: a tool's seconds per mini-batch for a network on a
    platform column; `seconds` None where the paper prints "-" (the tool did not run it)."""

    network: str
    tool: str
    platform: str
    threads: int
    seconds: float | None
    bold: bool  # set in bold in the paper: the tool's fastest setting in the platform group

    @property
    def ran(self) -> bool:
        return self.seconds is not None


class Table7Error(ValueError):
    """The shipped copy of Table 7 is not the table this module reads."""


FIELDS = ("network", "batch", "tool", "platform", "threads", "seconds", "bold_in_paper")


def _cell(row: dict[str, str], where: str) -> Published:
    """One line of the file as a cell, each field checked against what the paper has."""
    batches = {network.name: network.batch for network in NETWORKS}

    def refuse(field: str, allowed: str) -> Table7Error:
        return Table7Error(f"{where}: {field} {row[field]!r} is not allowed; allowed: {allowed}")

    if row["network"] not in batches:
        raise refuse("network", ", ".join(batches))
    if row["batch"] != str(batches[row["network"]]):
        raise refuse("batch", f"{batches[row['network']]} for {row['network']}")
    if row["tool"] not in TOOLS:
        raise refuse("tool", ", ".join(TOOLS))
    platform = PLATFORMS.get(row["platform"])
    if platform is None:
        raise refuse("platform", ", ".join(PLATFORMS))
    if row["threads"] not in {str(threads) for threads in platform.threads}:
        raise refuse("threads", f"{', '.join(map(str, platform.threads))} on {platform.key}")
    if row["bold_in_paper"] not in ("0", "1"):
        raise refuse("bold_in_paper", "0, 1")
    try:
        seconds = float(row["seconds"]) if row["seconds"] else None
    except ValueError:
        raise refuse("seconds", "a positive number, or empty for the paper's '-'") from None
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise refuse("seconds", "a positive number, or empty for the paper's '-'")
    return Published(
        row["network"],
        row["tool"],
        row["platform"],
        int(row["threads"]),
        seconds,
        row["bold_in_paper"] == "1",
    )


def read_table7(
    text: str, name: str = str(TABLE7_FILE)
) -> dict[tuple[str, str, str, int], Published]:
    """Every cell of Table 7 from the CSV `text` (file `name`), by (network, tool, platform,
    threads); a file that lacks a cell, repeats one or holds a value the paper cannot have
    is refused, naming the line."""
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != FIELDS:
        raise Table7Error(f"{name}: columns {reader.fieldnames}, expected {list(FIELDS)}")
    cells: dict[tuple[str, str, str, int], Published] = {}
    for line, row in enumerate(reader, start=2):
        cell = _cell(row, f"{name}, line {line}")
        key = (cell.network, cell.tool, cell.platform, cell.threads)
        if key in cells:
            raise Table7Error(f"{name}, line {line}: a second cell for {key}")
        cells[key] = cell
    wanted = {
        (network.name, tool, platform.key, threads)
        for network in NETWORKS
        for tool in TOOLS
        for platform in PLATFORMS.values()
        for threads in platform.threads
    }
    if lacking := sorted(wanted - cells.keys()):
        raise Table7Error(f"{name}: cells of the paper missing: {len(lacking)}, first {lacking[0]}")
    return cells


TABLE7 = read_table7(TABLE7_FILE.read_text(encoding="utf-8"))


def published(network: str, tool: str, platform: str, threads: int) -> Published | None:
    """The paper's cell; None where the paper has no such column (e.g. 16 threads on the
    desktop)."""
    return TABLE7.get((network, tool, platform, threads))


def best(network: str, platform: str, threads: int) -> Published | None:
    """The fastest of the five tools in a column of the paper (the first in TOOLS order on a
    tie); None where none of them ran there or the paper has no such column."""
    ran = [
        cell
        for tool in TOOLS
        if (cell := published(network, tool, platform, threads)) is not None and cell.ran
    ]
    return min(ran, key=lambda cell: cell.seconds, default=None)


def differing_options(network: Network, options: Options) -> dict[str, OptionValue]:
    """The paper's options that a record's `options` lack: {key: the paper's value}."""
    return {key: value for key, value in network.options.items() if options.get(key) != value}


def planned(configurations: Set[tuple[str, int, str, str]]) -> bool:
    """Whether some (model, batch, precision, strategy) planned is one of the networks."""
    return any(
        (network.model, network.batch, PRECISION, STRATEGY) in configurations
        for network in NETWORKS
    )

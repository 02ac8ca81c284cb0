"""Real datasets on disk (tiny ones written here in the real formats) and the batch sources.

Nothing is downloaded: CIFAR-10 and MNIST are written in torchvision's on-disk
formats (pickled batches; IDX files), the Penn Treebank as its plain text. The
published CIFAR-10 checksums cannot match generated files, so those tests let
torchvision's checksum function accept any file that exists.
"""

from __future__ import annotations

import os
import pickle
import struct

import numpy as np
import pytest
import torch

from accelbench.families.train import TrainExperiment
from accelbench.train import data, datasets
from accelbench.train.loop import measure_training
from accelbench.train.models import models, resolve_options
from accelbench.train.settings import TrainSettings

CIFAR_IMAGES = 40
MNIST_IMAGES = 30
PTB_TEXT = "the cat sat on the mat\nthe dog sat on the log\na cat and a dog\n" * 20


def write_cifar10(data_dir):
    folder = data_dir / "cifar10" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    per_batch = CIFAR_IMAGES // 5
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        entry = {
            "data": rng.integers(0, 256, (per_batch, 3 * 32 * 32), dtype=np.uint8),
            "labels": rng.integers(0, 10, per_batch).tolist(),
        }
        (folder / name).write_bytes(pickle.dumps(entry))
    meta = {"label_names": [f"class{i}" for i in range(10)]}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta))


def write_mnist(data_dir):
    folder = data_dir / "mnist" / "MNIST" / "raw"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for prefix in ("train", "t10k"):
        images = rng.integers(0, 256, (MNIST_IMAGES, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, MNIST_IMAGES, dtype=np.uint8)
        header = struct.pack(">IIII", 0x803, MNIST_IMAGES, 28, 28)
        (folder / f"{prefix}-images-idx3-ubyte").write_bytes(header + images.tobytes())
        header = struct.pack(">II", 0x801, MNIST_IMAGES)
        (folder / f"{prefix}-labels-idx1-ubyte").write_bytes(header + labels.tobytes())


def write_ptb(data_dir):
    folder = data_dir / "ptb"
    folder.mkdir(parents=True)
    (folder / datasets.PTB_FILE).write_text(PTB_TEXT)


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    import torchvision.datasets.cifar

    monkeypatch.setattr(
        torchvision.datasets.cifar, "check_integrity", lambda path, md5=None: os.path.isfile(path)
    )
    root = tmp_path / "data"
    write_cifar10(root)
    write_mnist(root)
    write_ptb(root)
    return root


def train_on(model, data_dir, options, steps=6, batch=8):
    settings = TrainSettings(
        seed=0, steps=steps, warmup_steps=1, model_options=options, data_dir=str(data_dir)
    )
    return measure_training(TrainExperiment(model, "cpu1", "fp32", "single", batch), settings)


@pytest.mark.parametrize(
    ("model", "options", "dataset"),
    [
        ("resnet56", {"depth": 8, "width": 4}, "cifar10"),
        ("dcgan", {"image_size": 32, "latent": 4, "width": 4}, "cifar10"),
        ("fcn", {"hidden": [16]}, "mnist"),
        ("fcn-r", {"hidden": [16]}, "mnist"),
        ("alexnet-r", {}, "cifar10"),
        ("autoencoder", {"width": 4}, "mnist"),
        ("lstm", {"vocab": 8, "embed": 8, "hidden": 8, "seq_len": 5}, "ptb"),
        ("gpt", {"vocab": 8, "dim": 8, "heads": 2, "ff": 8, "seq_len": 5}, "ptb"),
        ("bert", {"vocab": 8, "dim": 8, "heads": 2, "ff": 8, "seq_len": 5}, "ptb"),
    ],
)
def test_model_trains_on_its_real_dataset_when_present(model, options, dataset, data_dir):
    assert datasets.is_present(data_dir, dataset)
    outcome = train_on(model, data_dir, options)
    assert outcome.status == "ok", outcome.reason
    assert outcome.params["data"] == dataset
    assert outcome.params["data_note"] is None
    assert outcome.metrics["data_time_per_batch"]["n"] == 6
    assert outcome.metrics["data_time_per_batch"]["median"] > 0


def test_a_dataset_that_does_not_fit_the_options_leaves_synthetic_data(data_dir):
    outcome = train_on("fcn", data_dir, {"input_dim": 32, "hidden": [8], "classes": 4})
    assert outcome.status == "ok", outcome.reason
    assert outcome.params["data"] == "synthetic"
    assert outcome.params["data_note"] == (
        "mnist not used: MNIST has 784 features and 10 classes; the options ask for 32 and 4"
    )


def test_an_absent_dataset_leaves_synthetic_data(tmp_path):
    outcome = train_on("resnet56", tmp_path / "empty", {"depth": 8, "width": 4}, steps=3)
    assert outcome.status == "ok", outcome.reason
    assert outcome.params["data"] == "synthetic"
    assert outcome.params["data_note"] == f"cifar10 not found under {tmp_path / 'empty'}"


def test_models_without_a_dataset_ignore_the_data_dir(data_dir):
    assert models()["resnet18"].dataset is None
    outcome = train_on("gcn", data_dir, dict(models()["gcn"].tiny_options), steps=3)
    assert outcome.params["data"] == "synthetic" and outcome.params["data_note"] is None


def test_cifar10_images_are_scaled_and_resized(data_dir):
    dataset = data.cifar10(datasets.dataset_root(data_dir, "cifar10"), image_size=48)
    assert len(dataset) == CIFAR_IMAGES
    image, label = dataset[0]
    assert image.shape == (3, 48, 48) and image.dtype == torch.float32
    assert image.min() >= -1.0 and image.max() <= 1.0
    assert 0 <= label < 10


def test_mnist_digits_and_vectors(data_dir):
    root = datasets.dataset_root(data_dir, "mnist")
    image, _ = data.mnist(root)[3]
    vector, _ = data.mnist(root, flatten=True)[3]
    assert image.shape == (1, 28, 28) and vector.shape == (784,)
    torch.testing.assert_close(image.reshape(-1), vector)
    assert vector.min() >= 0.0 and vector.max() <= 1.0


def test_ptb_tokens_keep_the_frequent_words(data_dir):
    tokens = data.ptb_tokens(datasets.dataset_root(data_dir, "ptb"), vocab=5)
    words = [word for line in PTB_TEXT.splitlines() for word in line.split() + ["<eos>"]]
    assert len(tokens) == len(words)
    # Ids 2..4 are the three most frequent words (the, <eos>, sat/on/...), the rest <unk> = 1.
    assert set(tokens.tolist()) == {1, 2, 3, 4}
    assert tokens[0] == 2, "'the' is the most frequent word"


def test_denoising_pairs_are_the_same_wherever_drawn(data_dir):
    spec = models()["autoencoder"]
    options = resolve_options(spec)
    dataset = spec.real_data(datasets.dataset_root(data_dir, "mnist"), options, 0)
    noisy, clean = dataset[5]
    again, clean_again = dataset[5]
    torch.testing.assert_close(noisy, again)
    torch.testing.assert_close(clean, clean_again)
    assert not torch.equal(noisy, clean)
    other_seed = spec.real_data(datasets.dataset_root(data_dir, "mnist"), options, 1)[5][0]
    assert not torch.equal(noisy, other_seed)


def test_loader_source_cycles_epochs_in_a_seeded_order(data_dir):
    dataset = data.mnist(datasets.dataset_root(data_dir, "mnist"), flatten=True)
    first = data.LoaderSource(dataset, batch=8, seed=0)
    second = data.LoaderSource(dataset, batch=8, seed=0)
    batches = [first.next() for _ in range(5)]  # 30 samples: 3 full batches per epoch
    assert first.epoch == 1
    for batch in batches:
        assert isinstance(batch, tuple) and batch[0].shape == (8, 784)
    for batch, again in zip(batches, (second.next() for _ in range(5)), strict=True):
        torch.testing.assert_close(batch[0], again[0])


def test_loader_source_splits_the_global_batch_over_processes(data_dir):
    dataset = data.TokenWindows(torch.arange(100), 2, lambda index, window: (window, window))
    ranks = [data.LoaderSource(dataset, batch=8, seed=0, rank=r, world_size=2) for r in range(2)]
    shards = [rank.next()[0] for rank in ranks]
    assert all(shard.shape == (4, 2) for shard in shards)
    assert set(shards[0][:, 0].tolist()).isdisjoint(shards[1][:, 0].tolist())


def test_a_dataset_smaller_than_a_batch_is_refused():
    dataset = data.TokenWindows(torch.arange(10), 2, lambda index, window: (window, window))
    with pytest.raises(ValueError, match="the dataset has 5 samples, fewer than one batch \\(8\\)"):
        data.LoaderSource(dataset, batch=8, seed=0)


def test_synthetic_source_gives_each_process_its_share():
    pool = [(torch.arange(8) + 10 * i, (torch.arange(8), torch.zeros(8))) for i in range(2)]
    whole = data.SyntheticSource(pool)
    halves = [data.SyntheticSource(pool, rank, 2) for rank in range(2)]
    for _ in range(3):
        inputs, (first, _) = whole.next()
        parts = [half.next() for half in halves]
        torch.testing.assert_close(torch.cat([part[0] for part in parts]), inputs)
        torch.testing.assert_close(torch.cat([part[1][0] for part in parts]), first)


def test_download_fetches_into_the_dataset_folder(tmp_path, monkeypatch):
    import io
    import urllib.request

    import torchvision

    calls = []

    class FakeCIFAR10:
        def __init__(self, root, train, download):
            calls.append((str(root), train, download))
            folder = root / "cifar-10-batches-py"
            folder.mkdir(parents=True)
            (folder / "batches.meta").write_bytes(b"meta")

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", FakeCIFAR10)
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: io.BytesIO(b"a b c\nd e\n"))
    assert datasets.download(tmp_path, "cifar10") == tmp_path / "cifar10"
    assert calls == [(str(tmp_path / "cifar10"), True, True)]
    assert datasets.download(tmp_path, "ptb") == tmp_path / "ptb"
    assert (tmp_path / "ptb" / datasets.PTB_FILE).read_text() == "a b c\nd e\n"
    assert datasets.is_present(tmp_path, "ptb") and datasets.is_present(tmp_path, "cifar10")
    assert not datasets.is_present(tmp_path, "mnist")
    with pytest.raises(ValueError, match="dataset 'imagenet' is not known; allowed: cifar10"):
        datasets.download(tmp_path, "imagenet")


def test_an_empty_download_is_not_taken_for_a_dataset(tmp_path, monkeypatch):
    import io
    import urllib.request

    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: io.BytesIO(b"  \n"))
    with pytest.raises(RuntimeError, match="returned no text"):
        datasets.download(tmp_path, "ptb")
    assert not datasets.is_present(tmp_path, "ptb")
    assert list((tmp_path / "ptb").iterdir()) == []


@pytest.mark.workflow
def test_the_download_rule_fetches_each_dataset_into_the_data_dir(workflow_dir):
    from conftest import snakemake

    (workflow_dir / "config" / "data.yaml").write_text("train:\n  data_dir: /scratch/ours\n")
    done = snakemake(workflow_dir, "-n", "datasets", "--configfile", "config/data.yaml")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    output = done.stdout + done.stderr
    for name in datasets.DATASETS:
        assert f"/scratch/ours/{name}" in output
    assert "download_dataset        3" in output or "download_dataset 3" in " ".join(output.split())

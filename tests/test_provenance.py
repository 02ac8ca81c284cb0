"""What a record says about where it was measured: the GPUs as CUDA numbers them."""

from __future__ import annotations

import subprocess

import torch

from accelbench.platform import provenance


class FakeUuid:
    """torch's _CUuuid: its text is the UUID without NVML's "GPU-" prefix."""

    def __init__(self, text):
        self.text = text

    def __str__(self):
        return self.text


class FakeProperties:
    """What torch reads of a device here: its UUID, and its compute capability (cuDNN)."""

    def __init__(self, uuid):
        self.uuid = FakeUuid(uuid)
        self.major, self.minor = 9, 0


def test_the_accelerator_lists_each_cuda_device_with_its_uuid(monkeypatch):
    uuids = ["58a6b4b0-1111-2222-3333-444455556666", "9f00aa11-7777-8888-9999-000011112222"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: f"NVIDIA H100 ({index})")
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda index: FakeProperties(uuids[index])
    )
    monkeypatch.setattr(
        subprocess,
        "run",
        lambda *args, **kwargs: subprocess.CompletedProcess(args, 0, stdout="580.65.06\n"),
    )
    found = provenance.gpu_info()
    assert found["gpus"] == ["NVIDIA H100 (0)", "NVIDIA H100 (1)"]
    assert found["uuids"] == uuids
    assert found["driver"] == "580.65.06"


def test_without_a_gpu_the_accelerator_lists_none(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    found = provenance.gpu_info()
    assert found["gpus"] == [] and found["uuids"] == []

"""Which GPUs an installed CUDA stack drives, in which precisions, and which stack to pick."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from accelbench.platform import gpu_support
from accelbench.platform.gpu_support import arch_problem, precision_problem, runs_on, stack_advice

REPO_ROOT = Path(__file__).resolve().parents[1]
CUDA13_TORCH = gpu_support.STACKS[0].torch_archs
CUDA12_TORCH = gpu_support.STACKS[1].torch_archs
V100, T4, A100, A10, L40S, H100 = (7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0)
B200, RTX5090, ORIN = (10, 0), (12, 0), (8, 7)


@pytest.mark.parametrize(
    ("arch", "capability", "runs"),
    [
        ("sm_80", A100, True),
        ("sm_80", A10, True),  # a cubin runs on later GPUs of its major version
        ("sm_80", L40S, True),
        ("sm_86", A100, False),  # not on earlier ones
        ("sm_80", H100, False),  # nor on another major version
        ("sm_75", V100, False),
        ("sm_90a", H100, True),  # architecture-specific: that GPU only
        ("sm_90a", (9, 1), False),
        ("sm_100f", (10, 3), True),  # family-specific: its family
        ("sm_100f", RTX5090, False),
        ("compute_90", B200, True),  # PTX: compiled by the driver for any later GPU
        ("compute_90", A100, False),
        ("compute_70", V100, True),
        ("sm_80", ORIN, False),  # an integrated GPU runs its own code only
        ("sm_87", ORIN, True),
        ("compute_75", ORIN, False),
    ],
)
def test_code_runs_on_a_gpu_by_cudas_compatibility_rules(arch, capability, runs):
    assert runs_on(arch, capability) is runs


def test_the_cuda13_torch_has_no_code_for_volta_and_says_what_it_carries():
    problem = arch_problem(V100, CUDA13_TORCH, "torch 2.14.1+cu130")
    assert problem == (
        "torch 2.14.1+cu130 has no code for compute capability 7.0 "
        "(it carries sm_75 sm_80 sm_86 sm_90 sm_100 sm_120)"
    )
    assert arch_problem(V100, CUDA12_TORCH, "torch 2.14.1+cu126") is None


@pytest.mark.parametrize("capability", [T4, A100, A10, L40S, H100, B200, RTX5090])
def test_the_cuda13_torch_drives_turing_to_blackwell(capability):
    assert arch_problem(capability, CUDA13_TORCH, "torch") is None


def test_the_cuda12_torch_has_no_blackwell_code():
    assert arch_problem(B200, CUDA12_TORCH, "torch 2.14.1+cu126") is not None
    assert arch_problem(RTX5090, CUDA12_TORCH, "torch 2.14.1+cu126") is not None


def test_the_cuda13_stack_lists_the_architectures_of_the_installed_torch():
    if torch.version.cuda is None or not torch.version.cuda.startswith("13."):
        pytest.skip(f"torch {torch.__version__} is not a CUDA 13 build")
    assert tuple(torch.cuda.get_arch_list()) == CUDA13_TORCH


def test_a_runtime_compiler_serves_gpus_from_its_oldest_architecture_on():
    nvrtc13 = gpu_support.compiler_archs([75, 80, 86, 87, 89, 90, 100, 120])
    assert nvrtc13[0] == "compute_75"
    assert arch_problem(V100, nvrtc13, "NVRTC 13.0") is not None
    assert arch_problem((12, 1), nvrtc13, "NVRTC 13.0") is None
    numba_style = gpu_support.compiler_archs([(7, 5), (9, 0)])
    assert numba_style == ["compute_75", "compute_90"]
    assert arch_problem(A100, numba_style, "NVVM") is None


def test_a_library_that_names_no_architecture_is_not_judged():
    assert arch_problem(V100, [], "a CPU build") is None


@pytest.mark.parametrize("precision", ["bf16", "bfloat16"])
def test_bfloat16_before_ampere_is_refused_as_emulated(precision):
    problem = precision_problem(V100, precision)
    assert problem == (
        "bfloat16 needs compute capability 8.0 (Ampere) or newer; on 7.0 PyTorch emulates it, "
        "so the times would not be bfloat16's"
    )
    assert precision_problem(A100, precision) is None


def test_tf32_before_ampere_is_refused_as_fp32_in_disguise():
    assert precision_problem(T4, "tf32") == (
        "TF32 needs compute capability 8.0 (Ampere) or newer; on 7.5 a tf32 experiment would "
        "compute in fp32"
    )
    assert precision_problem(H100, "tf32") is None


@pytest.mark.parametrize("precision", ["fp32", "fp16", "fp64", "float16", "float32", "float64"])
def test_other_precisions_run_on_every_supported_gpu(precision):
    assert precision_problem(V100, precision) is None


def test_a_volta_gpu_is_pointed_to_the_cuda12_stack():
    advice = stack_advice([V100], (13, 0))
    assert advice.startswith("install the CUDA 12 stack, which drives compute capability 7.0")
    assert "`make CUDA=12`" in advice


def test_a_gpu_both_stacks_drive_gets_the_one_its_driver_runs():
    assert "install the CUDA 13 stack" in stack_advice([H100], (13, 0))
    assert "install the CUDA 12 stack" in stack_advice([H100], (12, 4))


def test_blackwell_under_an_old_driver_needs_a_driver_update():
    advice = stack_advice([B200], (12, 8))
    assert advice.startswith("the CUDA 13 stack drives compute capability 10.0 but needs an")
    assert "driver >= 580; this driver supports CUDA 12.8: update the driver" in advice


def test_a_gpu_no_stack_drives_is_said_plainly():
    advice = stack_advice([(3, 7)], (12, 4))
    assert advice.startswith("no CUDA stack of this project drives compute capability 3.7")


def _cuda12_pins() -> list[list[str]]:
    """The pip lines of the CUDA 12 stack: requirements-cuda12.txt and the conda env's pip list."""
    requirements = (REPO_ROOT / "requirements-cuda12.txt").read_text().splitlines()
    env = yaml.safe_load((REPO_ROOT / "envs" / "accelbench-cuda12.yaml").read_text())
    pip = next(entry["pip"] for entry in env["dependencies"] if isinstance(entry, dict))
    return [requirements, pip]


def test_the_cuda12_stack_pins_a_torch_build_its_release_publishes():
    """PyTorch's release matrix, as the installed torch (the same release) lists it: a pin of a
    build it does not publish (cu128 from 2.12 on) cannot be installed."""
    released = torch.cuda.PYTORCH_RELEASES_CODE_CC
    for lines in _cuda12_pins():
        [pin] = [line for line in lines if line.startswith("torch==")]
        version, label = pin.removeprefix("torch==").split("+")
        assert version == torch.__version__.split("+")[0]
        cuda = f"{label[2:-1]}.{label[-1]}"  # cu126 -> 12.6
        assert cuda in released, f"torch {version} has no CUDA {cuda} build: {sorted(released)}"
        index = [line.split()[-1] for line in lines if line.startswith("--extra-index-url")]
        assert index == [f"https://download.pytorch.org/whl/{label}"]
        assert f"torchvision==0.29.1+{label}" in lines
        archs = {f"sm_{code}" for code in released[cuda]["x86_64"]}
        assert archs == set(CUDA12_TORCH)
    assert {f"sm_{code}" for code in released["13.0"]["x86_64"]} == set(CUDA13_TORCH)

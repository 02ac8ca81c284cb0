"""What an installed CUDA stack can run on a GPU, and which of the project's stacks to pick.

A GPU runs code built for its architecture, and new GPU generations add
precisions the old ones only emulate. The builds carry a list of architectures
(torch.cuda.get_arch_list(); the architectures NVRTC and NVVM compile for, for
CuPy and Numba-CUDA); the GPU reports its compute capability. These pure
functions compare the two, so the rules are tested without a GPU; the doctor and
every GPU experiment's start apply them to what the libraries report.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Capability = tuple[int, int]

# Numba-CUDA's warning for a launch of fewer than 128 blocks; its text starts with a
# terminal colour code, so the pattern may not anchor at "Grid".
LOW_OCCUPANCY_WARNING = r".*Grid size \d+ will likely result in GPU under-utilization"

# Integrated (Jetson) GPUs: Tegra X1, X2, Xavier, Orin. Their code runs on themselves only,
# and code built for the discrete GPUs of their generation does not run on them.
INTEGRATED = frozenset({53, 62, 72, 87})
# Ampere (8.0) brought bfloat16 and TF32 to the tensor cores. Before it, PyTorch emulates
# bfloat16 (torch.cuda.is_bf16_supported() still says True) and TF32 does not exist, so a
# bf16 or tf32 record would measure something else than it names.
AMPERE: Capability = (8, 0)
NATIVE_FROM: dict[str, Capability] = {"bf16": AMPERE, "bfloat16": AMPERE, "tf32": AMPERE}


@dataclass(frozen=True)
class Stack:
    """One of the project's CUDA stacks (docs/install.md, CUDA stacks)."""

    name: str  # what `make CUDA=...` and the config's cuda_stack take
    driver_cuda: Capability  # the CUDA version the NVIDIA driver must support
    driver: str  # the driver versions that do, for people
    torch_archs: tuple[str, ...]  # the architectures its torch 2.14.1 build carries


# The torch builds of PyTorch 2.14's release matrix (as torch.cuda.PYTORCH_RELEASES_CODE_CC
# lists them for x86_64): CUDA 13.0 for Turing to Blackwell, CUDA 12.6 for Maxwell to
# Hopper; neither carries PTX, so neither runs on a GPU newer than its newest architecture.
STACKS = (
    Stack("13", (13, 0), ">= 580", ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")),
    Stack(
        "12",
        (12, 0),
        ">= 525.60.13",
        ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    ),
)


@dataclass(frozen=True)
class VisibleGpu:
    """A GPU as a CUDA library sees it: its index in this process, name and compute capability
    (and its UUID where the library gives it, as torch writes it)."""

    index: int
    name: str
    capability: Capability
    uuid: str = ""


def capability_text(capability: Capability) -> str:
    return f"{capability[0]}.{capability[1]}"


def _parts(arch: str) -> tuple[str, int, str]:
    """("sm" or "compute", 10 x major + minor, suffix) of an architecture such as sm_90a."""
    kind, _, rest = arch.partition("_")
    digits = rest.rstrip("af")
    return kind, int(digits), rest[len(digits) :]


def runs_on(arch: str, capability: Capability) -> bool:
    """Whether code built for `arch` runs on a GPU of `capability`, by CUDA's compatibility rules.

    A cubin (sm_XY) runs on its own major version from minor Y on; an
    architecture-specific one (sm_90a) on that architecture only. PTX
    (compute_XY) is compiled by the driver for that GPU and any later one.
    """
    kind, code, suffix = _parts(arch)
    device = 10 * capability[0] + capability[1]
    if suffix == "a" or code in INTEGRATED or device in INTEGRATED:
        return device == code
    if kind == "compute" and suffix != "f":
        return device >= code
    return device // 10 == code // 10 and device >= code


def compiler_archs(capabilities: Iterable[int | Capability]) -> list[str]:
    """The architectures a run-time compiler (NVRTC, NVVM) targets, as PTX architectures.

    CuPy and Numba-CUDA compile each kernel for the GPU's own architecture, or for
    the newest one the compiler knows below it, which the driver then compiles
    on: a GPU older than the compiler's oldest architecture cannot be served.
    """
    codes = (c if isinstance(c, int) else 10 * c[0] + c[1] for c in capabilities)
    return [f"compute_{code}" for code in sorted(codes)]


def arch_problem(capability: Capability, archs: Sequence[str], built: str) -> str | None:
    """Why code of `built` (carrying `archs`) cannot run on a GPU of `capability`; None if it can.

    An empty list (a library that names none) is not judged.
    """
    if not archs or any(runs_on(arch, capability) for arch in archs):
        return None
    return (
        f"{built} has no code for compute capability {capability_text(capability)} "
        f"(it carries {' '.join(archs)})"
    )


def precision_problem(capability: Capability, precision: str) -> str | None:
    """Why a GPU of `capability` cannot run `precision` (a training precision or a kernel
    dtype) as what it names; None if it can."""
    needed = NATIVE_FROM.get(precision)
    if needed is None or tuple(capability) >= needed:
        return None
    what = capability_text(capability)
    if precision == "tf32":
        return (
            f"TF32 needs compute capability {capability_text(needed)} (Ampere) or newer; "
            f"on {what} a tf32 experiment would compute in fp32"
        )
    return (
        f"bfloat16 needs compute capability {capability_text(needed)} (Ampere) or newer; "
        f"on {what} PyTorch emulates it, so the times would not be bfloat16's"
    )


def stack_advice(capabilities: Sequence[Capability], driver_cuda: Capability | None) -> str:
    """Which of the project's stacks drives GPUs of these capabilities under this driver
    (the CUDA version it supports; None where unknown)."""
    what = ", ".join(sorted({capability_text(c) for c in capabilities}))
    usable = [
        s for s in STACKS if all(arch_problem(c, s.torch_archs, "") is None for c in capabilities)
    ]
    if not usable:
        return f"no CUDA stack of this project drives compute capability {what}; " + "; ".join(
            f"CUDA {s.name}: {' '.join(s.torch_archs)}" for s in STACKS
        )
    driven = [s for s in usable if driver_cuda is None or tuple(driver_cuda) >= s.driver_cuda]
    if not driven:
        stack = usable[0]
        return (
            f"the CUDA {stack.name} stack drives compute capability {what} but needs an NVIDIA "
            f"driver {stack.driver}; this driver supports CUDA {capability_text(driver_cuda)}: "
            "update the driver (see docs/install.md, CUDA stacks)"
        )
    stack = driven[0]
    return (
        f"install the CUDA {stack.name} stack, which drives compute capability {what} "
        f"(`make CUDA={stack.name}`, config cuda_stack: {stack.name}; NVIDIA driver "
        f"{stack.driver}; see docs/install.md, CUDA stacks)"
    )

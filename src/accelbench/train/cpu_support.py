"""Whether this CPU can run PyTorch's LSTM in a reduced precision.

PyTorch runs the CPU LSTM through oneDNN, whose bfloat16 and float16 RNN
kernels exist only for some instruction sets: a cluster that mixes CPU
generations runs a bf16 LSTM on one node and fails on the next. The answer is
probed once per process with a tiny LSTM (a few milliseconds), and a refusal is
explained by the CPU feature oneDNN needs, read from /proc/cpuinfo, so the
record says what the node lacks instead of oneDNN's "could not create a
primitive descriptor".

`ACCELBENCH_CPU_FLAGS` (space-separated flags) stands in for /proc/cpuinfo and
decides from the flags alone: it simulates another CPU, in tests and for
checking what a grid would give on another node type.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import torch

FORCED_FLAGS_ENV = "ACCELBENCH_CPU_FLAGS"

# dtype -> (alternative flag sets, any of which suffices; what to call it).
# oneDNN emulates bf16 RNNs on AVX-512 ("avx512_core": F, BW, VL, DQ) and runs
# fp16 RNNs only with the AVX512-FP16 or AMX-FP16 extensions.
LSTM_NEEDS: dict[torch.dtype, tuple[tuple[frozenset[str], ...], str]] = {
    torch.bfloat16: (
        (frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq"}),),
        "AVX-512 (avx512f, avx512bw, avx512vl, avx512dq)",
    ),
    torch.float16: (
        (frozenset({"avx512_fp16"}), frozenset({"amx_fp16"})),
        "AVX512-FP16 (avx512_fp16) or AMX-FP16 (amx_fp16)",
    ),
}


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (first processor in /proc/cpuinfo), or the forced ones."""
    forced = os.environ.get(FORCED_FLAGS_ENV)
    if forced is not None:
        return frozenset(forced.split())
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


@functools.cache
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


@functools.cache
def lstm_probe(dtype: torch.dtype) -> str | None:
    """None if a tiny LSTM runs forward and backward in `dtype` autocast here, else the error."""
    lstm = torch.nn.LSTM(4, 4, batch_first=True)
    inputs = torch.randn(2, 3, 4)
    try:
        with torch.autocast("cpu", dtype=dtype):
            output = lstm(inputs)[0]
        output.float().sum().backward()
    except RuntimeError as err:
        return str(err).splitlines()[0]
    return None


def lstm_unsupported(dtype: torch.dtype) -> str | None:
    """Why PyTorch's CPU LSTM cannot run in `dtype` autocast on this CPU; None if it can."""
    if dtype not in LSTM_NEEDS:
        return None
    alternatives, needed = LSTM_NEEDS[dtype]
    flags = cpu_flags()
    has_feature = any(required <= flags for required in alternatives)
    name = str(dtype).removeprefix("torch.")
    forced = os.environ.get(FORCED_FLAGS_ENV) is not None
    if forced:  # a simulated CPU: the flags alone decide
        if has_feature:
            return None
        error = ""
    else:
        error = lstm_probe(dtype)
        if error is None:
            return None
    cpu = f"flags forced by {FORCED_FLAGS_ENV}" if forced else cpu_model()
    if has_feature:
        return (
            f"PyTorch's CPU LSTM cannot run in {name} here although this CPU "
            f"({cpu}) has {needed}: {error}"
        )
    return (
        f"PyTorch's CPU LSTM cannot run in {name} here: oneDNN needs {needed}, "
        f"which this CPU ({cpu}) lacks"
    )

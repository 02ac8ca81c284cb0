"""Data-sheet peaks of common data-centre GPUs: what a measured roof is held against.

Each value is NVIDIA's published figure for the board, read from its data sheet or
product brief (or, where only that was at hand, from a page reproducing the data
sheet's table, named in `source`). Tensor figures are dense: NVIDIA's Ampere and
later data sheets print them "with sparsity" and state that they are half as large
without it, so the dense value is the printed one halved. The host link is the
PCIe figure of the data sheet, both directions together (64 GB/s for Gen4 x16,
128 GB/s for Gen5 x16); NVLink joins GPUs to each other and bounds no roof here.
A value that no data sheet at hand gave is None and is not judged; the gaps are:

- H200 SXM: FP64 Tensor Core (the pages read gave FP64, FP32, the tensor figures, the
  memory and the interconnects only);
- V100: the PCIe host link; L4: FP32 and the host link; L40S: FP64 (its data sheet
  lists none); T4: FP64 and the host link (the pages read name x16 PCIe Gen3, no
  rate);
- A40: every compute figure and the host link (only its memory bandwidth was found
  in a reproduction of its data sheet).

No heavy imports: the acceptance check reads this table on any machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

H100_DATASHEET = (
    "NVIDIA H100 Tensor Core GPU data sheet (nvidia.com/en-us/data-center/h100), read as "
    "reproduced at archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html (tensor figures "
    "'shown with sparsity, 1/2 lower without')"
)
H100_PCIE_BRIEF = (
    "NVIDIA H100 PCIe GPU Product Brief PB-11133-001_v02 (Nov. 2022), read at manuals.plus: "
    "memory bandwidth 'greater than 2,000 GBps'"
)
H200_DATASHEET = (
    "NVIDIA H200 Tensor Core GPU data sheet (nvidia.com/en-us/data-center/h200), read as "
    "reproduced at lzwjava.github.io/nvidia-h200-gpu-specs-en (FP64 34, 4.8 TB/s), "
    "saulelectric.com/nvidia-h200.html (PCIe Gen5 128 GB/s, FP16/BF16 1,979 with sparsity), "
    "ai-hpc.github.io (TF32 989 with sparsity) and hmc-tech.com/gpu/nvidia-h100-vs-nvidia-"
    "h200-sxm-vs-nvidia-gb200 (FP32 66.91: 16,896 FP32 cores x 2 flops x 1,980 MHz boost; "
    "the data sheet rounds it to 67, as for the H100 SXM)"
)
A100_DATASHEET = (
    "NVIDIA A100 Tensor Core GPU data sheet, nvidia.com/content/dam/en-zz/Solutions/"
    "Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf, read as "
    "reproduced at glennklockwood.com/garden/processors/A100 (FP64 9.7, FP64 Tensor 19.5, "
    "FP32 19.5, TF32 156, FP16/BF16 312, PCIe Gen4 32+32 GB/s) and thundercompute.com/blog/"
    "nvidia-a100-specs-full-guide (bandwidth per board)"
)
V100_SOURCES = (
    "NVIDIA Tesla V100 data sheet figures as NVIDIA announced them: 125 tensor TFLOPS "
    "(developer.nvidia.com/programming-tensor-cores-cuda-9-0), V100 PCIe 7 / 14 / 112 TFLOPS "
    "and 900 GB/s (io-tech.fi, on NVIDIA's V100 PCIe announcement), V100 SXM2 7.8 / 15.7 "
    "TFLOPS (grokipedia.opelly.me/articles/nvidia-tesla-v100)"
)
L40S_DATASHEET = (
    "NVIDIA L40S data sheet (nvidia.com/en-us/data-center/l40s), read as reproduced at "
    "mullet.se (product 355414) and itcreations.com/nvidia-gpu/nvidia-l40s-gpu-accelerator: "
    "FP32 91.6, TF32 183 | 366*, BF16/FP16 362.05 | 733*, 864 GB/s, "
    "PCIe Gen4 x16 64 GB/s bidirectional"
)
L4_DATASHEET = (
    "NVIDIA L4 Tensor Core GPU data sheet (nvidia.com/en-us/data-center/l4), read as "
    "reproduced at store.sourcecode.com (TF32 120 with sparsity, 300 GB/s) and "
    "yobitel.com/knowledge-base/nvidia-l4 (BF16 121, 242 sparse)"
)
A40_DATASHEET = (
    "NVIDIA A40 data sheet (nvidia.com/en-us/data-center/a40), read as reproduced at "
    "relationship-nepal.org/900-2g133-0000-000.html: 696 GB/s"
)
T4_SOURCES = (
    "NVIDIA T4 Tensor Core GPU data sheet figures: FP32 8.1 TFLOPS, mixed-precision "
    "(FP16/FP32) 65 TFLOPS, 16 GB GDDR6 300 GB/s, as reproduced at dtcms.com/a/145471.html; "
    "NVIDIA's launch (heise.de, GTC Japan 2018) gave 320 GB/s"
)


@dataclass(frozen=True)
class DataSheet:
    """One board's published peaks: TFLOPS for arithmetic, GB/s (1e9 bytes) for memory and
    host link; None where no data sheet at hand gives the value."""

    name: str
    matches: str  # regular expression over the CUDA device name (torch.cuda.get_device_name)
    source: str
    fp64: float | None = None
    fp64_tensor: float | None = None  # FP64 on tensor cores, which cuBLAS's DGEMM uses
    fp32: float | None = None
    tf32: float | None = None  # dense tensor-core rates from here on
    fp16: float | None = None
    bf16: float | None = None
    memory_gbs: float | None = None
    host_link_gbs: float | None = None  # PCIe, both directions together
    # Tensor-core formats the board computes in: Volta and Turing (V100, T4) have FP16
    # only, their data sheets no TF32 or BF16 rate; a None rate above may be a gap instead.
    tensor_formats: tuple[str, ...] = ("tf32", "fp16", "bf16")


def _hopper(
    name: str, matches: str, source: str, *, sparse_tf32: float, sparse_fp16: float, **peaks
) -> DataSheet:
    """A Hopper board: its data sheet prints the tensor figures with sparsity, "1/2 lower
    without"; BF16 runs at the FP16 rate."""
    dense_fp16 = sparse_fp16 / 2
    return DataSheet(
        name, matches, source, tf32=sparse_tf32 / 2, fp16=dense_fp16, bf16=dense_fp16, **peaks
    )


def _a100(name: str, matches: str, memory_gbs: float) -> DataSheet:
    return DataSheet(
        name,
        matches,
        A100_DATASHEET,
        fp64=9.7,
        fp64_tensor=19.5,
        fp32=19.5,
        tf32=156.0,
        fp16=312.0,
        bf16=312.0,
        memory_gbs=memory_gbs,
        host_link_gbs=64.0,
    )


VOLTA_TURING = ("fp16",)
# Most specific first: the first pattern that matches a device name names its board.
DATASHEETS = (
    _hopper(
        "H100 PCIe",
        r"H100.*PCIe",
        f"{H100_DATASHEET}; {H100_PCIE_BRIEF}",
        fp64=26.0,
        fp64_tensor=51.0,
        fp32=51.0,
        sparse_tf32=756.0,
        sparse_fp16=1513.0,
        memory_gbs=2000.0,
        host_link_gbs=128.0,
    ),
    _hopper(
        "H100 SXM",
        r"H100.*(SXM|HBM3)",
        H100_DATASHEET,
        fp64=34.0,
        fp64_tensor=67.0,
        fp32=67.0,
        sparse_tf32=989.0,
        sparse_fp16=1979.0,
        memory_gbs=3350.0,
        host_link_gbs=128.0,
    ),
    _hopper(
        "H200 SXM",
        r"H200(?!.*NVL)",
        H200_DATASHEET,
        fp64=34.0,
        fp32=66.9,
        sparse_tf32=989.0,
        sparse_fp16=1979.0,
        memory_gbs=4800.0,
        host_link_gbs=128.0,
    ),
    _a100("A100 SXM 80GB", r"A100.*SXM.*80GB", 2039.0),
    _a100("A100 SXM 40GB", r"A100.*SXM.*40GB", 1555.0),
    _a100("A100 PCIe 80GB", r"A100.*(80GB.*PCIe|PCIe.*80GB)", 1935.0),
    _a100("A100 PCIe 40GB", r"A100.*PCIe.*40GB", 1555.0),
    DataSheet(
        "V100 SXM2",
        r"V100-SXM2",
        V100_SOURCES,
        fp64=7.8,
        fp32=15.7,
        fp16=125.0,
        memory_gbs=900.0,
        tensor_formats=VOLTA_TURING,
    ),
    DataSheet(
        "V100 PCIe",
        r"V100-PCIe",
        V100_SOURCES,
        fp64=7.0,
        fp32=14.0,
        fp16=112.0,
        memory_gbs=900.0,
        tensor_formats=VOLTA_TURING,
    ),
    DataSheet(
        "L40S",
        r"\bL40S\b",
        L40S_DATASHEET,
        fp32=91.6,
        tf32=183.0,
        fp16=362.05,
        bf16=362.05,
        memory_gbs=864.0,
        host_link_gbs=64.0,
    ),
    DataSheet("L4", r"\bL4\b", L4_DATASHEET, tf32=60.0, fp16=121.0, bf16=121.0, memory_gbs=300.0),
    DataSheet("A40", r"\bA40\b", A40_DATASHEET, memory_gbs=696.0),
    DataSheet(
        "T4",
        r"\bT4\b",
        T4_SOURCES,
        fp32=8.1,
        fp16=65.0,
        memory_gbs=300.0,
        tensor_formats=VOLTA_TURING,
    ),
)


def datasheet_for(device_name: str) -> DataSheet | None:
    """The data sheet of the board CUDA names `device_name` (e.g. "NVIDIA H100 80GB HBM3",
    "Tesla V100-SXM2-32GB"); None for a board not in the table."""
    return next(
        (sheet for sheet in DATASHEETS if re.search(sheet.matches, device_name, re.IGNORECASE)),
        None,
    )


def gemm_peak_gflops(sheet: DataSheet, dtype: str) -> float | None:
    """The highest rate a library GEMM in `dtype` can reach by the data sheet, GFLOP/s.

    float32 is the plain FP32 rate: the kernels and roofs keep TF32 off, so a
    float32 roof above it means TF32 crept in. float64 takes the FP64 tensor cores
    where the board has them (cuBLAS's DGEMM uses them).
    """
    tflops = {
        "float64": max(
            (value for value in (sheet.fp64, sheet.fp64_tensor) if value is not None),
            default=None,
        ),
        "float32": sheet.fp32,
        "float16": sheet.fp16,
        "bfloat16": sheet.bf16,
    }[dtype]
    return None if tflops is None else tflops * 1e3


def host_link_per_direction_gbs(sheet: DataSheet) -> float | None:
    """One direction of the host link (the data sheet gives both together), GB/s."""
    return None if sheet.host_link_gbs is None else sheet.host_link_gbs / 2


TENSOR_FORMATS = {"tf32": "tf32", "bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16"}


def lacks_format(sheet: DataSheet, name: str) -> bool:
    """Whether the board cannot compute in a training precision or kernel dtype at all
    (tf32 and bf16 before Ampere): its cells are rightly "unavailable" there."""
    return name in TENSOR_FORMATS and TENSOR_FORMATS[name] not in sheet.tensor_formats

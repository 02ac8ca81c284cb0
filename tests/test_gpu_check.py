"""The GPU acceptance check: its verdict on planted records (every condition met and each
one broken), the grids it runs (config/gpu.yaml; config/gpu-full.yaml on a cluster), the
workflow's plan of them, and the command that keeps the records as a reference."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter
from dataclasses import asdict

import pytest

from accelbench import cli, grid
from accelbench import config as workflow_config
from accelbench.analysis import tables
from accelbench.analysis.tables import markdown_escape
from accelbench.backends import catalogue as backend_catalogue
from accelbench.backends.libraries import DATASCI_BACKENDS
from accelbench.datasci import workloads
from accelbench.families.kernel import KernelExperiment
from accelbench.families.roof import RoofExperiment
from accelbench.families.train import TrainExperiment
from accelbench.kernels import kernels
from accelbench.measuring.statistics import summarize, value
from accelbench.records.record import make_record, write_record
from accelbench.studies.gpu_acceptance import acceptance, redraw
from accelbench.studies.gpu_acceptance import check as gpu_check
from accelbench.studies.gpu_acceptance import datasheets as gpu_datasheets

from conftest import REPO_ROOT, copy_workflow, planned_cells, snakemake
from records import provenance as base_provenance

H100 = "NVIDIA H100 80GB HBM3"
V100 = "Tesla V100-SXM2-32GB"
UUID = "58a6b4b0-1111-2222-3333-444455556666"
OTHER_UUID = "9f00aa11-7777-8888-9999-000011112222"
CUDA_STACK = ("torch", "cupy", "numba-cuda", "jax")


def spread(median: float, unit: str) -> dict:
    """A measured distribution around `median`, 1% either way."""
    return summarize([median * factor for factor in (0.99, 0.995, 1.0, 1.005, 1.01)], unit)


def provenance(device: str, board: str = H100, uuids=(UUID,)) -> dict:
    found = base_provenance([board] if device.startswith("cuda") else [])
    found["accelerator"]["uuids"] = list(uuids) if device.startswith("cuda") else []
    return found


def nvml_energy(counters=(f"GPU-{UUID}",), status="ok", method="nvml total-energy counter"):
    return {
        "status": status,
        "reason": None if status == "ok" else "an energy window lasted 0.2 s",
        "method": f"{method} ({', '.join(counters)})",
        "counters": list(counters),
        "unit": "call",
        "samples_per_unit": None,
        "counter_period_s": 0.1,
        "baseline_w": 70.0,
        "baseline_s": 1.0,
        "windows": [{"joules": 300.0, "seconds": 1.0, "calls": 1000}] * 2,
    }


def nvml_gpu_state(gpus=(f"GPU-{UUID}",), reasons=(), power_s=0.0, thermal_s=0.0, busy_s=9.0):
    """What NVML read of the GPUs over a measurement (conditions.gpu_state) that lasted 10 s,
    the GPU busy `busy_s` of them, its clocks held back by `reasons` and for the seconds
    given."""
    board = {
        "sm_clock_mhz": {"min": 1755.0, "median": 1980.0, "max": 1980.0, "samples": 90}
        | {"source": "readings"},
        "memory_clock_mhz": {"min": 2619.0, "median": 2619.0, "max": 2619.0, "samples": 90}
        | {"source": "readings"},
        "power_w": {"min": 310.0, "median": 650.0, "max": 702.0, "samples": 450}
        | {"source": "samples"},
        "power_limit_w": 700.0,
        "temperature_c": {"min": 45, "max": 62},
        "clock_event_reasons": list(reasons),
        "throttled_s": {"power": power_s, "thermal": thermal_s}
        | {"board_limit": 0.0, "reliability": 0.0},
        "readings": 100,
        "busy_readings": 90,
        "busy_s": busy_s,
        "unreadable": {},
    }
    return {
        "status": "ok",
        "reason": None,
        "method": "nvml readings every 0.1 s",
        "period_s": 0.1,
        "seconds": 10.0,
        "gpus": dict.fromkeys(gpus, board),
    }


NO_NVML = {"status": "unavailable", "reason": "NVML cannot start: Driver Not Loaded"}


def record(
    exp, status="ok", metrics=None, reason=None, board=H100, uuids=(UUID,), check=None, **extra
):
    """(result path, record) of `exp` with its provenance, energy and GPU state where it ran
    on a GPU."""
    on_gpu = exp.device.startswith("cuda")
    energy = extra.pop("energy", nvml_energy() if on_gpu and exp.family != "roof" else None)
    state = extra.pop("gpu_state", nvml_gpu_state() if on_gpu else None)
    if state and status == "ok":
        extra["conditions"] = {"busy": False, "gpu_state": state}
    return exp.path, make_record(
        experiment=exp.family,
        experiment_id=exp.id,
        status=status,
        params={**asdict(exp), "seed": 0},
        provenance=provenance(exp.device, board, uuids),
        metrics=metrics if status == "ok" else None,
        check=(check or {"passed": True, "relative_error": 0.0}) if status == "ok" else None,
        reason=reason,
        energy=energy if status == "ok" else None,
        **extra,
    )


def kernel(name, backend, dtype, size, gflops, bandwidth, device="cuda1", **options):
    exp = KernelExperiment(name, device, backend, dtype, size)
    metrics = {
        "time": spread(1e-3, "s"),
        "bandwidth": spread(bandwidth, "GB/s"),
        "arithmetic_intensity": value(gflops / bandwidth, "flop/byte"),
    }
    if gflops:
        metrics["gflops"] = spread(gflops, "GFLOP/s")
    return record(exp, metrics=metrics, **options)


def roof(dtype, peak, memory, h2d=None, device="cuda1", **options):
    metrics = {"peak_gflops": spread(peak, "GFLOP/s"), "memory_bandwidth": spread(memory, "GB/s")}
    check = {"passed": True, "relative_error": 0.0}
    if h2d is not None:
        metrics["h2d_bandwidth"] = spread(h2d, "GB/s")
        metrics["d2h_bandwidth"] = spread(h2d * 0.95, "GB/s")
    elif device.startswith("cuda"):  # a roof says why it lacks a ceiling
        check["unmeasured"] = dict.fromkeys(("h2d_bandwidth", "d2h_bandwidth"), "no backend")
    return record(RoofExperiment(device, dtype), metrics=metrics, check=check, **options)


def train(model, precision, seconds, device="cuda1", **options):
    exp = TrainExperiment(model, device, precision, "single", 32)
    return record(exp, metrics={"time_per_batch": spread(seconds, "s")}, **options)


def h100_run(board: str = H100) -> dict[str, dict]:
    """Records of an H100 that passes: roofs near its data sheet (67 TFLOPS FP32, 989.5
    dense FP16, 3,350 GB/s, 64 GB/s each way), kernels under them, tf32 twice fp32."""
    on = {"board": board}
    return dict(
        [
            roof("float32", peak=50_000, memory=3_000, h2d=55, **on),
            roof("float16", peak=700_000, memory=3_000, h2d=55, **on),
            roof("float32", peak=300, memory=20, device="cpu4"),
            kernel("matmul", "cupy", "float32", 2048, gflops=40_000, bandwidth=100, **on),
            kernel("matmul", "torch", "float16", 2048, gflops=500_000, bandwidth=1_200, **on),
            kernel("saxpy", "cupy", "float16", 33554432, gflops=450, bandwidth=2_700, **on),
            kernel("transfer-h2d-pinned", "torch", "float32", 33554432, 0, 50, **on),
            kernel("matmul", "torch", "float32", 2048, gflops=250, bandwidth=1, device="cpu4"),
            train("bert", "fp32", 0.200, **on),
            train("bert", "tf32", 0.090, **on),
            train("bert", "bf16", 0.060, **on),
            train("resnet50", "fp32", 0.300, **on),
            train("resnet50", "tf32", 0.150, **on),
        ]
    )


def planted(tmp_path, run: dict[str, dict]) -> list[str]:
    for path, found in run.items():
        write_record(tmp_path / path, found)
    return list(run)


def findings(verdict) -> list[tuple[str, str]]:
    return [(item.condition, item.path) for item in verdict.findings]


def test_a_gpu_run_that_meets_every_condition_passes(tmp_path):
    verdict = acceptance.evaluate(planted(tmp_path, h100_run()), tmp_path)
    assert verdict.findings == []
    assert verdict.passed and verdict.gpu == H100 and verdict.datasheet.name == "H100 SXM"
    assert (verdict.records, verdict.gpu_records) == (13, 11)
    fractions = verdict.roofs.set_index(["dtype", "roof"])["fraction"]
    assert fractions["float32", "peak_gflops"] == pytest.approx(50_000 / 67_000)
    assert fractions["float16", "peak_gflops"] == pytest.approx(700_000 / 989_500)
    assert fractions["float16", "memory_bandwidth"] == pytest.approx(3_000 / 3_350)
    assert fractions["float32", "h2d_bandwidth"] == pytest.approx(55 / 64)
    assert len(fractions) == 8  # two dtypes x four roofs; the CPU's roof is not judged
    speedups = verdict.tf32.set_index("model")["speedup"]
    assert speedups.to_dict() == pytest.approx({"bert": 0.2 / 0.09, "resnet50": 2.0})
    text = acceptance.render(verdict)
    assert text.startswith("# GPU acceptance: PASSED")
    # The measured roofs line up at the decimal point (one digit after it in the column).
    pad = tables.PUNCTUATION_SPACE + tables.FIGURE_SPACE
    assert (
        f"| float16 | peak\\_gflops | 700,000{pad} | 989,500 | 70.7% | 30.0% to 105.0% | ok |"
        in text
    )


def broken(replacement):
    """An H100 run with one record replaced by `replacement`, (path, record), or deleted
    where the record is None."""
    run = h100_run()
    path, found = replacement
    if found is None:
        del run[path]
    else:
        run[path] = found
    return run, path


BROKEN = {
    "a failed GPU kernel": (
        kernel("matmul", "cupy", "float32", 2048, 0, 1, status="failed", reason="RuntimeError: x"),
        "status",
        "failed: RuntimeError: x",
    ),
    "an unavailable GPU kernel on a board that computes in its dtype": (
        kernel("matmul", "torch", "float16", 2048, 0, 1, status="unavailable", reason="no CUDA"),
        "status",
        "unavailable: no CUDA",
    ),
    "energy too short": (
        kernel(
            "saxpy", "cupy", "float16", 33554432, 450, 2_700, energy=nvml_energy(status="too_short")
        ),
        "energy",
        "energy too_short",
    ),
    "energy of another GPU": (
        kernel(
            "saxpy",
            "cupy",
            "float16",
            33554432,
            450,
            2_700,
            energy=nvml_energy(counters=(f"GPU-{OTHER_UUID}",)),
        ),
        "energy",
        f"NVML measured GPU-{OTHER_UUID} but torch ran on {UUID}",
    ),
    "energy that names no counters": (
        train("bert", "bf16", 0.06, energy={**nvml_energy(), "counters": []}),
        "energy",
        "does not name its counters",
    ),
    "energy by RAPL on a GPU": (
        train("bert", "bf16", 0.06, energy=nvml_energy(("package-0",), method="rapl powercap")),
        "energy",
        "not NVML",
    ),
    "no UUIDs of torch's devices": (
        train("bert", "bf16", 0.06, uuids=()),
        "energy",
        "does not hold the UUIDs",
    ),
    "a record from another board": (
        train("bert", "bf16", 0.06, board="NVIDIA A100-SXM4-80GB"),
        "one_gpu",
        f"measured on NVIDIA A100-SXM4-80GB, the others on {H100}",
    ),
    "a float32 GEMM roof above FP32 (TF32 crept in)": (
        roof("float32", peak=80_000, memory=3_000, h2d=55),
        "roof_plausible",
        "peak_gflops 80,000 is 119.4% of the data sheet's 67,000 (H100 SXM)",
    ),
    "a float16 GEMM roof off the tensor cores": (
        roof("float16", peak=130_000, memory=3_000, h2d=55),
        "roof_plausible",
        "peak_gflops 130,000 is 13.1% of the data sheet's 989,500",
    ),
    "a memory roof at a third of the HBM": (
        roof("float16", peak=700_000, memory=1_000, h2d=55),
        "roof_plausible",
        "memory_bandwidth 1,000 is 29.9% of the data sheet's 3,350",
    ),
    "pageable copies as the host link": (
        roof("float32", peak=50_000, memory=3_000, h2d=10),
        "roof_plausible",
        "h2d_bandwidth 10 is 15.6% of the data sheet's 64",
    ),
    "a GPU roof without its host link": (
        roof("float16", peak=700_000, memory=3_000),
        "roof_plausible",
        "the roof has no h2d_bandwidth",
    ),
    "a GPU kernel above its memory roof": (
        kernel("saxpy", "cupy", "float16", 33554432, 600, 3_600),
        "above_roof",
        "120% of its memory_bandwidth roof",
    ),
    "tf32 no faster than fp32": (
        train("bert", "tf32", 0.195),
        "tf32",
        "1.03x, under 1.1x",
    ),
    "a GPU kernel without its GPU state": (
        kernel("matmul", "cupy", "float32", 2048, 40_000, 100, gpu_state=None),
        "clocks",
        "the record has no GPU state (conditions.gpu_state)",
    ),
    "a GPU roof without its GPU state": (
        roof("float16", peak=700_000, memory=3_000, h2d=55, gpu_state=None),
        "clocks",
        "the record has no GPU state",
    ),
    "a GPU state NVML could not read": (
        train("bert", "bf16", 0.06, gpu_state=NO_NVML),
        "clocks",
        "GPU state unavailable: NVML cannot start: Driver Not Loaded",
    ),
    "the GPU state of another GPU": (
        train("bert", "bf16", 0.06, gpu_state=nvml_gpu_state(gpus=(f"GPU-{OTHER_UUID}",))),
        "clocks",
        f"NVML read GPU-{OTHER_UUID} but torch ran on {UUID}: the clocks are another GPU's",
    ),
    "a kernel on a GPU that throttled itself for heat": (
        kernel(
            "saxpy",
            "cupy",
            "float16",
            33554432,
            450,
            2_700,
            gpu_state=nvml_gpu_state(reasons=("sw_thermal_slowdown",), thermal_s=1.2),
        ),
        "clocks",
        "the GPU slowed itself down during the measurement: sw_thermal_slowdown seen; thermal "
        "throttling for 1.2 s of the 9 s it was busy, SM clock 1755-1980 MHz",
    ),
    "a roof on a GPU its hardware slowed down": (
        roof(
            "float32",
            peak=50_000,
            memory=3_000,
            h2d=55,
            gpu_state=nvml_gpu_state(reasons=("hw_slowdown", "sw_power_cap")),
        ),
        "clocks",
        "the GPU slowed itself down during the float32 roof: hw_slowdown seen, SM clock",
    ),
    "thermal throttling above 1% of the busy time, no reason seen at the readings": (
        train("resnet50", "tf32", 0.15, gpu_state=nvml_gpu_state(thermal_s=0.1)),
        "clocks",
        "thermal throttling for 0.1 s of the 9 s it was busy",
    ),
    "a missing record": (
        ("results/kernels/matmul/cuda1/cupy/float32/n2048.json", None),
        "record",
        "no record",
    ),
}


# A roof set too low also puts the kernels measured above it above their roof; a roof
# without its host link lacks both directions; without torch's UUIDs neither the energy
# nor the clocks can be tied to the GPU.
FOLLOWING = {
    "no UUIDs of torch's devices": {"clocks"},
    "a GPU roof without its host link": {"roof_plausible"},
    "a float16 GEMM roof off the tensor cores": {"above_roof"},
    "a memory roof at a third of the HBM": {"above_roof"},
    "pageable copies as the host link": {"above_roof", "roof_plausible"},
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_each_broken_condition_fails_naming_its_record(tmp_path, case):
    replacement, condition, message = BROKEN[case]
    run, path = broken(replacement)
    paths = planted(tmp_path, run)
    if path not in run:
        paths.append(path)  # the grid has the cell; the run wrote no record
    verdict = acceptance.evaluate(paths, tmp_path)
    assert findings(verdict)[0] == (condition, path)
    assert message in verdict.findings[0].message
    assert {item.condition for item in verdict.findings[1:]} <= FOLLOWING.get(case, set())
    assert not verdict.passed
    assert f"| {markdown_escape(condition)} | {markdown_escape(path)} |" in acceptance.render(
        verdict
    )


def test_a_roof_held_back_by_its_power_cap_passes_with_a_note_of_its_clocks(tmp_path):
    """A GEMM at the tensor cores' rate draws an H100 to its 700 W: the board as designed."""
    capped = nvml_gpu_state(reasons=("sw_power_cap",), power_s=2.1)
    run, path = broken(roof("float16", peak=700_000, memory=3_000, h2d=55, gpu_state=capped))
    verdict = acceptance.evaluate(planted(tmp_path, run), tmp_path)
    assert verdict.passed
    assert [(item.condition, item.path, item.message) for item in verdict.notes] == [
        (
            "clocks",
            path,
            "the GPU throttled during the float16 roof: sw_power_cap for 2.1 s of the 9 s it "
            "was busy, SM clock 1755-1980 MHz (its power limit, not a fault)",
        )
    ]
    assert "sw\\_power\\_cap for 2.1 s" in acceptance.render(verdict)


@pytest.mark.parametrize(
    ("state", "passes"),
    [
        (nvml_gpu_state(thermal_s=0.09), True),  # 1% of the 9 s busy: within the rule
        (nvml_gpu_state(thermal_s=0.1), False),
        (nvml_gpu_state(reasons=("hw_power_brake_slowdown",)), False),
        (nvml_gpu_state(reasons=("gpu_idle", "applications_clocks_setting")), True),
    ],
)
def test_a_gpu_fails_its_clocks_by_heat_or_hardware_slowdown_and_only_so(tmp_path, state, passes):
    run, _ = broken(kernel("matmul", "torch", "float16", 2048, 500_000, 1_200, gpu_state=state))
    verdict = acceptance.evaluate(planted(tmp_path, run), tmp_path)
    assert verdict.passed is passes


def test_a_power_cap_outside_the_roofs_is_neither_a_finding_nor_a_note(tmp_path):
    capped = nvml_gpu_state(reasons=("sw_power_cap",), power_s=8.5)
    run, _ = broken(train("resnet50", "tf32", 0.150, gpu_state=capped))
    verdict = acceptance.evaluate(planted(tmp_path, run), tmp_path)
    assert verdict.passed and not [item for item in verdict.notes if item.condition == "clocks"]


def test_an_unreadable_record_fails_as_a_record(tmp_path):
    paths = planted(tmp_path, h100_run())
    damaged = tmp_path / paths[3]
    damaged.write_text(damaged.read_text()[:80])
    verdict = acceptance.evaluate(paths, tmp_path)
    assert findings(verdict) == [("record", paths[3])]


def test_cpu_records_that_failed_are_no_gpu_finding(tmp_path):
    run = h100_run()
    path, found = kernel(
        "matmul", "torch", "float32", 2048, 0, 1, device="cpu4", status="failed", reason="x"
    )
    run[path] = found
    assert acceptance.evaluate(planted(tmp_path, run), tmp_path).findings == []


def test_a_board_not_in_the_data_sheet_table_cannot_pass(tmp_path):
    verdict = acceptance.evaluate(planted(tmp_path, h100_run("NVIDIA RTX 9999")), tmp_path)
    assert [item.condition for item in verdict.findings] == ["datasheet"]
    assert "NVIDIA RTX 9999 is not in the data-sheet table" in verdict.findings[0].message


def test_without_any_gpu_record_nothing_is_judged_and_the_check_fails(tmp_path):
    run = {path: found for path, found in h100_run().items() if "cpu4" in path}
    verdict = acceptance.evaluate(planted(tmp_path, run), tmp_path)
    assert findings(verdict) == [("datasheet", acceptance.GRID)]
    assert verdict.gpu is None


@pytest.mark.parametrize(
    ("dropped", "message"),
    [
        ("roofs/cuda1/float16", "the grid has no GPU roof in a 16-bit type (float16, bfloat16)"),
        ("roofs/cuda1/float32", "the grid has no GPU roof in float32"),
        ("train/bert/cuda1/tf32", None),
        ("kernels/", "the grid has no GPU kernel"),
    ],
)
def test_a_grid_without_what_a_condition_judges_fails_its_coverage(tmp_path, dropped, message):
    run = {
        path: found for path, found in h100_run().items() if dropped not in path or "cpu" in path
    }
    if dropped.startswith("train"):  # resnet50 still pairs fp32 with tf32: drop that too
        run = {path: found for path, found in run.items() if "tf32" not in path}
        message = "the grid trains no model on the GPU in fp32 and tf32"
    verdict = acceptance.evaluate(planted(tmp_path, run), tmp_path)
    assert findings(verdict) == [("coverage", acceptance.GRID)]
    assert verdict.findings[0].message == message


def test_on_a_v100_tf32_and_bf16_are_rightly_unavailable(tmp_path):
    """Volta has neither (its data sheet gives FP16 tensor cores only): such cells are notes,
    the tf32 speedup is not judged; its float16 roof is held against 125 TFLOPS."""
    v100 = {"board": V100}
    run = dict(
        [
            roof("float32", peak=14_000, memory=800, h2d=12, **v100),
            roof("float16", peak=90_000, memory=800, h2d=12, **v100),
            kernel("matmul", "torch", "float16", 2048, 60_000, 300, **v100),
            kernel(
                "matmul", "torch", "bfloat16", 2048, 0, 1, status="unavailable",
                reason="no bfloat16 before sm_80", **v100,
            ),
            train("bert", "fp32", 0.5, **v100),
            train("bert", "tf32", 0, status="unavailable", reason="no TF32 before sm_80", **v100),
        ]
    )  # fmt: skip
    verdict = acceptance.evaluate(planted(tmp_path, run), tmp_path)
    assert verdict.findings == [] and verdict.datasheet.name == "V100 SXM2"
    notes = {(item.condition, item.message) for item in verdict.notes}
    assert ("status", "V100 SXM2 has no bfloat16: no bfloat16 before sm_80") in notes
    assert ("tf32", "not judged: V100 SXM2 has no TF32 by its data sheet") in notes
    assert any("h2d_bandwidth not judged" in message for _, message in notes)
    judged = verdict.roofs.set_index(["dtype", "roof"])["fraction"]
    assert judged["float16", "peak_gflops"] == pytest.approx(90 / 125)


@pytest.mark.parametrize(
    ("device_name", "board"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 SXM 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2"),
        ("Tesla V100-PCIE-32GB", "V100 PCIe"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA A40", "A40"),
        ("Tesla T4", "T4"),
        ("NVIDIA H100 NVL", None),
        ("NVIDIA H200 NVL", None),
        ("Tesla V100S-PCIE-32GB", None),
        ("NVIDIA L40", None),
    ],
)
def test_cuda_device_names_find_their_board_and_no_other(device_name, board):
    found = gpu_datasheets.datasheet_for(device_name)
    assert (found.name if found else None) == board


def test_every_data_sheet_names_its_source_and_keeps_tensor_rates_above_fp32():
    for sheet in gpu_datasheets.DATASHEETS:
        assert "NVIDIA" in sheet.source and sheet.memory_gbs
        for rate in (sheet.tf32, sheet.fp16, sheet.bf16):
            assert rate is None or sheet.fp32 is None or rate >= sheet.fp32
        if sheet.fp16 is not None:
            assert gpu_datasheets.gemm_peak_gflops(sheet, "float16") == sheet.fp16 * 1e3


# The grid --------------------------------------------------------------------------------


def gpu_grid(*extra, name="gpu.yaml"):
    return grid.expand(workflow_config.load([REPO_ROOT / "config" / name, *extra]))


def test_the_full_gpu_grid_runs_every_kernel_on_every_gpu_backend_in_each_dtype_it_computes():
    expanded = gpu_grid(name="gpu-full.yaml")
    cells = {
        (exp.kernel, exp.backend, exp.dtype)
        for exp in expanded.experiments
        if exp.family == "kernel" and exp.device == "cuda1"
    }
    expected = {
        (name, backend, dtype)
        for name, spec in kernels().items()
        for backend in CUDA_STACK
        if backend in spec.implementations
        for dtype in spec.dtypes(backend)
        if dtype != "float64"
    }
    assert cells == expected
    assert ("saxpy", "cupy", "float16") in cells
    sizes = {}
    for exp in expanded.experiments:
        if exp.family == "kernel" and exp.device == "cuda1":
            sizes.setdefault(exp.kernel, set()).add(exp.size)
    assert all(len(found) == 2 for found in sizes.values())
    assert 2**24 in sizes["fft1d"]
    paths = set(expanded.paths)
    assert "results/kernels/fft1d/cuda1/numba-cuda/float32/n16777216.json" in paths
    assert "results/kernels/saxpy/cuda1/cupy/float32/n33554432.json" in paths


def test_the_full_gpu_grid_has_the_gpu_roofs_the_models_and_the_host_cpu_beside_them():
    expanded = gpu_grid(name="gpu-full.yaml")
    roofs = {(exp.device, exp.dtype) for exp in expanded.experiments if exp.family == "roof"}
    assert {("cuda1", "float32"), ("cuda1", "float16"), ("cpu4", "float32")} <= roofs
    trained = {(exp.model, exp.precision) for exp in expanded.experiments if exp.family == "train"}
    assert trained == {
        (model, precision)
        for model in ("resnet50", "bert")
        for precision in ("fp32", "tf32", "fp16", "bf16")
    }
    assert all(exp.device == "cuda1" for exp in expanded.experiments if exp.family == "train")
    host = {
        exp.kernel
        for exp in expanded.experiments
        if exp.family == "kernel" and exp.device == "cpu4"
    }
    assert host == {name for name, spec in kernels().items() if "cpu" in spec.device_kinds}
    assert not [exp for exp in expanded.experiments if exp.family == "datasci"]
    config = workflow_config.load([REPO_ROOT / "config" / "gpu-full.yaml"])
    assert config["kernels"]["runs"] > 1 and config["train"]["runs"] > 1


def _elements(exp: KernelExperiment) -> int:
    two_dimensional = ("matmul", "mandelbrot", "stencil", "fft2d")
    return exp.size**2 if exp.kernel in two_dimensional else exp.size


HOST_BACKENDS = {"numpy", "numba-parallel", "torch", "jax"}


def test_the_acceptance_grid_sets_every_gpu_cell_beside_the_host_cpus_best_libraries():
    """Every GPU kernel cell has its counterparts on the same host's CPU, on all its cores,
    at the same kernel, dtype and size: so the answer compares the best of each side."""
    kept = [exp for exp in gpu_grid().experiments if exp.family == "kernel"]
    on_gpu = {(exp.kernel, exp.dtype, exp.size) for exp in kept if exp.device == "cuda1"}
    on_host: dict[tuple, set[str]] = {}
    for exp in kept:
        if exp.device == "cpu16":
            on_host.setdefault((exp.kernel, exp.dtype, exp.size), set()).add(exp.backend)
    assert on_gpu == set(on_host)
    for (_, dtype, _), backends in on_host.items():
        # NumPy and Numba have no 16-bit arithmetic: torch is the CPU's 16-bit library.
        assert backends == (HOST_BACKENDS if dtype == "float32" else {"torch"})
    gpu_backends = {exp.backend for exp in kept if exp.device == "cuda1"}
    assert gpu_backends == set(CUDA_STACK)


def test_the_acceptance_grid_spans_four_sizes_from_launch_bound_to_beyond_every_l2_cache():
    """Four kernels at four sizes each, the smallest launch-bound, the largest (but matmul's,
    compute-bound at 2048^2) over every data-sheet GPU's L2 (the L40S's 96 MB: 2^24
    elements of a streaming kernel's three arrays, 4096^2 floats), so a crossover is seen
    between two measured sizes; GEMM in float32 and bfloat16."""
    kept = [exp for exp in gpu_grid().experiments if exp.family == "kernel"]
    sizes: dict[str, set[int]] = {}
    for exp in kept:
        sizes.setdefault(exp.kernel, set()).add(_elements(exp))
    assert len(sizes) >= 4 and all(len(found) >= 4 for found in sizes.values())
    assert all(min(found) <= 128**2 for found in sizes.values())  # launch-bound on a GPU
    assert all(max(found) >= 2**22 for name, found in sizes.items() if name != "matmul")
    gemm = {(exp.backend, exp.dtype) for exp in kept if exp.kernel == "matmul"}
    assert {("torch", "bfloat16"), ("cupy", "float32"), ("numba-cuda", "float32")} <= gemm


def test_the_acceptance_grid_trains_each_model_in_four_precisions_beside_its_cpu_baseline():
    expanded = gpu_grid()
    roofs = {(exp.device, exp.dtype) for exp in expanded.experiments if exp.family == "roof"}
    assert {("cuda1", "float32"), ("cuda1", "bfloat16"), ("cpu16", "float32")} <= roofs
    trained = {
        (exp.model, exp.device, exp.precision, exp.batch)
        for exp in expanded.experiments
        if exp.family == "train"
    }
    models = {model for model, *_ in trained}
    assert {"resnet50", "gpt", "lstm"} == models
    for model in models:
        [batch] = {batch for name, _, _, batch in trained if name == model}
        gpu = {
            precision
            for name, device, precision, _ in trained
            if (name, device) == (model, "cuda1")
        }
        cpu = {
            precision
            for name, device, precision, _ in trained
            if (name, device) == (model, "cpu16")
        }
        assert gpu == {"fp32", "tf32", "bf16", "fp16"} and cpu == {"fp32"}, (model, batch)
    config = workflow_config.load([REPO_ROOT / "config" / "gpu.yaml"])
    assert config["report"]["baseline_device"] == "cpu16"
    assert config["kernels"]["runs"] == config["train"]["runs"] == 3


def test_the_rapids_grid_adds_every_workload_on_the_gpu_and_the_host_cpu():
    expanded = gpu_grid(REPO_ROOT / "config" / "gpu-rapids.yaml")
    cells = {
        (exp.workload, exp.device, exp.backend)
        for exp in expanded.experiments
        if exp.family == "datasci"
    }
    for name, spec in workloads().items():
        libraries = set(spec.implementations)
        on_gpu = {
            backend for backend in libraries if "cuda" in DATASCI_BACKENDS[backend].device_kinds
        }
        assert {(name, "cuda1", backend) for backend in on_gpu} <= cells, name
        assert any((name, "cpu4", backend) in cells for backend in libraries - on_gpu), name
    config = workflow_config.load(
        [REPO_ROOT / "config" / "gpu.yaml", REPO_ROOT / "config" / "gpu-rapids.yaml"]
    )
    assert config["datasci"]["runs"] > 1


def test_the_gpu_grids_backends_are_the_cuda_stack_and_host_backends_only():
    config = workflow_config.load([REPO_ROOT / "config" / "gpu.yaml"])
    on_gpu = [
        name
        for name in config["kernels"]["backends"]
        if "cuda" in backend_catalogue()[name].device_kinds
    ]
    assert set(on_gpu) == set(CUDA_STACK)


@pytest.mark.workflow
def test_the_workflow_plans_the_gpu_grid_with_its_rapids_part(tmp_path):
    workflow = copy_workflow(tmp_path)
    done = snakemake(workflow, "-n", "--configfile", "config/gpu.yaml", "config/gpu-rapids.yaml")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    plan = done.stdout + done.stderr
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", plan.split("Job stats:", 1)[1], re.MULTILINE))
    expanded = gpu_grid(REPO_ROOT / "config" / "gpu-rapids.yaml")
    families = Counter(exp.family for exp in expanded.experiments)
    assert planned_cells(plan) == dict(families)
    assert families["train"] == 15
    # The GPU's cells of one kernel, dtype and size in one job, the CPU's in another.
    assert jobs[grid.group_rule("kernel/cuda/matmul/float32/2048")] == "1"
    assert jobs[grid.group_rule("kernel/cpu/matmul/float32/2048")] == "1"
    assert jobs[grid.group_rule("train/cuda/resnet50/single/16")] == "1"
    assert jobs["roofline"] == jobs["kernel_crossover"] == "1"


@pytest.mark.parametrize("rapids", [False, True])
def test_make_gpu_check_runs_its_steps_with_the_rapids_grid_only_where_rapids_is(tmp_path, rapids):
    env = dict(os.environ)
    if rapids:  # importable stand-ins: the Makefile only asks whether they can be found
        for name in ("cudf", "cuml", "cugraph"):
            (tmp_path / name).mkdir()
            (tmp_path / name / "__init__.py").write_text("")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    done = subprocess.run(
        ["make", "-n", "gpu-check"], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    plan = done.stdout.replace("\\\n", " ")
    steps = [
        "nvidia-smi -L",
        "accelbench doctor | tee results/gpu-check/doctor.txt",
        "snakemake --cores all --configfile config/gpu.yaml",
        "accelbench gpu-check --configfile config/gpu.yaml",
    ]
    assert [plan.index(step) for step in steps] == sorted(plan.index(step) for step in steps)
    assert "pytest" not in plan  # the GPU tests are `make gpu-tests`, a step of their own
    assert "--forceall" in plan  # every experiment, one at a time or in its group, anew
    assert ("config/gpu-rapids.yaml" in plan) is rapids
    if rapids:
        assert "--configfile config/gpu.yaml --configfile config/gpu-rapids.yaml" in plan


# The command -------------------------------------------------------------------------------

SMALL_GPU_GRID = """\
kernels:
  devices: [cuda1]
  backends: [cupy, torch]
  dtypes: [float32, float16]
  sizes: {matmul: [2048], saxpy: [], mandelbrot: [], reduction: [], stencil: [], fft1d: [],
          fft2d: [], transfer-d2d: []}
  overrides: {}
datasci:
  devices: []
train:
  devices: [cuda1]
  precisions: [fp32, tf32]
  strategies: [single]
  batch_sizes: {bert: [32], resnet18: [], fcn: [], lstm: []}
"""


def small_run(tf32_seconds: float) -> dict[str, dict]:
    return dict(
        [
            roof("float32", peak=50_000, memory=3_000, h2d=55),
            roof("float16", peak=700_000, memory=3_000, h2d=55),
            kernel("matmul", "cupy", "float32", 2048, 40_000, 100),
            kernel("matmul", "torch", "float32", 2048, 41_000, 100),
            kernel("matmul", "cupy", "float16", 2048, 500_000, 1_200),
            kernel("matmul", "torch", "float16", 2048, 510_000, 1_200),
            train("bert", "fp32", 0.2),
            train("bert", "tf32", tf32_seconds),
        ]
    )


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A copy of the workflow whose results are the small GPU grid's records, with the
    aggregates a run leaves beside them; accelbench finds it as its workflow."""
    (tmp_path / "checkout").mkdir()
    workflow = copy_workflow(tmp_path / "checkout")
    (workflow / "config" / "small-gpu.yaml").write_text(SMALL_GPU_GRID)
    results = workflow / "results"
    (results / "tables").mkdir(parents=True)
    (results / "tables" / "kernel_time.md").write_text("| kernel |\n")
    (results / "provenance.md").write_text("| Status | ok (8) |\n")
    (results / "gpu-check").mkdir()
    (results / "gpu-check" / "doctor.txt").write_text("torch: ok\n")
    monkeypatch.setenv(workflow_config.WORKFLOW_ENV, str(workflow))
    return workflow


def test_the_command_keeps_a_passing_run_as_the_reference_of_its_gpu(checkout, capsys):
    planted(checkout, small_run(tf32_seconds=0.09))
    code = cli.main(["gpu-check", "--configfile", str(checkout / "config" / "small-gpu.yaml")])
    out, err = capsys.readouterr()
    assert code == 0, out
    assert out.startswith("# GPU acceptance: PASSED")
    kept = checkout / "reference" / "nvidia-h100-80gb-hbm3"
    assert f"reference: {kept}" in err
    records = sorted(str(path.relative_to(kept)) for path in (kept / "records").rglob("*.json"))
    assert records == sorted(f"records/{path.removeprefix('results/')}" for path in small_run(0.09))
    assert (kept / "tables" / "kernel_time.md").read_text() == "| kernel |\n"
    assert (kept / "provenance.md").is_file() and (kept / "gpu-check" / "doctor.txt").is_file()
    verdict = json.loads((kept / "acceptance.json").read_text())
    assert verdict["passed"] and verdict["datasheet"]["name"] == "H100 SXM"
    assert (kept / "acceptance.md").read_text() == out


def test_the_command_fails_with_each_finding_and_replaces_the_old_reference(checkout, capsys):
    planted(checkout, small_run(tf32_seconds=0.09))
    assert cli.main(["gpu-check", "--configfile", str(checkout / "config/small-gpu.yaml")]) == 0
    kept = checkout / "reference" / "nvidia-h100-80gb-hbm3"
    (kept / "stale.txt").write_text("from the run before")
    planted(checkout, small_run(tf32_seconds=0.199))
    capsys.readouterr()
    code = cli.main(["gpu-check", "--configfile", str(checkout / "config/small-gpu.yaml")])
    out, _ = capsys.readouterr()
    assert code == 1
    assert "# GPU acceptance: FAILED (1 findings)" in out
    tf32 = "results/train/bert/cuda1/tf32/single/bs32.json"
    assert f"| tf32 | {markdown_escape(tf32)} |" in out
    assert not (kept / "stale.txt").exists()
    assert not json.loads((kept / "acceptance.json").read_text())["passed"]


def test_the_command_writes_no_reference_when_no_gpu_ran(checkout, capsys):
    code = cli.main(["gpu-check", "--configfile", str(checkout / "config/small-gpu.yaml")])
    _, err = capsys.readouterr()
    assert code == 1
    assert "no GPU ran: no reference written" in err
    assert not (checkout / "reference").exists()


def test_a_reference_folder_is_named_after_its_board():
    assert gpu_check.reference_name("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert gpu_check.reference_name("Tesla V100-SXM2-32GB") == "tesla-v100-sxm2-32gb"


# Redrawing a reference -----------------------------------------------------------------


def reference_folder(tmp_path, run: dict[str, dict]):
    """A committed reference of the small GPU grid: its records, config and verdict."""
    reference = tmp_path / "reference" / "nvidia-h100-80gb-hbm3"
    for path, found in run.items():
        write_record(reference / "records" / os.path.relpath(path, grid.RESULTS_DIR), found)
    (reference / "config.yaml").write_text(SMALL_GPU_GRID)
    (reference / "acceptance.md").write_text("PASSED at its commit\n")
    (reference / "tables").mkdir()
    (reference / "tables" / "kernel_time.md").write_text("drawn by an older version\n")
    return reference


@pytest.mark.workflow
def test_a_reference_is_redrawn_from_its_records_which_stay_as_measured(tmp_path):
    reference = reference_folder(tmp_path, small_run(0.1))
    records = {path: path.read_bytes() for path in (reference / "records").rglob("*.json")}
    replaced = redraw.redraw(reference)
    assert {"tables", "figures", "summary.html", "tidy.csv"} <= set(replaced)
    assert "drawn by an older version" not in (reference / "tables" / "kernel_time.md").read_text()
    assert any((reference / "figures").glob("*.pdf"))
    assert {path: path.read_bytes() for path in (reference / "records").rglob("*.json")} == records
    assert (reference / "acceptance.md").read_text() == "PASSED at its commit\n"
    assert (reference / "config.yaml").read_text() == SMALL_GPU_GRID


def test_a_reference_missing_a_record_is_not_redrawn_and_says_what_it_would_measure(tmp_path):
    run = small_run(0.1)
    reference = reference_folder(
        tmp_path, {path: found for path, found in run.items() if "bert" not in path}
    )
    bert = grid.group_rule("train/cuda/bert/single/32")
    with pytest.raises(redraw.RedrawError, match=f"plans cells it has no record of .1 for {bert}"):
        redraw.redraw(reference)
    assert (reference / "tables" / "kernel_time.md").read_text() == "drawn by an older version\n"

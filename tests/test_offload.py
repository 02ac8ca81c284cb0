"""The offload break-even model against a case worked out by hand, on fixed records.

The case: GEMM in float64, F(n) = 2 n^3 flops, B(n) = 3 n^2 x 8 bytes.
CPU best 100 GFLOP/s (cpu2 numpy; cpu1 reaches 50), GPU 1000 GFLOP/s,
H2D = D2H = 10 GB/s, so W = 10 GB/s, and the GPU's measured end-to-end time
is exactly L + B/W + F/P_GPU with L = 48 us.

    I* = P_CPU P_GPU / (W (P_GPU - P_CPU)) = 100 * 1000 / (10 * 900) = 11.11 flop/byte
    crossover without L: F (1/P_CPU - 1/P_GPU) = B / W
        2 n^3 * 9e-12 = 24 n^2 * 1e-10  ->  n = 2.4e-9 / 1.8e-11 = 133.33
    crossover with L = 48 us: 1.8e-11 n^3 - 2.4e-9 n^2 = 4.8e-5, solved by n = 200
        (1.8e-11 * 8e6 - 2.4e-9 * 4e4 = 1.44e-4 - 0.96e-4 = 4.8e-5)

Measured, best CPU time vs GPU end-to-end time (s):
    n = 64:  5.24e-6 vs 5.84e-5   CPU
    n = 128: 4.19e-5 vs 9.15e-5   CPU
    n = 256: 3.36e-4 vs 2.39e-4   GPU
    n = 512: 2.68e-3 vs 9.45e-4   GPU
so the measured crossover lies between 128 and 256.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from accelbench.analysis import style, tidy
from accelbench.measuring.statistics import rate_from_time, summarize, value
from accelbench.records.record import make_record, write_record
from accelbench.studies.roofline import offload

SIZES = (64, 128, 256, 512)
OVERHEAD = 48e-6
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def flops(n: int) -> float:
    return 2.0 * n**3


def nbytes(n: int) -> float:
    return 24.0 * n**2


def kernel_record(device, backend, n, seconds, end_to_end=None):
    time = summarize([seconds] * 5, "s")
    metrics = {
        "time": time,
        "gflops": rate_from_time(time, flops(n) / 1e9, "GFLOP/s"),
        "bandwidth": rate_from_time(time, nbytes(n) / 1e9, "GB/s"),
        "arithmetic_intensity": value(flops(n) / nbytes(n), "flop/byte"),
    }
    if end_to_end is not None:
        both = summarize([end_to_end] * 5, "s")
        metrics["transfer_time"] = summarize([end_to_end - seconds] * 5, "s")
        metrics["end_to_end_time"] = both
        metrics["end_to_end_gflops"] = rate_from_time(both, flops(n) / 1e9, "GFLOP/s")
    params = {"kernel": "matmul", "device": device, "backend": backend}
    return make_record(
        experiment="kernel",
        experiment_id=f"kernels/matmul/{device}/{backend}/float64/n{n}",
        status="ok",
        params={**params, "dtype": "float64", "size": n},
        metrics=metrics,
        check={"passed": True, "relative_error": 1e-15},
        provenance={},
    )


def roof_record(device="cuda1", dtype="float64", h2d=10.0, d2h=10.0):
    metrics = {
        "peak_gflops": summarize([1000.0] * 5, "GFLOP/s"),
        "memory_bandwidth": summarize([900.0] * 5, "GB/s"),
        "h2d_bandwidth": summarize([h2d] * 5, "GB/s"),
        "d2h_bandwidth": summarize([d2h] * 5, "GB/s"),
    }
    return make_record(
        experiment="roof",
        experiment_id=f"roofs/{device}/{dtype}",
        status="ok",
        params={"device": device, "dtype": dtype},
        metrics=metrics,
        check=None,
        provenance={},
    )


def unavailable_record(n):
    return make_record(
        experiment="kernel",
        experiment_id=f"kernels/matmul/cuda1/cupy/float64/n{n}",
        status="unavailable",
        reason="CuPy is not installed",
        params={"kernel": "matmul", "device": "cuda1", "backend": "cupy", "dtype": "float64"}
        | {"size": n},
        provenance={},
    )


def hand_case(end_to_end: bool = True, roof: bool = True) -> list[dict]:
    records = []
    for n in SIZES:
        records.append(kernel_record("cpu2", "numpy", n, flops(n) / 100e9))
        records.append(kernel_record("cpu1", "numpy", n, flops(n) / 50e9))
        gpu = flops(n) / 1000e9
        total = OVERHEAD + nbytes(n) / 10e9 + gpu if end_to_end else None
        records.append(kernel_record("cuda1", "torch", n, gpu, total))
        records.append(unavailable_record(n))
    if roof:
        records.append(roof_record())
    return records


def collect(tmp_path, records) -> pd.DataFrame:
    """Write the records and read them back through the tidy table, as the workflow does."""
    for record in records:
        write_record(tmp_path / f"{record['id']}.json", record)
    frame, problems = tidy.collect(sorted(tmp_path.glob("**/*.json")))
    assert not problems
    return frame


@pytest.fixture
def frame(tmp_path) -> pd.DataFrame:
    return collect(tmp_path, hand_case())


def test_break_even_of_the_hand_case(frame):
    table = offload.break_even_table(frame)
    assert len(table) == 1
    row = table.iloc[0]
    assert (row["kernel"], row["dtype"], row["gpu_device"]) == ("matmul", "float64", "cuda1")
    assert (row["best_cpu"], row["best_gpu"]) == ("cpu2 numpy", "cuda1 torch")
    assert row["cpu_gflops"] == pytest.approx(100)
    assert row["gpu_gflops"] == pytest.approx(1000)
    assert row["link_gbs"] == pytest.approx(10)
    assert row["overhead_s"] == pytest.approx(OVERHEAD, rel=1e-9)
    assert row["break_even_intensity"] == pytest.approx(100 * 1000 / (10 * 900))
    assert (row["intensity_min"], row["intensity_max"]) == pytest.approx((64 / 12, 512 / 12))
    assert row["predicted_n"] == pytest.approx(200, rel=1e-9)
    assert row["note"] == ""


def test_measured_crossover_of_the_hand_case(frame):
    row = offload.break_even_table(frame).iloc[0]
    assert (row["measured_n_cpu_wins"], row["measured_n_gpu_wins"]) == (128, 256)

    def ratio(n):  # GPU end-to-end over best CPU time
        return (OVERHEAD + nbytes(n) / 10e9 + flops(n) / 1e12) / (flops(n) / 1e11)

    fraction = math.log(ratio(128)) / (math.log(ratio(128)) - math.log(ratio(256)))
    assert row["measured_n"] == pytest.approx(128 * 2**fraction)
    assert row["measured_n"] == pytest.approx(207.43, abs=0.01)


def test_without_end_to_end_times_there_is_no_overhead_and_no_measured_crossover(tmp_path):
    row = offload.break_even_table(collect(tmp_path, hand_case(end_to_end=False))).iloc[0]
    assert row["overhead_s"] == 0
    assert row["predicted_n"] == pytest.approx(2.4e-9 / 1.8e-11)  # 133.33
    assert math.isnan(row["measured_n"])
    assert row["note"] == "no GPU end-to-end time: L = 0, no measured crossover"


def test_without_a_roof_the_row_says_so(tmp_path):
    row = offload.break_even_table(collect(tmp_path, hand_case(roof=False))).iloc[0]
    assert math.isnan(row["break_even_intensity"]) and math.isnan(row["predicted_n"])
    assert row["note"] == "no H2D/D2H bandwidth for cuda1 (roofs experiment): no model"
    assert (row["measured_n_cpu_wins"], row["measured_n_gpu_wins"]) == (128, 256)


def test_roof_of_another_dtype_is_used_when_the_same_is_missing(tmp_path):
    records = [*hand_case(roof=False), roof_record(dtype="float32", h2d=12.0, d2h=6.0)]
    row = offload.break_even_table(collect(tmp_path, records)).iloc[0]
    assert (row["h2d_gbs"], row["d2h_gbs"], row["link_gbs"]) == pytest.approx((12, 6, 8))


@pytest.mark.filterwarnings("error::pandas.errors.PandasChangeWarning")  # later: an error
def test_gpu_records_without_cpu_records(tmp_path):
    records = [record for record in hand_case() if record["params"]["device"] != "cpu2"]
    records = [record for record in records if record["params"]["device"] != "cpu1"]
    numbers = offload.break_even_table(collect(tmp_path, records))
    row = numbers.iloc[0]
    assert row["gpu_gflops"] == pytest.approx(1000) and math.isnan(row["cpu_gflops"])
    assert row["note"] == "no CPU record of this kernel and dtype"
    assert set(offload.display_table(numbers)["Best CPU"]) == {"–"}


def test_intensity_stored_as_a_distribution(frame):
    renamed = frame.rename(columns={"arithmetic_intensity": "arithmetic_intensity_median"})
    row = offload.break_even_table(renamed).iloc[0]
    assert row["predicted_n"] == pytest.approx(200, rel=1e-9)


def test_no_gpu_records_give_an_empty_table_that_says_why(tmp_path):
    frame = collect(tmp_path, [kernel_record("cpu1", "numpy", 64, 1e-5)])
    table = offload.break_even_table(frame)
    assert table.empty and list(table.columns) == list(offload.NUMBER_COLUMNS)
    paths = offload.write_table(table, str(tmp_path / "empty"))
    assert "No kernel ran on a GPU" in paths[0].read_text(encoding="utf-8")
    fig = offload.figure(frame, table)
    assert fig.axes[0].texts[0].get_text() == "no GPU kernel records"


def test_kernel_without_flops_is_not_modelled(tmp_path):
    # The transfer kernel: bytes move, no flop is computed, so there is nothing to offload.
    time = summarize([1e-3] * 5, "s")
    transfer = make_record(
        experiment="kernel",
        experiment_id="kernels/transfer/cuda1/torch/float64/n1024",
        status="ok",
        params={"kernel": "transfer", "device": "cuda1", "backend": "torch", "dtype": "float64"}
        | {"size": 1024},
        metrics={
            "time": time,
            "gflops": rate_from_time(time, 0.0, "GFLOP/s"),
            "arithmetic_intensity": value(0.0, "flop/byte"),
        },
        provenance={},
    )
    table = offload.break_even_table(collect(tmp_path, [*hand_case(), transfer]))
    assert list(table["kernel"]) == ["matmul"]


def test_empty_tidy_table():
    assert offload.break_even_table(pd.DataFrame()).empty


def test_model_when_the_gpu_computes_no_faster():
    model = offload.OffloadModel(cpu_gflops=100, gpu_gflops=80, link_gbs=10)
    assert model.break_even_intensity() == math.inf
    n, note = offload.predicted_crossover(model, flops, nbytes, top=1e6)
    assert math.isnan(n) and note == "model: offload does not pay up to n = 1e+06"


def test_model_that_pays_at_every_size():
    # Constant intensity (saxpy-like) above I* and no fixed cost: no crossover to predict.
    model = offload.OffloadModel(cpu_gflops=10, gpu_gflops=1000, link_gbs=10)
    n, note = offload.predicted_crossover(model, lambda n: 100.0 * n, lambda n: n, top=1e6)
    assert math.isnan(n) and note == "model: offload pays at every size"


def test_speedup_curve_crosses_one_at_the_break_even_intensity():
    model = offload.OffloadModel(cpu_gflops=100, gpu_gflops=1000, link_gbs=10)
    at = model.break_even_intensity()
    assert model.speedup(np.array([at]))[0] == pytest.approx(1.0)
    assert model.speedup(np.array([1e9]))[0] == pytest.approx(10.0)  # compute-bound limit


def test_link_bandwidth_is_the_harmonic_mean():
    assert offload.link_bandwidth(12.0, 6.0) == pytest.approx(8.0)


def test_power_law_is_exact_for_monomials_and_extends_past_the_ends():
    cube = offload.power_law(np.array([64.0, 128.0, 512.0]), np.array([64.0, 128.0, 512.0]) ** 3)
    for n in (2.0, 100.0, 300.0, 4096.0):
        assert cube(n) == pytest.approx(n**3)


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [
        ((2, 2, 2, 2), (8, math.nan, math.nan, "measured: CPU faster up to n = 8")),
        ((0.5, 0.5, 0.5, 0.5), (math.nan, 1, math.nan, "measured: GPU faster from n = 1 on")),
        # A GPU win at n = 2 that does not last does not count.
        ((2, 0.5, 2, 0.5), (4, 8, 4 * 2 ** (math.log(2) / math.log(4)), None)),
    ],
)
def test_measured_crossover_cases(gpu, expected):
    sizes = np.array([1.0, 2.0, 4.0, 8.0])
    result = offload.measured_crossover(sizes, np.ones(4), np.array(gpu, float))
    for got, want in zip(result[:3], expected[:3], strict=True):
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want)
    assert result[3] == expected[3]


def test_table_states_the_assumptions(frame, tmp_path):
    table = offload.break_even_table(frame)
    markdown, latex, csv = (
        path.read_text(encoding="utf-8")
        for path in offload.write_table(table, str(tmp_path / "offload"))
    )
    assert "No overlap of copy and compute" in markdown
    assert "launch" in markdown and "harmonic mean" in markdown
    assert "| matmul | float64 | cuda1 | cpu2 numpy | 100 | 1,000 | 10 | 48 | 11.1 |" in markdown
    assert "| 200 | 207 (128–256) |" in markdown
    assert r"L (\textmu{}s)" in latex and r"\toprule" in latex
    numbers = pd.read_csv(tmp_path / "offload.csv")
    assert numbers.loc[0, "predicted_n"] == pytest.approx(200)


def test_figure_files(frame, tmp_path):
    table = offload.break_even_table(frame)
    fig = offload.figure(frame, table)
    ax = fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlabel() == "Arithmetic intensity (flop/byte)"
    measured = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert len(measured[0].get_xdata()) == len(SIZES)
    pdf, png = style.save(fig, tmp_path / "offload")
    assert pdf.read_bytes().startswith(b"%PDF") and png.read_bytes().startswith(PNG_MAGIC)

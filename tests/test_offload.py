"""The offload break-even model against a case worked out by hand, on fixed records, and
against synthetic GPUs whose copies run slower than the pinned link.

The hand case: GEMM in float64, F(n) = 2 n^3 flops, B(n) = 3 n^2 x 8 bytes.
CPU best 100 GFLOP/s (cpu2 numpy; cpu1 reaches 50), GPU 1000 GFLOP/s; the
kernels' copies take L + B/W with W = 10 GB/s, and so do the roofs' pinned ones
(H2D = D2H = 10 GB/s); the GPU's measured end-to-end time is exactly
L + B/W + F/P_GPU with L = 48 us.

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
so the GPU overtakes the CPU between 128 and 256.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from accelbench.analysis import style, tidy
from accelbench.kernels import kernels
from accelbench.measuring.statistics import rate_from_time, summarize, value
from accelbench.records.record import make_record, validate_record, write_record
from accelbench.studies.roofline import offload

from records import roof_record as roofs_record
from records import scaled, timed_kernel, write_records

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
    # The fit of the copies sets their 48 us latency apart from their rate.
    assert row["link_gbs"] == pytest.approx(10) and row["pinned_link_gbs"] == pytest.approx(10)
    assert row["overhead_s"] == pytest.approx(OVERHEAD, rel=1e-9)
    assert row["break_even_intensity"] == pytest.approx(100 * 1000 / (10 * 900))
    assert (row["intensity_min"], row["intensity_max"]) == pytest.approx((64 / 12, 512 / 12))
    assert row["predicted_n"] == pytest.approx(200, rel=1e-9)
    assert row["pinned_predicted_n"] == pytest.approx(200, rel=1e-9)
    assert (row["sizes_compared"], row["sizes_departing"]) == (4, 0)
    assert row["note"] == "" and row["left_out"] == ""


def test_the_hand_case_is_measured_as_the_answer_measures_it(frame):
    row = offload.break_even_table(frame).iloc[0]
    assert (row["crossover_low"], row["crossover_high"]) == (128, 256)
    assert row["measured"] == (
        "CPU ahead at n=64 and 128, GPU ahead at n=256 and 512: "
        "the GPU overtakes the CPU between n=128 and n=256"
    )


def test_without_end_to_end_times_the_row_is_left_out(tmp_path):
    numbers = offload.break_even_table(collect(tmp_path, hand_case(end_to_end=False)))
    assert numbers.loc[0, "left_out"] == "no GPU end-to-end time (copies in and out)"
    markdown = offload.write_table(numbers, str(tmp_path / "offload"))[0].read_text()
    assert markdown == (
        "No kernel or workload ran on a GPU, with its end-to-end time, and on the CPU of the "
        "same host: no break-even to compute. Left out, with nothing to set the GPU against: "
        "matmul float64 on cuda1: no GPU end-to-end time (copies in and out).\n"
    )


def test_without_a_roof_the_model_of_the_kernels_copies_stands_alone(tmp_path):
    row = offload.break_even_table(collect(tmp_path, hand_case(roof=False))).iloc[0]
    assert row["predicted_n"] == pytest.approx(200, rel=1e-9)
    assert math.isnan(row["pinned_link_gbs"]) and math.isnan(row["pinned_predicted_n"])
    assert row["note"] == "no pinned H2D/D2H bandwidth of cuda1 (roofs experiment)"


def test_roof_of_another_dtype_is_used_when_the_same_is_missing(tmp_path):
    records = [*hand_case(roof=False), roof_record(dtype="float32", h2d=12.0, d2h=6.0)]
    row = offload.break_even_table(collect(tmp_path, records)).iloc[0]
    assert (row["h2d_gbs"], row["d2h_gbs"], row["pinned_link_gbs"]) == pytest.approx((12, 6, 8))


@pytest.mark.filterwarnings("error::pandas.errors.PandasChangeWarning")  # later: an error
def test_gpu_records_without_cpu_records_are_a_note_not_a_row(tmp_path):
    records = [record for record in hand_case() if record["params"]["device"] != "cpu2"]
    records = [record for record in records if record["params"]["device"] != "cpu1"]
    numbers = offload.break_even_table(collect(tmp_path, records))
    assert numbers.loc[0, "left_out"] == "no CPU record of the kernel and dtype on its host"
    assert offload.display_table(numbers).empty
    assert offload.left_out(numbers) == (
        "Left out, with nothing to set the GPU against: "
        "matmul float64 on cuda1: no CPU record of the kernel and dtype on its host."
    )


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
    text = fig.axes[0].texts[0].get_text()
    assert text == "no GPU kernel with its copies timed and a CPU of its host"


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
    assert math.isnan(n) and note == "offload does not pay up to n = 1e+06"


def test_model_that_pays_at_every_size():
    # Constant intensity (saxpy-like) above I* and no fixed cost: no crossover to predict.
    model = offload.OffloadModel(cpu_gflops=10, gpu_gflops=1000, link_gbs=10)
    n, note = offload.predicted_crossover(model, lambda n: 100.0 * n, lambda n: n, top=1e6)
    assert math.isnan(n) and note == "offload pays at every size"


def test_speedup_curve_crosses_one_at_the_break_even_intensity():
    model = offload.OffloadModel(cpu_gflops=100, gpu_gflops=1000, link_gbs=10)
    at = model.break_even_intensity()
    assert model.speedup(np.array([at]))[0] == pytest.approx(1.0)
    assert model.speedup(np.array([1e9]))[0] == pytest.approx(10.0)  # compute-bound limit


def test_link_bandwidth_is_the_harmonic_mean():
    assert offload.link_bandwidth(12.0, 6.0) == pytest.approx(8.0)


def test_the_copies_rate_is_fitted_apart_from_their_latency():
    nbytes = np.array([1e5, 1e6, 1e7, 1e8])
    seconds = 30e-6 + nbytes / 8e9
    assert offload.copy_bandwidth(nbytes, seconds) == pytest.approx(8.0)
    # B/t of the largest size would fold the latency into the rate.
    assert nbytes[-1] / seconds[-1] / 1e9 < 7.99


def test_one_size_of_copies_gives_their_rate_there():
    assert offload.copy_bandwidth(np.array([2e8]), np.array([0.025])) == pytest.approx(8.0)


def test_copies_no_slower_for_more_bytes_give_the_rate_of_the_largest():
    # Small copies, all latency: the fitted slope is not positive.
    nbytes, seconds = np.array([1e3, 2e3, 4e3]), np.array([4e-5, 3e-5, 2e-5])
    assert offload.copy_bandwidth(nbytes, seconds) == pytest.approx(4e3 / 2e-5 / 1e9)


def test_power_law_is_exact_for_monomials_and_extends_past_the_ends():
    cube = offload.power_law(np.array([64.0, 128.0, 512.0]), np.array([64.0, 128.0, 512.0]) ** 3)
    for n in (2.0, 100.0, 300.0, 4096.0):
        assert cube(n) == pytest.approx(n**3)


def test_table_states_the_assumptions(frame, tmp_path):
    table = offload.break_even_table(frame)
    markdown, latex, csv = (
        path.read_text(encoding="utf-8")
        for path in offload.write_table(table, str(tmp_path / "offload"))
    )
    assert "No overlap of copy and compute" in markdown
    assert "launch" in markdown and "harmonic mean" in markdown and "pageable" in markdown
    assert "| matmul | float64 | cuda1 | cpu2 numpy | 100 | 1,000 | 10 | 10 | 48 | 11.1 |" in (
        markdown
    )
    assert "| 200 | 200 |" in markdown
    assert "| GPU overtakes between n=128 and 256 | within the interval at all 4 sizes |" in (
        markdown
    )
    assert (
        "matmul float64 on cuda1: measured, CPU ahead at n=64 and 128, GPU ahead at n=256 "
        "and 512: the GPU overtakes the CPU between n=128 and n=256"
    ) in markdown.splitlines()
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


# A synthetic GPU host, node01 (the host of the records helpers' roofs): matmul in float32
# on its 16 CPUs at 500 GFLOP/s and on its GPU at 20,000 GFLOP/s, each call 30 us of launch
# and copy latency, the copies from pageable memory at 10 GB/s, a quarter of the pinned
# link (the roof: 60 GB/s in, 30 GB/s out, 40 GB/s for bytes split evenly).
HOST = "node01"
GEMM_SIZES = (256, 512, 1024, 2048)
LATENCY = 30e-6
PAGEABLE_GBS = 10.0
PINNED_GBS = 40.0
# The helpers' samples run 1% apart from the time given: their median is this much above it.
MEDIAN = float(np.median(scaled(1.0, 1.0)))


def gemm(n: int) -> tuple[float, float]:
    """(flops, bytes) of matmul in float32."""
    spec = kernels()["matmul"]
    return spec.flops(n), spec.bytes_moved(n, 4)


def with_intensity(made):
    """A float32 record of the helpers with its kernel's arithmetic intensity, as measured
    ones have."""
    exp_id, record = made
    params = record["params"]
    spec = kernels()[params["kernel"]]
    intensity = spec.flops(params["size"]) / spec.bytes_moved(params["size"], 4)
    record["metrics"]["arithmetic_intensity"] = value(intensity, "flop/byte")
    validate_record(record)
    return exp_id, record


def synthetic_gpu(kernel_seconds=None, sizes=GEMM_SIZES, gpu=HOST, cpu=HOST):
    """The synthetic host's records; `kernel_seconds` {n: s} slows the GPU's kernel there."""
    kernel_seconds = kernel_seconds or {}
    records = []
    for n in sizes:
        flops_n, bytes_n = gemm(n)
        on_gpu = kernel_seconds.get(n, flops_n / 20e12)
        copies = LATENCY + bytes_n / (PAGEABLE_GBS * 1e9)
        records += [
            timed_kernel("matmul", "cpu16", "numpy", n, flops_n / 500e9, host=cpu),
            timed_kernel("matmul", "cuda1", "torch", n, on_gpu, on_gpu + copies, host=gpu),
        ]
    records = [with_intensity(made) for made in records]
    return [*records, roofs_record("cuda1", host_copy=60.0)]


def synthetic(tmp_path, records) -> pd.DataFrame:
    frame, problems = tidy.collect(write_records(tmp_path, records))
    assert problems == []
    return frame


def row_of(frame) -> pd.Series:
    return offload.break_even_table(frame).set_index("kernel").loc["matmul"]


def test_the_model_of_the_kernels_pageable_copies_predicts_their_end_to_end_times(tmp_path):
    frame = synthetic(tmp_path, synthetic_gpu())
    row = row_of(frame)
    assert row["link_gbs"] == pytest.approx(PAGEABLE_GBS / MEDIAN)
    assert row["pinned_link_gbs"] == pytest.approx(PINNED_GBS / MEDIAN)
    assert row["overhead_s"] == pytest.approx(LATENCY * MEDIAN)
    model = offload.OffloadModel(
        row["cpu_gflops"], row["gpu_gflops"], row["link_gbs"], row["overhead_s"]
    )
    rows = offload.kernel_rows(frame)
    cells = offload.compared_cells(frame, "cuda1")
    sizes = offload.measured_sizes(
        cells, rows, {"kernel": "matmul", "dtype": "float32"}, HOST, model
    )
    assert list(sizes["size"]) == list(GEMM_SIZES)
    assert sizes["modelled_s"].to_numpy() == pytest.approx(sizes["measured_s"].to_numpy())
    assert sizes["departure"].isna().all() and row["sizes_departing"] == 0
    assert row["departures"] == "" and row["note"] == ""


def test_the_pinned_link_would_have_predicted_copies_these_kernels_never_made(tmp_path):
    row = row_of(synthetic(tmp_path, synthetic_gpu()))
    pinned = offload.OffloadModel(
        row["cpu_gflops"], row["gpu_gflops"], row["pinned_link_gbs"], row["overhead_s"]
    )
    flops_n, bytes_n = gemm(2048)
    measured = MEDIAN * (LATENCY + bytes_n / (PAGEABLE_GBS * 1e9) + flops_n / 20e12)
    assert pinned.gpu_time(flops_n, bytes_n) < measured / 2
    # Pinned copies would move the break-even to lower intensity and the crossover below
    # n = 256, where these kernels' copies leave the CPU ahead.
    assert row["pinned_break_even_intensity"] == pytest.approx(row["break_even_intensity"] / 4)
    assert row["pinned_predicted_n"] < 256 < row["predicted_n"] < 512


def test_the_table_shows_the_pinned_link_beside_the_kernels_copies(tmp_path):
    frame = synthetic(tmp_path, synthetic_gpu())
    numbers = offload.break_even_table(frame)
    display = offload.display_table(numbers).iloc[0]
    assert display["W, these copies (GB/s)"] == f"{PAGEABLE_GBS / MEDIAN:.3g}"
    assert display["W, pinned (GB/s)"] == f"{PINNED_GBS / MEDIAN:.3g}"
    assert display["Model against measured"] == "within the interval at all 4 sizes"
    fig = offload.figure(frame, numbers)
    styles = {line.get_linestyle() for line in fig.axes[0].get_lines()}
    assert {"-", "--", ":"} <= styles  # the kernels' copies, pinned ones, I*
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    assert "model, the kernels' copies (L = 0)" in labels
    assert "model, pinned copies (L = 0)" in labels


def test_a_measured_point_beyond_the_models_interval_is_named_with_why(tmp_path):
    # At n = 256 the GPU's kernel takes 200 us: 168 GFLOP/s, far from saturated.
    frame = synthetic(tmp_path, synthetic_gpu({256: 2e-4}))
    numbers = offload.break_even_table(frame)
    row = numbers.iloc[0]
    flops_n, bytes_n = gemm(256)
    copies = LATENCY + bytes_n / (PAGEABLE_GBS * 1e9)
    factor = (copies + 2e-4) / (copies + flops_n / 20e12)
    assert f"{factor:.3g}" == "2.8"
    assert row["sizes_departing"] == 1 and row["departures"] == "2.8x slower at n = 256"
    assert row["note"] == (
        "measured 2.8x slower than the model at n = 256 (323 µs against 115 µs, outside the "
        "measured interval): the kernel alone runs at 161 GFLOP/s there, not P_GPU = 19,139"
    )
    display = offload.display_table(numbers).iloc[0]
    assert display["Model against measured"] == "2.8x slower at n = 256"
    fig = offload.figure(frame, numbers)
    assert [text.get_text() for text in fig.axes[0].texts] == ["2.8x slower"]


def test_rows_without_a_cpu_counterpart_on_their_host_are_one_note(tmp_path):
    records = [
        *synthetic_gpu(),
        # saxpy: its CPU measured on another host; reduction: no CPU at all; stencil: no
        # end-to-end time on the GPU.
        with_intensity(timed_kernel("saxpy", "cuda1", "torch", 2**20, 1e-4, 2e-3, host=HOST)),
        with_intensity(timed_kernel("saxpy", "cpu16", "numpy", 2**20, 1e-3, host="node02")),
        with_intensity(timed_kernel("reduction", "cuda1", "torch", 2**20, 1e-4, 1e-3, host=HOST)),
        with_intensity(timed_kernel("stencil", "cuda1", "torch", 1024, 1e-4, host=HOST)),
        with_intensity(timed_kernel("stencil", "cpu16", "numpy", 1024, 1e-3, host=HOST)),
    ]
    numbers = offload.break_even_table(synthetic(tmp_path, records))
    markdown = offload.write_table(numbers, str(tmp_path / "offload"))[0].read_text()
    assert [line.split(" | ")[0] for line in markdown.splitlines() if line.startswith("| ")][
        1:
    ] == ["| matmul"]
    assert "| – | – | – |" not in markdown
    assert (
        "Left out, with nothing to set the GPU against: reduction float32 on cuda1: no CPU "
        "record of the kernel and dtype on its host; saxpy float32 on cuda1: its CPU records "
        "are of another host (node02); stencil float32 on cuda1: no GPU end-to-end time "
        "(copies in and out)."
    ) in markdown.splitlines()


def test_records_of_different_hosts_are_never_paired(tmp_path):
    # The CPU records on node02, the GPU's on node01: nothing measured on one machine.
    numbers = offload.break_even_table(synthetic(tmp_path, synthetic_gpu(cpu="node02")))
    assert list(numbers["left_out"]) == ["its CPU records are of another host (node02)"]


def test_the_measured_crossover_is_named_only_where_two_sizes_bracket_it(tmp_path):
    row = row_of(synthetic(tmp_path / "all", synthetic_gpu()))
    assert (row["crossover_low"], row["crossover_high"]) == (256, 512)
    assert row["measured"] == (
        "CPU ahead at n=256, GPU ahead at the 3 sizes from n=512 to n=2048: "
        "the GPU overtakes the CPU between n=256 and n=512"
    )
    ahead = row_of(synthetic(tmp_path / "ahead", synthetic_gpu(sizes=(512, 1024, 2048))))
    assert math.isnan(ahead["crossover_low"]) and math.isnan(ahead["crossover_high"])
    assert ahead["measured"] == "GPU ahead at all 3 sizes measured, from n=512 to n=2048"


def test_rows_of_several_hosts_each_name_their_host(tmp_path):
    # A record's id names no host: the other host measured other sizes, and no roofs.
    other = synthetic_gpu(sizes=(3072, 4096), gpu="node03", cpu="node03")
    records = [*synthetic_gpu(), *(made for made in other if made[0].startswith("kernels/"))]
    frame = synthetic(tmp_path, records)
    numbers = offload.break_even_table(frame)
    assert list(offload.display_table(numbers)["GPU"]) == ["cuda1 (node01)", "cuda1 (node03)"]
    assert numbers["pinned_link_gbs"].notna().tolist() == [True, False]
    assert numbers["sizes_compared"].tolist() == [4, 2]
    assert (numbers["sizes_departing"] == 0).all()
    plt.close(offload.figure(frame, numbers))

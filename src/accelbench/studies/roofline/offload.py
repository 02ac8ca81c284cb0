"""Does offloading a kernel to the GPU pay once the copy is paid? A model and the measurement.

Model (per kernel, dtype and GPU device), with F(n) flops and B(n) bytes that
cross the host<->device link for problem size n:

    t_CPU(n) = F / P_CPU
    t_GPU(n) = L + B / W + F / P_GPU        (copy and compute do not overlap)

Offloading pays when t_GPU < t_CPU. For large problems (L negligible) that is
when the arithmetic intensity I = F / B exceeds

    I* = P_CPU * P_GPU / (W * (P_GPU - P_CPU)),

and never when P_GPU <= P_CPU. With L, the predicted crossover size is the
smallest n with t_GPU(n) < t_CPU(n). The measured crossover is where the GPU's
measured end-to-end time (copies included) falls below the best measured CPU
time and stays below for every larger measured size. ASSUMPTIONS states every
simplification; it goes into the table notes.

Everything comes from the tidy table: kernel records (gflops, time,
arithmetic_intensity, end_to_end_time) and the roofs records of the GPU
(h2d_bandwidth, d2h_bandwidth); nothing is re-measured.

Data science workloads (pandas/cuDF, scikit-learn/cuML, networkx/cuGraph)
declare no flop count, so the model does not apply to them; their rows give
the measured crossover alone, from the same times (the CPU's best median time
against the GPU's best median end-to-end time, copies included).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from accelbench.analysis import plain_tables, style
from accelbench.platform.devices import names_a_gpu

ASSUMPTIONS = (
    "Model: t_CPU = F/P_CPU; t_GPU = L + B/W + F/P_GPU; offload pays when t_GPU < t_CPU.",
    "No overlap of copy and compute: the inputs are copied to the GPU, the kernel runs, "
    "the output is copied back, one after the other (no streams, no pipelining).",
    "B = the kernel's declared minimum bytes moved (F / arithmetic intensity): inputs and "
    "output cross the link exactly once; data start and end on the host; the CPU copies nothing.",
    "W = harmonic mean of the measured H2D and D2H bandwidths (roofs experiment), i.e. "
    "bytes split evenly between the two directions.",
    "P_CPU, P_GPU = the best measured median throughput of the kernel (over backends, sizes "
    "and, for the CPU, thread counts), taken as constant in n: a saturated device.",
    "L = fixed cost per call (kernel launch, synchronisation, copy latency): the smallest "
    "residual of the measured GPU end-to-end times over the model without L, at least 0; "
    "0 where no end-to-end time was measured. The break-even intensity I* ignores L "
    "(large-problem limit); the predicted crossover size includes it.",
    "F(n) and B(n) between and beyond the measured sizes follow a power law through the "
    "neighbouring measured sizes (exact for n^2, n^3 counts).",
)
SEARCH_SPAN = 1000.0  # the predicted crossover is searched up to this factor above the largest n
NUMBER_COLUMNS = (
    "experiment",
    "kernel",
    "dtype",
    "gpu_device",
    "best_cpu",
    "cpu_gflops",
    "best_gpu",
    "gpu_gflops",
    "h2d_gbs",
    "d2h_gbs",
    "link_gbs",
    "overhead_s",
    "break_even_intensity",
    "intensity_min",
    "intensity_max",
    "predicted_n",
    "measured_n_cpu_wins",
    "measured_n_gpu_wins",
    "measured_n",
    "note",
)


@dataclass(frozen=True)
class OffloadModel:
    cpu_gflops: float  # P_CPU, GFLOP/s
    gpu_gflops: float  # P_GPU, GFLOP/s
    link_gbs: float  # W, GB/s
    overhead_s: float = 0.0  # L, s

    def break_even_intensity(self) -> float:
        """I* in flop/byte; inf when the GPU computes no faster than the CPU."""
        if self.gpu_gflops <= self.cpu_gflops:
            return math.inf
        return (
            self.cpu_gflops
            * self.gpu_gflops
            / (self.link_gbs * (self.gpu_gflops - self.cpu_gflops))
        )

    def cpu_time(self, flops: float) -> float:
        return flops / (self.cpu_gflops * 1e9)

    def gpu_time(self, flops: float, nbytes: float) -> float:
        return self.overhead_s + nbytes / (self.link_gbs * 1e9) + flops / (self.gpu_gflops * 1e9)

    def speedup(self, intensity: np.ndarray) -> np.ndarray:
        """t_CPU / t_GPU as a function of intensity alone (L = 0)."""
        return 1.0 / (
            self.cpu_gflops / self.gpu_gflops + self.cpu_gflops / (intensity * self.link_gbs)
        )


def link_bandwidth(h2d_gbs: float, d2h_gbs: float) -> float:
    """Effective link bandwidth for bytes split evenly between directions (harmonic mean)."""
    return 2.0 / (1.0 / h2d_gbs + 1.0 / d2h_gbs)


def power_law(sizes: np.ndarray, values: np.ndarray) -> Callable[[float], float]:
    """Piecewise power law through (size, value) points, extended by the end segments."""
    order = np.argsort(sizes)
    x, y = np.log(np.asarray(sizes, float)[order]), np.log(np.asarray(values, float)[order])

    def at(n: float) -> float:
        i = int(np.clip(np.searchsorted(x, math.log(n)) - 1, 0, len(x) - 2))
        slope = (y[i + 1] - y[i]) / (x[i + 1] - x[i])
        return math.exp(y[i] + slope * (math.log(n) - x[i]))

    return at


def predicted_crossover(
    model: OffloadModel,
    flops: Callable[[float], float],
    nbytes: Callable[[float], float],
    top: float,
) -> tuple[float, str | None]:
    """(smallest n in [1, top] where the model's GPU time is below its CPU time, note).

    NaN with a note when the model says offloading never pays in that range, or
    always (then there is no crossover to predict).
    """

    def gain(n: float) -> float:
        return model.cpu_time(flops(n)) - model.gpu_time(flops(n), nbytes(n))

    grid = np.geomspace(1.0, top, 2001)
    pays = np.array([gain(n) > 0 for n in grid])
    if pays[0]:
        return math.nan, "model: offload pays at every size"
    if not pays.any():
        return math.nan, f"model: offload does not pay up to n = {top:.3g}"
    first = int(np.argmax(pays))
    low, high = math.log(grid[first - 1]), math.log(grid[first])
    for _ in range(60):  # bisection in log n
        middle = 0.5 * (low + high)
        low, high = (middle, high) if gain(math.exp(middle)) <= 0 else (low, middle)
    return math.exp(high), None


def measured_crossover(
    sizes: np.ndarray, cpu_times: np.ndarray, gpu_times: np.ndarray
) -> tuple[float, float, float, str | None]:
    """(last size the CPU wins, first size from which the GPU always wins, interpolated n, note).

    The interpolated n is where the ratio GPU/CPU time, interpolated linearly in
    log-log between those two sizes, crosses 1.
    """
    order = np.argsort(sizes)
    sizes, cpu_times, gpu_times = sizes[order], cpu_times[order], gpu_times[order]
    wins = gpu_times < cpu_times
    first = len(wins)
    while first > 0 and wins[first - 1]:
        first -= 1
    if first == len(wins):
        return sizes[-1], math.nan, math.nan, f"measured: CPU faster up to n = {sizes[-1]:g}"
    if first == 0:
        return math.nan, sizes[0], math.nan, f"measured: GPU faster from n = {sizes[0]:g} on"
    a, b = first - 1, first
    ratio_a = math.log(gpu_times[a] / cpu_times[a])
    ratio_b = math.log(gpu_times[b] / cpu_times[b])
    fraction = ratio_a / (ratio_a - ratio_b)
    n = math.exp(math.log(sizes[a]) + fraction * (math.log(sizes[b]) - math.log(sizes[a])))
    return sizes[a], sizes[b], n, None


def _intensity(rows: pd.DataFrame) -> pd.Series:
    """Arithmetic intensity, stored as a plain value or as a distribution (its median)."""
    column = "arithmetic_intensity"
    return rows[column] if column in rows else rows[f"{column}_median"]


def kernel_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Kernel records that ran and compute, with F (flops), B (bytes) and whether on a GPU."""
    needed = ["kernel", "device", "backend", "dtype", "size", "gflops_median", "time_median"]
    if frame.empty or not set(needed) <= set(frame.columns):
        return pd.DataFrame(columns=[*needed, "flops", "bytes", "gpu", "end_to_end_time_median"])
    rows = frame[(frame["experiment"] == "kernel") & (frame["status"] == "ok")].copy()
    rows["flops"] = rows["gflops_median"].astype(float) * rows["time_median"].astype(float) * 1e9
    rows["bytes"] = rows["flops"] / _intensity(rows).astype(float)
    rows["gpu"] = rows["device"].map(names_a_gpu).astype(bool)
    if "end_to_end_time_median" not in rows:
        rows["end_to_end_time_median"] = math.nan
    # A kernel without flops (the transfer kernel) has nothing to offload.
    return rows[(rows["flops"] > 0) & np.isfinite(rows["bytes"]) & (rows["bytes"] > 0)]


def _roof(frame: pd.DataFrame, device: str, dtype: str) -> tuple[float, float]:
    """(H2D, D2H) GB/s of the GPU's roofs record, the same dtype's where there is one."""
    columns = ("h2d_bandwidth_median", "d2h_bandwidth_median")
    if not set(columns) <= set(frame.columns):
        return math.nan, math.nan
    roofs = frame[
        (frame["experiment"] == "roof") & (frame["status"] == "ok") & (frame["device"] == device)
    ].dropna(subset=list(columns))
    if roofs.empty:
        return math.nan, math.nan
    same = roofs[roofs["dtype"] == dtype] if "dtype" in roofs else roofs
    row = (same if not same.empty else roofs).iloc[0]
    return float(row[columns[0]]), float(row[columns[1]])


def _best(rows: pd.DataFrame, column: str) -> tuple[float, str]:
    """The largest value of `column` and the device and backend that reached it."""
    best = rows.loc[rows[column].astype(float).idxmax()]
    return float(best[column]), f"{best['device']} {best['backend']}"


def _measured(cpu: pd.DataFrame, timed: pd.DataFrame) -> tuple[dict[str, float], list[str]]:
    """The measured crossover: best CPU time against the GPU's best end-to-end time."""
    if timed.empty:
        return {}, ["no GPU end-to-end time: L = 0, no measured crossover"]
    cpu_best = cpu.groupby("size")["time_median"].min()
    gpu_best = timed.groupby("size")["end_to_end_time_median"].min()
    both = cpu_best.index.intersection(gpu_best.index)
    if both.empty:
        return {}, ["no size measured on both CPU and GPU"]
    low, high, n, note = measured_crossover(
        both.to_numpy(float), cpu_best[both].to_numpy(float), gpu_best[both].to_numpy(float)
    )
    numbers = {"measured_n_cpu_wins": low, "measured_n_gpu_wins": high, "measured_n": n}
    return numbers, [note] if note else []


def _modelled(
    rows: pd.DataFrame, timed: pd.DataFrame, cpu_gflops: float, gpu_gflops: float, link: float
) -> tuple[dict[str, float], list[str]]:
    """L from the end-to-end residuals, I*, and the predicted crossover size."""
    free = OffloadModel(cpu_gflops, gpu_gflops, link)
    residuals = [
        row.end_to_end_time_median - free.gpu_time(row.flops, row.bytes)
        for row in timed.itertuples()
    ]
    model = OffloadModel(cpu_gflops, gpu_gflops, link, max([0.0, min(residuals, default=0.0)]))
    numbers = {
        "link_gbs": link,
        "overhead_s": model.overhead_s,
        "break_even_intensity": model.break_even_intensity(),
    }
    counts = rows.groupby("size")[["flops", "bytes"]].median()
    if len(counts) < 2:
        return numbers, ["one size only: no power law for F(n), B(n)"]
    sizes = counts.index.to_numpy(float)
    numbers["predicted_n"], note = predicted_crossover(
        model,
        power_law(sizes, counts["flops"].to_numpy()),
        power_law(sizes, counts["bytes"].to_numpy()),
        top=SEARCH_SPAN * sizes.max(),
    )
    return numbers, [note] if note else []


def _analyse(frame: pd.DataFrame, rows: pd.DataFrame, gpu_device: str) -> dict[str, float | str]:
    """One kernel, dtype and GPU device -> its row of the break-even table."""
    kernel, dtype = rows["kernel"].iloc[0], rows["dtype"].iloc[0]
    cpu, gpu = rows[~rows["gpu"]], rows[rows["device"] == gpu_device]
    intensity = _intensity(rows).astype(float)
    h2d, d2h = _roof(frame, gpu_device, dtype)
    gpu_gflops, best_gpu = _best(gpu, "gflops_median")
    result: dict[str, float | str] = dict.fromkeys(NUMBER_COLUMNS, math.nan)
    result.update(
        experiment="kernel",
        kernel=kernel,
        dtype=dtype,
        gpu_device=gpu_device,
        best_gpu=best_gpu,
        gpu_gflops=gpu_gflops,
        h2d_gbs=h2d,
        d2h_gbs=d2h,
        intensity_min=float(intensity.min()),
        intensity_max=float(intensity.max()),
    )
    if cpu.empty:
        return {**result, "note": "no CPU record of this kernel and dtype"}
    cpu_gflops, best_cpu = _best(cpu, "gflops_median")
    result.update(best_cpu=best_cpu, cpu_gflops=cpu_gflops)
    timed = gpu.dropna(subset=["end_to_end_time_median"])
    measured, notes = _measured(cpu, timed)
    result.update(measured)
    if math.isfinite(h2d + d2h):
        modelled, model_notes = _modelled(
            rows, timed, cpu_gflops, gpu_gflops, link_bandwidth(h2d, d2h)
        )
        result.update(modelled)
        notes = model_notes + notes
    else:
        notes.insert(0, f"no H2D/D2H bandwidth for {gpu_device} (roofs experiment): no model")
    return {**result, "note": "; ".join(notes)}


def datasci_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Data science records that ran, with whether on a GPU."""
    needed = ["workload", "device", "backend", "size", "time_median"]
    if frame.empty or not set(needed) <= set(frame.columns):
        return pd.DataFrame(columns=[*needed, "gpu", "end_to_end_time_median"])
    rows = frame[(frame["experiment"] == "datasci") & (frame["status"] == "ok")].copy()
    rows["gpu"] = rows["device"].map(names_a_gpu).astype(bool)
    if "end_to_end_time_median" not in rows:
        rows["end_to_end_time_median"] = math.nan
    return rows


def _fastest(rows: pd.DataFrame) -> str:
    """The device and library of the smallest median time in `rows`."""
    best = rows.loc[rows["time_median"].astype(float).idxmin()]
    return f"{best['device']} {best['backend']}"


def _analyse_measured(rows: pd.DataFrame, gpu_device: str) -> dict[str, float | str]:
    """One data science workload and GPU device -> its row: the measured crossover only."""
    cpu, gpu = rows[~rows["gpu"]], rows[rows["device"] == gpu_device]
    result: dict[str, float | str] = dict.fromkeys(NUMBER_COLUMNS, math.nan)
    result.update(
        experiment="datasci",
        kernel=rows["workload"].iloc[0],
        dtype="–",
        gpu_device=gpu_device,
        best_gpu=_fastest(gpu),
    )
    notes = ["no flop count: the model does not apply, measured crossover only"]
    if cpu.empty:
        return {**result, "note": "; ".join([*notes, "no CPU record of this workload"])}
    result["best_cpu"] = _fastest(cpu)
    measured, found = _measured(cpu, gpu.dropna(subset=["end_to_end_time_median"]))
    result.update(measured)
    return {**result, "note": "; ".join(notes + found)}


def break_even_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (kernel, dtype, GPU device) and per (data science workload, GPU device)
    with a GPU record: the numbers in NUMBER_COLUMNS."""
    rows = kernel_rows(frame)
    results = [
        _analyse(frame, group, gpu_device)
        for (_, _), group in rows.groupby(["kernel", "dtype"], sort=True)
        for gpu_device in sorted(set(group.loc[group["gpu"], "device"]))
    ]
    datasci = datasci_rows(frame)
    results += [
        _analyse_measured(group, gpu_device)
        for _, group in datasci.groupby("workload", sort=True)
        for gpu_device in sorted(set(group.loc[group["gpu"], "device"]))
    ]
    return pd.DataFrame(results, columns=list(NUMBER_COLUMNS))


def _number(value: float) -> str:
    if not math.isfinite(value):
        return "∞" if value == math.inf else "–"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _size_cell(row: pd.Series) -> str:
    low, high, n = row["measured_n_cpu_wins"], row["measured_n_gpu_wins"], row["measured_n"]
    if math.isfinite(n):
        return f"{_number(n)} ({_number(low)}–{_number(high)})"
    if math.isfinite(high):
        return f"≤ {_number(high)}"
    if math.isfinite(low):
        return f"> {_number(low)}"
    return "–"


def display_table(numbers: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "Kernel": numbers["kernel"],
            "dtype": numbers["dtype"],
            "GPU": numbers["gpu_device"],
            # No CPU record in any row leaves the column float, NaN only.
            "Best CPU": numbers["best_cpu"].astype(object).fillna("–"),
            "P_CPU (GFLOP/s)": numbers["cpu_gflops"].map(_number),
            "P_GPU (GFLOP/s)": numbers["gpu_gflops"].map(_number),
            "W (GB/s)": numbers["link_gbs"].map(_number),
            "L (µs)": (numbers["overhead_s"] * 1e6).map(_number),
            "I* (flop/B)": numbers["break_even_intensity"].map(_number),
            "I measured (flop/B)": [
                f"{_number(low)}–{_number(high)}"
                for low, high in zip(
                    numbers["intensity_min"], numbers["intensity_max"], strict=True
                )
            ],
            "Predicted n*": numbers["predicted_n"].map(_number),
            "Measured n* (bracket)": [_size_cell(row) for _, row in numbers.iterrows()],
        }
    )


def write_table(numbers: pd.DataFrame, stem: str) -> list:
    caption = (
        "Offload break-even: minimum arithmetic intensity I* at which the GPU pays once the "
        "copies are paid, and the crossover problem size n*, predicted and measured"
    )
    notes = list(ASSUMPTIONS)
    notes.append(
        "Measured n*: where the GPU's median end-to-end time (copies included) falls below "
        "the best CPU median time and stays below at every larger measured size; interpolated "
        "in log-log, with the measured sizes around it in parentheses."
    )
    notes += [
        f"{row.kernel} {row.dtype} on {row.gpu_device}: {row.note}"
        for row in numbers.itertuples()
        if row.note
    ]
    if numbers.empty:
        notes = ["No kernel ran on a GPU: no break-even to compute."]
    display = display_table(numbers)
    # Kernel, dtype and GPU name a row: the LaTeX parts that fit the page repeat them.
    return plain_tables.write(display, numbers, caption, notes, stem, text_columns=4, key_columns=3)


def figure(frame: pd.DataFrame, numbers: pd.DataFrame) -> Figure:
    """Speedup of offloading (t_CPU / t_GPU, copies included) against arithmetic intensity:
    the model's curve per kernel (L = 0), the measured sizes as points, I* dotted."""
    style.apply()
    fig = Figure(figsize=(style.SINGLE_COLUMN, style.PANEL_HEIGHT + 0.6), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlabel("Arithmetic intensity (flop/byte)")
    ax.set_ylabel("Offload speedup t_CPU / t_GPU")
    # Only kernels have a model curve (data science workloads declare no flop count).
    usable = numbers[numbers["experiment"] == "kernel"].dropna(
        subset=["link_gbs", "cpu_gflops", "gpu_gflops"]
    )
    if usable.empty:
        style.no_data(ax, "no GPU kernel records")
        return fig
    rows = kernel_rows(frame)
    colors = style.colors(len(usable))
    handles = []
    for color, row in zip(colors, usable.itertuples(), strict=True):
        model = OffloadModel(row.cpu_gflops, row.gpu_gflops, row.link_gbs)
        intensity = np.geomspace(row.intensity_min / 10, row.intensity_max * 10, 200)
        ax.plot(intensity, model.speedup(intensity), color=color)
        if math.isfinite(row.break_even_intensity):
            ax.axvline(row.break_even_intensity, color=color, linestyle=":", linewidth=0.8)
        group = rows[(rows["kernel"] == row.kernel) & (rows["dtype"] == row.dtype)]
        cpu_best = group[~group["gpu"]].groupby("size")["time_median"].min()
        gpu = group[group["device"] == row.gpu_device].dropna(subset=["end_to_end_time_median"])
        gpu_best = gpu.groupby("size")["end_to_end_time_median"].min()
        both = cpu_best.index.intersection(gpu_best.index)
        at = group.assign(intensity=_intensity(group)).groupby("size")["intensity"].median()
        ax.plot(at[both], cpu_best[both] / gpu_best[both], "o", color=color, fillstyle="none")
        handles.append(
            Line2D([], [], color=color, label=f"{row.kernel} {row.dtype} ({row.gpu_device})")
        )
    ax.axhline(1.0, color="black", linewidth=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    handles += [
        Line2D([], [], color="grey", label="model (L = 0)"),
        Line2D([], [], color="grey", marker="o", fillstyle="none", linestyle="", label="measured"),
        Line2D([], [], color="grey", linestyle=":", label="break-even I*"),
    ]
    fig.legend(handles=handles, loc="outside upper center", ncols=2)
    return fig

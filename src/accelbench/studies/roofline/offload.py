"""Does offloading a kernel to the GPU pay once the copies are paid? A model and the measurement.

Model (per kernel, dtype, GPU device and host), with F(n) flops and B(n) bytes that
cross the host<->device link for problem size n:

    t_CPU(n) = F / P_CPU
    t_GPU(n) = L + B / W + F / P_GPU        (copy and compute do not overlap)

Offloading pays when t_GPU < t_CPU. For large problems (L negligible) that is
when the arithmetic intensity I = F / B exceeds

    I* = P_CPU * P_GPU / (W * (P_GPU - P_CPU)),

and never when P_GPU <= P_CPU. With L, the predicted crossover size is the
smallest n with t_GPU(n) < t_CPU(n).

W is the rate the kernels' own copies reached (`copy_bandwidth`). A GPU kernel record
times the upload of its inputs and the download of its output (`transfer_time`) from
ordinary pageable NumPy arrays, which the driver stages through a page-locked buffer of
its own: often several times slower than the pinned copies the roofs experiment measures
(h2d_bandwidth, d2h_bandwidth). A model built on the roofs' link predicts copies the
kernels never made, so the model takes the kernels' W, and the pinned link stands beside
it (its columns, its dashed curve): what page-locked host memory would buy them.

The measurement is the one of the answer's table: at each size, the GPU's best
end-to-end time (copies included) against the best CPU time of the same host
(accelbench.analysis.gpu_vs_cpu), and a crossover named only where two measured sizes
bracket it (accelbench.analysis.crossovers). Where the model's t_GPU lies outside the
interval of the measured end-to-end time, the table says by how much and which part of
the call departs from the model (`Departure`). ASSUMPTIONS states every simplification;
it goes into the table notes.

A row needs something to set the GPU against: a CPU record of the kernel and dtype on the
GPU's host, and an end-to-end time of the GPU. Rows without are left out of the table and
named, with the reason, in one note (`left_out`). Data science workloads (pandas/cuDF,
scikit-learn/cuML, networkx/cuGraph) declare no flop count, so the model does not apply to
them; their rows give the measurement alone. Everything comes from the tidy table; nothing
is re-measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from accelbench.analysis import crossovers, gpu_vs_cpu, marks, plain_tables, style, tables
from accelbench.analysis.figures import flagged_rows, legend_with_marks
from accelbench.platform.devices import names_a_gpu

ASSUMPTIONS = (
    "Model: t_CPU = F/P_CPU; t_GPU = L + B/W + F/P_GPU; offload pays when t_GPU < t_CPU.",
    "No overlap of copy and compute: the inputs are copied to the GPU, the kernel runs, "
    "the output is copied back, one after the other (no streams, no pipelining).",
    "B = the kernel's declared minimum bytes moved (F / arithmetic intensity): inputs and "
    "output cross the link exactly once, as in the GPU records' copies; data start and end "
    "on the host; the CPU copies nothing.",
    "W = the rate of the kernels' own copies (transfer_time: inputs up and output down, "
    "from pageable host arrays): the slope of transfer_time = L_copy + B/W fitted over the "
    "measured sizes (at each size the fastest copies, every size weighted by its relative "
    "error); B/transfer_time of the largest size where only one size has its copies timed, "
    "or where the slope is not positive.",
    "W pinned = harmonic mean of the roofs' H2D and D2H bandwidths, copied from page-locked "
    "host memory (bytes split evenly between the two directions): what the same copies "
    "would reach from pinned memory, with the same P_CPU, P_GPU and L.",
    "P_CPU, P_GPU = the best measured median throughput of the kernel on the GPU's host "
    "(over backends, sizes and, for the CPU, thread counts), taken as constant in n: a "
    "saturated device.",
    "L = fixed cost per call (kernel launch, synchronisation, the copies' latency L_copy): "
    "the smallest residual of the measured GPU end-to-end times over B/W + F/P_GPU, at "
    "least 0. The break-even intensity I* ignores L (large-problem limit); the predicted "
    "crossover sizes include it.",
    "F(n) and B(n) between and beyond the measured sizes follow a power law through the "
    "neighbouring measured sizes (exact for n^2, n^3 counts).",
)
MEASURED = (
    "Measured: at each size the GPU's best median end-to-end time (copies included) against "
    "the best CPU median time of the same host, as a factor with its interval; the GPU or "
    "the CPU is ahead where the interval excludes 1, and a crossover is named only where "
    "two measured sizes bracket it. The model is set against each measured end-to-end "
    "time: where it falls outside that time's 95% interval, the note below says by how "
    "much and which part of the call departs."
)
SEARCH_SPAN = 1000.0  # the predicted crossover is searched up to this factor above the largest n
# Relative slack for a model time at the edge of a measured interval: rounding, not a departure.
ROUNDING = 1e-9
COPIES_INCLUDED = next(name for name, flag in gpu_vs_cpu.COPIES.items() if flag)
NUMBER_COLUMNS = (
    "experiment",
    "kernel",
    "dtype",
    "gpu_device",
    "host",
    "best_cpu",
    "cpu_gflops",
    "best_gpu",
    "gpu_gflops",
    "link_gbs",
    "h2d_gbs",
    "d2h_gbs",
    "pinned_link_gbs",
    "overhead_s",
    "break_even_intensity",
    "pinned_break_even_intensity",
    "intensity_min",
    "intensity_max",
    "predicted_n",
    "pinned_predicted_n",
    "sizes_compared",
    "sizes_departing",
    "crossover_low",
    "crossover_high",
    "measured",
    "measured_short",
    "departures",
    "note",
    "left_out",
)


class BreakEvenRow(TypedDict, total=False):
    """A row of the break-even table, by NUMBER_COLUMNS; a number nobody could compute is
    nan, a device or library nobody ran ("best_cpu", "best_gpu") too."""

    experiment: str
    kernel: str  # the kernel's or data science workload's name
    dtype: str
    gpu_device: str
    host: str | None
    best_cpu: str | float
    cpu_gflops: float
    best_gpu: str | float
    gpu_gflops: float
    link_gbs: float
    h2d_gbs: float
    d2h_gbs: float
    pinned_link_gbs: float
    overhead_s: float
    break_even_intensity: float
    pinned_break_even_intensity: float
    intensity_min: float
    intensity_max: float
    predicted_n: float
    pinned_predicted_n: float
    sizes_compared: int
    sizes_departing: int
    crossover_low: float
    crossover_high: float
    measured: str
    measured_short: str
    departures: str
    note: str
    left_out: str


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

    def compute_time(self, flops: float) -> float:
        return flops / (self.gpu_gflops * 1e9)

    def copy_time(self, nbytes: float) -> float:
        return nbytes / (self.link_gbs * 1e9)

    def gpu_time(self, flops: float, nbytes: float) -> float:
        return self.overhead_s + self.copy_time(nbytes) + self.compute_time(flops)

    def speedup(self, intensity: np.ndarray) -> np.ndarray:
        """t_CPU / t_GPU as a function of intensity alone (L = 0)."""
        return 1.0 / (
            self.cpu_gflops / self.gpu_gflops + self.cpu_gflops / (intensity * self.link_gbs)
        )


def link_bandwidth(h2d_gbs: float, d2h_gbs: float) -> float:
    """Effective link bandwidth for bytes split evenly between directions (harmonic mean)."""
    return 2.0 / (1.0 / h2d_gbs + 1.0 / d2h_gbs)


def copy_bandwidth(nbytes: np.ndarray, seconds: np.ndarray) -> float:
    """W in GB/s from the kernels' copies of `nbytes` taking `seconds`, one pair per size.

    The slope of seconds = L_copy + B/W: each copy call has a fixed latency (tens of µs
    from pageable memory), which B/t at one size would fold into W, so that the model would
    miss it at the smaller sizes; fitted, the latency goes to L with the launch, and W is
    the rate at every size. Each size is weighted by its relative error, or the largest
    size, thousands of times the smallest in time, would set the line alone. With one size,
    or where the copies were no slower for more bytes (the slope is not positive: small
    sizes all latency), W is B/t of the largest size.
    """
    order = np.argsort(nbytes)
    nbytes, seconds = np.asarray(nbytes, float)[order], np.asarray(seconds, float)[order]
    if len(nbytes) > 1:
        system = np.column_stack([1.0 / seconds, nbytes / seconds])
        (_, per_byte), *_ = np.linalg.lstsq(system, np.ones(len(seconds)), rcond=None)
        if per_byte > 0:
            return 1e-9 / per_byte
    return nbytes[-1] / seconds[-1] / 1e9


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
        return math.nan, "offload pays at every size"
    if not pays.any():
        return math.nan, f"offload does not pay up to n = {top:.3g}"
    first = int(np.argmax(pays))
    low, high = math.log(grid[first - 1]), math.log(grid[first])
    for _ in range(60):  # bisection in log n
        middle = 0.5 * (low + high)
        low, high = (middle, high) if gain(math.exp(middle)) <= 0 else (low, middle)
    return math.exp(high), None


def _intensity(rows: pd.DataFrame) -> pd.Series:
    """Arithmetic intensity, stored as a plain value or as a distribution (its median)."""
    column = "arithmetic_intensity"
    return rows[column] if column in rows else rows[f"{column}_median"]


# The GPU's times a row of the study reads; records that lack one have NaN there.
GPU_TIMES = (
    "transfer_time_median",
    "end_to_end_time_median",
    "end_to_end_time_ci_low",
    "end_to_end_time_ci_high",
)


def _with_gpu_times(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.reindex(columns=[*rows.columns, *(c for c in GPU_TIMES if c not in rows)])


def kernel_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Kernel records that ran and compute, with F (flops), B (bytes) and whether on a GPU."""
    needed = ["kernel", "device", "backend", "dtype", "size", "gflops_median", "time_median"]
    intensity = {"arithmetic_intensity", "arithmetic_intensity_median"}
    if frame.empty or not set(needed) <= set(frame.columns) or not intensity & set(frame):
        return pd.DataFrame(columns=["id", "host", *needed, "flops", "bytes", "gpu", *GPU_TIMES])
    rows = frame[(frame["experiment"] == "kernel") & (frame["status"] == "ok")].copy()
    rows["flops"] = rows["gflops_median"].astype(float) * rows["time_median"].astype(float) * 1e9
    rows["bytes"] = rows["flops"] / _intensity(rows).astype(float)
    rows["gpu"] = rows["device"].map(names_a_gpu).astype(bool)
    # A kernel without flops (the transfer kernel) has nothing to offload.
    rows = rows[(rows["flops"] > 0) & np.isfinite(rows["bytes"]) & (rows["bytes"] > 0)]
    return _with_gpu_times(rows)


def datasci_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Data science records that ran, with whether on a GPU."""
    needed = ["workload", "device", "backend", "size", "time_median"]
    if frame.empty or not set(needed) <= set(frame.columns):
        return pd.DataFrame(columns=["id", "host", *needed, "gpu", *GPU_TIMES])
    rows = frame[(frame["experiment"] == "datasci") & (frame["status"] == "ok")].copy()
    rows["gpu"] = rows["device"].map(names_a_gpu).astype(bool)
    return _with_gpu_times(rows)


def _host(value: Any) -> Any:
    """A host name as a key: every missing name alike (records naming no host pair with
    each other only, as in gpu_vs_cpu)."""
    return None if pd.isna(value) else value


def _on(rows: pd.DataFrame, host: Any) -> pd.Series:
    return rows["host"].map(lambda name: _host(name) == host).astype(bool)


def _roof(frame: pd.DataFrame, device: str, dtype: str, host: Any) -> tuple[float, float]:
    """(H2D, D2H) GB/s of the pinned copies of the GPU's roofs record on the same host, the
    same dtype's where there is one."""
    columns = ("h2d_bandwidth_median", "d2h_bandwidth_median")
    if not set(columns) <= set(frame.columns):
        return math.nan, math.nan
    roofs = frame[
        (frame["experiment"] == "roof") & (frame["status"] == "ok") & (frame["device"] == device)
    ].dropna(subset=list(columns))
    roofs = roofs[_on(roofs, host)]
    if roofs.empty:
        return math.nan, math.nan
    same = roofs[roofs["dtype"] == dtype] if "dtype" in roofs else roofs
    row = (same if not same.empty else roofs).iloc[0]
    return float(row[columns[0]]), float(row[columns[1]])


def _best(rows: pd.DataFrame, column: str) -> tuple[float, str]:
    """The largest value of `column` and the device and backend that reached it."""
    best = rows.loc[rows[column].astype(float).idxmax()]
    return float(best[column]), f"{best['device']} {best['backend']}"


def _fastest(rows: pd.DataFrame) -> str:
    """The device and library of the smallest median time in `rows`."""
    best = rows.loc[rows["time_median"].astype(float).idxmin()]
    return f"{best['device']} {best['backend']}"


@dataclass(frozen=True)
class Departure:
    """A measured size whose best GPU end-to-end time (`measured`, s) lies outside its 95%
    interval around the model's t_GPU (`modelled`, s), and the part of the call that
    departs most (`why`)."""

    size: int
    measured: float
    modelled: float
    why: str

    @property
    def factor(self) -> float:
        """How many times slower (or faster) than the model."""
        ratio = self.measured / self.modelled
        return ratio if ratio >= 1 else 1 / ratio

    @property
    def slower(self) -> bool:
        return self.measured > self.modelled

    @property
    def how(self) -> str:
        return f"{self.factor:.3g}x {'slower' if self.slower else 'faster'}"

    @property
    def short(self) -> str:
        return f"{self.how} at n = {self.size:,}"

    @property
    def says(self) -> str:
        unit, scale = tables.readable_unit("s", [self.measured, self.modelled])
        return (
            f"measured {self.how} than the model at n = {self.size:,} "
            f"({self.measured / scale:.3g} {unit} against {self.modelled / scale:.3g} {unit}, "
            f"outside the measured interval): {self.why}"
        )


def _why(model: OffloadModel, gpu: pd.Series) -> str:
    """Which part of the measured call departs most from the model, in the direction of the
    departure: the kernel alone (against F/P_GPU), its copies (against B/W) or the rest of
    the call (end-to-end less the kernel and its copies, timed apart, against L)."""
    flops, nbytes = float(gpu["flops"]), float(gpu["bytes"])
    kernel, total = float(gpu["time_median"]), float(gpu["end_to_end_time_median"])
    copies = float(gpu["transfer_time_median"])
    copies = copies if copies > 0 else model.copy_time(nbytes)  # NaN: not timed
    rest = total - kernel - copies
    parts = [
        (
            kernel - model.compute_time(flops),
            f"the kernel alone runs at {_number(flops / kernel / 1e9)} GFLOP/s there, not "
            f"P_GPU = {_number(model.gpu_gflops)}",
        ),
        (
            copies - model.copy_time(nbytes),
            f"its copies reach {_number(nbytes / copies / 1e9)} GB/s there, not "
            f"W = {_number(model.link_gbs)}",
        ),
        (
            rest - model.overhead_s,
            f"end-to-end less the kernel and its copies timed apart is "
            f"{_number(rest * 1e6)} µs there, not L = {_number(model.overhead_s * 1e6)}",
        ),
    ]
    sign = 1.0 if total > model.gpu_time(flops, nbytes) else -1.0
    return max(parts, key=lambda part: sign * part[0])[1]


def _departure(model: OffloadModel, gpu: pd.Series) -> Departure | None:
    """The departure of one GPU record's end-to-end time from the model, if any."""
    modelled = model.gpu_time(float(gpu["flops"]), float(gpu["bytes"]))
    median = float(gpu["end_to_end_time_median"])
    low, high = (float(gpu[f"end_to_end_time_ci_{end}"]) for end in ("low", "high"))
    low, high = (low if math.isfinite(low) else median, high if math.isfinite(high) else median)
    if low * (1 - ROUNDING) <= modelled <= high * (1 + ROUNDING):
        return None
    return Departure(int(gpu["size"]), median, modelled, _why(model, gpu))


def _cells(cells: pd.DataFrame, names: Mapping[str, Any], host: Any) -> pd.DataFrame:
    """The compared cells (gpu_vs_cpu) of one kernel and dtype or workload on one host, copies
    included, by size."""
    chosen = (cells["copies"] == COPIES_INCLUDED) & (cells["status"] == "ok")
    chosen &= cells[gpu_vs_cpu.HOST].map(lambda name: _host(name) == host).astype(bool)
    for name, value in names.items():
        chosen &= cells[name] == value
    return cells[chosen].sort_values("size")


def measured_sizes(
    cells: pd.DataFrame,
    rows: pd.DataFrame,
    names: Mapping[str, Any],
    host: Any,
    model: OffloadModel,
) -> pd.DataFrame:
    """Per size of a kernel compared (`cells` of gpu_vs_cpu.compare, `rows` its kernel_rows):
    the factor CPU time / GPU end-to-end time with its interval and flags, the GPU record's
    intensity and end-to-end time (measured_s), the model's t_GPU (modelled_s) and the
    departure from it (None where the model lies within the measured interval)."""
    mine = _cells(cells, names, host)
    columns = ["size", "median", "ci_low", "ci_high", "ci_level", "busy", "imprecise"]
    found = mine[columns].reset_index(drop=True)
    gpu = rows.set_index("id").loc[mine["gpu_record"]].reset_index()
    found["intensity"] = (gpu["flops"] / gpu["bytes"]).to_numpy(float)
    found["measured_s"] = gpu["end_to_end_time_median"].to_numpy(float)
    found["modelled_s"] = [model.gpu_time(row.flops, row.bytes) for row in gpu.itertuples()]
    found["departure"] = [_departure(model, record) for _, record in gpu.iterrows()]
    return found


def _work(frame: pd.DataFrame, gpu_device: str) -> pd.DataFrame:
    """The kernel and data science records of the CPUs and of one GPU device."""
    work = frame[frame["experiment"].isin(["kernel", "datasci"])]
    return work[~work["device"].map(names_a_gpu).astype(bool) | (work["device"] == gpu_device)]


def compared_cells(frame: pd.DataFrame, gpu_device: str) -> pd.DataFrame:
    """The cells of one GPU device compared with the CPUs of its host (gpu_vs_cpu.compare),
    as `measured_sizes` reads them."""
    return gpu_vs_cpu.compare(_work(frame, gpu_device)).cells


@dataclass(frozen=True)
class _Paired:
    """One GPU device's records against the CPUs of its host (gpu_vs_cpu, crossovers)."""

    cells: pd.DataFrame
    crossings: list[crossovers.Crossing]

    @classmethod
    def of(cls, frame: pd.DataFrame, gpu_device: str) -> _Paired:
        work = _work(frame, gpu_device)
        return cls(gpu_vs_cpu.compare(work).cells, crossovers.crossings(work, with_transfer=True))

    def crossing(
        self, experiment: str, names: Mapping[str, Any], host: Any
    ) -> crossovers.Crossing | None:
        return next(
            (
                one
                for one in self.crossings
                if one.experiment == experiment and one.names == dict(names) and one.host == host
            ),
            None,
        )


def _left_out(rows: pd.DataFrame, here: pd.DataFrame, gpu: pd.DataFrame, what: str) -> str:
    """Why a GPU device's row has nothing to be set against, or '' where it has."""
    if here[~here["gpu"]].empty:
        others = sorted({str(_host(name)) for name in rows.loc[~rows["gpu"], "host"]})
        if others:
            return f"its CPU records are of another host ({', '.join(others)})"
        return f"no CPU record of the {what} on its host"
    if gpu["end_to_end_time_median"].astype(float).notna().sum() == 0:
        return "no GPU end-to-end time (copies in and out)"
    return ""


def _measured(
    paired: _Paired, experiment: str, names: Mapping[str, Any], host: Any
) -> BreakEvenRow:
    """The measured columns: how many sizes compared, the last crossover's bracket, and what
    the sizes say (crossovers.Crossing: `says` for the notes, `short` for the table)."""
    crossing = paired.crossing(experiment, names, host)
    if crossing is None:
        return {
            "sizes_compared": 0,
            "measured": "no size measured on both the GPU and the CPU of its host",
            "measured_short": "no size on both",
        }
    row = crossing.row()
    return {
        "sizes_compared": row["sizes"],
        "crossover_low": row["crossover_low"],
        "crossover_high": row["crossover_high"],
        "measured": row["says"],
        "measured_short": crossing.short,
    }


def _model(gpu: pd.DataFrame, result: BreakEvenRow) -> tuple[OffloadModel | None, list[str]]:
    """W from the kernels' copies, L from the end-to-end residuals, and the model with them
    (None, with why, where the GPU records timed no copies)."""
    copied = gpu[gpu["transfer_time_median"].astype(float) > 0]
    if copied.empty:
        return None, ["no transfer_time in the GPU records: no model of their copies, and L = 0"]
    fastest = copied.groupby("size").agg(
        seconds=("transfer_time_median", "min"), nbytes=("bytes", "median")
    )
    link = copy_bandwidth(fastest["nbytes"].to_numpy(), fastest["seconds"].to_numpy())
    free = OffloadModel(result["cpu_gflops"], result["gpu_gflops"], link)
    timed = gpu.dropna(subset=["end_to_end_time_median"])
    residuals = [
        row.end_to_end_time_median - free.gpu_time(row.flops, row.bytes)
        for row in timed.itertuples()
    ]
    model = OffloadModel(free.cpu_gflops, free.gpu_gflops, link, max(0.0, min(residuals)))
    return model, []


def _predictions(
    here: pd.DataFrame, model: OffloadModel | None, pinned: OffloadModel | None
) -> tuple[dict[str, float], list[str]]:
    """I* and the predicted crossover size of the model and of the pinned one."""
    numbers: dict[str, float] = {}
    notes = []
    counts = here.groupby("size")[["flops", "bytes"]].median()
    sizes = counts.index.to_numpy(float)
    for prefix, one in (("", model), ("pinned_", pinned)):
        if one is None:
            continue
        numbers[f"{prefix}break_even_intensity"] = one.break_even_intensity()
        if len(counts) < 2:
            continue
        numbers[f"{prefix}predicted_n"], note = predicted_crossover(
            one,
            power_law(sizes, counts["flops"].to_numpy()),
            power_law(sizes, counts["bytes"].to_numpy()),
            top=SEARCH_SPAN * sizes.max(),
        )
        if note:
            notes.append(f"model{' with pinned copies' if prefix else ''}: {note}")
    if len(counts) < 2:
        notes.append("one size only: no power law for F(n), B(n), so no predicted n*")
    return numbers, notes


def _modelled(
    frame: pd.DataFrame,
    here: pd.DataFrame,
    gpu: pd.DataFrame,
    paired: _Paired,
    result: BreakEvenRow,
) -> BreakEvenRow:
    """The model's columns of a row whose kernel ran on the CPU and the GPU of its host: W,
    L, I* and n* for the kernels' copies and for pinned ones, and the departures."""
    model, notes = _model(gpu, result)
    h2d, d2h = _roof(frame, result["gpu_device"], result["dtype"], result["host"])
    numbers = BreakEvenRow(h2d_gbs=h2d, d2h_gbs=d2h)
    pinned = None
    if math.isfinite(h2d + d2h):
        numbers["pinned_link_gbs"] = link_bandwidth(h2d, d2h)
        overhead = model.overhead_s if model else 0.0
        pinned = OffloadModel(
            result["cpu_gflops"], result["gpu_gflops"], numbers["pinned_link_gbs"], overhead
        )
    else:
        notes.append(f"no pinned H2D/D2H bandwidth of {result['gpu_device']} (roofs experiment)")
    predicted, predicted_notes = _predictions(here, model, pinned)
    numbers.update(predicted)
    notes += predicted_notes
    if model is not None:
        numbers.update(link_gbs=model.link_gbs, overhead_s=model.overhead_s)
        names = {"kernel": result["kernel"], "dtype": result["dtype"]}
        sizes = measured_sizes(paired.cells, here, names, result["host"], model)
        departures = [one for one in sizes["departure"] if one is not None]
        numbers.update(
            sizes_departing=len(departures),
            departures="; ".join(one.short for one in departures),
        )
        notes += [one.says for one in departures]
    return {**numbers, "note": "; ".join(notes)}


def _row(experiment: str, name: str, dtype: str, gpu_device: str, host: Any) -> BreakEvenRow:
    """A row of the table before anything is known but its names."""
    row = BreakEvenRow(**dict.fromkeys(NUMBER_COLUMNS, math.nan))
    row.update(experiment=experiment, kernel=name, dtype=dtype, gpu_device=gpu_device, host=host)
    row.update(sizes_departing=0, departures="", note="", left_out="")
    row.update(measured="", measured_short="")
    return row


def _analyse(
    frame: pd.DataFrame, rows: pd.DataFrame, paired: _Paired, gpu_device: str, host: Any
) -> BreakEvenRow:
    """One kernel, dtype, GPU device and host -> its row of the break-even table."""
    result = _row("kernel", rows["kernel"].iloc[0], rows["dtype"].iloc[0], gpu_device, host)
    here = rows[_on(rows, host)]
    gpu = here[here["device"] == gpu_device]
    intensity = _intensity(here).astype(float)
    gpu_gflops, best_gpu = _best(gpu, "gflops_median")
    result.update(best_gpu=best_gpu, gpu_gflops=gpu_gflops)
    result.update(intensity_min=float(intensity.min()), intensity_max=float(intensity.max()))
    left_out = _left_out(rows, here, gpu, "kernel and dtype")
    if left_out:
        return {**result, "left_out": left_out}
    cpu_gflops, best_cpu = _best(here[~here["gpu"]], "gflops_median")
    result.update(best_cpu=best_cpu, cpu_gflops=cpu_gflops)
    result.update(
        _measured(paired, "kernel", {"kernel": result["kernel"], "dtype": result["dtype"]}, host)
    )
    result.update(_modelled(frame, here, gpu, paired, result))
    return result


def _analyse_measured(
    rows: pd.DataFrame, paired: _Paired, gpu_device: str, host: Any
) -> BreakEvenRow:
    """One data science workload, GPU device and host -> its row: the measurement only."""
    workload = rows["workload"].iloc[0]
    result = _row("datasci", workload, "–", gpu_device, host)
    here = rows[_on(rows, host)]
    gpu = here[here["device"] == gpu_device]
    result["best_gpu"] = _fastest(gpu)
    left_out = _left_out(rows, here, gpu, "workload")
    if left_out:
        return {**result, "left_out": left_out}
    result["best_cpu"] = _fastest(here[~here["gpu"]])
    result.update(_measured(paired, "datasci", {"workload": workload}, host))
    return {**result, "note": "no flop count: the model does not apply, the measurement only"}


def _gpu_hosts(rows: pd.DataFrame) -> list[tuple[str, Any]]:
    """(GPU device, host) of every GPU record of `rows`, each once, in order."""
    gpu = rows[rows["gpu"]]
    pairs = set(zip(gpu["device"], gpu["host"].map(_host), strict=True))
    return sorted(pairs, key=lambda pair: (pair[0], str(pair[1])))


def break_even_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (kernel, dtype, GPU device, host) and per (data science workload, GPU
    device, host) with a GPU record: the numbers in NUMBER_COLUMNS. Rows with nothing to
    set the GPU against keep only their names and why (`left_out`)."""
    kernels, datasci = kernel_rows(frame), datasci_rows(frame)
    on_gpu = pd.concat(
        [kernels.loc[kernels["gpu"], "device"], datasci.loc[datasci["gpu"], "device"]]
    )
    paired = {device: _Paired.of(frame, device) for device in sorted(set(on_gpu))}
    results = [
        _analyse(frame, group, paired[device], device, host)
        for _, group in kernels.groupby(["kernel", "dtype"], sort=True)
        for device, host in _gpu_hosts(group)
    ]
    results += [
        _analyse_measured(group, paired[device], device, host)
        for _, group in datasci.groupby("workload", sort=True)
        for device, host in _gpu_hosts(group)
    ]
    return pd.DataFrame(results, columns=list(NUMBER_COLUMNS))


def _number(value: float) -> str:
    if not math.isfinite(value):
        return "∞" if value == math.inf else "–"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _shown(numbers: pd.DataFrame) -> pd.DataFrame:
    """The rows the table shows: those with something to set the GPU against."""
    return numbers[numbers["left_out"].fillna("") == ""]


def _gpus(numbers: pd.DataFrame) -> pd.Series:
    """Each row's GPU device, with its host where the rows span several hosts."""
    hosts = numbers["host"].map(_host)
    if hosts.map(str).nunique() < 2:
        return numbers["gpu_device"].astype(object)
    return numbers["gpu_device"] + " (" + hosts.map(str) + ")"


def _labels(numbers: pd.DataFrame) -> pd.Series:
    """'matmul float32 on cuda1' (a workload alone, without a dtype)."""
    names = [
        f"{row.kernel}{'' if row.experiment == 'datasci' else ' ' + str(row.dtype)}"
        for row in numbers.itertuples()
    ]
    return pd.Series(names, index=numbers.index, dtype=object) + " on " + _gpus(numbers)


def _agreement(row: pd.Series) -> str:
    """The model against the measured end-to-end times, in a few words."""
    compared = row["sizes_compared"]
    if not math.isfinite(row["link_gbs"]) or not compared > 0:
        return "–"
    compared, departing = int(compared), int(row["sizes_departing"])
    if not departing:
        if compared == 1:  # L is the residual of the one size: nothing is left to check
            return "met at the one size, which sets L"
        return f"within the interval at all {compared} sizes"
    if departing == 1:
        return row["departures"]
    return f"outside the interval at {departing} of {compared} sizes"


def display_table(numbers: pd.DataFrame) -> pd.DataFrame:
    shown = _shown(numbers)
    return pd.DataFrame(
        {
            "Kernel": shown["kernel"],
            "dtype": shown["dtype"],
            "GPU": _gpus(numbers)[shown.index],
            "Best CPU": shown["best_cpu"].astype(object).fillna("–"),
            "P_CPU (GFLOP/s)": shown["cpu_gflops"].map(_number),
            "P_GPU (GFLOP/s)": shown["gpu_gflops"].map(_number),
            "W, these copies (GB/s)": shown["link_gbs"].map(_number),
            "W, pinned (GB/s)": shown["pinned_link_gbs"].map(_number),
            "L (µs)": (shown["overhead_s"] * 1e6).map(_number),
            "I* (flop/B)": shown["break_even_intensity"].map(_number),
            "I*, pinned (flop/B)": shown["pinned_break_even_intensity"].map(_number),
            "I measured (flop/B)": [
                f"{_number(low)}–{_number(high)}"
                for low, high in zip(shown["intensity_min"], shown["intensity_max"], strict=True)
            ],
            "Predicted n*": shown["predicted_n"].map(_number),
            "Predicted n*, pinned": shown["pinned_predicted_n"].map(_number),
            "Measured, copies included": shown["measured_short"],
            "Model against measured": [_agreement(row) for _, row in shown.iterrows()],
        }
    )


def left_out(numbers: pd.DataFrame) -> str:
    """One line naming the rows left out of the table and why; '' where none is."""
    missing = numbers[numbers["left_out"].fillna("") != ""]
    if missing.empty:
        return ""
    labels = _labels(missing)
    parts = [
        f"{', '.join(labels[group.index])}: {reason}"
        for reason, group in missing.groupby("left_out", sort=False)
    ]
    return "Left out, with nothing to set the GPU against: " + "; ".join(parts) + "."


def write_table(numbers: pd.DataFrame, stem: str) -> list:
    caption = (
        "Offload break-even: minimum arithmetic intensity I* at which the GPU pays once the "
        "copies are paid, and the crossover problem size n*, predicted with the copies the "
        "kernels made and with pinned ones, and measured"
    )
    shown = _shown(numbers)
    labels = _labels(numbers)
    notes = [*ASSUMPTIONS, MEASURED]
    notes += [
        f"{labels[index]}: measured, {row.measured}" + (f"; {row.note}" if row.note else "")
        for index, row in shown.iterrows()
    ]
    if left_out(numbers):
        notes.append(left_out(numbers))
    if numbers.empty:
        notes = ["No kernel ran on a GPU: no break-even to compute."]
    elif shown.empty:
        notes = [
            "No kernel or workload ran on a GPU, with its end-to-end time, and on the CPU of "
            f"the same host: no break-even to compute. {left_out(numbers)}"
        ]
    # Kernel, dtype and GPU name a row: the LaTeX parts that fit the page repeat them.
    return plain_tables.write(
        display_table(numbers), numbers, caption, notes, stem, text_columns=4, key_columns=3
    )


def _curves(ax, row: Any, color) -> tuple[OffloadModel | None, list[np.ndarray]]:
    """The model's speedup against intensity (L = 0): solid with the kernels' copies, dashed
    with pinned ones, I* dotted; returns the model of the kernels' copies and the values
    drawn: the intensities (I* among them) first, then the speedups."""
    intensity = np.geomspace(row.intensity_min / 10, row.intensity_max * 10, 200)
    drawn, model = [intensity], None
    for link, linestyle in ((row.link_gbs, "-"), (row.pinned_link_gbs, "--")):
        if not math.isfinite(link):
            continue
        one = OffloadModel(row.cpu_gflops, row.gpu_gflops, link, np.nan_to_num(row.overhead_s))
        model = one if linestyle == "-" else model
        drawn.append(one.speedup(intensity))
        ax.plot(intensity, drawn[-1], color=color, linestyle=linestyle)
    if model is not None and math.isfinite(model.break_even_intensity()):
        ax.axvline(model.break_even_intensity(), color=color, linestyle=":", linewidth=0.8)
        drawn[0] = np.append(intensity, model.break_even_intensity())
    return model, drawn


def _points(ax, sizes: pd.DataFrame, look: style.Look) -> list[np.ndarray]:
    """The measured factors with their intervals (flagged ones hollow, their intervals off
    the range), the model's at each measured size (L included) as a cross, and each
    departure said beside its point. Returns the values the axis must show."""
    x, y = sizes["intensity"].to_numpy(float), sizes["median"].to_numpy(float)
    flagged = flagged_rows(sizes)
    low, high = sizes["ci_low"].to_numpy(float), sizes["ci_high"].to_numpy(float)
    marks.measured(ax, x, y, (low, high), look, flagged)
    expected = y * sizes["measured_s"].to_numpy(float) / sizes["modelled_s"].to_numpy(float)
    ax.plot(x, expected, "x", color=look.color, linestyle="none")
    for at, value, departure in zip(x, y, sizes["departure"], strict=True):
        if departure is not None:
            ax.annotate(
                departure.how,
                (at, value),
                xytext=(5, -3),
                textcoords="offset points",
                color=look.color,
            )
    return [y, expected, low[~flagged], high[~flagged]]


def _figure_legend(fig: Figure, labels: list[tuple[str, style.Look]], pinned: bool, cells):
    """Each kernel's look, then what each line and mark stands for (in the kernel's colour
    where there is one kernel), the error bar and, where used, the hollow mark."""
    handles = [style.entry(look, label, line=True) for label, look in labels]
    handles.append(style.style_entry("model, the kernels' copies (L = 0)", linestyle="-"))
    if pinned:
        handles.append(style.style_entry("model, pinned copies (L = 0)", linestyle="--"))
    handles += [
        style.style_entry("measured, copies included", marker=labels[0][1].marker),
        style.style_entry("model at that size, with L", marker="x"),
        style.style_entry("break-even I*, the kernels' copies", linestyle=":"),
    ]
    legend_with_marks(fig, handles, cells)


def _looks(usable: pd.DataFrame) -> dict[Any, style.Look]:
    """Each row's look: its kernel's, or where a kernel has several rows (dtypes, GPUs,
    hosts) the look of the row's own label."""
    labels = _labels(usable)
    twice = usable["kernel"].duplicated(keep=False)
    return {
        index: style.look("offload", labels[index])
        if twice[index]
        else style.look("kernel", kernel)
        for index, kernel in usable["kernel"].items()
    }


SPEEDUP_LABEL = r"Offload speedup $t_\mathrm{CPU}\,/\,t_\mathrm{GPU}$ (×)"


def figure(frame: pd.DataFrame, numbers: pd.DataFrame) -> Figure:
    """Speedup of offloading (t_CPU / t_GPU, copies included) against arithmetic intensity:
    per kernel the model's curves (L = 0) with the kernels' copies and with pinned ones, the
    measured sizes as points with the model's value there (L included) beside them, and
    the factor by which a point departs from the model written where it does."""
    style.apply()
    # Only kernels have a model (data science workloads declare no flop count).
    usable = _shown(numbers)
    usable = usable[(usable["experiment"] == "kernel") & usable["link_gbs"].astype(float).notna()]
    if usable.empty:
        return style.empty_figure("no GPU kernel with its copies timed and a CPU of its host")
    fig = Figure(figsize=(style.SINGLE_COLUMN, style.PANEL_HEIGHT + 0.6), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlabel("Arithmetic intensity (flop/byte)")
    ax.set_ylabel(SPEEDUP_LABEL)
    rows = kernel_rows(frame)
    cells = {device: compared_cells(frame, device) for device in set(usable["gpu_device"])}
    looks, labels, values, intensities, drawn = _looks(usable), [], [np.ones(1)], [], []
    for index, row in usable.iterrows():
        model, curves = _curves(ax, row, looks[index].color)
        names = {"kernel": row["kernel"], "dtype": row["dtype"]}
        here = rows[_on(rows, row["host"])]
        sizes = measured_sizes(cells[row["gpu_device"]], here, names, row["host"], model)
        intensities.append(curves[0])
        values += curves[1:] + _points(ax, sizes, looks[index])
        drawn.append(sizes.assign(status="ok"))
        labels.append((_labels(numbers)[index], looks[index]))
    ax.axhline(1.0, color=style.NEUTRAL, linewidth=0.6)
    spread = np.concatenate(intensities)
    marks.fit_axis(ax, "x", spread.min(), spread.max())
    finite = np.concatenate(values)
    finite = finite[np.isfinite(finite) & (finite > 0)]
    marks.fit_axis(ax, "y", finite.min(), finite.max())
    marks.arrows(ax)
    pinned = bool(np.isfinite(usable["pinned_link_gbs"]).any())
    _figure_legend(fig, labels, pinned, pd.concat(drawn))
    return fig

"""Percent of the measured roof: each kernel record against the roofs measured on its
device and dtype, in the tidy table.

Shared by the studies that judge kernels against their roofs (the roofline study draws
it, the GPU acceptance check fails a kernel above its roof), so it lives with the
analysis they both build on rather than in either of them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

ROOF_METRICS = ("peak_gflops", "memory_bandwidth", "h2d_bandwidth", "d2h_bandwidth")
# Kernels without arithmetic, and the bandwidth roof of the path each copy takes.
BANDWIDTH_ROOFS = {
    "transfer-d2d": "memory_bandwidth",
    "transfer-h2d": "h2d_bandwidth",
    "transfer-h2d-pinned": "h2d_bandwidth",
    "transfer-d2h": "d2h_bandwidth",
    "transfer-d2h-pinned": "d2h_bandwidth",
}
KEYS = ["device", "dtype"]


def roofs(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (device, dtype) with a measured roof: the median of each roof metric,
    and as `<metric>_ci_high` the top of its interval (how high a rerun could find it)."""
    rows = frame[(frame["experiment"] == "roof") & (frame["status"] == "ok")]
    columns = {f"{metric}_median": metric for metric in ROOF_METRICS}
    columns.update({f"{metric}_ci_high": f"{metric}_ci_high" for metric in ROOF_METRICS})
    present = [column for column in columns if column in rows.columns]
    table = rows[KEYS + present].rename(columns=columns)
    wanted = [*ROOF_METRICS, *(f"{metric}_ci_high" for metric in ROOF_METRICS)]
    for metric in wanted:
        if metric not in table.columns:
            table[metric] = np.nan
    return table[KEYS + wanted].reset_index(drop=True)


def add_roof_percent(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with `roof_percent` and `roof_bound` for kernel rows that ran.

    roof_percent = achieved / attainable x 100, where attainable is the
    roofline min(peak_gflops, arithmetic_intensity x memory_bandwidth) in GFLOP/s,
    or for a copy the bandwidth roof of its path in GB/s. roof_bound names the
    roof that limits (peak_gflops, memory_bandwidth, h2d_bandwidth, d2h_bandwidth).
    Rows without a matching roof get NaN: none measured for that device and dtype, or
    a roof lacking a ceiling the row needs (both for the roofline, a copy's path for a copy).
    """
    out = frame.copy()
    out.attrs = {**frame.attrs, "units": {**frame.attrs.get("units", {}), "roof_percent": "%"}}
    out["roof_percent"] = np.nan
    out["roof_bound"] = pd.Series(pd.NA, index=out.index, dtype="str")
    out["above_roof"] = pd.Series(pd.NA, index=out.index, dtype="boolean")
    rows = out[(out["experiment"] == "kernel") & (out["status"] == "ok")]
    table = roofs(frame)
    if rows.empty or table.empty:
        return out
    # One roof per (device, dtype), so the left join keeps the kernel rows in order.
    ceilings = rows[KEYS].merge(table, on=KEYS, how="left").set_index(rows.index)

    def measured(name: str) -> pd.Series:
        return rows[name].astype(float) if name in rows else pd.Series(np.nan, index=rows.index)

    def attainable(suffix: str) -> tuple[pd.Series, pd.Series]:
        """(roofline in GFLOP/s, whether the GEMM roof is the lower one) from `suffix` stats;
        NaN where either ceiling is missing (which one limits is then unknown)."""
        peak = ceilings[f"peak_gflops{suffix}"]
        memory = measured("arithmetic_intensity") * ceilings[f"memory_bandwidth{suffix}"]
        compute_bound = peak <= memory
        return peak.where(compute_bound, memory).where(peak.notna() & memory.notna()), compute_bound

    roof, compute_bound = attainable("")
    roof_top, _ = attainable("_ci_high")
    achieved = measured("gflops_median")
    percent = 100.0 * achieved / roof
    above = achieved > roof_top
    bound = pd.Series(np.where(compute_bound, "peak_gflops", "memory_bandwidth"), index=rows.index)
    for kernel, path in BANDWIDTH_ROOFS.items():
        copies = rows["kernel"] == kernel
        copied = measured("bandwidth_median")[copies]
        percent[copies] = 100.0 * copied / ceilings.loc[copies, path]
        above[copies] = copied > ceilings.loc[copies, f"{path}_ci_high"]
        bound[copies] = path
    known = np.isfinite(percent)
    out.loc[rows.index, "roof_percent"] = percent.where(known)
    out.loc[known[known].index, "roof_bound"] = bound[known]
    out.loc[known[known].index, "above_roof"] = above[known]
    return out

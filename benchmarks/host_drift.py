"""Host drift: does the host slow this machine's CPUs in stretches the guest cannot see, and
does the host-speed probe (accelbench.measuring.host_speed) see them when a kernel does?

For `--seconds`, a fresh process is forked every `--every` seconds, as each run of a
measurement is; it times the probe, then a single-thread float32 GEMM (n = 512, the
median of 40 calls after 30 warm-up calls), then the probe again. Printed: every
sample, then the GEMM's spread over all samples and over those whose probes were both
within `--limit` of the fastest probe seen, the share of such samples, and the
correlation of probe and GEMM times. On a quiet machine both spreads are a few percent
and nearly every sample passes; where the host slows the CPUs, the GEMM's spread is wide
and shrinks to a few percent among the samples the probe passes.

    python benchmarks/host_drift.py [--seconds 180] [--every 0.3] [--limit 1.2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

from accelbench.measuring import host_speed
from accelbench.platform.processes import call_in_fork


def gemm_median(size: int = 512, calls: int = 40) -> float:
    rng = np.random.default_rng()
    a = rng.random((size, size), dtype=np.float32)
    b = rng.random((size, size), dtype=np.float32)
    with threadpool_limits(1):
        for _ in range(30):
            a @ b
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def one_sample() -> dict[str, float]:
    """In a forked process: probe, GEMM, probe (seconds)."""
    before = host_speed.probe()
    gemm = gemm_median()
    return {"before": before, "gemm": gemm, "after": host_speed.probe()}


def spread(values: np.ndarray) -> str:
    low, median, high = np.percentile(values * 1e3, [5, 50, 95])
    return f"median {median:.3f} ms, 5th-95th percentile {low:.3f}-{high:.3f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--every", type=float, default=0.3)
    parser.add_argument("--limit", type=float, default=1.2)
    args = parser.parse_args()
    samples, started = [], time.perf_counter()
    while time.perf_counter() - started < args.seconds:
        sample = call_in_fork(one_sample)
        sample["t"] = time.perf_counter() - started
        samples.append(sample)
        print(
            f"t={sample['t']:6.1f} s  probe {sample['before'] * 1e3:.3f}/"
            f"{sample['after'] * 1e3:.3f} ms  GEMM {sample['gemm'] * 1e3:.3f} ms",
            flush=True,
        )
        time.sleep(args.every)
    before, after, gemm = (
        np.array([s[key] for s in samples]) for key in ("before", "after", "gemm")
    )
    best = min(before.min(), after.min())
    passed = (before <= args.limit * best) & (after <= args.limit * best)
    print(f"\nsamples: {len(samples)}; fastest probe {best * 1e3:.3f} ms")
    print(f"GEMM, all samples:   {spread(gemm)}")
    if passed.any():
        print(f"GEMM, probe passed:  {spread(gemm[passed])}")
    print(f"samples whose probes were within {args.limit}x of the fastest: {passed.mean():.0%}")
    print(
        f"correlation of probe (slower of the two) and GEMM: "
        f"{np.corrcoef(np.maximum(before, after), gemm)[0, 1]:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

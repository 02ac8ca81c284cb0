"""Energy counter: how often does this machine's energy counter change, and so how long must
an energy window be (accelbench.measuring.energy: at least MIN_PERIODS updates)?

Reads the meter a measurement would open (NVML over GPU 0 with `--gpu`, else RAPL) every
`--every` seconds for `--seconds`, with nothing running, and prints the intervals between
the readings that changed (median, 10th and 90th percentile, largest), the idle power, and
the shortest window that spans MIN_PERIODS updates at the median interval. The record's
`counter_period_s` is the worst case the module assumes; this is what the device does.

    python benchmarks/energy_counter.py [--gpu] [--seconds 3] [--every 0.001]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from accelbench.measuring import energy


def changes(meter: energy.Meter, seconds: float, every: float) -> tuple[list[float], float]:
    """The times between successive changes of the meter's reading, and the mean power."""
    first = previous = meter.read()
    started = last_change = time.perf_counter()
    intervals = []
    while (now := time.perf_counter()) - started < seconds:
        reading = meter.read()
        if reading != previous:
            intervals.append(now - last_change)
            previous, last_change = reading, now
        time.sleep(every)
    watts = meter.joules(first, meter.read()) / (time.perf_counter() - started)
    return intervals[1:], watts  # the first change ends an interval begun at an arbitrary time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", action="store_true", help="NVML's counter of GPU 0, not RAPL")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--every", type=float, default=0.001)
    args = parser.parse_args(argv)
    try:
        meter = energy.open_meter(args.gpu, [0])
    except energy.EnergyUnavailable as err:
        print(f"no energy counter: {err}")
        return 1
    try:
        intervals, watts = changes(meter, args.seconds, args.every)
    finally:
        meter.close()
    print(f"{meter.method}: idle {watts:.1f} W over {args.seconds:g} s")
    if len(intervals) < 3:
        print(f"the counter changed {len(intervals) + 1} times: too few to tell its period")
        return 1
    deciles = statistics.quantiles(intervals, n=10)
    median = statistics.median(intervals)
    print(
        f"{len(intervals)} intervals between changes: median {1e3 * median:.1f} ms, "
        f"10th-90th percentile {1e3 * deciles[0]:.1f}-{1e3 * deciles[-1]:.1f} ms, "
        f"largest {1e3 * max(intervals):.1f} ms (the module assumes {1e3 * meter.period_s:g} ms)"
    )
    print(
        f"a window of {energy.MIN_PERIODS} updates lasts {energy.MIN_PERIODS * median:.2f} s "
        f"at the median interval"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

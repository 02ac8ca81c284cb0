"""Numbers as a table prints them: median [interval] with the digits the interval supports,
a shared power of ten for a row, and the unit (s, ms, µs, ns; J, mJ, ...; GFLOP/s,
TFLOP/s) of the numbers read side by side (a row or a column): the unit of the largest, so
that none needs four digits before the point and, where they span less than the step
between two units, every one reads between 1 and 1000."""

from __future__ import annotations

import math

# What a cell shows where there is no number to print.
MISSING = "–"
TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
ENERGY_UNITS = (("J", 1.0), ("mJ", 1e-3), ("µJ", 1e-6), ("nJ", 1e-9))
FLOP_RATE_UNITS = (("TFLOP/s", 1e3), ("GFLOP/s", 1.0))
BYTE_RATE_UNITS = (("TB/s", 1e3), ("GB/s", 1.0))
READABLE_UNITS = {
    "s": TIME_UNITS,
    "J": ENERGY_UNITS,
    "GFLOP/s": FLOP_RATE_UNITS,
    "GB/s": BYTE_RATE_UNITS,
}


def _decimals(value: float) -> int:
    """Decimal places that put the last kept digit at the first significant digit of `value`."""
    return -math.floor(math.log10(abs(value)))


def shared_exponent(values: list[float]) -> int:
    """Power of ten for a group of numbers printed side by side.

    0 (plain decimals) when every finite value lies in [1e-3, 1e6), otherwise
    the largest value's power of ten, so that the mantissas of one table row
    can be compared at a glance.
    """
    finite = [abs(value) for value in values if math.isfinite(value) and value != 0]
    if all(1e-3 <= value < 1e6 for value in finite):
        return 0
    return math.floor(math.log10(max(finite)))


def format_with_ci(median: float, low: float, high: float, exponent: int | None = None) -> str:
    """`median [low, high]`, rounded to what the interval supports.

    The last digit kept is the second significant digit of the interval width
    (the median keeps at least two significant digits), so the printed digits
    carry information and no more. With a nonzero `exponent` (by default the
    one `shared_exponent` picks for the median alone) all three share that
    power of ten, e.g. `1.234e-06 [1.200e-06, 1.270e-06]`.
    """
    if not all(math.isfinite(value) for value in (median, low, high)):
        return MISSING
    if exponent is None:
        exponent = shared_exponent([median])
    scaled = [value / 10.0**exponent for value in (median, low, high)]
    decimals = _decimals(scaled[0]) + 1 if scaled[0] else 0
    width = scaled[2] - scaled[1]
    if width > 0:
        decimals = max(decimals, _decimals(width) + 1)
    suffix = f"e{exponent:+03d}" if exponent else ""
    texts = [f"{round(value, decimals):.{max(decimals, 0)}f}{suffix}" for value in scaled]
    return f"{texts[0]} [{texts[1]}, {texts[2]}]"


def readable_unit(unit: str | None, numbers: list[float]) -> tuple[str | None, float]:
    """(unit, base units per unit) for numbers read side by side: the largest of s, ms, µs,
    ns (J, mJ, µJ, nJ; TFLOP/s, GFLOP/s; TB/s, GB/s) in which the largest of them is at
    least 1. Every number then reads below 1000, short of the largest unit (a column from
    2 µs to 44 ms in ms: 0.0020 to 44, not 2 to 44000), and numbers within one unit's range
    all read from 1 to 1000. Other units are kept as they are (factor 1)."""
    finite = [abs(value) for value in numbers if math.isfinite(value) and value != 0]
    if unit not in READABLE_UNITS or not finite:
        return unit, 1.0
    largest = max(finite)
    for name, factor in READABLE_UNITS[unit]:
        if largest >= factor:
            return name, factor
    return READABLE_UNITS[unit][-1]

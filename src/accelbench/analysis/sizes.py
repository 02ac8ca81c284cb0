"""How a problem size reads, the same in every table, figure and sentence.

A size is the value of the work's own size parameter n, as its description says (the side
of a matmul's, a stencil's or a Mandelbrot image's n x n grid; the elements of a 1-D
kernel; the rows or nodes of a data science workload), so a table's row, a figure's
tick and the summary's sentence about one cell show the same text:

- below 10,000 the number itself: 128, 4096;
- a power of two from 2^14 up as a power of two, with a superscript exponent: 2¹⁴, 2²⁰;
- a number of three significant digits or fewer with an SI prefix: 10k, 250k, 1M, 1.5M;
- anything else, the number itself: 12345.

In a row label or a sentence the size is `n=<size>` (size_label), as the tables' rows name
it: n=4096, n=2²⁰.
"""

from __future__ import annotations

import math

# Powers of two below this read as numbers (4096); from it on as 2^k (2¹⁴ = 16384).
POWER_OF_TWO_FROM = 14
PLAIN_BELOW = 10_000
PREFIXES = ((10**9, "G"), (10**6, "M"), (10**3, "k"))
_SUPERSCRIPTS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def size_text(size: float) -> str:
    """A problem size as the module docstring says: 4096, 2²⁰, 1M, 12345."""
    if not math.isfinite(size) or size != int(size) or size < PLAIN_BELOW:
        return f"{size:g}"
    n = int(size)
    if n & (n - 1) == 0 and n.bit_length() - 1 >= POWER_OF_TWO_FROM:
        return "2" + str(n.bit_length() - 1).translate(_SUPERSCRIPTS)
    if len(str(n).rstrip("0")) <= 3:
        scale, prefix = next((scale, prefix) for scale, prefix in PREFIXES if n >= scale)
        return f"{n / scale:g}{prefix}"
    return str(n)


def size_label(size: float) -> str:
    """A size as a row label or a sentence names it: `n=2²⁰`."""
    return f"n={size_text(size)}"

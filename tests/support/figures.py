"""Reports compared where the same figures may be summed in another order."""

from __future__ import annotations

import re
from typing import Any

_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def same_but_last_digit(a: Any, b: Any, where: str = "") -> None:
    """`a` and `b` (JSON documents) equal, but for the last digit of a figure: a window sum read
    from the hourly rules adds the hours' sums, the raw one adds the samples in one go, and
    floating point addition in another order may differ in its last bit, which a rounded figure
    shows where it falls on a rounding boundary (everything else is equal to the bit: hourly
    statistics, counts, maxima)."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            same_but_last_digit(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same_but_last_digit(x, y, f"{where}[{i}]")
    elif isinstance(a, float | int) and isinstance(b, float | int) and a != b:
        assert abs(a - b) <= max(0.0101, 1e-9 * abs(a)), (where, a, b)
    elif isinstance(a, str) and isinstance(b, str) and a != b:
        assert _NUMBER.sub("#", a) == _NUMBER.sub("#", b), (where, a, b)
    else:
        assert a == b, (where, a, b)

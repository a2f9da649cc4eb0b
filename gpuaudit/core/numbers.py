"""The one place where numbers that come from outside (JSON answers, labels, annotations, earlier
reports, Kubernetes quantities) are read. Every reader returns None instead of letting a malformed
value through: no NaN, no infinity, no boolean read as 1, no digit-like text (`"²"`, `"١"`) read
as a count."""

from __future__ import annotations

import math
from typing import Any


def json_number(value: Any) -> float | None:
    """A finite JSON number (int or float, not a bool) as a float; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return f if math.isfinite(f) else None


def whole_number(value: Any, default: int | None = None) -> int | None:
    """A non-negative whole number from an int or a string of ASCII digits (`"8"`); `default` for
    anything else (booleans, floats, `"8.0"`, `"-1"`, `"²"`)."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value if value >= 0 else default
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():
            return int(text)
    return default


def index_label(value: Any) -> int | None:
    """A device index written as a label (`gpu="3"`, `peer_gpu="7"`): ASCII digits only, at most
    six of them; None for anything else (`"²"`, `"-1"`, `" 3"`, `"1e3"`)."""
    if isinstance(value, str) and 0 < len(value) <= 6 and value.isascii() and value.isdigit():
        return int(value)
    return None


def sample_value(raw: Any) -> float | None:
    """A Prometheus sample value: the decimal string the HTTP API writes (`"0.5"`), or a JSON
    number; None unless it is finite (`"NaN"`, `"+Inf"`), and for booleans and anything else."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        return None
    try:
        f = float(raw)
    except (ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


def sample_time(raw: Any) -> float | None:
    """A Prometheus sample time: a finite JSON number of unix seconds; None for anything else
    (strings, booleans, null)."""
    return json_number(raw)


_SUFFIXES = {
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
}


def quantity(raw: Any) -> float | None:
    """A Kubernetes resource quantity (`"8"`, `8`, `"1k"`, `"500m"`, `"2Gi"`, `"1e3"`) as a
    finite non-negative float; None when absent or unreadable (`"nan"`, `"Infinity"`, `"²"`,
    `"-1"`, a boolean)."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        f = json_number(raw)
        return f if f is not None and f >= 0 else None
    if not isinstance(raw, str):
        return None
    text = raw.strip()
    if not text.isascii() or len(text) > 64:
        return None
    mult = 1.0
    for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "m", "k", "M", "G", "T", "P", "E"):
        if text.endswith(suffix):
            text, mult = text[: -len(suffix)], _SUFFIXES[suffix]
            break
    # Only the characters of a decimal number: no "nan", "inf", "infinity" or "1_0".
    if not text or text.strip("0123456789.eE+") or text.startswith(("e", "E")):
        return None
    try:
        f = float(text) * mult
    except (ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None

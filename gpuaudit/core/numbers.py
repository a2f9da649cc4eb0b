"""The one place where numbers that come from outside (JSON answers, labels, annotations, earlier
reports, Kubernetes quantities) are read. Every reader returns None instead of letting a malformed
value through: no NaN, no infinity, no boolean read as 1, no digit-like text (`"²"`, `"١"`) read
as a count."""

from __future__ import annotations

import math
import re
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


_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
"""Binary SI suffixes of a Kubernetes quantity, as powers of 2."""
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
"""Decimal SI suffixes of a Kubernetes quantity, as powers of 10."""
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))"
    r"(?:[eE](?P<exponent>[+-]?[0-9]+)|(?P<suffix>[KMGTPE]i|[numkMGTPE])?)"
)
"""The serialization format of `k8s.io/apimachinery/pkg/api/resource.Quantity`: a signed
decimal number (`8`, `1.5`, `1.`, `.5`, `-4`), then at most one suffix: binary SI (`Ki` ...
`Ei`), decimal SI (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`) or a decimal exponent (`e3`,
`E-2`). ASCII only: no spaces, no `nan`, `inf` or `1_0`, no digit-like text (`²`)."""


def signed_quantity(raw: Any) -> float | None:
    """A Kubernetes resource quantity (`"8"`, `8`, `"1k"`, `"500m"`, `"2Gi"`, `"1e3"`, `"-4"`)
    as a finite float, negative ones included; None when it is not one: text outside the
    quantity grammar (`"nan"`, `"Infinity"`, `"١٢"`, `"1e3Ki"`), a value no float
    holds (`"1e400"`), a boolean, or anything but a string or a JSON number."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        return json_number(raw)
    if not isinstance(raw, str) or len(raw) > 64:
        return None
    m = _QUANTITY.fullmatch(raw)
    if m is None or not raw.isascii():
        return None
    number, exponent, suffix = m.group("number"), m.group("exponent"), m.group("suffix") or ""
    try:
        if suffix in _BINARY:
            f = float(number) * 2.0 ** _BINARY[suffix]
        else:
            f = float(f"{number}e{int(exponent) if exponent else _DECIMAL[suffix]}")
    except (ValueError, OverflowError):
        return None
    return f + 0.0 if math.isfinite(f) else None  # + 0.0: no negative zero


def quantity(raw: Any) -> float | None:
    """A Kubernetes resource quantity (see `signed_quantity`) as a finite non-negative float;
    None when absent, unreadable or negative (`"nan"`, `"Infinity"`, `"²"`, `"-1"`, a
    boolean)."""
    f = signed_quantity(raw)
    return f if f is not None and f >= 0 else None

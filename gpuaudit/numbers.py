"""The one place where numbers that come from outside (JSON answers, labels, annotations, settings,
earlier reports) are read. Every reader returns None, or raises `ConfigError` where a caller asked
for an error, instead of letting a malformed value through."""

from __future__ import annotations

import math
from typing import Any

from gpuaudit.errors import ConfigError


def json_number(value: Any) -> float | None:
    """A JSON number (int or float, not a bool) as a float; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def lenient_number(value: Any) -> float | None:
    """A number from a JSON number or a numeric string (`"1.5"`); None for anything else and for
    NaN."""
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return None if math.isnan(f) else f


def whole_number(value: Any, default: int | None = None) -> int | None:
    """A non-negative whole number from an int or a string of ASCII digits (`"8"`); `default` for
    anything else (booleans, floats, `"8.0"`, `"-1"`, `"²"`)."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():
            return int(text)
    return default


def setting_number(value: Any, what: str) -> float:
    """A number a user wrote in a config file; `ConfigError` naming `what` otherwise."""
    f = json_number(value)
    if f is None:
        raise ConfigError(f"{what} must be a number, got {value!r}")
    return f

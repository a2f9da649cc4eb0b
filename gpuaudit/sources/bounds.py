"""The bounds of one live collection: how long one request may take, how large one answer may
be, how many objects one Kubernetes list may hold and how many queries one collection may send.
A backend that goes past one gets one clear error, or a list marked incomplete; it never makes
gpuaudit wait, grow or ask without end.

The command line sets them (`--timeout`, `--max-answer-mib`, `--max-objects`,
`--max-queries`, `--parallel-queries`); README's "Limits" lists them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuaudit.core.errors import ConfigError

MIB = 1024 * 1024

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_ANSWER_MIB = 512
DEFAULT_OBJECTS = 300_000
DEFAULT_QUERIES = 10_000
DEFAULT_PARALLEL = 1

_MAX_TIMEOUT_S = 86_400.0
_MAX_ANSWER_MIB = 64 * 1024
_MAX_OBJECTS = 100_000_000
_MAX_QUERIES = 1_000_000
_MAX_PARALLEL = 16


@dataclass(frozen=True)
class Limits:
    """The bounds of one live collection."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    """Seconds one HTTP request may take from start to last byte (`--timeout`): connecting,
    waiting and reading together, on Prometheus and on the Kubernetes API alike."""
    answer_bytes: int = DEFAULT_ANSWER_MIB * MIB
    """The largest answer read, after decompression (`--max-answer-mib`): one Prometheus answer
    or one Kubernetes list page."""
    objects: int = DEFAULT_OBJECTS
    """The most objects read of one Kubernetes resource, over all its pages and namespaces
    (`--max-objects`; twice the 150,000 pods Kubernetes supports in one cluster)."""
    queries: int = DEFAULT_QUERIES
    """The most Prometheus queries one collection sends, chunks and shards included
    (`--max-queries`)."""
    parallel: int = DEFAULT_PARALLEL
    """The most Prometheus queries in flight at once (`--parallel-queries`)."""

    def pages(self, page_size: int) -> int:
        """The most pages read of one Kubernetes resource: enough for `objects` in pages at
        least half full, and a few more (a server may send short pages, never endless ones)."""
        return 2 * math.ceil(self.objects / max(1, page_size)) + 10


def limits_from(
    timeout_s: float = DEFAULT_TIMEOUT_S,
    answer_mib: float = DEFAULT_ANSWER_MIB,
    objects: float = DEFAULT_OBJECTS,
    queries: float = DEFAULT_QUERIES,
    parallel: float = DEFAULT_PARALLEL,
) -> Limits:
    """The limits given as option values, checked: `ConfigError` for a value that is not a
    positive number (a whole one where it counts) within reason."""
    t = _number("--timeout", timeout_s, 0.0, _MAX_TIMEOUT_S, whole=False)
    return Limits(
        timeout_s=t,
        answer_bytes=int(_number("--max-answer-mib", answer_mib, 1, _MAX_ANSWER_MIB)) * MIB,
        objects=int(_number("--max-objects", objects, 1, _MAX_OBJECTS)),
        queries=int(_number("--max-queries", queries, 1, _MAX_QUERIES)),
        parallel=int(_number("--parallel-queries", parallel, 1, _MAX_PARALLEL)),
    )


def _number(flag: str, value: float, low: float, high: float, whole: bool = True) -> float:
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low < value <= high
        if not whole
        else isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and float(value).is_integer()
        and low <= value <= high
    )
    if not ok:
        kind = "a whole number" if whole else "a number of seconds"
        lowest = f"at least {low:g}" if whole else f"above {low:g}"
        raise ConfigError(f"{flag} must be {kind} {lowest} and at most {high:g}, got {value!r}")
    return float(value)

"""The backend's own account of its work (Prometheus' `stats` query parameter), summed per query
kind, beside the time gpuaudit waited for the answers: the manifest's `backend_timings`, which
tell whether the backend or gpuaudit is slow.

Prometheus answers `stats=all` with `data.stats`: `timings` (seconds spent preparing,
evaluating, sorting, queued) and `samples` (`totalQueryableSamples`, `peakSamples`).
VictoriaMetrics, Thanos and others ignore the parameter or answer other keys: only the known
keys are read, as finite non-negative numbers, so an answer without them counts as a query
without stats and nothing else changes.
"""

from __future__ import annotations

import math
from typing import Any

PARAMS = {"stats": "all"}
"""The query parameters that ask for the statistics."""

TIMINGS = (
    "evalTotalTime",
    "resultSortTime",
    "queryPreparationTime",
    "innerEvalTime",
    "execQueueTime",
    "execTotalTime",
)
SAMPLES = ("totalQueryableSamples", "peakSamples")


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    x = float(v)
    return x if math.isfinite(x) and 0 <= x < 1e18 else None


class BackendTimings:
    """The statistics of every answer, summed per query kind (`discovery`, `window`,
    `hourly`); `peakSamples` is the largest, the others are sums."""

    def __init__(self) -> None:
        self.kinds: dict[str, dict[str, float]] = {}

    def add(self, kind: str, body: Any, wall_s: float) -> None:
        """Count one answer of `kind`, which took `wall_s` seconds from request to last byte."""
        k = self.kinds.setdefault(kind, {"queries": 0, "with_stats": 0, "wall_s": 0.0})
        k["queries"] += 1
        k["wall_s"] += max(0.0, wall_s)
        data = body.get("data") if isinstance(body, dict) else None
        st = data.get("stats") if isinstance(data, dict) else None
        if not isinstance(st, dict):
            return
        timings, samples = st.get("timings"), st.get("samples")
        found = False
        for group, keys in ((timings, TIMINGS), (samples, SAMPLES)):
            if not isinstance(group, dict):
                continue
            for key in keys:
                x = _number(group.get(key))
                if x is None:
                    continue
                found = True
                k[key] = max(k.get(key, 0.0), x) if key == "peakSamples" else k.get(key, 0.0) + x
        if found:
            k["with_stats"] += 1

    def to_dict(self) -> dict[str, dict[str, float | int]]:
        """The manifest's `backend_timings`: per kind, seconds rounded to the millisecond,
        counts as whole numbers."""
        out: dict[str, dict[str, float | int]] = {}
        for kind, k in sorted(self.kinds.items()):
            out[kind] = {
                key: (int(v) if key in ("queries", "with_stats", *SAMPLES) else round(v, 3))
                for key, v in k.items()
            }
        return out

"""Narrowing a snapshot's audit to part of its recorded window (`--window`, `--end` on
`--snapshot` or `--demo`).

A snapshot records its answers over one window, on one grid of buckets. Inside it, the hourly
series can be cut to any run of whole buckets: held time, activity means, the violation
counters' increases (recorded per bucket) and everything the checks read per bucket follow
exactly. What was recorded only for the whole window (its peaks, framebuffer, power, GPU health
and NVLink status), and the 95th percentiles the checks read only beside the framebuffer, are
not cut: on a narrowed window they are missing, and the checks that need them are skipped with
the reason. The Kubernetes objects were read at the recorded window's end: a window ending
earlier cannot say what the cluster held or waited for at its end, so the checks of that state
are skipped too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from gpuaudit.core.errors import ConfigError


@dataclass(frozen=True)
class Narrowed:
    """The part of a snapshot's recorded window an audit covers."""

    start: float
    end: float
    recorded_start: float
    recorded_end: float

    @property
    def earlier_end(self) -> bool:
        """Whether it ends before the recorded window (and the Kubernetes objects' reading)."""
        return self.end < self.recorded_end

    def note(self) -> str:
        """The warning that says what was audited, and what could not be."""
        return (
            f"audited {iso(self.start)} to {iso(self.end)} of the snapshot's recorded window "
            f"({iso(self.recorded_start)} to {iso(self.recorded_end)}): statistics recorded "
            "for the whole window only (activity peaks and 95th percentiles, framebuffer, "
            "power, GPU health, NVLink status) are missing, and the checks that need them are "
            "skipped"
        )


def iso(ts: float) -> str:
    """A time as RFC 3339 in UTC, to the second."""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def requested(
    recorded: Mapping[str, Any], window_s: float | None, end: float | None
) -> tuple[float, float] | None:
    """The (start, end) that `--window` (None: not given) and `--end` (None: not given) ask for
    on a snapshot recorded over `recorded` (the manifest's window): `--end` alone keeps the
    recorded start, `--window` alone the recorded end. None when neither is given."""
    if window_s is None and end is None:
        return None
    rec_start, rec_end = float(recorded["start"]), float(recorded["end"])
    stop = rec_end if end is None else float(end)
    begin = rec_start if window_s is None else stop - float(window_s)
    return begin, stop


def narrow(recorded: Mapping[str, Any], window: tuple[float, float] | None) -> Narrowed | None:
    """`window` checked against the recorded window and its bucket grid; None when it is the
    recorded window itself (or not given). Outside the recorded window, or off its grid, is a
    `ConfigError` of one line."""
    if window is None:
        return None
    rec_start, rec_end = float(recorded["start"]), float(recorded["end"])
    step = int(recorded["step"])
    start, end = window
    span = f"{iso(rec_start)} to {iso(rec_end)}"
    if end <= start:
        raise ConfigError(f"--window must be longer than 0 (got {_span(end - start)})")
    if start < rec_start or end > rec_end:
        raise ConfigError(
            f"--window/--end ask for {iso(start)} to {iso(end)}, outside the snapshot's "
            f"recorded window ({span}): choose --end within it and a --window of at most "
            f"{_span(rec_end - rec_start)}"
        )
    off = (end - rec_start) % step
    if off:
        before = end - off
        raise ConfigError(
            f"--end {iso(end)} is not on the snapshot's bucket grid (buckets of {_span(step)} "
            f"ending at {iso(rec_start + step)}, {iso(rec_start + 2 * step)} ...): use "
            f"{iso(before)} or {iso(before + step)}"
        )
    if (end - start) % step:
        raise ConfigError(
            f"--window {_span(end - start)} is not a whole number of the snapshot's "
            f"{_span(step)} buckets"
        )
    if start == rec_start and end == rec_end:
        return None
    return Narrowed(start, end, rec_start, rec_end)

"""Container restarts of a pod, from its status: what the API says of each container's current
state and its last termination, and the spans in which a container was down.

The API keeps, per container, the restart count (`restartCount`), the current state (running
since `state.running.startedAt`, or waiting with `state.waiting.reason`, e.g.
`CrashLoopBackOff`) and only the LAST termination (`lastState.terminated`: `reason`,
`exitCode`, `startedAt`, `finishedAt`). So the down time of the last restart is known exactly:
from its `finishedAt` to the current run's `startedAt` (or, for a container still waiting, to
when the pod was read); earlier restarts are known only by their count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Container:
    """What the API says of one container's restarts."""

    name: str
    restarts: int
    """`restartCount` (0 where unreadable)."""
    waiting: str
    """`state.waiting.reason` (`CrashLoopBackOff` ...); empty when it is not waiting."""
    running_since: float | None
    """`state.running.startedAt` (unix seconds); None when it is not running or unknown."""
    last_reason: str
    """`lastState.terminated.reason` (`OOMKilled`, `Error` ...); empty without one."""
    last_exit: int | None
    """`lastState.terminated.exitCode`."""
    last_started: float | None
    """`lastState.terminated.startedAt`: when the run that ended last had started."""
    last_finished: float | None
    """`lastState.terminated.finishedAt`: when it ended."""


def down_spans(cs: Sequence[Container], read_at: float) -> list[tuple[float, float]]:
    """The spans (start, end) in which a container of the pod was known to be down after its
    last termination: from `finishedAt` to the current run's start, or to `read_at` (when the
    pod was read) for a container that has not run again. Overlapping spans are merged."""
    spans: list[tuple[float, float]] = []
    for c in cs:
        if c.last_finished is None:
            continue
        if c.running_since is not None and c.running_since >= c.last_finished:
            end = c.running_since
        elif c.running_since is None:
            end = read_at
        else:
            continue  # the current run started before the termination: not consistent
        if end > c.last_finished:
            spans.append((c.last_finished, end))
    merged: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def overlap(spans: Sequence[tuple[float, float]], lo: float, hi: float) -> float:
    """Seconds of (lo, hi] that `spans` cover (merged spans)."""
    return float(sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in spans))

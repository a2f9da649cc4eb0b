"""Where gpuaudit's recorded series (`gpuaudit rules`) can stand in for the raw ones, exactly.

The recording group runs every 5 minutes at times of its own (Prometheus offsets each group by
a hash of its name), each point summing, counting and maximising the raw samples of the 5
minutes that end at it. Its last rule writes `catalogue.HEARTBEAT` at every evaluation. Two
queries, whatever the cluster size, find out where the recorded series hold:

1. `timestamp(HEARTBEAT)` at the window's end: the evaluation times (their phase on the
   5-minute grid) and that exactly one server records them;
2. a range query of the heartbeat at every evaluation time of the window: the evaluations that
   are missing (the server was down, the rules were not loaded yet).

The recorded series are used after the last missing evaluation (`Coverage.since_ms`), the raw
ones before it. Any range a query reads, a window chunk or an hourly bucket `(s, t]`, is cut
into at most three pieces (`Coverage.parts`): the raw samples from `s` to the first evaluation
time `a`, the recorded points of the evaluations after `a` up to the last one `b`, the raw
samples from `b` to `t`. Sums and counts add up and maxima max up over the pieces, so the
figures are those of the raw series: no sample is read twice, none is left out. A range
starting before `since_ms` is read raw up to it.

Range selectors are closed at both ends before Prometheus 3.0 (`[t - r, t]`) and open on the
left from 3.0 on (`(t - r, t]`); the pieces follow the server's own reading of a raw range,
so that they add up to what the raw query would have read on that server.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuaudit.sources.interface import Window
from gpuaudit.sources.prometheus import catalogue
from gpuaudit.sources.prometheus.catalogue import Part
from gpuaudit.sources.prometheus.http import PromClient, PromError

INTERVAL_MS = 300_000
"""The recording group's evaluation interval (`rules.RULE_INTERVAL_S`)."""
MAX_POINTS = 11_000
"""Prometheus's cap on points per series of a range query: the heartbeat is read in pieces of
at most this many evaluations (38 days each)."""


@dataclass(frozen=True)
class Coverage:
    """Where the recorded series of `metrics` stand in for the raw ones."""

    metrics: frozenset[str]
    phase_ms: int
    """The evaluation times, modulo `INTERVAL_MS`, in unix milliseconds."""
    since_ms: int
    """An evaluation time: the recorded series hold every evaluation after it up to the
    window's end."""
    left_open: bool
    """Whether the server reads ranges open on the left (Prometheus 3.0 on)."""

    def floor(self, t_ms: int) -> int:
        """The last evaluation time at or before `t_ms`."""
        return t_ms - (t_ms - self.phase_ms) % INTERVAL_MS

    def ceil(self, t_ms: int) -> int:
        """The first evaluation time at or after `t_ms`."""
        return t_ms + (self.phase_ms - t_ms) % INTERVAL_MS

    def parts(self, s_ms: int, t_ms: int) -> tuple[Part, ...] | None:
        """The pieces that read the range `(s, t]` (`[s, t]` before Prometheus 3.0) at time
        `t`, or None when no recorded point fits in it (read it raw)."""
        eps = 0 if self.left_open else 1
        a = max(self.ceil(s_ms), self.since_ms)
        b = self.floor(t_ms)
        # A raw edge a millisecond long cannot be written as a closed range: read one
        # evaluation's 5 minutes raw instead.
        if 0 < a - s_ms <= eps:
            a += INTERVAL_MS
        if 0 < t_ms - b <= eps:
            b -= INTERVAL_MS
        if b <= a:
            return None
        out: list[Part] = []
        if a > s_ms:
            out.append(Part(False, a - s_ms - eps, t_ms - a + eps))
        out.append(Part(True, b - a - eps, t_ms - b))
        if t_ms > b:
            out.append(Part(False, t_ms - b - eps, 0))
        return tuple(out)

    def covers(self, w: Window) -> str:
        """`whole`, `part` or `none`: how much of the window the recorded series read."""
        a = max(self.ceil(w.start * 1000), self.since_ms)
        if self.floor(w.end * 1000) <= a:
            return "none"
        return "whole" if self.since_ms <= w.start * 1000 else "part"

    def to_dict(self, w: Window) -> dict[str, object]:
        """The manifest's `capabilities.recorded` object."""
        return {
            "metrics": sorted(self.metrics),
            "phase_ms": self.phase_ms,
            "since": self.since_ms / 1000,
            "covers": self.covers(w),
        }


def _left_open(version: str) -> bool:
    head = version.split(".", 1)[0]
    return head.isdecimal() and int(head) >= 3


def find(
    client: PromClient,
    w: Window,
    metrics: set[str],
    version: str,
    notes: list[str],
) -> Coverage | None:
    """The coverage of the recorded series of `metrics` over `w`, or None (with a note in
    `notes` saying why) when they cannot be used at all."""
    if not metrics:
        return None
    hb = catalogue.HEARTBEAT
    try:
        last = client.query(f"timestamp({hb})", w.end)
    except PromError as exc:
        notes.append(f"recorded series not used: reading {hb} failed ({str(exc)[:100]})")
        return None
    rows = last.body["data"]["result"]
    if len(rows) != 1:
        why = (
            f"{hb} has no point in the 5 minutes before the window's end (the rules are not "
            "running, or were written by a gpuaudit before 0.9: apply `gpuaudit rules` again)"
            if not rows
            else f"{len(rows)} servers record {hb} into this backend (their recorded series "
            "would add up)"
        )
        notes.append(f"recorded series not used: {why}; raw series read")
        return None
    try:
        last_ms = round(float(rows[0]["value"][1]) * 1000)
    except (KeyError, IndexError, TypeError, ValueError):
        notes.append(f"recorded series not used: the answer for {hb} has no timestamp")
        return None
    cov = Coverage(frozenset(metrics), last_ms % INTERVAL_MS, 0, _left_open(version))
    since = _since(client, w, cov, notes)
    if since is None:
        return None
    cov = Coverage(cov.metrics, cov.phase_ms, since, cov.left_open)
    state = cov.covers(w)
    if state == "none":
        notes.append(
            "recorded series not used: the recording rules have not run through the window's "
            "end without a gap; raw series read"
        )
        return None
    if state == "part":
        notes.append(
            f"recorded series read after {since // 1000} (unix seconds), where the recording "
            "rules have run without a gap; raw series before it"
        )
    return cov


def _since(client: PromClient, w: Window, cov: Coverage, notes: list[str]) -> int | None:
    """The last evaluation time of the window without a heartbeat point (the window's start
    when there is none)."""
    first = cov.ceil(w.start * 1000 + 1)
    last = cov.floor(w.end * 1000)
    if last < first:
        return None
    return missing_since(client, catalogue.HEARTBEAT, first, last, INTERVAL_MS, notes)


def missing_since(
    client: PromClient,
    heartbeat: str,
    first: int,
    last: int,
    interval_ms: int,
    notes: list[str],
) -> int | None:
    """The last of the evaluation times `first`, `first + interval_ms` ... `last` (unix
    milliseconds) at which `heartbeat` has no point (`first - interval_ms` when it has one at
    each), read in range queries of at most `MAX_POINTS` evaluations; None, with a note, when
    the backend does not answer."""
    missing = first - interval_ms
    expr = f"count_over_time({heartbeat}[1s])"
    lo = first
    while lo <= last:
        hi = min(last, lo + (MAX_POINTS - 1) * interval_ms)
        try:
            ans = client.query_range(expr, lo / 1000, hi / 1000, interval_ms / 1000)
        except PromError as exc:
            notes.append(f"recorded series not used: reading the heartbeat failed ({exc})"[:200])
            return None
        seen = {
            round(v[0] * 1000)
            for row in ans.body["data"]["result"]
            if isinstance(row, dict) and isinstance(row.get("values"), list)
            for v in row["values"]
            if isinstance(v, list) and v and isinstance(v[0], (int, float))
        }
        for t in range(hi, lo - 1, -interval_ms):
            if t not in seen:
                missing = max(missing, t)
                break
        lo = hi + interval_ms
    return missing


def hourly_parts(cov: Coverage, s: int, t: int, step: int) -> tuple[Part, ...] | None:
    """How `(s, t]` (seconds) is read: pieces for a window or a chunk (`step` 0); for a bucket
    of a range query (`t - s == step`) only the recorded points, or None (raw). Pieces cost a
    range query at every step: each piece is a vector of every series, tagged and joined with
    the others (`catalogue._combined`) at each of the window's steps. Measured over a week of
    hourly buckets (`benchmarks/README.md`, round 7), the activity mean in pieces took several
    times as long as read raw, and read from the recorded points alone less than raw. So
    the buckets read the recorded series only where the evaluations fall on their edges (the
    window's end on the evaluation grid, a step of whole evaluation intervals)."""
    parts = cov.parts(s * 1000, t * 1000)
    if t - s != step or parts is None:
        return parts
    if (step * 1000) % INTERVAL_MS or any(not p.recorded for p in parts):
        return None
    return parts

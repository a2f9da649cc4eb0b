"""gpuaudit's hourly recording rules (`gpuaudit rules`, group `gpuaudit.hourly`) and where a scan
reads them in place of the raw series.

**The rules.** One rule per distinct statistic the scan reads (`rules`), derived from the
catalogue, so that a new query gets its rule without a list to edit: the expression is exactly
the PromQL the raw scan sends for one hourly bucket (`QuerySpec.promql(3600, ...)`). An hourly
query's own text (a `changes` count without its `!= F`, an `unless` query's own metric and its
`unless` metric each on its own); a window sum, count or maximum the same statistic over
`[3600s]`. The same text evaluated at the same time gives the same value, to the bit. What
cannot be a rule is left out and read raw: a window p95, XID onsets and counter increases over
the window (an hour's do not add up to the window's), and `serving_busy` (its metric is a
regular expression over other exporters' series). The group's last rule is a heartbeat,
`HEARTBEAT` = `vector(FINGERPRINT)`, the fingerprint an integer below 2^24 of the group's
rules (names and expressions): it says when the group ran, and that it ran exactly these
expressions for the pod label spelling in use.

**Reading them** (`find`, `HourlyCoverage`). Two queries, whatever the cluster size: the
heartbeat's points in the hour before the requested end (one series, its value the expected
fingerprint, its timestamp the last evaluation), then the heartbeat at every evaluation of the
window (`recorded.missing_since`): the evaluations missing give `since`. No rules API is
needed (vmalert writing into VictoriaMetrics has none). The window's end then moves to that
last evaluation (up to an hour earlier), so that every bucket of the scan ends on an
evaluation, read raw or recorded. The window is whole seconds; an evaluation's sub-second part
(`offset_ms`: a Prometheus group's offset is a hash, in nanoseconds, stored to the
millisecond) is added to the time of every query, recorded in the manifest, and taken off the
answers' timestamps by the reader (`gpuaudit.inventory.parse`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from gpuaudit.sources.interface import Window
from gpuaudit.sources.prometheus import catalogue
from gpuaudit.sources.prometheus.catalogue import AGGS, QuerySpec
from gpuaudit.sources.prometheus.http import PromClient, PromError
from gpuaudit.sources.prometheus.recorded import missing_since

STEP_S = 3600
"""The hourly group's evaluation interval, and the only `--step` it serves."""
INTERVAL_MS = STEP_S * 1000
GROUP = "gpuaudit.hourly"
HEARTBEAT = "gpuaudit:recording_rules:evaluated_1h"
"""The group's last rule: `vector(FINGERPRINT)` (`fingerprint`)."""


@dataclass(frozen=True)
class Rule:
    """One hourly recording rule: the series it writes and its expression."""

    record: str
    expr: str


def _own(spec: QuerySpec, metric: str) -> QuerySpec | None:
    """The query whose one-hour text a rule records for `metric` of `spec` (its own metric
    or its `unless` metric), or None when it cannot be a rule."""
    if spec.stat == "busy" or (spec.kind == "window" and spec.stat not in AGGS):
        return None
    return replace(spec, metric=metric, unless="", changes=False)


def _texts(spec: QuerySpec, spelling: str) -> list[tuple[str, str]]:
    """(metric, one-hour PromQL) of what `spec` reads: its own metric, then its `unless`
    metric; empty when it cannot be read from rules."""
    out = []
    for metric in (spec.metric, spec.unless) if spec.unless else (spec.metric,):
        own = _own(spec, metric)
        if own is None:
            return []
        out.append((metric, own.promql(STEP_S, spelling)))
    return out


def _build(spelling: str) -> tuple[tuple[Rule, ...], dict[str, tuple[str, ...]]]:
    rules: dict[str, Rule] = {}
    names: set[str] = set()
    reads: dict[str, tuple[str, ...]] = {}
    for spec in catalogue.CATALOGUE:
        got = []
        for metric, expr in _texts(spec, spelling):
            if expr not in rules:
                name = f"gpuaudit:{metric.lower()}:{spec.stat}_1h"
                if name in names:  # one metric's statistic grouped another way
                    name = f"gpuaudit:{metric.lower()}:{spec.stat}_{spec.id}_1h"
                names.add(name)
                rules[expr] = Rule(name, expr)
            got.append(rules[expr].record)
        if got:
            reads[spec.id] = tuple(got)
    return tuple(rules.values()), reads


def rules(spelling: str = "exported") -> tuple[Rule, ...]:
    """The group's recording rules, the heartbeat left out, in catalogue order."""
    return _build(spelling)[0]


def reads(spelling: str) -> dict[str, tuple[str, ...]]:
    """Query id -> the rules it reads (its own metric's, then its `unless` metric's); a query
    not named is read raw."""
    return _build(spelling)[1]


def fingerprint(spelling: str = "exported") -> int:
    """An integer below 2^24 (exact in a float64 sample) of the group's rules, canonical: the
    names and expressions in order."""
    text = json.dumps([[r.record, r.expr] for r in rules(spelling)], separators=(",", ":"))
    return int(hashlib.sha256(text.encode()).hexdigest()[:6], 16)


def group(spelling: str = "exported") -> dict[str, Any]:
    """The `gpuaudit.hourly` rule group."""
    body: list[dict[str, Any]] = [{"record": r.record, "expr": r.expr} for r in rules(spelling)]
    body.append({"record": HEARTBEAT, "expr": f"vector({fingerprint(spelling)})"})
    return {"name": GROUP, "interval": "1h", "rules": body}


def recorded_query(
    spec: QuerySpec,
    spelling: str,
    selector: str,
    range_s: int,
    full: int | str | None = None,
    first: int | None = None,
) -> str:
    """The PromQL that reads `spec` from its hourly rules: for an hourly query, the recorded
    series' evaluation at each bucket's end (a count `!= full`, an `unless` query's own rule
    `unless` the other's), as `last_over_time` over the hour less a second, not a plain
    selector: VictoriaMetrics' lookback for a plain selector grows with the series' own interval
    (an hour here), so the evaluation an hour earlier would stand in for one that wrote nothing
    (a pod's series after it ended, an hour without an XID onset counted again); for a window
    query over a chunk of `range_s` seconds, the sum (or maximum) of the chunk's evaluations: a
    range of `range_s - 1` seconds, so that Prometheus 2's closed ranges and 3's open ones both
    take exactly the chunk's evaluations (and the hour less a second, one evaluation)."""
    names = reads(spelling)[spec.id]

    sel = f"{{{selector}}}" if selector else ""
    if spec.kind == "window":
        fn = "max_over_time" if spec.stat == "max" else "sum_over_time"
        return f"{fn}({names[0]}{sel}[{range_s - 1}s])"

    def point(name: str, offset: int = 0) -> str:
        return f"last_over_time({name}{sel}[{STEP_S - 1}s]{f' offset {offset}s' if offset else ''})"

    def text(offset: int = 0) -> str:
        if len(names) == 1:
            return point(names[0], offset)
        return f"({point(names[0], offset)} unless {point(names[1], offset)})"

    if not spec.changes:
        return text()
    if full is not None:
        return f"{text()} != {full}"
    return catalogue.changed(text(), text(STEP_S), first)


@dataclass(frozen=True)
class HourlyCoverage:
    """Where the hourly rules stand in for the raw series, and the window they put the scan
    on."""

    fingerprint: int
    requested_end: int
    """The window's end the scan was asked for (unix seconds)."""
    last_ms: int
    """The last evaluation at or before it (unix milliseconds): the moved window's end."""
    since_ms: int
    """An evaluation time: the rules hold every evaluation after it up to `last_ms`."""

    @property
    def offset_ms(self) -> int:
        """The evaluations' sub-second part, added to the time of every query."""
        return self.last_ms % 1000

    def window(self, w: Window) -> Window:
        """`w` moved to end on the last evaluation, whole seconds (same length and step)."""
        end = self.last_ms // 1000
        return Window(end - w.seconds, end, w.step)

    def recorded(self, t: int) -> bool:
        """Whether the bucket ending at `t` (whole seconds, on the moved window's grid) is
        read from the rules."""
        return t * 1000 + self.offset_ms > self.since_ms

    def covers(self, w: Window) -> str:
        """`whole`, `part` or `none` of the (moved) window `w`."""
        if not self.recorded(w.end):
            return "none"
        return "whole" if self.recorded(w.start + w.step) else "part"

    def since(self, w: Window) -> int:
        """The grid time (seconds) of `w` after which buckets are recorded (`w.start` when
        all are)."""
        return max(w.start, (self.since_ms - self.offset_ms) // 1000)

    def to_dict(self, w: Window) -> dict[str, object]:
        """The manifest's `capabilities.recorded_hourly` object."""
        return {
            "fingerprint": self.fingerprint,
            "phase_ms": self.last_ms % INTERVAL_MS,
            "offset_ms": self.offset_ms,
            "since": self.since_ms / 1000,
            "covers": self.covers(w),
            "requested_end": self.requested_end,
            "end": w.end,
        }


def find(client: PromClient, w: Window, spelling: str, notes: list[str]) -> HourlyCoverage | None:
    """The hourly rules' coverage of the window `w` would move to, or None (a note says why
    when the heartbeat exists but cannot be used)."""
    if spelling not in ("exported", "pod"):
        return None
    try:
        ans = client.query(f"{HEARTBEAT}[{STEP_S}s]", w.end, rtype="matrix")
    except PromError as exc:
        notes.append(f"hourly rules not used: reading {HEARTBEAT} failed ({str(exc)[:100]})")
        return None
    rows = ans.body["data"]["result"]
    if not rows:
        return None
    if len(rows) != 1:
        notes.append(
            f"hourly rules not used: {len(rows)} series of {HEARTBEAT} in this backend (more "
            "than one server records them: their recorded series would add up)"
        )
        return None
    try:
        t, value = rows[0]["values"][-1]
        last_ms, got = round(float(t) * 1000), float(value)
    except (KeyError, IndexError, TypeError, ValueError):
        notes.append(f"hourly rules not used: the answer for {HEARTBEAT} cannot be read")
        return None
    want = fingerprint(spelling)
    if got != want:
        notes.append(
            f"hourly rules not used: {HEARTBEAT} is {got:g}, not {want} (the rules were written "
            f"by another gpuaudit or for another --pod-label than {spelling}): apply `gpuaudit "
            "rules` again; 5-minute rules or raw series read"
        )
        return None
    cov = HourlyCoverage(want, w.end, last_ms, last_ms)
    moved = cov.window(w)
    first = moved.start * 1000 + cov.offset_ms + INTERVAL_MS
    since = missing_since(client, HEARTBEAT, first, last_ms, INTERVAL_MS, notes)
    if since is None:
        return None
    cov = replace(cov, since_ms=since)
    state = cov.covers(moved)
    if state == "none":
        notes.append(
            "hourly rules not used: their last evaluation before the window's end is missing"
        )
        return None
    return cov

"""Every Prometheus answer of a snapshot as arrays over holding keys, and the window statistics
the inventory builder reads from them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpuaudit.core import limits
from gpuaudit.core.errors import SnapshotError
from gpuaudit.inventory import columns as C
from gpuaudit.inventory import prom
from gpuaudit.inventory.arrays import Arr, distinct, join_at, regroup
from gpuaudit.snapshot import Snapshot
from gpuaudit.snapshot.answers import Answer, Interner, from_bytes, parse
from gpuaudit.sources.prometheus import catalogue as queries
from gpuaudit.sources.prometheus.catalogue import LABEL_NAME

Key = tuple[str, str, str]
"""(slot, namespace, pod): one holding; an unheld stretch has empty namespace and pod."""
Hourly = tuple[Arr, Arr, Arr, Arr]
"""(key numbers, bucket end times, values, sample counts) of a range query (`Parser.hourly`)."""


_TEXT_OR_NONE = frozenset({str, type(None)})
"""The types of label values `Parser.kid` keys on as they are (anything else counts as absent)."""


class Parser:
    """Every answer of a snapshot as arrays, with each series' holding key found once.

    Keys are numbered in the order first seen (`kid`); the label objects of a series are shared
    among the answers (`Interner`), so a series is recognised by identity after the first
    time its labels are normalised."""

    def __init__(self, snap: Snapshot) -> None:
        self.intern = Interner()
        self.answers: dict[str, list[Answer]] = {}
        self.dropped = self.malformed = 0
        window = snap.manifest.window
        self._start, self._end = float(window.start), float(window.end)
        self._step = float(window.step)
        self._offset = query_offset(snap.manifest.get("capabilities"))
        """Seconds every query was sent after its bucket end, taken off the range answers'
        times (`query_offset`)."""
        self.outside: dict[str, int] = {}
        """Query id -> points of its range answers outside the window, left out."""
        self.off_grid: dict[str, int] = {}
        """Query id -> points of its range answers inside the window but off its bucket grid
        (not at its start plus a whole number of steps), left out."""
        self.refused: dict[str, Refused] = {}
        """What was refused (a query id, or `act_mean` for window means) -> the values left
        out because their metric cannot read them (`value_range`)."""
        dcgm: list[str] = []
        """The query ids of DCGM series (not another exporter's, `QuerySpec.labels`)."""
        for qid, entries in snap.prometheus.items():
            parsed: list[Answer] = []
            for i, e in enumerate(entries):
                where = f"prometheus.{qid}[{i}]"
                if not isinstance(e, Mapping):
                    raise SnapshotError(f"{where} is not an object")
                answer = e.get("answer")
                raw = e.get("raw")
                if not isinstance(answer, Answer) and isinstance(raw, bytes):
                    answer = from_bytes(raw, where, self.intern)
                if not isinstance(answer, Answer):
                    if "body" not in e:
                        raise SnapshotError(f'{where} has no "body"')
                    answer = parse(e["body"], where, self.intern)
                self.dropped += answer.dropped
                self.malformed += answer.malformed
                parsed.append(self._bounded(qid, answer))
            self.answers[qid] = parsed
            spec = queries.BY_ID.get(qid)
            if spec is None or not spec.labels:
                dcgm.append(qid)
        caps = snap.manifest.get("capabilities", {})
        spelling = caps.get("pod_label") if isinstance(caps, Mapping) else None
        self.exporters: frozenset[tuple[str, str]] = frozenset()
        if spelling == "any":
            # Both kinds of series in one backend: each is read by its own spelling, and a
            # `pod` seen next to an `exported_pod` is an exporter, never a workload.
            self.exporters = frozenset(
                (str(m.get("namespace") or ""), str(m["pod"]))
                for qid in dcgm
                for a in self.answers[qid]
                for m in a.metrics
                if m.get("exported_pod") and isinstance(m.get("pod"), str)
            )
        elif spelling not in ("exported", "pod"):
            spelling = (
                "exported"
                if any(
                    "exported_pod" in m
                    for qid in dcgm
                    for a in self.answers[qid]
                    for m in a.metrics
                )
                else "pod"
            )
        self.spelling = str(spelling)
        label = caps.get("cluster_label") if isinstance(caps, Mapping) else None
        self.cluster_label = label if isinstance(label, str) and LABEL_NAME.fullmatch(label) else ""
        """The label a scan of every cluster grouped by (empty for one cluster)."""
        self._read = prom.READ_LABELS + ((self.cluster_label,) if self.cluster_label else ())
        self.clusters: set[str] = set()
        """The clusters the series name (a scan of every cluster)."""
        self._max_clusters = limits.CLUSTERS.value()
        self.keys: list[Key] = []
        self.ident: list[prom.Identity] = []
        self._kid: dict[Key, int] = {}
        self._by_obj: dict[int, int] = {}
        self._by_number = np.zeros(0, dtype=np.int64)
        """Side-file label-set number -> key number (-1: not seen yet); see `kids`."""
        self._by_items: dict[tuple[Any, ...], int] = {}
        self._windows: dict[str, tuple[Arr, Arr]] = {}
        recorded = snap.manifest.get("window")
        self.grid = (
            (float(recorded["start"]), int(recorded["step"]))
            if isinstance(recorded, Mapping)
            else (0.0, 1)
        )
        """The bucket grid (start, step): bucket ends lie at start + k x step."""
        self.full = _full_counts(snap.manifest.get("queries"))
        """Count query id -> the count a full bucket holds, which its answers leave out
        (`QuerySpec.changes`); a count query not named answers where a count changes."""

    def identity(self, labels: Mapping[str, Any]) -> prom.Identity:
        """One series' identity, in the snapshot's pod label spelling."""
        return prom.identity(labels, self.spelling, self.exporters, self.cluster_label)

    def _bounded(self, qid: str, a: Answer) -> Answer:
        """`a` without the values its metric cannot read, and for a range answer without the
        points outside the window or off its bucket grid (counted in `refused`, `outside` and
        `off_grid`): a range query's answer holds its own steps alone, so a point between them
        is not the backend's answer, and would count as one more bucket."""
        spec = queries.BY_ID.get(qid)
        if spec is None:
            return a
        lo, hi = value_range(spec.metric, spec.stat)
        if a.rtype == "vector":
            vals, ok = _in_range(a.values, lo, hi)
            if not ok.all():
                self.refuse(qid, spec.metric, (lo, hi), int(len(ok) - ok.sum()))
                keep = ok.tolist()
                metrics = [m for m, k in zip(a.metrics, keep, strict=True) if k]
                ts = a.ts[ok] if len(a.ts) == len(ok) else a.ts
                numbers = a.numbers[ok] if a.numbers is not None else None
                return replace(a, metrics=metrics, values=vals[ok], ts=ts, numbers=numbers)
            return replace(a, values=vals) if vals is not a.values else a
        if self._offset:
            a = replace(a, ts=a.ts - self._offset)
        inside = (a.ts > self._start) & (a.ts <= self._end)
        on, ts = _on_grid(a.ts, self._start, self._step)
        vals, ok = _in_range(a.vs, lo, hi)
        keep = inside & ok if on is None else inside & on & ok
        if keep.all():
            a = a if ts is a.ts else replace(a, ts=ts)
            return replace(a, vs=vals) if vals is not a.vs else a
        if not inside.all():
            self.outside[qid] = self.outside.get(qid, 0) + int(len(inside) - inside.sum())
        if on is not None:
            off = int((inside & ~on).sum())
            if off:
                self.off_grid[qid] = self.off_grid.get(qid, 0) + off
            inside &= on
        self.refuse(qid, spec.metric, (lo, hi), int((inside & ~ok).sum()))
        kept = np.zeros(len(keep) + 1, dtype=np.int64)
        np.cumsum(keep, out=kept[1:])
        return replace(a, offsets=kept[a.offsets], ts=ts[keep], vs=vals[keep])

    def refuse(self, what: str, metric: str, bounds: tuple[float, float], n: int) -> None:
        """Count `n` values of `what` left out for lying outside `bounds`."""
        if n:
            self.refused.setdefault(what, Refused(metric, *bounds)).n += n

    def release(self) -> None:
        """Let go of the answers once every series is read (`build(consume=True)`); the key
        numbers, identities and what was left out stay."""
        self.answers = {}
        self._windows.clear()
        # Looked up by the label objects' ids, which are reused once the objects are freed.
        self._by_obj.clear()

    def kid(self, labels: Mapping[str, Any]) -> int:
        """The key number of a series' labels."""
        k = self._by_obj.get(id(labels))
        if k is not None:
            return k
        # Series that differ only in labels `identity` does not read (`err_code`, `pci_bus_id`)
        # have one identity: normalise each distinct identity only once. (`identity` reads
        # string values only; anything else counts as absent.)
        items = tuple(map(labels.get, self._read))
        if not _TEXT_OR_NONE.issuperset(map(type, items)):
            items = tuple(v if isinstance(v, str) else None for v in items)
        k = self._by_items.get(items)
        if k is None:
            ident = self.identity(labels)
            key = (ident.slot, ident.namespace, ident.pod)
            k = self._kid.get(key)
            if k is None:
                k = self._kid[key] = len(self.keys)
                self.keys.append(key)
                self.ident.append(ident)
                self._count_cluster(ident.cluster)
            self._by_items[items] = k
        # The answers hold the label objects for the whole build, so ids are not reused.
        self._by_obj[id(labels)] = k
        return k

    def _count_cluster(self, cluster: str) -> None:
        if not cluster or cluster in self.clusters:
            return
        self.clusters.add(cluster)
        if len(self.clusters) > self._max_clusters:
            raise SnapshotError(
                f"the snapshot's series name more than {self._max_clusters:,} values of "
                f"{self.cluster_label}, the clusters one audit holds "
                f"({limits.CLUSTERS.env}); raise it if the snapshot is genuine"
            )

    def kids(self, answer: Answer) -> Arr:
        numbers = answer.numbers
        if numbers is not None and len(numbers) == len(answer.metrics):
            return self._kids_by_number(answer, numbers)
        known = self._by_obj.get
        kid = self.kid
        return np.array(
            [k if (k := known(id(m))) is not None else kid(m) for m in answer.metrics],
            dtype=np.int64,
        )

    def _kids_by_number(self, answer: Answer, numbers: Arr) -> Arr:
        """`kids` of an answer read from a side-file: a series is looked up by its label set's
        number (one label object per number), and `kid` asked once per number, not per row."""
        table = self._by_number
        top = int(numbers.max()) + 1 if len(numbers) else 0
        if top > len(table):
            table = self._by_number = np.concatenate(
                [table, np.full(top - len(table), -1, dtype=np.int64)]
            )
        got = table[numbers]
        new = np.flatnonzero(got < 0)
        if len(new):
            for i in new.tolist():
                number = int(numbers[i])
                if table[number] < 0:
                    table[number] = self.kid(answer.metrics[i])
            got = table[numbers]
        return got

    def window(self, qid: str) -> tuple[Arr, Arr]:
        """(key numbers, values) of every row of a window query's chunks, in order."""
        if qid not in self._windows:
            self._windows[qid] = self._window(qid)
        return self._windows[qid]

    def _window(self, qid: str) -> tuple[Arr, Arr]:
        parts = [(self.kids(a), a.values) for a in self.answers.get(qid, []) if a.rtype == "vector"]
        self._check(qid, "vector")
        if not parts:
            return np.empty(0, dtype=np.int64), np.empty(0)
        return np.concatenate([k for k, _ in parts]), np.concatenate([v for _, v in parts])

    def reduced(self, qid: str) -> tuple[Arr, Arr]:
        """(key numbers, values) of every series of a range query's chunks, each series' points
        reduced to one window figure (`REDUCED`: the largest bucket p95, the sum of bucket
        increases or onsets). Several series or chunks of one key are left for the caller to
        combine, as `window` leaves them."""
        if qid not in self._windows:
            self._windows[qid] = self._reduced(qid)
        return self._windows[qid]

    def _reduced(self, qid: str) -> tuple[Arr, Arr]:
        self._check(qid, "matrix")
        spec = queries.BY_ID.get(qid)
        how = np.maximum if spec is not None and REDUCED.get(spec.stat) == "max" else np.add
        ks: list[Arr] = []
        vs: list[Arr] = []
        for a in self.answers.get(qid, []):
            kids = self.kids(a)
            full = np.diff(a.offsets) > 0
            if full.any():
                # Each series' points are one block of `vs`: one reduction per block.
                ks.append(kids[full])
                vs.append(how.reduceat(a.vs, a.offsets[:-1][full]))
        if not ks:
            return np.empty(0, dtype=np.int64), np.empty(0)
        return np.concatenate(ks), np.concatenate(vs)

    def within(self, qid: str, start: float, end: float) -> tuple[Arr, Arr]:
        """(key numbers, values) of every point of a range query's chunks whose bucket ends in
        (`start`, `end`] (a narrowed window): one row per point, for the caller to combine as
        `reduced` combines them."""
        self._check(qid, "matrix")
        ks: list[Arr] = []
        vs: list[Arr] = []
        for a in self.answers.get(qid, []):
            keep = (a.ts > start) & (a.ts <= end)
            ks.append(np.repeat(self.kids(a), np.diff(a.offsets))[keep])
            vs.append(a.vs[keep])
        if not ks:
            return np.empty(0, dtype=np.int64), np.empty(0)
        return np.concatenate(ks), np.concatenate(vs)

    def labelled_sums(self, qid: str) -> list[tuple[Mapping[str, Any], float]]:
        """Every series of a range query's chunks, with its labels and its points summed (for
        `extra_by` labels; a sparse answer such as XID onsets)."""
        self._check(qid, "matrix")
        out: list[tuple[Mapping[str, Any], float]] = []
        for a in self.answers.get(qid, []):
            sums = np.zeros(len(a.metrics))
            full = np.flatnonzero(np.diff(a.offsets) > 0)
            if len(full):
                sums[full] = np.add.reduceat(a.vs, a.offsets[:-1][full])
            out.extend(zip(a.metrics, sums.tolist(), strict=True))
        return out

    def labelled(self, qid: str) -> list[tuple[Mapping[str, Any], float]]:
        """Every row of a window query's chunks, with its labels (for `extra_by` labels)."""
        self._check(qid, "vector")
        return [
            (m, v)
            for a in self.answers.get(qid, [])
            for m, v in zip(a.metrics, a.values.tolist(), strict=True)
        ]

    def hourly(
        self, qid: str, counts: str = "", unless: tuple[Arr, Arr] | None = None
    ) -> tuple[Arr, Arr, Arr, Arr]:
        """(key numbers, bucket end times, values, counts) of a range query: each key's points
        in one contiguous block, in ascending time, one value per (key, time); where chunks or
        series overlap, the later one wins. `counts` is the query of the same series' sample
        counts (`QuerySpec.changes`), NaN throughout when empty. Answered only where a bucket
        is not full (`full`): the count at each point, the full count where it has none, and
        NaN at the points `unless` (key numbers and times of the value query of the count
        query's `unless` metric) holds, which that query leaves out. Answered only where a
        count changes: the count at each point, carried forward over the buckets that follow
        it (NaN where unknown)."""
        k, t, v = self._points(qid)
        if not counts:
            return k, t, v, np.full(len(k), np.nan)
        ck, ct, cv = self._points(counts)
        ck, (ct, cv) = regroup(ck, (ct, cv), np.arange(len(self.keys), dtype=np.int64))
        start, step = self.grid
        n, hit = join_at(ck, ct, cv, k, t, start, step)
        full = self.full.get(counts)
        if full is None:
            return k, t, v, _carried(k, t, n, step)
        n[~hit] = full
        if unless is not None and len(unless[0]):
            _, other = join_at(unless[0], unless[1], None, k, t, start, step)
            n[other & ~hit] = np.nan
        return k, t, v, n

    def _points(self, qid: str) -> tuple[Arr, Arr, Arr]:
        """`hourly` without counts."""
        self._check(qid, "matrix")
        answers = self.answers.get(qid, [])
        if not answers:
            return np.empty(0, dtype=np.int64), np.empty(0), np.empty(0)
        s_kid = np.concatenate([self.kids(a) for a in answers])
        s_len = np.concatenate([np.diff(a.offsets) for a in answers])
        k = np.repeat(s_kid, s_len)
        t = _joined([a.ts for a in answers])
        v = _joined([a.vs for a in answers])
        # Usually every key has one series, already in time order (Prometheus sorts points):
        # then the blocks are there as they are.
        if len(s_kid) == len(distinct(s_kid)):
            rising = np.ones(len(t), dtype=bool)
            rising[1:] = (t[1:] > t[:-1]) | (k[1:] != k[:-1])
            if rising.all():
                return k, t, v
        order = np.lexsort((t, k))  # stable: equal (key, time) keep their order
        k, t, v = k[order], t[order], v[order]
        if len(k) > 1:
            last = np.ones(len(k), dtype=bool)
            last[:-1] = (k[1:] != k[:-1]) | (t[1:] != t[:-1])
            if not last.all():
                k, t, v = k[last], t[last], v[last]
        return k, t, v

    def _check(self, qid: str, rtype: str) -> None:
        for i, a in enumerate(self.answers.get(qid, [])):
            if a.rtype != rtype:
                raise SnapshotError(
                    f"prometheus.{qid}[{i}]: expected resultType {rtype!r}, got {a.rtype!r}"
                )


def query_offset(caps: Any) -> float:
    """The seconds a collection sent every query after its bucket ends: the hourly recording
    rules' evaluations' sub-second part (`capabilities.recorded_hourly.offset_ms`, 0 to 999;
    0 in a snapshot without it)."""
    hourly = caps.get("recorded_hourly") if isinstance(caps, Mapping) else None
    ms = hourly.get("offset_ms") if isinstance(hourly, Mapping) else None
    return ms / 1000 if type(ms) is int and 0 < ms < 1000 else 0.0


GRID_SLACK = 0.0005
"""How far, in seconds, a point may lie from the bucket grid and still be on it: less than half
the millisecond that Prometheus' timestamps count in, more than the rounding of a time with a
fraction of a second held as a float."""


def _on_grid(ts: Arr, start: float, step: float) -> tuple[Arr | None, Arr]:
    """Which times lie on the grid `start + k x step` (None: all of them), and the times with
    those that lie within `GRID_SLACK` of it put exactly on it (`ts` itself when all are)."""
    if not len(ts) or not np.fmod(ts - start, step).any():
        return None, ts
    k = np.rint((ts - start) / step)
    grid = start + k * step
    on = np.abs(ts - grid) <= GRID_SLACK
    return on, np.where(on, grid, ts)


_RATIO = (0.0, 1.0)
_RANGES: dict[str, tuple[float, float]] = {
    queries.ACT_PROF: _RATIO,
    queries.SM_ACTIVE: _RATIO,
    queries.TENSOR: _RATIO,
    queries.UTIL: (0.0, 100.0),
    queries.FB_USED: (0.0, 2.0**30),
    queries.FB_FREE: (0.0, 2.0**30),
    queries.POWER: (0.0, 1e6),
    queries.POWER_LIMIT: (0.0, 1e6),
    queries.SM_CLOCK: (0.0, 1e5),
    queries.MAX_SM_CLOCK: (0.0, 1e5),
    queries.XID: (0.0, 2.0**31),
    queries.P2P_STATUS: (0.0, 2.0**31),
    queries.HAMI_UTIL: (0.0, 100.0),
    queries.HAMI_UTIL_LEGACY: (0.0, 100.0),
    queries.HAMI_MEM: (0.0, 2.0**50),
    queries.HAMI_MEM_LEGACY: (0.0, 2.0**50),
}
"""What each metric can read (`docs/domain.md`): the profiling activities are ratios from 0 to 1,
`DCGM_FI_DEV_GPU_UTIL` and HAMi's container utilization percentages, HAMi's memory bytes (at
most 1 PiB), the framebuffer MiB (at most 1 PiB), the power and its
limit W (at most 1 MW); XID codes and P2P statuses are small whole numbers; error counters are
not negative."""
_COUNTER = (0.0, 2.0**53)
_TOLERANCE = 1e-6
"""Relative slack for rounding (a mean of ones that comes out 1.0000000000000002): values this
close to a bound are clipped to it; values farther out are refused."""


@dataclass
class Refused:
    """Values of one metric left out for lying outside what it can read."""

    metric: str
    lo: float
    hi: float
    n: int = 0


def value_range(metric: str, stat: str) -> tuple[float, float]:
    """The values a statistic of `metric` can take: a sum or a count any finite non-negative
    number; a mean, a maximum or a percentile what the metric itself can read."""
    if stat in ("sum", "count"):
        return 0.0, np.inf
    return _RANGES.get(metric, _COUNTER)


def _in_range(vals: Arr, lo: float, hi: float) -> tuple[Arr, Arr]:
    """`vals` with those within `_TOLERANCE` of a bound clipped to it, and which ones fit."""
    slack = _TOLERANCE * max(abs(lo), abs(hi), 1.0) if np.isfinite(hi) else 0.0
    ok = (vals >= lo - slack) & (vals <= hi + slack)
    with np.errstate(invalid="ignore"):
        if len(vals) and (vals[ok].min(initial=lo) < lo or vals[ok].max(initial=lo) > hi):
            vals = np.clip(vals, lo, hi)
    return vals, ok


def _joined(parts: list[Arr]) -> Arr:
    """The arrays one after the other; the array itself when there is one (read only: it
    belongs to the answer)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _full_counts(described: Any) -> dict[str, float]:
    """The `full` count of each count query the manifest lists (`QuerySpec.changes`); a
    value that is not a whole number from 1 to 10^9 is refused."""
    out: dict[str, float] = {}
    if not isinstance(described, (list, tuple)):
        return out
    for q in described:
        if not isinstance(q, Mapping) or "full" not in q:
            continue
        qid, full = q.get("id"), q["full"]
        if not isinstance(qid, str) or qid not in queries.BY_ID or not queries.BY_ID[qid].changes:
            continue
        if isinstance(full, bool) or not isinstance(full, int) or not 1 <= full <= 10**9:
            raise SnapshotError(
                f"manifest.queries: {qid}'s full is {str(full)[:40]!r}, not a whole number "
                "of samples from 1 to 10^9"
            )
        out[qid] = float(full)
    return out


def _carried(k: Arr, t: Arr, n: Arr, step: int) -> Arr:
    """Counts `n` at points (k, t) (each key's points together, in ascending time) with each
    known count carried forward over the points that follow it in consecutive buckets of the
    same key; a run of buckets that starts unknown stays unknown."""
    missing = np.isnan(n)
    if not missing.any():
        return n
    start = np.ones(len(k), dtype=bool)
    start[1:] = (k[1:] != k[:-1]) | (np.abs(np.diff(t) - step) > 1e-6)
    at = np.where(~missing | start, np.arange(len(n)), 0)
    np.maximum.accumulate(at, out=at)
    out: Arr = n[at]
    return out


REDUCED = {"p95": "max", "increase": "sum", "onsets": "sum"}
"""How the buckets of an hourly statistic make its window figure (`Parser.reduced`): a p95 by
the largest bucket (the p95 of the fullest hour: exact whatever the time chunks, unlike a p95
over the window, which chunks cannot give), counter increases and XID onsets by their sum."""
XID_EVENT_QUERIES = ("xid_events_hourly", "xid_events")
"""The XID onset queries: per bucket (a collection's), or over the window (older snapshots)."""


@dataclass
class Stat:
    """A window statistic per key number: values, and whether the key had one."""

    values: Arr
    present: Arr

    def get(self, n: int) -> Arr:
        return np.where(self.present[:n], self.values[:n], np.nan)


def reduce_stat(kids: Arr, vals: Arr, n: int, how: str) -> Stat:
    present = np.zeros(n, dtype=bool)
    present[kids] = True
    if how == "sum":
        out = np.bincount(kids, weights=vals, minlength=n).astype(np.float64)
    else:
        out = np.full(n, -np.inf)
        np.maximum.at(out, kids, vals)
    return Stat(out, present)


@dataclass
class Metric:
    """Window mean, max, p95 and count of one metric, combined over time chunks."""

    mean: Stat
    mx: Stat
    p95: Stat
    count: Stat
    approx: bool


def combine(p: Parser, short: str, n: int, hourly: Hourly | None = None) -> Metric:
    """Sums and counts add up over chunks, so the mean (sum / count) is exact however the
    window was cut; the max is the max of chunk maxima; the p95 is the largest bucket p95
    (`<short>_p95_hourly`), exact however the window was cut. An older snapshot's p95 over the
    window (`<short>_p95`) cut into several chunks is the largest chunk p95 (an upper bound),
    reported as approximate. Series that normalise to one key (an exporter restart when both
    pod label spellings were kept) are parts of one holding: their sums add and the largest
    max is kept.

    A metric of `HOURLY_MEANS` has no window sum (an older snapshot's is read as before):
    its mean is that of its `hourly` points (`from_hourly`), the same to the bit whether the
    buckets were read raw or from the hourly recording rules; its count, where the catalogue
    has no window count of it, the sum of the buckets' counts."""

    def stat(name: str, how: str) -> Stat:
        qid = f"{short}_{name}"
        if qid not in queries.BY_ID:
            return Stat(np.zeros(n), np.zeros(n, dtype=bool))
        k, v = p.window(qid)
        return reduce_stat(k, v, n, how)

    total, cnt = stat("sum", "sum"), stat("count", "sum")
    if hourly is not None and f"{short}_sum" not in p.answers:
        buckets = from_hourly(hourly, n)
        ok, means = buckets.mean.present, buckets.mean.values
        if f"{short}_count" not in p.answers:
            cnt = buckets.count
    else:
        ok = total.present & cnt.present & (cnt.values > 0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            means = np.where(ok, total.values / np.where(ok, cnt.values, 1.0), np.nan)
    # Sums that add up to infinity, or a mean no sample could give (an activity of 50): the
    # key has no mean, and the refusal is counted like a value out of range.
    metric = queries.BY_ID[f"{short}_sum"].metric
    lo, hi = value_range(metric, "mean")
    means, fits = _in_range(means, lo, hi)
    if (ok & ~fits).any():
        p.refuse(f"{short}_mean", metric, (lo, hi), int((ok & ~fits).sum()))
        ok &= fits
    mean = Stat(np.where(ok, means, np.nan), ok)
    p95_hourly = f"{short}_p95_hourly"
    if p95_hourly in p.answers:
        p95 = reduce_stat(*p.reduced(p95_hourly), n, "max")
        return Metric(mean, stat("max", "max"), p95, cnt, False)
    p95_chunks = len(p.answers.get(f"{short}_p95", [])) if f"{short}_p95" in queries.BY_ID else 0
    return Metric(mean, stat("max", "max"), stat("p95", "max"), cnt, p95_chunks > 1)


_MSG = 300
"""Characters of an XID message kept (the exporter's are a few dozen)."""


def from_hourly(points: tuple[Arr, Arr, Arr, Arr], n: int, only: Arr | None = None) -> Metric:
    """A metric's window mean and sample count per key number from its hourly means and their
    sample counts (as `Parser.hourly` gives them): each bucket's mean weighs its samples, which
    is the mean over every sample of the buckets given. A bucket without a count weighs as
    much as the mean counted bucket (1 when none is counted). Maxima and percentiles cannot be
    had from bucket means: they are missing. `only` (key numbers): the statistics of those
    keys alone, the same as among all (the others are absent)."""
    k, _, v, w = points
    known = np.isfinite(w)
    typical = float(np.mean(w[known])) if known.any() else 1.0
    if only is not None:
        want = np.zeros(n, dtype=bool)
        want[only] = True
        rows = np.flatnonzero(want[k])
        k, v, w, known = k[rows], v[rows], w[rows], known[rows]
    w = np.where(known, w, typical)
    total = np.bincount(k, weights=v * w, minlength=n)
    weight = np.bincount(k, weights=w, minlength=n)
    present = np.bincount(k, minlength=n) > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = Stat(np.where(present, total / np.where(weight > 0, weight, 1.0), np.nan), present)
    counted = np.bincount(k[known], weights=w[known], minlength=n)
    all_known = np.bincount(k[~known], minlength=n) == 0
    count = Stat(np.where(all_known, counted, np.nan), present & all_known)
    none = Stat(np.full(n, np.nan), np.zeros(n, dtype=bool))
    return Metric(mean, none, none, count, False)


def xids(p: Parser) -> tuple[dict[int, float], dict[int, set[int]], dict[int, dict[int, str]]]:
    """Largest XID value, every non-zero XID code, and the exporter's message per code, by key
    number.

    The gauge holds the last XID; the query groups on `err_code`, so each code the gauge held
    in the window is its own series whose maximum is that code."""
    mx: dict[int, float] = {}
    codes: dict[int, set[int]] = defaultdict(set)
    msgs: dict[int, dict[int, str]] = defaultdict(dict)
    for labels, v in p.labelled("xid_max"):
        k = p.kid(labels)
        mx[k] = max(v, mx.get(k, v))
        code = int(v)  # a whole number below 2**31: `_bounded` left out any other
        if code > 0:
            codes[k].add(code)
            msg = labels.get("err_msg")
            if isinstance(msg, str) and msg:
                # Kept apart from the `code: message; code: message` list it joins.
                msgs[k][code] = msg[:_MSG].replace(";", ",")
    return mx, dict(codes), dict(msgs)


def xid_events(p: Parser) -> dict[int, dict[int, float]]:
    """XID events per code, by key number: the `xid_events_hourly` answers (changes of the
    gauge into each code per bucket, one series per `err_code`) summed over the buckets, or an
    older snapshot's `xid_events` (over the window) summed over time chunks."""
    out: dict[int, dict[int, float]] = defaultdict(dict)
    hourly, window = XID_EVENT_QUERIES
    rows = p.labelled_sums(hourly) if hourly in p.answers else p.labelled(window)
    for labels, v in rows:
        code = labels.get("err_code")
        if not isinstance(code, str) or not code.isdigit() or int(code) == 0 or v <= 0:
            continue
        per = out[p.kid(labels)]
        per[int(code)] = per.get(int(code), 0.0) + v
    return dict(out)


def p2p_rows(p: Parser) -> list[dict[str, Any]]:
    """Worst NVLink P2P status per (node, GPU, peer) over the window; 0 is OK."""
    worst: dict[tuple[str, str, str], float] = {}
    for labels, v in p.labelled("p2p_max"):
        ident = p.identity(labels)
        peer = labels.get("peer_gpu")
        if not ident.host or not ident.gpu_index or not isinstance(peer, str) or not peer:
            continue
        k = (ident.host, ident.gpu_index, peer)
        worst[k] = max(v, worst.get(k, v))
    return [
        {C.NODE: n, C.GPU_INDEX: g, C.PEER_INDEX: peer, C.P2P_STATUS: v}
        for (n, g, peer), v in sorted(worst.items())
    ]

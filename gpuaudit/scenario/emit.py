"""Write a scenario as a snapshot (the answers Prometheus would give), OpenMetrics and API JSON.

Samples are generated so that Prometheus's answers can be computed exactly: within each hour a
series alternates between `level + amp` and `level - amp`, at times offset by half a scrape
interval from the hour boundaries (so range selectors never see a sample on their edge, on
Prometheus 2.x's closed or 3.x's left-open ranges alike).

The series are held column-wise (`gpuaudit.scenario.series`) and the text is assembled per
series from strings computed once per distinct value, so scenarios of tens of thousands of
GPUs take seconds. `write_snapshot` streams a snapshot to its file (byte for byte what
`gpuaudit.snapshot.write(to_snapshot(...))` writes, through the same writer) without holding the
answers in memory.
"""

from __future__ import annotations

import bisect
import copy
import functools
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone
from itertools import chain
from operator import add
from pathlib import Path
from typing import IO, Any

import numpy as np

from gpuaudit.core.gcpause import without_gc
from gpuaudit.scenario import teams
from gpuaudit.scenario.generator import Scenario
from gpuaudit.scenario.owner_objects import owner_lists, owner_uid
from gpuaudit.scenario.series import DRIVER as DRIVER
from gpuaudit.scenario.series import (
    INT_METRICS,
    RAMPED,
    SERVING_WRITTEN,
    WRITTEN,
    Table,
    Values,
    busy_level,
    counter_samples,
    distinct,
    levels,
    sample_offsets_ms,
    serving_series,
)
from gpuaudit.scenario.series import LABEL_STYLES as LABEL_STYLES
from gpuaudit.scenario.series import fmt as fmt
from gpuaudit.scenario.series import raw_labels as raw_labels
from gpuaudit.scenario.series import spelling_of as spelling_of
from gpuaudit.snapshot import Manifest, ManifestWindow, Snapshot, write_records
from gpuaudit.snapshot.manifest import utc_timestamp
from gpuaudit.snapshot.writer import encode
from gpuaudit.sources.prometheus import catalogue as queries

Arr = np.ndarray[Any, np.dtype[Any]]
_METRICS = WRITTEN
_dumps = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
"""`json.dumps(o, separators=(",", ":"), sort_keys=True)`, as `gpuaudit.snapshot.write`."""
_quote: Callable[[str], str] = json.encoder.encode_basestring_ascii
"""A string as `_dumps` writes it."""


def _label_text(d: dict[str, str]) -> str:
    """`_dumps(d)` of labels (string keys and values), faster."""
    return "{" + ",".join([_quote(k) + ":" + _quote(v) for k, v in sorted(d.items())]) + "}"


def _ts(t: Any) -> Any:
    return int(t) if float(t).is_integer() else round(t, 3)


def _envelope(rtype: str, result: Any) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": rtype, "result": result}}


def _serving_query(sc: Scenario, spelling: str) -> dict[str, Any]:
    """The serving metrics query as the manifest lists it (`queries.SERVING`)."""
    q = queries.SERVING
    text = q.promql(sc.end - sc.start, spelling)
    return {"id": q.id, "kind": q.kind, "metric": q.metric, "query": text}


def _serving_entry(sc: Scenario, spelling: str) -> dict[str, Any]:
    """What Prometheus answers to the serving metrics query (`queries.SERVING`, run once
    beside the catalogue): each serving pod's busy level of its gauge (`series.busy_level`),
    its series named by the scrape target's `namespace` and `pod`."""
    result: list[dict[str, Any]] = []
    for v in serving_series(sc).values():
        for i, lab in enumerate(v.labels):
            level = busy_level(v.hi[v.off[i] : v.off[i + 1]])
            if level is None:
                continue
            metric = {k: lab[k] for k in queries.SERVING_LABELS if lab.get(k)}
            metric[queries.SERVING_NAME_LABEL] = v.metric
            result.append({"metric": metric, "value": [sc.end, fmt(level)]})
    query = queries.SERVING.promql(sc.end - sc.start, spelling)
    return {"query": query, "params": {"time": sc.end}, "body": _envelope("vector", result)}


def manifest(sc: Scenario, style: str, generated_by: str) -> Manifest:
    return _manifest(sc, style, generated_by, k8s_lists(sc))


def full_count(sc: Scenario) -> int:
    """The samples each hourly bucket of a series holds: the scenario's series are whole hours,
    so every bucket is full and the sample count queries answer none (`QuerySpec.changes`)."""
    return 3600 // sc.scrape_s


def _manifest(sc: Scenario, style: str, generated_by: str, lists: dict[str, Any]) -> Manifest:
    spelling = spelling_of(style)
    window_s = sc.end - sc.start
    full = full_count(sc)
    return Manifest(
        cluster=f"scenario-{sc.seed}",
        source="scenario",
        generated_by=generated_by,
        collected_at=utc_timestamp(sc.end),
        window=ManifestWindow(start=sc.start, end=sc.end, step=3600),
        capabilities={
            "backend": "scenario",
            "pod_label": spelling,
            "label_style": style,
            "metrics": sorted(set(_METRICS) - set(SERVING_WRITTEN)),
            "mig": True,
            "profiling": True,
            "kube_state_metrics": False,
        },
        objects=dict.fromkeys(lists, "ok"),
        queries=tuple(
            {
                "id": q.id,
                "kind": q.kind,
                "metric": q.metric,
                "query": q.promql(window_s, spelling)
                if q.kind == "window"
                else q.promql(3600, spelling, full=full),
                **({"full": full} if q.changes else {}),
            }
            for q in queries.CATALOGUE
        )
        + (_serving_query(sc, spelling),),
        plan={
            "window_chunks": [[sc.start, sc.end]],
            "hourly_chunks": [[sc.start + 3600, sc.end]],
        },
    )


# ---- Prometheus's answers ----------------------------------------------------------------


class _Answers:
    """What Prometheus answers to each query of the catalogue, one metric's levels at a time
    (ask for the queries of one metric together)."""

    def __init__(self, sc: Scenario, style: str) -> None:
        self.sc = sc
        self.spelling = spelling_of(style)
        self.k = 3600 // sc.scrape_s // 2
        self.table = Table(sc, style)
        self._cur: tuple[str, Values | None] = ("", None)
        self._dicts: dict[tuple[tuple[str, ...], int], list[dict[str, str]]] = {}
        self._texts: dict[tuple[tuple[str, ...], int], list[str]] = {}
        self._times: list[Any] = []
        self._onsets: tuple[Values | None] | None = None

    def values(self, metric: str) -> Values | None:
        if self._cur[0] != metric:
            self._cur = ("", None)  # let the previous metric's arrays go first
            self._cur = (metric, self.table.values(metric))
        return self._cur[1]

    def answered(self, q: queries.QuerySpec) -> Values | None:
        """The series a query answers about: its metric's, less those its `unless` metric
        removes."""
        v = self.values(q.metric)
        if v is not None and q.unless:
            v = v.without(self.table.carries(q.unless))
        if v is not None and q.changes:
            # Every hour holds its full count of samples (`full_count`): none is answered.
            return None
        if v is not None and q.kind == "hourly":
            return self._points(q, v)
        return v

    def _points(self, q: queries.QuerySpec, v: Values) -> Values | None:
        """The series and points of an hourly query's answer, each point's answer in `hi`:
        the bucket statistic of every point (`Values.hourly`), or XID onsets, answered only in
        the hours that had one (`Table.xid_onset_hours`)."""
        if q.stat != "onsets":
            vals = v.hourly(q.stat, self.k)
            return Values(v.metric, v.labels, v.rows, v.off, v.hours, vals, vals)
        if self._onsets is None:
            # Kept: `metric_dicts` caches the labels by the list's identity.
            series, hours = self.table.xid_onset_hours(self.sc.scrape_s)
            which, per = np.unique(series, return_counts=True)
            off = np.zeros(len(which) + 1, dtype=np.int64)
            np.cumsum(per, out=off[1:])
            ones = np.ones(len(hours))
            labels = [v.labels[j] for j in which.tolist()]
            got = Values(v.metric, labels, None, off, hours, ones, ones) if labels else None
            self._onsets = (got,)
        return self._onsets[0]

    def request(self, q: queries.QuerySpec) -> tuple[str, dict[str, Any], str]:
        """(PromQL, parameters, result type) of a query."""
        sc = self.sc
        if q.kind == "window":
            return q.promql(sc.end - sc.start, self.spelling), {"time": sc.end}, "vector"
        params = {"start": sc.start + 3600, "end": sc.end, "step": 3600}
        return q.promql(3600, self.spelling, full=full_count(sc)), params, "matrix"

    def metric_dicts(self, q: queries.QuerySpec, v: Values) -> list[dict[str, str]]:
        """Each series' `metric` object (its labels kept by the query's `by`)."""
        by = q.by_labels(self.spelling)
        base = v.labels if v.rows is None else self.table.labels
        every = self._dicts.get((by, id(base)))
        if every is None:
            keep = set(by)
            every = [{kk: x for kk, x in lab.items() if kk in keep and x} for lab in base]
            self._dicts[by, id(base)] = every
        return every if v.rows is None else [every[i] for i in v.rows.tolist()]

    def metric_texts(self, q: queries.QuerySpec, v: Values) -> list[str]:
        """Each series' `metric` object as JSON."""
        by = q.by_labels(self.spelling)
        base = v.labels if v.rows is None else self.table.labels
        every = self._texts.get((by, id(base)))
        if every is None:
            keep = set(by)
            every = [
                _label_text({kk: x for kk, x in lab.items() if kk in keep and x}) for lab in base
            ]
            self._texts[by, id(base)] = every
        return every if v.rows is None else [every[i] for i in v.rows.tolist()]

    def window(self, q: queries.QuerySpec, v: Values) -> tuple[list[str], Arr, list[int] | None]:
        """The value texts of the answer, each series' index into them, and the series the
        answer has (None: all of them; `count_over_time` of nothing gives no series)."""
        texts, codes = distinct(v.window(q.stat, self.k), fmt)
        return texts, codes, None

    def hourly(self, v: Values) -> tuple[list[str], Arr, list[Any], Arr]:
        """(value texts, each point's index into them, the timestamps by hour index, each
        point's hour index) of an hourly query's points (`answered`: the sample counts answer
        nothing)."""
        texts, codes = distinct(v.hi, fmt)
        hours = v.hours.astype(np.int32 if len(v.hours) and v.hours.max() < 2**31 else np.int64)
        top = int(hours.max()) + 1 if len(hours) else 0
        if len(self._times) < top:
            # As Prometheus stamps the bucket ending at each hour.
            stamps = self.sc.start + (np.arange(top, dtype=np.float64) + 1) * 3600
            self._times = [_ts(t) for t in stamps]
        return texts, codes, self._times, hours


def _distinct_ints(keys: Arr) -> tuple[Arr, Arr]:
    """`np.unique(keys, return_inverse=True)` of non-negative integers, by a table over their
    range when that is not much larger than the keys (sorting millions of keys is slow)."""
    top = int(keys.max()) + 1 if len(keys) else 0
    if top > 4 * len(keys) + (1 << 20):
        u, inv = np.unique(keys, return_inverse=True)
        return u, inv.reshape(-1)
    present = np.zeros(top, dtype=bool)
    present[keys] = True
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present), rank[keys]


def _by_metric(qs: Iterable[queries.QuerySpec]) -> list[queries.QuerySpec]:
    """The queries grouped by metric (in order of first appearance), order kept within."""
    order: dict[str, list[queries.QuerySpec]] = {}
    for q in qs:
        order.setdefault(q.metric, []).append(q)
    return [q for group in order.values() for q in group]


@without_gc
def to_snapshot(sc: Scenario, style: str = "helm", generated_by: str = "") -> Snapshot:
    """The snapshot a live collection of this scenario would record.

    Equal `metric` objects, `value`s and `[timestamp, value]` points are shared lists and
    dicts: treat the answers as read-only (as their JSON)."""
    ans = _Answers(sc, style)
    prom: dict[str, list[dict[str, Any]]] = {}
    for q in _by_metric(queries.CATALOGUE):
        query, params, rtype = ans.request(q)
        v = ans.answered(q)
        result: list[dict[str, Any]] = []
        if v is not None and q.kind == "window":
            texts, codes, rows = ans.window(q, v)
            value = [[sc.end, t] for t in texts]  # one list per distinct value
            dicts = ans.metric_dicts(q, v)
            if rows is not None:
                dicts = [dicts[i] for i in rows]
            result = [
                {"metric": d, "value": value[c]} for d, c in zip(dicts, codes.tolist(), strict=True)
            ]
        elif v is not None:
            texts, codes, times, hours = ans.hourly(v)
            # One list per distinct (hour, value) point.
            keys, pick_arr = _distinct_ints(hours.astype(np.int64) * len(texts) + codes)
            hs, cs = (keys // len(texts)).tolist(), (keys % len(texts)).tolist()
            points = [[times[h], texts[c]] for h, c in zip(hs, cs, strict=True)]
            pick = pick_arr.tolist()
            bounds = v.off.tolist()
            result = [
                {"metric": d, "values": list(map(points.__getitem__, pick[a:b]))}
                for d, a, b in zip(ans.metric_dicts(q, v), bounds[:-1], bounds[1:], strict=True)
            ]
        prom[q.id] = [{"query": query, "params": params, "body": _envelope(rtype, result)}]
    prom = {q.id: prom[q.id] for q in queries.CATALOGUE}
    prom[queries.SERVING.id] = [_serving_entry(sc, ans.spelling)]
    lists = k8s_lists(sc)
    kube = {res: [lst] for res, lst in lists.items()}
    return Snapshot(
        manifest=_manifest(sc, style, generated_by, lists), prometheus=prom, kubernetes=kube
    )


# ---- streaming the snapshot --------------------------------------------------------------


class _Lazy:
    """JSON text produced when the encoder reaches it."""

    def __init__(self, chunks: Callable[[], Iterator[bytes]]) -> None:
        self.chunks = chunks


def _window_text(ans: _Answers, q: queries.QuerySpec) -> Iterator[bytes]:
    v = ans.answered(q)
    if v is None:
        yield b"[]"
        return
    texts, codes, rows = ans.window(q, v)
    values = [f",{_dumps(t)}]}}" for t in texts]
    head = '{"metric":'
    tail = f',"value":[{_dumps(ans.sc.end)}'
    metric = ans.metric_texts(q, v)
    if rows is not None:
        metric = [metric[i] for i in rows]
    c = codes.tolist()
    step = 4096
    for i in range(0, len(c), step):
        part = ",".join(
            [
                head + m + tail + values[j]
                for m, j in zip(metric[i : i + step], c[i : i + step], strict=True)
            ]
        )
        yield (("[" if i == 0 else ",") + part).encode()
    yield b"]" if c else b"[]"


def _table(items: list[bytes]) -> tuple[Arr, Arr]:
    """Byte strings as a fixed-width array (NUL-padded) and their lengths."""
    lens = np.array([len(b) for b in items], dtype=np.int64)
    width = max(1, int(lens.max()) if len(lens) else 1)
    return np.array(items, dtype=f"S{width}"), lens


def _hourly_text(ans: _Answers, q: queries.QuerySpec) -> Iterator[bytes]:
    v = ans.answered(q)
    if v is None or not len(v.labels):
        yield b"[]"
        return
    texts, codes, times, hours = ans.hourly(v)
    # Each point is `[<time>,` then `"<value>"],`, pasted side by side from fixed-width tables
    # and the NUL padding squeezed out: no Python work per point.
    stamps, stamp_len = _table([("[" + _dumps(t) + ",").encode() for t in times])
    values, value_len = _table([(_dumps(t) + "],").encode() for t in texts])
    ws, wv = stamps.itemsize, values.itemsize
    padded = bool((stamp_len < ws).any() or (value_len < wv).any())
    metric = ans.metric_texts(q, v)
    bounds = v.off.tolist()
    n = len(metric)
    i = 0
    while i < n:
        # The series of about 64k points at a time.
        j = int(np.searchsorted(v.off, bounds[i] + (1 << 16), side="right")) - 1
        j = min(n, max(j, i + 1))
        a0, e0 = bounds[i], bounds[j]
        hb, cb = hours[a0:e0], codes[a0:e0]
        buf = np.empty((e0 - a0, ws + wv), dtype=np.uint8)
        buf[:, :ws] = stamps[hb].view(np.uint8).reshape(-1, ws)
        buf[:, ws:] = values[cb].view(np.uint8).reshape(-1, wv)
        raw = buf.tobytes()
        if padded:
            raw = raw.translate(None, b"\0")
        ends = [0, *np.cumsum(stamp_len[hb] + value_len[cb]).tolist()]
        parts = []
        for s in range(i, j):
            x0, x1 = ends[bounds[s] - a0], ends[bounds[s + 1] - a0]
            points = raw[x0 : x1 - 1] if x1 > x0 else b""  # less the last comma
            parts.append(b'{"metric":' + metric[s].encode() + b',"values":[' + points + b"]}")
        yield (b"[" if i == 0 else b",") + b",".join(parts)
        i = j
    yield b"]"


def _iterencode(o: Any, deep: set[int]) -> Iterator[bytes]:
    """`_dumps(o)` in pieces, where `_Lazy` parts (only inside the containers in `deep`) give
    their own text."""
    if isinstance(o, _Lazy):
        yield from o.chunks()
    elif isinstance(o, dict) and id(o) in deep and o:
        sep = "{"
        for key, val in sorted(o.items()):
            yield (sep + _dumps(key) + ":").encode()
            yield from _iterencode(val, deep)
            sep = ","
        yield b"}"
    elif isinstance(o, list) and id(o) in deep and o:
        lsep = b"["
        for val in o:
            yield lsep
            yield from _iterencode(val, deep)
            lsep = b","
        yield b"]"
    else:
        yield _dumps(o).encode()


@without_gc
def write_snapshot(
    sc: Scenario, path: Path | str, style: str = "helm", generated_by: str = ""
) -> None:
    """Write `to_snapshot(sc, style, generated_by)` through the snapshot writer, streaming: the
    answers are never all in memory at once, and the compression runs alongside."""
    lists = k8s_lists(sc)
    man = _manifest(sc, style, generated_by, lists)
    write_records(Path(path), man, _records(sc, style, lists))


def _records(sc: Scenario, style: str, lists: dict[str, Any]) -> Iterator[Iterator[bytes]]:
    """The records of the snapshot file, each in pieces: the Kubernetes pages by resource, then
    the answers by query id."""
    for res in sorted(lists):
        yield iter((encode({"kubernetes": res, "page": lists.pop(res)}),))
    ans = _Answers(sc, style)
    for q in sorted((*queries.CATALOGUE, queries.SERVING), key=lambda q: q.id):
        if q is queries.SERVING:
            served = _serving_entry(sc, ans.spelling)
            yield iter((encode({**served, "prometheus": q.id}),))
            continue
        query, params, rtype = ans.request(q)
        text = _window_text if q.kind == "window" else _hourly_text
        body = _envelope(rtype, _Lazy(functools.partial(text, ans, q)))
        record = {"body": body, "params": params, "prometheus": q.id, "query": query}
        yield _iterencode(record, {id(record), id(body), id(body["data"])})


# ---- OpenMetrics -------------------------------------------------------------------------


@without_gc
def write_openmetrics(
    sc: Scenario, out: IO[str], style: str = "helm", hours: tuple[int, int] | None = None
) -> int:
    """Every sample of the scenario as OpenMetrics text for `promtool tsdb
    create-blocks-from openmetrics`: timestamps in whole seconds (a half second past at an odd
    scrape interval), each family contiguous with one
    TYPE line, each series in ascending time, `# EOF` last. Returns the sample count.

    `hours` (first, end) keeps the samples of those hours of the window only (hour 0 starts at
    the window's start), so that a large scenario can be backfilled a day at a time."""
    table = Table(sc, style)
    per_hour = 3600 // sc.scrape_s
    half = per_hour // 2
    offsets = sample_offsets_ms(sc.scrape_s).tolist()
    top = len(table.hours) and int(table.hours.max()) + 1
    # " <timestamp>\n" of every sample, by hour index and sample within the hour.
    stamps = [
        _seconds(sc.start * 1000 + h * 3_600_000 + off) for h in range(top) for off in offsets
    ]
    labels: dict[int, str] = {}
    n = 0
    for m in _METRICS:
        out.write(f"# TYPE {m} gauge\n")
        v = table.values(m)
        if v is None:
            continue
        if m in RAMPED:
            n += _write_counter(out, v, per_hour, stamps, hours, labels)
            continue
        if m in INT_METRICS:
            hs_texts, hs_codes = distinct(v.hi, lambda x: f"{int(x)}")
            ls_texts, ls_codes = distinct(v.lo, lambda x: f"{int(x)}")
        else:
            hs_texts, hs_codes = distinct(v.hi, lambda x: f"{x:.6f}")
            ls_texts, ls_codes = distinct(v.lo, lambda x: f"{x:.6f}")
        hs_all = list(map(hs_texts.__getitem__, hs_codes.tolist()))
        ls_all = list(map(ls_texts.__getitem__, ls_codes.tolist()))
        hours_of = v.hours.astype(np.int64).tolist()
        bounds = v.off.tolist()
        for i, lab in enumerate(v.labels):
            prefix = _prefix(m, lab, labels)
            a, b = bounds[i], bounds[i + 1]
            if hours is not None:  # a series' hours ascend
                first = a + bisect.bisect_left(hours_of[a:b], hours[0])
                b = a + bisect.bisect_left(hours_of[a:b], hours[1])
                a = first
                if a >= b:
                    continue
            vals: list[str] = []
            for hv, lv in zip(hs_all[a:b], ls_all[a:b], strict=True):
                vals += [hv, lv] * half
            ts: list[str] = []
            for h in hours_of[a:b]:
                ts += stamps[h * per_hour : (h + 1) * per_hour]
            # Pieces of 128 lines (about 64 kB): memory the allocator reuses.
            for c in range(0, len(vals), 128):
                out.write(prefix.join(chain(("",), map(add, vals[c : c + 128], ts[c : c + 128]))))
            n += len(vals)
    out.write("# EOF\n")
    return n


def _prefix(metric: str, lab: dict[str, str], labels: dict[int, str]) -> str:
    """`metric{labels} ` of a series, its label text made once per labels object (`labels`)."""
    text = labels.get(id(lab))
    if text is None:
        text = labels[id(lab)] = ",".join(f'{k}="{_esc(x)}"' for k, x in lab.items())
    return f"{metric}{{{text}}} "


def _write_counter(
    out: IO[str],
    v: Values,
    per_hour: int,
    stamps: list[str],
    hours: tuple[int, int] | None,
    labels: dict[int, str],
) -> int:
    """A counter's series as `write_openmetrics` writes them (its samples ramp up,
    `counter_samples`; whole numbers of ns or halves); the samples written."""
    n = 0
    vals = counter_samples(v, per_hour)
    hours_of = v.hours.astype(np.int64).tolist()
    bounds = v.off.tolist()
    for i, lab in enumerate(v.labels):
        prefix = _prefix(v.metric, lab, labels)
        for p in range(bounds[i], bounds[i + 1]):
            h = hours_of[p]
            if hours is not None and not hours[0] <= h < hours[1]:
                continue
            ts = stamps[h * per_hour : (h + 1) * per_hour]
            out.write("".join(prefix + fmt(x) + t for x, t in zip(vals[p], ts, strict=True)))
            n += per_hour
    return n


SampleBatch = tuple[str, list[dict[str, str]], Arr, Arr, Arr]
"""(metric name, each series' labels, offsets: series i's samples are [off[i], off[i + 1]),
unix milliseconds, values)."""


def openmetrics_samples(
    sc: Scenario, style: str = "helm", hours: tuple[int, int] | None = None, batch: int = 1 << 21
) -> Iterator[SampleBatch]:
    """The samples `write_openmetrics` writes, as arrays (the values as Prometheus parses
    that text), a metric at a time in batches of whole series of about `batch` samples; for
    writing TSDB blocks directly (`tests.support.tsdbblocks`). `hours` as in `write_openmetrics`."""
    table = Table(sc, style)
    per_hour = 3600 // sc.scrape_s
    offs = sample_offsets_ms(sc.scrape_s)
    odd = (np.arange(per_hour) % 2).astype(bool)
    for m in _METRICS:
        v = table.values(m)
        if v is None:
            continue
        hi, lo = levels(v)
        keep = np.ones(len(v.hours), dtype=bool)
        if hours is not None:
            keep = (v.hours >= hours[0]) & (v.hours < hours[1])
        n = len(v.labels)
        per_series = np.bincount(np.repeat(np.arange(n), np.diff(v.off))[keep], minlength=n)
        series = np.flatnonzero(per_series)
        start = 0
        while start < len(series):
            # Whole series up to about `batch` samples.
            sizes = np.cumsum(per_series[series[start:]]) * per_hour
            end = start + max(1, int(np.searchsorted(sizes, batch, side="right")))
            part = series[start:end]
            pts = np.concatenate([np.arange(v.off[i], v.off[i + 1]) for i in part.tolist()])
            pts = pts[keep[pts]]
            t = (sc.start + v.hours[pts].astype(np.int64) * 3600)[:, None] * 1000 + offs
            if m in RAMPED:
                vals = counter_samples(v, per_hour)[pts]
            else:
                vals = np.where(odd, lo[pts][:, None], hi[pts][:, None])
            off = np.zeros(len(part) + 1, dtype=np.int64)
            np.cumsum(per_series[part] * per_hour, out=off[1:])
            yield m, [v.labels[i] for i in part.tolist()], off, t.ravel(), vals.ravel()
            start = end


def _seconds(t_ms: int) -> str:
    """` <timestamp>\\n` in seconds of a time on a whole or half second: `.5` is exact in the
    float promtool reads it as."""
    sec, ms = divmod(t_ms, 1000)
    return f" {sec}\n" if ms == 0 else f" {sec}.{ms // 100}\n"


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# ---- Kubernetes objects ------------------------------------------------------------------


def _iso(ts: float) -> str:
    if isinstance(ts, int) and not isinstance(ts, bool):
        day, sec = divmod(ts, 86400)
        return f"{_iso_day(day)}T{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}Z"
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@functools.lru_cache(maxsize=4096)
def _iso_day(day: int) -> str:
    return datetime.fromtimestamp(day * 86400, timezone.utc).strftime("%Y-%m-%d")


def _pods(sc: Scenario) -> Iterator[dict[str, Any]]:
    ips: dict[str, str] = {}
    for node in sc.nodes:
        ips.setdefault(node.name, node.ip)
    for i, p in enumerate(sc.pods):
        if not p.alive:
            continue
        created = sc.start + p.created_h * 3600 + p.created_delta_s
        limits: dict[str, str] = {}
        if p.gpus and not p.dra:
            limits["nvidia.com/gpu"] = str(p.gpus)
        for prof, cnt in p.mig.items():
            limits[f"nvidia.com/mig-{prof}"] = str(cnt)
        limits.update(p.resources)
        owner: dict[str, Any] = {
            "apiVersion": _owner_api(p.owner_kind),
            "kind": p.owner_kind,
            "name": p.owner_name,
            "uid": p.owner_uid or owner_uid(p.owner_kind, p.namespace, p.owner_name),
            "controller": True,
            "blockOwnerDeletion": True,
        }
        spec: dict[str, Any] = {
            "nodeName": p.node,
            "schedulerName": p.scheduler_name,
            "restartPolicy": "OnFailure" if p.owner_kind == "PyTorchJob" else "Always",
            "containers": [
                {
                    "name": p.container,
                    "image": f"registry.example/{p.container}:1",
                    "resources": {"limits": dict(limits), "requests": dict(limits)},
                }
            ],
        }
        if p.priority_class:
            spec["priorityClassName"] = p.priority_class
            spec["priority"] = p.priority
        if p.preemption_policy:
            spec["preemptionPolicy"] = p.preemption_policy
        if p.node_selector:
            spec["nodeSelector"] = dict(p.node_selector)
        if p.tolerations:
            spec["tolerations"] = [dict(t) for t in p.tolerations]
        if p.affinity:
            spec["affinity"] = copy.deepcopy(p.affinity)
        if not p.node:
            del spec["nodeName"]
        if p.dra:
            spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
            spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        meta: dict[str, Any] = {
            "name": p.name,
            "namespace": p.namespace,
            "uid": p.uid,
            "resourceVersion": str(100000 + i),
            "creationTimestamp": _iso(created),
            "labels": dict(p.labels),
            "annotations": dict(p.annotations),
            "ownerReferences": [owner],
        }
        if not p.owner_kind:  # a plain pod (a Kueue pod group member, say) has no owner
            del meta["ownerReferences"]
        status = _pod_status(sc, p, created, ips)
        if p.dra:
            status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": _claim(p)}]
        yield {"metadata": meta, "spec": spec, "status": status}
    for j, n in enumerate(sc.nodes):
        yield {
            "metadata": {
                "name": n.exporter_pod,
                "namespace": "gpu-operator",
                "uid": f"exp-{j:05d}",
                "resourceVersion": str(200000 + j),
                "creationTimestamp": _iso(sc.start - 86400 * 30),
                "labels": {"app": "nvidia-dcgm-exporter"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "DaemonSet",
                        "name": "nvidia-dcgm-exporter",
                        "uid": "ds-dcgm",
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "nodeName": n.name,
                "containers": [{"name": "nvidia-dcgm-exporter", "resources": {}}],
            },
            "status": {"phase": "Running", "podIP": n.ip, "startTime": _iso(sc.start - 86400 * 30)},
        }


def _pod_status(
    sc: Scenario, p: Any, created: float, ips: dict[str, str] | None = None
) -> dict[str, Any]:
    if p.phase == "Pending":
        return {
            "phase": "Pending",
            "qosClass": "Guaranteed",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": p.pending_message
                    or "0/1 nodes are available: insufficient nvidia.com/gpu.",
                    "lastTransitionTime": _iso(created + 1),
                }
            ],
        }
    cs: dict[str, Any] = {
        "name": p.container,
        "ready": True,
        "restartCount": p.restarts,
        "image": f"registry.example/{p.container}:1",
        "state": {"running": {"startedAt": _iso(created + p.start_delay_s + 25)}},
    }
    if p.phase == "Succeeded" and p.finished_h is not None:
        return _succeeded(sc, p, created, cs, ips)
    if p.last_termination:
        reason, message = p.last_termination
        ended = sc.end - 600 if p.last_finished_s is None else sc.start + p.last_finished_s
        term: dict[str, Any] = {
            "reason": reason,
            "exitCode": 1 if reason == "Error" else 137,
            "startedAt": _iso(max(created + p.start_delay_s + 25, ended - 1800)),
            "finishedAt": _iso(ended),
        }
        if message:
            term["message"] = message
        cs["lastState"] = {"terminated": term}
        # The kubelet restarts it after its back-off: 10 s, doubling per restart, at most 5 min.
        backoff = min(300, 10 * 2 ** max(0, p.restarts - 1))
        cs["state"] = {"running": {"startedAt": _iso(ended + backoff)}}
    if p.waiting:
        cs["ready"] = False
        cs["state"] = {"waiting": {"reason": p.waiting}}
    return {
        "phase": p.phase,
        "hostIP": (
            ips.get(p.node, "")
            if ips is not None
            else next((n.ip for n in sc.nodes if n.name == p.node), "")
        ),
        "startTime": _iso(created + p.start_delay_s),
        "qosClass": "Guaranteed",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": _iso(created + 1)},
            {"type": "Ready", "status": "True", "lastTransitionTime": _iso(created + 60)},
        ],
        "containerStatuses": [cs],
    }


def _succeeded(
    sc: Scenario, p: Any, created: float, cs: dict[str, Any], ips: dict[str, str] | None
) -> dict[str, Any]:
    """The status of a pod whose containers completed at hour `p.finished_h`."""
    started = _iso(created + p.start_delay_s + 25)
    done = _iso(sc.start + p.finished_h * 3600)
    cs = dict(cs, ready=False)
    cs["state"] = {
        "terminated": {
            "reason": "Completed",
            "exitCode": 0,
            "startedAt": started,
            "finishedAt": done,
        }
    }
    return {
        "phase": "Succeeded",
        "hostIP": (
            ips.get(p.node, "")
            if ips is not None
            else next((n.ip for n in sc.nodes if n.name == p.node), "")
        ),
        "startTime": _iso(created + p.start_delay_s),
        "qosClass": "Guaranteed",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": _iso(created + 1)},
            {
                "type": "Ready",
                "status": "False",
                "reason": "PodCompleted",
                "lastTransitionTime": done,
            },
        ],
        "containerStatuses": [cs],
    }


def _owner_api(kind: str) -> str:
    return {
        "ReplicaSet": "apps/v1",
        "StatefulSet": "apps/v1",
        "Job": "batch/v1",
        "PyTorchJob": "kubeflow.org/v1",
        "JobSet": "jobset.x-k8s.io/v1alpha2",
    }.get(kind, "v1")


@without_gc
def k8s_lists(sc: Scenario) -> dict[str, dict[str, Any]]:
    """The scenario's Kubernetes objects as the API server's list responses."""
    rv = {"resourceVersion": "999999"}
    nodes = [
        {
            "metadata": {
                "name": n.name,
                "uid": f"node-{i:05d}",
                "labels": dict(n.labels),
                **({"annotations": dict(n.annotations)} if n.annotations else {}),
                "resourceVersion": str(300000 + i),
                "creationTimestamp": _iso(sc.start - 86400 * 60),
            },
            "spec": {"taints": [dict(t) for t in n.taints]} if n.taints else {},
            "status": {
                "capacity": dict(n.capacity),
                "allocatable": dict(n.capacity),
                "addresses": [
                    {"type": "InternalIP", "address": n.ip},
                    {"type": "Hostname", "address": n.name},
                ],
            },
        }
        for i, n in enumerate(sc.nodes)
    ]
    jobs: list[dict[str, Any]] = [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": j["name"], "namespace": j["namespace"], "uid": j["uid"]},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "restartPolicy": "OnFailure"},
                    "Worker": {"replicas": j["workers"], "restartPolicy": "OnFailure"},
                }
            },
            "status": {"conditions": [{"type": "Running", "status": "True"}]},
        }
        for j in sc.objects.get("pytorchjobs", [])
    ]
    for j, job in zip(sc.objects.get("pytorchjobs", []), jobs, strict=True):
        if j.get("min_available"):
            job["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": j["min_available"]}}
        if j.get("labels"):
            job["metadata"]["labels"] = dict(j["labels"])
    classes = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "preemptionPolicy": "PreemptLowerPriority",
        }
        for name, value in (("serving", 10000), ("training", 1000), ("batch", 100))
    ]
    classes.extend(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": c["name"]},
            "value": c["value"],
            "preemptionPolicy": c["preemptionPolicy"],
            "description": c.get("description", ""),
        }
        for c in sc.objects.get("priorityclasses", [])
    )
    pods = list(_pods(sc))
    spaces = teams.namespaces([str(p["metadata"]["namespace"]) for p in pods])
    return {
        "pods": {"kind": "PodList", "apiVersion": "v1", "metadata": rv, "items": pods},
        "nodes": {"kind": "NodeList", "apiVersion": "v1", "metadata": rv, "items": nodes},
        "namespaces": {
            "kind": "NamespaceList",
            "apiVersion": "v1",
            "metadata": rv,
            "items": spaces,
        },
        "pytorchjobs": {
            "kind": "PyTorchJobList",
            "apiVersion": "kubeflow.org/v1",
            "metadata": rv,
            "items": jobs,
        },
        "priorityclasses": {
            "kind": "PriorityClassList",
            "apiVersion": "scheduling.k8s.io/v1",
            "metadata": rv,
            "items": classes,
        },
        **{
            key: {"kind": kind, "apiVersion": api, "metadata": rv, "items": list(sc.objects[key])}
            for key, (api, kind) in _CRD_LISTS.items()
            if key in sc.objects
        },
        **{
            key: {
                "kind": f"{kind}List",
                "apiVersion": "resource.k8s.io/v1",
                "metadata": rv,
                "items": items,
            }
            for (key, items), kind in zip(
                _dra_lists(sc).items(), ("ResourceClaim", "ResourceSlice"), strict=False
            )
        },
        **owner_lists(sc.pods, sc.objects),
    }


def _claim(p: Any) -> str:
    """The name of the claim generated for a DRA pod from its template."""
    return f"{p.name}-gpu-{p.uid[:5]}"


def _dra_lists(sc: Scenario) -> dict[str, list[dict[str, Any]]]:
    """The ResourceClaims of the pods that hold GPUs through DRA (each allocated the devices
    it holds at the window's end and reserved for it), and the ResourceSlices of NVIDIA's DRA
    driver on the nodes it runs on (one pool per node, a device `gpu-<index>` per GPU)."""
    held: dict[str, list[Any]] = {}
    for h in sc.holdings:
        if h.pod is not None and h.pod.dra and h.pod.alive and h.h1 >= sc.hours:
            held.setdefault(h.pod.uid, []).append(h.slot)
    claims = []
    for p in sc.pods:
        if not (p.dra and p.alive and p.uid in held):
            continue
        results = [
            {
                "request": "gpu",
                "driver": "gpu.nvidia.com",
                "pool": p.node,
                "device": f"gpu-{s.index}",
            }
            for s in held[p.uid]
        ]
        claims.append(
            {
                "metadata": {
                    "name": _claim(p),
                    "namespace": p.namespace,
                    "uid": f"claim-{p.uid}",
                    "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                    "ownerReferences": [
                        {"apiVersion": "v1", "kind": "Pod", "name": p.name, "uid": p.uid}
                    ],
                },
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {
                                    "deviceClassName": "gpu.nvidia.com",
                                    "allocationMode": "ExactCount",
                                    "count": len(results),
                                },
                            }
                        ]
                    }
                },
                "status": {
                    "allocation": {"devices": {"results": results}},
                    "reservedFor": [{"resource": "pods", "name": p.name, "uid": p.uid}],
                },
            }
        )
    slices = [
        {
            "metadata": {"name": f"{n.name}-gpu.nvidia.com-0", "uid": f"slice-{n.name}"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": n.name,
                "pool": {"name": n.name, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": f"gpu-{s.index}",
                        "attributes": {
                            "type": {"string": "gpu"},
                            "uuid": {"string": s.uuid},
                            "productName": {"string": n.model},
                            "pcieBusID": {"string": s.pci_bus_id},
                        },
                    }
                    for s in sc.slots
                    if s.node is n and not s.mig_id
                ],
            },
        }
        for n in sc.nodes
        if n.dra
    ]
    return {"resourceclaims": claims, "resourceslices": slices} if slices else {}


_CRD_LISTS = {
    "volcano_podgroups": ("scheduling.volcano.sh/v1beta1", "PodGroupList"),
    "coscheduling_podgroups": ("scheduling.x-k8s.io/v1alpha1", "PodGroupList"),
    "kueue_workloads": ("kueue.x-k8s.io/v1beta2", "WorkloadList"),
    "jobsets": ("jobset.x-k8s.io/v1alpha2", "JobSetList"),
    "kueue_resourceflavors": ("kueue.x-k8s.io/v1beta2", "ResourceFlavorList"),
    "kueue_clusterqueues": ("kueue.x-k8s.io/v1beta2", "ClusterQueueList"),
    "kueue_cohorts": ("kueue.x-k8s.io/v1beta2", "CohortList"),
    "kueue_localqueues": ("kueue.x-k8s.io/v1beta2", "LocalQueueList"),
    "volcano_queues": ("scheduling.volcano.sh/v1beta1", "QueueList"),
    "kai_queues": ("scheduling.run.ai/v2", "QueueList"),
    "kai_podgroups": ("scheduling.run.ai/v2alpha2", "PodGroupList"),
    "karpenter_nodepools": ("karpenter.sh/v1", "NodePoolList"),
}
"""Gang objects the generator writes as whole API objects, by list key (see
`gpuaudit.sources.kubernetes.RESOURCES`)."""

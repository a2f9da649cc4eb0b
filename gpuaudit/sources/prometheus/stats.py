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

import dataclasses
import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PARAMS = {"stats": "all"}
"""The query parameters that ask for the statistics."""
DISCOVERY = "discovery"
"""The id under which the samples read by discovery's queries are counted (`SamplesRead`):
the pod label check, the scrape interval, the recorded series' coverage."""

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


# -- samples read ----------------------------------------------------------------------------

RULE_INTERVAL_S = 300.0
"""The evaluation interval of a recorded series whose name does not say its own (the 5-minute
group of `gpuaudit rules`)."""
SUBQUERY_STEP_S = 60.0
"""The step of a subquery that gives none (Prometheus' default evaluation interval)."""
_MAX_FIGURE = 10**15
"""The largest figure of samples one request is counted at (sizes from outside, bounded)."""
_LABEL_LISTS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_WORDS = frozenset(
    {"and", "or", "unless", "bool", "atan2", "inf", "nan", "offset", "start", "end"}
    | {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values"}
    | {"bottomk", "topk", "quantile", "limitk", "limit_ratio"}
)
"""Words that are never a metric's name in gpuaudit's queries: operators, modifiers and the
aggregations (which may be followed by `by (...)` before their `(`)."""
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)?")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_NAME_EXACT = re.compile(r'__name__\s*=\s*"([^"\\]*)"')
_EVERY = re.compile(r"(\d+)(s|m|h|d)$")


@dataclass(frozen=True)
class Selector:
    """One series selector of a PromQL text: what it reads of each series at each evaluation
    of the query."""

    name: str
    """The metric name, or "" when the selector matches names by a regular expression."""
    range_s: float | None
    """The range of a range selector (`[1h]`), None for an instant selector."""
    repeat: float = 1.0
    """How many times it is evaluated per evaluation of the query: the points of the
    subqueries around it (`[7d:5m]`: 2,016)."""

    def per_evaluation(self, interval_s: float | None) -> float | None:
        """The samples it reads of one series at one evaluation of the query: 1 for an instant
        selector; a range's length over the interval between two samples: the evaluation
        interval of a recorded series (`gpuaudit:`, told by the name's end, `...:sum5m`,
        `...:mean1h`), else `interval_s`, the scrape interval measured of the DCGM series.
        None when that is needed and not known."""
        if self.range_s is None:
            return self.repeat
        every: float | None = interval_s
        if self.name.startswith("gpuaudit:"):
            m = _EVERY.search(self.name)
            every = float(m.group(1)) * _UNIT_S[m.group(2)] if m else RULE_INTERVAL_S
        if every is None or not every > 0:
            return None
        return self.repeat * self.range_s / every


def _duration_s(text: str) -> float | None:
    """Seconds of a PromQL duration (`5m`, `1h30m`, `299999ms`, `300`), or None."""
    text = text.strip()
    pos, total = 0, 0.0
    while pos < len(text):
        m = _DURATION.match(text, pos)
        if m is None or m.end() == pos:
            return None
        total += float(m.group(1)) * _UNIT_S[m.group(2) or "s"]
        pos = m.end()
    return total if text else None


def _skip_string(expr: str, i: int) -> int:
    """The index after the string literal that starts at `i`."""
    quote, i = expr[i], i + 1
    while i < len(expr) and expr[i] != quote:
        i += 2 if expr[i] == "\\" and quote != "`" else 1
    return i + 1


def _close(expr: str, i: int, opening: str, closing: str) -> int:
    """The index after the bracket that closes the one at `i` (strings skipped)."""
    depth = 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            i = _skip_string(expr, i)
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def _spaces(expr: str, i: int) -> int:
    while i < len(expr) and expr[i].isspace():
        i += 1
    return i


def _bracket(expr: str, i: int) -> tuple[int, float | None, float | None, bool]:
    """The `[...]` at `i`, if any: the index after it, its range, its subquery step, and
    whether it is a subquery (`[range:step]`)."""
    j = _spaces(expr, i)
    if j >= len(expr) or expr[j] != "[":
        return i, None, None, False
    end = _close(expr, j, "[", "]")
    inner = expr[j + 1 : end - 1]
    rng, sep, step = inner.partition(":")
    if not sep:
        return end, _duration_s(rng), None, False
    return end, _duration_s(rng), _duration_s(step) if step.strip() else SUBQUERY_STEP_S, True


@functools.lru_cache(maxsize=512)
def selectors(expr: str) -> tuple[Selector, ...]:
    """The series selectors of a PromQL text, each with its range and how many times the
    subqueries around it evaluate it. A small reader of PromQL's shape (strings, label
    matchers, `by (...)` lists, function calls, subqueries), enough for an estimate of the
    samples a query reads; a text it cannot read gives what it found."""
    groups: list[list[Selector]] = [[]]
    i, n = 0, len(expr)
    while i < n:
        c = expr[i]
        if c in "\"'`":
            i = _skip_string(expr, i)
        elif c == "(":
            groups.append([])
            i += 1
        elif c == ")":
            inner = groups.pop() if len(groups) > 1 else []
            i, rng, step, sub = _bracket(expr, i + 1)
            if sub and rng and step:
                inner = [dataclasses.replace(s, repeat=s.repeat * rng / step) for s in inner]
            groups[-1].extend(inner)
        elif c == "{":
            end = _close(expr, i, "{", "}")
            m = _NAME_EXACT.search(expr, i, end)
            i = _selector(expr, end, m.group(1) if m else "", groups[-1])
        elif c.isdigit() or c == ".":
            while i < n and (expr[i].isalnum() or expr[i] in "._"):
                i += 1
        elif _IDENT.match(expr, i):
            m = _IDENT.match(expr, i)
            assert m is not None
            word, i = m.group(0), m.end()
            j = _spaces(expr, i)
            if word.lower() in _LABEL_LISTS and j < n and expr[j] == "(":
                i = _close(expr, j, "(", ")")
            elif word.lower() in _WORDS or (j < n and expr[j] == "("):
                continue  # a function's `(` opens a group of its own
            else:
                if j < n and expr[j] == "{":
                    j = _close(expr, j, "{", "}")
                else:
                    j = i
                i = _selector(expr, j, word, groups[-1])
        else:
            i += 1
    return tuple(s for g in groups for s in g)


def _selector(expr: str, i: int, name: str, into: list[Selector]) -> int:
    """Record the selector of `name` whose matchers end at `i`, with its range or subquery;
    the index after them."""
    end, rng, step, sub = _bracket(expr, i)
    if sub:
        into.append(Selector(name, None, (rng / step) if rng and step else 1.0))
    else:
        into.append(Selector(name, rng))
    return end


def evaluations(params: Mapping[str, Any]) -> int:
    """How many times a request evaluates its query: once for an instant query, at each step
    from `start` to `end` for a range query."""
    if "step" not in params:
        return 1
    try:
        start, end, step = (float(params[k]) for k in ("start", "end", "step"))
    except (KeyError, TypeError, ValueError):
        return 1
    if not (math.isfinite(end - start) and step > 0 and end >= start):
        return 1
    return min(int((end - start) / step + 1e-9) + 1, _MAX_FIGURE)


def said_samples(body: Any) -> int | None:
    """The samples the backend says it read for an answer (Prometheus' `stats=all`:
    `data.stats.samples.totalQueryableSamples`), or None where it says nothing usable."""
    data = body.get("data") if isinstance(body, dict) else None
    st = data.get("stats") if isinstance(data, dict) else None
    samples = st.get("samples") if isinstance(st, dict) else None
    x = _number(samples.get("totalQueryableSamples")) if isinstance(samples, dict) else None
    return int(x) if x is not None and x.is_integer() else None


def fetched_series(body: Any) -> int | None:
    """The series the backend says it fetched for an answer (VictoriaMetrics' top-level
    `stats.seriesFetched`, a decimal text), or None."""
    st = body.get("stats") if isinstance(body, dict) else None
    v = st.get("seriesFetched") if isinstance(st, dict) else None
    if isinstance(v, str) and v.isdecimal() and len(v) <= 15:
        return int(v)
    x = _number(v)
    return int(x) if x is not None and x.is_integer() else None


def estimate(
    found: tuple[Selector, ...], series: float, evals: int, interval_s: float | None
) -> int | None:
    """The samples a request read, estimated: `series` read by each selector, times the
    evaluations of the query, times what each selector reads of a series at an evaluation
    (`Selector.per_evaluation`), summed over the selectors; None when a raw range needs the
    scrape interval and it is not known."""
    per = 0.0
    for s in found:
        p = s.per_evaluation(interval_s)
        if p is None:
            return None
        per += p
    n = series * evals * per
    return round(n) if n < _MAX_FIGURE else _MAX_FIGURE  # inf and nan too


@dataclass(frozen=True)
class QuerySamples:
    """The samples read by the requests of one query (every chunk, shard and piece of it
    answered), or of every query."""

    samples: int
    """As the backend said (Prometheus' `totalQueryableSamples`), or estimated."""
    requests: int
    """Answered requests."""
    estimated: int = 0
    """Requests whose figure is estimated (the backend said nothing usable)."""
    unknown: int = 0
    """Requests neither said nor estimated (the scrape interval unknown), not in `samples`."""

    def __add__(self, other: QuerySamples) -> QuerySamples:
        return QuerySamples(
            self.samples + other.samples,
            self.requests + other.requests,
            self.estimated + other.estimated,
            self.unknown + other.unknown,
        )

    @property
    def how(self) -> str:
        """`as the backend said`, `estimated`, `n of m estimated`, or `not known`, with
        `, k not known` when some requests are neither said nor estimated."""
        said = self.requests - self.estimated - self.unknown
        if said + self.estimated == 0:
            return "not known"
        if not self.estimated:
            how = "as the backend said"
        elif not said:
            how = "estimated"
        else:
            how = f"{self.estimated:,} of {self.requests:,} estimated"
        return how + (f", {self.unknown:,} not known" if self.unknown else "")

    def text(self) -> str:
        """`1,234,567 samples read (2 requests, estimated)`."""
        req = f"{self.requests:,} request" + ("" if self.requests == 1 else "s")
        if self.how == "not known":
            return f"samples read not known ({req})"
        return f"{self.samples:,} samples read ({req}, {self.how})"

    def to_json(self) -> dict[str, int]:
        return {
            "samples": self.samples,
            "requests": self.requests,
            "estimated": self.estimated,
            "unknown": self.unknown,
        }

    @classmethod
    def from_json(cls, v: Any) -> QuerySamples | None:
        """The figures of a manifest, or None when they are not whole numbers (below 10^18:
        sizes from outside, bounded) that add up."""
        if not isinstance(v, dict):
            return None
        got = [v.get(k, 0) for k in ("samples", "requests", "estimated", "unknown")]
        if not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 1e18 for x in got):
            return None
        if got[2] + got[3] > got[1]:
            return None
        return cls(*got)


@dataclass(frozen=True)
class SamplesRead:
    """The manifest's `samples_read`: per query id and in total, the samples the backend read
    to answer the collection's queries."""

    total: QuerySamples
    """The sum of `queries`."""
    queries: Mapping[str, QuerySamples]
    """Query id -> the samples its requests read."""
    interval_s: float | None = None
    """The scrape interval the estimates took for raw series (None: none was measured)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "total": self.total.to_json(),
            "queries": {q: s.to_json() for q, s in sorted(self.queries.items())},
        }
        if self.interval_s is not None:
            out["scrape_interval_s"] = self.interval_s
        return out

    @classmethod
    def from_json(cls, v: Any) -> SamplesRead | None:
        """The object of a manifest, or None when it is not one whose total is the sum of its
        queries."""
        if not isinstance(v, dict) or not isinstance(v.get("queries"), dict):
            return None
        queries = {q: QuerySamples.from_json(s) for q, s in v["queries"].items()}
        total = QuerySamples.from_json(v.get("total"))
        interval = _number(v.get("scrape_interval_s"))
        if total is None or any(s is None for s in queries.values()):
            return None
        kept = {q: s for q, s in queries.items() if s is not None}
        if sum(kept.values(), QuerySamples(0, 0)) != total:
            return None
        return cls(total, kept, interval if "scrape_interval_s" in v else None)

    def lines(self) -> list[str]:
        """One line per query, then the total (`--debug`)."""
        out = [f"query {q}: {s.text()}" for q, s in sorted(self.queries.items())]
        return [*out, f"all queries: {self.total.text()}"]


@dataclass(frozen=True)
class _Request:
    qid: str
    group: tuple[str, str]
    sparse: bool
    rows: int
    evals: int
    found: tuple[Selector, ...]
    said: int | None
    fetched: int | None


class SamplesCounter:
    """Counts the samples every answered request of a collection read (`SamplesRead`).

    Prometheus says it with `stats=all` (`totalQueryableSamples`). Where a backend does not
    (VictoriaMetrics, Thanos), it is estimated (`estimate`) from the query's selectors and the
    answer: the series read (those the backend says it fetched, VictoriaMetrics'
    `seriesFetched`, shared among the selectors; else those answered), times the evaluations,
    times the samples each selector reads of a series at one. A query that answers only some
    of the series it reads (`sparse`: sample counts answered where they change, XID onsets) is
    taken to read as many series as the widest answer over the same metric and shard.

    Prometheus leaves out of `totalQueryableSamples` what a subquery reads when the subquery
    is a range function's argument (`count_over_time((...)[1h:5m])`: it counts the
    subquery's output points; prometheus/prometheus#16638): for a request with a subquery the
    figure is the larger of the backend's and the estimate, estimated where that is larger."""

    def __init__(self) -> None:
        self._requests: list[_Request] = []

    def add(
        self,
        qid: str,
        metric: str,
        shard: str,
        sparse: bool,
        expr: str,
        params: Mapping[str, Any],
        body: Any,
    ) -> None:
        """Count one answered request of query `qid`."""
        data = body.get("data") if isinstance(body, dict) else None
        result = data.get("result") if isinstance(data, dict) else None
        rows = len(result) if isinstance(result, list) else 0
        self._requests.append(
            _Request(
                qid,
                (metric, shard),
                sparse,
                rows,
                evaluations(params),
                selectors(expr),
                said_samples(body),
                fetched_series(body),
            )
        )

    def result(self, interval_s: float | None) -> SamplesRead:
        """The figures, estimated where the backend said nothing at scrape interval
        `interval_s` (None: unknown)."""
        widest: dict[tuple[str, str], int] = {}
        for r in self._requests:
            if not r.sparse:
                widest[r.group] = max(widest.get(r.group, 0), r.rows)
        per: dict[str, QuerySamples] = {}
        for r in self._requests:
            nested = any(s.repeat != 1 for s in r.found)
            n = None
            if r.said is None or nested:
                if r.fetched is not None:
                    series = r.fetched / max(1, len(r.found))
                else:
                    series = max(r.rows, widest.get(r.group, 0)) if r.sparse else r.rows
                n = estimate(r.found, series, r.evals, interval_s)
            if r.said is not None and (n is None or n <= r.said):
                got = QuerySamples(r.said, 1)
            else:
                got = QuerySamples(0, 1, 0, 1) if n is None else QuerySamples(n, 1, 1)
            per[r.qid] = per.get(r.qid, QuerySamples(0, 0)) + got
        total = sum(per.values(), QuerySamples(0, 0))
        estimated = total.estimated > 0
        return SamplesRead(total, per, interval_s if estimated else None)

"""The query plan: runs the catalogue against one backend within its limits and records every
answer as it came.

The plan is fixed by the catalogue (`catalogue.CATALOGUE`), not by the cluster: every query
covers every GPU at once. A query the backend refuses as too big (Prometheus's
`--query.max-samples`, the 11,000-points-per-series cap, Mimir's chunk limit, a query timeout)
is cut in two along time, and then, when one time chunk is still too big, sharded by the first
hex digit of the GPU UUID. The longest piece the backend answered after a refusal is
remembered, and later queries of the same kind are cut to it before they are sent, so that a
backend's limit costs one refusal per collection rather than a few per query. How each query
was cut is recorded (`Collector.plan`) for the manifest.

The time of the queries is bounded with the number (`Collector._grant`): the collection's
allowance (`transfer.Allowance`) grows by `--timeout` for each query planned and each piece a
refusal asked for, never for a query sent again after it went unanswered.

The number of queries is bounded (`max_queries`, `--max-queries`): a plan that would need more,
at the start (a window of many steps) or while cutting (a backend that refuses ever smaller
pieces), is refused with one clear error before the excess is sent.

Up to `parallel` queries are in flight at once (`--parallel-queries`, 2 by default): the backend
evaluates each on a core of its own. Only the requests run on threads of their own; every answer
is recorded, and every refusal cut, on the collecting thread in the order the answers come, and
the answers of a query are put in time order at the end, so that the snapshot's answers are the
same whatever the parallelism. With 1, the queries are sent one after another, each after the
answer before it.
"""

from __future__ import annotations

import queue
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from gpuaudit.core.errors import SourceError
from gpuaudit.sources.bounds import DEFAULT_QUERIES
from gpuaudit.sources.interface import Progress, Window
from gpuaudit.sources.prometheus import hourly, stats
from gpuaudit.sources.prometheus.catalogue import Part, QuerySpec
from gpuaudit.sources.prometheus.discovery import Capabilities
from gpuaudit.sources.prometheus.http import PromClient, PromError, Response
from gpuaudit.sources.prometheus.recorded import hourly_parts

MAX_POINTS = 11_000
"""Prometheus's fixed cap on points per series in a range query."""
SLOW_CUTS = 8
"""The most queries of one collection cut smaller because no answer came within `--timeout`
(each costs that long): beyond it, the backend is taken to be down, not slow."""
SHARDS = (
    '=~"GPU-[0-7].*"',
    '=~"GPU-[89a-fA-F].*"',
    '!~"GPU-[0-9a-fA-F].*"',
)
"""UUID label matchers that split all series into three disjoint parts; `subshards` cuts the
first two finer, down to `SHARD_DIGITS` hex digits of the UUID."""
SHARD_DIGITS = 2
"""The longest UUID prefix a shard is told by: at most 16 x 16 + 1 shards of a query."""
_SHARD = re.compile(r'=~"GPU-((?:\[[0-9a-fA-F-]+\])+)\.\*"')
_CLASS = re.compile(r"\[([0-9a-fA-F-]+)\]")
_HEX = "0123456789abcdef"


def _hex_class(digits: str) -> str:
    """A regex character class of hex `digits` (lower case), in both cases."""
    return "[" + digits + "".join(d.upper() for d in digits if d.isalpha()) + "]"


def _digits(cls: str) -> str:
    """The lower-case hex digits a character class like `0-7` or `89a-fA-F` holds."""
    out: set[str] = set()
    i = 0
    while i < len(cls):
        if i + 2 < len(cls) and cls[i + 1] == "-":
            lo, hi = cls[i].lower(), cls[i + 2].lower()
            out.update(d for d in _HEX if lo <= d <= hi)
            i += 3
        else:
            out.add(cls[i].lower())
            i += 1
    return "".join(d for d in _HEX if d in out)


def subshards(shard: str) -> list[str]:
    """The disjoint shards that together hold `shard`'s series, or none when it cannot be cut
    (the UUIDs that are not `GPU-` and hex, or one hex digit at each of `SHARD_DIGITS`)."""
    if not shard:
        return list(SHARDS)
    m = _SHARD.fullmatch(shard)
    if m is None:
        return []
    classes = [_digits(c) for c in _CLASS.findall(m.group(1))]
    head, last = classes[:-1], classes[-1]
    if len(last) > 1:
        prefix = "".join(_hex_class(d) for d in head)
        return [
            f'=~"GPU-{prefix}{_hex_class(d)}.*"'
            for d in (last[: len(last) // 2], last[len(last) // 2 :])
        ]
    if len(classes) >= SHARD_DIGITS:
        return []
    prefix = "".join(_hex_class(d) for d in classes)
    # The UUIDs whose next character is not a hex digit, or that end here, stay whole.
    return [
        f'=~"GPU-{prefix}[0-7].*"',
        f'=~"GPU-{prefix}[89a-fA-F].*"',
        f'=~"GPU-{prefix}([^0-9a-fA-F].*)?"',
    ]


Keep = Callable[[str, Response], dict[str, Any]]
"""How an answer is kept: given the query id and the response, the fields its entry holds
besides `query`, `params` and `chunk` (`body`, or whatever the caller records instead)."""


def keep_body(qid: str, response: Response) -> dict[str, Any]:
    """Keep the answer as the API returned it, parsed from JSON."""
    return {"body": response.body}


@dataclass
class _Job:
    spec: QuerySpec
    start: int
    end: int
    shard: str = ""


def check_plan(w: Window, specs: Iterable[QuerySpec], max_queries: int) -> None:
    """Raise `SourceError` when running `specs` over `w` would take more than `max_queries`
    queries before any is cut smaller (range queries are cut at `MAX_POINTS` points)."""
    per = max(1, MAX_POINTS - 1)
    chunks = -(-(w.seconds // w.step) // per)
    planned = sum(chunks if s.kind == "hourly" else 1 for s in specs)
    if planned > max_queries:
        raise SourceError(
            f"a window of {w.seconds:,} s in steps of {w.step:,} s would take {planned:,} "
            f"queries, more than {max_queries:,} (--max-queries); audit a shorter --window or "
            "use a longer --step"
        )


def _selector(base: str, uuid_label: str, shard: str) -> str:
    parts = [p for p in (base, f"{uuid_label}{shard}" if shard else "") if p]
    return ",".join(parts)


class Collector:
    """Runs the catalogue against one backend and records every answer."""

    def __init__(
        self,
        client: PromClient,
        w: Window,
        caps: Capabilities,
        selector: str = "",
        progress: Progress | None = None,
        keep: Keep = keep_body,
        max_queries: int = DEFAULT_QUERIES,
        parallel: int = 1,
    ) -> None:
        self.client, self.w, self.caps, self.selector = client, w, caps, selector
        self.progress = progress
        self.keep = keep
        self.max_queries = max_queries
        self.parallel = max(1, parallel)
        self.done = 0
        self.total = 0
        self.sent = 0
        """Queries sent, those refused as too big included."""
        self.series = 0
        """Series in every answer together (0: the backend has no DCGM data for the window)."""
        self.warnings: list[str] = []
        self.incomplete: list[str] = []
        self.plan: dict[str, list[list[Any]]] = {}
        self.reads: dict[str, set[str]] = {}
        """Query id -> what its chunks read: `raw`, `recorded` (recorded series alone) or
        `recorded and raw` (cut into pieces, see `recorded`)."""
        self.timings = stats.BackendTimings()
        self.samples = stats.SamplesCounter()
        """The samples every answered request read (`stats.SamplesCounter`)."""
        cov = caps.hourly
        self.hourly = cov
        self.offset = cov.offset_ms / 1000 if cov is not None else 0.0
        """Added to the time of every query: the hourly rules' evaluations' sub-second part
        (`hourly.HourlyCoverage.offset_ms`)."""
        self.hourly_reads = hourly.reads(caps.pod_label) if cov is not None else {}
        """Query id -> the hourly rules it reads where they cover its buckets."""
        self.slow_cuts = 0
        """Queries cut because no answer came within `--timeout` (`_slow`)."""
        self.refused: dict[str, int] = {}
        """Per query kind: the shortest piece (seconds) the backend refused as too big."""
        self.fits: dict[str, int] = {}
        """Per query kind: the longest piece (seconds) shorter than a refused one that the
        backend answered. Later pieces of the kind longer than it are cut to it before they are
        sent: the planner learns the backend's limit once per collection, not once per query
        (each refusal costs the backend the work up to its limit)."""

    def _tick(self, added: int = 0) -> None:
        self.total += added
        if self.progress:
            self.progress(self.done, self.total)

    def _record_warnings(self, qid: str, warnings: list[str], partial: bool) -> None:
        if partial:
            reason = (
                f"the backend marked its answer to {qid} as partial (isPartial: some of its "
                "storage nodes did not answer)"
            )
            if reason not in self.incomplete:
                self.incomplete.append(reason)
                self.warnings.append(f"{qid}: the answer is partial (isPartial)")
        for wtext in warnings:
            msg = f"{qid}: {wtext}"
            if msg not in self.warnings:
                self.warnings.append(msg)
            if not wtext.lower().startswith("promql"):
                reason = f"the backend answered {qid} in part: {wtext}"
                if reason not in self.incomplete:
                    self.incomplete.append(reason)

    def run(self, specs: list[QuerySpec]) -> dict[str, list[dict[str, Any]]]:
        """Every answer by query id, in time and shard order within one."""
        out: dict[str, list[dict[str, Any]]] = {}
        self._check_plan(specs)
        jobs: list[_Job] = []
        for spec in specs:
            if spec.kind == "window":
                jobs.extend(self._window_jobs(spec))
            else:
                jobs.extend(self._hourly_jobs(spec))
        self._grant(len(jobs))
        self._tick(len(jobs))
        answers: queue.Queue[tuple[_Job, _Sent | BaseException]] = queue.Queue()
        flying = 0
        while jobs or flying:
            while jobs and flying < self.parallel:
                if self.sent + len(jobs) > self.max_queries:
                    raise SourceError(
                        "the backend refuses answers this large, and cutting the queries "
                        f"smaller would take more than {self.max_queries:,} queries "
                        "(--max-queries); narrow the scan with --cluster-label or a shorter "
                        "--window, or raise the backend's limits"
                    )
                job = jobs.pop(0)
                pieces = self._learned(job)
                if len(pieces) > 1:
                    jobs[0:0] = pieces
                    self._grant(len(pieces) - 1)
                    self._tick(len(pieces) - 1)
                    continue
                self.sent += 1
                flying += 1
                self._start(job, answers)
            job, got = answers.get()
            flying -= 1
            kind, length = job.spec.kind, job.end - job.start
            if isinstance(got, BaseException):
                if not isinstance(got, PromError) or not (got.too_big or self._slow(job, got)):
                    raise got
                if not got.series_limit and not job.shard:
                    self.refused[kind] = min(self.refused.get(kind, length), length)
                parts = self._split(job, by_series=got.series_limit)
                if not parts:
                    raise SourceError(
                        f"{job.spec.id}: the backend refuses even the smallest piece "
                        f"({job.end - job.start} s of one UUID shard, "
                        f"{job.shard or 'unsharded'}): {got}"
                    ) from None
                jobs[0:0] = parts
                if got.too_big:  # a refusal asks for the pieces; a query unanswered does not
                    self._grant(len(parts) - 1)
                self._tick(len(parts) - 1)
                continue
            if not job.shard and length < self.refused.get(kind, 0):
                self.fits[kind] = max(self.fits.get(kind, 0), length)
            out.setdefault(job.spec.id, []).append(self._record(job, got))
            self.plan.setdefault(job.spec.id, []).append([job.start, job.end, job.shard])
            self.done += 1
            self._tick()
        for qid, entries in out.items():
            entries.sort(key=lambda e: (e["chunk"][0], e["chunk"][2]))
            self.plan[qid].sort(key=lambda c: (c[0], c[2]))
        return out

    def _grant(self, requests: int) -> None:
        """Allow the collection `--timeout` more for each of `requests` more queries it needs
        (`transfer.Allowance`): those planned, and the pieces a refusal asked for."""
        if self.client.allowance is not None:
            self.client.allowance.grant(requests)

    def _slow(self, job: _Job, err: PromError) -> bool:
        """Whether `job`, which got no answer within `--timeout`, is cut smaller and sent
        again, as a query the backend refused as too big: the backend evaluated it past the
        `timeout` it was asked to stop at (Prometheus 2.42 ran a week's window query over
        20,000 series at a 15 s scrape past it). At most `SLOW_CUTS` times a collection, each
        said in the warnings."""
        if not err.unanswered or self.slow_cuts >= SLOW_CUTS:
            return False
        self.slow_cuts += 1
        self.warnings.append(
            f"{job.spec.id}: no answer within {self.client.cfg.timeout_s:g} s (--timeout) for "
            f"{job.end - job.start} s of the window; cut smaller and sent again (the backend "
            "went on past the timeout it was asked to stop at)"
        )
        return True

    def _start(self, job: _Job, answers: queue.Queue[tuple[_Job, _Sent | BaseException]]) -> None:
        """Send `job` on a thread of its own, which puts its answer, or what it raised, on
        `answers`. The thread is a daemon, as each request's own (`transfer.within`): a
        collection that ends with an error, or is interrupted, does not wait for the queries
        still in flight, which end at their own deadline (`--timeout`)."""

        def run() -> None:
            try:
                answers.put((job, self._send(job)))
            except BaseException as exc:  # noqa: BLE001 - handed to the collecting thread
                answers.put((job, exc))

        threading.Thread(target=run, name="gpuaudit-query", daemon=True).start()

    def _check_plan(self, specs: list[QuerySpec]) -> None:
        """Refuse a plan of more queries than `max_queries` before any is built or sent."""
        check_plan(self.w, specs, self.max_queries)

    def _hourly_jobs(self, spec: QuerySpec) -> list[_Job]:
        """Range queries of at most `MAX_POINTS` points, each of buckets read the same way (the
        raw series before the recorded ones begin, one bucket across that point, then the
        recorded ones)."""
        n = self.w.seconds // self.w.step
        per = max(1, MAX_POINTS - 1)
        step = self.w.step
        jobs: list[_Job] = []
        i = 0
        while i < n:
            j = i + 1
            key = self._bucket_parts(spec, self.w.start + (i + 1) * step)
            while (
                j < n
                and j - i < per
                and self._bucket_parts(spec, self.w.start + (j + 1) * step) == key
            ):
                j += 1
            jobs.append(_Job(spec, self.w.start + i * step, self.w.start + j * step))
            i = j
        return jobs

    def _parts(self, metric: str, s: int, t: int, bucket: bool = True) -> tuple[Part, ...] | None:
        """How `metric` is read over `(s, t]` (seconds): pieces, or None for the raw series
        (see `hourly_parts` for the buckets of a range query)."""
        cov = self.caps.coverage
        if cov is None or metric not in cov.metrics:
            return None
        return hourly_parts(cov, s, t, self.w.step if bucket else 0)

    def _bucket_parts(self, spec: QuerySpec, t: int) -> tuple[object, ...]:
        s = t - self.w.step
        return (
            self._parts(spec.metric, s, t),
            self._parts(spec.unless, s, t),
            self._from_rules(spec, t),
        )

    def _from_rules(self, spec: QuerySpec, t: int) -> bool:
        """Whether the bucket of `spec` ending at `t` is read from the hourly rules."""
        cov = self.hourly
        return cov is not None and spec.id in self.hourly_reads and cov.recorded(t)

    def _window_jobs(self, spec: QuerySpec) -> list[_Job]:
        """The window, cut where the hourly rules begin within it: raw before, the rules
        after (chunks of a window combine: sums and counts add, maxima max)."""
        w, cov = self.w, self.hourly
        if cov is None or spec.id not in self.hourly_reads:
            return [_Job(spec, w.start, w.end)]
        since = cov.since(w)
        if w.start < since < w.end:
            return [_Job(spec, w.start, since), _Job(spec, since, w.end)]
        return [_Job(spec, w.start, w.end)]

    def _note_reads(self, qid: str, *parts: tuple[Part, ...] | None) -> None:
        pieces = [p for ps in parts if ps is not None for p in ps]
        rec = any(p.recorded for p in pieces)
        raw = any(parts_ is None for parts_ in parts) or not all(p.recorded for p in pieces)
        what = "recorded and raw" if rec and raw else "recorded" if rec else "raw"
        self.reads.setdefault(qid, set()).add(what)

    def _learned(self, job: _Job) -> list[_Job]:
        """`job` cut, in whole steps, into the fewest equal pieces no longer than the longest
        piece of its kind the backend answered after refusing a longer one (`fits`); `[job]`
        when it is no longer than that, or nothing was refused."""
        fit = self.fits.get(job.spec.kind)
        steps = (job.end - job.start) // self.w.step
        if fit is None or job.shard or job.end - job.start <= fit or steps < 2:
            return [job]
        k = min(steps, -(-(job.end - job.start) // fit))
        cuts = [job.start + (i * steps // k) * self.w.step for i in range(k)] + [job.end]
        return [_Job(job.spec, a, b, job.shard) for a, b in zip(cuts, cuts[1:], strict=False)]

    def _split(self, job: _Job, by_series: bool = False) -> list[_Job]:
        """`job` in smaller pieces: halves in time, then shards by UUID, ever finer. A job
        refused for the number of series it selects (`by_series`) is sharded at once, since a
        shorter range selects as many series."""
        steps = (job.end - job.start) // self.w.step
        if steps >= 2 and not by_series:
            mid = job.start + (steps // 2) * self.w.step
            return [
                _Job(job.spec, job.start, mid, job.shard),
                _Job(job.spec, mid, job.end, job.shard),
            ]
        return [_Job(job.spec, job.start, job.end, s) for s in subshards(job.shard)]

    def _pieces(self, job: _Job) -> tuple[tuple[Part, ...] | None, tuple[Part, ...] | None]:
        """How `job`'s metric and its `unless` metric are read (a range query's buckets are
        read alike, `_hourly_jobs`: its first bucket says how)."""
        spec = job.spec
        s, t = job.start, job.end if spec.kind == "window" else job.start + self.w.step
        bucket = spec.kind == "hourly"
        parts = None if spec.stat in ("p95", "onsets") else self._parts(spec.metric, s, t, bucket)
        unless = self._parts(spec.unless, s, t, bucket) if spec.unless else None
        return parts, unless

    def _send(self, job: _Job) -> _Sent:
        """The request of one job and its answer (on a worker thread: it changes nothing of
        the collector's). Every query is sent at its bucket ends plus `offset`."""
        sel = _selector(self.selector, self.caps.uuid_label, job.shard)
        spelling = self.caps.pod_label
        spec = job.spec
        group = self.caps.cluster_label
        parts, unless = self._pieces(job)
        began = time.monotonic()
        off, step = self.offset, self.w.step
        if self._from_rules(spec, job.start + step):
            if spec.kind == "window":
                expr = hourly.recorded_query(spec, spelling, sel, job.end - job.start)
                ans = self.client.query(expr, job.end + off, stats.PARAMS)
            else:
                # The bucket before the job's first was read raw: every series is answered
                # there (the form without `full` compares with the bucket before).
                first = job.start + step + (1 if off else 0)
                full = self.caps.full_count
                expr = hourly.recorded_query(spec, spelling, sel, step, full, first)
                ans = self.client.query_range(
                    expr, job.start + step + off, job.end + off, step, stats.PARAMS
                )
            return _Sent(expr, ans, time.monotonic() - began, None, None, True)
        if spec.kind == "window":
            expr = spec.promql(job.end - job.start, spelling, sel, parts, unless, group=group)
            ans = self.client.query(expr, job.end + off, stats.PARAMS)
        else:
            # A count answered only where it changes compares with the bucket before, read
            # the same way: where that bucket was read otherwise (raw, before the recorded
            # series began), every series is answered at the job's first bucket instead.
            # (With the scrape interval measured, counts are answered only where a bucket
            # is not full, which needs no bucket before.)
            recorded = parts is not None or unless is not None
            # (`time()` is the bucket end plus `off`: a second more keeps the first bucket.)
            first = (job.start if recorded else self.w.start) + step + (1 if off else 0)
            full = self.caps.full_count
            expr = spec.promql(step, spelling, sel, parts, unless, first, group, full)
            ans = self.client.query_range(
                expr, job.start + step + off, job.end + off, step, stats.PARAMS
            )
        return _Sent(expr, ans, time.monotonic() - began, parts, unless)

    def _record(self, job: _Job, sent: _Sent) -> dict[str, Any]:
        """The entry of one answered job, with what the manifest says of it."""
        spec, ans = job.spec, sent.answer
        self.timings.add(spec.kind, ans.envelope, sent.seconds)
        # A sample count (answered where it changes) or XID onsets answer fewer series than
        # they read: the estimate, where the backend gives no stats, takes the widest.
        sparse = spec.changes or spec.stat == "onsets"
        self.samples.add(
            spec.id, spec.metric, job.shard, sparse, sent.expr, ans.params, ans.envelope
        )
        if sent.hourly:
            self.reads.setdefault(spec.id, set()).add("recorded hourly")
        else:
            self._note_reads(spec.id, sent.parts, *((sent.unless,) if spec.unless else ()))
        self._record_warnings(spec.id, ans.warnings, ans.partial)
        self.series += len(ans.envelope["data"]["result"])
        entry: dict[str, Any] = {
            "query": sent.expr,
            "params": ans.params,
            "chunk": [job.start, job.end, job.shard],
        }
        entry.update(self.keep(spec.id, ans))
        return entry


@dataclass(frozen=True)
class _Sent:
    """A job's PromQL, its answer, the seconds the answer took, and how its metric and its
    `unless` metric were read (`Collector._pieces`)."""

    expr: str
    answer: Response
    seconds: float
    parts: tuple[Part, ...] | None
    unless: tuple[Part, ...] | None
    hourly: bool = False
    """Read from the hourly rules (`hourly.recorded_query`)."""

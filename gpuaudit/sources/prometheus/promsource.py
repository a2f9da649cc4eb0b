"""The Prometheus source: discovery (`discovery`, which measures the scrape interval: a `--step`
shorter than it is refused there), then the catalogue (`catalogue`) run within
the backend's limits (`planner`), through the HTTP client (`http`). It returns the raw answers
and what the manifest records about them: capabilities, the queries, how they were cut, the
backend's warnings and why the answers may be incomplete.

One deadline bounds the whole collection (`transfer.Allowance`): `--timeout` for each request
it needs, that is each discovery call, each query planned and each piece a query refused as too
big was cut into. Retries, the waits between them and queries sent again after no answer come
out of it, so a backend that answers slowly or not at all cannot multiply `--timeout`: when the
allowance is spent, the collection ends with `CollectionOverdue`, naming the request."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from gpuaudit.core.errors import SourceError
from gpuaudit.sources.bounds import DEFAULT_QUERIES
from gpuaudit.sources.interface import Progress, Source, Window, check_step
from gpuaudit.sources.prometheus import catalogue, hourly, stats
from gpuaudit.sources.prometheus.discovery import Capabilities, discover
from gpuaudit.sources.prometheus.http import CollectionOverdue, PromClient
from gpuaudit.sources.prometheus.planner import Collector, Keep, check_plan, keep_body
from gpuaudit.sources.prometheus.recorded import hourly_parts
from gpuaudit.sources.transfer import Allowance

log = logging.getLogger("gpuaudit.prometheus")


@dataclass(frozen=True)
class PromCollection:
    """What one pass over a Prometheus-compatible API returned."""

    answers: dict[str, list[dict[str, Any]]]
    """Query id -> one entry per chunk (`query`, `params`, `chunk`, and the answer as `keep`
    kept it), in time order."""
    capabilities: Capabilities
    queries: list[dict[str, Any]]
    """Each query run: `id`, `kind`, `metric` and its PromQL over the whole window."""
    missing_metrics: list[str]
    """Catalogue metrics the backend lacks (their queries were skipped)."""
    plan: dict[str, list[list[Any]]]
    """Query id -> the `[start, end, shard]` chunks it was cut into."""
    warnings: list[str]
    """The backend's warnings, as `<query id>: <text>`."""
    incomplete_reasons: list[str]
    """Why the answers may be incomplete (partial responses)."""
    http_requests: int
    backend_timings: dict[str, dict[str, float | int]] = field(default_factory=dict)
    """Per query kind: queries, the seconds gpuaudit waited for them (`wall_s`) and the
    backend's own statistics where it gave them (`stats.BackendTimings`)."""
    samples_read: stats.SamplesRead | None = None
    """Per query and in total, the samples the backend read to answer them, as it said or
    estimated (`stats.SamplesCounter`)."""
    window: Window | None = None
    """The window collected, where it is not the one asked for: moved to end on the hourly
    rules' last evaluation (`hourly`)."""


class PrometheusSource(Source[PromCollection]):
    """One Prometheus-compatible API, read through `client`."""

    name = "prometheus"

    def __init__(
        self,
        client: PromClient,
        cluster_label: catalogue.ClusterLabel | None = None,
        progress: Progress | None = None,
        keep: Keep = keep_body,
        max_queries: int = DEFAULT_QUERIES,
        parallel: int = 1,
    ) -> None:
        self.client, self.cluster_label, self.progress, self.keep = (
            client,
            cluster_label,
            progress,
            keep,
        )
        self.max_queries = max_queries
        self.parallel = parallel

    def collect(self, window: Window) -> PromCollection:
        """Discover, plan and run every query the backend has the metric for."""
        label = self.cluster_label
        selector = label.selector() if label else ""
        group = label.name if label and label.grouped else ""
        # Before anything is sent: a window that every metric's queries could not cover in
        # `max_queries` is refused whatever the backend holds.
        check_plan(window, catalogue.CATALOGUE, self.max_queries)
        allowance = Allowance(self.client.cfg.timeout_s)
        self.client.allowance = allowance
        allowance.granting = True  # each discovery call is needed once
        discovered: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        self.client.asked = discovered  # its queries' samples are counted too
        try:
            caps = discover(self.client, window, selector, group)
        finally:
            allowance.granting = False
            self.client.asked = None
        if caps.interval is not None:  # refused before the collection, whatever it would cost
            check_step(window.step, caps.interval.seconds, caps.interval.at_least)
        asked = window
        if caps.hourly is not None and caps.window is not None:
            window = caps.window  # ends on the hourly rules' last evaluation
        specs = [q for q in catalogue.CATALOGUE if q.metric in caps.metrics]
        # HAMi's metrics exist in one spelling at most and only where HAMi runs: the inventory
        # says they are missing where pods hold HAMi shares (`gpuaudit.inventory.hami`).
        wanted = {q.metric for q in catalogue.CATALOGUE} - set(catalogue.HAMI_METRICS)
        missing = sorted(wanted - set(caps.metrics))
        col = Collector(
            self.client,
            window,
            caps,
            selector,
            self.progress,
            self.keep,
            self.max_queries,
            self.parallel,
        )
        for expr, params, envelope in discovered:
            col.samples.add(stats.DISCOVERY, "", "", False, expr, params, envelope)
        answers = col.run(specs)
        allowance.grant()
        serving_note = _serving(col, answers)
        incomplete = caps.incomplete + col.incomplete
        if not col.series:
            newest = newest_sample(self.client, window, selector)
            incomplete.append(_no_series(window, selector, caps, newest))
        queries = [_described(q, window, caps, selector, col.reads, group) for q in specs]
        if catalogue.SERVING.id in answers:
            queries.append(_described(catalogue.SERVING, window, caps, selector, col.reads, group))
        return PromCollection(
            answers=answers,
            capabilities=caps,
            queries=queries,
            missing_metrics=missing,
            plan=col.plan,
            warnings=caps.warnings + col.warnings + ([serving_note] if serving_note else []),
            incomplete_reasons=incomplete,
            http_requests=self.client.requests,
            backend_timings=col.timings.to_dict(),
            samples_read=_samples_read(col, caps),
            window=window if window != asked else None,
        )


def _samples_read(col: Collector, caps: Capabilities) -> stats.SamplesRead:
    """The samples read by the collection's queries, each query's and the total logged under
    `--debug`, one line each."""
    got = col.samples.result(caps.interval.seconds if caps.interval else None)
    for line in got.lines():
        log.debug("%s", line)
    return got


def _serving(col: Collector, answers: dict[str, list[dict[str, Any]]]) -> str:
    """Run the one serving metrics query (`catalogue.SERVING`) through the collector, as the
    catalogue's queries are (cut where the backend refuses it as too big, sent beside the others
    with `--parallel-queries`, in the plan and the backend timings), its answers added to
    `answers`; "" or, where the backend did not answer it, a warning: then no pod is known to
    export a serving metric, which costs `gpuaudit fix` its prometheus triggers, never the
    audit. The DCGM series count (`col.series`) leaves its answer out."""
    spec = catalogue.SERVING
    series = col.series
    try:
        got = col.run([spec])
    except CollectionOverdue:
        raise
    except SourceError as exc:  # PromError included: refused, unanswered, cut too small
        col.plan.pop(spec.id, None)
        return f"{spec.id}: not answered ({str(exc)[:200]}): gpuaudit fix writes cron triggers only"
    finally:
        col.series = series
    answers.update(got)
    return ""


def _described(
    q: catalogue.QuerySpec,
    w: Window,
    caps: Capabilities,
    selector: str,
    reads: dict[str, set[str]],
    group: str = "",
) -> dict[str, Any]:
    """A query as the manifest lists it: its PromQL over the whole window (over the window's
    last bucket for an hourly query) and what it read: `raw`, `recorded` or `recorded and
    raw` (the recorded series where they cover the window, the raw ones elsewhere)."""
    cov = caps.coverage
    s = w.start if q.kind == "window" else w.end - w.step
    done = reads.get(q.id, set())
    if caps.hourly is not None and "recorded hourly" in done:
        text = hourly.recorded_query(
            q, caps.pod_label, selector, w.end - s, caps.full_count, w.start + w.step
        )
        return _listed(
            q,
            text,
            "recorded hourly" if done == {"recorded hourly"} else "recorded hourly and raw",
            caps,
        )

    def parts(metric: str) -> tuple[catalogue.Part, ...] | None:
        if cov is None or metric not in cov.metrics or q.stat in ("p95", "onsets"):
            return None
        return hourly_parts(cov, s, w.end, w.step if q.kind == "hourly" else 0)

    text = q.promql(
        w.end - s,
        caps.pod_label,
        selector,
        parts(q.metric),
        parts(q.unless) if q.unless else None,
        w.start + w.step,
        group,
        caps.full_count,
    )
    read = (
        "recorded and raw"
        if "recorded and raw" in done or len(done) > 1
        else next(iter(done), "raw")
    )
    return _listed(q, text, read, caps)


def _listed(q: catalogue.QuerySpec, text: str, read: str, caps: Capabilities) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": q.id,
        "kind": q.kind,
        "metric": q.metric,
        "query": text,
        "reads": read,
    }
    if q.changes and caps.full_count is not None:
        out["full"] = caps.full_count  # how the reader fills the buckets left out
    return out


NEWEST_LOOKBACK_S = 90 * 86400
"""How far before and after the window `newest_sample` looks for DCGM data."""

_ACTIVITY = ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL")


def newest_sample(client: PromClient, w: Window, selector: str) -> float | None:
    """When the newest activity sample of any DCGM series is, from `NEWEST_LOOKBACK_S` before
    the window to as long after it (to the hour, one query: `timestamp` of the series at hourly
    steps; evaluated past now, it sees what the backend holds up to now). The query depends on
    the window alone, not on the clock, so two collections of one window ask the same;
    None when the backend holds none, or does not answer, so that a collection that found no
    DCGM series can say where the data is (an exporter that stopped, a wrong `--end`)."""
    until = w.end + NEWEST_LOOKBACK_S
    since = w.start - NEWEST_LOOKBACK_S
    step = 3600 * max(1, math.ceil((until - since) / 3600 / 5000))
    sub = f"[{until - since}s:{step}s]"
    # One `timestamp` per metric: it drops the name, and two metrics of a GPU would clash.
    expr = (
        "max("
        + " or ".join(f"max_over_time(timestamp({m}{{{selector}}}){sub})" for m in _ACTIVITY)
        + ")"
    )
    try:
        result = client.query(expr, until).body.get("data", {}).get("result", [])
        value = float(result[0]["value"][1]) if result else math.nan
    except (SourceError, LookupError, TypeError, ValueError, AttributeError):
        return None
    return value if math.isfinite(value) and since <= value <= until else None


NEWEST_SAID = "its newest DCGM sample is from"
"""How the reason of a collection without DCGM series starts to say where the newest sample
is (the pipeline repeats that part of it on stderr)."""


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _no_series(w: Window, selector: str, caps: Capabilities, newest: float | None) -> str:
    """Why a collection without a single DCGM series is no audit of zero GPUs, and where the
    newest DCGM sample is when the backend holds one outside the window."""
    where = f" with {selector}" if selector else ""
    if not caps.metrics:
        said = "lists no DCGM_ metric"
    else:
        said = "returned no DCGM series"
    text = f"the backend {said} between {_iso(w.start)} and {_iso(w.end)}{where}"
    if newest is not None and newest < w.start:
        return (
            f"{text}; {NEWEST_SAID} {_iso(newest)} (to the hour), before the "
            "window: dcgm-exporter may no longer be scraped into it, or audit up to then with "
            f"--end {_iso(newest)}"
        )
    if newest is not None and newest > w.end:
        return (
            f"{text}; {NEWEST_SAID} {_iso(newest)} (to the hour), after the window: is --end right?"
        )
    return (
        f"{text}: is dcgm-exporter scraped into it, and are the tenant (X-Scope-OrgID), "
        "--cluster-label and --window right?"
    )


def collect_prometheus(
    client: PromClient,
    w: Window,
    cluster_label: catalogue.ClusterLabel | None = None,
    progress: Progress | None = None,
    keep: Keep = keep_body,
) -> PromCollection:
    """Discover, plan and run every query (`PrometheusSource(...).collect(w)`)."""
    return PrometheusSource(client, cluster_label, progress, keep).collect(w)

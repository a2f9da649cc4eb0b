"""The Prometheus source: discovery (`discovery`, which measures the scrape interval: a `--step`
shorter than it is refused there), then the catalogue (`catalogue`) run within
the backend's limits (`planner`), through the HTTP client (`http`). It returns the raw answers
and what the manifest records about them: capabilities, the queries, how they were cut, the
backend's warnings and why the answers may be incomplete."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuaudit.sources.bounds import DEFAULT_QUERIES
from gpuaudit.sources.interface import Progress, Source, Window, check_step
from gpuaudit.sources.prometheus import catalogue
from gpuaudit.sources.prometheus.discovery import Capabilities, discover
from gpuaudit.sources.prometheus.http import PromClient
from gpuaudit.sources.prometheus.planner import Collector, Keep, check_plan, keep_body
from gpuaudit.sources.prometheus.recorded import hourly_parts


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
        caps = discover(self.client, window, selector, group)
        if caps.interval is not None:  # refused before the collection, whatever it would cost
            check_step(window.step, caps.interval.seconds, caps.interval.at_least)
        specs = [q for q in catalogue.CATALOGUE if q.metric in caps.metrics]
        missing = sorted({q.metric for q in catalogue.CATALOGUE} - set(caps.metrics))
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
        answers = col.run(specs)
        incomplete = caps.incomplete + col.incomplete
        if not col.series:
            incomplete.append(_no_series(window, selector, caps))
        queries = [_described(q, window, caps, selector, col.reads, group) for q in specs]
        return PromCollection(
            answers=answers,
            capabilities=caps,
            queries=queries,
            missing_metrics=missing,
            plan=col.plan,
            warnings=caps.warnings + col.warnings,
            incomplete_reasons=incomplete,
            http_requests=self.client.requests,
            backend_timings=col.timings.to_dict(),
        )


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
    done = reads.get(q.id, set())
    read = (
        "recorded and raw"
        if "recorded and raw" in done or len(done) > 1
        else next(iter(done), "raw")
    )
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


def _no_series(w: Window, selector: str, caps: Capabilities) -> str:
    """Why a collection without a single DCGM series is no audit of zero GPUs."""
    where = f" with {selector}" if selector else ""
    if not caps.metrics:
        said = "lists no DCGM_ metric"
    else:
        said = "returned no DCGM series"
    return (
        f"the backend {said} between {w.start} and {w.end}{where}: is dcgm-exporter scraped "
        "into it, and are the tenant (X-Scope-OrgID), --cluster-label and --window right?"
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

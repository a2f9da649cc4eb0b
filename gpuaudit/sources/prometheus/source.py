"""The Prometheus source: discovery (`discovery`), then the catalogue (`catalogue`) run within
the backend's limits (`planner`), through the HTTP client (`client`). It returns the raw answers
and what the manifest records about them: capabilities, the queries, how they were cut, the
backend's warnings and why the answers may be incomplete."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuaudit.sources.interface import Progress, Source, Window
from gpuaudit.sources.limits import DEFAULT_QUERIES
from gpuaudit.sources.prometheus import catalogue
from gpuaudit.sources.prometheus.client import PromClient
from gpuaudit.sources.prometheus.discovery import Capabilities, discover
from gpuaudit.sources.prometheus.planner import Collector, Keep, check_plan, keep_body


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
    ) -> None:
        self.client, self.cluster_label, self.progress, self.keep = (
            client,
            cluster_label,
            progress,
            keep,
        )
        self.max_queries = max_queries

    def collect(self, window: Window) -> PromCollection:
        """Discover, plan and run every query the backend has the metric for."""
        label = self.cluster_label
        selector = label.selector() if label else ""
        group = label.name if label and label.grouped else ""
        # Before anything is sent: a window that every metric's queries could not cover in
        # `max_queries` is refused whatever the backend holds.
        check_plan(window, catalogue.CATALOGUE, self.max_queries)
        caps = discover(self.client, window, selector, group)
        specs = [q for q in catalogue.CATALOGUE if q.metric in caps.metrics]
        missing = sorted({q.metric for q in catalogue.CATALOGUE} - set(caps.metrics))
        col = Collector(
            self.client, window, caps, selector, self.progress, self.keep, self.max_queries
        )
        answers = col.run(specs)
        incomplete = caps.incomplete + col.incomplete
        if not col.series:
            incomplete.append(_no_series(window, selector, caps))
        queries = [
            {
                "id": q.id,
                "kind": q.kind,
                "metric": q.metric,
                "query": q.promql(
                    window.seconds if q.kind == "window" else window.step,
                    caps.pod_label,
                    selector,
                    q.metric in caps.recorded,
                    q.unless in caps.recorded,
                    window.start + window.step,
                    group,
                ),
            }
            for q in specs
        ]
        return PromCollection(
            answers=answers,
            capabilities=caps,
            queries=queries,
            missing_metrics=missing,
            plan=col.plan,
            warnings=caps.warnings + col.warnings,
            incomplete_reasons=incomplete,
            http_requests=self.client.requests,
        )


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

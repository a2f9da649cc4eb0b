"""The Prometheus source: discovery (`discovery`), then the catalogue (`catalogue`) run within
the backend's limits (`planner`), through the HTTP client (`client`). It returns the raw answers
and what the manifest records about them: capabilities, the queries, how they were cut, the
backend's warnings and why the answers may be incomplete."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuaudit.sources.interface import Progress, Source, Window
from gpuaudit.sources.prometheus import catalogue
from gpuaudit.sources.prometheus.client import PromClient
from gpuaudit.sources.prometheus.discovery import Capabilities, discover
from gpuaudit.sources.prometheus.planner import Collector, Keep, keep_body


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
        cluster_label: tuple[str, str] | None = None,
        progress: Progress | None = None,
        keep: Keep = keep_body,
    ) -> None:
        self.client, self.cluster_label, self.progress, self.keep = (
            client,
            cluster_label,
            progress,
            keep,
        )

    def collect(self, window: Window) -> PromCollection:
        """Discover, plan and run every query the backend has the metric for."""
        selector = ""
        if self.cluster_label:
            name, value = self.cluster_label
            esc = value.replace("\\", "\\\\").replace('"', '\\"')
            selector = f'{name}="{esc}"'
        caps = discover(self.client, window, selector)
        specs = [q for q in catalogue.CATALOGUE if q.metric in caps.metrics]
        missing = sorted({q.metric for q in catalogue.CATALOGUE} - set(caps.metrics))
        col = Collector(self.client, window, caps, selector, self.progress, self.keep)
        answers = col.run(specs)
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
            warnings=col.warnings,
            incomplete_reasons=col.incomplete,
            http_requests=self.client.requests,
        )


def collect_prometheus(
    client: PromClient,
    w: Window,
    cluster_label: tuple[str, str] | None = None,
    progress: Progress | None = None,
    keep: Keep = keep_body,
) -> PromCollection:
    """Discover, plan and run every query (`PrometheusSource(...).collect(w)`)."""
    return PrometheusSource(client, cluster_label, progress, keep).collect(w)

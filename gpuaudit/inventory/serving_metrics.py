"""Which pods export a serving engine's queue or request gauge, and each one's busy level:
what `gpuaudit fix` scales a part-time workload on (a KEDA `prometheus` trigger).

The one query `serving_busy` (`gpuaudit.sources.prometheus.catalogue.SERVING`) answers, per pod
and metric, the mean of the pod's sum of the metric over the subquery's steps at which it was
above 0: the level the workload ran at while it had work (`docs/domain.md`, serving metrics). A
series names its pod by `exported_namespace`/`exported_pod` where it carries them (the series
labelled itself and the scrape renamed its labels, as dcgm-exporter's do under the Helm chart),
else by `namespace`/`pod` (the scrape target: the pod that serves). In a scan of every cluster
the namespace is qualified by the cluster (`prom.qualify`). A pod whose metric never rose
above 0 in the window has no busy level and is not listed; nor is anything where the snapshot
holds no answer (a backend that did not answer, or a snapshot made before the query existed).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuaudit.inventory import prom
from gpuaudit.sources.prometheus import catalogue

MAX_PODS = 100_000
"""The most pods read from the answer (a bounded size on what comes from outside)."""


@dataclass(frozen=True)
class Serving:
    """The serving metrics the snapshot recorded."""

    levels: Mapping[tuple[str, str], Mapping[str, float]] = field(default_factory=dict)
    """(namespace, pod) -> metric name -> the pod's busy level of it."""
    label: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """(namespace, pod) -> the label its series name the pod by (`pod` or `exported_pod`)."""
    answered: bool = False
    """Whether the snapshot holds the query's answer (else nothing is known either way)."""
    server: str = ""
    """The Prometheus URL the answers were read from (without credentials), where recorded."""
    selector: str = ""
    """The label matchers the query ran with (`--cluster-label NAME=VALUE`'s): a query of the
    same series (a KEDA trigger's) needs them too."""


_SELECTOR = re.compile(r'\{__name__=~"[^"]*",(.*)\}, "' + catalogue.SERVING_NAME_LABEL + '"')


def read(
    answers: Mapping[str, Any],
    prometheus_url: str | None,
    cluster_label: str,
    query: str = "",
) -> Serving:
    """The serving metrics of the parsed answers (`Parser.answers`) of one snapshot; `query`
    is the PromQL the answer was recorded with, whose label matchers are kept."""
    server = prometheus_url or ""
    got = answers.get(catalogue.SERVING.id)
    if not got:
        return Serving(server=server)
    found = _SELECTOR.search(query[:10_000])
    selector = found.group(1) if found else ""
    levels: dict[tuple[str, str], dict[str, float]] = {}
    label: dict[tuple[str, str], str] = {}
    for a in got:
        if a.rtype != "vector":
            continue
        for metrics, value in zip(a.metrics, a.values.tolist(), strict=True):
            name = str(metrics.get(catalogue.SERVING_NAME_LABEL) or "")
            if name not in catalogue.SERVING_METRICS or not math.isfinite(value) or value <= 0:
                continue
            spelt = "exported_pod" if metrics.get("exported_pod") else "pod"
            ns = str(metrics.get("exported_namespace" if spelt == "exported_pod" else "namespace"))
            pod = str(metrics.get(spelt) or "")
            if not pod or not ns or (len(levels) >= MAX_PODS and (ns, pod) not in levels):
                continue
            cluster = str(metrics.get(cluster_label) or "") if cluster_label else ""
            key = (prom.qualify(cluster, ns), pod)
            mine = levels.setdefault(key, {})
            # Chunks of a window answer each piece: the largest level stands for the window.
            mine[name] = max(mine.get(name, 0.0), float(value))
            label[key] = spelt
    return Serving(levels, label, True, server, selector)


def query_of(prometheus: Mapping[str, Any]) -> str:
    """The PromQL the snapshot's serving answer was recorded with ("" where none is)."""
    entries = prometheus.get(catalogue.SERVING.id)
    first = entries[0] if isinstance(entries, list) and entries else None
    query = first.get("query") if isinstance(first, Mapping) else None
    return query if isinstance(query, str) else ""

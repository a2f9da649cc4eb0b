"""What cAdvisor measured of the CPU of GPU pods' containers, and the CPU the API server says
each container was given: what GPU041 (CPU-starved GPU work) reads.

The three hourly queries `cpu_usage_hourly`, `cpu_periods_hourly` and `cpu_throttled_hourly`
(`gpuaudit.sources.prometheus.catalogue`) answer, per container of a pod that held GPUs in the
bucket and per bucket, the increase of `container_cpu_usage_seconds_total` (CPU seconds used),
of `container_cpu_cfs_periods_total` (CFS enforcement periods that elapsed: only a container
with a CPU limit has them) and of `container_cpu_cfs_throttled_periods_total` (periods in which
it was throttled at its limit). Series are named by `namespace`, `pod` and `container`
(`docs/domain.md`, cAdvisor); in a scan of every cluster the namespace is qualified by the
cluster (`container_specs.cadvisor_key`, the holdings' key). Where time chunks overlap, the
later answer wins.

The CPU requests and limits are read from each pod's `spec.containers[].resources` (cores;
`500m` is 0.5), None where a container has none; a container no spec read names is `UNREAD`
(its limit unknown, never "none").

A snapshot without the queries' answers (older ones, or a backend that lacks the metrics)
holds no use: the capability `container_cpu` is then missing, with the reason, and nothing is
read as healthy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuaudit.core import numbers
from gpuaudit.inventory import container_specs
from gpuaudit.inventory.arrays import Arr

USAGE, PERIODS, THROTTLED = "cpu_usage_hourly", "cpu_periods_hourly", "cpu_throttled_hourly"
QUERIES = (USAGE, PERIODS, THROTTLED)
"""The query ids read, in the order of `Use`'s arrays."""
MAX_CONTAINERS = 100_000
"""The most containers read from the answers (a bounded size on what comes from outside)."""


@dataclass(frozen=True)
class Use:
    """One container's CPU per bucket."""

    ts: Arr
    """Bucket ends (unix seconds), ascending."""
    used_s: Arr
    """CPU seconds used in each bucket (NaN where not answered)."""
    periods: Arr
    """CFS periods that elapsed (NaN where not answered: no CPU limit, or no series)."""
    throttled: Arr
    """CFS periods it was throttled in (NaN where not answered)."""


@dataclass(frozen=True)
class Resources:
    """A container's CPU as the pod's spec gives it, in cores."""

    request: float | None
    limit: float | None
    read: bool = True
    """Whether the pod's spec named the container (False: its request and limit are unknown,
    not absent: a spec not read, or a container it does not list)."""


UNREAD = Resources(None, None, read=False)
"""A container whose spec was not read."""


@dataclass(frozen=True)
class ContainerCpu:
    """The container CPU the snapshot recorded."""

    use: Mapping[tuple[str, str], Mapping[str, Use]] = field(default_factory=dict)
    """(namespace, pod) -> container -> its CPU per bucket."""
    resources: Mapping[tuple[str, str], Mapping[str, Resources]] = field(default_factory=dict)
    """(namespace, pod) -> container -> its CPU request and limit, keyed by the pod's own
    namespace (`container_specs`): a use keyed by a cluster's namespace finds none."""
    answered: bool = False
    """Whether the snapshot holds an answer of the usage query (else nothing is known)."""

    @property
    def measured(self) -> bool:
        """Whether any container's CPU use was answered."""
        return bool(self.use)


MISSING_ANSWER = (
    "the snapshot holds no cAdvisor CPU answers (cpu_usage_hourly; made before gpuaudit read "
    "them, or the backend lacks container_cpu_usage_seconds_total)"
)
MISSING_SERIES = (
    "no cAdvisor container_cpu_usage_seconds_total series for the containers of GPU pods in the "
    "window (is the kubelet's /metrics/cadvisor scraped into the same Prometheus, with its "
    "namespace, pod and container labels?)"
)


def usage(
    answers: Mapping[str, Any], cluster_label: str, within: tuple[float, float] | None = None
) -> tuple[dict[tuple[str, str], dict[str, Use]], bool]:
    """Each container's CPU per bucket from the parsed answers (`Parser.answers`), and whether
    the usage query was answered at all. `within` (start, end): a narrowed window, whose
    buckets alone are kept."""
    answered = USAGE in answers
    points: dict[tuple[str, str, str], list[dict[float, float]]] = {}
    for i, qid in enumerate(QUERIES):
        for a in answers.get(qid, []):
            if a.rtype != "matrix":
                continue
            for j, labels in enumerate(a.metrics):
                key = container_specs.cadvisor_key(labels, cluster_label)
                if key is None:
                    continue
                if key not in points:
                    if len(points) >= MAX_CONTAINERS:
                        continue
                    points[key] = [{}, {}, {}]
                ts, vs = a.series(j)
                if within is not None:
                    keep = (ts > within[0]) & (ts <= within[1])
                    ts, vs = ts[keep], vs[keep]
                points[key][i].update(zip(ts.tolist(), vs.tolist(), strict=True))
    out: dict[tuple[str, str], dict[str, Use]] = {}
    for (ns, pod, ctr), by_query in sorted(points.items()):
        if not by_query[0]:
            continue  # no use measured: periods alone say nothing of the need
        ts = np.array(sorted(set().union(*by_query)), dtype=np.float64)
        cols = [
            np.array([got.get(t, math.nan) for t in ts.tolist()], dtype=np.float64)
            for got in by_query
        ]
        out.setdefault((ns, pod), {})[ctr] = Use(ts, *cols)
    return out, answered


def _cores(raw: Any) -> float | None:
    if raw is None or raw == "":
        return None
    q = numbers.quantity(raw)
    return q if q is not None and 0 < q < 1e6 else None


def resources(objects: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Resources]]:
    """Each container's CPU request and limit (cores) from the pods' specs."""
    out: dict[tuple[str, str], dict[str, Resources]] = {}
    for key, name, req, lim in container_specs.containers(objects):
        out.setdefault(key, {})[name] = Resources(_cores(req.get("cpu")), _cores(lim.get("cpu")))
    return out

"""What cAdvisor measured of the memory of GPU pods' containers, and the memory limit the API
server says each container was given: what GPU004 (restarting holders) says of an OOM-killed
container.

The window query `memory_working_set_max` (`gpuaudit.sources.prometheus.catalogue`) answers,
per container of a pod that held GPUs in the window, the most `container_memory_working_set_bytes`
it reached: the working set (memory used less the inactive file cache), which the kubelet
measures against the container's memory limit (`docs/domain.md`, cAdvisor). Series are named by
`namespace`, `pod` and `container`; in a scan of every cluster the namespace is qualified by
the cluster (`prom.qualify`). Where the window was cut in time, the chunks' maxima give the
window's (the largest). The figure is sampled at each scrape: the peak just before a kill may
fall between two scrapes, so it is the least the container needed, never more.

The memory limits are read from each pod's `spec.containers[].resources.limits.memory`
(bytes; `8Gi` is 8 x 2^30), None where a container has none.

A snapshot without the query's answer (older ones, or a backend that lacks the metric) holds
no use: GPU004 then says the memory is not measured, and why. So does an inventory narrowed in
time (`--window` on a snapshot): the answer is the most over the recorded window, which says
nothing of a part of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuaudit.core import numbers
from gpuaudit.inventory import container_specs

QUERY = "memory_working_set_max"
"""The query id read."""
MAX_CONTAINERS = 100_000
"""The most containers read from the answers (a bounded size on what comes from outside)."""
MAX_BYTES = 2.0**60
"""The largest memory figure believed (an exbibyte): above it a value is malformed."""

MISSING_ANSWER = (
    "not measured: the snapshot holds no cAdvisor memory answer (memory_working_set_max; made "
    "before gpuaudit read it, or the backend lacks container_memory_working_set_bytes)"
)
MISSING_SERIES = (
    "not measured: no cAdvisor container_memory_working_set_bytes series for this container "
    "in the window (is the kubelet's /metrics/cadvisor scraped into the same Prometheus, with "
    "its namespace, pod and container labels?)"
)
MISSING_NARROWED = (
    "not measured: the window was narrowed in time, and the snapshot holds the most memory over "
    "its whole window only"
)


@dataclass(frozen=True)
class ContainerMemory:
    """The container memory the snapshot recorded."""

    used_max: Mapping[tuple[str, str], Mapping[str, float]] = field(default_factory=dict)
    """(namespace, pod) -> container -> the most working-set memory it used (bytes)."""
    limits: Mapping[tuple[str, str], Mapping[str, float]] = field(default_factory=dict)
    """(namespace, pod) -> container -> its memory limit (bytes), where it has one."""
    answered: bool = False
    """Whether the snapshot holds an answer of the query (else nothing is known)."""
    why: str = ""
    """Why nothing is measured, where the answer cannot be used (`MISSING_NARROWED`)."""

    def used(self, ns: str, pod: str, container: str) -> float | None:
        """The most working-set memory the container used (bytes); None where not measured."""
        return self.used_max.get((ns, pod), {}).get(container)

    def limit(self, ns: str, pod: str, container: str) -> float | None:
        """The container's memory limit (bytes); None where it has none (or was not read)."""
        return self.limits.get((ns, pod), {}).get(container)

    def missing(self) -> str:
        """Why a container's memory is not measured."""
        return self.why or (MISSING_SERIES if self.answered else MISSING_ANSWER)


def _bytes(v: float) -> float | None:
    return v if 0.0 <= v <= MAX_BYTES else None


def used(
    answers: Mapping[str, Any], cluster_label: str
) -> tuple[dict[tuple[str, str], dict[str, float]], bool]:
    """Each container's most working-set memory from the parsed answers (`Parser.answers`),
    the largest over time chunks, and whether the query was answered at all."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    seen = 0
    for a in answers.get(QUERY, []):
        if a.rtype != "vector":
            continue
        for labels, v in zip(a.metrics, a.values.tolist(), strict=True):
            key = container_specs.cadvisor_key(labels, cluster_label)
            got = _bytes(float(v))
            if key is None or got is None:
                continue
            ns, pod, ctr = key
            mine = out.setdefault((ns, pod), {})
            if ctr not in mine:
                if seen >= MAX_CONTAINERS:
                    continue
                seen += 1
            mine[ctr] = max(got, mine.get(ctr, 0.0))
    return {k: v for k, v in sorted(out.items()) if v}, QUERY in answers


def limits(objects: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, float]]:
    """Each container's memory limit (bytes) from the pods' specs."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for key, ctr, _, lim in container_specs.containers(objects):
        raw = lim.get("memory")
        q = numbers.quantity(raw) if raw not in (None, "") else None
        if q is not None and 0 < q <= MAX_BYTES:
            out.setdefault(key, {})[ctr] = q
    return out

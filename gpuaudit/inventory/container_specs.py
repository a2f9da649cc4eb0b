"""The resources each container of each pod asks for, as the pods' specs give them
(`spec.containers[].resources`): what the container CPU and memory figures are measured
against (`container_cpu`, `container_memory`); and the one key both sides of that join use.

Both sides key a container by (namespace, pod) and its name. cAdvisor's series name the
namespace, pod and container (`catalogue.CADVISOR_LABELS`), and in a scan of every cluster the
cluster too: the namespace is then qualified by it (`prom.qualify`, `cadvisor_key`), as the
DCGM holdings' namespaces are, so that a pod `ml/train-0` of two clusters is two pods. A pod's
spec names no cluster: the Kubernetes lists are one cluster's, and keep the pod's own namespace,
which is the holdings' key wherever they are read (a scan of one cluster; a scan of every
cluster reads none). A snapshot that holds both a cluster label and Kubernetes lists has specs
no qualified pod matches: they are said to be not read, never given to either cluster's pod.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpuaudit.inventory import prom
from gpuaudit.sources.prometheus import catalogue

NAME_CHARS = 253
"""The longest Kubernetes name kept."""

_EMPTY: Mapping[str, Any] = {}


def name(obj: Mapping[str, Any], key: str) -> str:
    """A name field, cut to `NAME_CHARS`; empty where it is not a string."""
    v = obj.get(key)
    return v[:NAME_CHARS] if isinstance(v, str) else ""


def cadvisor_key(labels: Mapping[str, Any], cluster_label: str) -> tuple[str, str, str] | None:
    """(namespace, pod, container) of a cAdvisor series, its namespace qualified by its cluster
    in a scan of every cluster (`cluster_label` set); None where one of them is not named."""
    ns, pod, ctr = (name(labels, k) for k in catalogue.CADVISOR_LABELS)
    if not (ns and pod and ctr):
        return None
    cluster = name(labels, cluster_label) if cluster_label else ""
    return prom.qualify(cluster, ns), pod, ctr


def containers(
    objects: Mapping[str, Any],
) -> Iterator[tuple[tuple[str, str], str, Mapping[str, Any], Mapping[str, Any]]]:
    """((namespace, pod), container, requests, limits) of every named container of the pods
    in `objects` (`kube.index`), an empty mapping where a pod's spec has none."""
    for obj in objects.get("pods", ()):
        if not isinstance(obj, Mapping):
            continue
        meta, spec = obj.get("metadata"), obj.get("spec")
        if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
            continue
        ns, pod = name(meta, "namespace"), name(meta, "name")
        cs = spec.get("containers")
        if not ns or not pod or not isinstance(cs, list):
            continue
        for c in cs:
            if not isinstance(c, Mapping) or not name(c, "name"):
                continue
            res = c.get("resources")
            res = res if isinstance(res, Mapping) else _EMPTY
            req, lim = res.get("requests"), res.get("limits")
            yield (
                (ns, pod),
                name(c, "name"),
                req if isinstance(req, Mapping) else _EMPTY,
                lim if isinstance(lim, Mapping) else _EMPTY,
            )

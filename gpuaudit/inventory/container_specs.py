"""The resources each container of each pod asks for, as the pods' specs give them
(`spec.containers[].resources`): what the container CPU and memory figures are measured
against (`container_cpu`, `container_memory`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

NAME_CHARS = 253
"""The longest Kubernetes name kept."""

_EMPTY: Mapping[str, Any] = {}


def name(obj: Mapping[str, Any], key: str) -> str:
    """A name field, cut to `NAME_CHARS`; empty where it is not a string."""
    v = obj.get(key)
    return v[:NAME_CHARS] if isinstance(v, str) else ""


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

"""A container's resources in a pod template as read from the API server: shared by the change
makers that set one resource of a container in its owner's template (`cpu_limits`,
`memory_limits`). Every lookup tolerates a template of any shape: what is missing reads as
absent, never as zero."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuaudit.core import numbers


def container(spec: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """The container `name` of a pod spec, or None."""
    cs = spec.get("containers")
    for c in cs if isinstance(cs, list) else ():
        if isinstance(c, Mapping) and c.get("name") == name:
            return c
    return None


def resources(c: Mapping[str, Any], part: str) -> Mapping[str, Any]:
    """The container's `limits` or `requests` (`part`), empty where it sets none."""
    res = c.get("resources")
    got = res.get(part) if isinstance(res, Mapping) else None
    return got if isinstance(got, Mapping) else {}


def amount(c: Mapping[str, Any], part: str, resource: str) -> float | None:
    """The container's `part` of `resource` (`cpu`, `memory`) as a number, or None unset."""
    raw = resources(c, part).get(resource)
    return None if raw in (None, "") else numbers.quantity(raw)


def written(c: Mapping[str, Any], part: str, resource: str) -> str:
    """The container's `part` of `resource` as the template writes it, at most 40 characters."""
    return str(resources(c, part).get(resource))[:40]

"""Every object `gpuaudit fix` writes, and every object as read with its patch applied, is
validated before the change is written: Kubernetes' own kinds against the OpenAPI schema of the
cluster's version (the `kubernetes-validate` library), CRD kinds against their project's
published CRD schema, shipped beside this module with its source and version named
(`kueue-clusterqueues.json`: Kueue v0.19.2; `volcano-queues.json`: Volcano v1.15.1;
`kai-queues.json`: KAI Scheduler v0.13.0; `karpenter-nodepools.json`: Karpenter v1.14.1;
`keda-scaledobjects.json`: KEDA v2.20.2). A change that does not validate is not written.

The cluster's version is the one the snapshot recorded (`kubernetes_version`); the nearest
version the library holds a schema for when it holds none for that one, and its newest when the
snapshot recorded none; `schema_version` says which, and why.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from importlib.resources import files
from typing import Any

CRD_FILES = {
    ("kueue.x-k8s.io", "ClusterQueue"): "kueue-clusterqueues.json",
    ("scheduling.volcano.sh", "Queue"): "volcano-queues.json",
    ("scheduling.run.ai", "Queue"): "kai-queues.json",
    ("karpenter.sh", "NodePool"): "karpenter-nodepools.json",
    ("keda.sh", "ScaledObject"): "keda-scaledobjects.json",
}
"""(API group, kind) -> the CRD schema file shipped beside this module."""


class Invalid(ValueError):
    """An object that does not validate; the message says where and why."""


def supported() -> list[str]:
    """The Kubernetes versions (`1.25` ... `1.37`) `kubernetes-validate` holds schemas for."""
    from kubernetes_validate import utils

    return sorted({".".join(v.split(".")[:2]) for v in utils.all_versions()}, key=_minor)


def _minor(version: str) -> tuple[int, int]:
    major, _, minor = version.partition(".")
    return int(major), int(minor)


_VERSION = re.compile(r"v?(\d+)\.(\d+)")


def schema_version(recorded: str) -> tuple[str, str]:
    """The schema version to validate against, and a sentence that says why that one."""
    known = supported()
    m = _VERSION.match(recorded or "")
    if m is None:
        return known[-1], (
            f"Kubernetes {known[-1]}, the newest schema kubernetes-validate holds: the snapshot "
            "does not record the cluster's version"
        )
    want = f"{int(m.group(1))}.{int(m.group(2))}"
    if want in known:
        return want, f"Kubernetes {want}, the cluster's version ({recorded})"
    nearest = min(known, key=lambda v: abs(_minor(v)[1] - _minor(want)[1]))
    return nearest, (
        f"Kubernetes {nearest}, the nearest schema kubernetes-validate holds to the cluster's "
        f"{recorded}"
    )


def check(obj: Mapping[str, Any], version: str) -> str:
    """Validate `obj` (with `apiVersion` and `kind`); what it was validated against (`Kubernetes
    1.34`, `Kueue v0.19.2 CRD`). Raises `Invalid` when it does not validate, or when no schema
    is known for its kind."""
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    group = api_version.rpartition("/")[0]
    crd = CRD_FILES.get((group, kind))
    if crd is not None:
        validator, named = _crd_validator(crd, api_version.rpartition("/")[2])
        _raise_first(validator, obj)
        return named
    import kubernetes_validate

    try:
        kubernetes_validate.validate(dict(obj), version, strict=False)
    except kubernetes_validate.ValidationError as exc:
        raise Invalid(_where(exc) + str(exc.message)) from None
    except kubernetes_validate.SchemaNotFoundError:
        raise Invalid(f"no schema for {kind} {api_version} in Kubernetes {version}") from None
    return f"Kubernetes {version}"


def _where(exc: Any) -> str:
    path = ".".join(str(p) for p in getattr(exc, "path", ()) or ())
    return f"{path}: " if path else ""


def _raise_first(validator: Any, obj: Mapping[str, Any]) -> None:
    error = next(iter(validator.iter_errors(dict(obj))), None)
    if error is not None:
        raise Invalid(_where(error) + str(error.message))


@functools.cache
def _crd_validator(name: str, version: str) -> tuple[Any, str]:
    """The validator of one served version of a shipped CRD schema, and how to name it."""
    import jsonschema

    doc = json.loads(files("gpuaudit.fix").joinpath(name).read_text(encoding="utf-8"))
    schema = doc["schemas"].get(version)
    if schema is None:
        served = ", ".join(sorted(doc["schemas"]))
        raise Invalid(f"the {doc['kind']} CRD of {doc['version']} serves {served}, not {version}")
    validator: Callable[..., Any] = jsonschema.Draft202012Validator
    return validator(schema), f"{doc['project'].split(' ')[0]} {doc['version']} CRD"

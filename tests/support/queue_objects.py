"""Kueue and Volcano objects as the API returns them, for unit tests of queues and GPU090."""

from __future__ import annotations

from typing import Any

from tests.support.factories import iso

GPU = "nvidia.com/gpu"


def flavor(
    name: str, labels: dict[str, str], taints: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": labels}
    if taints:
        spec["nodeTaints"] = taints
    return {"metadata": {"name": name}, "spec": spec}


def cluster_queue(
    name: str,
    quotas: list[tuple[str, str, Any]],
    cohort: str = "",
    limits: dict[tuple[str, str], dict[str, Any]] | None = None,
    v1beta1: bool = False,
) -> dict[str, Any]:
    """`quotas`: (flavor, resource, nominalQuota); CPU quota is added beside them (a
    resource gpuaudit ignores). `limits`: (flavor, resource) -> borrowingLimit/lendingLimit."""
    by_flavor: dict[str, list[dict[str, Any]]] = {}
    for f, r, q in quotas:
        entry: dict[str, Any] = {"name": r, "nominalQuota": q}
        entry.update((limits or {}).get((f, r), {}))
        by_flavor.setdefault(f, [{"name": "cpu", "nominalQuota": "64"}]).append(entry)
    covered = sorted({r for _, r, _ in quotas} | {"cpu"})
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": covered,
                "flavors": [{"name": f, "resources": rs} for f, rs in by_flavor.items()],
            }
        ]
    }
    if cohort:
        spec["cohort" if v1beta1 else "cohortName"] = cohort
    return {"metadata": {"name": name}, "spec": spec}


def local_queue(ns: str, name: str, cq: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"clusterQueue": cq}}


def workload(
    ns: str,
    name: str,
    cq: str,
    flavor: str,
    gpus: int,
    reserved: float | None = None,
    finished: float | None = None,
    pending_since: float | None = None,
    owner: tuple[str, str] = ("Job", ""),
    resource: str = GPU,
    count: int = 1,
    usage: bool = True,
    local_queue: str = "",
) -> dict[str, Any]:
    """A Workload of `count` pods of `gpus` each; admitted at `reserved` (and finished at
    `finished`), or waiting since `pending_since`."""
    container = {"name": "c", "resources": {"requests": {resource: str(gpus)}}}
    conds: list[dict[str, Any]] = []
    status: dict[str, Any] = {"conditions": conds}
    if reserved is not None:
        conds += [
            {"type": "QuotaReserved", "status": "True", "lastTransitionTime": iso(reserved)},
            {"type": "Admitted", "status": "True", "lastTransitionTime": iso(reserved)},
        ]
        psa: dict[str, Any] = {"name": "main", "count": count, "flavors": {resource: flavor}}
        if usage:
            psa["resourceUsage"] = {resource: str(gpus * count)}
        status["admission"] = {"clusterQueue": cq, "podSetAssignments": [psa]}
    if finished is not None:
        conds.append({"type": "Finished", "status": "True", "lastTransitionTime": iso(finished)})
    if pending_since is not None:
        conds.append(
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "lastTransitionTime": iso(pending_since),
            }
        )
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owner[1]:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    return {
        "metadata": meta,
        "spec": {
            "queueName": local_queue,
            "podSets": [
                {"name": "main", "count": count, "template": {"spec": {"containers": [container]}}}
            ],
        },
        "status": status,
    }


def volcano_queue(
    name: str,
    guarantee: int = 0,
    deserved: int = 0,
    capability: int = 0,
    allocated: int = 0,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": 1}
    if guarantee:
        spec["guarantee"] = {"resource": {GPU: str(guarantee), "cpu": "8"}}
    if deserved:
        spec["deserved"] = {GPU: str(deserved), "memory": "64Gi"}
    if capability:
        spec["capability"] = {GPU: str(capability)}
    status: dict[str, Any] = {"state": "Open"}
    if allocated:
        status["allocated"] = {GPU: str(allocated)}
    return {"metadata": {"name": name}, "spec": spec, "status": status}


def podgroup(ns: str, name: str, queue: str, gpus: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": 1, "queue": queue, "minResources": {GPU: str(gpus)}},
        "status": {"phase": "Running"},
    }

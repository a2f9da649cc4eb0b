"""Attribution recomputed from a snapshot's raw JSON with plain Python, independent of
gpuaudit's parsing: the replicas of time-sliced nodes and the Kubernetes-side join of
unlabelled MIG instances (the rule of `gpuaudit.inventory.attribution.kubernetes_join`)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any


def replicas_of(nodes: list[dict[str, Any]]) -> dict[str, int]:
    """Node name -> its `nvidia.com/gpu.replicas` label (1 when absent)."""
    return {
        n["metadata"]["name"]: int(n["metadata"]["labels"].get("nvidia.com/gpu.replicas", "1"))
        for n in nodes
    }


def joined_mig(
    doc: dict[str, Any], series: list[Any], named: set[str]
) -> set[tuple[str, str, str]]:
    """Unlabelled MIG instances that one running pod holds beyond doubt: the only pod on the
    node named on no series that requests that profile, as many as the node has unlabelled."""
    out: set[tuple[str, str, str]] = set()
    for instances in _joins(doc, series, named).values():
        out |= instances
    return out


def joined_mig_pods(
    doc: dict[str, Any], series: list[Any], named: set[str]
) -> set[tuple[str, str]]:
    """(namespace, pod) of the pods `joined_mig` joins instances to."""
    return set(_joins(doc, series, named))


def _joins(
    doc: dict[str, Any], series: list[Any], named: set[str]
) -> dict[tuple[str, str], set[tuple[str, str, str]]]:
    """`joined_mig`'s instances by the pod they are joined to."""
    free: dict[tuple[str, str], set[tuple[str, str, str]]] = defaultdict(set)
    labelled = {
        (m["UUID"], m.get("GPU_I_ID", ""))
        for m in (i["metric"] for i in series)
        if m.get("exported_pod")
    }
    for m in (i["metric"] for i in series):
        if "GPU_I_PROFILE" in m and (m["UUID"], m["GPU_I_ID"]) not in labelled:
            free[(m["Hostname"], m["GPU_I_PROFILE"])].add((m["Hostname"], m["UUID"], m["GPU_I_ID"]))
    wants: dict[tuple[str, str], list[tuple[tuple[str, str], int]]] = defaultdict(list)
    for pod in (p for page in doc["kubernetes"]["pods"] for p in page["items"]):
        if pod["status"].get("phase") != "Running" or pod["metadata"]["name"] in named:
            continue
        who = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        for c in pod["spec"]["containers"]:
            for res, n in c.get("resources", {}).get("limits", {}).items():
                if res.startswith("nvidia.com/mig-"):
                    key = (pod["spec"]["nodeName"], res.removeprefix("nvidia.com/mig-"))
                    wants[key].append((who, int(n)))
    out: dict[tuple[str, str], set[tuple[str, str, str]]] = defaultdict(set)
    for key, counts in wants.items():
        if len(counts) == 1 and counts[0][1] == len(free.get(key, ())):
            out[counts[0][0]] |= free[key]
    return out

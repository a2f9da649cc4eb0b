"""Attribution recomputed from a snapshot's raw JSON with plain Python, independent of
gpuaudit's parsing: the replicas of time-sliced nodes and the Kubernetes-side join of
unlabelled MIG instances, bucket by bucket (the rule of `gpuaudit.inventory.bucketjoin`)."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime
from typing import Any


def replicas_of(nodes: list[dict[str, Any]]) -> dict[str, int]:
    """Node name -> its `nvidia.com/gpu.replicas` label (1 when absent)."""
    return {
        n["metadata"]["name"]: int(n["metadata"]["labels"].get("nvidia.com/gpu.replicas", "1"))
        for n in nodes
    }


def joined_mig(
    doc: dict[str, Any], series: list[Any], named: set[str]
) -> dict[tuple[str, str, str], dict[float, float]]:
    """Unlabelled MIG instances joined to a pod, with the share of each bucket (by its end) the
    pod held them in: per bucket, the only pod on the node named on no series that requests
    that profile and ran in the bucket, requesting as many as the node has unlabelled there."""
    out: dict[tuple[str, str, str], dict[float, float]] = {}
    for instances in _joins(doc, series, named).values():
        for key, buckets in instances.items():
            out.setdefault(key, {}).update(buckets)
    return out


def joined_mig_pods(
    doc: dict[str, Any], series: list[Any], named: set[str]
) -> set[tuple[str, str]]:
    """(namespace, pod) of the pods `joined_mig` joins instances to (in some bucket)."""
    return set(_joins(doc, series, named))


def _time(raw: Any) -> float | None:
    if not isinstance(raw, str):
        return None
    return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()


def _ran(pod: dict[str, Any], end: float) -> tuple[float | None, float] | None:
    """(start or None, end) of a pod that ran: Running, or ended with every container's
    `finishedAt`; None for any other."""
    status = pod["status"]
    phase = status.get("phase")
    if phase == "Running":
        return _time(status.get("startTime")), end
    if phase not in ("Succeeded", "Failed"):
        return None
    ends = [
        _time(c.get("state", {}).get("terminated", {}).get("finishedAt"))
        for c in status.get("containerStatuses", [])
    ]
    if not ends or None in ends:
        return None
    return _time(status.get("startTime")), max(e for e in ends if e is not None)


def _joins(
    doc: dict[str, Any], series: list[Any], named: set[str]
) -> dict[tuple[str, str], dict[tuple[str, str, str], dict[float, float]]]:
    """`joined_mig`'s instances and buckets by the pod they are joined to."""
    window = doc["manifest"]["window"]
    step, end = float(window["step"]), float(window["end"])
    labelled: dict[tuple[str, str], set[float]] = defaultdict(set)
    for item in series:
        m = item["metric"]
        if m.get("exported_pod"):
            labelled[(m["UUID"], m.get("GPU_I_ID", ""))] |= {float(t) for t, _ in item["values"]}
    free: dict[tuple[str, str], dict[tuple[str, str, str], set[float]]] = defaultdict(dict)
    for item in series:
        m = item["metric"]
        if "GPU_I_PROFILE" in m and not m.get("exported_pod"):
            ts = {float(t) for t, _ in item["values"]} - labelled[(m["UUID"], m["GPU_I_ID"])]
            free[(m["Hostname"], m["GPU_I_PROFILE"])][(m["Hostname"], m["UUID"], m["GPU_I_ID"])] = (
                ts
            )
    wants: dict[tuple[str, str], list[tuple[tuple[str, str], int, float | None, float]]] = (
        defaultdict(list)
    )
    for pod in (p for page in doc["kubernetes"]["pods"] for p in page["items"]):
        ran = _ran(pod, end)
        if ran is None or pod["metadata"]["name"] in named:
            continue
        who = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        for c in pod["spec"]["containers"]:
            for res, n in c.get("resources", {}).get("limits", {}).items():
                if res.startswith("nvidia.com/mig-"):
                    key = (pod["spec"]["nodeName"], res.removeprefix("nvidia.com/mig-"))
                    wants[key].append((who, int(n), *ran))
    out: dict[tuple[str, str], dict[tuple[str, str, str], dict[float, float]]] = defaultdict(dict)
    for key, instances in free.items():
        for t in sorted(set().union(*instances.values())):
            have = [k for k, ts in instances.items() if t in ts]
            ran_in = [
                (who, n, a, b)
                for who, n, a, b in wants.get(key, [])
                if min(b, t) - max(a if a is not None else -math.inf, t - step) > 0
            ]
            if len(ran_in) != 1 or ran_in[0][2] is None or ran_in[0][1] != len(have):
                continue
            who, _, a, b = ran_in[0]
            assert a is not None
            share = (min(b, t) - max(a, t - step)) / step
            for k in have:
                out[who].setdefault(k, {})[t] = share
    return out

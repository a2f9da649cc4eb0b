"""Attribution recomputed from a snapshot's raw JSON with plain Python, independent of
gpuaudit's parsing: the replicas of time-sliced nodes and the Kubernetes-side join of
unlabelled MIG instances, bucket by bucket (the rule of `gpuaudit.inventory.bucketjoin`)."""

from __future__ import annotations

import json
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


def joined_mig_by_pod(
    doc: dict[str, Any], series: list[Any], named: set[str]
) -> dict[tuple[str, str], dict[tuple[str, str, str], dict[float, float]]]:
    """(namespace, pod) -> the unlabelled MIG instances `joined_mig` joins to it, each with the
    share of each bucket it held them in."""
    return _joins(doc, series, named)


def joined_mig_pods(
    doc: dict[str, Any], series: list[Any], named: set[str]
) -> set[tuple[str, str]]:
    """(namespace, pod) of the pods `joined_mig` joins instances to (in some bucket)."""
    return set(_joins(doc, series, named))


def joined_mig_buckets(
    doc: dict[str, Any], series: list[Any], named: set[str]
) -> dict[tuple[str, str], dict[str, set[float]]]:
    """(namespace, pod) -> MIG profile -> the bucket ends `joined_mig` joins instances of
    that profile to the pod in."""
    profile = {
        (m["Hostname"], m["UUID"], m["GPU_I_ID"]): m["GPU_I_PROFILE"]
        for m in (i["metric"] for i in series)
        if "GPU_I_PROFILE" in m
    }
    out: dict[tuple[str, str], dict[str, set[float]]] = {}
    for who, instances in _joins(doc, series, named).items():
        for key, buckets in instances.items():
            out.setdefault(who, {}).setdefault(profile[key], set()).update(buckets)
    return out


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


def ran_of(pod: dict[str, Any], end: float) -> tuple[float | None, float] | None:
    """(start or None, end) of a pod that ran in a window ending at `end`: Running (to the
    window's end), or Succeeded or Failed with every container's `finishedAt` (to the latest);
    None for any other."""
    return _ran(pod, end)


def overlap(ran: tuple[float | None, float], t: float, step: float) -> float:
    """Seconds a pod that ran over `ran` ran in the bucket ending at `t`."""
    begin = ran[0] if ran[0] is not None else -math.inf
    return max(0.0, min(ran[1], t) - max(begin, t - step))


def hami_tenants(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (pod, GPU) HAMi granted a share of: the pod (`ns`, `pod`), `node`, `uuid`, its
    `share` (the larger of its cores and its memory over the GPU's, from the pod annotation
    `hami.io/vgpu-devices-allocated` and the node annotation `hami.io/node-nvidia-register`;
    where the shares of pods that ran at once add up to more than 1, each divided by the most
    they add up to at a start within its run), and `buckets`:
    bucket end -> (the part of the bucket it ran, its activity there: HAMi's own utilization of
    its containers over its share where its cores are below the GPU's, else the GPU's DCGM
    activity over the shares of the GPU's pods that ran in the bucket, at most 1); None for a
    GPU without DCGM series (`act_hourly`)."""
    window = doc["manifest"]["window"]
    step, end = float(window["step"]), float(window["end"])
    devices: dict[str, tuple[str, float, float]] = {}
    for n in (n for page in doc["kubernetes"]["nodes"] for n in page["items"]):
        raw = n["metadata"].get("annotations", {}).get("hami.io/node-nvidia-register")
        if raw:
            for d in json.loads(raw):  # the JSON form (HAMi v2.8 on), as the scenario writes
                devices[d["id"]] = (n["metadata"]["name"], float(d["devmem"]), float(d["devcore"]))
    tenants: list[dict[str, Any]] = []
    for pod in (p for page in doc["kubernetes"]["pods"] for p in page["items"]):
        raw = pod["metadata"].get("annotations", {}).get("hami.io/vgpu-devices-allocated")
        ran = _ran(pod, end)
        if not raw or ran is None:
            continue
        granted: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for container in raw.split(";"):
            for dev in filter(None, container.split(":")):
                uuid, kind, mem, cores = dev.split(",")[:4]
                if kind == "NVIDIA":
                    granted[uuid][0] += float(mem)
                    granted[uuid][1] += min(float(cores), 100.0)
        for uuid, (mem, cores) in granted.items():
            _, dev_mem, dev_cores = devices[uuid]
            share = max(min(1.0, cores / dev_cores), min(1.0, mem / dev_mem))
            tenants.append(
                {
                    "ns": pod["metadata"]["namespace"],
                    "pod": pod["metadata"]["name"],
                    "node": devices[uuid][0],
                    "uuid": uuid,
                    "share": share,
                    "cores": cores,
                    "dev_cores": dev_cores,
                    "ran": ran,
                }
            )
    for t in tenants:
        mates = [u for u in tenants if u["uuid"] == t["uuid"]]
        starts = [_begin(u) for u in mates if _begin(t) <= _begin(u) < t["ran"][1]]
        peak = max(
            (sum(u["share"] for u in mates if _begin(u) <= s < u["ran"][1]) for s in starts),
            default=t["share"],
        )
        t["scaled"] = t["share"] / max(peak, 1.0)
    for t in tenants:
        t["share"] = t.pop("scaled")
    util = _hami_util(doc)
    series = doc["prometheus"]["act_hourly"][0]["body"]["data"]["result"]
    unlabelled = [i["metric"] for i in series if not i["metric"].get("exported_pod")]
    gpu_act = {
        i["metric"]["UUID"]: {float(ts): float(v) for ts, v in i["values"]}
        for i in series
        if not i["metric"].get("exported_pod") and "GPU_I_PROFILE" not in i["metric"]
    }
    model = {m["UUID"]: m["modelName"] for m in unlabelled}
    out = []
    for t in tenants:
        if t["uuid"] not in gpu_act:
            out.append({**t, "model": "", "buckets": None})  # the ledger's unattributed side
            continue
        mates = [u for u in tenants if u["uuid"] == t["uuid"]]
        own = util.get((t["ns"], t["pod"], t["uuid"]))
        measured = own is not None and 0 < t["cores"] < t["dev_cores"]
        buckets = {}
        for ts, act in gpu_act[t["uuid"]].items():
            part = overlap(t["ran"], ts, step) / step
            if part <= 0:
                continue
            if measured and own is not None and ts in own:
                a = min(own[ts] / 100.0 / t["share"], 1.0)
            else:
                together = sum(u["share"] for u in mates if overlap(u["ran"], ts, step) > 0)
                a = min(act / together, 1.0)
            buckets[ts] = (part, a)
        out.append({**t, "model": model[t["uuid"]], "buckets": buckets})
    return out


def _begin(tenant: dict[str, Any]) -> float:
    start = tenant["ran"][0]
    return float(start) if start is not None else -math.inf


def _hami_util(doc: dict[str, Any]) -> dict[tuple[str, str, str], dict[float, float]]:
    """HAMi's vGPU monitor's SM utilization (per cent) per (namespace, pod, UUID) and bucket
    end, its containers added up (at most 100; a later answer of a bucket wins): the current
    metric's series, renamed `exported_*` by the ServiceMonitor, for a pod where it has any,
    else the legacy one's."""
    out: dict[tuple[str, str, str], dict[float, float]] = {}
    for qid, names in (
        ("hami_util_hourly", ("exported_namespace", "exported_pod", "exported_container")),
        ("hami_util_legacy_hourly", ("podnamespace", "podname", "ctrname")),
    ):
        uuid = "device_uuid" if qid == "hami_util_hourly" else "deviceuuid"
        per: dict[tuple[str, ...], dict[float, float]] = defaultdict(dict)
        for entry in doc["prometheus"].get(qid, []):
            for item in entry["body"]["data"]["result"]:
                m = item["metric"]
                key = (*(m.get(n, "") for n in names), m.get(uuid, ""))
                per[key].update((float(ts), float(v)) for ts, v in item["values"])
        added: dict[tuple[str, str, str], dict[float, float]] = defaultdict(dict)
        for (ns, pod, _, dev), points in per.items():
            for ts, v in points.items():
                added[(ns, pod, dev)][ts] = added[(ns, pod, dev)].get(ts, 0.0) + v
        for key, points in added.items():
            out.setdefault(key, {ts: min(v, 100.0) for ts, v in points.items()})
    return out


KAI_RESERVATION_APPS = ("kai-resource-reservation", "runai-reservation")
"""The `app` label of KAI Scheduler's reservation pods (`docs/domain.md`, KAI)."""


FractionRun = tuple[tuple[str, str], tuple[float | None, float]]
"""A KAI fraction pod, (namespace, pod), and when it ran (`ran_of`)."""


def kai_fraction_runs(doc: dict[str, Any]) -> dict[tuple[str, str], list[FractionRun]]:
    """(namespace, reservation pod) -> the fraction pods of its GPU group (label
    `runai-gpu-group`, or `runai-gpu-group/<group>`) that ran, each with `ran_of`."""
    end = float(doc["manifest"]["window"]["end"])
    pods = [p for page in doc["kubernetes"]["pods"] for p in page["items"]]
    members: dict[str, list[FractionRun]] = defaultdict(list)
    reservations: dict[tuple[str, str], str] = {}
    for pod in pods:
        labels = pod["metadata"].get("labels", {})
        who = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if labels.get("app") in KAI_RESERVATION_APPS:
            reservations[who] = labels.get("runai-gpu-group", "")
            continue
        ran = _ran(pod, end)
        if ran is None:
            continue
        for group in {v for k, v in labels.items() if k.split("/")[0] == "runai-gpu-group"}:
            members[group].append((who, ran))
    return {who: members.get(group, []) for who, group in reservations.items()}


def kai_part(ran: tuple[float | None, float], t: float, step: float) -> float:
    """The part of the bucket ending at `t` a fraction pod that ran over `ran` held its share
    in: the part of it it ran."""
    return overlap(ran, t, step) / step


def kai_released(
    fractions: list[FractionRun],
    t: float,
    step: float,
    gone: dict[tuple[str, str], float],
) -> bool:
    """Whether KAI has deleted a GPU's reservation pod in the bucket ending at `t` once the pods
    of `gone` are released (each from its time on): some fraction pod of its group held the GPU
    in the bucket, and every one that did is released (while one is left, the whole GPU stays
    reserved)."""
    held = [who for who, ran in fractions if kai_part(ran, t, step) > 0]
    return bool(held) and all(t > gone.get(who, math.inf) for who in held)

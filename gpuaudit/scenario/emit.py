"""Write a scenario as a snapshot (the answers Prometheus would give), OpenMetrics and API JSON.

Samples are generated so that Prometheus's answers can be computed exactly: within each hour a
series alternates between `level + amp` and `level - amp`, at times offset by half a scrape
interval from the hour boundaries (so range selectors never see a sample on their edge, on
Prometheus 2.x's closed or 3.x's left-open ranges alike).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import IO, Any

import numpy as np

from gpuaudit import __version__, queries, xid
from gpuaudit.scenario.generator import Scenario
from gpuaudit.scenario.model import Holding
from gpuaudit.snapshot import Snapshot

Arr = np.ndarray[Any, np.dtype[Any]]
DRIVER = "570.133.20"
LABEL_STYLES = ("helm", "honor", "old")
"""`helm`: dcgm-exporter Helm chart defaults (`honorLabels: false`, workload labels arrive as
`exported_pod` ...); `honor`: `honorLabels: true` (`pod` is the workload, or the exporter for
unallocated GPUs); `old`: `--use-old-namespace` (`uuid`, `pod_name` ...)."""


def spelling_of(style: str) -> str:
    return "exported" if style == "helm" else "pod"


def raw_labels(h: Holding, style: str) -> dict[str, str]:
    s, n = h.slot, h.slot.node
    lab = {
        "gpu": str(s.index),
        ("uuid" if style == "old" else "UUID"): s.uuid,
        "pci_bus_id": s.pci_bus_id,
        "device": f"nvidia{s.index}",
        "modelName": n.model,
    }
    if s.mig_id:
        lab["GPU_I_PROFILE"] = s.profile
        lab["GPU_I_ID"] = s.mig_id
    lab["Hostname"] = n.name
    lab["DCGM_FI_DRIVER_VERSION"] = DRIVER
    target = {
        "container": "nvidia-dcgm-exporter",
        "endpoint": "gpu-metrics",
        "instance": f"{n.ip}:9400",
        "job": "nvidia-dcgm-exporter",
        "namespace": "gpu-operator",
        "pod": n.exporter_pod,
        "service": "nvidia-dcgm-exporter",
    }
    p = h.pod
    if style == "helm":
        if p:
            lab.update(
                exported_container=p.container, exported_namespace=p.namespace, exported_pod=p.name
            )
        lab.update(target)
    elif style == "honor":
        lab.update(target)
        if p:
            lab.update(container=p.container, namespace=p.namespace, pod=p.name)
    else:
        lab.update({k: v for k, v in target.items() if k not in ("pod", "namespace", "container")})
        if p:
            lab.update(container_name=p.container, pod_namespace=p.namespace, pod_name=p.name)
    return lab


@dataclass
class _Series:
    labels: dict[str, str]
    hours: Arr
    """Absolute hour indices with data, ascending."""
    hi: dict[str, Arr]
    lo: dict[str, Arr]


_METRICS = (
    queries.ACT_PROF,
    queries.UTIL,
    queries.FB_USED,
    queries.FB_FREE,
    queries.POWER,
    queries.XID,
    queries.REMAP_UNCORR,
    queries.REMAP_FAILURE,
)
_INT_METRICS = {
    queries.UTIL,
    queries.FB_USED,
    queries.FB_FREE,
    queries.XID,
    queries.REMAP_UNCORR,
    queries.REMAP_FAILURE,
}
_HEALTH = (queries.REMAP_UNCORR, queries.REMAP_FAILURE)
"""GPU-health gauges emitted for every GPU and MIG instance, constant within each hour."""


def _xid_text(code: int) -> str:
    return "No Error" if code == 0 else xid.meaning(code)


def _series(sc: Scenario, style: str) -> list[_Series]:
    groups: dict[tuple[tuple[str, str], ...], list[Holding]] = {}
    for h in sc.holdings:
        if not h.slot.node.exporter:
            continue
        key = tuple(sorted(raw_labels(h, style).items()))
        groups.setdefault(key, []).append(h)
    out: list[_Series] = []
    for key, hs in groups.items():
        hs.sort(key=lambda h: h.h0)
        hours = np.concatenate([np.arange(h.h0, h.h1) for h in hs]).astype(np.float64)
        hi: dict[str, Arr] = {}
        lo: dict[str, Arr] = {}

        def cat(f: Any, hs: list[Holding] = hs) -> Arr:
            return np.concatenate([f(h) for h in hs]).astype(np.float64)

        hi[queries.ACT_PROF] = cat(lambda h: h.act + h.act_amp)
        lo[queries.ACT_PROF] = cat(lambda h: h.act - h.act_amp)
        if not hs[0].slot.mig_id:
            hi[queries.UTIL] = cat(lambda h: h.util + h.util_amp)
            lo[queries.UTIL] = cat(lambda h: h.util - h.util_amp)
        hi[queries.FB_USED] = cat(lambda h: h.fb_used + h.fb_amp)
        lo[queries.FB_USED] = cat(lambda h: h.fb_used - h.fb_amp)
        mem = float(hs[0].slot.mem_mib)
        hi[queries.FB_FREE] = mem - lo[queries.FB_USED]
        lo[queries.FB_FREE] = mem - hi[queries.FB_USED]
        hi[queries.POWER] = cat(lambda h: h.power)
        lo[queries.POWER] = hi[queries.POWER]
        slot = hs[0].slot
        for m in _HEALTH:
            hi[m] = lo[m] = slot.health_at(m, hours)
        for m in list(hi):
            # The values Prometheus will parse from the exposition text.
            if m in _INT_METRICS:
                hi[m], lo[m] = np.round(hi[m]), np.round(lo[m])
            else:
                hi[m] = np.array([float(f"{v:.6f}") for v in hi[m]])
                lo[m] = np.array([float(f"{v:.6f}") for v in lo[m]])
        out.append(_Series(dict(key), hours, hi, lo))
        # The XID gauge holds the last XID code and names it in `err_code`/`err_msg`, so each
        # code the GPU showed is a series of its own over the hours it showed it.
        codes = slot.health_at(queries.XID, hours)
        for code in dict.fromkeys(codes.tolist()):
            sel = codes == code
            labels = dict(key) | {"err_code": str(int(code)), "err_msg": _xid_text(int(code))}
            vals = codes[sel]
            xid_hi = {queries.XID: vals}
            out.append(_Series(labels, hours[sel], xid_hi, xid_hi))
    return out


def fmt(v: float) -> str:
    """A float as Prometheus's JSON writes it (shortest round-trip, no exponent)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return str(np.format_float_positional(v, trim="-"))


def _ts(t: float) -> float | int:
    return int(t) if float(t).is_integer() else round(t, 3)


def _quantile(q: float, hi: Arr, lo: Arr, k: int) -> float:
    """Prometheus's `quantile_over_time` over a multiset where every hi and lo occurs k times."""
    vals = np.concatenate([hi, lo])
    order = np.argsort(vals, kind="stable")
    vals = vals[order]
    n = len(vals) * k
    rank = q * (n - 1)
    lower = max(0, math.floor(rank))
    upper = min(n - 1, lower + 1)
    weight = rank - math.floor(rank)
    a, b = vals[lower // k], vals[upper // k]
    return float(a * (1 - weight) + b * weight)


def _window_stat(stat: str, hi: Arr, lo: Arr, k: int) -> float:
    if stat == "sum":
        return float((hi.sum() + lo.sum()) * k)
    if stat == "max":
        return float(max(hi.max(), lo.max()))
    if stat == "p95":
        return _quantile(0.95, hi, lo, k)
    return float(2 * k * len(hi))


def _envelope(rtype: str, result: list[dict[str, Any]]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": rtype, "result": result}}


def manifest(sc: Scenario, style: str, generated_by: str) -> dict[str, Any]:
    spelling = spelling_of(style)
    window_s = sc.end - sc.start
    return {
        "format_version": 1,
        "gpuaudit_version": __version__,
        "cluster": f"scenario-{sc.seed}",
        "source": "scenario",
        "generated_by": generated_by,
        "collected_at": datetime.fromtimestamp(sc.end, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "window": {"start": sc.start, "end": sc.end, "step": 3600, "seconds": window_s},
        "capabilities": {
            "backend": "scenario",
            "pod_label": spelling,
            "label_style": style,
            "metrics": sorted(_METRICS),
            "mig": True,
            "profiling": True,
            "kube_state_metrics": False,
        },
        "objects": dict.fromkeys(k8s_lists(sc), "ok"),
        "queries": [
            {
                "id": q.id,
                "kind": q.kind,
                "metric": q.metric,
                "query": q.promql(window_s if q.kind == "window" else 3600, spelling),
            }
            for q in queries.CATALOGUE
        ],
        "plan": {
            "window_chunks": [[sc.start, sc.end]],
            "hourly_chunks": [[sc.start + 3600, sc.end]],
        },
        "complete": True,
        "incomplete_reasons": [],
        "warnings": [],
    }


def to_snapshot(sc: Scenario, style: str = "helm", generated_by: str = "") -> Snapshot:
    """The snapshot a live collection of this scenario would record."""
    spelling = spelling_of(style)
    k = 3600 // sc.scrape_s // 2
    series = _series(sc, style)
    window_s = sc.end - sc.start
    prom: dict[str, list[dict[str, Any]]] = {}
    for q in queries.CATALOGUE:
        by = set(q.by_labels(spelling))
        result: list[dict[str, Any]] = []
        for s in series:
            if q.metric not in s.hi:
                continue
            metric = {kk: v for kk, v in s.labels.items() if kk in by and v}
            hi, lo = s.hi[q.metric], s.lo[q.metric]
            if q.kind == "window":
                val = _window_stat(q.stat, hi, lo, k)
                result.append({"metric": metric, "value": [sc.end, fmt(val)]})
            else:
                ts = sc.start + (s.hours + 1) * 3600
                means = (hi * k + lo * k) / (2 * k)
                result.append(
                    {
                        "metric": metric,
                        "values": [[_ts(t), fmt(float(v))] for t, v in zip(ts, means, strict=True)],
                    }
                )
        if q.kind == "window":
            params: dict[str, Any] = {"time": sc.end}
            body = _envelope("vector", result)
        else:
            params = {"start": sc.start + 3600, "end": sc.end, "step": 3600}
            body = _envelope("matrix", result)
        rng = window_s if q.kind == "window" else 3600
        prom[q.id] = [{"query": q.promql(rng, spelling), "params": params, "body": body}]
    kube = {res: [lst] for res, lst in k8s_lists(sc).items()}
    return Snapshot(manifest=manifest(sc, style, generated_by), prometheus=prom, kubernetes=kube)


def write_openmetrics(sc: Scenario, out: IO[str], style: str = "helm") -> int:
    """Every sample of the scenario as OpenMetrics text for `promtool tsdb
    create-blocks-from openmetrics`: integer-second timestamps, each family contiguous with one
    TYPE line, each series in ascending time, `# EOF` last. Returns the sample count."""
    series = _series(sc, style)
    per_hour = 3600 // sc.scrape_s
    offsets = (np.arange(per_hour) + 0.5) * sc.scrape_s
    n = 0
    for m in _METRICS:
        out.write(f"# TYPE {m} gauge\n")
        for s in series:
            if m not in s.hi:
                continue
            lab = ",".join(f'{k}="{_esc(v)}"' for k, v in s.labels.items())
            prefix = f"{m}{{{lab}}} "
            integer = m in _INT_METRICS
            lines: list[str] = []
            for h, hv, lv in zip(s.hours, s.hi[m], s.lo[m], strict=True):
                base = sc.start + int(h) * 3600
                hs = f"{int(hv)}" if integer else f"{hv:.6f}"
                ls = f"{int(lv)}" if integer else f"{lv:.6f}"
                for j, off in enumerate(offsets):
                    lines.append(f"{prefix}{hs if j % 2 == 0 else ls} {base + int(off)}\n")
            out.write("".join(lines))
            n += len(lines)
    out.write("# EOF\n")
    return n


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pods(sc: Scenario) -> Iterator[dict[str, Any]]:
    for i, p in enumerate(sc.pods):
        if not p.alive:
            continue
        created = sc.start + p.created_h * 3600 + p.created_delta_s
        limits: dict[str, str] = {}
        if p.gpus:
            limits["nvidia.com/gpu"] = str(p.gpus)
        for prof, cnt in p.mig.items():
            limits[f"nvidia.com/mig-{prof}"] = str(cnt)
        owner: dict[str, Any] = {
            "apiVersion": _owner_api(p.owner_kind),
            "kind": p.owner_kind,
            "name": p.owner_name,
            "uid": p.owner_uid or f"owner-{p.uid}",
            "controller": True,
            "blockOwnerDeletion": True,
        }
        spec: dict[str, Any] = {
            "nodeName": p.node,
            "schedulerName": p.scheduler_name,
            "restartPolicy": "OnFailure" if p.owner_kind == "PyTorchJob" else "Always",
            "containers": [
                {
                    "name": p.container,
                    "image": f"registry.example/{p.container}:1",
                    "resources": {"limits": dict(limits), "requests": dict(limits)},
                }
            ],
        }
        if p.priority_class:
            spec["priorityClassName"] = p.priority_class
            spec["priority"] = p.priority
        if p.preemption_policy:
            spec["preemptionPolicy"] = p.preemption_policy
        if p.node_selector:
            spec["nodeSelector"] = dict(p.node_selector)
        if not p.node:
            del spec["nodeName"]
        meta: dict[str, Any] = {
            "name": p.name,
            "namespace": p.namespace,
            "uid": p.uid,
            "resourceVersion": str(100000 + i),
            "creationTimestamp": _iso(created),
            "labels": dict(p.labels),
            "annotations": dict(p.annotations),
            "ownerReferences": [owner],
        }
        if not p.owner_kind:  # a plain pod (a Kueue pod group member, say) has no owner
            del meta["ownerReferences"]
        yield {"metadata": meta, "spec": spec, "status": _pod_status(sc, p, created)}
    for j, n in enumerate(sc.nodes):
        yield {
            "metadata": {
                "name": n.exporter_pod,
                "namespace": "gpu-operator",
                "uid": f"exp-{j:05d}",
                "resourceVersion": str(200000 + j),
                "creationTimestamp": _iso(sc.start - 86400 * 30),
                "labels": {"app": "nvidia-dcgm-exporter"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "DaemonSet",
                        "name": "nvidia-dcgm-exporter",
                        "uid": "ds-dcgm",
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "nodeName": n.name,
                "containers": [{"name": "nvidia-dcgm-exporter", "resources": {}}],
            },
            "status": {"phase": "Running", "podIP": n.ip, "startTime": _iso(sc.start - 86400 * 30)},
        }


def _pod_status(sc: Scenario, p: Any, created: float) -> dict[str, Any]:
    if p.phase == "Pending":
        return {
            "phase": "Pending",
            "qosClass": "Guaranteed",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": p.pending_message
                    or "0/1 nodes are available: insufficient nvidia.com/gpu.",
                    "lastTransitionTime": _iso(created + 1),
                }
            ],
        }
    cs: dict[str, Any] = {
        "name": p.container,
        "ready": True,
        "restartCount": p.restarts,
        "image": f"registry.example/{p.container}:1",
        "state": {"running": {"startedAt": _iso(created + p.start_delay_s + 25)}},
    }
    if p.last_termination:
        reason, message = p.last_termination
        term: dict[str, Any] = {
            "reason": reason,
            "exitCode": 1 if reason == "Error" else 137,
            "finishedAt": _iso(sc.end - 600),
        }
        if message:
            term["message"] = message
        cs["lastState"] = {"terminated": term}
    return {
        "phase": p.phase,
        "hostIP": next((n.ip for n in sc.nodes if n.name == p.node), ""),
        "startTime": _iso(created + p.start_delay_s),
        "qosClass": "Guaranteed",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": _iso(created + 1)},
            {"type": "Ready", "status": "True", "lastTransitionTime": _iso(created + 60)},
        ],
        "containerStatuses": [cs],
    }


def _owner_api(kind: str) -> str:
    return {
        "ReplicaSet": "apps/v1",
        "StatefulSet": "apps/v1",
        "Job": "batch/v1",
        "PyTorchJob": "kubeflow.org/v1",
        "JobSet": "jobset.x-k8s.io/v1alpha2",
    }.get(kind, "v1")


def k8s_lists(sc: Scenario) -> dict[str, dict[str, Any]]:
    """The scenario's Kubernetes objects as the API server's list responses."""
    rv = {"resourceVersion": "999999"}
    nodes = [
        {
            "metadata": {
                "name": n.name,
                "uid": f"node-{i:05d}",
                "labels": dict(n.labels),
                "resourceVersion": str(300000 + i),
                "creationTimestamp": _iso(sc.start - 86400 * 60),
            },
            "spec": {},
            "status": {
                "capacity": dict(n.capacity),
                "allocatable": dict(n.capacity),
                "addresses": [
                    {"type": "InternalIP", "address": n.ip},
                    {"type": "Hostname", "address": n.name},
                ],
            },
        }
        for i, n in enumerate(sc.nodes)
    ]
    jobs: list[dict[str, Any]] = [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": j["name"], "namespace": j["namespace"], "uid": j["uid"]},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "restartPolicy": "OnFailure"},
                    "Worker": {"replicas": j["workers"], "restartPolicy": "OnFailure"},
                }
            },
            "status": {"conditions": [{"type": "Running", "status": "True"}]},
        }
        for j in sc.objects.get("pytorchjobs", [])
    ]
    for j, job in zip(sc.objects.get("pytorchjobs", []), jobs, strict=True):
        if j.get("min_available"):
            job["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": j["min_available"]}}
        if j.get("labels"):
            job["metadata"]["labels"] = dict(j["labels"])
    classes = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "preemptionPolicy": "PreemptLowerPriority",
        }
        for name, value in (("serving", 10000), ("training", 1000), ("batch", 100))
    ]
    classes.extend(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": c["name"]},
            "value": c["value"],
            "preemptionPolicy": c["preemptionPolicy"],
            "description": c.get("description", ""),
        }
        for c in sc.objects.get("priorityclasses", [])
    )
    return {
        "pods": {"kind": "PodList", "apiVersion": "v1", "metadata": rv, "items": list(_pods(sc))},
        "nodes": {"kind": "NodeList", "apiVersion": "v1", "metadata": rv, "items": nodes},
        "pytorchjobs": {
            "kind": "PyTorchJobList",
            "apiVersion": "kubeflow.org/v1",
            "metadata": rv,
            "items": jobs,
        },
        "priorityclasses": {
            "kind": "PriorityClassList",
            "apiVersion": "scheduling.k8s.io/v1",
            "metadata": rv,
            "items": classes,
        },
        **{
            key: {"kind": kind, "apiVersion": api, "metadata": rv, "items": list(sc.objects[key])}
            for key, (api, kind) in _CRD_LISTS.items()
            if key in sc.objects
        },
    }


_CRD_LISTS = {
    "volcano_podgroups": ("scheduling.volcano.sh/v1beta1", "PodGroupList"),
    "coscheduling_podgroups": ("scheduling.x-k8s.io/v1alpha1", "PodGroupList"),
    "kueue_workloads": ("kueue.x-k8s.io/v1beta2", "WorkloadList"),
    "jobsets": ("jobset.x-k8s.io/v1alpha2", "JobSetList"),
}
"""Gang objects the generator writes as whole API objects, by list key (see
`gpuaudit.sources.kubernetes.RESOURCES`)."""

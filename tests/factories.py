"""Tiny hand-built snapshots for unit tests: series as Prometheus would answer them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuaudit import queries
from gpuaudit.inventory import Inventory, build
from gpuaudit.snapshot import Snapshot

START = 1_700_000_000 - 1_700_000_000 % 3600
STEP = 3600
SAMPLES_PER_HOUR = 60


@dataclass
class Series:
    """One DCGM series: its labels and per-hour values (None = no data that hour)."""

    labels: dict[str, str]
    act: list[float | None] = field(default_factory=list)
    util: list[float | None] | None = None
    fb_used: float | None = None
    fb_free: float | None = None


def gpu_labels(
    uuid: str = "GPU-0",
    gpu: str = "0",
    host: str = "node-a",
    model: str = "NVIDIA H100 80GB HBM3",
    pod: str = "",
    namespace: str = "",
    spelling: str = "exported",
    mig: tuple[str, str] | None = None,
) -> dict[str, str]:
    lab = {"gpu": gpu, "UUID": uuid, "modelName": model, "Hostname": host}
    if mig:
        lab["GPU_I_PROFILE"], lab["GPU_I_ID"] = mig
    if spelling == "exported":
        lab.update(pod="nvidia-dcgm-exporter-abcde", namespace="gpu-operator")
        if pod:
            lab.update(exported_pod=pod, exported_namespace=namespace, exported_container="c")
    elif pod:
        lab.update(pod=pod, namespace=namespace, container="c")
    return lab


def _stat(vals: list[float], stat: str) -> float:
    if stat == "sum":
        return sum(vals) * SAMPLES_PER_HOUR
    if stat == "max":
        return max(vals)
    if stat == "p95":
        s = sorted(vals)
        rank = 0.95 * (len(s) - 1)
        lo = int(rank)
        hi = min(len(s) - 1, lo + 1)
        return s[lo] + (s[hi] - s[lo]) * (rank - lo)
    return float(len(vals) * SAMPLES_PER_HOUR)


def snapshot(
    series: list[Series],
    hours: int,
    pods: list[dict[str, Any]] | None = None,
    nodes: list[dict[str, Any]] | None = None,
) -> Snapshot:
    end = START + hours * STEP
    prom: dict[str, list[dict[str, Any]]] = {}
    for q in queries.CATALOGUE:
        result: list[dict[str, Any]] = []
        for s in series:
            if q.metric == queries.ACT_PROF:
                per_hour: list[float | None] = s.act
            elif q.metric == queries.UTIL:
                if s.util is None:
                    continue
                per_hour = s.util
            elif q.metric == queries.FB_USED:
                if s.fb_used is None:
                    continue
                per_hour = [s.fb_used if v is not None else None for v in s.act]
            elif q.metric == queries.FB_FREE:
                if s.fb_free is None:
                    continue
                per_hour = [s.fb_free if v is not None else None for v in s.act]
            else:
                continue
            vals = [v for v in per_hour if v is not None]
            if not vals:
                continue
            if q.kind == "window":
                result.append({"metric": dict(s.labels), "value": [end, repr(_stat(vals, q.stat))]})
            else:
                pts = [
                    [START + (i + 1) * STEP, repr(v)]
                    for i, v in enumerate(per_hour)
                    if v is not None
                ]
                result.append({"metric": dict(s.labels), "values": pts})
        rtype = "vector" if q.kind == "window" else "matrix"
        prom[q.id] = [
            {
                "query": q.id,
                "params": {},
                "body": {"status": "success", "data": {"resultType": rtype, "result": result}},
            }
        ]
    kube: dict[str, list[dict[str, Any]]] = {}
    if pods is not None:
        kube["pods"] = [{"kind": "PodList", "items": pods}]
    if nodes is not None:
        kube["nodes"] = [{"kind": "NodeList", "items": nodes}]
    manifest = {"window": {"start": START, "end": end, "step": STEP}, "cluster": "test"}
    return Snapshot(manifest=manifest, prometheus=prom, kubernetes=kube)


def inventory(series: list[Series], hours: int, **kw: Any) -> Inventory:
    return build(snapshot(series, hours, **kw))


def make_pod(
    name: str,
    namespace: str = "ml",
    node: str = "node-a",
    gpus: int = 1,
    owner: tuple[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "labels": labels or {},
    }
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    return {
        "metadata": meta,
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": "Running"},
    }

"""Tiny hand-built snapshots for unit tests: series as Prometheus would answer them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

from gpuaudit.checks.findings import Finding
from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory import Inventory, Views, build
from gpuaudit.snapshot import Manifest, ManifestWindow, Snapshot
from gpuaudit.sources.prometheus import catalogue as queries

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
    xids: list[int] = field(default_factory=list)
    """XID codes the gauge showed in the window (each answered as its own `err_code` series)."""
    xid_events: dict[int, float] | None = None
    """XID events per code (the `xid_events_hourly` answer, all in the last hour); None: one for
    each non-zero code of `xids`. A code of `xids` with no event is a stale gauge (it showed the
    code from before)."""
    health: dict[str, float] = field(default_factory=dict)
    """Window figures of other queries by query id: GPU-health maxima (`remap_failure_max`,
    `ecc_dbe_max` ...), or of an hourly query its window figure in the last hour (the violation
    counters' `power_violation_increase_hourly` ...)."""
    samples: list[int] | None = None
    """Samples per hour (default `SAMPLES_PER_HOUR` in every hour with data): a series that
    started or stopped within an hour has fewer there."""
    power: float | None = None
    """Power draw (W) in every hour with activity data (`DCGM_FI_DEV_POWER_USAGE`)."""
    power_limit: float | None = None
    """Power management limit (W), `DCGM_FI_DEV_POWER_MGMT_LIMIT`; None: not exported."""


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


def _stat(vals: list[float], counts: list[int], stat: str) -> float:
    """A window statistic over hours of `counts` samples each, all at that hour's value."""
    if stat == "sum":
        return float(sum(v * n for v, n in zip(vals, counts, strict=True)))
    if stat == "max":
        return max(vals)
    if stat == "p95":
        s = sorted(vals)
        rank = 0.95 * (len(s) - 1)
        lo = int(rank)
        hi = min(len(s) - 1, lo + 1)
        return s[lo] + (s[hi] - s[lo]) * (rank - lo)
    return float(sum(counts))


def _counts(s: Series, per_hour: list[float | None]) -> list[int | None]:
    """Samples in each hour with data (None in hours without)."""
    if s.samples is None:
        return [SAMPLES_PER_HOUR if v is not None else None for v in per_hour]
    return [n if v is not None else None for v, n in zip(per_hour, s.samples, strict=False)]


def snapshot(
    series: list[Series],
    hours: int,
    pods: list[dict[str, Any]] | None = None,
    nodes: list[dict[str, Any]] | None = None,
    lists: dict[str, list[dict[str, Any]]] | None = None,
    p2p: list[tuple[dict[str, str], str, float]] | None = None,
    full: int | None = None,
) -> Snapshot:
    """`lists`: other Kubernetes lists by key (`volcano_podgroups` ...), as item lists; `p2p`:
    (GPU labels, peer GPU index, status) rows of `DCGM_EXP_P2P_STATUS`; `full`: the sample
    counts are answered only where an hour holds another number of samples (as a scan that
    measured the scrape interval writes them), else only where a count changes."""
    end = START + hours * STEP
    prom: dict[str, list[dict[str, Any]]] = {}
    for q in queries.CATALOGUE:
        result: list[dict[str, Any]] = []
        if q.id == "xid_max":
            for s in series:
                for code in s.xids:
                    lab = dict(s.labels, err_code=str(code), err_msg=f"xid {code}")
                    result.append({"metric": lab, "value": [end, str(code)]})
        elif q.id == "xid_events_hourly":
            for s in series:
                events = {c: 1.0 for c in s.xids if c} if s.xid_events is None else s.xid_events
                for code, n in sorted(events.items()):
                    if n > 0:
                        lab = dict(s.labels, err_code=str(code), err_msg=f"xid {code}")
                        result.append({"metric": lab, "values": [[end, repr(float(n))]]})
        elif q.id == "p2p_max":
            for lab, peer, status in p2p or []:
                metric = dict(lab, peer_gpu=peer)
                result.append({"metric": metric, "value": [end, repr(float(status))]})
        for s in series:
            if q.id in s.health:
                point = [end, repr(s.health[q.id])]
                answer = {"value": point} if q.kind == "window" else {"values": [point]}
                result.append({"metric": dict(s.labels), **answer})
                continue
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
            elif q.metric in (queries.POWER, queries.POWER_LIMIT):
                level = s.power if q.metric == queries.POWER else s.power_limit
                if level is None:
                    continue
                per_hour = [level if v is not None else None for v in s.act]
            else:
                continue
            counts = _counts(s, per_hour)
            if q.unless == queries.ACT_PROF:  # GPU_UTIL counts only where no activity series
                counts = [n if a is None else None for n, a in zip(counts, s.act, strict=False)]
            vals = [v for v, n in zip(per_hour, counts, strict=False) if v is not None and n]
            if not vals:
                continue
            if q.kind == "window":
                ns = [n for n in counts if n]
                value = _stat(vals, ns, q.stat)  # type: ignore[arg-type]
                result.append({"metric": dict(s.labels), "value": [end, repr(value)]})
            else:
                pts = [
                    [START + (i + 1) * STEP, repr(float(n) if q.stat == "count" else v)]
                    for i, (v, n) in enumerate(zip(per_hour, counts, strict=False))
                    if v is not None
                    and n
                    # A count query answers where an hour is not full; without `full`,
                    # where the count differs from the hour before (or that had none), and
                    # at the window's first hour.
                    and not (q.changes and full is not None and n == full)
                    and not (q.changes and full is None and i > 0 and counts[i - 1] == n)
                ]
                if pts:
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
    for key, items in (lists or {}).items():
        kube[key] = [{"items": items}]
    manifest = Manifest(
        window=ManifestWindow(start=START, end=end, step=STEP),
        cluster="test",
        queries=tuple({"id": q.id, "full": full} for q in queries.CATALOGUE if q.changes)
        if full is not None
        else (),
    )
    return Snapshot(manifest=manifest, prometheus=prom, kubernetes=kube)


def inventory(
    series: list[Series], hours: int, topology: Path | None = None, **kw: Any
) -> Inventory:
    """The inventory of `snapshot(series, hours, **kw)`, with `--topology` files from
    `topology`."""
    return build(snapshot(series, hours, **kw), topology)


def run_check(
    module: ModuleType,
    inv: Inventory,
    prices: Mapping[str, float] | None = None,
    **thresholds: float,
) -> list[Finding]:
    """Run one check module on `inv` as the audit does: the shared views of `inv` at `prices`
    (default: the built-in prices), and its `Thresholds` with `thresholds` set."""
    views = Views(inv, DEFAULT_PRICES if prices is None else prices)
    return list(module.run(views, module.Thresholds(**thresholds)))


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_pod(
    name: str,
    namespace: str = "ml",
    node: str = "node-a",
    gpus: int = 1,
    owner: tuple[str, str] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    phase: str = "Running",
    priority: int | None = None,
    priority_class: str = "",
    preemption_policy: str = "",
    node_selector: dict[str, str] | None = None,
    started: float | None = None,
    created: float | None = None,
    unschedulable: str = "",
    pending_since: float | None = None,
) -> dict[str, Any]:
    """A pod as the API returns it. `unschedulable`: the scheduler's message of a pending
    pod (PodScheduled False, reason Unschedulable) since `pending_since`."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if created is not None:
        meta["creationTimestamp"] = iso(created)
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
    }
    if not node:
        del spec["nodeName"]
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    if preemption_policy:
        spec["preemptionPolicy"] = preemption_policy
    if node_selector:
        spec["nodeSelector"] = node_selector
    status: dict[str, Any] = {"phase": phase}
    if started is not None:
        status["startTime"] = iso(started)
    if unschedulable:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": unschedulable,
                "lastTransitionTime": iso(pending_since or START),
            }
        ]
    return {"metadata": meta, "spec": spec, "status": status}


def make_node(
    name: str,
    product: str = "NVIDIA-H100-80GB-HBM3",
    gpus: int = 8,
    clique: str = "",
    cordoned: bool = False,
) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus)}
    if clique:
        labels["nvidia.com/gpu.clique"] = clique
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {
            "capacity": {"nvidia.com/gpu": str(gpus)},
            "allocatable": {"nvidia.com/gpu": str(gpus)},
        },
    }

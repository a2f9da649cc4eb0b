"""GPU060 warm idle nodes: GPU nodes that sat for a day or more with no GPU work on them.

What it finds
    GPU nodes on which, for a stretch of at least 24 hours, no pod held a GPU, or only pods
    that left their GPUs idle did: capacity kept warm that a cluster autoscaler (or Karpenter)
    could have released.

Why it matters
    A GPU node costs the same whether its GPUs work or not. Autoscalers release a node only
    when it is empty and nothing blocks scale-down; an idle pod, a pod without a controller or
    a scale-down-disabled annotation keeps a whole node of GPUs running.

How it decides
    Per node and bucket (`--step`, default 1 h), from the DCGM series of its GPUs and MIG
    instances: the bucket is idle when the node's GPUs have data and no pod holding one of
    them reached `checks.idle_activity` (default 0.05) mean engine activity. Buckets without
    DCGM data break a stretch (missing data is not idle). Runs of consecutive idle buckets of
    at least `checks.warm_idle_hours` (default 24 h) count.
    Impact: the node's GPUs x the hours in those runs, priced per GPU model. Severity: high
    from 500 GPU-hours, medium from 100, low below.

What to do
    Let the autoscaler remove the node when it has no GPU work: stop idle holders (GPU001),
    and remove what blocks scale-down (the `cluster-autoscaler.kubernetes.io/scale-down-disabled`
    annotation, pods without a controller or with local storage, strict PodDisruptionBudgets).
    For Karpenter, set the NodePool's `disruption.consolidationPolicy: WhenEmptyOrUnderutilized`.
"""

from __future__ import annotations

from datetime import datetime, timezone

from gpuaudit.checks.base import gpu_word, short_model
from gpuaudit.findings import Finding, Impact, Resource, Severity
from gpuaudit.inventory import Inventory, views
from gpuaudit.inventory import columns as C
from gpuaudit.settings import Settings

CODE = "GPU060"
TITLE = "Warm idle nodes"
REQUIRES = ("activity",)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%MZ")


def _severity(gpu_hours: float) -> Severity:
    if gpu_hours >= 500:
        return Severity.HIGH
    if gpu_hours >= 100:
        return Severity.MEDIUM
    return Severity.LOW


def run(inv: Inventory, settings: Settings) -> list[Finding]:
    cfg = settings.checks
    h = inv.holdings
    if h.empty or inv.hourly.empty:
        return []
    step = float(inv.step_s)
    bucket_h = step / 3600.0
    hr = views.hourly_with(inv, [C.NODE, C.HELD, C.NAMESPACE, C.POD])
    hr = hr[hr[C.NODE] != ""]
    hr["_busy"] = hr[C.HELD].astype(bool) & (hr[C.ACT] >= cfg.idle_activity)
    per = (
        hr.groupby([C.NODE, C.TS], sort=True)["_busy"]
        .max()
        .reset_index()
        .sort_values([C.NODE, C.TS])
    )
    per["_idle"] = ~per["_busy"].astype(bool)
    gap = per[C.TS] - per.groupby(C.NODE)[C.TS].shift()
    new_run = (
        (per[C.NODE] != per[C.NODE].shift())
        | (per["_idle"] != per["_idle"].shift())
        | (gap != step)
    )
    per["_run"] = new_run.cumsum()
    idle = per[per["_idle"]]
    runs = idle.groupby([C.NODE, "_run"], sort=True)[C.TS].agg(["min", "max", "size"]).reset_index()
    runs["hours"] = runs["size"] * bucket_h
    long_runs = runs[runs["hours"] >= cfg.warm_idle_hours]
    if long_runs.empty:
        return []
    # Pods that held GPUs (idly) during the long runs.
    marks = idle.merge(long_runs[[C.NODE, "_run"]], on=[C.NODE, "_run"])[[C.NODE, C.TS]]
    holders = hr[hr[C.HELD].astype(bool)].merge(marks, on=[C.NODE, C.TS])
    idle_pods = {
        str(node): sorted({f"{ns}/{p}" for ns, p in zip(g[C.NAMESPACE], g[C.POD], strict=True)})
        for node, g in holders.groupby(C.NODE)
    }
    base = h[C.UUID].where(h[C.UUID] != "", h[C.SLOT].str.split("/").str[0])
    physical = base.groupby(h[C.NODE]).nunique()
    labelled = (
        dict(zip(inv.nodes[C.NODE], inv.nodes[C.GPU_COUNT], strict=True))
        if not inv.nodes.empty
        else {}
    )
    models = views.node_products(inv)
    dcgm_model = h.groupby(C.NODE)[C.MODEL].first()
    out: list[Finding] = []
    for node, grp in long_runs.groupby(C.NODE, sort=True):
        node = str(node)
        gpus = float(max(physical.get(node, 0), float(labelled.get(node, 0) or 0)))
        if gpus <= 0:
            continue
        hours = float(grp["hours"].sum())
        longest = float(grp["hours"].max())
        gpu_hours = gpus * hours
        model = str(dcgm_model.get(node, "") or models.get(node, ""))
        cost = gpu_hours * views.model_price(model, settings.prices)
        pods = idle_pods.get(node, [])
        what = (
            "no GPU pod at work"
            if not pods
            else f"only idle GPU pods ({', '.join(pods[:3])}{' ...' if len(pods) > 3 else ''})"
        )
        message = (
            f"Node {node} ({gpu_word(gpus)}, {short_model(model)}) had {what} for {hours:.0f} h "
            f"of the window, {longest:.0f} h in a row: {gpu_hours:,.0f} GPU-hours an autoscaler "
            "could have released."
        )
        rec = (
            f"Let the cluster autoscaler (or Karpenter) remove {node} when it has no GPU work: "
            + (f"stop the idle holders ({', '.join(pods[:3])}; see GPU001), " if pods else "")
            + "and clear what blocks scale-down (the cluster-autoscaler.kubernetes.io/"
            "scale-down-disabled annotation, pods without a controller or with local storage, "
            "strict PodDisruptionBudgets)."
        )
        out.append(
            Finding(
                code=CODE,
                severity=_severity(gpu_hours),
                resource=Resource("Node", "", node, node, gpus),
                message=message,
                impact=Impact(gpu_hours=gpu_hours, cost=cost),
                recommendation=rec,
                evidence={
                    "gpus": gpus,
                    "gpu_model": model,
                    "idle_hours": round(hours, 2),
                    "longest_idle_hours": round(longest, 2),
                    "idle_stretches": [
                        [_iso(float(a) - step), _iso(float(b)), round(float(n) * bucket_h, 2)]
                        for a, b, n in zip(grp["min"], grp["max"], grp["size"], strict=True)
                    ],
                    "idle_holders": pods,
                    "threshold_hours": cfg.warm_idle_hours,
                    "threshold_activity": cfg.idle_activity,
                },
            )
        )
    return out

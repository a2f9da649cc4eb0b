"""Truth that depends on the whole cluster's end state (GPU050, GPU051, GPU060): derived, once
every case and the background are placed, from the model with the checks' documented rules."""

from __future__ import annotations

import numpy as np

from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import PodSpec


def from_state(b: Builder) -> None:
    """Record the truth of GPU050 and GPU051 about pending pods, of GPU050's policy about node
    pools, and of GPU060 about idle nodes."""
    bound = [p for p in b.pods if p.alive and p.node and p.phase not in ("Pending", "Succeeded")]
    product = {n.name: n.product for n in b.nodes}
    _pending(b, bound)
    _pool_policy(b, bound, product)
    _idle_nodes(b)


def _pending(b: Builder, bound: list[PodSpec]) -> None:
    """GPU050 (a lower-priority pod holds GPUs it could use) and GPU051 (the pool's free GPUs
    would fit it, but no node's do) about pods pending for GPUs for at least 30 minutes. The
    pool: nodes of the product it is pinned to with enough GPUs and no `NoSchedule` or
    `NoExecute` taint it does not tolerate (the generator's tolerations name key and value)."""
    cap = {n.name: int(n.capacity.get("nvidia.com/gpu", "0")) for n in b.nodes}
    product = {n.name: n.product for n in b.nodes}
    taints = {
        n.name: [t for t in n.taints if t["effect"] in ("NoSchedule", "NoExecute")] for n in b.nodes
    }
    used: dict[str, int] = {}
    holders: dict[str, list[int]] = {}
    for p in bound:
        used[p.node] = used.get(p.node, 0) + p.gpus
        if p.gpus:
            prio = p.priority if p.priority_class else 0
            holders.setdefault(p.node, []).extend([prio] * p.gpus)
    free = {n: cap[n] - used.get(n, 0) for n in cap if cap[n] > 0}
    for p in b.pods:
        if not p.alive or p.phase != "Pending" or not p.gpus:
            continue
        if "nvidia.com/" not in p.pending_message and p.pending_message:
            continue
        created = p.created_h * 3600 + p.created_delta_s + 1
        if b.H * 3600 - created < 30 * 60:
            continue
        sel = p.node_selector.get("nvidia.com/gpu.product")
        tolerated = {(t["key"], t.get("value", "")) for t in p.tolerations}
        pool = [
            n
            for n in free
            if cap[n] >= p.gpus
            and (not sel or product[n] == sel)
            and all((t["key"], t["value"]) in tolerated for t in taints[n])
        ]
        if not pool or any(free[n] >= p.gpus for n in pool):
            continue
        prio = p.priority if p.priority_class else 0
        if any(free[n] + sum(1 for q in holders.get(n, []) if q < prio) >= p.gpus for n in pool):
            b.plant("GPU050", p)
        else:
            b.plant("GPU050", p, "no lower-priority pod holds GPUs it could use")
        if p.gpus >= 2 and sum(free[n] for n in pool) >= p.gpus:
            b.plant("GPU051", p)
        elif p.gpus >= 2:
            b.plant("GPU051", p, "the pool has fewer free GPUs than it needs")


def _pool_policy(b: Builder, bound: list[PodSpec], product: dict[str, str]) -> None:
    """GPU050's policy: pools where serving and batch GPU pods share nodes, some unclassed."""
    pools: dict[str, dict[str, bool]] = {}
    for p in bound:
        if not (p.gpus or p.mig) or p.phase != "Running":
            continue
        kind = "Deployment" if p.owner_kind == "ReplicaSet" else p.owner_kind
        if "notebook-name" in p.labels:
            kind = "Notebook"
        f = pools.setdefault(product[p.node], {"serving": False, "batch": False, "bare": False})
        f["serving"] |= kind in ("Deployment", "StatefulSet", "LeaderWorkerSet")
        f["batch"] |= kind in ("Job", "CronJob", "PyTorchJob", "MPIJob", "JobSet")
        f["bare"] |= not p.priority_class
    for pool_name, f in sorted(pools.items()):
        if f["serving"] and f["batch"] and f["bare"]:
            b.plant_name("GPU050", "NodePool", "", pool_name)
        else:
            b.plant_name("GPU050", "NodePool", "", pool_name, "serving and batch do not share it")


def _idle_nodes(b: Builder) -> None:
    """GPU060: nodes with a 24-hour run of hours where no held GPU reached 5 % activity (those
    not planted already)."""
    idle = {n.name: np.ones(b.H, dtype=bool) for n in b.nodes if n.exporter}
    for h in b.holdings:
        if h.pod is not None and h.slot.node.name in idle:
            idle[h.slot.node.name][h.h0 : h.h1] &= h.act < 0.05
    planted = {e["name"] for e in b.truth["planted"].get("GPU060", [])}
    for name, flags in idle.items():
        run = best = 0
        for f in flags:
            run = run + 1 if f else 0
            best = max(best, run)
        if best >= 24 and name not in planted:
            b.plant_name("GPU060", "Node", "", name)

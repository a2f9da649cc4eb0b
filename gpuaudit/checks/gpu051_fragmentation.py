"""GPU051 fragmentation: multi-GPU pods wait although enough GPUs are free, scattered over nodes.

What it finds
    Pods asking for several GPUs that are unschedulable for lack of GPUs while the nodes that
    could run them have, together, enough free GPUs, one or two per node. It shows how the
    free GPUs are spread and which pods stand in the way of putting them together.

Why it matters
    A pod's GPUs must all be on one node. Free GPUs scattered across nodes are stranded
    capacity: they cost as much as busy ones, and the large jobs that could use them wait.

How it decides
    A pod in phase Pending, PodScheduled False with reason Unschedulable and a scheduler
    message naming an `nvidia.com/` resource, for at least `checks.pending_min_minutes`
    (default 30), asking for N >= 2 whole GPUs. Its pool: nodes not cordoned, with at least N
    allocatable `nvidia.com/gpu`, of a product it is not pinned away from. Free GPUs per node:
    allocatable minus the requests of pods bound to it. It is fragmentation when no node has N
    free but the pool has N or more in all. The pods that block consolidation: on each node,
    the fewest GPUs of running GPU pods (smallest first) whose moving would leave N free there,
    where the free GPUs of the other nodes can take them; the node needing the fewest moved
    is named.
    Impact: N x the hours the pod has waited, priced per GPU product. Severity: high from 4
    hours of waiting, medium below.

What to do
    Move the blocking pods (or let the descheduler's `HighNodeUtilization` plugin or Karpenter
    consolidation do it), and pack small GPU pods tightly from the start: the scheduler's
    `MostAllocated` scoring strategy for `nvidia.com/gpu` (NodeResourcesFit) fills nodes
    before opening new ones.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from gpuaudit.checks.base import WAITING, gpu_word, pack
from gpuaudit.findings import Finding, Impact, Resource
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.derived import fits_products

CODE = "GPU051"
TITLE = "GPU fragmentation"
REQUIRES = (Capability.KUBERNETES_PODS, Capability.KUBERNETES_NODES)


@dataclass(frozen=True)
class Thresholds:
    pending_min_minutes: float = 30.0
    """Minutes a pod must have been unschedulable for lack of GPUs."""


def _counts(n: float) -> str:
    return f"{n:g}"


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    inv = views.inv
    waiting = views.waiting_for_gpus(cfg.pending_min_minutes)
    nodes = views.gpu_nodes
    if waiting.empty or nodes.empty:
        return []
    waiting = waiting[waiting[C.GPU_REQUEST] >= 2]
    pods = inv.pods
    running = pods[(pods[C.PHASE] == "Running") & (pods[C.NODE] != "") & (pods[C.GPU_REQUEST] > 0)]
    holders: dict[str, list[tuple[float, str]]] = {}
    # Columns are read as lists: iterating a string column value by value is slow.
    cols = [C.NODE, C.GPU_REQUEST, C.NAMESPACE, C.POD]
    for node, request, ns, pod in zip(*(running[c].tolist() for c in cols), strict=True):
        holders.setdefault(str(node), []).append((float(request), f"{ns}/{pod}"))
    allocatable = nodes[C.ALLOCATABLE_GPU].to_numpy()
    node_names = [str(n) for n in nodes[C.NODE].tolist()]
    node_products = nodes[C.PRODUCT].tolist()
    node_free = [float(f) for f in nodes[C.FREE].tolist()]
    fits: dict[str, np.ndarray] = {}  # by pinned products: waiting pods share a few
    out: list[Finding] = []
    for w in waiting.itertuples(index=False):
        need = float(getattr(w, C.GPU_REQUEST))
        sel = str(getattr(w, C.SELECTOR_PRODUCTS) or "")
        if sel not in fits:
            fits[sel] = np.array([fits_products(sel, str(p)) for p in node_products], dtype=bool)
        fit = np.flatnonzero((allocatable >= need) & fits[sel]).tolist()
        if not fit:
            continue
        free = {node_names[i]: node_free[i] for i in fit}
        total, most = sum(free.values()), max(free.values())
        if most >= need or total < need:
            continue
        best: tuple[float, str, list[tuple[float, str]]] | None = None
        for node, here in sorted(free.items()):
            moved: list[tuple[float, str]] = []
            for h in sorted(holders.get(node, [])):
                if here + sum(m[0] for m in moved) >= need:
                    break
                moved.append(h)
            if here + sum(m[0] for m in moved) < need:
                continue
            elsewhere = {n: f for n, f in free.items() if n != node}
            if pack([m[0] for m in moved], elsewhere) is None:
                continue
            cost_moved = sum(m[0] for m in moved)
            if best is None or (cost_moved, node) < (best[0], best[1]):
                best = (cost_moved, node, moved)
        ns, name = str(getattr(w, C.NAMESPACE)), str(getattr(w, C.POD))
        waited = min(float(getattr(w, C.WAITED)), inv.window_hours)
        products = sorted({str(node_products[i]) for i in fit})
        product = products[0] if products else ""
        gpu_hours = need * waited
        cost = gpu_hours * views.price(product)
        histogram = Counter(int(f) for f in free.values())
        spread = ", ".join(
            f"{k} free on {v} node{'s' if v > 1 else ''}"
            for k, v in sorted(histogram.items(), reverse=True)
            if k > 0
        )
        fix = ""
        if best is not None:
            moved_txt = " and ".join(f"{m[1]} ({gpu_word(m[0])})" for m in best[2])
            fix = f"; moving {moved_txt} off {best[1]} would make room"
        message = (
            f"Pod {ns}/{name} has waited {waited:.1f} h for {gpu_word(need)} although the "
            f"{len(free)} nodes that could run it have {_counts(total)} free GPUs, at most "
            f"{_counts(most)} per node ({spread}){fix}."
        )
        rec = (
            (
                f"Move {', '.join(m[1] for m in best[2])} to other nodes (or let the "
                "descheduler or Karpenter consolidation do it)"
                if best is not None
                else "Consolidate the small GPU pods of this pool onto fewer nodes"
            )
            + f" so {ns}/{name} fits, and score nodes MostAllocated for nvidia.com/gpu so small "
            "pods fill nodes before spreading."
        )
        out.append(
            Finding(
                code=CODE,
                severity=WAITING(waited),
                resource=Resource("Pod", ns, name, "", need),
                message=message,
                impact=Impact(gpu_hours=gpu_hours, cost=cost),
                recommendation=rec,
                targets=(best[1],) if best else (),
                evidence={
                    "waited_hours": round(waited, 2),
                    "gpus_requested": need,
                    "pool_free_gpus": total,
                    "most_free_on_one_node": most,
                    "free_gpu_histogram": {str(k): v for k, v in sorted(histogram.items())},
                    "free_gpus_by_node": {n: f for n, f in sorted(free.items()) if f > 0},
                    "consolidate_on": best[1] if best else "",
                    "blocking_pods": [{"pod": m[1], "gpus": m[0]} for m in best[2]] if best else [],
                    "pinned_products": sel.split(",") if sel else [],
                    "threshold_minutes": cfg.pending_min_minutes,
                },
            )
        )
    return out

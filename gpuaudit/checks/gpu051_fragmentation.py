"""GPU051 fragmentation: multi-GPU pods wait although enough GPUs are free, scattered over nodes.

What it finds
    Pods asking for several GPUs that are unschedulable for lack of GPUs while the nodes that
    could run them have, together, enough free GPUs, one or two per node. It shows how the
    free GPUs are spread, which nodes with room a taint or a cordon keeps it off, and which
    pods stand in the way of putting the free GPUs together.

Why it matters
    A pod's GPUs must all be on one node. Free GPUs scattered across nodes are stranded
    capacity: they cost as much as busy ones, and the large jobs that could use them wait.

How it decides
    A pod in phase Pending, PodScheduled False with reason Unschedulable and a scheduler
    message naming an `nvidia.com/` resource, for at least `checks.pending_min_minutes`
    (default 30), asking for N >= 2 whole GPUs. The nodes that could run it are those the
    scheduler's filters accept, as the feasibility model decides them
    (the scheduler's own rules): no `NoSchedule` or
    `NoExecute` taint it does not tolerate (`PreferNoSchedule` does not count), not cordoned
    unless it tolerates that, its `nodeSelector` and required node affinity matched (terms
    ORed, expressions ANDed; `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`), and at
    least the allocatable it asks for of every extended resource. Free GPUs per node:
    allocatable `nvidia.com/gpu` minus the requests of the pods bound to it that have not
    ended (bound but not yet running ones count, `Succeeded` and `Failed` ones do not), never
    below 0 nor above allocatable, over the node's replicas where it advertises each GPU
    several times (`nvidia.com/gpu.replicas` of time-slicing or MPS, HAMi's split count).
    It is fragmentation when no such node has N free but they have N or more in all. Nodes
    with N free that only a taint the pod does not tolerate, or a cordon, keeps it off are
    named with the reason, as the pod's own scheduling message
    reports them ("node(s) had untolerated taint {key: value}"). The pods that block
    consolidation: on each node, the fewest GPUs of running GPU pods (smallest first) whose
    moving would leave N free there, where each of them may run (by the same model) on
    another node of the same GPU product with the free GPUs to take it; the node needing the
    fewest moved is named.
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

from gpuaudit.checks.base import WAITING, gpu_word, pack_each
from gpuaudit.checks.contract import minutes
from gpuaudit.checks.findings import Finding, Impact, Resource
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.feasibility import Placement, refusal_summary

CODE = "GPU051"
TITLE = "GPU fragmentation"
REQUIRES = (Capability.KUBERNETES_PODS, Capability.KUBERNETES_NODES)
VIEWS = ()
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


@dataclass(frozen=True)
class Thresholds:
    pending_min_minutes: float = minutes(30.0)
    """Minutes a pod must have been unschedulable for lack of GPUs."""


Holder = tuple[float, str, tuple[str, str]]
"""(GPUs, `namespace/pod`, (namespace, pod)) of a running GPU pod."""
Plan = tuple[float, str, list[Holder]]
"""(GPUs moved, the node they leave, the pods moved)."""


def _counts(n: float) -> str:
    return f"{n:g}"


def _holders(views: Views) -> dict[str, list[Holder]]:
    """Running pods holding GPUs, by node: on a node whose GPUs are shared, its GPUs' worth
    (its request over the node's replicas, as `Placement.free_gpus` counts)."""
    pods = views.inv.pods
    running = pods[(pods[C.PHASE] == "Running") & (pods[C.NODE] != "") & (pods[C.GPU_REQUEST] > 0)]
    out: dict[str, list[Holder]] = {}
    nodes = views.placement.nodes
    # Columns are read as lists: iterating a string column value by value is slow.
    cols = [C.NODE, C.GPU_REQUEST, C.NAMESPACE, C.POD]
    for node, request, ns, pod in zip(*(running[c].tolist() for c in cols), strict=True):
        facts = nodes.get(str(node))
        gpus = float(request) / max(1, facts.replicas if facts is not None else 1)
        out.setdefault(str(node), []).append((gpus, f"{ns}/{pod}", (str(ns), str(pod))))
    return out


def _consolidation(
    pl: Placement, fit: list[str], need: float, holders: dict[str, list[Holder]]
) -> Plan | None:
    """The node needing the fewest GPUs moved to leave `need` free, where every pod moved may
    run on another node that has the room."""
    free_all = {n: pl.free_gpus(n) for n in pl.nodes}
    allowed: dict[tuple[str, str], set[str]] = {}
    best: Plan | None = None

    def product(n: str) -> str:
        return pl.nodes[n].labels.get("nvidia.com/gpu.product", "")

    for node in fit:
        here = free_all[node]
        moved: list[Holder] = []
        for h in sorted(holders.get(node, [])):
            if here + sum(m[0] for m in moved) >= need:
                break
            moved.append(h)
        if here + sum(m[0] for m in moved) < need:
            continue
        for m in moved:
            if m[2] not in allowed:
                allowed[m[2]] = set(pl.candidates(m[2])[0])
        # Moved to nodes of the same GPU product: another product is another price.
        elsewhere = {n: f for n, f in free_all.items() if n != node and product(n) == product(node)}
        if not pack_each([(m[0], allowed[m[2]] - {node}) for m in moved], elsewhere):
            continue
        cost_moved = sum(m[0] for m in moved)
        if best is None or (cost_moved, node) < (best[0], best[1]):
            best = (cost_moved, node, moved)
    return best


def _refused_with_room(
    pl: Placement, pod: tuple[str, str], refused: dict[str, str], need: float
) -> dict[str, str]:
    """Nodes with `need` GPUs free that only a taint or a cordon keeps the pod off, with the
    reason."""
    return {
        n: why
        for n, why in sorted(refused.items())
        if pl.free_gpus(n) >= need and pl.kept_off(pod, n)
    }


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    waiting = views.waiting_for_gpus(cfg.pending_min_minutes)
    pl = views.placement
    if waiting.empty or not pl.nodes:
        return []
    waiting = waiting[waiting[C.GPU_REQUEST] >= 2]
    holders = _holders(views)
    out: list[Finding] = []
    # Pods of one spec have one list of candidates: the free GPUs of its nodes are read once
    # per distinct list, not once per waiting pod.
    frees: dict[tuple[str, ...], tuple[dict[str, float], float, float]] = {}
    for w in waiting.itertuples(index=False):
        need = float(getattr(w, C.GPU_REQUEST))
        ns, name = str(getattr(w, C.NAMESPACE)), str(getattr(w, C.POD))
        fit, refused = pl.candidates((ns, name))
        if not fit:
            continue
        nodes = tuple(fit)
        if nodes not in frees:
            got = {n: pl.free_gpus(n) for n in fit}
            frees[nodes] = (got, sum(got.values()), max(got.values()))
        free, total, most = frees[nodes]
        if most >= need or total < need:
            continue
        best = _consolidation(pl, fit, need, holders)
        out.append(_finding(views, cfg, w, pl, free, refused, best))
    return out


def _finding(
    views: Views,
    cfg: Thresholds,
    w: object,
    pl: Placement,
    free: dict[str, float],
    refused: dict[str, str],
    best: Plan | None,
) -> Finding:
    need = float(getattr(w, C.GPU_REQUEST))
    ns, name = str(getattr(w, C.NAMESPACE)), str(getattr(w, C.POD))
    sel = str(getattr(w, C.SELECTOR_PRODUCTS) or "")
    waited = min(float(getattr(w, C.WAITED)), views.inv.window_hours)
    total, most = sum(free.values()), max(free.values())
    products = sorted({pl.nodes[n].labels.get("nvidia.com/gpu.product", "") for n in free})
    product = products[0] if products else ""
    gpu_hours = need * waited
    cost = gpu_hours * views.price(product)
    histogram = Counter(int(f) for f in free.values())
    spread = ", ".join(
        f"{k} free on {v} node{'s' if v > 1 else ''}"
        for k, v in sorted(histogram.items(), reverse=True)
        if k > 0
    )
    roomy = _refused_with_room(pl, (ns, name), refused, need)
    shown = list(roomy.items())[:2]
    refused_txt = ""
    if shown:
        parts = [
            f"{n} has {_counts(pl.free_gpus(n))} free but is refused ({why})" for n, why in shown
        ]
        more = f" and {len(roomy) - len(shown)} more" if len(roomy) > len(shown) else ""
        refused_txt = f"; {'; '.join(parts)}{more}"
    fix = ""
    if best is not None:
        moved_txt = " and ".join(f"{m[1]} ({gpu_word(m[0])})" for m in best[2])
        fix = f"; moving {moved_txt} off {best[1]} would make room"
    message = (
        f"Pod {ns}/{name} has waited {waited:.1f} h for {gpu_word(need)} although the "
        f"{len(free)} nodes that could run it have {_counts(total)} free GPUs, at most "
        f"{_counts(most)} per node ({spread}){refused_txt}{fix}."
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
    return Finding(
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
            "refused_nodes": refusal_summary(refused),
            "refused_with_room": {
                n: {"free": pl.free_gpus(n), "why": why} for n, why in list(roomy.items())[:10]
            },
            "scheduler_message": str(getattr(w, C.SCHED_MESSAGE) or "")[:300],
            "pinned_products": sel.split(",") if sel else [],
            "threshold_minutes": cfg.pending_min_minutes,
        },
    )

"""GPU050 priority inversion: important GPU pods wait while less important ones hold the GPUs.

What it finds
    - GPU pods unschedulable for lack of GPUs for 30 minutes or more while pods of lower
      priority hold GPUs of the kind they need, and preemption did not free them (or cannot:
      the waiting pod's `preemptionPolicy` is Never). It names the waiting pod and the holders.
    - Node pools where long-running GPU workloads (Deployments, StatefulSets) and
      run-to-completion ones (Jobs, training jobs) share the GPUs while some of them have no
      PriorityClass, so the scheduler cannot let the one preempt the other.

Why it matters
    Priorities are how Kubernetes decides who gets a scarce GPU. When the order is missing or
    not enforced, a production model server waits behind a batch job or a notebook, or a
    deadline-bound training run waits behind experiments.

How it decides
    - Inversion: a pod in phase Pending whose PodScheduled condition is False with reason
      Unschedulable, the scheduler's message naming an `nvidia.com/` resource, for at least
      `checks.pending_min_minutes` (default 30), asking for N whole GPUs. Nodes that can hold
      it: those the scheduler's filters accept, as the feasibility model decides them
      (the scheduler's filters: taints it does not tolerate with effect `NoSchedule`
      or `NoExecute`, cordoned nodes, its `nodeSelector` and required node affinity, at least
      N allocatable `nvidia.com/gpu` and the allocatable of any other extended resource it
      asks for). When one of them has N free GPUs (allocatable minus the requests of the pods
      bound to it that have not ended, bound but not yet running ones included) the wait is
      not for GPUs and nothing is reported. Otherwise, when on one of them the free GPUs plus
      those of running pods with a lower priority (missing priority counts as 0) reach N, it
      is an inversion; the node needing the fewest GPUs evicted is named, with the
      lowest-priority holders that would free them.
      Impact: N x the hours it has waited, priced per GPU product. Severity: high from 4 hours
      of waiting, medium below.
    - Policy: in a node pool (a node-pool label, else the GPU product), running GPU pods of
      long-running kinds (Deployment, StatefulSet, LeaderWorkerSet) and of run-to-completion
      kinds (Job, CronJob, PyTorchJob, MPIJob, JobSet, RayCluster ...) both run, and some GPU
      pods there have no PriorityClass. Impact: none counted (a risk, not waste: listed with
      the risks); the GPU pods without a class are in the evidence. Severity: low.
    Only whole-GPU requests (`nvidia.com/gpu`) are judged; MIG requests are not.

What to do
    Give every GPU workload a PriorityClass (serving above training above batch and
    notebooks); let important pods preempt (`preemptionPolicy: PreemptLowerPriority`), check
    that PodDisruptionBudgets of the holders allow it, or run the pool through a queue that
    preempts by priority (Kueue cohorts with `withinClusterQueue: LowerPriority`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpuaudit.checks.base import WAITING, gpu_word
from gpuaudit.checks.contract import minutes
from gpuaudit.checks.findings import Category, Finding, Impact, Resource, Severity
from gpuaudit.inventory import Capability, Inventory, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.feasibility import refusal_summary

CODE = "GPU050"
TITLE = "Priority inversion"
REQUIRES = (Capability.KUBERNETES_PODS, Capability.KUBERNETES_NODES)
VIEWS = ()
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


@dataclass(frozen=True)
class Thresholds:
    pending_min_minutes: float = minutes(30.0)
    """Minutes a pod must have been unschedulable for lack of GPUs."""


SERVING_KINDS = frozenset({"Deployment", "StatefulSet", "LeaderWorkerSet", "InferenceService"})
BATCH_KINDS = frozenset(
    {"Job", "CronJob", "PyTorchJob", "MPIJob", "TFJob", "JobSet", "RayJob", "RayCluster"}
)


def _prio(v: Any) -> int:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return 0
    return 0 if f != f else int(f)


def _victims(
    holders: list[tuple[int, float, str]], free: float, need: float
) -> tuple[float, list[tuple[int, float, str]]] | None:
    """Lowest-priority holders first until free plus freed reaches `need`: (GPUs evicted,
    victims), or None when all of them are not enough."""
    freed, chosen = 0.0, []
    for h in sorted(holders, key=lambda x: (x[0], -x[1], x[2])):
        if free + freed >= need:
            break
        chosen.append(h)
        freed += h[1]
    return (freed, chosen) if free + freed >= need else None


def _inversions(views: Views, cfg: Thresholds) -> list[Finding]:
    inv = views.inv
    waiting = views.waiting_for_gpus(cfg.pending_min_minutes)
    pl = views.placement
    if waiting.empty or not pl.nodes:
        return []
    pods = inv.pods
    running = pods[(pods[C.PHASE] == "Running") & (pods[C.NODE] != "") & (pods[C.GPU_REQUEST] > 0)]
    running = running[~_kai(running, views.kai_reservations)]
    by_node: dict[str, list[tuple[int, float, str]]] = {}
    # Columns are read as lists: iterating a string column value by value is slow.
    cols = [C.NODE, C.PRIORITY, C.GPU_REQUEST, C.NAMESPACE, C.POD]
    for node, priority, request, ns, pod in zip(*(running[c].tolist() for c in cols), strict=True):
        by_node.setdefault(str(node), []).append((_prio(priority), float(request), f"{ns}/{pod}"))
    out: list[Finding] = []
    for w in waiting.itertuples(index=False):
        need = float(getattr(w, C.GPU_REQUEST))
        prio = _prio(getattr(w, C.PRIORITY))
        sel = str(getattr(w, C.SELECTOR_PRODUCTS) or "")
        fit, refused = pl.candidates((str(getattr(w, C.NAMESPACE)), str(getattr(w, C.POD))))
        if not fit or any(pl.free(n) >= need for n in fit):
            continue
        best: tuple[float, str, str, float, list[tuple[int, float, str]]] | None = None
        for node in fit:
            lower = [h for h in by_node.get(node, []) if h[0] < prio]
            plan = _victims(lower, pl.free(node), need)
            if plan is not None and (best is None or (plan[0], node) < (best[0], best[1])):
                product = pl.nodes[node].labels.get("nvidia.com/gpu.product", "")
                best = (plan[0], node, product, pl.free(node), plan[1])
        if best is None:
            continue
        evicted, node, product, free, victims = best
        ns, name = str(getattr(w, C.NAMESPACE)), str(getattr(w, C.POD))
        waited = min(float(getattr(w, C.WAITED)), inv.window_hours)
        gpu_hours = need * waited
        cost = gpu_hours * views.price(product)
        policy = str(getattr(w, C.PREEMPTION_POLICY) or "")
        pclass = str(getattr(w, C.PRIORITY_CLASS) or "")
        why = (
            "its preemptionPolicy is Never, so it cannot preempt them"
            if policy == "Never"
            else "preemption did not free them"
        )
        names = ", ".join(f"{v[2]} (priority {v[0]}, {gpu_word(v[1])})" for v in victims)
        message = (
            f"Pod {ns}/{name} (priority {prio}{', class ' + pclass if pclass else ''}) has "
            f"waited {waited:.1f} h for {gpu_word(need)} while lower-priority pods hold the "
            f"{product} GPUs it needs on {node}: {names}; {why}."
        )
        rec = (
            f"Let {ns}/{name} preempt: give its PriorityClass preemptionPolicy PreemptLowerPriority"
            if policy == "Never"
            else f"Find what stops {ns}/{name} from preempting (PodDisruptionBudgets of the "
            "holders, a gang scheduler that ignores priorities)"
        ) + (
            f", or move the lower-priority work off {node}; give every GPU workload a "
            "PriorityClass so the order is explicit."
        )
        out.append(
            Finding(
                code=CODE,
                severity=WAITING(waited),
                resource=Resource("Pod", ns, name, "", need),
                message=message,
                impact=Impact(gpu_hours=gpu_hours, cost=cost),
                recommendation=rec,
                targets=(node,) if node else (),
                evidence={
                    "waited_hours": round(waited, 2),
                    "gpus_requested": need,
                    "priority": prio,
                    "priority_class": pclass,
                    "preemption_policy": policy or "PreemptLowerPriority",
                    "node": node,
                    "node_free_gpus": free,
                    "lower_priority_holders": [
                        {"pod": v[2], "priority": v[0], "gpus": v[1]} for v in victims
                    ],
                    "gpus_to_evict": evicted,
                    "pinned_products": sel.split(",") if sel else [],
                    "refused_nodes": refusal_summary(refused),
                    "threshold_minutes": cfg.pending_min_minutes,
                },
            )
        )
    return out


def _kai(pods: Any, kai: frozenset[tuple[str, str]]) -> npt.NDArray[np.bool_]:
    """Which of `pods` are KAI Scheduler reservation pods (`kai`): they hold GPUs for the
    fraction pods that share them, with KAI's own priority, and nobody sets their
    PriorityClass."""
    keys = zip(pods[C.NAMESPACE].tolist(), pods[C.POD].tolist(), strict=True)
    return np.array([k in kai for k in keys] if kai else [False] * len(pods), dtype=bool)


def _pools(inv: Inventory, kai: frozenset[tuple[str, str]]) -> list[Finding]:
    pods, nodes = inv.pods, inv.nodes
    if pods.empty or nodes.empty:
        return []
    pool_of = dict(zip(nodes[C.NODE].tolist(), nodes[C.POOL].tolist(), strict=True))
    # Only the columns read below: each pool's group copies what it holds.
    cols = [C.NODE, C.OWNER_KIND, C.NAMESPACE, C.OWNER_NAME, C.POD, C.PRIORITY_CLASS]
    gpu = pods.loc[
        (pods[C.PHASE] == "Running")
        & (pods[C.NODE] != "")
        & ((pods[C.GPU_REQUEST] > 0) | (pods[C.MIG_REQUEST] != "")),
        cols,
    ].copy()
    gpu = gpu[~_kai(gpu, kai)]
    gpu["_pool"] = gpu[C.NODE].map(pool_of).fillna("")
    out: list[Finding] = []
    for pool, grp in gpu[gpu["_pool"] != ""].groupby("_pool", sort=True):
        kinds = grp[C.OWNER_KIND].astype(str)
        serving = grp[kinds.isin(SERVING_KINDS)]
        batch = grp[kinds.isin(BATCH_KINDS)]
        bare = grp[grp[C.PRIORITY_CLASS].fillna("") == ""]
        if serving.empty or batch.empty or bare.empty:
            continue

        def workloads(df: Any) -> list[str]:
            return sorted(
                {
                    f"{k} {ns}/{o or p}"
                    for k, ns, o, p in zip(
                        *(df[c].tolist() for c in (C.OWNER_KIND, C.NAMESPACE, C.OWNER_NAME, C.POD)),
                        strict=True,
                    )
                }
            )

        unclassed = sorted(
            f"{ns}/{p}"
            for ns, p in zip(bare[C.NAMESPACE].tolist(), bare[C.POD].tolist(), strict=True)
        )
        sv, bt = workloads(serving), workloads(batch)
        shown = ", ".join(unclassed[:4]) + (" ..." if len(unclassed) > 4 else "")
        verb = "has" if len(unclassed) == 1 else "have"
        message = (
            f"Node pool {pool} runs long-running GPU workloads ({', '.join(sv[:2])}"
            f"{' ...' if len(sv) > 2 else ''}) and run-to-completion ones ({', '.join(bt[:2])}"
            f"{' ...' if len(bt) > 2 else ''}), yet {len(unclassed)} of its {len(grp)} GPU pods "
            f"{verb} no PriorityClass ({shown}): the scheduler cannot tell which may preempt which."
        )
        out.append(
            Finding(
                code=CODE,
                severity=Severity.LOW,
                resource=Resource("NodePool", "", str(pool), "", 0.0),
                message=message,
                impact=Impact(gpu_hours=0.0, cost=0.0),
                category=Category.RISK,
                recommendation=(
                    f"Give every GPU workload in {pool} a PriorityClass by what it does, not by "
                    "its kind (for example user-facing serving 10000, training 1000, batch 100, "
                    "notebooks 0), through its pod template or a Kueue WorkloadPriorityClass."
                ),
                evidence={
                    "pods_without_priority_class": unclassed,
                    "gpu_pods": len(grp),
                    "serving_workloads": sv,
                    "batch_workloads": bt,
                },
            )
        )
    return out


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    return _inversions(views, cfg) + _pools(views.inv, views.kai_reservations)

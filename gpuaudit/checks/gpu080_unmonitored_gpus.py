"""GPU080 unmonitored GPUs: GPUs pods hold that no DCGM series describes.

What it finds
    Pods that held GPUs in the window (by the Kubernetes API's allocations) with no DCGM series
    naming them: no dcgm-exporter on the node, the exporter's pod mapping off (no kubelet
    pod-resources socket), a renamed resource it does not map, or a scrape that fails.

Why it matters
    An audit that silently skips these GPUs reads as healthy. They are GPU-hours nobody can
    vouch for, and often the ones where waste hides longest.

How it decides
    The attribution ledger's unattributed side: pods with a node in phase Running, or
    Succeeded or Failed with a known end (their containers' `finishedAt`), requesting
    `nvidia.com/gpu`, `nvidia.com/gpu.shared` or `nvidia.com/mig-*` or holding devices of
    NVIDIA's DRA driver through ResourceClaims, whose namespace/name appears on no DCGM series in
    the window (a series joined to a pod through its claim names that pod). Their GPU-hours
    count over the time they ran in the window, from the later of the pod's start and the
    window's start to the earlier of its end and the window's end (a MIG slice counts its share
    of a GPU, a shared replica its share over the node's replicas), less the buckets in which
    the Kubernetes-side join gave the pod its devices: per bucket of the grid, a node's devices
    of a kind (whole GPUs, or a MIG profile) whose series name no pod go to the only pod that
    ran in that bucket requesting that kind, when it requests as many as there are (the
    ledger's `kubernetes_join`); in buckets where two or more such pods ran, none of them gets
    them, and those hours are reported here. Holdings shorter than
    `checks.unmonitored_min_hours` (default 1 h; a pod's GPU-hours over its GPUs) are left
    out. A pod HAMi granted shares of GPUs without DCGM series holds its shares of them (the
    larger of its cores and its memory over the GPU's, `hami.io/node-nvidia-register`), not
    its `nvidia.com/gpu` over the node's split count. The finding says why: no exporter, no
    pod label, MIG instances without labels or profiling, a shared GPU labelled with one pod
    only, or GPUs HAMi shares without DCGM series. When a node has such pods and no
    DCGM series at all, one finding names the node (no exporter there); otherwise one finding
    per pod.
    Impact: the GPU-hours that could not be audited, priced per GPU model (from the node's
    `nvidia.com/gpu.product` label): GPU-hours nobody can vouch for, not waste, so reports list
    it with the risks, apart from the waste. Severity: medium.

What to do
    Run dcgm-exporter on every GPU node (the GPU Operator's DaemonSet, with node selectors
    that match), mount the kubelet pod-resources socket and enable its Kubernetes mapping,
    and list custom resource names in `NVIDIA_RESOURCE_NAMES`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from gpuaudit.checks.base import gpu_word
from gpuaudit.checks.contract import hours
from gpuaudit.checks.findings import Category, Finding, Impact, Resource, Severity
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.attribution import Reason

CODE = "GPU080"
TITLE = "Unmonitored GPUs"
REQUIRES = (Capability.KUBERNETES_PODS,)
VIEWS = ()
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


@dataclass(frozen=True)
class Thresholds:
    unmonitored_min_hours: float = hours(1.0)
    """Shortest GPU holding without DCGM data worth reporting."""


def _pods(n: int) -> str:
    return f"{n} pod" if n == 1 else f"{n} pods"


_WHY = {
    Reason.NO_POD_LABEL.value: "no DCGM series names it",
    Reason.NO_LIMIT.value: "no DCGM series names it",
    Reason.PROFILING_ABSENT.value: (
        "its MIG instances have neither pod labels nor profiling series (GPU_UTIL reads 0 on MIG)"
    ),
    Reason.SHARED_WITHOUT_VIRTUAL_GPUS.value: (
        "it holds replicas of a shared GPU and dcgm-exporter labels each shared GPU with one "
        "pod only (no --kubernetes-virtual-gpus)"
    ),
}
"""Why a pod on a node with DCGM series is unaudited, by ledger reason."""


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    un = views.unattributed
    if un.empty:
        return []
    per_node: dict[str, list[tuple[str, str, float, float, str, list[str]]]] = defaultdict(list)
    no_exporter: set[str] = set()
    by_pod: dict[tuple[str, str, str], list[dict[Any, Any]]] = defaultdict(list)
    for row in un.to_dict("records"):
        by_pod[(str(row[C.NODE]), str(row[C.NAMESPACE]), str(row[C.POD]))].append(row)
    for (node, ns, pod), rows in sorted(by_pod.items()):
        gpus = sum(float(r["gpus"]) for r in rows)
        # Its GPUs' hours may differ (the Kubernetes-side join gave it some devices in some
        # buckets): their GPU-hours over its GPUs.
        hours = sum(float(r[C.GPU_HOURS]) for r in rows) / gpus if gpus > 0 else 0.0
        if hours < cfg.unmonitored_min_hours:
            continue
        reasons = sorted({str(r["reason"]) for r in rows})
        if Reason.NO_EXPORTER.value in reasons:
            no_exporter.add(node)
        per_node[node].append((ns, pod, gpus, hours, str(rows[0][C.MODEL]), reasons))
    out: list[Finding] = []
    for node, items in sorted(per_node.items()):
        model = items[0][4]
        price = views.price(model)
        if node in no_exporter:
            out.append(_node_finding(node, items, price))
            continue
        hami = views.inv.hami.unmonitored
        out.extend(_pod_finding(node, item, price, item[:2] in hami) for item in items)
    return out


def _node_finding(
    node: str, items: list[tuple[str, str, float, float, str, list[str]]], price: float
) -> Finding:
    gpu_hours = sum(g * h for _, _, g, h, _, _ in items)
    gpus = sum(g for _, _, g, _, _, _ in items)
    names = ", ".join(f"{ns}/{p}" for ns, p, *_ in items[:5])
    more = f" and {len(items) - 5} more" if len(items) > 5 else ""
    return Finding(
        code=CODE,
        severity=Severity.MEDIUM,
        resource=Resource("Node", "", node, node, gpus),
        message=(
            f"Node {node} has {gpu_word(gpus)} held by {_pods(len(items))} "
            f"({names}{more}) but no DCGM series at all: {gpu_hours:,.0f} "
            "GPU-hours could not be audited."
        ),
        impact=Impact(gpu_hours=gpu_hours, cost=gpu_hours * price),
        category=Category.RISK,
        pods=tuple(f"{ns}/{p}" for ns, p, *_ in items),
        recommendation=(
            f"Run dcgm-exporter on {node} (check the GPU Operator's "
            "DaemonSet node selectors and tolerations) and that "
            "Prometheus scrapes it."
        ),
        evidence={
            "pods": [f"{ns}/{p}" for ns, p, *_ in items],
            "gpus": round(gpus, 4),
            "unaudited_gpu_hours": round(gpu_hours, 2),
            "gpu_product": items[0][4],
            "attribution": Reason.NO_EXPORTER.value,
        },
    )


def _pod_finding(
    node: str, item: tuple[str, str, float, float, str, list[str]], price: float, hami: bool
) -> Finding:
    ns, pod, gpus, hours, model, reasons = item
    gpu_hours = gpus * hours
    why = "; ".join(dict.fromkeys(_WHY.get(r, "no DCGM series names it") for r in reasons))
    if hami:
        why = "the GPUs HAMi granted it shares of have no DCGM series"
    shared = Reason.SHARED_WITHOUT_VIRTUAL_GPUS.value in reasons
    fix = (
        "Check that dcgm-exporter reports every GPU of the node and that Prometheus scrapes it "
        "(HAMi's GPUs are joined to their pods by UUID, not by pod labels)."
        if hami
        else "Set dcgm-exporter's --kubernetes-virtual-gpus (KUBERNETES_VIRTUAL_GPUS=true) so "
        "that every pod sharing a GPU gets its series."
        if shared
        else "Enable dcgm-exporter's Kubernetes pod mapping on this node "
        "(kubelet pod-resources socket mounted) and list custom GPU "
        "resource names in NVIDIA_RESOURCE_NAMES."
    )
    return Finding(
        code=CODE,
        severity=Severity.MEDIUM,
        resource=Resource("Pod", ns, pod, node, gpus),
        message=(
            f"Pod {ns}/{pod} holds {gpu_word(gpus)} on {node} but {why}: "
            f"{gpu_hours:,.0f} GPU-hours could not be audited."
        ),
        impact=Impact(gpu_hours=gpu_hours, cost=gpu_hours * price),
        category=Category.RISK,
        recommendation=fix,
        evidence={
            "gpus": round(gpus, 4),
            "unaudited_gpu_hours": round(gpu_hours, 2),
            "hours": round(hours, 2),
            "gpu_product": model,
            "attribution": ",".join(reasons),
        },
    )

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
    per pod. A KAI Scheduler reservation pod is no workload: the
    node's finding names the fraction pods of its GPU group on the node instead and says how
    many GPUs KAI reserved for GPU fractions, and on a node with series its hours are one
    finding about its GPU group (kind `GPUGroup`), naming the fraction pods.
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
from gpuaudit.inventory import Capability, Views, kai
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
    # A KAI reservation pod holds its GPU for fraction pods: they are named, never it.
    kai_held = kai.reserved_for(views.inv.pods) if per_node else {}
    for node, items in sorted(per_node.items()):
        model = items[0][4]
        price = views.price(model)
        if node in no_exporter:
            out.append(_node_finding(node, items, price, kai_held))
            continue
        hami = views.inv.hami.unmonitored
        for item in items:
            held = kai_held.get(item[:2])
            if held is not None:
                out.append(_group_finding(node, item, price, held))
            else:
                out.append(_pod_finding(node, item, price, item[:2] in hami))
    return out


def _risk(
    resource: Resource,
    message: str,
    unaudited: tuple[float, float],
    pods: tuple[str, ...],
    recommendation: str,
    evidence: dict[str, Any],
) -> Finding:
    """A finding of GPU-hours nobody can vouch for (`unaudited`: their count and price per
    GPU-hour) about `resource`, naming `pods`."""
    gpu_hours, price = unaudited
    return Finding(
        code=CODE,
        severity=Severity.MEDIUM,
        resource=resource,
        message=message,
        impact=Impact(gpu_hours=gpu_hours, cost=gpu_hours * price),
        category=Category.RISK,
        pods=pods,
        recommendation=recommendation,
        evidence=evidence,
    )


def _listed(names: tuple[str, ...] | list[str]) -> str:
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return ", ".join(names[:5]) + more


def _node_finding(
    node: str,
    items: list[tuple[str, str, float, float, str, list[str]]],
    price: float,
    kai_held: dict[tuple[str, str], tuple[str, tuple[str, ...]]],
) -> Finding:
    gpu_hours = sum(g * h for _, _, g, h, _, _ in items)
    gpus = sum(g for _, _, g, _, _, _ in items)
    # A KAI reservation pod's GPUs are held for its fraction pods: they are named instead.
    names: list[str] = []
    reserved = 0.0
    for ns, p, g, *_ in items:
        held = kai_held.get((ns, p))
        names += [f"{ns}/{p}"] if held is None else list(held[1])
        reserved += g if held is not None else 0.0
    names = list(dict.fromkeys(names))
    kai_note = (
        f"; {gpu_word(reserved)} of them reserved by KAI Scheduler for GPU fractions"
        if reserved and names
        else ""
    )
    held_by = (
        f"held by {_pods(len(names))} ({_listed(names)}{kai_note})"
        if names
        else "reserved by KAI Scheduler for GPU fractions (no fraction pod of them is listed)"
    )
    return _risk(
        Resource("Node", "", node, node, gpus),
        f"Node {node} has {gpu_word(gpus)} {held_by} but no DCGM series at all: "
        f"{gpu_hours:,.0f} GPU-hours could not be audited.",
        (gpu_hours, price),
        tuple(names),
        recommendation=(
            f"Run dcgm-exporter on {node} (check the GPU Operator's "
            "DaemonSet node selectors and tolerations) and that "
            "Prometheus scrapes it."
        ),
        evidence={
            "pods": names,
            "gpus": round(gpus, 4),
            **({"kai_reserved_gpus": round(reserved, 4)} if reserved else {}),
            "unaudited_gpu_hours": round(gpu_hours, 2),
            "gpu_product": items[0][4],
            "attribution": Reason.NO_EXPORTER.value,
        },
    )


def _group_finding(
    node: str,
    item: tuple[str, str, float, float, str, list[str]],
    price: float,
    held: tuple[str, tuple[str, ...]],
) -> Finding:
    """The unaudited GPU-hours of a KAI reservation pod, as its GPU group's: the GPUs it holds
    for the group's fraction pods, which the finding names."""
    _, _, gpus, hours, model, reasons = item
    group, members = held
    gpu_hours = gpus * hours
    why = "; ".join(dict.fromkeys(_WHY.get(r, "no DCGM series names it") for r in reasons))
    whose = (
        f"the GPU fractions of {_pods(len(members))} ({_listed(members)})"
        if members
        else "GPU fractions (no fraction pod of it is listed)"
    )
    return _risk(
        Resource("GPUGroup", "", group, node, gpus),
        f"KAI Scheduler's GPU group {group} on {node} holds {gpu_word(gpus)} for {whose}, "
        f"but {why}: {gpu_hours:,.0f} GPU-hours could not be audited.",
        (gpu_hours, price),
        members,
        recommendation=(
            "Enable dcgm-exporter's Kubernetes pod mapping on this node (kubelet pod-resources "
            "socket mounted): its series then name the reservation pod, and gpuaudit splits "
            "them among the fraction pods."
        ),
        evidence={
            "gpu_group": group,
            "pods": list(members),
            "gpus": round(gpus, 4),
            "unaudited_gpu_hours": round(gpu_hours, 2),
            "hours": round(hours, 2),
            "gpu_product": model,
            "attribution": ",".join(reasons),
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

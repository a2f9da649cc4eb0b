"""GPU080 unmonitored GPUs: GPUs pods hold that no DCGM series describes.

What it finds
    Running pods that hold GPUs (by the Kubernetes API's allocations) with no DCGM series
    naming them: no dcgm-exporter on the node, the exporter's pod mapping off (no kubelet
    pod-resources socket), a renamed resource it does not map, or a scrape that fails.

Why it matters
    An audit that silently skips these GPUs reads as healthy. They are GPU-hours nobody can
    vouch for, and often the ones where waste hides longest.

How it decides
    Pods in phase Running with a node, requesting `nvidia.com/gpu` or `nvidia.com/mig-*` or
    holding devices of NVIDIA's DRA driver through ResourceClaims, whose namespace/name
    appears on no DCGM series in the window (a series joined to a pod through its claim names
    that pod). Their GPU-hours count from
    the later of the pod's start and the window's start to the window's end (a MIG slice
    counts its share of a GPU); holdings shorter than `checks.unmonitored_min_hours`
    (default 1 h) are left out. When a node has such pods and no DCGM series at all, one
    finding names the node (no exporter there); otherwise one finding per pod.
    Impact: the GPU-hours that could not be audited, priced per GPU model (from the node's
    `nvidia.com/gpu.product` label). Severity: medium.

What to do
    Run dcgm-exporter on every GPU node (the GPU Operator's DaemonSet, with node selectors
    that match), mount the kubelet pod-resources socket and enable its Kubernetes mapping,
    and list custom resource names in `NVIDIA_RESOURCE_NAMES`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from gpuaudit import mig
from gpuaudit.checks.base import gpu_word
from gpuaudit.checks.contract import hours
from gpuaudit.findings import Finding, Impact, Resource, Severity
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C

CODE = "GPU080"
TITLE = "Unmonitored GPUs"
REQUIRES = (Capability.KUBERNETES_PODS,)


@dataclass(frozen=True)
class Thresholds:
    unmonitored_min_hours: float = hours(1.0)
    """Shortest GPU holding without DCGM data worth reporting."""


def _gpus(gpu_request: Any, mig_request: Any, model: str) -> float:
    total = float(gpu_request)
    for part in str(mig_request).split(","):
        if "=" in part:
            prof, n = part.split("=", 1)
            total += float(n) * mig.slice_fraction(prof, model)
    return total


def _pods(n: int) -> str:
    return f"{n} pod" if n == 1 else f"{n} pods"


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    inv = views.inv
    pods = inv.pods
    if pods.empty:
        return []
    held = views.held
    # Columns are read as lists: iterating a string column value by value is slow.
    monitored = set(zip(held[C.NAMESPACE].tolist(), held[C.POD].tolist(), strict=True))
    dcgm_nodes = set(inv.holdings[C.NODE].tolist()) if not inv.holdings.empty else set()
    products = dict(zip(inv.nodes[C.NODE].tolist(), inv.nodes[C.PRODUCT].tolist(), strict=True))
    cand = pods[
        (pods[C.PHASE] == "Running")
        & (pods[C.NODE] != "")
        & ((pods[C.GPU_REQUEST] > 0) | (pods[C.MIG_REQUEST] != ""))
    ]
    per_node: dict[str, list[tuple[str, str, float, float, str]]] = defaultdict(list)
    cols = [C.NAMESPACE, C.POD, C.STARTED, C.NODE, C.GPU_REQUEST, C.MIG_REQUEST]
    for ns_v, pod_v, started, node_v, gpu_request, mig_request in zip(
        *(cand[c].tolist() for c in cols), strict=True
    ):
        ns, pod = str(ns_v), str(pod_v)
        if (ns, pod) in monitored:
            continue
        begin = (
            inv.window_start
            if started != started or started is None
            else max(float(started), inv.window_start)
        )
        hours = max(0.0, (inv.window_end - begin) / 3600.0)
        if hours < cfg.unmonitored_min_hours:
            continue
        node = str(node_v)
        model = products.get(node, "") or "unknown"
        gpus = _gpus(gpu_request, mig_request, model)
        if gpus <= 0:
            continue
        per_node[node].append((ns, pod, gpus, hours, model))
    out: list[Finding] = []
    for node, items in sorted(per_node.items()):
        model = items[0][4]
        price = views.price(model)
        if node not in dcgm_nodes:
            gpu_hours = sum(g * h for _, _, g, h, _ in items)
            gpus = sum(g for _, _, g, _, _ in items)
            names = ", ".join(f"{ns}/{p}" for ns, p, _, _, _ in items[:5])
            more = f" and {len(items) - 5} more" if len(items) > 5 else ""
            out.append(
                Finding(
                    code=CODE,
                    severity=Severity.MEDIUM,
                    resource=Resource("Node", "", node, node, gpus),
                    message=(
                        f"Node {node} has {gpu_word(gpus)} held by {_pods(len(items))} "
                        f"({names}{more}) but no DCGM series at all: {gpu_hours:,.0f} "
                        "GPU-hours could not be audited."
                    ),
                    impact=Impact(gpu_hours=gpu_hours, cost=gpu_hours * price),
                    pods=tuple(f"{ns}/{p}" for ns, p, _, _, _ in items),
                    recommendation=(
                        f"Run dcgm-exporter on {node} (check the GPU Operator's "
                        "DaemonSet node selectors and tolerations) and that "
                        "Prometheus scrapes it."
                    ),
                    evidence={
                        "pods": [f"{ns}/{p}" for ns, p, _, _, _ in items],
                        "gpus": round(gpus, 4),
                        "unaudited_gpu_hours": round(gpu_hours, 2),
                        "gpu_product": model,
                    },
                )
            )
            continue
        for ns, pod, gpus, hours, _ in items:
            gpu_hours = gpus * hours
            out.append(
                Finding(
                    code=CODE,
                    severity=Severity.MEDIUM,
                    resource=Resource("Pod", ns, pod, node, gpus),
                    message=(
                        f"Pod {ns}/{pod} holds {gpu_word(gpus)} on {node} but no DCGM series "
                        f"names it: {gpu_hours:,.0f} GPU-hours could not be audited."
                    ),
                    impact=Impact(gpu_hours=gpu_hours, cost=gpu_hours * price),
                    recommendation=(
                        "Enable dcgm-exporter's Kubernetes pod mapping on this node "
                        "(kubelet pod-resources socket mounted) and list custom GPU "
                        "resource names in NVIDIA_RESOURCE_NAMES."
                    ),
                    evidence={
                        "gpus": round(gpus, 4),
                        "unaudited_gpu_hours": round(gpu_hours, 2),
                        "hours": round(hours, 2),
                        "gpu_product": model,
                    },
                )
            )
    return out

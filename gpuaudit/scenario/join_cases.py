"""Attribution cases (issue 17): GPUs shared by time-slicing in both dcgm-exporter behaviours,
and a MIG node whose exporter labels no pod, on nodes of their own, planted before the pending
pods (whose scheduler messages count every node).

- `l40s-ts-000`: 4 L40S GPUs time-sliced into 4 replicas each (GPU feature discovery's labels,
  `nvidia.com/gpu: 16`), its exporter run with `--kubernetes-virtual-gpus`: every pod holding a
  replica gets a copy of its GPU's series. GPU 0's four pods are idle (GPU001 finds each, at a
  quarter of the GPU); GPU 1's four are busy (GPU001's near-miss).
- `l40s-ts-001`: the same sharing, the exporter's default: each GPU's series names one of its
  pods only. GPU 0's other three pods are named by no series (GPU080 finds them,
  `time_slicing_without_virtual_gpus`); GPU 1's one pod is named (GPU080's near-miss).
- `a100-nolabel-000`: an A100 node in MIG's mixed strategy whose exporter labels no pod. One
  pod holds all eight 3g.40gb instances (the Kubernetes-side join attributes them to it, a
  GPU080 near-miss); two pods hold a 1g.10gb instance each, which no join can tell apart
  (GPU080 finds both, `no_pod_label`).

The shared nodes carry a taint their pods tolerate, so that no other case's pod lands there.
"""

from __future__ import annotations

from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import NodeSpec, PodSpec

REPLICAS = 4
SHARING_TAINT = {"key": "gpu-sharing", "value": "time-slicing", "effect": "NoSchedule"}
TOLERATION = {
    "key": "gpu-sharing",
    "operator": "Equal",
    "value": "time-slicing",
    "effect": "NoSchedule",
}


def plant_attribution(b: Builder) -> None:
    """Place the attribution cases (see the module's docstring) and record their truth."""
    if b.H < 24:
        return
    _shared(b, _node(b, "l40s", "l40s-ts-000", shared=True), virtual=True)
    _shared(b, _node(b, "l40s", "l40s-ts-001", shared=True), virtual=False)
    _unlabelled_mig(b, _node(b, "a100-mig", "a100-nolabel-000", shared=False))


def _node(b: Builder, kind: str, name: str, *, shared: bool) -> NodeSpec:
    node = b.add_node(kind, 900 + len(b.nodes))
    slots = b.slots_by_node.pop(node.name)
    node.name = name
    node.labels["kubernetes.io/hostname"] = name
    b.slots_by_node[name] = slots
    if shared:
        node.labels.update(
            {
                "nvidia.com/gpu.replicas": str(REPLICAS),
                "nvidia.com/gpu.sharing-strategy": "time-slicing",
                "nvidia.com/gpu.product": node.product + "-SHARED",
            }
        )
        node.product += "-SHARED"
        node.capacity["nvidia.com/gpu"] = str(node.gpu_count * REPLICAS)
        node.taints = [dict(SHARING_TAINT)]
    else:
        node.pod_labels = False
    return node


def _shared(b: Builder, node: NodeSpec, *, virtual: bool) -> None:
    """Two GPUs of a time-sliced node, four pods on each."""
    slots = b.free_slots(node)
    tag = "vgpu" if virtual else "single"
    for g, (level, idle) in enumerate(((0.01, True), (0.55, False))):
        if virtual or idle:
            act = b.pattern("level", b.H, 0, x=level, jitter=0.005 if idle else 0.05)
            count = REPLICAS
        else:
            act = b.pattern("busy", b.H, 0, lo=0.4, hi=0.7)
            count = 1
        for r in range(count):
            p = b.deployment_pod(
                "shared",
                f"ts-{tag}-{g}-{r}",
                node,
                0,
                gpus=1,
                tolerations=[dict(TOLERATION)],
                dcgm_hidden=not virtual and r < count - 1,
            )
            # Every replica reads the device's activity: DCGM cannot tell tenants apart.
            b.hold(slots[g], p, 0, b.H, act + 0, 0.3 / REPLICAS)
            _truth(b, p, virtual, idle)


def _truth(b: Builder, p: PodSpec, virtual: bool, idle: bool) -> None:
    if p.dcgm_hidden:
        b.plant("GPU080", p)
        return
    if not virtual:
        b.plant("GPU080", p, "a shared GPU's series names it")
    if idle:
        b.plant("GPU001", p)
    else:
        b.plant("GPU001", p, "its shared GPU is busy")


def _unlabelled_mig(b: Builder, node: NodeSpec) -> None:
    """All 3g.40gb instances to one pod (joined), a 1g.10gb each to two pods (ambiguous)."""
    free = b.free_slots(node)
    big = [s for s in free if s.profile == "3g.40gb"]
    act = b.pattern("busy", b.H, 0, lo=0.5, hi=0.8)
    p = b.pod(
        "serving",
        "mig-batch-0",
        node,
        "main",
        ("StatefulSet", "mig-batch"),
        0,
        mig={"3g.40gb": len(big)},
    )
    for s in big:
        b.hold(s, p, 0, b.H, act + 0, 0.4)
    b.plant("GPU080", p, "its MIG instances join it from the Kubernetes side")
    small = [s for s in free if s.profile == "1g.10gb"][:2]
    for i, s in enumerate(small):
        q = b.deployment_pod("serving", f"mig-small-{i}", node, 0, mig={"1g.10gb": 1})
        b.hold(s, q, 0, b.H, b.pattern("busy", b.H, 0, lo=0.3, hi=0.6), 0.4)
        b.plant("GPU080", q)

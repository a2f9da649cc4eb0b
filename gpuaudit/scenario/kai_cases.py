"""KAI Scheduler's cases (issue 32): GPU fractions with their reservation pods, hierarchical
`scheduling.run.ai` Queues and PodGroups, on one GB200 node added here (`kai-node`).

KAI shares a GPU by a reservation pod in `kai-resource-reservation` that requests the whole
device; the fraction pods ask for `gpu-fraction: "0.5"` and request no GPU; both carry the GPU
group label `runai-gpu-group`. dcgm-exporter names the reservation pod on every series of the
GPU (its holdings here are the reservation pod's). DCGM's activity is the whole GPU's, so the
pods of one GPU are idle or busy together:

- GPU 0: one fraction pod of queue `kai-infer`, idle all window: GPU001 at half a GPU
  (planted); the half no pod asked for is the reservation's, counted as allocated and idle.
- GPU 1: two fraction pods of queue `kai-lab` (one PodGroup of `minMember: 2`, both running),
  busy all window: GPU001 near-misses, and GPU010's near-miss (a complete KAI PodGroup).
- The two reservation pods: GPU001 near-misses (KAI's, no workload: never in a finding).
- GPUs 2 and 3: free.

Queues: `kai-org` (quota 6) with the children `kai-train` (quota 3, no pods all window),
`kai-infer` (quota 1, limit 1: its idle fraction, and a PodGroup whose 1-GPU pod has waited
6 hours at its limit, KAI's message naming the queue's limit) and `kai-lab` (quota 1, used
whole by its busy pair). GPU090 plants `kai-train`: its deserved quota sat idle while its
sibling waited (reclaimable quota); near-misses: `kai-lab`, whose quota was used, and
`kai-org`, whose children deserve no more than it does.

Placed last of all (after the truth of the end state, so no earlier case or truth changes), on
a GB200 node: no pending pod of the other cases can use it (they need 8 GPUs or are pinned to
other products), and its busy GPU keeps it from reading as an idle node (GPU060). Windows
shorter than a day are left without these cases.
"""

from __future__ import annotations

from typing import Any

from gpuaudit.scenario import teams
from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import NodeSpec, PodSpec, SlotSpec

KAI_API = "scheduling.run.ai/v2"
PODGROUP_API = "scheduling.run.ai/v2alpha2"
RESERVATION_NS = "kai-resource-reservation"
SCHEDULER = "kai-scheduler"
GROUP_LABEL = "runai-gpu-group"
QUEUE_LABEL = "kai.scheduler/queue"
WAIT_H = 6


def plant_kai(b: Builder) -> None:
    """The node, pods, Queues and PodGroups of the cases (see the module's docstring), their
    DCGM series and their truth."""
    if b.H < 24:
        return
    for key in ("kai_queues", "kai_podgroups"):
        b.api.setdefault(key, [])
    node = b.add_node("gb200", len(b.of_kind("gb200")))
    node.labels["kai.scheduler/node-pool"] = "default"
    slots = b.free_slots(node)
    _idle_fraction(b, node, slots[0])
    _busy_pair(b, node, slots[1])
    _waiting(b)
    _queues(b)
    # The node's other GPUs free, and the new pods labelled by team, as for every other case.
    b.free_rest()
    teams.label(b)


def _podgroup(b: Builder, ns: str, name: str, queue: str, min_member: int) -> None:
    b.api["kai_podgroups"].append(
        {
            "apiVersion": PODGROUP_API,
            "kind": "PodGroup",
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": b.ids.uuid(),
                "creationTimestamp": b.iso(0, -3600),
            },
            "spec": {"minMember": min_member, "queue": queue},
        }
    )


def reservation(b: Builder, node: NodeSpec, slot: SlotSpec, group: str, **kw: Any) -> PodSpec:
    """The reservation pod KAI's binder creates for a shared GPU, holding it all window; `kw`:
    further `PodSpec` fields."""
    return b.pod(
        RESERVATION_NS,
        f"gpu-reservation-{b.ids.hex(16)}",
        node,
        "resource-reservation",
        ("", ""),
        0,
        gpus=1,
        labels={"app": RESERVATION_NS, GROUP_LABEL: group},
        annotations={"run.ai/reserve_for_gpu_index": slot.uuid},
        scheduler_name=SCHEDULER,
        created_delta_s=-7200,
        **kw,
    )


def _fraction(
    b: Builder, ns: str, name: str, node: NodeSpec, group: str, queue: str, pg: str
) -> PodSpec:
    return b.pod(
        ns,
        name,
        node,
        "main",
        ("", ""),
        0,
        labels={GROUP_LABEL: group, QUEUE_LABEL: queue},
        annotations={"gpu-fraction": "0.5", "pod-group-name": pg},
        scheduler_name=SCHEDULER,
        created_delta_s=-3600,
    )


def _idle_fraction(b: Builder, node: NodeSpec, slot: SlotSpec) -> None:
    group = b.ids.uuid()
    res = reservation(b, node, slot, group)
    pod = _fraction(b, "kai-infer", "embed-notebook-0", node, group, "kai-infer", "pg-embed-0")
    _podgroup(b, "kai-infer", "pg-embed-0", "kai-infer", 1)
    b.hold(slot, res, 0, b.H, b.pattern("idle", b.H, 0), 0.1)
    b.plant("GPU001", pod)
    b.plant("GPU001", res, "a KAI reservation pod holds the GPU for its fraction pods: KAI's")


def _busy_pair(b: Builder, node: NodeSpec, slot: SlotSpec) -> None:
    group = b.ids.uuid()
    res = reservation(b, node, slot, group)
    pods = [
        _fraction(b, "kai-lab", f"rerank-{i}", node, group, "kai-lab", "pg-rerank")
        for i in range(2)
    ]
    _podgroup(b, "kai-lab", "pg-rerank", "kai-lab", 2)
    b.hold(slot, res, 0, b.H, b.pattern("busy", b.H, 0), 0.7)
    for p in pods:
        b.plant("GPU001", p, "its shared GPU was busy")
    b.plant("GPU001", res, "a KAI reservation pod holds the GPU for its fraction pods: KAI's")
    b.plant_name(
        "GPU010", "PodGroup", "kai-lab", "pg-rerank", "both members of its KAI PodGroup run"
    )


def _waiting(b: Builder) -> None:
    """A 1-GPU pod of `kai-infer` waiting since `WAIT_H` hours before the end: its queue is at
    its limit (0.5 allocated of 1)."""
    p = PodSpec(
        namespace="kai-infer",
        name="embed-batch-0",
        uid=b.ids.uuid(),
        node="",
        container="main",
        owner_kind="",
        owner_name="",
        gpus=1,
        labels={QUEUE_LABEL: "kai-infer"},
        annotations={"pod-group-name": "pg-embed-batch"},
        created_h=b.H - WAIT_H,
        phase="Pending",
        scheduler_name=SCHEDULER,
        pending_message=(
            "kai-infer quota has reached the allowable limit of GPUs. Limit is 1 GPUs, "
            "currently 0.5 GPUs allocated and workload requested 1 GPUs"
        ),
    )
    b.pods.append(p)
    _podgroup(b, "kai-infer", "pg-embed-batch", "kai-infer", 1)


def _queue(
    b: Builder, name: str, parent: str, quota: float, limit: float, allocated: float
) -> None:
    spec: dict[str, Any] = {
        "resources": {
            "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
            "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
            "gpu": {"quota": quota, "limit": limit, "overQuotaWeight": 1},
        }
    }
    if parent:
        spec["parentQueue"] = parent
    b.api["kai_queues"].append(
        {
            "apiVersion": KAI_API,
            "kind": "Queue",
            "metadata": {"name": name, "uid": b.ids.uuid()},
            "spec": spec,
            "status": {"allocated": {"nvidia.com/gpu": f"{allocated:g}"} if allocated else {}},
        }
    )


def _queues(b: Builder) -> None:
    _queue(b, "kai-org", "", 6, -1, 1.5)
    _queue(b, "kai-train", "kai-org", 3, -1, 0)
    _queue(b, "kai-infer", "kai-org", 1, 1, 0.5)
    _queue(b, "kai-lab", "kai-org", 1, -1, 1)
    b.plant_name("GPU090", "Queue", "", "kai-train")
    b.plant_name(
        "GPU090", "Queue", "", "kai-lab", "its quota was used while its sibling's pods waited"
    )
    b.plant_name(
        "GPU090", "Queue", "", "kai-org", "its children deserve no more than it does (6 of 6)"
    )

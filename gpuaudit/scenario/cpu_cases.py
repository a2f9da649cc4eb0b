"""CPU-starved GPU work (issue 36, GPU041), on an H100 node of its own (`h100-cpu-000`),
tainted so that no other case's pod lands there. Every pod was created before the window and
holds its GPUs all window (`H` hours) with its framebuffer 70 % full; cAdvisor reports its
container's CPU every hour (`PodSpec.cpu`, `gpuaudit.scenario.series.cadvisor_series`), and its
CPU limit and request are `resources` entries (`cpu`), both the same:

- `ml-train/cpu-starved-trainer-0` (GPUs 0 and 1): CPU limit 2, using 1.98 cores and throttled
  in 60 % of its CFS periods, its GPUs at 0.2 engine activity: GPU041, `H` starved hours,
  2 x `H` x 0.8 idle GPU-hours, a recommended CPU limit of 3 (its limit, as it was throttled,
  plus 50 %) and request of 2.
- near-miss, `ml-train/cpu-bound-busy-0` (GPU 2): CPU limit 2, at its limit and throttled in
  60 % of its periods, but its GPU busy at 0.85: the CPU does not hold the GPU back.
- near-miss, `ml-train/cpu-spare-trainer-0` (GPU 3): its GPU at 0.2 while its container uses
  0.5 of its 2 cores, never throttled: idle for some other reason, not for CPU.
- near-miss, `ml-train/mildly-throttled-0` (GPU 4): its GPU at 0.2, its container throttled in
  10 % of its periods using 1 of its 4 cores: under both of GPU041's thresholds.

GPUs 5 to 7 are free. The truth of each (starved hours, idle GPU-hours, the recommended limit
and request) is under `cpu_starved`, besides the check's planted case and near-misses. Placed
last of the cases (before `quota_cases.settle_burst`, which draws nothing and must see every
node), so that no earlier case or truth changes; windows shorter than a day are left without
them. `without_cadvisor` gives the same scenario without any cAdvisor series (a Prometheus
that does not scrape the kubelet's cAdvisor endpoint): GPU041 is then skipped, with the reason.
"""

from __future__ import annotations

import copy
from typing import TypeVar

import numpy as np

from gpuaudit.scenario import teams
from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import NodeSpec, PodSpec

NODE = "h100-cpu-000"
TAINT = {"key": "gpu-cpu", "value": "cases", "effect": "NoSchedule"}
TOLERATION = {"key": "gpu-cpu", "operator": "Equal", "value": "cases", "effect": "NoSchedule"}
FB_LEVEL = 0.7
"""How full each pod keeps its framebuffer: too full for a MIG slice or a shared GPU (GPU021)."""
CODE = "GPU041"
T = TypeVar("T")


def plant_cpu(b: Builder) -> None:
    """The node, pods and truth of the cases (see the module's docstring)."""
    if b.H < 24:
        return
    node = _node(b)
    slots = b.free_slots(node)
    truth = b.truth.setdefault("cpu_starved", [])
    H = b.H

    starved = _pod(b, node, "cpu-starved-trainer", "2", 1.98, 0.6, gpus=2)
    for slot in slots[0:2]:
        b.hold(slot, starved, 0, H, np.full(H, 0.2), FB_LEVEL)
    b.plant(CODE, starved)
    truth.append(
        {
            "pod": "ml-train/cpu-starved-trainer-0",
            "starved_hours": H,
            "idle_gpu_hours": 2 * H * 0.8,
            "recommended_cpu_limit": "3",
            "recommended_cpu_request": "2",
        }
    )

    busy = _pod(b, node, "cpu-bound-busy", "2", 2.0, 0.6)
    b.hold(slots[2], busy, 0, H, np.full(H, 0.85), FB_LEVEL)
    b.plant(CODE, busy, "CPU at its limit and throttled, but its GPU busy at 0.85")

    spare = _pod(b, node, "cpu-spare-trainer", "2", 0.5, 0.0)
    b.hold(slots[3], spare, 0, H, np.full(H, 0.2), FB_LEVEL)
    b.plant(CODE, spare, "its GPU waits at 0.2 with CPU to spare (0.5 of 2 cores, no throttling)")

    mild = _pod(b, node, "mildly-throttled", "4", 1.0, 0.1)
    b.hold(slots[4], mild, 0, H, np.full(H, 0.2), FB_LEVEL)
    b.plant(CODE, mild, "throttled in 10 % of its periods at a quarter of its 4 cores")
    for p in (busy, spare, mild):
        truth.append(
            {
                "pod": f"{p.namespace}/{p.name}",
                "starved_hours": 0,
                "idle_gpu_hours": 0.0,
            }
        )
    b.free_rest()
    teams.label(b)


def _pod(
    b: Builder,
    node: NodeSpec,
    owner: str,
    limit: str,
    cores: float,
    throttled: float,
    gpus: int = 1,
) -> PodSpec:
    pod = b.pod(
        "ml-train",
        f"{owner}-0",
        node,
        "trainer",
        ("StatefulSet", owner),
        0,
        gpus=gpus,
        tolerations=[dict(TOLERATION)],
        created_delta_s=-3 * 86400,
        resources={"cpu": limit},
    )
    pod.cpu = (tuple([cores] * b.H), tuple([throttled] * b.H))
    return pod


def _node(b: Builder) -> NodeSpec:
    node = b.add_node("h100", 990 + len(b.nodes))
    b.slots_by_node[NODE] = b.slots_by_node.pop(node.name)
    node.name = NODE
    node.labels["kubernetes.io/hostname"] = NODE
    node.taints = [dict(TAINT)]
    return node


def without_cadvisor(sc: T) -> T:
    """A copy of the scenario `sc` with no pod's CPU or memory emitted (`PodSpec.cpu` and
    `PodSpec.memory` None throughout): what a Prometheus that does not scrape the kubelet's
    cAdvisor endpoint holds."""
    out = copy.deepcopy(sc)
    for p in getattr(out, "pods", ()):
        p.cpu = None
        p.memory = None
    return out

"""HAMi cases (issue 32): an L40S node whose GPUs HAMi shares by memory and cores, on a node of
its own, tainted so that no other case's pod lands there.

HAMi's device plugin registers the node's GPUs in the annotation `hami.io/node-nvidia-register`
(split count 10: `nvidia.com/gpu: 40` on 4 GPUs) and its scheduler writes each pod's grant into
`hami.io/vgpu-devices-allocated` (`docs/domain.md`, HAMi). dcgm-exporter cannot name the pods
of such a GPU: its series carry no pod, at the GPU's whole activity (its tenants' added up);
HAMi's vGPU monitor reports each container's SM utilization and memory (`PodSpec.hami_use`).

- GPU 0: `hami-idle`, 25 % of the cores and of the memory, at about 0.5 % of the GPU (GPU001
  finds it, at a quarter of the GPU; GPU022's near-miss: within its share); `hami-busy`, the
  same grant at about 20 % of the GPU (GPU001's near-miss: busy within its share; GPU022's
  near-miss).
- GPU 1: `hami-over`, 50 % of the cores and memory, at about 72 % of the GPU for the whole
  window (GPU022 finds it; GPU001's near-miss); `hami-exact`, 25 %, at exactly 25 % of the GPU
  and exactly its memory (GPU022's near-miss: at its share, not over it).
- GPU 2: `hami-whole`, which asks for no `gpucores` nor `gpumem`: HAMi grants it the whole GPU
  (all its memory and, from v2.7, `gpucores: 100`), and, without a core limit between 0 and
  100, its monitor series reads 0 whatever it runs. It is busy (GPU001's near-miss: HAMi's 0 is
  no measurement; GPU022's near-miss: HAMi measures no utilization for it).
- GPU 3 is free.

The tenants' holdings here are only the model's (no series names them): the truth of idle nodes
(`truth`) reads them.

HAMi pods that ended in the window (`plant_hami_ended`, the last step of all, so that no earlier
case changes), on a second such node, `l40s-hami-001` (the window's hours scaled: `A` = 3/7 of
them, a week's day 3):

- GPU 0: `hami-eval-idle`, a Job's pod with 25 % of the cores and memory, idle (about 0.5 % of
  the GPU) from before the window to hour `A`, when it Succeeded: it is charged a quarter of
  the GPU for exactly those hours (GPU001 finds it; GPU002's near-miss: it ended, so holds
  nothing at the window's end; GPU080's near-miss: joined to its GPU's series for the time it
  ran; GPU022's near-miss: within its share).
- GPU 1: `hami-eval-busy`, a Job's pod with 50 %, at about 30 % of the GPU until half the
  window, when it Succeeded (GPU001's, GPU022's and GPU080's near-miss).
- GPU 2: `hami-steady`, a Deployment's pod with 25 %, at about 15 % of the GPU all window
  (near-misses of GPU001 and GPU022), which keeps the node from reading idle (GPU060).
- GPU 3 is free; so are GPUs 0 and 1 after their pods ended.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from gpuaudit.scenario import teams
from gpuaudit.scenario.builder import Arr, Builder
from gpuaudit.scenario.cluster import NodeSpec, PodSpec, SlotSpec

NODE = "l40s-hami-000"
ENDED_NODE = "l40s-hami-001"
"""The node of the HAMi pods that ended in the window (`plant_hami_ended`)."""
SPLIT = 10
"""HAMi's split count (`deviceSplitCount`, the chart's default)."""
TAINT = {"key": "gpu-sharing", "value": "hami", "effect": "NoSchedule"}
TOLERATION = {"key": "gpu-sharing", "operator": "Equal", "value": "hami", "effect": "NoSchedule"}
REGISTER = "hami.io/node-nvidia-register"
ALLOCATED = "hami.io/vgpu-devices-allocated"


def plant_hami(b: Builder) -> None:
    """Place the HAMi cases (see the module's docstring) and record their truth."""
    if b.H < 24:
        return
    node = hami_node(b)
    gpu = b.free_slots(node)
    n = b.H
    quarter, half = gpu[0].mem_mib // 4, gpu[0].mem_mib // 2
    idle = _pct(b.pattern("level", n, 0, x=0.005, jitter=0.004))
    busy = _pct(b.pattern("level", n, 0, x=0.2, jitter=0.03))
    pods = tenants(
        b, node, gpu[0], [("hami-idle", 25, quarter, idle), ("hami-busy", 25, quarter, busy)]
    )
    over = _pct(b.pattern("level", n, 0, x=0.72, jitter=0.02))
    exact = np.full(n, 25.0)
    pods += tenants(
        b, node, gpu[1], [("hami-over", 50, half, over), ("hami-exact", 25, quarter, exact)]
    )
    whole = _pct(b.pattern("busy", n, 0, lo=0.5, hi=0.8))
    pods += tenants(b, node, gpu[2], [("hami-whole", 100, gpu[2].mem_mib, whole)], asked=False)
    _truth(b, *pods)


def _pct(act: Arr) -> Arr:
    """A utilization of the GPU as HAMi reports it: whole per cent."""
    out: Arr = np.rint(act * 100)
    return out


def plant_hami_ended(b: Builder) -> None:
    """Place the HAMi pods that ended in the window (see the module's docstring) on a node of
    their own, and record their truth."""
    if b.H < 24:
        return
    node = hami_node(b, ENDED_NODE)
    gpu = b.free_slots(node)
    first, half = 3 * b.H // 7, b.H // 2
    quarter = gpu[0].mem_mib // 4
    idle = _pct(b.pattern("level", first, 0, x=0.005, jitter=0.004))
    (done_idle,) = tenants(b, node, gpu[0], [("hami-eval-idle", 25, quarter, idle)], ended=first)
    busy = _pct(b.pattern("level", half, 0, x=0.3, jitter=0.03))
    grant = ("hami-eval-busy", 50, gpu[1].mem_mib // 2, busy)
    (done_busy,) = tenants(b, node, gpu[1], [grant], ended=half)
    steady = _pct(b.pattern("level", b.H, 0, x=0.15, jitter=0.02))
    (stays,) = tenants(b, node, gpu[2], [("hami-steady", 25, quarter, steady)])
    joined = "joined to its GPU's series for the time it ran"
    b.plant("GPU001", done_idle)
    b.plant("GPU002", done_idle, "it ended: it holds no GPU at the window's end")
    b.plant("GPU080", done_idle, joined)
    b.plant("GPU022", done_idle, "it used less than its share")
    b.plant("GPU001", done_busy, "it was busy within its share for the time it ran")
    b.plant("GPU080", done_busy, joined)
    b.plant("GPU022", done_busy, "it stayed within its cores")
    b.plant("GPU001", stays, "it is busy within its share of the GPU")
    b.plant("GPU022", stays, "it stayed within its cores")
    # The node's GPUs free where no pod held them, and the new pods labelled by team, as for
    # every other case.
    b.free_rest()
    teams.label(b)


def hami_node(b: Builder, name: str = NODE) -> NodeSpec:
    """An L40S node whose 4 GPUs HAMi's device plugin registered."""
    node = b.add_node("l40s", 900 + len(b.nodes))
    b.slots_by_node[name] = b.slots_by_node.pop(node.name)
    node.name = name
    node.labels["kubernetes.io/hostname"] = name
    node.labels["gpu"] = "on"  # the chart's `nvidiaNodeSelector`
    node.capacity["nvidia.com/gpu"] = str(node.gpu_count * SPLIT)
    node.taints = [dict(TAINT)]
    devices = [
        {
            "id": s.uuid,
            "index": s.index,
            "count": SPLIT,
            "devmem": s.mem_mib,
            "devcore": 100,
            "type": f"NVIDIA-{node.model}",
            "numa": 0,
            "mode": "hami-core",
            "health": True,
        }
        for s in b.slots_by_node[name]
    ]
    node.annotations[REGISTER] = json.dumps(devices, separators=(",", ":"))
    return node


def tenants(
    b: Builder,
    node: NodeSpec,
    slot: SlotSpec,
    grants: list[tuple[str, int, int, Arr]],
    asked: bool = True,
    ended: int | None = None,
) -> list[PodSpec]:
    """Pods HAMi placed on `slot`, each (name, cores granted, MiB granted, utilization of the
    GPU per hour); `asked`: whether they asked for cores and memory (else HAMi's defaults
    granted them); `ended`: the hour they ended at (a Job's pods, Succeeded then), else
    Deployments' pods that run all window. The GPU's own series: their activity added up, no
    pod named, while they ran."""
    until = b.H if ended is None else ended
    total = np.zeros(until)
    fb = 0.0
    pods = []
    for name, cores, mib, pct in grants:
        resources = (
            {"nvidia.com/gpucores": str(cores), "nvidia.com/gpumem": str(mib)} if asked else {}
        )
        spec: dict[str, Any] = {
            "gpus": 1,
            "tolerations": [dict(TOLERATION)],
            "dcgm_hidden": True,
            "resources": resources,
            "annotations": {
                ALLOCATED: f"{slot.uuid},NVIDIA,{mib},{cores}:;",
                "hami.io/vgpu-node": node.name,
            },
        }
        if ended is None:
            p = b.deployment_pod(
                "serving", name, node, 0, priority_class="serving", priority=10000, **spec
            )
        else:
            job = ("Job", name)
            p = b.pod(
                "research",
                f"{name}-{b.ids.suffix()}",
                node,
                "main",
                job,
                0,
                phase="Succeeded",
                finished_h=ended,
                **spec,
            )
        # HAMi records no utilization without a core limit between 0 and 100: it reads 0.
        measured = pct if 0 < cores < 100 else np.zeros(until)
        used = float(mib) * 2**20 if name == "hami-exact" else float(mib) * 2**20 * 0.6
        p.hami_use = (slot.uuid, tuple(measured.tolist()), used)
        share = pct / 100.0
        b.hold(slot, p, 0, until, share, 0.6 * mib / slot.mem_mib)
        total += share
        fb += 0.6 * mib / slot.mem_mib
        pods.append(p)
    b.hold(slot, None, 0, until, np.minimum(np.round(total, 4), 1.0), fb)
    return pods


def _truth(
    b: Builder, idle: PodSpec, busy: PodSpec, over: PodSpec, exact: PodSpec, whole: PodSpec
) -> None:
    """Each tenant's truth (see the module's docstring)."""
    b.plant("GPU001", idle)
    b.plant("GPU022", idle, "it used less than its share")
    b.plant("GPU001", busy, "it is busy within its share of the GPU")
    b.plant("GPU022", busy, "it stayed within its cores")
    b.plant("GPU022", over)
    b.plant("GPU001", over, "it used more than its share")
    b.plant("GPU022", exact, "it used exactly its share")
    b.plant("GPU001", exact, "it used all of its share")
    b.plant("GPU001", whole, "HAMi's monitor reads 0 without a core limit; its GPU is busy")
    b.plant("GPU022", whole, "HAMi measures no utilization without a core limit")

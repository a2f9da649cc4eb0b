"""Cause cases (issue 36): restarting holders (GPU004) and slow starts (GPU005), on an H100 node
of their own (`h100-cause-000`), tainted so that no other case's pod lands there. Each pod
holds whole GPUs; the hours below count from the window's start (`H` its hours):

- `ml-train/crashloop-trainer-0` (GPU 0): created before the window, worked at 0.6 until
  `H - 5`, then OOM-killed (its 12th restart, `lastState.terminated.finishedAt` at `H - 5`)
  and waiting in `CrashLoopBackOff` since, its GPU held at 0 activity: GPU004, 5 restarting
  GPU-hours, measured exactly (the last down time's start is known, it has not run again).
  Its container's memory limit is 16Gi; cAdvisor saw its working set at 12 GiB, and at
  15.5 GiB in its last hour before the kill (`PodSpec.memory`, none while it is down): GPU004
  states 15.5 of 16 GiB and recommends a limit of 20Gi (16 GiB plus 25 %).
- near-miss, `ml-train/restarted-once-0` (GPU 1): one restart two days before the window,
  healthy (running at 0.6) since, its working set 8 GiB of its 16Gi limit.
- `inference/cold-start-server-0` (GPUs 2 and 3): created at `H - 12`, at 0 activity for 5 h
  (pulling its image and loading weights), then serving at 0.5: GPU005, 10 starting GPU-hours,
  5/12 of what it held.
- near-miss, `ml-train/warmup-trainer-0` (GPU 4): created at the window's start, a 10-minute
  warm-up inside its first hour (0.75 there), then 0.9 all window: its start lies inside its
  first bucket, nothing to report.

GPUs 5 to 7 are free. The truth of each (GPU-hours restarting or starting; the crash-looping
trainer's most working set, limit and recommended limit) is under `causes`,
besides the checks' planted cases and near-misses; the ledger by cause counts the same hours
(`gpuaudit.audit.by_cause`). Placed last of all, so that no earlier case or truth changes;
windows shorter than a day are left without them.
"""

from __future__ import annotations

import numpy as np

from gpuaudit.scenario import teams
from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import NodeSpec, PodSpec

NODE = "h100-cause-000"
TAINT = {"key": "gpu-cause", "value": "cases", "effect": "NoSchedule"}
TOLERATION = {"key": "gpu-cause", "operator": "Equal", "value": "cases", "effect": "NoSchedule"}
DOWN_H = 5
"""Hours the crash-looping trainer has been down at the window's end."""
GIB = 2**30
MEMORY_LIMIT = "16Gi"
"""The memory limit of the trainers' containers."""
PEAK = 15.5 * GIB
"""The most working set cAdvisor saw of the crash-looping trainer, in its last hour."""
LOADING_H = 5
"""Hours the cold-start server loads before its first work."""
SERVING_H = 12
"""Hours the cold-start server has existed at the window's end."""


def plant_causes(b: Builder) -> None:
    """The node, pods and truth of the cases (see the module's docstring)."""
    if b.H < 24:
        return
    node = _node(b)
    slots = b.free_slots(node)
    truth = b.truth.setdefault("causes", [])
    H = b.H

    crash = _pod(b, node, "ml-train", "crashloop-trainer", 0, -7200)
    crash.restarts, crash.last_termination = 12, ("OOMKilled", "")
    crash.last_finished_s, crash.waiting = (H - DOWN_H) * 3600, "CrashLoopBackOff"
    crash.resources["memory"] = MEMORY_LIMIT
    crash.memory = (12.0 * GIB,) * (H - DOWN_H - 1) + (PEAK,)
    act = np.concatenate([np.full(H - DOWN_H, 0.6), np.zeros(DOWN_H)])
    b.hold(slots[0], crash, 0, H, act, 0.6)
    b.plant("GPU004", crash)
    truth.append(
        {
            "pod": "ml-train/crashloop-trainer-0",
            "restarting_gpu_hours": float(DOWN_H),
            "memory_working_set_max_bytes": PEAK,
            "memory_limit": MEMORY_LIMIT,
            "memory_recommended_limit": "20Gi",
        }
    )

    once = _pod(b, node, "ml-train", "restarted-once", 0, -3 * 86400)
    once.restarts, once.last_termination = 1, ("Error", "")
    once.last_finished_s = -2 * 86400
    once.resources["memory"] = MEMORY_LIMIT
    once.memory = (8.0 * GIB,) * H
    b.hold(slots[1], once, 0, H, np.full(H, 0.6), 0.5)
    b.plant("GPU004", once, "restarted once two days before the window, healthy since")
    truth.append({"pod": "ml-train/restarted-once-0", "restarting_gpu_hours": 0.0})

    cold = _pod(b, node, "inference", "cold-start-server", H - SERVING_H, 0, gpus=2)
    act = np.concatenate([np.zeros(LOADING_H), np.full(SERVING_H - LOADING_H, 0.5)])
    for slot in slots[2:4]:
        b.hold(slot, cold, H - SERVING_H, H, act, 0.6)
    b.plant("GPU005", cold)
    truth.append({"pod": "inference/cold-start-server-0", "starting_gpu_hours": 2.0 * LOADING_H})

    warm = _pod(b, node, "ml-train", "warmup-trainer", 0, 0)
    b.hold(slots[4], warm, 0, H, np.concatenate([[0.75], np.full(H - 1, 0.9)]), 0.8)
    b.plant("GPU005", warm, "a 10-minute warm-up inside its first hour of a long run")
    truth.append({"pod": "ml-train/warmup-trainer-0", "starting_gpu_hours": 0.0})
    b.free_rest()
    teams.label(b)


def _pod(
    b: Builder, node: NodeSpec, ns: str, owner: str, created_h: int, delta_s: int, gpus: int = 1
) -> PodSpec:
    return b.pod(
        ns,
        f"{owner}-0",
        node,
        "main",
        ("StatefulSet", owner),
        created_h,
        gpus=gpus,
        tolerations=[dict(TOLERATION)],
        created_delta_s=delta_s,
    )


def _node(b: Builder) -> NodeSpec:
    node = b.add_node("h100", 980 + len(b.nodes))
    b.slots_by_node[NODE] = b.slots_by_node.pop(node.name)
    node.name = NODE
    node.labels["kubernetes.io/hostname"] = NODE
    node.taints = [dict(TAINT)]
    return node

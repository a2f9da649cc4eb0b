"""KAI Scheduler's GPU fractions where the simple case does not hold (issue 32), on two L40S
nodes of their own (`kai_cases` has the simple ones), tainted so that no other case's pod lands
there, with the window's hours scaled (`A` = 3/7 of them, a week's day 3):

- `l40s-kai-000` (dcgm-exporter labels each series with its pod), GPU 0 reserved by KAI for a
  GPU group: `ocr-batch`, a Job's fraction pod with `gpu-fraction: "0.5"` that ran from before
  the window to hour `A`, when it Succeeded, and `ocr-serve`, a Deployment's with `"0.25"` all
  window; the GPU busy all window. The ended pod holds half the GPU for exactly the hours it
  ran (its hours are not the reservation pod's), the reservation pod what the two leave (its
  truth, `kai_ended`, gives the GPU-hours of each). GPU001's near-misses: both are busy; the
  reservation pod is KAI's. GPUs 1 to 3 are free.
- `l40s-kai-001`, whose dcgm-exporter does not run: GPU 0 reserved for a GPU group whose
  fraction pod `label-tool` (`"0.5"`) runs all window. GPU080 finds the node and names the
  fraction pod, not the reservation pod (a near-miss: KAI's, no workload). GPUs 1 to 3 are
  free.

Placed last of all, so that no earlier case or truth changes. Windows shorter than a day are
left without these cases.
"""

from __future__ import annotations

from typing import Any

from gpuaudit.scenario import teams
from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import NodeSpec, PodSpec
from gpuaudit.scenario.kai_cases import (
    GROUP_LABEL,
    QUEUE_LABEL,
    SCHEDULER,
    reservation,
)

ENDED_NODE = "l40s-kai-000"
DARK_NODE = "l40s-kai-001"
TAINT = {"key": "gpu-sharing", "value": "kai", "effect": "NoSchedule"}
TOLERATION = {"key": "gpu-sharing", "operator": "Equal", "value": "kai", "effect": "NoSchedule"}
NAMESPACE = "kai-vision"
QUEUE = "kai-lab"


def plant_kai_gaps(b: Builder) -> None:
    """The nodes, pods and truth of the cases (see the module's docstring)."""
    if b.H < 24:
        return
    _ended(b, _node(b, ENDED_NODE))
    dark = _node(b, DARK_NODE)
    dark.exporter = False
    _dark(b, dark)
    # The nodes' other GPUs free, and the new pods labelled by team, as for every other case.
    b.free_rest()
    teams.label(b)


def _node(b: Builder, name: str) -> NodeSpec:
    node = b.add_node("l40s", 950 + len(b.nodes))
    b.slots_by_node[name] = b.slots_by_node.pop(node.name)
    node.name = name
    node.labels["kubernetes.io/hostname"] = name
    node.taints = [dict(TAINT)]
    return node


def _fraction(b: Builder, name: str, node: NodeSpec, group: str, share: str, **kw: Any) -> PodSpec:
    spec: dict[str, Any] = {
        "labels": {GROUP_LABEL: group, QUEUE_LABEL: QUEUE},
        "annotations": {"gpu-fraction": share},
        "scheduler_name": SCHEDULER,
        "tolerations": [dict(TOLERATION)],
        "created_delta_s": -3600,
    }
    if "finished_h" in kw:
        job = f"{name}-{b.ids.suffix()}"
        return b.pod(
            NAMESPACE, job, node, "main", ("Job", name), 0, phase="Succeeded", **spec, **kw
        )
    return b.deployment_pod(NAMESPACE, name, node, 0, **spec)


def _ended(b: Builder, node: NodeSpec) -> None:
    slot = b.free_slots(node)[0]
    group = b.ids.uuid()
    res = reservation(b, node, slot, group, tolerations=[dict(TOLERATION)])
    first = 3 * b.H // 7
    done = _fraction(b, "ocr-batch", node, group, "0.5", finished_h=first)
    serve = _fraction(b, "ocr-serve", node, group, "0.25")
    b.hold(slot, res, 0, b.H, b.pattern("busy", b.H, 0), 0.7)
    b.plant("GPU001", done, "its shared GPU was busy for the time it ran")
    b.plant("GPU001", serve, "its shared GPU was busy")
    b.plant("GPU001", res, "a KAI reservation pod holds the GPU for its fraction pods: KAI's")
    b.truth["kai_ended"] = {
        "node": node.name,
        "ended_pod": f"{done.namespace}/{done.name}",
        "ended_h": first,
        "gpu_hours": {
            f"{done.namespace}/{done.name}": 0.5 * first,
            f"{serve.namespace}/{serve.name}": 0.25 * b.H,
            f"{res.namespace}/{res.name}": b.H - 0.5 * first - 0.25 * b.H,
        },
    }


def _dark(b: Builder, node: NodeSpec) -> None:
    slot = b.free_slots(node)[0]
    group = b.ids.uuid()
    res = reservation(b, node, slot, group, tolerations=[dict(TOLERATION)])
    _fraction(b, "label-tool", node, group, "0.5")
    b.hold(slot, res, 0, b.H, b.pattern("busy", b.H, 0), 0.5)
    b.plant_name("GPU080", "Node", "", node.name)
    b.plant("GPU080", res, "a KAI reservation pod: the node's finding names its fraction pods")

"""Root-cause cases (issue 36): throttled GPUs, on an H100 node of their own (`h100-hot-000`)
whose dcgm-exporter has the violation counters in its CSV (`DCGM_FI_DEV_POWER_VIOLATION`,
`DCGM_FI_DEV_THERMAL_VIOLATION`; `docs/domain.md`, Throttling), tainted so that no other case's
pod lands there. Every GPU of the node has both counters; the other nodes have none (their
exporters keep dcgm-exporter's default CSV), so their throttling is not measured. Each pod
holds one GPU all window at a steady 0.8 engine activity (`level`), its busy GPU-hours 0.8 x
the window's hours:

- `perf/power-capped-0` (GPU 0): clocks held down by the power limit 30 % of every hour, no
  thermal violation: GPU071, cause the power cap; busy GPU-hours lost 0.8 x 0.3 x hours.
- `perf/hot-aisle-0` (GPU 1): thermal violations 50 % of every hour, power 10 %: GPU071,
  cause cooling; lost 0.8 x 0.5 x hours.
- near-miss, `perf/near-cap-0` (GPU 2): power violations 5 % of every hour, under GPU071's
  0.10.

GPUs 3 to 7 are free, their counters flat. The truth of each (its throttled share, busy and
lost GPU-hours and cause) is under `throttled`, besides GPU071's planted cases and near-misses.
Placed last of all, so that no earlier case or truth changes; windows shorter than a day are left
without them.
"""

from __future__ import annotations

from gpuaudit.scenario import teams
from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import NodeSpec, SlotSpec
from gpuaudit.sources.prometheus import catalogue as queries

NODE = "h100-hot-000"
TAINT = {"key": "gpu-hot", "value": "rootcause", "effect": "NoSchedule"}
TOLERATION = {"key": "gpu-hot", "operator": "Equal", "value": "rootcause", "effect": "NoSchedule"}
NAMESPACE = "perf"
ACTIVITY = 0.8
HOUR_NS = 3600 * 10**9
"""A violation counter's increase over an hour throttled all of it (ns)."""
CASES = (
    # (pod's owner, power share, thermal share, cause, near-miss reason)
    ("power-capped", 0.30, 0.0, "the power cap", ""),
    ("hot-aisle", 0.10, 0.50, "cooling", ""),
    ("near-cap", 0.05, 0.0, "", "throttled 5 % of its held time, under the 10 % threshold"),
)


def plant_rootcause(b: Builder) -> None:
    """The node, pods and truth of the cases (see the module's docstring)."""
    if b.H < 24:
        return
    node = _node(b)
    slots = b.free_slots(node)
    for slot in slots:
        _counters(slot, 0.0, 0.0)
    truth = b.truth.setdefault("throttled", [])
    for slot, (owner, power, thermal, cause, near) in zip(slots, CASES, strict=False):
        _counters(slot, power, thermal)
        pod = b.pod(
            NAMESPACE,
            f"{owner}-0",
            node,
            "train",
            ("StatefulSet", owner),
            0,
            gpus=1,
            tolerations=[dict(TOLERATION)],
            created_delta_s=-3600,
        )
        b.hold(slot, pod, 0, b.H, b.pattern("level", b.H, 0, x=ACTIVITY, jitter=0.0), 0.5)
        b.plant("GPU071", pod, near)
        share = max(power, thermal)
        busy = round(ACTIVITY * b.H, 6)
        truth.append(
            {
                "pod": f"{NAMESPACE}/{pod.name}",
                "node": node.name,
                "gpu_index": slot.index,
                "throttled_share": share,
                "busy_gpu_hours": busy,
                "lost_gpu_hours": round(busy * share, 6),
                "cause": cause,
            }
        )
    b.free_rest()
    teams.label(b)


def _node(b: Builder) -> NodeSpec:
    node = b.add_node("h100", 960 + len(b.nodes))
    b.slots_by_node[NODE] = b.slots_by_node.pop(node.name)
    node.name = NODE
    node.labels["kubernetes.io/hostname"] = NODE
    node.taints = [dict(TAINT)]
    return node


def _counters(slot: SlotSpec, power: float, thermal: float) -> None:
    """The slot's violation counters rise by these shares of each hour, all window."""
    slot.health[queries.POWER_VIOLATION] = [(0, round(power * HOUR_NS))]
    slot.health[queries.THERMAL_VIOLATION] = [(0, round(thermal * HOUR_NS))]

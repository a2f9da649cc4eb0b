"""Root-cause cases (issue 36): throttled GPUs and a straggler gang, on two H100 nodes of their
own (`h100-hot-000`, `h100-hot-001`) whose dcgm-exporter has the violation counters in its CSV
(`DCGM_FI_DEV_POWER_VIOLATION`, `DCGM_FI_DEV_THERMAL_VIOLATION`; `docs/domain.md`, Throttling),
tainted so that no other case's pod lands there. Every GPU of them has both counters (flat
where not throttled); the other nodes have none (their exporters keep dcgm-exporter's default
CSV), so their throttling is not measured. The same GPUs export their SM clock
(`DCGM_FI_DEV_SM_CLOCK`, in the default CSV) and their maximum SM clock
(`DCGM_FI_DEV_MAX_SM_CLOCK`, added to the CSV with the counters; `MAX_CLOCK`, the H100 SXM's
1,980 MHz): a busy card runs at its maximum but for the share of each hour it is throttled, at
`THROTTLED_CLOCK` (1,380 MHz), so the power-capped card averages 1,800 MHz, the hot one 1,680,
the near-miss 1,950, the straggler 1,740 and every card not throttled 1,980. The other nodes
export no clock: on every GPU it would add about 100 million samples to a week of 10,000 GPUs
scraped every 60 s (which the live tests write and backfill), for figures only GPU071's
evidence and GPU011 read, both on throttling-measured GPUs only. Each pod
holds one GPU all window at a steady 0.8 engine activity (`level`), its busy GPU-hours 0.8 x
the window's hours:

- `perf/power-capped-0` (GPU 0): clocks held down by the power limit 30 % of every hour, no
  thermal violation: GPU071, cause the power cap; busy GPU-hours lost 0.8 x 0.3 x hours.
- `perf/hot-aisle-0` (GPU 1): thermal violations 50 % of every hour, power 10 %: GPU071,
  cause cooling; lost 0.8 x 0.5 x hours.
- near-miss, `perf/near-cap-0` (GPU 2): power violations 5 % of every hour, under GPU071's
  0.10.
- `perf/llm-pretrain`, a Kueue pod group of 5 one-GPU members (GPUs 3 to 7, labelled
  `kueue.x-k8s.io/pod-group-name`, total count 5): member `llm-pretrain-1` is power-throttled
  40 % of every hour at 0.9 activity, its four peers wait at 0.55: GPU011 names the member and
  the node, the peers' GPU-hours waiting 4 x (0.9 - 0.55) x hours; GPU071 reports the member.

A second such node, `h100-hot-001`, holds the near-miss gang `perf/vit-tune` (8 members):
member `vit-tune-0` power-throttled 30 % at 0.85, its peers at 0.82 (they kept pace: no
straggler for GPU011; GPU071 reports the throttled member). Every GPU of both nodes is held, so
that their free room changes no other case (a pending pod refused by their taint). The truth of
each throttled pod (its throttled share, busy and lost GPU-hours, cause, and mean and maximum
SM clock) is under `throttled`, the gangs' under `stragglers`, besides GPU071's and GPU011's
planted cases and near-misses. Placed last of all, so that no earlier case or truth changes;
windows shorter than a day are left without them.
"""

from __future__ import annotations

from gpuaudit.scenario import teams
from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import NodeSpec, SlotSpec
from gpuaudit.sources.prometheus import catalogue as queries

NODE = "h100-hot-000"
NEAR_NODE = "h100-hot-001"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
TAINT = {"key": "gpu-hot", "value": "rootcause", "effect": "NoSchedule"}
TOLERATION = {"key": "gpu-hot", "operator": "Equal", "value": "rootcause", "effect": "NoSchedule"}
NAMESPACE = "perf"
ACTIVITY = 0.8
HOUR_NS = 3600 * 10**9
"""A violation counter's increase over an hour throttled all of it (ns)."""
MAX_CLOCK = 1980
"""The H100 SXM's maximum SM clock (MHz), what `DCGM_FI_DEV_MAX_SM_CLOCK` reads on these nodes."""
THROTTLED_CLOCK = 1380
"""The SM clock (MHz) a card of these nodes runs at while its clocks are held down."""
CASES = (
    # (pod's owner, power share, thermal share, cause, near-miss reason)
    ("power-capped", 0.30, 0.0, "the power cap", ""),
    ("hot-aisle", 0.10, 0.50, "cooling", ""),
    ("near-cap", 0.05, 0.0, "", "throttled 5 % of its held time, under the 10 % threshold"),
)


def plant_rootcause(b: Builder) -> None:
    """The nodes, pods and truth of the cases (see the module's docstring)."""
    if b.H < 24:
        return
    node = _node(b, NODE)
    slots = b.free_slots(node)
    for slot in slots:
        _counters(slot, 0.0, 0.0)
    truth: list[dict[str, object]] = b.truth.setdefault("throttled", [])
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
        truth.append(_truth(pod.name, node, slot, ACTIVITY * b.H, share, cause))
    stragglers = b.truth.setdefault("stragglers", [])
    pretrain = (0.55, 0.9, 0.55, 0.55, 0.55)
    stragglers.append(_gang(b, node, slots[3:8], "llm-pretrain", pretrain, 1, 0.4))
    other = _node(b, NEAR_NODE)
    other_slots = b.free_slots(other)
    for slot in other_slots:
        _counters(slot, 0.0, 0.0)
    stragglers.append(_gang(b, other, other_slots, "vit-tune", (0.85,) + (0.82,) * 7, 0, 0.3))
    b.free_rest()
    teams.label(b)


def _truth(
    pod: str, node: NodeSpec, slot: SlotSpec, busy: float, share: float, cause: str
) -> dict[str, object]:
    return {
        "pod": f"{NAMESPACE}/{pod}",
        "node": node.name,
        "gpu_index": slot.index,
        "throttled_share": share,
        "busy_gpu_hours": round(busy, 6),
        "lost_gpu_hours": round(busy * share, 6),
        "cause": cause,
        "sm_clock_mean_mhz": clock(share),
        "max_sm_clock_mhz": MAX_CLOCK,
    }


def _gang(
    b: Builder,
    node: NodeSpec,
    slots: list[SlotSpec],
    name: str,
    acts: tuple[float, ...],
    slow: int,
    share: float,
) -> dict[str, object]:
    """A Kueue pod group of one-GPU members at these activities, member `slow` power-throttled
    `share` of every hour; the gang's truth (the waiting GPU-hours 0 when its peers kept pace)."""
    pods = []
    for i, (slot, act) in enumerate(zip(slots, acts, strict=True)):
        pod = b.pod(
            NAMESPACE,
            f"{name}-{i}",
            node,
            "worker",
            ("Job", name),
            0,
            gpus=1,
            labels={GROUP_LABEL: name},
            annotations={TOTAL_ANNOTATION: str(len(acts))},
            tolerations=[dict(TOLERATION)],
            created_delta_s=-3600,
        )
        b.hold(slot, pod, 0, b.H, b.pattern("level", b.H, 0, x=act, jitter=0.0), 0.5)
        pods.append(pod)
    _counters(slots[slow], share, 0.0)
    b.plant("GPU071", pods[slow])
    b.truth["throttled"].append(
        _truth(pods[slow].name, node, slots[slow], acts[slow] * b.H, share, "the power cap")
    )
    peers = [a for i, a in enumerate(acts) if i != slow]
    gap = acts[slow] - sorted(peers)[len(peers) // 2]
    straggler = gap >= 0.10
    why = "" if straggler else "its peers kept pace with the throttled member"
    b.plant_name("GPU011", "Workload", NAMESPACE, name, why)
    waited = sum(acts[slow] - a for a in peers) * b.H if straggler else 0.0
    return {
        "gang": f"{NAMESPACE}/{name}",
        "member": f"{NAMESPACE}/{pods[slow].name}",
        "node": node.name,
        "waiting_gpu_hours": round(waited, 6),
    }


def _node(b: Builder, name: str) -> NodeSpec:
    node = b.add_node("h100", 960 + len(b.nodes))
    b.slots_by_node[name] = b.slots_by_node.pop(node.name)
    node.name = name
    node.labels["kubernetes.io/hostname"] = name
    node.taints = [dict(TAINT)]
    return node


def clock(share: float) -> int:
    """The mean SM clock (MHz) of a busy card throttled `share` of each hour: `MAX_CLOCK` while
    not throttled, `THROTTLED_CLOCK` while it is."""
    return round(MAX_CLOCK - share * (MAX_CLOCK - THROTTLED_CLOCK))


def _counters(slot: SlotSpec, power: float, thermal: float) -> None:
    """The slot's violation counters rise by these shares of each hour, all window, and its SM
    clock reads the mean the longer of them leaves it (`clock`), against its maximum."""
    slot.health[queries.POWER_VIOLATION] = [(0, round(power * HOUR_NS))]
    slot.health[queries.THERMAL_VIOLATION] = [(0, round(thermal * HOUR_NS))]
    slot.health[queries.SM_CLOCK] = [(0, clock(max(power, thermal)))]
    slot.health[queries.MAX_SM_CLOCK] = [(0, MAX_CLOCK)]

"""Kubernetes-side join cases over time (issue 32): an A100 node in MIG's mixed strategy whose
exporter labels no pod (old exporters on MIG instances, NVIDIA/dcgm-exporter#577), its
instances held by one pod after another. The join is decided per bucket: a pod gets the buckets
in which it was the only pod that could hold the node's unlabelled instances of a profile.

On `a100-nolabel-001` (the window's hours scaled: `A` = 3/7 of them, a week's day 3):

- 3g.40gb: `ml-tune/mig-prep-0` (a Job's pod, Succeeded at hour `A`) holds all eight 3g.40gb
  instances from before the window to `A`, idle: the join gives it those buckets, so GPU001
  finds it (planted) and GPU080 does not (near-miss). Nothing holds them for a while (unheld
  time, not allocated). `ml-tune/mig-train-0` (a StatefulSet's pod, Running) holds them from a
  later hour to the window's end, busy: joined from its start, although it started after their
  series began (the rule before this was refused such a pod and called it unmonitored): a GPU001
  near-miss and a GPU080 near-miss.
- 2g.20gb: `ml-eval/mig-eval-0` (a Job's pod, Succeeded at half the window's hours, `M`) holds
  all eight 2g.20gb instances from before the window, busy; `ml-eval/mig-serve-0` (a
  StatefulSet's pod, Running), which takes them over, was started two hours before the first
  ended. In the buckets both ran (from the one `mig-serve-0` started in to the one
  `mig-eval-0` ended in) neither is joined: GPU080 finds both (`no_pod_label`, planted) for
  those hours alone (`mig-eval-0` 3 h, `mig-serve-0` 2 h and the 115 s it ran in its first
  bucket); before and after, each is joined alone, busy (GPU001 near-misses).

The node's 1g.10gb instances are free all window. Placed after every other case (its own node,
on which no other case places pods; the pending pods' scheduler messages, written before it was
added, do not count it, as for a node that joined after their last attempt).
"""

from __future__ import annotations

from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import NodeSpec, PodSpec, SlotSpec

NODE = "a100-nolabel-001"
OVERLAP_H = 2
"""Hours before `mig-eval-0` ended that its successor was started."""


def plant_time_join(b: Builder) -> None:
    """Place the cases (see the module's docstring) and record their truth."""
    if b.H < 24:
        return
    node = _node(b)
    free = b.free_slots(node)
    _one_after_another(b, node, [s for s in free if s.profile == "3g.40gb"])
    _overlapping(b, node, [s for s in free if s.profile == "2g.20gb"])


def _node(b: Builder) -> NodeSpec:
    node = b.add_node("a100-mig", 900 + len(b.nodes))
    b.slots_by_node[NODE] = b.slots_by_node.pop(node.name)
    node.name = NODE
    node.labels["kubernetes.io/hostname"] = NODE
    node.pod_labels = False
    return node


def _job_pod(
    b: Builder, ns: str, name: str, node: NodeSpec, mig: dict[str, int], finished_h: int
) -> PodSpec:
    """A Job's pod, created just before the window, Succeeded at hour `finished_h`."""
    job = name.rsplit("-", 1)[0]
    owner = ("Job", job)
    return b.pod(
        ns, name, node, "main", owner, 0, mig=mig, phase="Succeeded", finished_h=finished_h
    )


def _hold(b: Builder, slots: list[SlotSpec], p: PodSpec, h0: int, h1: int, idle: bool) -> None:
    kind = "idle" if idle else "busy"
    act = b.pattern(kind, h1 - h0, h0) if idle else b.pattern(kind, h1 - h0, h0, lo=0.5, hi=0.8)
    for s in slots:
        b.hold(s, p, h0, h1, act + 0, 0.05 if idle else 0.4)


def _one_after_another(b: Builder, node: NodeSpec, slots: list[SlotSpec]) -> None:
    """An idle pod, then nothing, then a busy pod: each joined for its own buckets."""
    first_end = 3 * b.H // 7
    second = first_end + max(2, b.H // 14)
    prep = _job_pod(b, "ml-tune", "mig-prep-0", node, {"3g.40gb": len(slots)}, first_end)
    _hold(b, slots, prep, 0, first_end, idle=True)
    b.plant("GPU001", prep)
    b.plant("GPU080", prep, "joined from the Kubernetes side for the buckets it alone ran")
    train = b.pod(
        "ml-tune",
        "mig-train-0",
        node,
        "main",
        ("StatefulSet", "mig-train"),
        second,
        mig={"3g.40gb": len(slots)},
    )
    _hold(b, slots, train, second, b.H, idle=False)
    b.plant("GPU001", train, "its MIG instances are busy")
    b.plant("GPU080", train, "joined from its start, though its instances' series began before")


def _overlapping(b: Builder, node: NodeSpec, slots: list[SlotSpec]) -> None:
    """Two pods whose runs overlap by `OVERLAP_H` hours: neither is joined where both ran."""
    handover = b.H // 2
    first = _job_pod(b, "ml-eval", "mig-eval-0", node, {"2g.20gb": len(slots)}, handover)
    _hold(b, slots, first, 0, handover, idle=False)
    b.plant("GPU001", first, "its MIG instances are busy")
    b.plant("GPU080", first)
    then = b.pod(
        "ml-eval",
        "mig-serve-0",
        node,
        "main",
        ("StatefulSet", "mig-serve"),
        handover - OVERLAP_H,
        mig={"2g.20gb": len(slots)},
    )
    _hold(b, slots, then, handover, b.H, idle=False)
    b.plant("GPU001", then, "its MIG instances are busy")
    b.plant("GPU080", then)

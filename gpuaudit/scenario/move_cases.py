"""Moves priced against idle capacity (issue 32, GPU031): three distillation PyTorchJobs of the
inference team (`inference-team`), each two 1-GPU pods on one L40S node (PCIe-only), from hour
`H // 2 + 1` for `max(4, H // 8)` hours, then Succeeded, so that the window's end, which the
pending cases read, is as it was. Their pods may run on their L40S node and on one H100 node
(required node affinity on `kubernetes.io/hostname`), whose GPUs are all NVLink-connected; an
H100 GPU-hour lists at more than an L40S one saves (6.88 x 0.9 against 2.70), so only GPUs that
are paid for already make the move worth it.

- `distill-tp`: measured PCIe traffic 3 GB/s per GPU; its H100 node is the one kept for
  inference (`dedicated=inference`, which its pods tolerate), whose four free GPUs no pod held
  all window: the move uses GPUs paid for already and costs nothing extra, so GPU031 advises it
  (planted).
- `distill-busy`: the same traffic; its H100 node (untainted) had two GPUs free at the job's
  start, which a batch Job (`batch/embed-refresh-0`) held busy from the next hour until after
  the job ended: the move would be priced at list price for all but one hour, more than the
  L40S GPU-hours it leaves, so no move (near-miss).
- `distill-quiet`: like `distill-tp` (the reserved node's GPUs free all its hours), its pods
  exchanging 0.05 GB/s over PCIe, data loading only: no evidence that its GPUs exchange data, so
  no move, free or not (near-miss).

And the truth of `ml-train/ddp-wide` (`hardware.plant_spread`), whether GPU031 moves it to
NVLink GPUs, which depends on the GPUs left unheld once every case is placed.

Placed on existing nodes only, in GPUs no pod held in those hours: L40S nodes that no case
counts as idle (their longest idle stretch is under a day, so busy work changes nothing there),
and an H100 node whose GPUs free in those hours were free all of them (so the batch Job takes
all its room). Added nodes would change the pending pods' scheduler messages.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpuaudit.domain.pricing import DEFAULT_PRICES, price_for
from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import NodeSpec, PodSpec, SlotSpec
from gpuaudit.scenario.hardware import DDP_PCIE, RESERVED_TAINT

NS = "inference-team"
HOSTNAME = "kubernetes.io/hostname"
KUBEFLOW = "training.kubeflow.org"
"""The prefix of the Kubeflow training operator's pod labels."""


@dataclass(frozen=True)
class Case:
    """One distillation job: its name, its PCIe traffic and whether its H100 node is the
    reserved one (else an untainted one that a batch Job fills after its start)."""

    job: str
    pcie_bps: float
    reserved: bool
    near_miss: str = ""


CASES = (
    Case("distill-tp", DDP_PCIE, True),
    Case(
        "distill-busy",
        DDP_PCIE,
        False,
        "the H100 GPUs free at its start were held busy by another pod for all its other "
        "hours: priced at list, the move costs more than the L40S GPU-hours it leaves",
    ),
    Case(
        "distill-quiet",
        0.05e9,
        True,
        "its GPUs exchange little data (measured PCIe traffic below 1 GB/s): free H100 GPUs "
        "are no reason to move it",
    ),
)


def plant_moves(b: Builder) -> None:
    """Place the cases (see the module's docstring) and record their truth, then the truth of
    `ddp-wide`, which depends on the GPUs left unheld."""
    _distillation(b)
    _ddp_wide(b)


def _distillation(b: Builder) -> None:
    if b.H < 24:
        return
    h0 = b.H // 2 + 1
    h1 = h0 + max(4, b.H // 8)
    reserved = next((n for n in b.of_kind("h100") if RESERVED_TAINT in n.taints), None)
    hosts = _quiet_l40s(b, h0, h1)
    if reserved is None or len(_unheld(b, reserved, h0, h1)) < 2 or len(hosts) < len(CASES):
        return
    busy = _busy_target(b, h0, h1)
    if busy is None:
        return
    target, room = busy
    _filler(b, target, room, h0 + 1, h1 + 1)
    for case, host in zip(CASES, hosts, strict=False):
        _job(b, case, host, reserved if case.reserved else target, h0, h1)
        b.plant_name("GPU031", "PyTorchJob", NS, case.job, case.near_miss)


def _ddp_wide(b: Builder) -> None:
    """GPU031's truth for `ml-train/ddp-wide` (`hardware.plant_spread`): on two L40S nodes,
    taking more GPUs than one node has, so the rule on nodes stays quiet; the PCIe rule moves
    it when an NVLink node it may run on had room for all of it at its start and the GPUs
    there that no pod held over its hours make the move worth it. No move advised before it
    takes those: the cases above may run on their own nodes only, the MoE job's move takes
    GB200 GPUs (four to a node, fewer than `ddp-wide` needs) and `ddp-spread`'s ends before
    `ddp-wide` starts; so it is priced alone."""
    pods = [p for p in b.pods if p.owner_name == "ddp-wide" and p.namespace == "ml-train"]
    if not pods:
        return
    why = "its pods together need more GPUs than one node has"
    if not _worth_moving(b, pods):
        why += ", and no NVLink GPUs it may use sat unheld enough of its hours to pay for a move"
        b.plant_name("GPU031", "PyTorchJob", "ml-train", "ddp-wide", why)
    else:
        b.plant_name("GPU031", "PyTorchJob", "ml-train", "ddp-wide")


SLOWDOWN = 0.10
"""GPU031's default `checks.placement_slowdown`."""


def _worth_moving(b: Builder, pods: list[PodSpec]) -> bool:
    """GPU031's PCIe rule with its default settings and prices, for work no other move takes
    capacity from: some whole-GPU NVLink node (H100, GB200) the pods may all run on (taints
    and node selectors: they have no affinity) had, in its first hour, room for all of them
    among the GPUs no pod held (never more than its `nvidia.com/gpu`), and the move saves:
    its GPU-hours at their price exceed those the unheld GPUs there did not cover, hour by
    hour, at the node's price x (1 - `SLOWDOWN`)."""
    held: dict[int, int] = {}
    for h in b.holdings:
        if any(h.pod is p for p in pods):
            for k in range(h.h0, h.h1):
                held[k] = held.get(k, 0) + 1
    if not held:
        return False
    total, first = sum(p.gpus for p in pods), min(held)
    gpu_hours = float(sum(held.values()))
    here = price_for(b.slots_by_node[pods[0].node][0].node.model, DEFAULT_PRICES)
    for n in b.nodes:
        if n.kind not in ("h100", "gb200") or not n.pod_labels or n.dra:
            continue
        if not n.exporter or not all(_may_run(p, n) for p in pods):
            continue
        cap = int(n.capacity.get("nvidia.com/gpu", "0"))
        slots = b.slots_by_node[n.name]

        def unheld(k: int, cap: int = cap, slots: list[SlotSpec] = slots) -> int:
            free = sum(all(not a <= k < z for a, z in b.used.get(s.key, [])) for s in slots)
            return min(cap, free)

        if unheld(first) < total:
            continue
        covered = sum(min(g, unheld(k)) for k, g in held.items())
        there = price_for(n.product, DEFAULT_PRICES)
        if gpu_hours * here - (gpu_hours - covered) * (1 - SLOWDOWN) * there > 0:
            return True
    return False


def _may_run(p: PodSpec, n: NodeSpec) -> bool:
    """Whether the node's `NoSchedule`/`NoExecute` taints are tolerated by the pod (as the
    generator writes tolerations: key and value) and its node selector matches."""
    tolerated = {(t["key"], t.get("value", "")) for t in p.tolerations}
    for t in n.taints:
        if t["effect"] in ("NoSchedule", "NoExecute") and (t["key"], t["value"]) not in tolerated:
            return False
    return all(n.labels.get(k) == v for k, v in p.node_selector.items())


def _unheld(b: Builder, node: NodeSpec, h0: int, h1: int) -> list[SlotSpec]:
    """The node's GPUs no pod held in any hour of [h0, h1)."""
    return [
        s
        for s in b.slots_by_node[node.name]
        if all(z <= h0 or a >= h1 for a, z in b.used.get(s.key, []))
    ]


def _touched(b: Builder, node: NodeSpec, h0: int, h1: int) -> list[SlotSpec]:
    """The node's GPUs no pod held in some hour of [h0, h1)."""
    out = []
    for s in b.slots_by_node[node.name]:
        held: set[int] = set()
        for a, z in b.used.get(s.key, []):
            held.update(range(max(a, h0), min(z, h1)))
        if len(held) < h1 - h0:
            out.append(s)
    return out


def _eligible(b: Builder, kind: str) -> Iterable[NodeSpec]:
    """Whole-GPU nodes of a kind whose exporter labels pods, untainted, without DRA."""
    for n in b.of_kind(kind):
        if n.exporter and n.pod_labels and not n.taints and not n.dra:
            if n.labels.get("nvidia.com/gpu.replicas", "1") == "1":
                yield n


def _longest_idle(b: Builder, node: NodeSpec) -> int:
    """The node's longest run of hours in which no pod held one of its GPUs at 5 % activity
    or more, as `truth` counts GPU060's idle nodes."""
    idle = [True] * b.H
    for h in b.holdings:
        if h.pod is not None and h.slot.node is node:
            for k, act in enumerate(h.act.tolist()):
                idle[h.h0 + k] = idle[h.h0 + k] and act < 0.05
    run = best = 0
    for flag in idle:
        run = run + 1 if flag else 0
        best = max(best, run)
    return best


def _quiet_l40s(b: Builder, h0: int, h1: int) -> list[NodeSpec]:
    """L40S nodes with two GPUs no pod held in [h0, h1) that no case counts as idle."""
    named = {
        e["name"] for key in ("planted", "near_misses") for e in b.truth[key].get("GPU060", [])
    }
    return [
        n
        for n in _eligible(b, "l40s")
        if n.name not in named and len(_unheld(b, n, h0, h1)) >= 2 and _longest_idle(b, n) < 24
    ]


def _busy_target(b: Builder, h0: int, h1: int) -> tuple[NodeSpec, list[SlotSpec]] | None:
    """The first H100 node by name with two or more GPUs free all of [h0, h1) and no other
    GPU free in any hour of it, with those GPUs."""
    for n in sorted(_eligible(b, "h100"), key=lambda n: n.name):
        room = _unheld(b, n, h0, h1 + 1)
        if len(room) >= 2 and len(_touched(b, n, h0, h1 + 1)) == len(room):
            return n, room
    return None


def _filler(b: Builder, node: NodeSpec, slots: list[SlotSpec], h0: int, h1: int) -> None:
    """A busy batch Job holding `slots` over [h0, h1), then Succeeded."""
    p = b.pod(
        "batch",
        "embed-refresh-0",
        node,
        "main",
        ("Job", "embed-refresh"),
        h0,
        gpus=len(slots),
        labels={"batch.kubernetes.io/job-name": "embed-refresh"},
        priority_class="batch",
        priority=100,
        phase="Succeeded",
        finished_h=h1,
    )
    act = b.pattern("busy", h1 - h0, h0)
    for slot in slots:
        b.hold(slot, p, h0, h1, act + 0, 0.6)


def _job(b: Builder, case: Case, host: NodeSpec, target: NodeSpec, h0: int, h1: int) -> None:
    """The case's PyTorchJob: a master and a worker of one GPU each on `host`, allowed onto
    `target` too."""
    uid = b.ids.uuid()
    b.pytorchjobs.append({"namespace": NS, "name": case.job, "uid": uid, "workers": 1})
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": HOSTNAME, "operator": "In", "values": [host.name, target.name]}
                        ]
                    }
                ]
            }
        }
    }
    spec: dict[str, Any] = {
        "gpus": 1,
        "priority_class": "training",
        "priority": 1000,
        "owner_uid": uid,
        "link_bps": {"pcie": case.pcie_bps},
        "phase": "Succeeded",
        "finished_h": h1,
        "affinity": affinity,
    }
    if case.reserved:
        spec["tolerations"] = [{"operator": "Equal", **RESERVED_TAINT}]
    act = b.pattern("busy", h1 - h0, h0)
    owner = ("PyTorchJob", case.job)
    for role, slot in zip(("master", "worker"), _unheld(b, host, h0, h1), strict=False):
        labels = {f"{KUBEFLOW}/job-name": case.job, f"{KUBEFLOW}/replica-type": role}
        labels[f"{KUBEFLOW}/replica-index"] = "0"
        spec["labels"] = labels
        p = b.pod(NS, f"{case.job}-{role}-0", host, "pytorch", owner, h0, **copy.deepcopy(spec))
        b.hold(slot, p, h0, h1, act + 0, 0.7)

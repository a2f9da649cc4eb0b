"""The planted cases of the base scenario, one declaration each: GPU001, GPU002, GPU003,
GPU020, GPU021 and GPU040 (and their near-misses), planted before the background fills the
cluster; GPU080, planted after it; GPU001's power corroboration (`POWER_CASES`) on a node of its
own; and the pods pending for GPUs (GPU050, GPU051), planted after every other case.

A `Plant` names the workload it places, the node it goes on, its hours and activity, and what
the audit must say about it (`finds` a code, or a `near_miss` of one that must stay quiet).
`BASE` lists them in groups; `plant_base` places each group once per copy (a scenario has one
copy per 400 GPUs), in the order listed, and that order is part of the output: append new
cases at the end of a group, or in a new group after the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from gpuaudit.scenario import workloads
from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import NodeSpec, PodSpec
from gpuaudit.scenario.workloads import DAILY_H, Activity, Hang, IdleTail, pattern


# ---- what a case declares ----------------------------------------------------------------
@dataclass(frozen=True)
class On:
    """The node a case goes on: the `index`-th node of a kind (the last one if there are
    fewer); copies after the first go to node `later + copy` instead, when `later` is set."""

    kind: str
    index: int = 0
    later: int | None = None

    def pick(self, by_kind: Mapping[str, list[NodeSpec]], copy: int) -> NodeSpec | None:
        pool = by_kind.get(self.kind, [])
        if not pool:
            return None
        at = self.index if copy == 0 or self.later is None else self.later + copy
        return pool[min(len(pool) - 1, at)]


@dataclass(frozen=True)
class Hours:
    """When a case's pod starts: at a `start` fraction of the window, or `last` hours before
    its end. It holds its GPUs to the window's end."""

    start: float = 0.0
    last: int = 0

    def first(self, window_h: int) -> int:
        return window_h - self.last if self.last else int(window_h * self.start)


@dataclass(frozen=True)
class Truth:
    """What a check must say about a case: find it, or, with a reason in `near_miss`, stay
    quiet. Recorded only in windows of at least `min_hours`."""

    code: str
    near_miss: str = ""
    min_hours: int = 0
    confidence: str = ""
    """The confidence the finding must have (`high`, `medium`, `low`); empty: any."""


def finds(code: str, min_hours: int = 0, confidence: str = "") -> Truth:
    """The check `code` must report the case (with that `confidence`, when given)."""
    return Truth(code, min_hours=min_hours, confidence=confidence)


def near_miss(code: str, why: str) -> Truth:
    """The check `code` must not report the case, for the reason given."""
    return Truth(code, why)


class Workload(Protocol):
    """A workload kind a case places: `place` returns its pod, or None when the node lacks
    the room."""

    def place(
        self, b: Builder, node: NodeSpec, name: str, activity: Activity, h0: int
    ) -> PodSpec | None: ...


@dataclass(frozen=True, kw_only=True)
class Inference:
    """An inference server (Deployment) on `gpus` whole GPUs; the case's name is the
    Deployment's."""

    gpus: int
    namespace: str = "serving"

    def place(
        self, b: Builder, node: NodeSpec, name: str, activity: Activity, h0: int
    ) -> PodSpec | None:
        return workloads.inference(b, node, name, self.gpus, activity, self.namespace, h0)


@dataclass(frozen=True, kw_only=True)
class Notebook:
    """A Kubeflow notebook on one GPU; the case's name is the notebook's."""

    def place(
        self, b: Builder, node: NodeSpec, name: str, activity: Activity, h0: int
    ) -> PodSpec | None:
        return workloads.notebook(b, node, name, activity, h0)


@dataclass(frozen=True, kw_only=True)
class MigServer:
    """An inference server (Deployment) on one MIG slice of `profile`; the case's name is the
    Deployment's."""

    profile: str

    def place(
        self, b: Builder, node: NodeSpec, name: str, activity: Activity, h0: int
    ) -> PodSpec | None:
        return workloads.mig_server(b, node, name, self.profile, activity, h0)


@dataclass(frozen=True, kw_only=True)
class Nightly:
    """A batch Deployment on one GPU; the case's name is the Deployment's."""

    def place(
        self, b: Builder, node: NodeSpec, name: str, activity: Activity, h0: int
    ) -> PodSpec | None:
        return workloads.nightly(b, node, name, activity, h0)


@dataclass(frozen=True, kw_only=True)
class Owned:
    """A pod of a Job or StatefulSet named like the case, on `gpus` whole GPUs or one MIG
    slice of `profile`, its framebuffer `fb` full; `restarts` and `last_termination` (reason,
    message) describe its container's history."""

    namespace: str
    owner: str
    gpus: int = 1
    fb: float
    profile: str = ""
    restarts: int = 0
    last_termination: tuple[str, str] | None = None
    dra: bool = False
    """Whether it holds its GPUs through a DRA ResourceClaim instead of an `nvidia.com/gpu`
    request."""

    def place(
        self, b: Builder, node: NodeSpec, name: str, activity: Activity, h0: int
    ) -> PodSpec | None:
        return workloads.custom(
            b,
            node,
            self.namespace,
            (self.owner, name),
            self.gpus,
            activity,
            self.fb,
            self.profile,
            h0,
            restarts=self.restarts,
            last_termination=self.last_termination,
            **({"dra": True} if self.dra else {}),
        )


@dataclass(frozen=True, kw_only=True)
class Plant:
    """One planted case: the workload `name`d (with `{i}` for the copy number) placed `on` a
    node over `hours` at `activity`, and the `truth` about it. Skipped in windows shorter
    than `min_hours`, and when there is no node of the kind."""

    name: str
    on: On
    workload: Workload
    activity: Activity
    truth: tuple[Truth, ...]
    hours: Hours = Hours()
    min_hours: int = 0
    power: float | None = None
    """A flat power draw as a share of the GPUs' board power, whatever the activity (work the
    activity reading misses); None: the draw follows the activity."""


# ---- the cases ---------------------------------------------------------------------------
H100_0, H100_1, H100_2 = On("h100"), On("h100", 1), On("h100", 2)
A100_0, L40S_0 = On("a100-mig"), On("l40s")

BASE: tuple[tuple[Plant, ...], ...] = (
    # GPU001 around its bar, on the first H100 node (the canaries of later copies spread out).
    (
        Plant(
            name="llm-canary-{i}",
            on=On("h100", 0, later=2),
            workload=Inference(gpus=2),
            activity=pattern("idle"),
            truth=(finds("GPU001"),),
        ),
        Plant(
            name="nb-idle-{i}",
            on=H100_0,
            workload=Notebook(),
            hours=Hours(start=0.2),
            activity=pattern("idle"),
            truth=(finds("GPU001"), finds("GPU021")),
        ),
        Plant(
            name="nb-six-{i}",
            on=H100_0,
            workload=Notebook(),
            activity=pattern("level", x=0.06),
            truth=(near_miss("GPU001", "mean activity 6 %"), finds("GPU021")),
        ),
        Plant(
            name="nb-short-{i}",
            on=H100_0,
            workload=Notebook(),
            hours=Hours(last=3),
            activity=pattern("idle"),
            truth=(near_miss("GPU001", "held 3 h"),),
        ),
    ),
    # GPU001 and GPU003 on the first L40S node.
    (
        Plant(
            name="embed-stale-{i}",
            on=L40S_0,
            workload=Inference(gpus=1, namespace="search"),
            activity=pattern("idle"),
            truth=(finds("GPU001"), finds("GPU021")),
        ),
        Plant(
            name="nightly-etl-{i}",
            on=L40S_0,
            workload=Nightly(),
            activity=pattern("nightly"),
            truth=(finds("GPU003", min_hours=DAILY_H),),
        ),
    ),
    # GPU001 on a MIG slice.
    (
        Plant(
            name="tiny-llm-{i}",
            on=A100_0,
            workload=MigServer(profile="1g.10gb"),
            activity=pattern("idle"),
            truth=(finds("GPU001"),),
        ),
    ),
    # GPU002, GPU021, GPU040, GPU020 and GPU003's near-miss.
    (
        Plant(
            name="finetune-done-{i}",
            on=H100_1,
            workload=Owned(namespace="ml-train", owner="Job", gpus=4, fb=0.7),
            activity=IdleTail(hours=20, share=3),
            truth=(finds("GPU002"),),
        ),
        Plant(
            name="finetune-recent-{i}",
            on=H100_1,
            workload=Owned(namespace="ml-train", owner="Job", gpus=2, fb=0.7),
            activity=IdleTail(hours=4),
            truth=(near_miss("GPU002", "idle for the last 4 h only"),),
        ),
        Plant(
            name="embedder-{i}",
            on=H100_1,
            workload=Owned(namespace="search", owner="StatefulSet", fb=0.074),
            activity=pattern("level", x=0.08, jitter=0.01),
            truth=(finds("GPU021"),),
        ),
        Plant(
            name="bigmodel-{i}",
            on=H100_1,
            workload=Owned(namespace="search", owner="StatefulSet", fb=0.62),
            activity=pattern("level", x=0.3, jitter=0.02),
            truth=(near_miss("GPU021", "50 GB peak fits no smaller MIG profile"),),
        ),
        Plant(
            name="allreduce-hang-{i}",
            on=H100_2,
            workload=Owned(namespace="ml-train", owner="Job", gpus=2, fb=0.8),
            activity=Hang(hours=30, share=2),
            truth=(finds("GPU040"),),
        ),
        Plant(
            name="decode-busy-{i}",
            on=H100_2,
            workload=Owned(namespace="serving", owner="StatefulSet", fb=0.6),
            activity=pattern("level", util=92.0, x=0.35, jitter=0.02),
            truth=(near_miss("GPU040", "high GPU_UTIL with real SM work (35 %)"),),
        ),
        Plant(
            name="longctx-{i}",
            on=H100_2,
            workload=Owned(namespace="serving", owner="StatefulSet", fb=0.985),
            activity=pattern("busy", lo=0.4, hi=0.6),
            truth=(finds("GPU020"),),
        ),
        Plant(
            name="llm-7b-int4-{i}",
            on=A100_0,
            workload=Owned(namespace="serving", owner="StatefulSet", fb=0.985, profile="1g.10gb"),
            activity=pattern("diurnal", base=0.3, peak=0.7),
            truth=(finds("GPU020"),),
        ),
        Plant(
            name="llm-3b-{i}",
            on=A100_0,
            workload=Owned(namespace="serving", owner="StatefulSet", fb=0.86, profile="1g.10gb"),
            activity=pattern("diurnal", base=0.3, peak=0.7),
            truth=(near_miss("GPU020", "p95 framebuffer 0.87"),),
        ),
        Plant(
            name="oom-loop-{i}",
            on=A100_0,
            workload=Owned(
                namespace="ml-train",
                owner="Job",
                fb=0.5,
                profile="2g.20gb",
                restarts=7,
                last_termination=(
                    "Error",
                    "torch.OutOfMemoryError: CUDA out of memory. Tried "
                    "to allocate 2.00 GiB (GPU 0; 19.50 GiB total capacity)",
                ),
            ),
            activity=pattern("level", x=0.3),
            truth=(finds("GPU020"),),
        ),
        Plant(
            name="host-oom-{i}",
            on=A100_0,
            workload=Owned(
                namespace="ml-train",
                owner="Job",
                fb=0.5,
                profile="2g.20gb",
                restarts=5,
                last_termination=("OOMKilled", ""),
            ),
            activity=pattern("level", x=0.3),
            truth=(near_miss("GPU020", "host OOMKilled, not GPU memory"),),
        ),
        Plant(
            name="daytime-batch-{i}",
            on=L40S_0,
            workload=Owned(namespace="batch", owner="StatefulSet", fb=0.3),
            activity=pattern("window", start_h=6, end_h=18),
            truth=(near_miss("GPU003", "active 12 h a day"),),
            min_hours=DAILY_H,
        ),
    ),
)
"""The base cases, in groups; each group is placed once per copy before the next group."""


# ---- placing them ------------------------------------------------------------------------
def copies(b: Builder) -> int:
    """How many copies of the base cases a scenario holds: one per 400 GPUs."""
    return max(1, b.target // 400)


def plant_base(b: Builder) -> None:
    """Place the base cases (`BASE`), group by group, each group once per copy, and record
    their truth."""
    by_kind = {kind: b.of_kind(kind) for kind in ("h100", "a100-mig", "l40s")}
    for group in BASE:
        for i in range(copies(b)):
            for case in group:
                plant(b, by_kind, case, i)


def plant(b: Builder, by_kind: Mapping[str, list[NodeSpec]], case: Plant, copy: int) -> None:
    """Place one copy of a case and record its truth (nothing when it does not fit)."""
    if b.H < case.min_hours:
        return
    node = case.on.pick(by_kind, copy)
    if node is None:
        return
    name = case.name.format(i=copy)
    p = case.workload.place(b, node, name, case.activity, case.hours.first(b.H))
    if p is None:
        return
    if case.power is not None:
        b.draw_power(p, case.power)
    for t in case.truth:
        if b.H >= t.min_hours:
            b.plant(t.code, p, t.near_miss, t.confidence)


def plant_monitoring_gaps(b: Builder) -> None:
    """GPU080: a node whose dcgm-exporter is missing (the last H100 node past the third that
    runs pods), and one pending pod per copy, which holds no GPU (a near-miss)."""
    h100 = b.of_kind("h100")
    held_nodes = {p.node for p in b.pods if p.alive}
    dark = next((n for n in reversed(h100[3:]) if n.name in held_nodes), None)
    if dark is not None:
        dark.exporter = False
        b.plant_name("GPU080", "Node", "", dark.name)
    for i in range(copies(b)):
        pend = workloads.pending(
            b,
            "ml-train",
            f"queued-train-{i}",
            ("Job", f"queued-train-{i}"),
            b.H - 2,
            8,
            priority_class="training",
            priority=1000,
        )
        b.plant("GPU080", pend, "pending, holds no GPU")


# ---- GPUs held through DRA ResourceClaims, planted before the pending pods ----------------
DRA = (
    Plant(
        name="dra-idle-{i}",
        on=On("l40s-dra"),
        workload=Owned(namespace="research", owner="StatefulSet", fb=0.2, dra=True),
        activity=pattern("idle"),
        truth=(finds("GPU001"), finds("GPU021")),
    ),
    Plant(
        name="dra-busy-{i}",
        on=On("l40s-dra"),
        workload=Owned(namespace="research", owner="StatefulSet", fb=0.5, dra=True),
        hours=Hours(start=0.5),
        activity=pattern("busy", lo=0.5, hi=0.8),
        truth=(near_miss("GPU001", "busy, held through a DRA claim from mid-window"),),
    ),
)
"""Pods holding GPUs through DRA ResourceClaims: no `nvidia.com/gpu` request and no pod label
on their DCGM series; the audit finds the holder from the claim and the node's ResourceSlices.
"""


def plant_dra(b: Builder) -> None:
    """The DRA cases (`DRA`) on an L40S node added for them, whose GPUs NVIDIA's DRA driver
    publishes in ResourceSlices instead of the device plugin as `nvidia.com/gpu`."""
    node = b.add_node("l40s", len(b.of_kind("l40s")))
    node.capacity.pop("nvidia.com/gpu", None)
    node.dra = True
    for case in DRA:
        plant(b, {"l40s-dra": [node]}, case, 0)


# ---- GPU001's power corroboration, planted after the other cases --------------------------
POWER_CASES = (
    Plant(
        name="rerank-warm-{i}",
        on=On("l40s"),
        workload=Inference(gpus=2, namespace="search"),
        activity=pattern("idle"),
        power=0.45,
        truth=(finds("GPU001", confidence="low"),),
    ),
    Plant(
        name="rerank-cold-{i}",
        on=On("l40s"),
        workload=Inference(gpus=2, namespace="search"),
        activity=pattern("idle"),
        truth=(finds("GPU001", confidence="high"),),
    ),
)
"""An idle-looking server drawing 45 % of its GPUs' board power (GPU001 with low confidence),
and its near-miss, an idle server at idle power (GPU001 with high confidence)."""


def plant_power(b: Builder) -> None:
    """`POWER_CASES`, once, on one more L40S node that they fill (so that no pending pod's
    room changes), after every other case but the pending pods: the cases before stay exactly
    as they were. An L40S exports no power limit here (`nodes.LIMIT_EXPORTED`): its figures
    come from `gpuaudit.domain.power`."""
    node = b.add_node("l40s", len(b.of_kind("l40s")))
    for case in POWER_CASES:
        plant(b, {"l40s": [node]}, case, 0)


# ---- pods pending for GPUs, planted last -------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Waiting:
    """A Job's pod `{job}-0` pending for `gpus` GPUs since `waited_h` hours before the window's
    end (plus `created_delta_s` seconds), pinned to a GPU `product` when set. GPU050's and
    GPU051's truth about it is derived from the cluster's end state (`truth.from_state`);
    `truth` adds to that."""

    job: str
    namespace: str
    gpus: int
    waited_h: int
    created_delta_s: int = -120
    priority_class: str = ""
    priority: int = 0
    preemption_policy: str = ""
    product: str = ""
    tolerations: tuple[tuple[str, str], ...] = ()
    """(key, value) of `NoSchedule` taints it tolerates."""
    truth: tuple[Truth, ...] = ()


PENDING = (
    Waiting(
        job="eval-llm",
        namespace="research",
        gpus=4,
        waited_h=3,
        priority_class="research-high",
        priority=5000,
        preemption_policy="Never",
        product="NVIDIA-L40S",
    ),
    Waiting(
        job="eval-4gpu",
        namespace="research",
        gpus=4,
        waited_h=5,
        product="NVIDIA-H100-80GB-HBM3",
    ),
    Waiting(
        job="eval-tolerant",
        namespace="research",
        gpus=4,
        waited_h=2,
        product="NVIDIA-H100-80GB-HBM3",
        tolerations=(("dedicated", "inference"),),
        truth=(
            near_miss("GPU050", "it tolerates the taint of a node with 4 free GPUs"),
            near_miss("GPU051", "it tolerates the taint of a node with 4 free GPUs"),
        ),
    ),
    Waiting(
        job="hotfix-train",
        namespace="ml-train",
        gpus=8,
        waited_h=0,
        created_delta_s=-600,
        priority_class="training",
        priority=1000,
        truth=(near_miss("GPU050", "pending 10 min"), near_miss("GPU051", "pending 10 min")),
    ),
)
"""Pods pending for GPUs (GPU050, GPU051), placed after every other case."""


def plant_pending(b: Builder) -> None:
    """The pending pods (`PENDING`), and the PriorityClass that never preempts which one of
    them uses."""
    b.api["priorityclasses"].append(
        {
            "name": "research-high",
            "value": 5000,
            "preemptionPolicy": "Never",
            "description": "Urgent research runs that must not evict others.",
        }
    )
    for w in PENDING:
        tolerations = [
            {"key": k, "operator": "Equal", "value": v, "effect": "NoSchedule"}
            for k, v in w.tolerations
        ]
        selector = {"nvidia.com/gpu.product": w.product} if w.product else {}
        p = workloads.pending(
            b,
            w.namespace,
            f"{w.job}-0",
            ("Job", w.job),
            max(0, b.H - w.waited_h),
            w.gpus,
            priority_class=w.priority_class,
            priority=w.priority,
            preemption_policy=w.preemption_policy,
            node_selector=selector,
            tolerations=tolerations,
            created_delta_s=w.created_delta_s,
            pending_message=scheduler_message(b, w.gpus, selector, w.tolerations),
        )
        for t in w.truth:
            b.plant(t.code, p, t.near_miss)


def word_pending(b: Builder) -> None:
    """Word the scheduler messages of the pending pods (`PENDING`) again over the finished
    cluster: the steps planted after `plant_pending` add nodes (and pods on them) that the
    scheduler tries too, and a message over the nodes of its time would miss them. Draws
    nothing from the random stream."""
    for w in PENDING:
        selector = {"nvidia.com/gpu.product": w.product} if w.product else {}
        for p in b.pods:
            if (p.namespace, p.name, p.phase) == (w.namespace, f"{w.job}-0", "Pending"):
                p.pending_message = scheduler_message(b, w.gpus, selector, w.tolerations)


def scheduler_message(
    b: Builder, gpus: int, selector: Mapping[str, str], tolerated: tuple[tuple[str, str], ...]
) -> str:
    """The message the scheduler gives a pod of `gpus` GPUs that fits no node, as its filters
    run (taints, then node selector, then resources: each node reports its first failure) and
    as it words them (the counts of each reason, sorted as text)."""
    used: dict[str, int] = {}
    for p in b.pods:
        if p.alive and p.node and p.phase != "Pending":
            used[p.node] = used.get(p.node, 0) + p.gpus
    reasons: dict[str, int] = {}
    for n in b.nodes:
        taint = next(
            (
                t
                for t in n.taints
                if t["effect"] in ("NoSchedule", "NoExecute")
                and (t["key"], t["value"]) not in tolerated
            ),
            None,
        )
        if taint is not None:
            why = f"node(s) had untolerated taint {{{taint['key']}: {taint['value']}}}"
        elif any(n.labels.get(k) != v for k, v in selector.items()):
            why = "node(s) didn't match Pod's node affinity/selector"
        elif int(n.capacity.get("nvidia.com/gpu", "0")) - used.get(n.name, 0) < gpus:
            why = "Insufficient nvidia.com/gpu"
        else:
            # A node has room now: the message is the one of its last attempt, before it had.
            why = "Insufficient nvidia.com/gpu"
        reasons[why] = reasons.get(why, 0) + 1
    listed = ", ".join(sorted(f"{n} {why}" for why, n in reasons.items()))
    return f"0/{len(b.nodes)} nodes are available: {listed}."

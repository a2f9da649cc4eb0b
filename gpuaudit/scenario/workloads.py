"""Workload kinds of a scenario (training gangs, inference servers, notebooks, MIG servers,
nightly batch, pods of any owner, pending pods) and the background that fills the base
cluster's free capacity with them.

Each kind draws from the builder's random stream in a fixed order (first what it needs to
decide whether it fits, then the pod's identifiers, then its activity and framebuffer): keep
that order, the scenario's bytes depend on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from gpuaudit.scenario.builder import Arr, Builder
from gpuaudit.scenario.cluster import NodeSpec, PodSpec, SlotSpec

DAILY_H = 72
"""Hours of data GPU003 needs to see a daily pattern: nightly batch is one of its cases only
in windows at least this long."""


class Activity(Protocol):
    """How busy a workload's GPUs are, hour by hour."""

    def draw(self, b: Builder, n: int, h0: int) -> tuple[Arr, Arr | None]:
        """`n` hourly activity levels from hour index `h0` on, and the GPU_UTIL levels when
        they do not follow the activity (else None)."""
        ...


@dataclass(frozen=True)
class Pattern:
    """One of `Builder.pattern`'s named patterns with its parameters; `util`, when set, is a
    flat GPU_UTIL reading instead of one that follows the activity."""

    name: str
    params: Mapping[str, float] = field(default_factory=dict)
    util: float | None = None

    def draw(self, b: Builder, n: int, h0: int) -> tuple[Arr, Arr | None]:
        act = b.pattern(self.name, n, h0, **self.params)
        return act, None if self.util is None else np.full(n, self.util)


def pattern(name: str, util: float | None = None, **params: float) -> Pattern:
    """`Pattern(name, params, util)` with the parameters as keywords."""
    return Pattern(name, params, util)


@dataclass(frozen=True)
class IdleTail:
    """Busy, then idle for the last `hours` hours (at most a `share`-th of the span)."""

    hours: int
    share: int = 1

    def draw(self, b: Builder, n: int, h0: int) -> tuple[Arr, Arr | None]:
        return b.pattern("tail", n, h0, idle_last=min(self.hours, n // self.share)), None


@dataclass(frozen=True)
class Hang:
    """Busy, then stuck in a collective for the last `hours` hours (at most a `share`-th of
    the span): 8 % SM activity while GPU_UTIL reads 97 %."""

    hours: int
    share: int = 1

    def draw(self, b: Builder, n: int, h0: int) -> tuple[Arr, Arr | None]:
        hang = min(self.hours, n // self.share)
        act = b.pattern("busy", n, h0)
        act[n - hang :] = 0.08
        util = np.round(np.clip(act * 115, 0, 100))
        util[n - hang :] = 97
        return act, util


# ---- workload kinds ------------------------------------------------------------------
def place(
    b: Builder,
    pod: PodSpec,
    slots: list[SlotSpec],
    h0: int,
    act: Arr,
    fb_level: float,
    util: Arr | None = None,
) -> None:
    """`pod` holds `slots` from hour `h0` to the window's end, each at a copy of `act`."""
    for slot in slots:
        b.hold(slot, pod, h0, b.H, act + 0, fb_level, util)


def pending(
    b: Builder, ns: str, name: str, owner: tuple[str, str], created_h: int, gpus: int, **kw: Any
) -> PodSpec:
    """A pod waiting for `gpus` GPUs, bound to no node."""
    p = b.pod(ns, name, b.nodes[0], "main", owner, created_h, gpus=gpus, phase="Pending", **kw)
    p.node = ""
    return p


def gang(b: Builder, nodes: list[NodeSpec], idx: int) -> None:
    """A PyTorchJob pretraining on all GPUs of `nodes`: a master and one worker per further
    node."""
    job = f"llm-pretrain-{idx:03d}"
    ns = "ml-train"
    h0 = int(b.rng.integers(0, 12))
    job_uid = b.ids.uuid()
    b.pytorchjobs.append({"namespace": ns, "name": job, "uid": job_uid, "workers": len(nodes) - 1})
    for j, node in enumerate(nodes):
        role = "master" if j == 0 else "worker"
        labels = {
            "training.kubeflow.org/job-name": job,
            "training.kubeflow.org/replica-type": role,
            "training.kubeflow.org/replica-index": str(0 if j == 0 else j - 1),
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
        }
        if j == 0:
            labels["training.kubeflow.org/job-role"] = "master"
        p = b.pod(
            ns,
            f"{job}-{role}-{0 if j == 0 else j - 1}",
            node,
            "pytorch",
            ("PyTorchJob", job),
            h0,
            gpus=8,
            labels=labels,
            priority_class="training",
            priority=1000,
            owner_uid=job_uid,
        )
        act = b.pattern("busy", b.H - h0, h0)
        place(b, p, b.free_slots(node), h0, act, 0.82)


def inference(
    b: Builder,
    node: NodeSpec,
    deploy: str,
    gpus: int,
    activity: Activity,
    ns: str = "serving",
    h0: int = 0,
) -> PodSpec | None:
    """An inference server (a Deployment's pod) on `gpus` whole GPUs, if the node has them."""
    free = b.free_slots(node)
    if len(free) < gpus:
        return None
    p = b.deployment_pod(ns, deploy, node, h0, gpus=gpus, priority_class="serving", priority=10000)
    act, util = activity.draw(b, b.H - h0, h0)
    for slot in free[:gpus]:
        b.hold(slot, p, h0, b.H, act + 0, float(b.rng.uniform(0.3, 0.55)), util)
    return p


def notebook(
    b: Builder, node: NodeSpec, user: str, activity: Activity, h0: int = 0
) -> PodSpec | None:
    """A Kubeflow notebook (a StatefulSet's pod) on one GPU, if the node has one free."""
    free = b.free_slots(node)
    if not free:
        return None
    p = b.pod(
        "notebooks",
        f"{user}-0",
        node,
        "notebook",
        ("StatefulSet", user),
        h0,
        gpus=1,
        labels={"notebook-name": user, "statefulset": user},
    )
    act, util = activity.draw(b, b.H - h0, h0)
    b.hold(free[0], p, h0, b.H, act, float(b.rng.uniform(0.15, 0.4)), util)
    return p


def mig_server(
    b: Builder, node: NodeSpec, deploy: str, profile: str, activity: Activity, h0: int = 0
) -> PodSpec | None:
    """An inference server on one MIG slice of `profile`, if the node has one free."""
    free = [s for s in b.free_slots(node) if s.profile == profile]
    if not free:
        return None
    p = b.deployment_pod(
        "serving", deploy, node, h0, mig={profile: 1}, priority_class="serving", priority=10000
    )
    act, util = activity.draw(b, b.H - h0, h0)
    b.hold(free[0], p, h0, b.H, act, float(b.rng.uniform(0.5, 0.8)), util)
    return p


def nightly(
    b: Builder, node: NodeSpec, name: str, activity: Activity, h0: int = 0
) -> PodSpec | None:
    """A batch Deployment on one GPU, if the node has one free."""
    free = b.free_slots(node)
    if not free:
        return None
    p = b.deployment_pod("batch", name, node, h0, gpus=1, priority_class="batch", priority=100)
    act, util = activity.draw(b, b.H - h0, h0)
    b.hold(free[0], p, h0, b.H, act, 0.35, util)
    return p


def custom(
    b: Builder,
    node: NodeSpec,
    ns: str,
    owner: tuple[str, str],
    gpus: int,
    activity: Activity,
    fb_level: float,
    profile: str = "",
    h0: int = 0,
    **podkw: Any,
) -> PodSpec | None:
    """A pod named after its owner on `gpus` whole GPUs, or on one MIG slice of `profile`, if
    the node has them free. The activity is drawn first, whether it fits or not."""
    act, util = activity.draw(b, b.H - h0, h0)
    free = b.free_slots(node)
    if profile:
        free = [sl for sl in free if sl.profile == profile]
    if len(free) < max(1, gpus):
        return None
    p = b.pod(
        ns,
        owner[1],
        node,
        "main",
        owner,
        h0,
        gpus=0 if profile else gpus,
        mig={profile: 1} if profile else {},
        **podkw,
    )
    place(b, p, free[: max(1, gpus)], h0, act, fb_level, util)
    return p


# ---- the background --------------------------------------------------------------------
def fill(b: Builder) -> None:
    """Background workloads on the capacity the base cases left: pretraining gangs on whole
    H100 nodes, chat servers and notebooks on the other H100s, MIG servers, vision servers and
    nightly batch on the L40S nodes."""
    h100 = b.of_kind("h100")
    _pretraining(b, h100)
    _chat_and_notebooks(b, h100)
    _mig_servers(b, b.of_kind("a100-mig"))
    _vision_and_batch(b, b.of_kind("l40s"))


def _pretraining(b: Builder, h100: list[NodeSpec]) -> None:
    rest = [n for n in h100 if b.free_slots(n) and len(b.free_slots(n)) == 8]
    b.rng.shuffle(rest)  # type: ignore[arg-type,unused-ignore]
    g = 0
    while len(rest) >= 2 and g < max(1, len(h100) // 4):
        size = int(min(len(rest), b.rng.choice([2, 3, 4])))
        gang(b, rest[:size], g)
        rest = rest[size:]
        g += 1


def _chat_and_notebooks(b: Builder, h100: list[NodeSpec]) -> None:
    for i, node in enumerate(h100):
        while len(b.free_slots(node)) >= 2 and b.rng.random() < 0.8:
            name = f"chat-{i:03d}-{len(b.free_slots(node))}"
            base = float(b.rng.uniform(0.1, 0.2))
            peak = float(b.rng.uniform(0.5, 0.8))
            inference(b, node, name, 2, pattern("diurnal", base=base, peak=peak))
        if b.free_slots(node) and b.rng.random() < 0.5:
            notebook(b, node, f"nb-{i:03d}", pattern("notebook"))


def _mig_servers(b: Builder, a100: list[NodeSpec]) -> None:
    for i, node in enumerate(a100):
        for j, prof in enumerate(("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb") * 8):
            if b.rng.random() < 0.75:
                name = f"mig-{prof.split('.')[0]}-{i:03d}-{j:02d}"
                mig_server(b, node, name, prof, pattern("diurnal", base=0.1, peak=0.7))


def _vision_and_batch(b: Builder, l40s: list[NodeSpec]) -> None:
    for i, node in enumerate(l40s):
        for j in range(4):
            r = b.rng.random()
            if r < 0.55:
                act = pattern("diurnal", base=0.2, peak=0.75)
                inference(b, node, f"vision-{i:03d}-{j}", 1, act, ns="vision")
            elif r < 0.7:
                p = nightly(b, node, f"report-batch-{i:03d}-{j}", pattern("nightly"))
                if p and b.H >= DAILY_H:
                    b.plant("GPU003", p)

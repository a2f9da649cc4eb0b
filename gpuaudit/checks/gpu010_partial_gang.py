"""GPU010 partial gang: members of a distributed job hold GPUs while the job cannot run.

What it finds
    - Gangs that need N members running together (a Volcano or coscheduling PodGroup's
      minMember, a Kueue Workload's podSet counts, a PyTorchJob's or MPIJob's replicas, a
      JobSet's replicated jobs, a LeaderWorkerSet group's size, a RayCluster's workers) of which
      fewer run, while the running ones hold GPUs; also gangs whose scheduler says so (a PodGroup
      in phase Unknown or Scheduling, a Kueue Workload Admitted without PodsReady).
    - Complete gangs whose members started far apart: the first ones held their GPUs waiting.

Why it matters
    A distributed job makes no progress until every rank has joined: the running members sit
    in their first collective, holding GPUs, until the missing ones are placed, often for
    hours, and two partial gangs can hold the GPUs each other needs (a deadlock).

How it decides
    Gangs and their sizes come from, in this order (a pod joins the first gang that claims
    it): a Volcano PodGroup (pods by the annotation `scheduling.k8s.io/group-name`, size
    `spec.minMember`); a coscheduling PodGroup (label `scheduling.x-k8s.io/pod-group`, size
    `spec.minMember`); a Kueue Workload (admitted podSet counts); the job object itself
    (PyTorchJob or MPIJob replicas or `minAvailable`, JobSet replicas x parallelism,
    LeaderWorkerSet group size, RayCluster head plus workers); else pod labels alone
    (`kueue.x-k8s.io/pod-group-total-count`, `leaderworkerset.sigs.k8s.io/size`). For each gang
    with a member running on a node that requests GPUs or holds them in DCGM, at the window's
    end:
    - partial: running plus succeeded members are fewer than the gang needs (or, size unknown,
      its scheduler reports a partial-gang signal), and it has been so for at least
      `checks.gang_partial_min_minutes` (default 30). It has been incomplete since the latest
      of the window's start, the first running member's start and the creation of the newest
      pending member. Impact: the GPU-hours the running members held since then (their DCGM
      samples x the scrape interval in the buckets ending after it; requested GPUs x hours for
      members DCGM does not show), priced per model.
      Severity: high from 100 GPU-hours, medium from 24, low below.
    - slow start: a complete gang (the size known) whose members' start times (pod
      `status.startTime`) spread over more than `checks.gang_start_spread_minutes` (default
      30), the last start inside the window. Impact: each member's GPUs x the time from its
      start (or the window's start) to the last member's start. Severity: medium from 24
      GPU-hours, low below.

What to do
    Schedule the job as a gang, so that its members start together or not at all: Volcano
    (PodGroup minMember), the scheduler-plugins coscheduling plugin (PodGroup with
    `scheduleTimeoutSeconds`), or Kueue with `waitForPodsReady` enabled and a timeout so an
    admitted Workload whose pods cannot all start is evicted and requeued. Otherwise size the
    job (world size, replicas) to what the cluster can place at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from gpuaudit.checks.base import MODEST_WASTE, WASTE, gpu_word, short_model
from gpuaudit.checks.contract import minutes
from gpuaudit.checks.findings import Finding, Impact, Resource
from gpuaudit.inventory import Capability, Views, grouped
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.derived import held_hours

if TYPE_CHECKING:
    import pandas as pd

CODE = "GPU010"
TITLE = "Partial gang"
REQUIRES = (Capability.KUBERNETES_PODS,)
VIEWS = ("pod_hours", "pod_hourly", "per_pod")
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


@dataclass(frozen=True)
class Thresholds:
    gang_partial_min_minutes: float = minutes(30.0)
    """Minutes a gang must have run short of members before it is reported."""
    gang_start_spread_minutes: float = minutes(30.0)
    """Minutes between the first and the last start of a complete gang's members from which
    the early members' wait is reported."""


def _num(v: object) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _recommendation(kind: str, ns: str, name: str, needed: int | None) -> str:
    target = f"{kind} {ns}/{name}"
    size = f" to what fits ({needed} members need room at once)" if needed else ""
    if kind == "Workload":
        return (
            f"Enable Kueue's waitForPodsReady with a timeout (e.g. 10m, requeuing after it) so "
            f"{target}, admitted but not ready, releases its GPUs instead of holding them; or "
            f"shrink the job{size}."
        )
    if kind == "PodGroup":
        return (
            f"Free the GPUs {target}'s running members hold (delete them, or let the PodGroup's "
            f"scheduleTimeoutSeconds end the attempt), find why the rest cannot be placed, and "
            f"shrink minMember and the job{size} if the cluster cannot hold it."
        )
    return (
        f"Run {target} under gang scheduling so its members start together or not at all "
        "(Volcano or the coscheduling plugin via runPolicy.schedulingPolicy, or Kueue with "
        f"waitForPodsReady and a timeout), or shrink the job{size}."
    )


class _Member(NamedTuple):
    """One gang member pod: the columns this check reads, as plain values."""

    namespace: object
    pod: object
    node: object
    phase: object
    gpu_request: float
    started: object
    created: object


def _members(pods: pd.DataFrame) -> dict[str, list[_Member]]:
    """Gang id -> its member pods, in pod order (pods with a missing gang id are left out, as a
    groupby leaves them out)."""
    members = pods[pods[C.GANG] != ""]
    cols = [C.NAMESPACE, C.POD, C.NODE, C.PHASE, C.GPU_REQUEST, C.STARTED, C.CREATED]
    by_gang: dict[str, list[_Member]] = {}
    for gid, *values in zip(*(members[c].tolist() for c in [C.GANG, *cols]), strict=True):
        if gid is not None and gid == gid:
            by_gang.setdefault(str(gid), []).append(_Member(*values))
    return by_gang


def _pod_hourly_of(views: Views, namespace: str, names: set[str]) -> pd.DataFrame:
    """`views.pod_hourly` (namespace, pod, bucket end, GPUs, GPU-hours held) for the pods
    `names` of `namespace` only.

    Their held hourly rows are found through the holdings and grouped as that view groups
    them, so each bucket's GPUs add the same numbers (up to the last bit of their sums) and the
    rows come in the same order; the whole view is made only when hourly rows cannot be placed
    in the holdings."""
    import pandas as pd

    inv = views.inv
    positions = grouped.holding_positions(inv, inv.hourly)
    if positions is None:
        ph = views.pod_hourly
        out: pd.DataFrame = ph[(ph[C.NAMESPACE] == namespace) & ph[C.POD].isin(list(names))]
        return out
    h = inv.holdings
    mine = (h[C.NAMESPACE] == namespace) & h[C.POD].isin(list(names))
    keep = (h[C.HELD] & (h[C.HOURS] > 0) & mine).to_numpy(dtype=bool)
    rows = np.flatnonzero(keep[positions])
    pos = positions[rows]
    frac = h[C.FRACTION].to_numpy()[pos]
    hr = pd.DataFrame(
        {
            C.NAMESPACE: h[C.NAMESPACE].take(pos).to_numpy(),
            C.POD: h[C.POD].take(pos).to_numpy(),
            C.TS: inv.hourly[C.TS].to_numpy()[rows],
            C.FRACTION: frac,
            C.GPU_HOURS: frac * held_hours(inv)[rows],
        }
    )
    g = hr.groupby([C.NAMESPACE, C.POD, C.TS], sort=True)
    out = g.agg(gpus=(C.FRACTION, "sum"), gpu_hours=(C.GPU_HOURS, "sum")).reset_index()
    return out


@dataclass(frozen=True)
class _Gang:
    """One gang at the window's end: what it is, its members by phase, and the GPUs its
    running members hold."""

    kind: str
    namespace: str
    name: str
    needed: int | None
    signal: str
    phase: str
    source: str
    running: list[_Member]
    succeeded: list[_Member]
    pending: list[_Member]
    gpus: dict[str, float]
    """Running member pod -> GPUs it holds (DCGM, else its request)."""
    model: str

    @property
    def held(self) -> float:
        return sum(self.gpus.values())

    @property
    def starts(self) -> list[float]:
        return [s for s in (_num(r.started) for r in self.running) if s is not None]


def _gangs(views: Views) -> list[_Gang]:
    """Every gang with a running member that holds GPUs."""
    inv = views.inv
    by_gang = _members(inv.pods)
    if not by_gang:
        return []
    pp = views.per_pod
    pp = pp[pp[C.POD].isin([str(r.pod) for rs in by_gang.values() for r in rs])]
    per_pod = {
        (ns, pod): (float(g), str(m))
        for ns, pod, g, m in zip(
            pp[C.NAMESPACE].tolist(),
            pp[C.POD].tolist(),
            pp[C.POD_GPUS].tolist(),
            pp[C.MODEL].tolist(),
            strict=True,
        )
    }
    products = views.node_products
    out: list[_Gang] = []
    for gang in inv.gangs.itertuples(index=False):
        m = by_gang.get(str(getattr(gang, C.GANG_ID)))
        if m is None:
            continue
        running = [r for r in m if r.phase == "Running" and r.node != ""]
        gpus: dict[str, float] = {}
        models: dict[str, str] = {}
        for r in running:
            pod = str(r.pod)
            key = (str(r.namespace), pod)
            if key in per_pod:
                gpus[pod], models[pod] = per_pod[key]
            elif float(r.gpu_request) > 0:
                gpus[pod] = float(r.gpu_request)
                models[pod] = products.get(str(r.node), "")
        if not gpus:
            continue  # nothing held: a waiting gang wastes no GPU
        needed = _num(getattr(gang, C.NEEDED))
        out.append(
            _Gang(
                kind=str(getattr(gang, C.GANG_KIND)),
                namespace=str(getattr(gang, C.NAMESPACE)),
                name=str(getattr(gang, C.GANG_NAME)),
                needed=int(needed) if needed is not None else None,
                signal=str(getattr(gang, C.GANG_SIGNAL)),
                phase=str(getattr(gang, C.GANG_PHASE)),
                source=str(getattr(gang, C.GANG_SOURCE)),
                running=running,
                succeeded=[r for r in m if r.phase == "Succeeded"],
                pending=[r for r in m if r.phase == "Pending"],
                gpus=gpus,
                model=next((v for v in models.values() if v), ""),
            )
        )
    return out


def _partial(views: Views, cfg: Thresholds, g: _Gang) -> Finding | None:
    """The finding of a gang running short of members long enough, else None."""
    inv = views.inv
    start_w, end_w = inv.window_start, inv.window_end
    created = [c for c in (_num(r.created) for r in g.pending) if c is not None]
    since = max([start_w, min(g.starts, default=start_w), *created])
    if end_w - since < cfg.gang_partial_min_minutes * 60:
        return None
    ns, kind, name, needed = g.namespace, g.kind, g.name, g.needed
    sub = _pod_hourly_of(views, ns, set(g.gpus))
    mine = sub[(sub[C.NAMESPACE] == ns) & sub[C.POD].isin(list(g.gpus)) & (sub[C.TS] > since)]
    gpu_hours = float(mine[C.GPU_HOURS].sum())
    seen = set(mine[C.POD])
    for pod, n in g.gpus.items():
        if pod not in seen:
            began = _num(next(r.started for r in g.running if r.pod == pod))
            gpu_hours += n * (end_w - max(since, began or since)) / 3600.0
    hours = (end_w - since) / 3600.0
    have = len(g.running) + len(g.succeeded)
    missing = f"{needed - have} missing" if needed is not None else "members missing"
    size = f"{have} of the {needed} members it needs" if needed else f"{have} members"
    told = f"; its scheduler reports it: {g.signal}" if g.signal else ""
    message = (
        f"{kind} {ns}/{name} runs {size} ({missing}, {len(g.pending)} pending) while "
        f"the running ones hold {gpu_word(g.held)} ({short_model(g.model)}): "
        f"{gpu_hours:,.0f} GPU-hours held over {hours:.1f} h with the gang "
        f"incomplete{told}."
    )
    return Finding(
        code=CODE,
        severity=WASTE(gpu_hours),
        resource=Resource(kind, ns, name, "", g.held),
        message=message,
        impact=Impact(gpu_hours=gpu_hours, cost=gpu_hours * views.price(g.model)),
        recommendation=_recommendation(kind, ns, name, needed),
        pods=tuple(f"{ns}/{r.pod}" for r in g.running),
        evidence={
            "needed": needed,
            "running": sorted(str(r.pod) for r in g.running),
            "succeeded": sorted(str(r.pod) for r in g.succeeded),
            "pending": sorted(str(r.pod) for r in g.pending),
            "gpus_held": round(g.held, 4),
            "incomplete_hours": round(hours, 2),
            "scheduler_signal": g.signal,
            "gang_phase": g.phase,
            "size_from": g.source,
            "threshold_minutes": cfg.gang_partial_min_minutes,
        },
    )


def _slow_start(views: Views, cfg: Thresholds, g: _Gang) -> Finding | None:
    """The finding of a complete gang whose members started far apart, else None."""
    start_w = views.inv.window_start
    starts = g.starts
    if g.needed is None or len(starts) < 2:
        return None
    last, first = max(starts), min(starts)
    spread_min = (last - first) / 60.0
    if spread_min <= cfg.gang_start_spread_minutes or last <= start_w:
        return None
    wait = 0.0
    for r in g.running:
        began = _num(r.started)
        n = g.gpus.get(str(r.pod), 0.0)
        if began is not None:
            wait += n * max(0.0, last - max(began, start_w)) / 3600.0
    kind, ns, name = g.kind, g.namespace, g.name
    message = (
        f"{kind} {ns}/{name}'s {len(starts)} members started {spread_min / 60:.1f} h apart: "
        f"the early ones held their GPUs {wait:,.1f} GPU-hours waiting for the last."
    )
    return Finding(
        code=CODE,
        severity=MODEST_WASTE(wait),
        resource=Resource(kind, ns, name, "", g.held),
        message=message,
        impact=Impact(gpu_hours=wait, cost=wait * views.price(g.model)),
        recommendation=(
            f"Start {kind} {ns}/{name}'s members together: schedule it as a gang "
            "(Volcano, the coscheduling plugin, or Kueue with waitForPodsReady) so no "
            "member is bound before all can be, and pre-pull its image on the nodes it "
            "uses so late members do not start slower."
        ),
        pods=tuple(f"{ns}/{r.pod}" for r in g.running),
        evidence={
            "needed": g.needed,
            "members": sorted(str(r.pod) for r in g.running),
            "start_spread_minutes": round(spread_min, 1),
            "gpus_held": round(g.held, 4),
            "waiting_gpu_hours": round(wait, 2),
            "size_from": g.source,
            "threshold_minutes": cfg.gang_start_spread_minutes,
        },
    )


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    inv = views.inv
    if inv.pods.empty or inv.gangs.empty:
        return []
    out: list[Finding] = []
    for g in _gangs(views):
        partial = (
            len(g.running) + len(g.succeeded) < g.needed if g.needed is not None else bool(g.signal)
        )
        found = _partial(views, cfg, g) if partial else _slow_start(views, cfg, g)
        if found is not None:
            out.append(found)
    return out

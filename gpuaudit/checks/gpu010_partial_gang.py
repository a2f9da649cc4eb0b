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
    Gangs and their sizes come from the objects and pod labels listed in
    `gpuaudit.inventory.gangs`. For each gang with a member running on a node that requests
    GPUs or holds them in DCGM, at the window's end:
    - partial: running plus succeeded members are fewer than the gang needs (or, size unknown,
      its scheduler reports a partial-gang signal), and it has been so for at least
      `checks.gang_partial_min_minutes` (default 30). It has been incomplete since the latest
      of the window's start, the first running member's start and the creation of the newest
      pending member. Impact: the GPU-hours the running members held since then (DCGM hourly
      holdings; requested GPUs x hours for members DCGM does not show), priced per model.
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

from gpuaudit.checks.base import gpu_word, short_model
from gpuaudit.findings import Finding, Impact, Resource, Severity
from gpuaudit.inventory import Inventory, views
from gpuaudit.inventory import columns as C
from gpuaudit.settings import Settings

CODE = "GPU010"
TITLE = "Partial gang"
REQUIRES = ("kubernetes.pods",)


def _severity(gpu_hours: float, high: bool = True) -> Severity:
    if high and gpu_hours >= 100:
        return Severity.HIGH
    if gpu_hours >= 24:
        return Severity.MEDIUM
    return Severity.LOW


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


def run(inv: Inventory, settings: Settings) -> list[Finding]:
    cfg = settings.checks
    pods, gangs = inv.pods, inv.gangs
    if pods.empty or gangs.empty:
        return []
    members = pods[pods[C.GANG] != ""]
    if members.empty:
        return []
    per_pod = views.per_pod(inv, settings.prices).set_index([C.NAMESPACE, C.POD])
    ph = views.pod_hourly(inv)
    bucket_h = inv.step_s / 3600.0
    products = views.node_products(inv)
    start_w, end_w = inv.window_start, inv.window_end
    by_gang = {str(gid): m for gid, m in members.groupby(C.GANG, sort=False)}
    out: list[Finding] = []
    for gang in gangs.itertuples(index=False):
        m = by_gang.get(str(getattr(gang, C.GANG_ID)))
        if m is None:
            continue
        running = m[(m[C.PHASE] == "Running") & (m[C.NODE] != "")]
        succeeded = m[m[C.PHASE] == "Succeeded"]
        pending = m[m[C.PHASE] == "Pending"]
        gpus: dict[str, float] = {}
        models: dict[str, str] = {}
        for r in running.itertuples(index=False):
            pod = str(getattr(r, C.POD))
            key = (str(getattr(r, C.NAMESPACE)), pod)
            if key in per_pod.index:
                gpus[pod] = float(per_pod.at[key, views.POD_GPUS])
                models[pod] = str(per_pod.at[key, C.MODEL])
            elif float(getattr(r, C.GPU_REQUEST)) > 0:
                gpus[pod] = float(getattr(r, C.GPU_REQUEST))
                models[pod] = products.get(str(getattr(r, C.NODE)), "")
        if not gpus:
            continue  # nothing held: a waiting gang wastes no GPU
        kind, ns, name = (
            str(getattr(gang, C.GANG_KIND)),
            str(getattr(gang, C.NAMESPACE)),
            str(getattr(gang, C.GANG_NAME)),
        )
        needed_f = _num(getattr(gang, C.NEEDED))
        needed = int(needed_f) if needed_f is not None else None
        signal = str(getattr(gang, C.GANG_SIGNAL))
        have = len(running) + len(succeeded)
        partial = have < needed if needed is not None else bool(signal)
        model = next((v for v in models.values() if v), "")
        price = views.model_price(model, settings.prices)
        held = sum(gpus.values())
        starts = [s for s in (_num(v) for v in running[C.STARTED]) if s is not None]
        if partial:
            created = [c for c in (_num(v) for v in pending[C.CREATED]) if c is not None]
            since = max([start_w, min(starts, default=start_w), *created])
            if end_w - since < cfg.gang_partial_min_minutes * 60:
                continue
            mine = ph[(ph[C.NAMESPACE] == ns) & ph[C.POD].isin(list(gpus)) & (ph[C.TS] > since)]
            gpu_hours = float(mine["gpus"].sum()) * bucket_h
            for pod, g in gpus.items():
                if pod not in set(mine[C.POD]):
                    began = _num(running.loc[running[C.POD] == pod, C.STARTED].iloc[0])
                    gpu_hours += g * (end_w - max(since, began or since)) / 3600.0
            hours = (end_w - since) / 3600.0
            missing = f"{needed - have} missing" if needed is not None else "members missing"
            size = f"{have} of the {needed} members it needs" if needed else f"{have} members"
            told = f"; its scheduler reports it: {signal}" if signal else ""
            message = (
                f"{kind} {ns}/{name} runs {size} ({missing}, {len(pending)} pending) while "
                f"the running ones hold {gpu_word(held)} ({short_model(model)}): "
                f"{gpu_hours:,.0f} GPU-hours held over {hours:.1f} h with the gang "
                f"incomplete{told}."
            )
            out.append(
                Finding(
                    code=CODE,
                    severity=_severity(gpu_hours),
                    resource=Resource(kind, ns, name, "", held),
                    message=message,
                    impact=Impact(gpu_hours=gpu_hours, cost=gpu_hours * price),
                    recommendation=_recommendation(kind, ns, name, needed),
                    evidence={
                        "needed": needed,
                        "running": sorted(str(p) for p in running[C.POD]),
                        "succeeded": sorted(str(p) for p in succeeded[C.POD]),
                        "pending": sorted(str(p) for p in pending[C.POD]),
                        "gpus_held": round(held, 4),
                        "incomplete_hours": round(hours, 2),
                        "scheduler_signal": signal,
                        "gang_phase": str(getattr(gang, C.GANG_PHASE)),
                        "size_from": str(getattr(gang, C.GANG_SOURCE)),
                        "threshold_minutes": cfg.gang_partial_min_minutes,
                    },
                )
            )
            continue
        if needed is None or len(starts) < 2:
            continue
        last, first = max(starts), min(starts)
        spread_min = (last - first) / 60.0
        if spread_min <= cfg.gang_start_spread_minutes or last <= start_w:
            continue
        wait = 0.0
        for r in running.itertuples(index=False):
            began = _num(getattr(r, C.STARTED))
            g = gpus.get(str(getattr(r, C.POD)), 0.0)
            if began is not None:
                wait += g * max(0.0, last - max(began, start_w)) / 3600.0
        message = (
            f"{kind} {ns}/{name}'s {len(starts)} members started {spread_min / 60:.1f} h apart: "
            f"the early ones held their GPUs {wait:,.1f} GPU-hours waiting for the last."
        )
        out.append(
            Finding(
                code=CODE,
                severity=_severity(wait, high=False),
                resource=Resource(kind, ns, name, "", held),
                message=message,
                impact=Impact(gpu_hours=wait, cost=wait * price),
                recommendation=(
                    f"Start {kind} {ns}/{name}'s members together: schedule it as a gang "
                    "(Volcano, the coscheduling plugin, or Kueue with waitForPodsReady) so no "
                    "member is bound before all can be, and pre-pull its image on the nodes it "
                    "uses so late members do not start slower."
                ),
                evidence={
                    "needed": needed,
                    "members": sorted(str(p) for p in running[C.POD]),
                    "start_spread_minutes": round(spread_min, 1),
                    "gpus_held": round(held, 4),
                    "waiting_gpu_hours": round(wait, 2),
                    "size_from": str(getattr(gang, C.GANG_SOURCE)),
                    "threshold_minutes": cfg.gang_start_spread_minutes,
                },
            )
        )
    return out

"""GPU090 idle queue quota: queue quota that sat idle, cannot be honoured, or starved a peer.

What it finds
    Kueue ClusterQueues (and their cohorts and ResourceFlavors) and Volcano Queues whose GPU
    quota does not match what happened on the GPUs:
    - idle quota: a queue held quota far above its use all window, fenced off from every other
      queue (a Kueue queue outside a cohort, or the part of its quota it may not lend; a
      Volcano queue's guarantee);
    - quota that cannot be honoured: a Kueue nominal quota for a flavor above what the
      flavor's nodes can allocate (one queue's, or all queues' together), or a Volcano queue
      that deserves or is guaranteed more GPUs than the cluster's nodes allocate;
    - starvation: a Kueue queue has Workloads waiting for GPU quota while a cohort peer's quota
      for the same flavor sat idle and the peer would not lend it.
    - KAI Scheduler queues (`scheduling.run.ai`): deserved quota that sat idle while a sibling
      queue's pods waited for GPUs (reclaimable quota), child queues that together deserve
      more than their parent, and a queue that deserves more than the cluster's nodes allocate.

Why it matters
    Quota is a promise, not hardware: Kueue admits by quota and is not aware of the nodes, and
    Volcano reserves a queue's guarantee whether or not it is used. Idle quota fenced off from
    the other teams keeps their jobs queued while GPUs idle; quota above the nodes admits jobs
    whose pods then wait for GPUs that do not exist (with priorities and fair sharing silently
    wrong); and a peer that does not lend leaves a team waiting next to idle quota.

How it decides
    Per queue, flavor and GPU resource (`nvidia.com/gpu`, `nvidia.com/mig-<profile>`) over the
    window: the quota (Kueue
    `nominalQuota`; Volcano `deserved`, else `guarantee`); admitted (Kueue Workloads, from
    their `QuotaReserved`/`Admitted` to `Finished` times, `podSetAssignments[].resourceUsage`,
    and at least the ClusterQueue's `status.flavorsReservation` at the scan; Volcano: what its
    pods held, and at least its `status.allocated`); held and busy (DCGM, the queue's pods on
    the flavor's nodes; busy where the pod's hourly mean activity reaches
    `checks.idle_activity`, default 0.05); and held by any pod of the queue's namespaces on the
    flavor's nodes (an upper bound that survives deleted Workloads). Use is the most of the
    three at any one time.
    - Idle quota, in windows of at least `checks.quota_min_hours` (default 24): the quota the
      nodes can honour (the lesser of quota and what the flavor's nodes allocate; Volcano: the
      guarantee) is at least twice the use (use at most `checks.quota_used_share`, default
      0.5, of it), and the fenced part of it (Kueue: all of it outside a cohort or in a cohort
      with no other member, else `nominalQuota - lendingLimit`, none without a lending limit;
      Volcano: the guarantee)
      exceeds the use by at least `checks.quota_min_idle` (default 1) GPUs or slices, rounded
      down: the reclaimable quota. Impact: reclaimable GPUs x window hours, priced per GPU
      product of the flavor's nodes. Severity: medium from 24 GPU-hours, low below.
    - Cannot be honoured: a ClusterQueue's `nominalQuota` for a flavor above what the flavor's
      schedulable nodes (all its `nodeLabels`, not cordoned) allocate of the resource; else
      the ClusterQueues' and Cohorts' quotas for a flavor together above it (one finding on the
      ResourceFlavor); a Volcano queue's `deserved` or `guarantee` above what the cluster's
      schedulable nodes allocate. Impact: none counted (a risk, not waste: listed with the
      risks). Severity: medium. Needs the ResourceFlavors list; without it this rule is not
      applied to Kueue. For a flavor's total, the advice names the ClusterQueues to lower and
      to what. Each queue's own peak is the most it admitted
      at one instant; the peak that matters for quotas lowered together is what the queues
      admitted at once: per hour of the window, each queue's most admitted at one instant of
      it, added over the queues (queues that peak in different hours share). First the queues
      with the most unused quota (`nominalQuota` less their own peak, rounded up) go down to
      their own peak; if the total still exceeds the nodes, the queues of one cohort in which
      none has a `lendingLimit` may go below their own peaks (by no more than their
      `borrowingLimit`), the largest quotas first, but their quota together never below what
      they admitted at once: each then borrows the rest from the others' idle quota at its
      peak. Cohorts' own quota is kept. The evidence lists the changes (`quota_changes`:
      queue, kind, from, to, peak, borrows_at_peak), each queue's own peak
      (`queue_peaks_admitted`), the flavor's concurrent peak and its hour
      (`peak_admitted_together`, `peak_admitted_together_at`) and each sharing cohort's
      (`cohort_peaks_admitted_together`). Where that still does not fit: if more was admitted
      at once than the nodes allocate, the nodes are too few and it asks for nodes, with the
      figures (`short_after_changes`); if not, it says the queues could fit by sharing in one
      cohort. A queue whose quota or use could not be read is left out of the total (which is
      then a lower bound, "at least") and of the advice (its cohort does not share), and the
      advice says so.
    - Starvation: a Workload has waited at least `checks.pending_min_minutes` (default 30)
      for quota of its ClusterQueue (its request is above the queue's quota left free by the
      Workloads admitted at the window's end) and could borrow the rest (`borrowingLimit`
      unset or large enough), while cohort peers with quota for the same flavor and resource
      used less than their quota in every hour of the wait, that idle quota covers the rest,
      and their `lendingLimit` kept it from the queue. One finding per queue. Impact: the
      waiting GPUs x hours waited, priced. Severity: high from 4 hours, medium below.
    Kueue rules need the Workloads list and Volcano rules the PodGroups list; a queue system
    whose list was not read is left out. A queue with a GPU quantity (of its quota or status,
    or of a Workload or PodGroup admitted to it) that is no Kubernetes quantity, is negative
    or is above `GPUAUDIT_MAX_QUEUE_QUOTA` (default 10,000,000) is not judged, nor are the
    cohort waits it takes part in, and flavor totals count it out (a Cohort's own quota
    likewise): a
    warning names the object and the field, and the audit is incomplete. Workloads deleted
    before the scan are not seen; the namespaces' use keeps that from reading as idle quota.
    KAI queues (applied when KAI's Queues and PodGroups were read): a queue's GPU `quota` (its
    deserved share; -1, unlimited, is not judged), its `limit` and `overQuotaWeight` are in the
    evidence; its use per hour is what its pods held
    (fractions at their share) and at least its `status.allocated`, a parent's with its
    children's. KAI lends idle deserved quota over quota, so idle quota alone is no finding:
    - Reclaimable quota: pods of a queue have waited at least `checks.pending_min_minutes`
      (`PodScheduled` False, `Unschedulable`; whole GPUs, `gpu-fraction` shares and
      `gpu-memory` requests over the smallest GPU memory of the nodes, as KAI counts a pending
      request, by PodGroup) while a sibling (same `parentQueue`; the top-level queues are
      siblings) used less than its quota by at least `checks.quota_min_idle` GPUs in every hour
      of the wait.
      One finding per idle queue. Impact: the idle quota (rounded down), at most what waits,
      x the longest wait, priced. Severity: high from 4 hours, medium below.
    - Children over parent: the children's quotas add up to more than their parent's (KAI's
      admission webhook warns of it). A risk, no impact counted. Severity: medium.
    - Cannot be honoured: a queue's quota above what the cluster's schedulable nodes allocate
      of `nvidia.com/gpu`. A risk. Severity: medium.

What to do
    Lower the idle quota to what the queue used at its peak, or let its cohort borrow it
    (`lendingLimit` unset or raised; for Volcano, move `guarantee` to `deserved`). Keep every
    flavor's quota within what its nodes allocate (add nodes matching the flavor's
    `nodeLabels`, or lower `nominalQuota`: the queues with the most unused quota first, each
    to no less than its peak admitted, and queues of one cohort that peak in different hours
    together to no less than what they admitted at once, as the finding lists them; where
    more was admitted at once than the nodes allocate, add nodes), and give queues that wait
    next to idle peers a share of that quota or a lending path in the cohort.
    For KAI, move deserved quota from the idle queue to the one that waits (or raise the
    waiting queue's `limit`), and keep the children's quota within their parent's.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np
import numpy.typing as npt

from gpuaudit.checks import kai_quota as kai_rules
from gpuaudit.checks import quota_cuts
from gpuaudit.checks.base import MODEST_WASTE, WAITING, gpu_word
from gpuaudit.checks.contract import fraction, gpus, hours, minutes
from gpuaudit.checks.findings import Category, Finding, Impact, Resource, Severity
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory.queue_usage import Pending, QueueUsage
from gpuaudit.inventory.queues import GPU, KUEUE, VOLCANO

CODE = "GPU090"
TITLE = "Idle queue quota"
REQUIRES = (
    Capability.QUEUES,
    Capability.KUBERNETES_PODS,
    Capability.KUBERNETES_NODES,
    Capability.ACTIVITY,
)
VIEWS = ("pod_hours",)
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""

EPS = 1e-9
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Thresholds:
    idle_activity: float = fraction(0.05)
    """Mean engine activity (ratio) below which a GPU counts as idle."""
    quota_used_share: float = fraction(0.5)
    """Peak use, as a share of the quota, at or below which quota counts as idle."""
    quota_min_idle: float = gpus(1.0)
    """Fewest idle, fenced GPUs (or MIG slices) of a queue's quota worth reporting."""
    quota_min_hours: float = hours(24.0)
    """Shortest window (hours) over which quota is judged idle."""
    pending_min_minutes: float = minutes(30.0)
    """Minutes a Workload must have waited for GPU quota."""


def _units(n: float, resource: str) -> str:
    """`8 GPUs`, `3 nvidia.com/mig-1g.10gb slices`."""
    if resource == GPU:
        return gpu_word(n)
    k = f"{n:g}"
    return f"{k} {resource} slice{'' if abs(n - 1) < EPS else 's'}"


def _where(u: QueueUsage) -> str:
    return f"flavor {u.flavor}" if u.flavor else "the cluster"


def _owner(u: QueueUsage, rule: str, subject: str = "") -> str:
    """A fingerprint owner: one finding per queue (or flavor), rule and quota line."""
    return f"{subject or u.kind + '/' + u.queue}:{rule}:{u.flavor}/{u.resource}"


def _figures(u: QueueUsage) -> dict[str, Any]:
    """The figures of a quota line, for the evidence."""
    return {
        "system": u.system,
        "queue": u.queue,
        "cohort": u.cohort,
        "flavor": u.flavor,
        "resource": u.resource,
        "quota": u.quota,
        "guarantee": u.guarantee,
        "borrowing_limit": u.borrowing_limit,
        "lending_limit": u.lending_limit,
        "fenced": u.fenced,
        "flavor_allocatable": u.allocatable,
        "flavor_nodes": u.flavor_nodes,
        "quota_gpu_hours": round(u.quota_gpu_hours, 2),
        "admitted_gpu_hours": round(u.admitted_gpu_hours, 2),
        "held_gpu_hours": round(u.held_gpu_hours, 2),
        "busy_gpu_hours": round(u.busy_gpu_hours, 2),
        "peak_admitted": u.peak_admitted,
        "peak_held": u.peak_held,
        "peak_held_in_namespaces": u.peak_namespaces,
        "namespaces": list(u.namespaces),
        "window_hours": round(u.hours, 2),
    }


# ---- idle quota -------------------------------------------------------------------------


def _idle(views: Views, u: QueueUsage, cfg: Thresholds) -> Finding | None:
    promised = u.guarantee if u.system == VOLCANO else u.quota
    honoured = min(promised, u.allocatable) if u.allocatable is not None else promised
    if u.hours < cfg.quota_min_hours or honoured <= EPS:
        return None
    use = u.peak_use
    if use > cfg.quota_used_share * honoured + EPS:
        return None
    reclaim = math.floor(max(0.0, min(u.fenced, honoured) - use) + EPS)
    if reclaim < cfg.quota_min_idle or reclaim < 1:
        return None
    gpu_hours = reclaim * u.unit_gpus * u.hours
    cost = gpu_hours * views.price(u.product)
    # What to keep: the honourable quota less the idle part (quota the nodes cannot honour is
    # reported on its own).
    target = honoured - reclaim
    if u.system == VOLCANO:
        message = (
            f"Volcano queue {u.queue} guarantees {_units(u.guarantee, u.resource)}, but its use "
            f"peaked at {_units(use, u.resource)} over the {u.hours:.0f} h window "
            f"({u.held_gpu_hours:.0f} GPU-hours held, {u.busy_gpu_hours:.0f} busy); "
            f"{_units(reclaim, u.resource)} of guarantee sat reserved for nobody."
        )
        rec = (
            f"Lower spec.guarantee.resource {u.resource} of Volcano queue {u.queue} from "
            f"{u.guarantee:g} to {target:g} and keep its fair share in "
            "spec.deserved: a guarantee is never lent to other queues."
        )
    else:
        fence = (
            "no other queue may borrow it (no cohort)"
            if not u.cohort
            else f"its cohort {u.cohort} may not borrow it (lendingLimit {u.lending_limit:g})"
            if u.lending_limit is not None
            else f"its cohort {u.cohort} has no other queue to lend it to"
        )
        message = (
            f"ClusterQueue {u.queue} holds {_units(u.quota, u.resource)} of quota in "
            f"{_where(u)}, but what it admitted or used peaked at {_units(use, u.resource)} "
            f"over the {u.hours:.0f} h window ({u.admitted_gpu_hours:.0f} of "
            f"{u.quota_gpu_hours:.0f} quota GPU-hours admitted, {u.busy_gpu_hours:.0f} busy); "
            f"{_units(reclaim, u.resource)} of it sat idle and {fence}."
        )
        lend = (
            f"raise its lendingLimit to {u.lending_limit + reclaim:g} (or remove it) so "
            f"cohort {u.cohort} can borrow the idle quota"
            if u.cohort and u.lending_limit is not None
            else "put it in a cohort with lendingLimit so other queues can borrow the idle quota"
        )
        rec = (
            f"Lower nominalQuota of {u.resource} in {_where(u)} of ClusterQueue {u.queue} from "
            f"{u.quota:g} to {target:g}, or {lend}."
        )
    return Finding(
        code=CODE,
        severity=MODEST_WASTE(gpu_hours),
        resource=Resource(u.kind, "", u.queue, "", reclaim * u.unit_gpus),
        message=message,
        impact=Impact(gpu_hours=gpu_hours, cost=cost),
        recommendation=rec,
        evidence={
            "rule": "idle_quota",
            "owner": _owner(u, "idle"),
            **_figures(u),
            "peak_use": use,
            "honoured_quota": honoured,
            "recommended_quota": target,
            "reclaimable": reclaim,
            "threshold_used_share": cfg.quota_used_share,
            "threshold_min_idle": cfg.quota_min_idle,
        },
    )


# ---- quota that cannot be honoured -------------------------------------------------------


def _unhonoured(u: QueueUsage) -> Finding | None:
    if u.allocatable is None:
        return None
    promised = u.quota if u.system == KUEUE else max(u.quota, u.guarantee)
    excess = promised - u.allocatable
    if excess <= EPS:
        return None
    one = u.flavor_nodes == 1
    nodes = f"{u.flavor_nodes} schedulable node{'' if one else 's'} allocate{'s' if one else ''}"
    if u.system == KUEUE:
        nodes = (
            "cluster has no ResourceFlavor of that name"
            if u.flavor_missing
            else f"flavor's {nodes} only {_units(u.allocatable, u.resource)}"
            if u.flavor_nodes
            else "flavor's nodeLabels match no schedulable node"
        )
        message = (
            f"ClusterQueue {u.queue} has a nominal quota of {_units(u.quota, u.resource)} in "
            f"flavor {u.flavor}, but the {nodes}: {_units(excess, u.resource)} of quota cannot "
            "be honoured, so Kueue admits Workloads whose pods then wait for GPUs."
        )
        rec = (
            f"Lower nominalQuota of {u.resource} in flavor {u.flavor} of ClusterQueue "
            f"{u.queue} to {u.allocatable:g}, or add nodes that match the flavor's nodeLabels."
        )
        what = "nominal_quota"
    else:
        what = "guarantee" if u.guarantee >= u.quota else "deserved"
        message = (
            f"Volcano queue {u.queue} {'is guaranteed' if what == 'guarantee' else 'deserves'} "
            f"{_units(promised, u.resource)}, but the cluster's {nodes} only "
            f"{_units(u.allocatable, u.resource)}: {_units(excess, u.resource)} cannot be "
            "honoured, so its fair share and reclaim decisions rest on GPUs that do not exist."
        )
        rec = (
            f"Lower spec.{what} {u.resource} of Volcano queue {u.queue} to at most "
            f"{u.allocatable:g} (the queues' shares together should match the cluster)."
        )
    return Finding(
        code=CODE,
        severity=Severity.MEDIUM,
        resource=Resource(u.kind, "", u.queue, "", excess * u.unit_gpus),
        message=message,
        impact=Impact(gpu_hours=0.0, cost=0.0),
        category=Category.RISK,
        recommendation=rec,
        evidence={
            "rule": "quota_not_honoured",
            "owner": _owner(u, "not_honoured"),
            **_figures(u),
            "promised": promised,
            "promised_field": what,
            "excess": excess,
        },
    )


def _own_peaks(us: list[QueueUsage]) -> dict[str, float]:
    """Each queue's own peak admitted, rounded up."""
    return {u.queue: max(0.0, math.ceil(u.peak_admitted - EPS)) for u in us}


def _hour_end(u: QueueUsage, hour: int | None) -> str | None:
    """The end of the window's hour `hour` (RFC 3339, UTC); None without it."""
    if hour is None:
        return None
    ts = u.bucket_start + hour * u.step_s
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _names(parts: list[tuple[str, float]]) -> str:
    return ", ".join(f"{n} ({v:g})" for n, v in parts[:6]) + (" ..." if len(parts) > 6 else "")


def _flavor_totals(views: Views, lines: list[QueueUsage]) -> list[Finding]:
    """ResourceFlavors whose ClusterQueues and Cohorts together promise more than the flavor's
    nodes allocate, where no single ClusterQueue does; with the queues to lower, and to what.
    A quota nobody could read is left out of the total (it can only add to it) and out of the
    advice."""
    by_line: dict[tuple[str, str], list[QueueUsage]] = defaultdict(list)
    unknown: dict[tuple[str, str], list[str]] = defaultdict(list)
    every: dict[tuple[str, str], list[QueueUsage]] = defaultdict(list)
    for u in lines:
        if u.system != KUEUE or u.allocatable is None:
            continue
        every[(u.flavor, u.resource)].append(u)
        if u.unaudited:
            unknown[(u.flavor, u.resource)].append(f"{u.kind} {u.queue}")
        else:
            by_line[(u.flavor, u.resource)].append(u)
    cohort_quota: dict[tuple[str, str], list[tuple[str, float]]] = defaultdict(list)
    for c in views.inv.queues.cohorts.values():
        for q in c.quotas:
            if c.unaudited:
                unknown[(q.flavor, q.resource)].append(f"Cohort {c.name}")
            elif q.nominal > 0:
                cohort_quota[(q.flavor, q.resource)].append((f"Cohort {c.name}", q.nominal))
    out: list[Finding] = []
    for (flavor, resource), us in sorted(by_line.items()):
        alloc = us[0].allocatable
        assert alloc is not None
        if any(u.quota > alloc + EPS for u in us):
            continue
        n_nodes, unit = us[0].flavor_nodes, us[0].unit_gpus
        both, hour = quota_cuts.together(us)
        us = [u for u in us if u.quota > 0]
        cohorts = cohort_quota.get((flavor, resource), [])
        parts = [(f"ClusterQueue {u.queue}", u.quota) for u in us] + cohorts
        total = sum(v for _, v in parts)
        if total <= alloc + EPS or len(parts) < 2:
            continue
        excess = total - alloc
        cut = quota_cuts.plan(us, excess, every[(flavor, resource)])
        changes, short = cut.changes, cut.short
        blind = sorted(set(unknown.get((flavor, resource), [])))
        at_least = "at least " if blind else ""
        message = (
            f"ResourceFlavor {flavor} is promised {at_least}{_units(total, resource)} of quota "
            f"by {_names(parts)}, but its {n_nodes} nodes allocate only "
            f"{_units(alloc, resource)}: {at_least}{_units(excess, resource)} of quota cannot "
            "be honoured when every queue claims its share."
        )
        cohort_of = {u.queue: u.cohort for u in us}
        lowered = ", ".join(
            f"{c['queue']} from {c['from']:g} to {c['to']:g} (peak admitted {c['peak']:g}"
            + (
                f", borrowing {c['borrows_at_peak']:g} from cohort {cohort_of[c['queue']]} at "
                "its peak)"
                if c["borrows_at_peak"] > EPS
                else ")"
            )
            for c in changes
        )
        figures = f"{alloc:g} of {total:g} quota"
        peaks = sum(max(0.0, math.ceil(u.peak_admitted - EPS)) for u in us)
        at_once = max(0.0, math.ceil(both - EPS))
        after = sum(u.quota for u in us) - sum(c["from"] - c["to"] for c in changes)
        if short > EPS and after <= alloc + EPS:
            # The ClusterQueues fit at their peaks: the Cohorts' own quota is what is left over.
            rec = (
                (
                    f"Lower nominalQuota of {resource} in flavor {flavor}: {lowered}; "
                    if changes
                    else ""
                )
                + f"the Cohorts' own quota ({_names(cohorts)}) keeps "
                f"{_units(short, resource)} above what the flavor's nodes allocate "
                f"({figures}): lower it by {short:g}, or add nodes that match the flavor's "
                "nodeLabels."
            )
            rec = rec[0].upper() + rec[1:]
        elif short <= EPS:
            rec = (
                f"Lower nominalQuota of {resource} in flavor {flavor}: {lowered}; together "
                f"{excess:g} above what the flavor's nodes allocate ({figures}). Or add nodes "
                "that match the flavor's nodeLabels."
            )
            rec += "".join(
                f" Cohort {c}'s ClusterQueues peaked in different hours: together they admitted "
                f"at most {p:g} at once (their own peaks add up to "
                f"{sum(own for q, own in _own_peaks(us).items() if cohort_of[q] == c):g}), so "
                f"their quota together stays at or above {p:g} and each borrows the rest from "
                "the others' idle quota at its peak."
                for c, p in sorted(cut.shared.items())
            )
        elif at_once <= alloc + EPS:
            rec = (
                (
                    f"Lower nominalQuota of {resource} in flavor {flavor}: {lowered}; "
                    if changes
                    else ""
                )
                + f"that leaves {_units(short, resource)} above what the flavor's nodes allocate "
                f"({figures}), though its ClusterQueues admitted at most {at_once:g} at once "
                f"(their own peaks, in different hours, add up to {peaks:g}): to lower their "
                f"quota together to no less than {at_once:g}, put them in one cohort in which "
                "none has a lendingLimit, so that each borrows the others' idle quota at its "
                f"peak; or add nodes that match the flavor's nodeLabels for {short:g}."
            )
            rec = rec[0].upper() + rec[1:]
        else:
            rec = (
                f"Add nodes that match the flavor's nodeLabels for at least "
                f"{_units(short, resource)}: the nodes are too few for what was admitted (the "
                f"ClusterQueues admitted up to {at_once:g} at once, the flavor's nodes "
                f"allocate {alloc:g}). "
                + (
                    f"Lowering nominalQuota of {resource} in flavor {flavor} to the peaks "
                    f"({lowered}) takes off only {excess - short:g} of the {excess:g} above "
                    f"what they allocate ({figures})."
                    if changes
                    else f"No ClusterQueue's quota is above its peak admitted ({figures})."
                )
            )
        if cohorts and (short <= EPS or peaks > alloc + EPS):
            rec += f" The advice keeps the Cohorts' own quota ({_names(cohorts)})."
        if blind:
            rec += (
                f" It leaves out {', '.join(blind[:6])}{' ...' if len(blind) > 6 else ''}, "
                "whose quota or use could not be read; their quota comes on top."
            )
        out.append(
            Finding(
                code=CODE,
                severity=Severity.MEDIUM,
                resource=Resource("ResourceFlavor", "", flavor, "", excess * unit),
                message=message,
                impact=Impact(gpu_hours=0.0, cost=0.0),
                category=Category.RISK,
                recommendation=rec,
                evidence={
                    "rule": "flavor_quota_not_honoured",
                    "owner": f"ResourceFlavor/{flavor}:not_honoured:{flavor}/{resource}",
                    "flavor": flavor,
                    "resource": resource,
                    "promised_by": dict(parts),
                    "promised": total,
                    "flavor_allocatable": alloc,
                    "flavor_nodes": n_nodes,
                    "excess": excess,
                    "quota_changes": changes,
                    "short_after_changes": short,
                    "queue_peaks_admitted": {u.queue: u.peak_admitted for u in us},
                    "peak_admitted_together": both,
                    "peak_admitted_together_at": _hour_end(us[0], hour),
                    "cohort_peaks_admitted_together": cut.shared,
                    "left_out_unaudited": blind,
                },
            )
        )
    return out


# ---- starvation next to idle, unlent quota -------------------------------------------------


@dataclass(frozen=True)
class _Starved:
    wait: Pending
    line: QueueUsage
    shortfall: float
    peers: tuple[tuple[str, float, float | None], ...]
    """(peer queue, idle quota over the wait, its lendingLimit)."""


class _Peers:
    """The quota lines of one cohort, flavor and GPU resource, and what each queue among them
    left idle after a time: summed over every line once per hour of the window, so that the
    peers of one queue (all the others) cost one subtraction, not a scan of the cohort."""

    def __init__(self, lines: list[QueueUsage]) -> None:
        self.lines = lines
        self.unaudited = any(u.unaudited for u in lines)
        u0 = lines[0]
        self._ends = [u0.bucket_start + i * u0.step_s for i in range(len(u0.use_by_bucket))]
        names = [u.queue for u in lines]
        self._queues = sorted(set(names))
        self._queue = np.searchsorted(self._queues, names)
        self._quota = np.array([u.quota for u in lines], dtype="float64")
        self._lending = np.array(
            [np.nan if u.lending_limit is None else u.lending_limit for u in lines],
            dtype="float64",
        )
        # Per line, the most it used in any hour from hour k on (0 after the last).
        nb = len(self._ends)
        use = np.zeros((len(lines), nb + 1), dtype="float64")
        for i, u in enumerate(lines):
            use[i, : len(u.use_by_bucket)] = u.use_by_bucket
        self._after = np.maximum.accumulate(use[:, ::-1], axis=1)[:, ::-1]
        self._sums: dict[int, tuple[npt.NDArray[Any], ...]] = {}

    def hour(self, ts: float) -> int:
        """How many of the window's hours ended at or before `ts` (the hours
        `QueueUsage.use_since(ts)` leaves out)."""
        return bisect.bisect_right(self._ends, ts)

    def _idle(self, k: int) -> tuple[Floats, Floats, Floats, npt.NDArray[np.bool_]]:
        """Per line after the first `k` hours: idle quota, what of it the line may lend, what
        it may not, and whether a whole unit of it was fenced off; lines with less than one
        unit idle count for nothing."""
        idle = self._quota - self._after[:, k]
        some = idle >= 1 - EPS
        lend = np.where(np.isnan(self._lending), idle, np.fmin(idle, self._lending))
        lend = np.where(some, lend, 0.0)
        fenced = np.where(some, idle - lend, 0.0)
        named = fenced >= 1 - EPS
        return idle, lend, np.where(named, fenced, 0.0), named

    def sums(self, k: int, queue: str) -> tuple[float, float, int]:
        """What the peers of `queue` (the other queues) could lend after the window's first `k`
        hours, the idle quota they fenced off, and how many of their lines fenced at least one
        unit."""
        if k not in self._sums:
            _, lend, fenced, named = self._idle(k)
            n = len(self._queues)
            self._sums[k] = (
                np.bincount(self._queue, weights=lend, minlength=n),
                np.bincount(self._queue, weights=fenced, minlength=n),
                np.bincount(self._queue, minlength=n, weights=named.astype("float64")).astype(
                    "int64"
                ),
            )
        lend_q, fenced_q, named_q = self._sums[k]
        i = bisect.bisect_left(self._queues, queue)
        return (
            float(lend_q.sum() - lend_q[i]),
            float(fenced_q.sum() - fenced_q[i]),
            int(named_q.sum() - named_q[i]),
        )

    def named(self, k: int, queue: str) -> tuple[tuple[str, float, float | None], ...]:
        """(peer queue, idle quota, its lendingLimit) of the peers of `queue` that fenced off
        at least one unit of idle quota after the first `k` hours."""
        idle, _, _, named = self._idle(k)
        return tuple(
            (u.queue, float(idle[i]), u.lending_limit)
            for i in np.flatnonzero(named).tolist()
            if (u := self.lines[i]).queue != queue
        )


def _starved(u: QueueUsage, p: Pending, peers: _Peers, lendable_pool: float) -> _Starved | None:
    """Why `p` waits, when it waits for quota that idle peers would not lend."""
    shortfall = p.quantity - max(0.0, u.quota - u.admitted_now)
    room = math.inf if u.borrowing_limit is None else u.borrowing_limit
    if shortfall <= EPS or shortfall > room + EPS:
        return None
    k = peers.hour(p.since)
    lend, fenced, named = peers.sums(k, u.queue)
    lendable = lendable_pool + lend
    if not named or lendable >= shortfall - EPS or lendable + fenced < shortfall - EPS:
        return None
    return _Starved(p, u, shortfall, peers.named(k, u.queue))


def _starvation(views: Views, lines: list[QueueUsage], cfg: Thresholds) -> list[Finding]:
    inv = views.inv
    end = inv.window_end
    pools: dict[tuple[str, str, str], float] = defaultdict(float)
    unknown: set[str] = set()
    for c in inv.queues.cohorts.values():
        for q in c.quotas:
            pools[(c.name, q.flavor, q.resource)] += q.nominal
        if c.unaudited:
            unknown.add(c.name)
    # Each cohort's quota lines by flavor and resource, gathered once.
    grouped: dict[tuple[str, str, str], list[QueueUsage]] = defaultdict(list)
    for u in lines:
        if u.system == KUEUE and u.cohort:
            grouped[(u.cohort, u.flavor, u.resource)].append(u)
    groups = {key: _Peers(us) for key, us in grouped.items()}
    found: dict[str, list[_Starved]] = defaultdict(list)
    seen: set[tuple[str, str, str, str]] = set()
    for u in lines:
        if u.system != KUEUE or not u.cohort or not u.pending:
            continue
        group = (u.cohort, u.flavor, u.resource)
        peers = groups[group]
        # A cohort with a quota nobody could read leaves what its peers could lend unknown.
        if peers.unaudited or u.cohort in unknown:
            continue
        for p in u.pending:
            key = (u.queue, p.namespace, p.name, p.resource)
            if key in seen or (end - p.since) < cfg.pending_min_minutes * 60:
                continue
            s = _starved(u, p, peers, pools.get(group, 0.0))
            if s is not None:
                seen.add(key)
                found[u.queue].append(s)
    return [_starvation_finding(views, queue, ss, end) for queue, ss in sorted(found.items())]


def _starvation_finding(views: Views, queue: str, ss: list[_Starved], end: float) -> Finding:
    u = ss[0].line
    waited = max((end - s.wait.since) / 3600.0 for s in ss)
    gpu_hours = sum(s.wait.quantity * s.line.unit_gpus * (end - s.wait.since) / 3600.0 for s in ss)
    gpu_hours = min(gpu_hours, sum(s.wait.quantity * s.line.unit_gpus for s in ss) * u.hours)
    first = ss[0]
    peers = sorted({(n, i, lim) for s in ss for n, i, lim in s.peers})
    peer_text = ", ".join(
        f"{n} ({_units(math.floor(i + EPS), u.resource)} idle, lendingLimit {lim:g})"
        for n, i, lim in peers[:3]
    )
    waits = ", ".join(
        f"{s.wait.namespace}/{s.wait.name} ({_units(s.wait.quantity, s.wait.resource)}, "
        f"{(end - s.wait.since) / 3600.0:.1f} h)"
        for s in ss[:3]
    ) + (" ..." if len(ss) > 3 else "")
    message = (
        f"ClusterQueue {queue} has Workloads waiting for {u.resource} quota in {_where(u)} "
        f"({waits}) while cohort {u.cohort} peers kept idle quota they would not lend: "
        f"{peer_text}."
    )
    rec = (
        f"Raise the lendingLimit of {', '.join(n for n, _, _ in peers[:3])} for {u.resource} in "
        f"{_where(u)} (or remove it) so {queue} can borrow their idle quota, or move quota to "
        f"{queue}."
    )
    return Finding(
        code=CODE,
        severity=WAITING(waited),
        resource=Resource("ClusterQueue", "", queue, "", first.wait.quantity * u.unit_gpus),
        message=message,
        impact=Impact(gpu_hours=gpu_hours, cost=gpu_hours * views.price(u.product)),
        recommendation=rec,
        evidence={
            "rule": "starved_next_to_idle_quota",
            "owner": _owner(u, "starved"),
            **_figures(u),
            "admitted_now": u.admitted_now,
            "waiting": [
                {
                    "workload": f"{s.wait.namespace}/{s.wait.name}",
                    "resource": s.wait.resource,
                    "quantity": s.wait.quantity,
                    "waited_hours": round((end - s.wait.since) / 3600.0, 2),
                    "shortfall": s.shortfall,
                }
                for s in ss
            ],
            "idle_peers": [
                {"queue": n, "idle_quota": i, "lending_limit": lim} for n, i, lim in peers
            ],
        },
    )


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    caps = views.inv.capabilities
    read = {
        KUEUE: Capability.KUBERNETES_KUEUE_WORKLOADS in caps,
        VOLCANO: Capability.KUBERNETES_VOLCANO_PODGROUPS in caps,
    }
    lines = [u for u in views.queue_usage(cfg.idle_activity) if read.get(u.system, False)]
    out = [
        f
        for u in lines
        if not u.unaudited
        for f in (_idle(views, u, cfg), _unhonoured(u))
        if f is not None
    ]
    return (
        out
        + _flavor_totals(views, lines)
        + _starvation(views, lines, cfg)
        + kai_rules.findings(views, cfg)
    )

"""GPU090's rules for KAI Scheduler queues (`scheduling.run.ai` Queues; the check's docstring
says what they find and how they decide): deserved quota that sat idle while a sibling queue's
pods waited for GPUs (reclaimable quota), child queues that together deserve more than their
parent, and a queue that deserves more than the cluster's nodes allocate.

KAI lends a queue's idle deserved quota to the others over quota and reclaims it when its own
jobs need it (`docs/domain.md`, KAI Scheduler), so idle quota is waste only where another queue
waits next to it: then the quota is with the wrong queue, or the waiting queue's `limit` keeps
it from borrowing. A parent queue's use is its own pods' and its children's, added hour by hour.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from gpuaudit.checks.base import WAITING, gpu_word
from gpuaudit.checks.findings import Category, Finding, Impact, Resource, Severity
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory.queue_usage import Pending, QueueUsage
from gpuaudit.inventory.queues import KAI, Quota

EPS = 1e-9


def _root(parent: str) -> str:
    return f"parent queue {parent}" if parent else "the top of the queue tree"


class _Tree:
    """The KAI quota lines, their queues' quota objects, and each queue's use with its
    children's, hour by hour."""

    def __init__(self, views: Views, lines: list[QueueUsage]) -> None:
        self.lines = {u.queue: u for u in lines}
        self.quota: dict[str, Quota] = {
            q.name: q.quotas[0] for q in views.inv.queues.queues if q.system == KAI and q.quotas
        }
        self.children: dict[str, list[str]] = defaultdict(list)
        for u in lines:
            if u.cohort and u.cohort != u.queue:
                self.children[u.cohort].append(u.queue)
        self._use: dict[str, list[float]] = {}
        self.tops = sorted(q for q, u in self.lines.items() if u.cohort not in self.lines)
        """The queues without a parent among the KAI queues: siblings of each other."""

    def use(self, queue: str, seen: frozenset[str] = frozenset()) -> list[float]:
        """Per hour of the window: what the queue and its descendants used."""
        if queue not in self._use:
            u = self.lines[queue]
            total = list(u.use_by_bucket)
            for child in self.children.get(queue, ()):
                if child in seen or child not in self.lines:
                    continue  # a cycle of parents: each queue once
                for i, v in enumerate(self.use(child, seen | {queue})):
                    if i < len(total):
                        total[i] += v
            self._use[queue] = total
        return self._use[queue]

    def use_since(self, queue: str, ts: float) -> float:
        u = self.lines[queue]
        vals = [v for i, v in enumerate(self.use(queue)) if u.bucket_start + i * u.step_s > ts]
        return max(vals, default=0.0)

    def figures(self, queue: str) -> dict[str, Any]:
        u, q = self.lines[queue], self.quota.get(queue)
        return {
            "system": KAI,
            "queue": queue,
            "parent_queue": u.cohort,
            "resource": u.resource,
            "quota": "unlimited" if q is not None and q.unlimited else u.quota,
            "limit": q.capability if q is not None else None,
            "over_quota_weight": q.over_quota_weight if q is not None else None,
            "allocated_now": u.admitted_now,
            "held_gpu_hours": round(u.held_gpu_hours, 2),
            "busy_gpu_hours": round(u.busy_gpu_hours, 2),
            "peak_held": u.peak_held,
            "namespaces": list(u.namespaces),
            "window_hours": round(u.hours, 2),
        }

    def judged(self, queue: str) -> bool:
        """Whether its quota is a number to judge (read, not unlimited)."""
        q = self.quota.get(queue)
        return queue in self.lines and not self.lines[queue].unaudited and not (q and q.unlimited)


def _limit(q: Quota | None) -> str:
    if q is None or q.capability is None:
        return "no limit"
    return f"limit {q.capability:g}"


def _reclaimable(views: Views, t: _Tree, cfg: Any) -> list[Finding]:
    """Per idle queue: its siblings' waits next to its idle deserved quota."""
    end = views.inv.window_end
    found: dict[str, list[tuple[QueueUsage, Pending, float]]] = defaultdict(list)
    for u in t.lines.values():
        for p in u.pending:
            if (end - p.since) < cfg.pending_min_minutes * 60:
                continue
            for peer in t.children.get(u.cohort, []) if u.cohort in t.lines else t.tops:
                if peer == u.queue or not t.judged(peer) or t.lines[peer].quota <= EPS:
                    continue
                idle = t.lines[peer].quota - t.use_since(peer, p.since)
                if idle >= max(1.0, cfg.quota_min_idle) - EPS:
                    found[peer].append((u, p, idle))
    return [_reclaim_finding(views, t, peer, waits) for peer, waits in sorted(found.items())]


def _reclaim_finding(
    views: Views, t: _Tree, peer: str, waits: list[tuple[QueueUsage, Pending, float]]
) -> Finding:
    end = views.inv.window_end
    p_line = t.lines[peer]
    idle = min(i for _, _, i in waits)
    reclaim = math.floor(idle + EPS)
    waited = max(min((end - p.since) / 3600.0, p_line.hours) for _, p, _ in waits)
    waiting = sum(p.quantity for _, p, _ in waits)
    gpu_hours = min(reclaim, waiting) * waited
    starved = sorted({u.queue for u, _, _ in waits})
    first = waits[0][0]
    wait_text = ", ".join(
        f"{p.namespace}/{p.name} in {u.queue} ({gpu_word(p.quantity)}, "
        f"{(end - p.since) / 3600.0:.1f} h)"
        for u, p, _ in waits[:3]
    ) + (" ..." if len(waits) > 3 else "")
    used = p_line.quota - idle
    limits = "; ".join(f"{q} has {_limit(t.quota.get(q))}" for q in starved[:3])
    message = (
        f"KAI queue {peer} deserves {gpu_word(p_line.quota)} but used at most "
        f"{gpu_word(used)} while its sibling queue{'s' if len(starved) > 1 else ''} under "
        f"{_root(p_line.cohort)} had pods waiting for GPUs ({wait_text}): "
        f"{gpu_word(reclaim)} of {peer}'s deserved quota sat idle and could be reclaimed "
        f"({limits})."
    )
    target = p_line.quota - reclaim
    rec = (
        f"Move deserved quota to {', '.join(starved)}: lower spec.resources.gpu.quota of "
        f"{peer} from {p_line.quota:g} to {target:g} and raise "
        f"{'theirs' if len(starved) > 1 else first.queue + chr(39) + 's'} by {reclaim:g}; "
        "where a waiting queue's spec.resources.gpu.limit is what stops it borrowing the idle "
        "quota, raise that limit (or set it to -1)."
    )
    return Finding(
        code="GPU090",
        severity=WAITING(waited),
        resource=Resource("Queue", "", peer, "", float(reclaim)),
        message=message,
        impact=Impact(gpu_hours=gpu_hours, cost=gpu_hours * views.price(p_line.product)),
        recommendation=rec,
        evidence={
            "rule": "kai_reclaimable_quota",
            "owner": f"Queue/{peer}:kai_reclaimable:/{p_line.resource}",
            **t.figures(peer),
            "idle_quota": idle,
            "reclaimable": reclaim,
            "recommended_quota": target,
            "waiting": [
                {
                    "queue": u.queue,
                    "podgroup": f"{p.namespace}/{p.name}",
                    "gpus": p.quantity,
                    "waited_hours": round((end - p.since) / 3600.0, 2),
                    "queue_limit": t.quota[u.queue].capability if u.queue in t.quota else None,
                    "queue_over_quota_weight": (
                        t.quota[u.queue].over_quota_weight if u.queue in t.quota else None
                    ),
                }
                for u, p, _ in waits
            ],
        },
    )


def _risk(
    t: _Tree, queue: str, rule: str, excess: float, message: str, rec: str, more: dict[str, Any]
) -> Finding:
    """A quota that cannot be honoured: a risk, no impact counted."""
    return Finding(
        code="GPU090",
        severity=Severity.MEDIUM,
        resource=Resource("Queue", "", queue, "", excess),
        message=message,
        impact=Impact(gpu_hours=0.0, cost=0.0),
        category=Category.RISK,
        recommendation=rec,
        evidence={
            "rule": rule,
            "owner": f"Queue/{queue}:{rule}:/{t.lines[queue].resource}",
            **t.figures(queue),
            **more,
        },
    )


def _children_over_parent(t: _Tree) -> list[Finding]:
    """Parents whose children together deserve more than the parent does."""
    out: list[Finding] = []
    for parent, kids in sorted(t.children.items()):
        if not t.judged(parent) or not kids or not all(t.judged(k) for k in kids):
            continue
        u = t.lines[parent]
        parts = sorted(((k, t.lines[k].quota) for k in kids), key=lambda kv: (-kv[1], kv[0]))
        total = sum(v for _, v in parts)
        excess = total - u.quota
        if excess <= EPS:
            continue
        names = ", ".join(f"{k} ({v:g})" for k, v in parts[:6]) + (" ..." if len(parts) > 6 else "")
        message = (
            f"KAI queue {parent} deserves {gpu_word(u.quota)}, but its child queues deserve "
            f"{gpu_word(total)} together ({names}): {gpu_word(excess)} of the children's "
            "quota cannot be honoured when they all claim it."
        )
        rec = (
            f"Lower the child queues' spec.resources.gpu.quota to {u.quota:g} in all, or raise "
            f"{parent}'s to {total:g} (KAI's admission webhook warns of this too)."
        )
        evidence = {"children": dict(parts), "children_quota": total, "excess": excess}
        out.append(_risk(t, parent, "kai_children_over_parent", excess, message, rec, evidence))
    return out


def _over_cluster(t: _Tree) -> list[Finding]:
    """Queues that deserve more GPUs than the cluster's schedulable nodes allocate."""
    out: list[Finding] = []
    for queue, u in sorted(t.lines.items()):
        if not t.judged(queue) or u.allocatable is None or u.quota <= u.allocatable + EPS:
            continue
        excess = u.quota - u.allocatable
        message = (
            f"KAI queue {queue} deserves {gpu_word(u.quota)}, but the cluster's "
            f"{u.flavor_nodes} schedulable nodes allocate only {gpu_word(u.allocatable)}: "
            f"{gpu_word(excess)} cannot be honoured, so its fair share and reclaim decisions "
            "rest on GPUs that do not exist."
        )
        rec = f"Lower spec.resources.gpu.quota of KAI queue {queue} to at most {u.allocatable:g}."
        evidence = {
            "cluster_allocatable": u.allocatable,
            "schedulable_nodes": u.flavor_nodes,
            "excess": excess,
        }
        out.append(_risk(t, queue, "kai_quota_not_honoured", excess, message, rec, evidence))
    return out


def findings(views: Views, cfg: Any) -> list[Finding]:
    """GPU090's findings on KAI queues (none unless KAI's Queues and PodGroups were read);
    `cfg`: GPU090's thresholds."""
    caps = views.inv.capabilities
    if not {Capability.KUBERNETES_KAI_QUEUES, Capability.KUBERNETES_KAI_PODGROUPS} <= caps:
        return []
    lines = [u for u in views.queue_usage(cfg.idle_activity) if u.system == KAI]
    if not lines:
        return []
    t = _Tree(views, lines)
    return _reclaimable(views, t, cfg) + _children_over_parent(t) + _over_cluster(t)

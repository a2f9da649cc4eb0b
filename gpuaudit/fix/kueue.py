"""Changes for Kueue quota (GPU090): each ClusterQueue's `nominalQuota` lowered to the figure
the finding names, as a JSON patch of the ClusterQueue as read.

`spec.resourceGroups` and the flavors and resources in it are lists, which a merge patch would
replace whole: the patch names the exact indices of the object as read instead, and `test`
operations guard them (the flavor's name, the resource's name and the quota as read), so that a
ClusterQueue changed since it was read makes the patch fail rather than lower another line.

The figures, from the finding's evidence: idle quota (`rule` `idle_quota`) to its
`recommended_quota`; a queue's quota above its flavor's nodes (`quota_not_honoured`) to
`flavor_allocatable` (none when the flavor matches no schedulable node: a quota of 0 would close
the queue); a flavor's total above its nodes (`flavor_quota_not_honoured`) to each ClusterQueue's
figure of `quota_changes`. Where several findings lower one quota line, the lowest figure wins
(it answers them all: none is below a queue's peak admitted). One patch per ClusterQueue, named
after the first of its findings in rank order. Volcano and KAI queues are
`gpuaudit.fix.queue_quota`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuaudit.checks.findings import Finding
from gpuaudit.fix.changes import (
    Change,
    ChangeKind,
    FindingFix,
    Target,
    answer,
    file_name,
    key,
)
from gpuaudit.fix.context import Context

CODES = ("GPU090",)
KEY = "kueue_clusterqueues"
OTHER_SYSTEMS = frozenset({"Volcano", "KAI"})


@dataclass(frozen=True)
class Lowering:
    queue: str
    flavor: str
    resource: str
    to: float
    finding: Finding


def changes(
    findings: Sequence[Finding], ctx: Context
) -> tuple[list[Change], dict[str, FindingFix]]:
    """One JSON patch per ClusterQueue to lower, and what each GPU090 finding gets."""
    fixes: dict[str, FindingFix] = {}
    by_queue: dict[str, list[Lowering]] = {}
    for f in findings:
        if str(f.evidence.get("system", "")) in OTHER_SYSTEMS:
            continue  # gpuaudit.fix.queue_quota answers Volcano and KAI queues
        lowerings, why = _lowerings(f)
        if not lowerings:
            fixes[key(f)] = FindingFix(None, "", None, why)
            continue
        for low in lowerings:
            by_queue.setdefault(low.queue, []).append(low)
    out: list[Change] = []
    for queue, lows in by_queue.items():
        change, why = _patch(queue, lows, ctx)
        answer(fixes, (low.finding for low in lows), change, why)
        if change is not None:
            out.append(change)
    return out, fixes


def _lowerings(f: Finding) -> tuple[list[Lowering], str]:
    ev = f.evidence
    rule = ev.get("rule")
    if rule == "flavor_quota_not_honoured":
        lows = [
            Lowering(str(c["queue"]), str(ev["flavor"]), str(ev["resource"]), float(c["to"]), f)
            for c in ev.get("quota_changes") or ()
            if isinstance(c, Mapping) and c.get("kind") == "ClusterQueue"
        ]
        return lows, "" if lows else "the finding names no ClusterQueue to lower"
    system = str(ev.get("system", ""))
    if system.lower() != "kueue":
        return [], f"gpuaudit writes no change for a {system or 'non-Kueue'} queue yet"
    queue, flavor, resource = str(ev["queue"]), str(ev["flavor"]), str(ev["resource"])
    if rule == "idle_quota":
        return [Lowering(queue, flavor, resource, float(ev["recommended_quota"]), f)], ""
    if rule == "quota_not_honoured":
        if not ev.get("flavor_nodes"):
            return [], (
                "the flavor matches no schedulable node: lowering the quota to 0 would close "
                "the queue; add nodes or correct the flavor's nodeLabels instead"
            )
        return [Lowering(queue, flavor, resource, float(ev["flavor_allocatable"]), f)], ""
    return [], "this GPU090 rule names no quota to change"


def _patch(queue: str, lows: list[Lowering], ctx: Context) -> tuple[Change | None, str]:
    read = ctx.inv.owners.named.get((KEY, "", queue))
    if read is None:
        state = ctx.inv.owners.states.get(KEY)
        if state is None or state == "ok" or state.startswith("incomplete"):
            return None, f"ClusterQueue {queue} is not among the ClusterQueues read"
        return None, f"ClusterQueue {queue} was not read ({state})"
    ops: list[dict[str, Any]] = []
    said: list[str] = []
    lines: dict[tuple[str, str], float] = {}
    for low in lows:
        line = (low.flavor, low.resource)
        lines[line] = min(lines.get(line, math.inf), low.to)
    for (flavor, resource), to in lines.items():
        where = _find(read, flavor, resource)
        if where is None:
            return None, (
                f"ClusterQueue {queue} as read has no nominalQuota of {resource} in flavor {flavor}"
            )
        path, was = where
        ops += [
            {"op": "test", "path": f"{path[0]}/name", "value": flavor},
            {"op": "test", "path": f"{path[1]}/name", "value": resource},
            {"op": "test", "path": f"{path[1]}/nominalQuota", "value": was},
            {"op": "replace", "path": f"{path[1]}/nominalQuota", "value": quantity(to)},
        ]
        said.append(f"{resource} in flavor {flavor} from {was} to {quantity(to)}")
    api = str(read.get("apiVersion") or "kueue.x-k8s.io/v1beta2")
    target = Target(api, "ClusterQueue", "", queue, "clusterqueues")
    findings = tuple({key(low.finding): low.finding for low in lows}.values())
    change = Change(
        kind=ChangeKind.PATCH,
        file=file_name(findings[0], f"clusterqueue-{queue}"),
        title=f"Lower the nominalQuota of ClusterQueue {queue}: {'; '.join(said)}",
        findings=findings,
        savings=ctx.per_week(findings),
        risk=(
            f"ClusterQueue {queue} admits fewer Workloads at once: when its demand comes back "
            "above the new quota its jobs wait longer (or borrow from its cohort, where they "
            "may). The patch tests the quota as read: it fails, changing nothing, on a "
            "ClusterQueue changed since."
        ),
        target=target,
        patch_type="json",
        body=ops,
        read=read,
    )
    return change, f"the patch lowers {', '.join(said)}"


def _find(
    read: Mapping[str, Any], flavor: str, resource: str
) -> tuple[tuple[str, str], Any] | None:
    """The JSON pointers of the flavor and of the resource entry in `spec.resourceGroups`, and
    the nominalQuota as read; None when the ClusterQueue has no such line."""
    spec = read.get("spec")
    groups = spec.get("resourceGroups") if isinstance(spec, Mapping) else None
    for i, g in enumerate(groups if isinstance(groups, list) else ()):
        flavors = g.get("flavors") if isinstance(g, Mapping) else None
        for j, fl in enumerate(flavors if isinstance(flavors, list) else ()):
            if not isinstance(fl, Mapping) or fl.get("name") != flavor:
                continue
            resources = fl.get("resources")
            for k, r in enumerate(resources if isinstance(resources, list) else ()):
                if isinstance(r, Mapping) and r.get("name") == resource and "nominalQuota" in r:
                    base = f"/spec/resourceGroups/{i}/flavors/{j}"
                    return (base, f"{base}/resources/{k}"), r["nominalQuota"]
    return None


def quantity(n: float) -> int | str:
    """A quota as a Kubernetes quantity: a whole number as an integer, else in milli-units."""
    if abs(n - round(n)) < 1e-9:
        return int(round(n))
    return f"{int(round(n * 1000))}m"

"""Changes for Volcano and KAI Scheduler queue quota (GPU090): each queue's quota field set to
the figure the finding names, as a JSON patch of the Queue as read.

Each patch replaces one field at its exact path and first `test`s the value as read, so that a
Queue changed since it was read makes the patch fail, changing nothing (the same guard as the
Kueue ClusterQueue patches, `gpuaudit.fix.kueue`).

Volcano (`scheduling.volcano.sh/v1beta1` Queue; GPU090's Volcano rules judge `deserved` and
`guarantee.resource`, never `capability`, an upper limit that promises nothing):

- idle quota (`rule` `idle_quota`): `spec.guarantee.resource[<resource>]` lowered to
  `recommended_quota` (a guarantee is reserved for the queue and never lent; its `deserved`,
  the share it may reclaim, is kept);
- quota that cannot be honoured (`quota_not_honoured`): each of `spec.deserved[<resource>]` and
  `spec.guarantee.resource[<resource>]` above `flavor_allocatable` (what the cluster's
  schedulable nodes allocate) lowered to it; none when no schedulable node allocates any (a
  quota of 0 would close the queue).

KAI (`scheduling.run.ai/v2` Queue, `spec.resources.gpu.quota`, its deserved GPUs):

- reclaimable quota (`kai_reclaimable_quota`): the idle queue's quota lowered to
  `recommended_quota`; where one queue waits next to it, that queue's quota raised by
  `reclaimable` (the quota moves: their parent's children deserve what they did), and its
  `limit` raised to the new quota where it was below it. Where several queues wait, only the
  lowering: how to share the quota among them is the team's choice;
- quota above the cluster (`kai_quota_not_honoured`): lowered to `cluster_allocatable` (none
  when no schedulable node allocates a GPU);
- children over their parent (`kai_children_over_parent`): none: which children to lower is a
  choice, not a figure.

Where several findings lower one field, the lowest figure wins; a field both lowered and raised
is only lowered. One patch per Queue, named after the first of its findings in rank order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuaudit.checks.findings import Finding
from gpuaudit.core.numbers import quantity as parse_quantity
from gpuaudit.fix.changes import (
    Change,
    ChangeKind,
    FindingFix,
    Savings,
    Target,
    answer,
    file_name,
    key,
)
from gpuaudit.fix.context import Context
from gpuaudit.fix.kueue import quantity

CODES = ("GPU090",)
SYSTEMS = {
    "Volcano": ("volcano_queues", "scheduling.volcano.sh/v1beta1"),
    "KAI": ("kai_queues", "scheduling.run.ai/v2"),
}
"""Queue system (the evidence's `system`) -> its list's resource key and API version."""


@dataclass(frozen=True)
class Edit:
    """One field of one queue set to a figure."""

    system: str
    queue: str
    path: tuple[str, ...]
    """The field's keys from the object's root (`spec`, `deserved`, `nvidia.com/gpu`)."""
    to: float
    finding: Finding
    raise_by: bool = False
    """`to` is added to the value as read (a KAI quota moved to the queue that waits)."""


def mine(f: Finding) -> bool:
    """Whether `f` is about a Volcano or KAI queue (the Kueue maker answers the others)."""
    return str(f.evidence.get("system", "")) in SYSTEMS


def changes(
    findings: Sequence[Finding], ctx: Context
) -> tuple[list[Change], dict[str, FindingFix]]:
    """One JSON patch per Volcano or KAI Queue to change, and what each of their GPU090
    findings gets (findings about Kueue queues are left to `gpuaudit.fix.kueue`)."""
    fixes: dict[str, FindingFix] = {}
    by_queue: dict[tuple[str, str], list[Edit]] = {}
    for f in findings:
        if not mine(f):
            continue
        edits, why = _edits(f)
        if not edits:
            fixes[key(f)] = FindingFix(None, "", None, why)
            continue
        for e in edits:
            by_queue.setdefault((e.system, e.queue), []).append(e)
    out: list[Change] = []
    for (system, queue), edits in by_queue.items():
        change, why = _patch(system, queue, edits, ctx)
        answer(fixes, (e.finding for e in edits), change, why)
        if change is not None:
            out.append(change)
    return out, fixes


def _edits(f: Finding) -> tuple[list[Edit], str]:
    ev = f.evidence
    system, rule = str(ev.get("system")), ev.get("rule")
    queue, resource = str(ev.get("queue", "")), str(ev.get("resource", ""))
    if system == "Volcano":
        deserved = ("spec", "deserved", resource)
        guarantee = ("spec", "guarantee", "resource", resource)
        if rule == "idle_quota":
            return [Edit(system, queue, guarantee, float(ev["recommended_quota"]), f)], ""
        if rule == "quota_not_honoured":
            if not ev.get("flavor_nodes") or not ev.get("flavor_allocatable"):
                return [], _closes
            to = float(ev["flavor_allocatable"])
            edits = [
                Edit(system, queue, path, to, f)
                for path, was in ((deserved, ev.get("quota")), (guarantee, ev.get("guarantee")))
                if isinstance(was, int | float) and was > to
            ]
            return edits, "" if edits else "the finding names no field above the nodes"
        return [], "this GPU090 rule names no quota to change"
    quota = ("spec", "resources", "gpu", "quota")
    if rule == "kai_reclaimable_quota":
        edits = [Edit(system, queue, quota, float(ev["recommended_quota"]), f)]
        waiting = sorted(
            {str(w.get("queue")) for w in ev.get("waiting") or () if isinstance(w, Mapping)}
        )
        if len(waiting) == 1:
            edits.append(Edit(system, waiting[0], quota, float(ev["reclaimable"]), f, True))
        return edits, ""
    if rule == "kai_quota_not_honoured":
        if not ev.get("schedulable_nodes") or not ev.get("cluster_allocatable"):
            return [], _closes
        return [Edit(system, queue, quota, float(ev["cluster_allocatable"]), f)], ""
    if rule == "kai_children_over_parent":
        return [], (
            "which child queues to lower (or whether to raise the parent) is a choice, not a "
            "figure gpuaudit can write: follow the recommendation"
        )
    return [], "this GPU090 rule names no quota to change"


_closes = (
    "no schedulable node allocates the resource: lowering the quota to 0 would close the "
    "queue; add nodes instead"
)


def _read(ctx: Context, system: str, queue: str) -> tuple[Mapping[str, Any] | None, str]:
    list_key = SYSTEMS[system][0]
    read = ctx.inv.owners.named.get((list_key, "", queue))
    if read is not None:
        return read, ""
    state = ctx.inv.owners.states.get(list_key)
    if state is None or state == "ok" or state.startswith("incomplete"):
        return None, f"{system} Queue {queue} is not among the {system} Queues read"
    return None, f"{system} Queue {queue} was not read ({state})"


def _patch(system: str, queue: str, edits: list[Edit], ctx: Context) -> tuple[Change | None, str]:
    read, why = _read(ctx, system, queue)
    if read is None:
        return None, why
    lowered = {e.path for e in edits if not e.raise_by}
    fields: dict[tuple[str, ...], float] = {}
    raised: list[Edit] = []
    for e in edits:
        if e.raise_by:
            if e.path not in lowered:
                raised.append(e)
        else:
            fields[e.path] = min(fields.get(e.path, e.to), e.to)
    ops: list[dict[str, Any]] = []
    said: list[str] = []
    for path, to in fields.items():
        was, err = _as_read(read, path, system, queue)
        if err:
            return None, err
        ops += _replace(path, was, _value(system, to))
        said.append(f"{_dotted(path)} from {was} to {_value(system, to)}")
    for e in raised:
        was, err = _as_read(read, e.path, system, queue)
        if err:
            return None, err
        now = parse_quantity(was)
        if now is None or now < 0:
            return None, f"{system} Queue {queue}'s quota as read is {was!r}: not raised"
        new = _value(system, now + e.to)
        ops += _replace(e.path, was, new)
        said.append(f"{_dotted(e.path)} from {was} to {new}")
        limit = ("spec", "resources", "gpu", "limit")
        cap, _ = _as_read(read, limit, system, queue)
        cap_n = parse_quantity(cap) if cap is not None else None
        if cap_n is not None and 0 <= cap_n < now + e.to:
            ops += _replace(limit, cap, new)
            said.append(f"{_dotted(limit)} from {cap} to {new}")
    api = str(read.get("apiVersion") or SYSTEMS[system][1])
    target = Target(api, "Queue", "", queue, "queues")
    findings = tuple({key(e.finding): e.finding for e in edits}.values())
    only_raised = not fields
    change = Change(
        kind=ChangeKind.PATCH,
        file=file_name(findings[0], f"{system}-queue-{queue}"),
        title=f"{'Raise' if only_raised else 'Change'} the quota of {system} Queue {queue}: "
        + "; ".join(said),
        findings=findings,
        # The quota moved to a queue that waits saves nothing of its own: its finding's
        # GPU-hours are counted once, with the lowering.
        savings=Savings(0.0, 0.0, ctx.currency) if only_raised else ctx.per_week(findings),
        risk=_risk(system, queue, only_raised),
        target=target,
        patch_type="json",
        body=ops,
        read=read,
    )
    return change, f"the patch sets {', '.join(said)}"


def _risk(system: str, queue: str, raised: bool) -> str:
    guard = (
        " The patch tests each value as read: it fails, changing nothing, on a Queue changed since."
    )
    if raised:
        return (
            f"KAI queue {queue} deserves more GPUs: its jobs are admitted (and reclaim GPUs from "
            "queues over their quota) sooner; apply it with the lowering of the idle queue, so "
            "that the parent's children deserve no more than before." + guard
        )
    if system == "Volcano":
        return (
            f"Volcano queue {queue} is promised fewer GPUs: when its demand comes back above the "
            "new figure its jobs wait, or reclaim from other queues only as their share "
            "allows." + guard
        )
    return (
        f"KAI queue {queue} deserves fewer GPUs: when its demand comes back it gets GPUs over "
        "quota only as others leave them idle, and its jobs above the new quota may be "
        "reclaimed by other queues." + guard
    )


def _as_read(
    read: Mapping[str, Any], path: tuple[str, ...], system: str, queue: str
) -> tuple[Any, str]:
    here: Any = read
    for k in path:
        if not isinstance(here, Mapping) or k not in here:
            return None, f"{system} Queue {queue} as read has no {'.'.join(path)}"
        here = here[k]
    return here, ""


def _dotted(path: tuple[str, ...]) -> str:
    """`spec.resources.gpu.quota`, `spec.deserved[nvidia.com/gpu]`."""
    return "".join(f"[{k}]" if "/" in k or "." in k else f".{k}" for k in path).lstrip(".")


def _pointer(path: tuple[str, ...]) -> str:
    return "".join("/" + k.replace("~", "~0").replace("/", "~1") for k in path)


def _replace(path: tuple[str, ...], was: Any, to: Any) -> list[dict[str, Any]]:
    p = _pointer(path)
    return [{"op": "test", "path": p, "value": was}, {"op": "replace", "path": p, "value": to}]


def _value(system: str, n: float) -> int | float | str:
    """A Volcano quota as a Kubernetes quantity; a KAI quota as the number its CRD takes."""
    if system == "Volcano":
        return quantity(n)
    return int(round(n)) if abs(n - round(n)) < 1e-9 else round(n, 6)

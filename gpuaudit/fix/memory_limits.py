"""Changes for OOM-killed restarting holders (GPU004): a strategic merge patch of the owner's
pod template that raises the OOM-killed container's memory limit to the one the finding
recommends (`memory_recommended_limit`: the larger of the most memory cAdvisor saw it use and
its limit, plus headroom; see GPU004).

The patch names the container (a pod spec's `containers` merge by `name`) and sets its
`resources.limits.memory` and `resources.requests.memory` to the recommended limit, as the
finding advises: the scheduler then places the pod where that much memory is free, and a pod
whose request equalled its limit keeps its QoS class. Every other container stays as it is. It is
written for a Deployment or StatefulSet (the template change rolls its pods) and a CronJob (its
next runs). None is written where GPU004 measured no memory (cAdvisor's series absent: the
finding says why), for a Job of its own (its pod template cannot be changed once it exists: set
the limit where the Job is made), a bare pod, a pod whose owners were not all read, an owner
gpuaudit writes no template patch for (a Notebook, an InferenceService, a training job), a
template without that container, or one whose limit is at least the recommended one already
(changed since the pod was made), or whose memory request is above it.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuaudit.checks.findings import Finding
from gpuaudit.core import numbers
from gpuaudit.fix.changes import Change, ChangeKind, FindingFix, file_name, one_each
from gpuaudit.fix.context import Context
from gpuaudit.fix.owned import _patch_object, _target
from gpuaudit.fix.priority import _at, _nest, owner_template
from gpuaudit.fix.template_resources import amount, container, written

CODES = ("GPU004",)


def changes(
    findings: Sequence[Finding], ctx: Context
) -> tuple[list[Change], dict[str, FindingFix]]:
    """The template patches for the GPU004 findings of OOM-killed containers, and what each
    finding gets."""
    return one_each(findings, lambda f, patched: _change(f, ctx, patched))


def _change(f: Finding, ctx: Context, patched: set[str]) -> tuple[Change | None, str]:
    ev = f.evidence
    limit, ctr = ev.get("memory_recommended_limit"), ev.get("oom_container")
    if ev.get("last_reason") != "OOMKilled":
        return None, "it was not OOM-killed: the fix is in its code or image, which no field sets"
    if not isinstance(limit, str) or not isinstance(ctr, str) or not ctr:
        return None, (
            "the memory it needed is not measured ("
            + str(ev.get("host_memory_needed") or "no recommended limit")
            + "): no limit can be recommended"
        )
    want = numbers.quantity(limit)
    found = owner_template(
        ctx,
        (f.resource.namespace, f.resource.name),
        "containers' resources",
        f"container {ctr}'s memory limit to {limit}",
    )
    if isinstance(found, str):
        return None, found
    top, path, read = found
    if top.uid in patched:
        return None, f"{top.describe()} is patched by another GPU004 change already"
    now = container(_at(read, path), ctr)
    if now is None:
        return None, f"{top.describe()}'s pod template has no container {ctr}"
    held, asked = amount(now, "limits", "memory"), amount(now, "requests", "memory")
    if want is None or (held is not None and held >= want):
        return None, (
            f"{top.describe()}'s template gives container {ctr} a memory limit of "
            f"{written(now, 'limits', 'memory')} already, at least {limit} (changed since its "
            "pods were made)"
        )
    if asked is not None and asked > want:
        return None, (
            f"{top.describe()}'s template asks {written(now, 'requests', 'memory')} of memory "
            "for container "
            f"{ctr}, above {limit}: set its request and limit together"
        )
    patched.add(top.uid)
    target = _target(top)
    memory = {"memory": limit}
    entry = {"name": ctr, "resources": {"limits": memory, "requests": dict(memory)}}
    body = _patch_object(target, _nest(path[1:], {"containers": [entry]}))
    rolls = (
        "applies to its next runs"
        if top.kind == "CronJob"
        else "rolls its pods (a rolling restart)"
        + (
            "; a StatefulSet with the default OrderedReady policy does not replace a pod "
            "that is not Ready by itself: delete the crash-looping pod after applying"
            if top.kind == "StatefulSet"
            else ""
        )
    )
    before = written(now, "limits", "memory") if held is not None else "none"
    asked_before = written(now, "requests", "memory") if asked is not None else "none"
    change = Change(
        kind=ChangeKind.PATCH,
        file=file_name(f, f"{top.kind}-{top.namespace}-{top.name}"),
        title=f"Raise container {ctr}'s memory limit in {top.describe()} to {limit}",
        findings=(f,),
        savings=ctx.per_week((f,)),
        risk=(
            f"Container {ctr}'s memory limit goes from {before} to {limit}, and its request from "
            f"{asked_before} to {limit}; the other containers are unchanged. Each pod asks its "
            f"node for that much memory: a node without it unrequested no longer takes the "
            f"pod, which waits until one has. Changing the pod template {rolls}."
        ),
        target=target,
        patch_type="strategic",
        body=body,
        read=read,
    )
    return change, f"{top.describe()}'s container {ctr} gets a memory limit of {limit}"

"""Changes for CPU-starved GPU work (GPU041): a strategic merge patch of the owner's pod
template that gives each CPU-starved container the CPU limit and request the finding recommends
(evidence `containers[]`: `recommended_cpu_limit`, `recommended_cpu_request`; its measured use,
or its limit where it was throttled, plus headroom; see GPU041).

The patch names each container (a pod spec's `containers` merge by `name`) and sets only its
`resources.limits.cpu` and `resources.requests.cpu`: its memory, its GPUs and every other
container stay as they are. It is written for a Deployment or StatefulSet (the template change
rolls its pods) and a CronJob (its next runs). None is written for a Job of its own (its pod
template cannot be changed once it exists: set the CPU where the Job is made), a bare pod, a pod
whose owners were not all read, an owner gpuaudit writes no template patch for (a Notebook, an
InferenceService, a training job), a template without the containers, or one whose CPU limits
are at least the recommended ones already (changed since the pod was made).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuaudit.checks.findings import Finding
from gpuaudit.core import numbers
from gpuaudit.fix.changes import Change, ChangeKind, FindingFix, file_name, one_each
from gpuaudit.fix.context import Context
from gpuaudit.fix.owned import _patch_object, _target
from gpuaudit.fix.priority import _at, _nest, owner_template
from gpuaudit.fix.template_resources import amount, container, written

CODES = ("GPU041",)


def changes(
    findings: Sequence[Finding], ctx: Context
) -> tuple[list[Change], dict[str, FindingFix]]:
    """The template patches for the GPU041 findings, and what each finding gets."""
    return one_each(findings, lambda f, patched: _change(f, ctx, patched))


def _advised(f: Finding) -> list[tuple[str, str, str]]:
    """(container, limit, request) of each starved container the finding recommends for."""
    out = []
    for c in f.evidence.get("containers") or ():
        if not isinstance(c, Mapping):
            continue
        name, lim, req = (
            c.get(k) for k in ("container", "recommended_cpu_limit", "recommended_cpu_request")
        )
        if all(isinstance(v, str) and v for v in (name, lim, req)):
            out.append((str(name), str(lim), str(req)))
    return out


def _change(f: Finding, ctx: Context, patched: set[str]) -> tuple[Change | None, str]:
    advised = _advised(f)
    if not advised:
        return None, "the finding recommends no CPU for any container"
    said = ", ".join(f"container {c}'s CPU to {lim}" for c, lim, _ in advised)
    found = owner_template(
        ctx, (f.resource.namespace, f.resource.name), "containers' resources", said
    )
    if isinstance(found, str):
        return None, found
    top, path, read = found
    if top.uid in patched:
        return None, f"{top.describe()} is patched by another GPU041 change already"
    spec = _at(read, path)
    entries: list[dict[str, Any]] = []
    before: list[str] = []
    for name, lim, req in advised:
        now = container(spec, name)
        if now is None:
            return None, f"{top.describe()}'s pod template has no container {name}"
        held, want = amount(now, "limits", "cpu"), numbers.quantity(lim)
        if want is None or (held is not None and held >= want):
            continue
        entries.append(
            {"name": name, "resources": {"limits": {"cpu": lim}, "requests": {"cpu": req}}}
        )
        was = written(now, "limits", "cpu") if held is not None else "none"
        before.append(f"container {name}'s CPU limit goes from {was} to {lim} (request {req})")
    if not entries:
        return None, (
            f"{top.describe()}'s template gives its containers at least the recommended CPU "
            "limits already (changed since its pods were made)"
        )
    patched.add(top.uid)
    target = _target(top)
    body = _patch_object(target, _nest(path[1:], {"containers": entries}))
    rolls = (
        "applies to its next runs"
        if top.kind == "CronJob"
        else "rolls its pods (a rolling restart)"
    )
    names = ", ".join(e["name"] for e in entries)
    change = Change(
        kind=ChangeKind.PATCH,
        file=file_name(f, f"{top.kind}-{top.namespace}-{top.name}"),
        title=f"Give container(s) {names} in {top.describe()} the CPU they need",
        findings=(f,),
        savings=ctx.per_week((f,)),
        risk=(
            "; ".join(before) + "; their memory, GPUs and the other containers are unchanged. "
            "Each pod asks its node for that much more CPU: a node without the room leaves it "
            f"pending. Changing the pod template {rolls}."
        ),
        target=target,
        patch_type="strategic",
        body=body,
        read=read,
    )
    return change, f"{top.describe()}'s container(s) {names} get the recommended CPU"

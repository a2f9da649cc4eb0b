"""Changes of a workload's GPU to a MIG slice: an oversized whole GPU (GPU021) to the MIG
profile it fits, and framebuffer pressure on a MIG slice (GPU020) to the next profile up. A
strategic merge patch of the owner's pod template (Deployment, StatefulSet, or a CronJob's job
template): the container that holds the GPU (containers are merged by name) gets the MIG
resource of the mixed strategy, `nvidia.com/mig-<profile>: 1`, in place of what it held
(`nvidia.com/gpu` or the smaller profile, removed), in its requests and its limits; and a node
selector that keeps it on nodes of the GPU's product.

The profile must be offered: some node of the cluster of the same GPU product (its
`nvidia.com/gpu.product`) allocates `nvidia.com/mig-<profile>`, and matches the template's own
node selector. GPU021's profile is the finding's (`fits`; the largest where several pods of one
owner differ); GPU020's is the smallest profile of the product above the current one that fits
the peak framebuffer use plus the headroom (`headroom`) and that a node offers. The node
selector: `nvidia.com/gpu.product` when every such node has the same value, else
`nvidia.com/mig.config` when they share one, else none (the MIG resource alone then places the
pod).

No change is written when: no node offers the profile ("no node offers 3g.40gb of the NVIDIA
H100 80GB HBM3"); the finding is about a time-sliced share or a whole GPU without a larger
profile; a pod of the owner holding GPUs has no GPU021 finding (a smaller slice would not fit
it); the template has no single container holding what the pod held; or the owner is a Job (its
pod template cannot be changed once made), a bare pod, an owner not read, or another kind.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from gpuaudit.checks.findings import Finding
from gpuaudit.domain import mig
from gpuaudit.fix.changes import Change, ChangeKind, FindingFix, Savings, Target, file_name, key
from gpuaudit.fix.context import Context
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.owners import ObjectRef

CODES = ("GPU021", "GPU020")
PLURALS = {"Deployment": "deployments", "StatefulSet": "statefulsets", "CronJob": "cronjobs"}
WHOLE = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
CONFIG_LABEL = "nvidia.com/mig.config"
GIB_PER_NOMINAL_GB = 0.95
"""A profile named `Ngb` offers a little under N GiB (GPU020's and GPU021's reading)."""
DEFAULT_HEADROOM = 0.20
"""GPU020's `fb_headroom` default, where its finding does not state the headroom."""


@dataclass(frozen=True)
class _Want:
    """What one finding asks of its pod's container."""

    finding: Finding
    model: str
    held: str
    """The resource the pod held (`nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`)."""
    profile: str
    """GPU021: the profile it fits; GPU020: the current one."""
    need_gib: float
    """GPU020: the peak framebuffer use plus headroom."""


def changes(
    findings: Sequence[Finding], ctx: Context
) -> tuple[list[Change], dict[str, FindingFix]]:
    """A pod template patch per owner and check, and what each finding gets."""
    fixes: dict[str, FindingFix] = {}
    groups: dict[tuple[str, str], list[_Want]] = defaultdict(list)
    tops: dict[str, ObjectRef] = {}
    for f in findings:
        want, why = _want(f)
        if want is None:
            fixes[key(f)] = FindingFix(None, "", None, why)
            continue
        top, why = ctx.top(
            f, "a pod's resources cannot be changed; recreate it with the MIG resource", "no patch"
        )
        if top is None:
            fixes[key(f)] = FindingFix(None, "", None, why)
            continue
        tops[top.uid] = top
        groups[(top.uid, f.code)].append(want)
    members = ctx.members({uid for uid, _ in groups})
    out: list[Change] = []
    for (uid, code), wants in groups.items():
        top = tops[uid]
        change, why = _change(code, wants, top, ctx, members.get(uid, []))
        for w in wants:
            fix = FindingFix(None, "", None, why)
            if change is not None:
                fix = FindingFix(change.kind, change.file, change.target, why)
            fixes[key(w.finding)] = fix
        if change is not None:
            out.append(change)
    return out, fixes


def _want(f: Finding) -> tuple[_Want | None, str]:
    ev = f.evidence
    model = str(ev.get("gpu_model") or "")
    if f.code == "GPU021":
        fits = str(ev.get("fits") or "")
        if mig.parse_profile(fits) is None:
            return None, (
                f"the finding fits {fits or 'no MIG profile'}: gpuaudit writes no change for a "
                "time-sliced share yet; follow the recommendation"
            )
        return _Want(f, model, WHOLE, fits, 0.0), ""
    current = str(ev.get("mig_profile") or "")
    if mig.parse_profile(current) is None:
        return None, (
            "the pod holds a whole GPU, which has no larger MIG profile; follow the recommendation"
        )
    if ev.get("fb_used_max_mib") is None:
        return None, (
            "its peak framebuffer use, which the profile must fit, is not known (it held a "
            "part of a series split among pods); follow the recommendation"
        )
    headroom = float(ev.get("headroom", DEFAULT_HEADROOM))
    need = float(ev.get("fb_used_max_mib") or 0.0) / 1024.0 * (1.0 + headroom)
    return _Want(f, model, f"nvidia.com/mig-{current}", current, need), ""


def _change(
    code: str, wants: list[_Want], top: ObjectRef, ctx: Context, members: list[tuple[str, str]]
) -> tuple[Change | None, str]:
    read = ctx.inv.owners.read(top)
    if top.kind == "Job":
        return None, (
            f"{top.describe()} owns the pod, and a Job's pod template cannot be changed once "
            "it is made: change the manifest it is made from"
        )
    if top.kind not in PLURALS or read is None:
        return None, (
            f"gpuaudit writes no change of a {top.kind}'s pod template yet ({top.describe()} "
            "owns the pod); follow the recommendation"
        )
    models = {w.model for w in wants}
    helds = {w.held for w in wants}
    if len(models) != 1 or len(helds) != 1:
        return None, f"the pods of {top.describe()} held different GPUs: no one change fits all"
    model, held = models.pop(), helds.pop()
    spec = _pod_spec(read, top.kind)
    container = _container(spec, held)
    if container is None:
        return None, (
            f"the pod template of {top.describe()} as read has no single container holding "
            f"{held}: 1"
        )
    given = spec.get("nodeSelector")
    selector: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    nodes = _offering(ctx, model, selector)
    if code == "GPU021":
        found = {(w.finding.resource.namespace, w.finding.resource.name) for w in wants}
        others = [m for m in members if m not in found]
        if others:
            return None, (
                f"{len(others)} of the {len(others) + len(found)} pods of {top.describe()} "
                "holding GPUs were not found oversized: a smaller slice might not fit them"
            )
        profile = max((w.profile for w in wants), key=_size)
        if not nodes.get(profile):
            return None, f"no node offers {profile} of the {model}{_offered(nodes)}"
    else:
        current = wants[0].profile
        need = max(w.need_gib for w in wants)
        up = [
            p.name
            for p in mig.profiles_for(model)
            if _size(p.name) > _size(current) and p.memory_gb * GIB_PER_NOMINAL_GB >= need
        ]
        offered = [p for p in up if nodes.get(p)]
        if not offered:
            what = f"no profile of the {model} above {current} fits {need:.1f} GiB"
            if up:
                what = f"no node offers {up[0]} of the {model}{_offered(nodes)}"
            return None, what
        profile = offered[0]
    return _patch(code, wants, top, read, container, held, profile, nodes[profile], ctx)


def _size(profile: str) -> tuple[int, int]:
    p = mig.parse_profile(profile)
    return (p.memory_gb, p.slices) if p is not None else (0, 0)


def _pod_spec(read: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """The pod spec of the owner's template as read (a CronJob's in its job template)."""
    spec: Any = read.get("spec")
    path = (
        ("jobTemplate", "spec", "template", "spec") if kind == "CronJob" else ("template", "spec")
    )
    for step in path:
        spec = spec.get(step) if isinstance(spec, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}


def _container(spec: Mapping[str, Any], held: str) -> str | None:
    """The name of the one container whose requests or limits hold `held`: 1."""
    names = []
    for c in spec.get("containers") or ():
        if not isinstance(c, Mapping) or not isinstance(c.get("name"), str):
            continue
        got = c.get("resources")
        res: Mapping[str, Any] = got if isinstance(got, Mapping) else {}
        amounts = {
            str(part.get(held))
            for part in (res.get("limits"), res.get("requests"))
            if isinstance(part, Mapping) and held in part
        }
        if amounts:
            names.append((c["name"], amounts))
    if len(names) != 1 or names[0][1] != {"1"}:
        return None
    return str(names[0][0])


def _norm(product: str) -> str:
    """A GPU product as a comparable key: `NVIDIA A100-SXM4-80GB` and the node label's
    `NVIDIA-A100-SXM4-80GB` alike (a shared or single-strategy MIG suffix left out)."""
    text = re.sub(r"[\s_]+", "-", product.strip().upper())
    return re.sub(r"-(SHARED|MIG-.*)$", "", text)


class _Offer(NamedTuple):
    """A node that offers a profile: its name and labels."""

    name: str
    labels: Mapping[str, str]


def _offering(ctx: Context, model: str, selector: Mapping[str, Any]) -> dict[str, list[_Offer]]:
    """Profile -> the nodes of `model`'s product that allocate it and match the template's node
    selector (but for the keys the patch sets)."""
    nodes = ctx.inv.nodes
    out: dict[str, list[_Offer]] = defaultdict(list)
    if nodes.empty:
        return out
    want = _norm(model)
    keep = {k: v for k, v in selector.items() if k not in (PRODUCT_LABEL, CONFIG_LABEL)}
    for name, product, alloc, labels in zip(
        nodes[C.NODE].astype(str),
        nodes[C.PRODUCT].astype(str),
        nodes[C.ALLOCATABLE],
        nodes[C.NODE_LABELS],
        strict=True,
    ):
        labels = labels if isinstance(labels, Mapping) else {}
        if _norm(product) != want or any(labels.get(k) != v for k, v in keep.items()):
            continue
        for resource, amount in (alloc if isinstance(alloc, Mapping) else {}).items():
            profile = str(resource).removeprefix("nvidia.com/mig-")
            if profile != resource and float(amount or 0) > 0:
                out[profile].append(_Offer(name, labels))
    return out


def _offered(nodes: Mapping[str, list[_Offer]]) -> str:
    if not nodes:
        return " (no node of it is partitioned into MIG slices)"
    return f" (its nodes offer {', '.join(sorted(nodes, key=_size))})"


def _selector(nodes: list[_Offer]) -> tuple[dict[str, str], str]:
    """The node selector that keeps the pod on nodes like `nodes`, and what it says."""
    for label in (PRODUCT_LABEL, CONFIG_LABEL):
        values = {n.labels.get(label) for n in nodes}
        if len(values) == 1 and None not in values:
            value = str(values.pop())
            return {label: value}, f"{label}={value}, shared by the {len(nodes)} offering nodes"
    return {}, "none: the offering nodes share no product or MIG layout label"


def _patch(
    code: str,
    wants: list[_Want],
    top: ObjectRef,
    read: Mapping[str, Any],
    container: str,
    held: str,
    profile: str,
    nodes: list[_Offer],
    ctx: Context,
) -> tuple[Change, str]:
    to = f"nvidia.com/mig-{profile}"
    swap = {held: None, to: "1"}
    pod_spec: dict[str, Any] = {
        "containers": [
            {"name": container, "resources": {"limits": dict(swap), "requests": dict(swap)}}
        ]
    }
    selector, said = _selector(nodes)
    if selector:
        pod_spec["nodeSelector"] = selector
    inner: dict[str, Any] = {"template": {"spec": pod_spec}}
    spec = {"jobTemplate": {"spec": inner}} if top.kind == "CronJob" else inner
    target = Target(top.api_version, top.kind, top.namespace, top.name, PLURALS[top.kind])
    findings = tuple(w.finding for w in wants)
    was = "a whole GPU" if held == WHOLE else f"MIG {wants[0].profile}"
    share = mig.slice_fraction(profile, wants[0].model)
    change = Change(
        kind=ChangeKind.PATCH,
        file=file_name(findings[0], f"{top.kind}-{top.namespace}-{top.name}"),
        title=f"Move {top.describe()} from {was} to MIG {profile}",
        findings=findings,
        savings=_savings(code, wants, share, ctx),
        risk=_risk(code, top, profile, wants[0].model, len(nodes)),
        target=target,
        patch_type="strategic",
        body={
            "apiVersion": top.api_version,
            "kind": top.kind,
            "metadata": {"name": top.name, "namespace": top.namespace},
            "spec": spec,
        },
        read=read,
        lands=tuple(n.name for n in nodes),
        notes=(
            f"container {container}: {held} replaced by {to} (requests and limits)",
            f"{_offer(len(nodes), profile)}; node selector: {said}",
        ),
    )
    return change, _offer(len(nodes), profile)


def _offer(n: int, profile: str) -> str:
    return f"1 node offers {profile}" if n == 1 else f"{n} nodes offer {profile}"


def _savings(code: str, wants: list[_Want], share: float, ctx: Context) -> Savings:
    """GPU021: each finding's freed GPU-hours, at the chosen profile's share where it is larger
    than the one the finding fit; GPU020: none (a larger slice prevents failures)."""
    if code != "GPU021":
        return Savings(0.0, 0.0, ctx.currency)
    hours = cost = 0.0
    for w in wants:
        fit = float(w.finding.evidence.get("share_of_gpu") or 0.0)
        part = (1.0 - share) / (1.0 - fit) if fit < 1.0 else 0.0
        hours += w.finding.impact.gpu_hours * min(part, 1.0)
        cost += w.finding.impact.cost * min(part, 1.0)
    scale = 168.0 / max(float(ctx.inv.window_hours), 1e-9)
    return Savings(hours * scale, cost * scale, ctx.currency)


def _risk(code: str, top: ObjectRef, profile: str, model: str, nodes: int) -> str:
    p = mig.parse_profile(profile)
    slices = f"{p.slices}/{mig.total_slices(model)}" if p is not None else "part"
    head = (
        f"Changing the pod template of {top.describe()} rolls out new pods (a CronJob's next "
        f"runs): each gets a MIG {profile} slice, {slices} of the GPU's compute"
    )
    tail = (
        f" A pod waits Pending while none of the {nodes} node{'s' if nodes != 1 else ''} "
        f"offering {profile} has one free, and must tolerate their taints, if any."
    )
    if code == "GPU021":
        return head + (
            ". Work that grows past the slice's memory fails with out-of-memory errors, and "
            "a busy hour runs slower on a slice than on a whole GPU." + tail
        )
    return head + ": a larger slice, so fewer fit on one GPU." + tail

"""Changes for idle pods (GPU001 idle reservation, GPU002 idle tail): made to the object a team
edits, found by walking the pod's owners (`gpuaudit.inventory.owners`).

- A Deployment or StatefulSet whose every pod holding GPUs is idle: `replicas: 0` (a strategic
  merge patch). When some of its pods were busy, none: scaling it down would stop a busy pod as
  likely as an idle one.
- A Job of its own: `suspend: true` (batch/v1, GA since Kubernetes 1.24): its running pods are
  ended and the Job kept, to be resumed or deleted.
- A Job a CronJob created: a command that suspends that Job (`commands.sh`), no patch: the
  idle run is the Job, and a patch of the CronJob (`suspend: true`) would stop the runs to
  come, not this one.
- A bare pod, or a pod whose owners could not all be read: no patch; a command to delete the
  pod, commented out for review, and the reason (a bare pod is not recreated by anything; an
  owner that was not read might recreate it, or be undone by its own owner).
- A Kubeflow Notebook: a command that sets its `kubeflow-resource-stopped` annotation, by which
  the notebook controller keeps the notebook's StatefulSet at 0 replicas (what Kubeflow's stop
  button does; its volumes are kept).
- A KServe InferenceService: none. A pod the walk leads to one through a Deployment of its own
  runs in raw deployment (Standard) mode, which KServe does not scale to zero (`minReplicas: 0`
  takes effect in serverless mode, whose pods a Knative Revision owns: the walk ends unread).
- Any other owner (a training job, a JobSet, a RayCluster ...): no change yet; the finding's
  recommendation stands.
"""

from __future__ import annotations

import shlex
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from gpuaudit.checks.findings import Finding
from gpuaudit.fix.changes import Change, ChangeKind, FindingFix, Target, file_name, key
from gpuaudit.fix.context import Context
from gpuaudit.inventory.owners import ObjectRef, Outcome, Walk

CODES = ("GPU001", "GPU002")
STOPPED = "kubeflow-resource-stopped"
"""The Notebook annotation whose presence makes the Kubeflow notebook controller keep the
notebook's StatefulSet at 0 replicas (its value is when it was stopped)."""
SCALED = {"Deployment": "deployments", "StatefulSet": "statefulsets"}
COMMANDS = "commands.sh"


def changes(
    findings: Sequence[Finding], ctx: Context
) -> tuple[list[Change], dict[str, FindingFix]]:
    """The changes for the idle findings, and what each finding gets."""
    owners = ctx.inv.owners
    out: list[Change] = []
    fixes: dict[str, FindingFix] = {}
    by_target: dict[str, list[Finding]] = defaultdict(list)
    walks: dict[str, Walk] = {}
    for f in findings:
        walk = owners.walk(f.resource.namespace, f.resource.name)
        top = walk.target
        if top is None:
            change = _pod_command(f, walk, ctx)
            out.append(change)
            fixes[key(f)] = FindingFix(
                ChangeKind.COMMAND, COMMANDS, change.target, _why_no_patch(f, walk)
            )
            continue
        walks[top.uid] = walk
        by_target[top.uid].append(f)
    idle = {(f.resource.namespace, f.resource.name) for f in findings}
    members = ctx.members(set(by_target))
    for uid, group in by_target.items():
        walk = walks[uid]
        made, why = _for_target(group, walk, ctx, idle, members.get(uid, []))
        if made is None:
            for f in group:
                fixes[key(f)] = FindingFix(None, "", None, why)
            continue
        out.append(made)
        for f in group:
            fixes[key(f)] = FindingFix(made.kind, made.file, made.target, why)
    return out, fixes


def _for_target(
    group: list[Finding],
    walk: Walk,
    ctx: Context,
    idle: set[tuple[str, str]],
    members: list[tuple[str, str]],
) -> tuple[Change | None, str]:
    top = walk.target
    assert top is not None
    read = ctx.inv.owners.read(top)
    if top.kind in SCALED and read is not None:
        return _scale(group, top, read, ctx, [m for m in members if m not in idle])
    if top.kind == "Job" and read is not None:
        return _suspend(group, top, read, ctx)
    if top.kind == "CronJob" and len(walk.chain) >= 2 and walk.chain[-2].kind == "Job":
        return _suspend_run(group, top, walk.chain[-2], ctx)
    if top.kind == "Notebook" and top.group == "kubeflow.org":
        return _stop_notebook(group, top, ctx, [m for m in members if m not in idle])
    if top.kind == "InferenceService":
        return None, (
            f"{top.describe()} owns the pod through a Deployment of its own: KServe runs it in "
            "raw deployment (Standard) mode, which does not scale to zero (minReplicas: 0 "
            "takes effect in serverless mode only); lower its replicas or delete it by hand"
        )
    article = "an" if top.kind[:1] in "AEIOU" else "a"
    return None, (
        f"gpuaudit writes no change for {article} {top.kind} yet ({top.describe()} owns the "
        "pod); follow the recommendation"
    )


def _scale(
    group: list[Finding], top: ObjectRef, read: Any, ctx: Context, busy: list[tuple[str, str]]
) -> tuple[Change | None, str]:
    spec = read.get("spec") if isinstance(read.get("spec"), dict) else {}
    replicas = spec.get("replicas") if isinstance(spec, dict) else None
    if replicas == 0:
        return None, f"{top.describe()} was already scaled to zero when it was read"
    if busy:
        n = len(busy) + len({(f.resource.namespace, f.resource.name) for f in group})
        return None, (
            f"{len(busy)} of the {n} pods of {top.describe()} holding GPUs were not idle: "
            "scaling it down would stop a busy pod as likely as an idle one"
        )
    target = _target(top)
    was = f"{replicas}" if isinstance(replicas, int) else "unset (1)"
    verb = (
        "kubectl scale "
        + f"{top.kind.lower()} {shlex.quote(top.name)} -n {shlex.quote(top.namespace)}"
    )
    risk = (
        f"Scaling {top.describe()} to zero stops every pod of it: a service behind it drops its "
        "traffic (its requests fail) until it is scaled up again, and a HorizontalPodAutoscaler "
        f"on it stops scaling while it is at zero. Its replicas were {was} when read; to undo, "
        f"`{verb} --replicas={replicas if isinstance(replicas, int) else 1}`."
    )
    if top.kind == "StatefulSet":
        risk += " Its PersistentVolumeClaims are kept."
    change = Change(
        kind=ChangeKind.PATCH,
        file=file_name(group[0], f"{top.kind}-{top.namespace}-{top.name}"),
        title=f"Scale {top.describe()} to zero",
        findings=tuple(group),
        savings=ctx.per_week(tuple(group)),
        risk=risk,
        target=target,
        patch_type="strategic",
        body=_patch_object(target, {"replicas": 0}),
        read=read,
    )
    return change, f"every pod of {top.describe()} holding GPUs was idle"


def _suspend(
    group: list[Finding], top: ObjectRef, read: Any, ctx: Context
) -> tuple[Change | None, str]:
    spec = read.get("spec") if isinstance(read.get("spec"), dict) else {}
    if isinstance(spec, dict) and spec.get("suspend") is True:
        return None, f"{top.describe()} was already suspended when it was read"
    target = _target(top)
    change = Change(
        kind=ChangeKind.PATCH,
        file=file_name(group[0], f"{top.kind}-{top.namespace}-{top.name}"),
        title=f"Suspend {top.describe()}",
        findings=tuple(group),
        savings=ctx.per_week(tuple(group)),
        risk=(
            f"Suspending {top.describe()} ends its running pods: work since their last "
            "checkpoint is lost. The Job is kept; `suspend: false` resumes it with new pods, "
            "and deleting it ends it for good."
        ),
        target=target,
        patch_type="strategic",
        body=_patch_object(target, {"suspend": True}),
        read=read,
    )
    return change, f"{top.describe()} owns the pod; suspending it releases the GPUs"


def _suspend_run(
    group: list[Finding], cron: ObjectRef, job: ObjectRef, ctx: Context
) -> tuple[Change, str]:
    ns, name = shlex.quote(job.namespace), shlex.quote(job.name)
    lines = (
        f"# Suspend the idle run {job.describe()} of {cron.describe()} (its pods end; the "
        "CronJob's later runs are not touched).",
        f'k patch job {name} -n {ns} --type merge -p \'{{"spec":{{"suspend":true}}}}\'',
    )
    change = Change(
        kind=ChangeKind.COMMAND,
        file=COMMANDS,
        title=f"Suspend {job.describe()}, a run of {cron.describe()}",
        findings=tuple(group),
        savings=ctx.per_week(tuple(group)),
        risk=(
            f"Suspending {job.describe()} ends its pods: work since their last checkpoint is "
            f"lost. {cron.describe()} keeps scheduling runs; give its jobTemplate an "
            "activeDeadlineSeconds so that a run that overstays ends on its own."
        ),
        target=_target(job),
        commands=lines,
    )
    why = (
        f"the idle run is {job.describe()}, which {cron.describe()} created: a patch of the "
        "CronJob would stop the runs to come, not this one, so the change is a command"
    )
    return change, why


def _stop_notebook(
    group: list[Finding], top: ObjectRef, ctx: Context, busy: list[tuple[str, str]]
) -> tuple[Change | None, str]:
    if busy:
        return None, f"a pod of {top.describe()} holding GPUs was not idle"
    stamp = datetime.fromtimestamp(float(ctx.inv.window_end), timezone.utc)
    value = f"{STOPPED}={stamp.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    ns, name = shlex.quote(top.namespace), shlex.quote(top.name)
    lines = (
        f"# Stop the idle {top.describe()}: while {STOPPED} is set, the notebook "
        "controller keeps its StatefulSet at 0 replicas (its volumes are kept); remove the "
        "annotation to start it again.",
        f"k annotate notebooks.kubeflow.org {name} -n {ns} {value}",
    )
    change = Change(
        kind=ChangeKind.COMMAND,
        file=COMMANDS,
        title=f"Stop {top.describe()}",
        findings=tuple(group),
        savings=ctx.per_week(tuple(group)),
        risk=(
            f"Stopping {top.describe()} ends its pod: unsaved work in its kernels is lost (its "
            f"volumes are kept). To start it again, `kubectl annotate notebooks.kubeflow.org "
            f"{name} -n {ns} {STOPPED}-`."
        ),
        target=_target(top),
        commands=lines,
    )
    why = (
        f"{top.describe()} owns the pod; the notebook controller scales it to zero while the "
        f"annotation {STOPPED} is set, so the change is that annotation, a command (Kubeflow's "
        "own stop button sets it)"
    )
    return change, why


def _why_no_patch(f: Finding, walk: Walk) -> str:
    pod = f"{f.resource.namespace}/{f.resource.name}"
    if walk.outcome is Outcome.BARE:
        return (
            f"pod {pod} is a bare pod (no owner): there is no object to patch, and nothing "
            "recreates it once deleted; commands.sh holds its deletion, commented out"
        )
    return (
        f"no patch: {walk.why}, so the object a team edits is not known and a change could be "
        "undone by the owner; commands.sh holds the pod's deletion, commented out"
    )


def _pod_command(f: Finding, walk: Walk, ctx: Context) -> Change:
    ns, name = f.resource.namespace, f.resource.name
    if walk.outcome is Outcome.BARE:
        note = f"# Bare pod {ns}/{name}: nothing recreates it once deleted."
    else:
        note = f"# Pod {ns}/{name}: {walk.why}; its owner may recreate it."
    lines = (note, f"# k delete pod {shlex.quote(name)} -n {shlex.quote(ns)}")
    return Change(
        kind=ChangeKind.COMMAND,
        file=COMMANDS,
        title=f"Delete pod {ns}/{name}",
        findings=(f,),
        savings=ctx.per_week((f,)),
        risk=(
            f"Deleting pod {ns}/{name} ends it: whatever it runs stops, and a bare pod is gone "
            "for good (its owner, if any, may start a new one)."
        ),
        target=Target("v1", "Pod", ns, name, "pods"),
        commands=lines,
    )


def _target(ref: ObjectRef) -> Target:
    plural = {**SCALED, "Job": "jobs", "CronJob": "cronjobs", "Notebook": "notebooks"}.get(
        ref.kind, ""
    )
    return Target(ref.api_version, ref.kind, ref.namespace, ref.name, plural)


def _patch_object(target: Target, spec: dict[str, Any]) -> dict[str, Any]:
    """A strategic merge patch naming its object (kustomize matches it by `target`, and
    `kubectl patch` ignores the names)."""
    return {
        "apiVersion": target.api_version,
        "kind": target.kind,
        "metadata": {"name": target.name, "namespace": target.namespace},
        "spec": spec,
    }

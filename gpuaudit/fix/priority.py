"""Changes for priority inversion (GPU050): a PriorityClass where one is needed, and the
strategic merge patches of the owners' pod templates that set `priorityClassName` to it.

A PriorityClass's `value` and `preemptionPolicy` cannot be changed once it is created, and a
pod's priority is set from its class when the pod is created: so the change is a class of the
right value and policy (one the snapshot recorded when there is one: same value, same policy,
not the global default; else a new object), and the pod templates of the workloads that should
use it. Their pods get it as they are recreated (the template change rolls a Deployment's or
StatefulSet's pods; a CronJob's next runs). No change ever lowers a pod's priority: a workload
whose pods run above the class's value is left out, and says so.

- An inversion (a pod waits while lower-priority pods hold the GPUs it needs) whose waiting pod
  cannot preempt because its class's `preemptionPolicy` is `Never`: a class of the same value
  with `preemptionPolicy: PreemptLowerPriority` (named after its class, `<class>-preempt`), and
  the waiting pod's owner's template. What changes for preemption: its pods may evict the
  lower-priority holders the finding names (and any pod below its value where it fits). Where
  the waiting pod may preempt already, no change: what stopped it (a PodDisruptionBudget, a gang
  scheduler that ignores priorities) is no field gpuaudit can set.
- A node pool whose long-running and run-to-completion GPU workloads share GPUs while some pods
  have no PriorityClass: the long-running ones (Deployment, StatefulSet) a class of value 10000
  that preempts (`gpu-serving`), the run-to-completion ones (CronJob) a class of value 100 that
  never preempts (`gpu-batch`): the serving pods may evict batch and unclassed pods (priority 0)
  where they need the GPUs, and batch pods are scheduled before priority-0 pods but evict no
  one. The figures are the finding's own advice; a team that ranks its workloads otherwise edits
  the class.

A Job's pod template cannot be changed once the Job exists, so a Job of its own gets no patch
(set the class where the Job is made); a pod whose owners were not all read, a bare pod, and
owners gpuaudit writes no template patch for (a Notebook, an InferenceService, a training job)
get none either. Without the PriorityClasses read, no change is written: gpuaudit could not
know whether a class exists, or whether a change lowers a priority.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpuaudit.checks.findings import Finding
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
from gpuaudit.fix.owned import _patch_object, _target
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.owners import ObjectRef, Outcome

CODES = ("GPU050",)
KEY = "priorityclasses"
API = "scheduling.k8s.io/v1"
PREEMPT = "PreemptLowerPriority"
NEVER = "Never"
MAX_NAME = 253
HIGHEST_USER_PRIORITY = 1_000_000_000
"""The highest value a PriorityClass not named `system-*` may have (Kubernetes'
`HighestUserDefinablePriority`): the system classes sit above it."""


@dataclass(frozen=True)
class Wanted:
    """A PriorityClass a change needs: its name when new, its value and policy."""

    name: str
    value: int
    policy: str
    why: str
    """What it is for, for its description."""


SERVING = Wanted("gpu-serving", 10000, PREEMPT, "long-running GPU workloads (serving)")
BATCH = Wanted("gpu-batch", 100, NEVER, "run-to-completion GPU workloads (batch, training)")
TEMPLATE_PATHS = {
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
"""Owner kind -> where its pods' spec is: the owners a template patch is written for."""


@dataclass
class _Classes:
    """The PriorityClasses read, and the new ones this plan makes (by name)."""

    read: dict[str, Mapping[str, Any]]
    made: dict[str, Change]
    users: dict[str, list[str]] = field(default_factory=dict)
    """New class name -> the files of the template patches that name it."""
    alone: set[str] = field(default_factory=set)
    """New classes written for themselves (a Job's, named where the Job is made)."""

    def objects(self) -> list[Change]:
        """The new classes, each with the patches it serves (none: it stands by itself)."""
        return [
            replace(c, serves=() if n in self.alone else tuple(self.users.get(n, ())))
            for n, c in self.made.items()
        ]

    def resolve(self, want: Wanted) -> tuple[str, str]:
        """The name of a class of `want`'s value and policy (one read, else `want.name`), or
        "" and why none can be had."""
        for name, obj in sorted(self.read.items()):
            if _same(obj, want) and obj.get("globalDefault") is not True:
                return name, ""
        if want.name in self.read:
            obj = self.read[want.name]
            return "", (
                f"a PriorityClass named {want.name} exists with value {obj.get('value')} and "
                f"preemptionPolicy {obj.get('preemptionPolicy') or PREEMPT}, not {want.value} "
                f"and {want.policy}"
            )
        return want.name, ""


@dataclass
class _State:
    """What the changes of one plan share: the classes, each pod's priority, and the owners
    patched already (one template patch per owner)."""

    ctx: Context
    classes: _Classes
    priority: dict[tuple[str, str], int]
    patched: set[str]


def _same(obj: Mapping[str, Any], want: Wanted) -> bool:
    return obj.get("value") == want.value and (obj.get("preemptionPolicy") or PREEMPT) == (
        want.policy
    )


def changes(
    findings: Sequence[Finding], ctx: Context
) -> tuple[list[Change], dict[str, FindingFix]]:
    """The PriorityClasses and template patches for the GPU050 findings, and what each gets."""
    fixes: dict[str, FindingFix] = {}
    state = ctx.inv.owners.states.get(KEY)
    if state != "ok":
        why = (
            f"the PriorityClasses were not read ({state or 'not in the snapshot'}): gpuaudit "
            "cannot tell whether a class exists or whether a change would lower a priority"
        )
        for f in findings:
            fixes[key(f)] = FindingFix(None, "", None, why)
        return [], fixes
    classes = _Classes(
        {name: obj for (k, _, name), obj in ctx.inv.owners.named.items() if k == KEY}, {}
    )
    st = _State(ctx, classes, _priorities(ctx), set())
    patches: list[Change] = []
    for f in findings:
        if "lower_priority_holders" in f.evidence:
            made, why = _inversion(f, st)
        else:
            made, why = _policy(f, st)
        patches += [c for c in made if c.kind is ChangeKind.PATCH]
        if not made:
            fixes[key(f)] = FindingFix(None, "", None, why)
        for change in made:
            answer(fixes, (f,), change, why)
    return classes.objects() + patches, fixes


def _priorities(ctx: Context) -> dict[tuple[str, str], int]:
    pods = ctx.inv.pods
    if pods.empty or C.PRIORITY not in pods:
        return {}
    cols = (pods[c].tolist() for c in (C.NAMESPACE, C.POD, C.PRIORITY))
    return {(str(ns), str(p)): _int(v) for ns, p, v in zip(*cols, strict=True)}


def _int(v: Any) -> int:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return 0
    return 0 if f != f else int(f)


def _inversion(f: Finding, st: _State) -> tuple[list[Change], str]:
    ev = f.evidence
    if ev.get("preemption_policy") != NEVER:
        return [], (
            "its priority is above the holders' and it may preempt them: what stopped it (a "
            "PodDisruptionBudget of the holders, a gang scheduler that ignores priorities) is "
            "no field gpuaudit can set; follow the recommendation"
        )
    value = _int(ev.get("priority"))
    if value > HIGHEST_USER_PRIORITY:
        return [], (
            f"its priority {value} is a system class's: a class of that value cannot be made "
            "(names starting system- are reserved)"
        )
    base = str(ev.get("priority_class") or f"priority-{value}")
    want = Wanted(f"{base[: MAX_NAME - 8]}-preempt", value, PREEMPT, f"{base}, allowed to preempt")
    name, why = st.classes.resolve(want)
    if not name:
        return [], why
    ns, pod = f.resource.namespace, f.resource.name
    holders = [str(h.get("pod")) for h in ev.get("lower_priority_holders") or ()]
    effect = (
        f"its pods keep priority {value} and may now preempt lower-priority pods where they "
        f"need the room (today {', '.join(holders[:4]) or 'the holders the finding names'}): "
        "the evicted pods' owners start them again where they fit"
    )
    change, why = _template(f, st, want, name, (ns, pod), effect)
    if change is not None:
        return [change], why
    top = st.ctx.inv.owners.walk(ns, pod).target
    if top is None or top.kind != "Job" or name in st.classes.read:
        return [], why
    # A Job's template cannot be patched, but its next run can name the class: make it.
    made = st.classes.made.setdefault(name, _class_object(f, want, name, st.ctx))
    st.classes.alone.add(name)
    return [made], (f"{why}; the new PriorityClass {name} is written for it ({effect})")


def _policy(f: Finding, st: _State) -> tuple[list[Change], str]:
    out: list[Change] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for text in f.evidence.get("pods_without_priority_class") or ():
        ns, _, pod = str(text).partition("/")
        walk = st.ctx.inv.owners.walk(ns, pod)
        top = walk.target
        if top is None:
            skipped.append(
                f"pod {text}: " + ("a bare pod" if walk.outcome is Outcome.BARE else walk.why)
            )
            continue
        if top.uid in seen:
            continue
        seen.add(top.uid)
        want = SERVING if top.kind in ("Deployment", "StatefulSet") else BATCH
        name, why = st.classes.resolve(want)
        if not name:
            skipped.append(f"{top.describe()}: {why}")
            continue
        effect = (
            f"its pods get priority {want.value} and may preempt lower-priority pods (batch, "
            "notebooks, pods without a class: priority 0) where they need the GPUs"
            if want.policy == PREEMPT
            else f"its pods get priority {want.value}: scheduled before priority-0 pods, they "
            f"evict no one (preemptionPolicy Never), and pods of higher priority (serving, "
            f"{SERVING.value}) may preempt them"
        )
        change, why = _template(f, st, want, name, (ns, pod), effect)
        if change is None:
            skipped.append(why)
        else:
            out.append(change)
    more = "; ".join(skipped[:6]) + (" ..." if len(skipped) > 6 else "")
    if not out:
        return [], "no workload without a PriorityClass can be given one: " + (more or "none named")
    why = f"{len(out)} workload{'s' if len(out) > 1 else ''} given a PriorityClass"
    return out, why + (f"; not: {more}" if more else "")


def _template(
    f: Finding, st: _State, want: Wanted, name: str, pod: tuple[str, str], effect: str
) -> tuple[Change | None, str]:
    """The patch of the pod's owner's template setting `priorityClassName: name` (and the new
    class, made once into `st.classes.made`), or None and why not."""
    found = owner_template(st.ctx, pod, "priorityClassName", f"priorityClassName {name}")
    if isinstance(found, str):
        return None, found
    top, path, read = found
    now = st.priority.get(pod, 0)
    if now > want.value:
        return None, (
            f"{top.describe()}'s pods run at priority {now}, above {want.value}: gpuaudit "
            "never lowers a priority"
        )
    if top.uid in st.patched:
        return None, f"{top.describe()} is patched by another GPU050 change already"
    spec = _at(read, path)
    if spec.get("priorityClassName") not in (None, ""):
        return None, (
            f"{top.describe()}'s template names PriorityClass {spec['priorityClassName']} "
            "already (changed since its pods were made)"
        )
    st.patched.add(top.uid)
    target = _target(top)
    body = _patch_object(target, _nest(path[1:], {"priorityClassName": name}))
    new = name not in st.classes.read
    if new and name not in st.classes.made:
        st.classes.made[name] = _class_object(f, want, name, st.ctx)
    change = Change(
        kind=ChangeKind.PATCH,
        file=file_name(f, f"{top.kind}-{top.namespace}-{top.name}"),
        title=f"Give {top.describe()} PriorityClass {name}",
        findings=(f,),
        savings=st.ctx.per_week((f,)),
        risk=(
            f"PriorityClass {name} (value {want.value}, preemptionPolicy {want.policy}): "
            f"{effect}. No pod's priority is lowered (they run at {now}). Changing the pod "
            f"template {'rolls the pods' if top.kind != 'CronJob' else 'applies to the next runs'}"
            f"{' (a rolling restart)' if top.kind != 'CronJob' else ''}."
            + (f" Create PriorityClass {name} first (its file in this folder)." if new else "")
        ),
        target=target,
        patch_type="strategic",
        body=body,
        read=read,
    )
    if new:
        st.classes.users.setdefault(name, []).append(change.file)
    return change, f"{top.describe()} gets PriorityClass {name}: {effect}"


def owner_template(
    ctx: Context, pod: tuple[str, str], field: str, job: str
) -> tuple[ObjectRef, tuple[str, ...], Mapping[str, Any]] | str:
    """The owner of `pod` whose pod template a patch changes (`TEMPLATE_PATHS`), where its
    pods' spec is, and the owner as read; or why none: a bare pod's `field` cannot change, and
    a Job's template cannot either (`job` is what to set where the Job is made)."""
    walk = ctx.inv.owners.walk(*pod)
    top = walk.target
    where = f"{pod[0]}/{pod[1]}"
    if top is None:
        return (
            f"pod {where} is a bare pod: a pod's {field} cannot be changed, and no owner makes "
            "it again"
            if walk.outcome is Outcome.BARE
            else f"pod {where}: {walk.why}"
        )
    path = TEMPLATE_PATHS.get(top.kind)
    read = ctx.inv.owners.read(top)
    if path is None or read is None:
        if top.kind == "Job":
            return (
                f"{top.describe()}'s pod template cannot be changed once the Job exists: set "
                f"{job} where the Job is made"
            )
        return f"gpuaudit writes no template patch for {top.describe()} yet"
    return top, path, read


def _class_object(f: Finding, want: Wanted, name: str, ctx: Context) -> Change:
    body = {
        "apiVersion": API,
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": want.value,
        "preemptionPolicy": want.policy,
        "globalDefault": False,
        "description": f"gpuaudit fix: {want.why}",
    }
    return Change(
        kind=ChangeKind.OBJECT,
        file=file_name(f, f"priorityclass-{name}"),
        title=f"New PriorityClass {name} (value {want.value}, preemptionPolicy {want.policy})",
        findings=(f,),
        # What it saves is counted with the patches that use it.
        savings=Savings(0.0, 0.0, ctx.currency),
        risk=(
            f"None by itself: no pod uses it until a pod template names it (the patches of "
            f"this folder). It is not the global default. Its value ({want.value}) and "
            "preemptionPolicy cannot be changed once it is created."
        ),
        target=Target(API, "PriorityClass", "", name, "priorityclasses"),
        body=body,
    )


def _at(obj: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, Any]:
    here: Any = obj
    for k in path:
        here = here.get(k) if isinstance(here, Mapping) else None
    return here if isinstance(here, Mapping) else {}


def _nest(path: tuple[str, ...], leaf: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = leaf
    for k in reversed(path):
        out = {k: out}
    return out

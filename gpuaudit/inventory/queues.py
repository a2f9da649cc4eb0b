"""Queues: the GPU quota Kueue and Volcano promise, and the objects admitted under it, read from
the Kubernetes lists as the API returned them.

- Kueue (`kueue.x-k8s.io`, v1beta2 and v1beta1): `ResourceFlavor` (`spec.nodeLabels`,
  `spec.nodeTaints`); `ClusterQueue` (`spec.cohortName`, `spec.cohort` before v1beta2;
  `spec.resourceGroups[].flavors[].resources[]` with `nominalQuota`, `borrowingLimit`,
  `lendingLimit`; `status.pendingWorkloads`); `Cohort` (`spec.parentName`, `spec.parent` before
  v1beta2, and its own `resourceGroups`); `LocalQueue` (`spec.clusterQueue`); `Workload`
  (`status.admission.clusterQueue` and `podSetAssignments[]` with `flavors`, `resourceUsage` and
  `count`; the conditions `QuotaReserved`, `Admitted` and `Finished` with their
  `lastTransitionTime`; `spec.podSets` for what a pending one asks for).
- Volcano (`scheduling.volcano.sh/v1beta1`): `Queue` (`spec.capability`, `spec.deserved`,
  `spec.guarantee.resource`, `spec.parent`; `status.allocated`) and `PodGroup` (`spec.queue`,
  default `default`).
- KAI Scheduler (`scheduling.run.ai`): `Queue` (v2: `spec.parentQueue`,
  `spec.resources.gpu.quota`, `.limit` and `.overQuotaWeight`, numbers in GPUs, -1 for
  unlimited; `status.allocated`) and `PodGroup` (v2alpha2: `spec.queue`). What a KAI queue's
  pods wait for: its pods `Pending` with `PodScheduled` False for `Unschedulable` (whole GPUs,
  and the share of a GPU fraction, `gpuaudit.inventory.kai`), by PodGroup.

Only GPU resources count: `nvidia.com/gpu` and `nvidia.com/mig-<profile>`. Pods join a queue
through the gang they belong to (a Kueue Workload or a Volcano PodGroup, see
`gpuaudit.inventory.gangs`), a Kueue Workload owning the pod itself, the pod label
`kueue.x-k8s.io/queue-name` (through its LocalQueue), the pod annotation
`scheduling.volcano.sh/queue-name` or the pod label `kai.scheduler/queue` (`runai/queue` before
KAI v0.6). What the pods did over the window is in
`gpuaudit.inventory.queue_usage`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from gpuaudit.core import limits, numbers
from gpuaudit.inventory import kai
from gpuaudit.inventory.capabilities import Capability
from gpuaudit.inventory.kube import Objects, gpu_quantity, gpu_requests, timestamp

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
KUEUE = "Kueue"
VOLCANO = "Volcano"
KAI = "KAI"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
VOLCANO_DEFAULT_QUEUE = "default"
_NAME_CHARS = 120
"""Characters of an object's name kept in a warning."""
QUEUE_LISTS = (
    "kueue_clusterqueues",
    "kueue_workloads",
    "kueue_localqueues",
    "kueue_resourceflavors",
    "kueue_cohorts",
    "volcano_queues",
    "volcano_podgroups",
    "kai_queues",
    "kai_podgroups",
)
"""The Kubernetes lists (see `gpuaudit.sources.kubernetes.RESOURCES`) queues are read from."""


def is_gpu_resource(name: str) -> bool:
    """`nvidia.com/gpu` or a MIG resource `nvidia.com/mig-<profile>`."""
    return name == GPU or name.startswith(MIG_PREFIX)


def mig_profile(resource: str) -> str:
    """The MIG profile of a MIG resource (`nvidia.com/mig-1g.10gb` -> `1g.10gb`), else empty."""
    return resource[len(MIG_PREFIX) :] if resource.startswith(MIG_PREFIX) else ""


@dataclass(frozen=True)
class Flavor:
    """A Kueue ResourceFlavor: the nodes it stands for."""

    name: str
    node_labels: Mapping[str, str]
    """Labels a node must carry to belong to the flavor (none: every node)."""
    node_taints: tuple[str, ...] = ()
    """The flavor's nodeTaints as `key=value:Effect`."""

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with these labels belongs to the flavor."""
        return all(labels.get(k) == v for k, v in self.node_labels.items())


@dataclass(frozen=True)
class Quota:
    """One GPU resource of one flavor in a queue's (or cohort's) quota."""

    flavor: str
    """The Kueue ResourceFlavor; empty for Volcano, whose quota spans the cluster."""
    resource: str
    nominal: float
    """Kueue `nominalQuota`; Volcano `deserved` (0 when unset)."""
    borrowing_limit: float | None = None
    """Kueue `borrowingLimit`; None: no limit."""
    lending_limit: float | None = None
    """Kueue `lendingLimit`; None: no limit (all of it may be lent in a cohort)."""
    guarantee: float = 0.0
    """Volcano `guarantee.resource`: reserved for the queue, never reclaimed by others."""
    capability: float | None = None
    """Volcano `capability`, KAI `limit`: the queue's upper limit; None when unset (KAI: -1)."""
    over_quota_weight: float | None = None
    """KAI `overQuotaWeight`: its weight in sharing what is left over; None for the others."""
    unlimited: bool = False
    """KAI `quota` -1: it deserves whatever it asks for (`nominal` reads 0)."""


@dataclass(frozen=True)
class Queue:
    """A Kueue ClusterQueue or a Volcano Queue."""

    system: str
    """`Kueue` or `Volcano`."""
    kind: str
    """`ClusterQueue` or `Queue`."""
    name: str
    cohort: str
    """The Kueue cohort it borrows and lends in (empty: none); a Volcano queue's parent."""
    quotas: tuple[Quota, ...]
    allocated: Mapping[str, float] = field(default_factory=dict)
    """Volcano `status.allocated` GPU resources at the scan."""
    reserved: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """Kueue `status.flavorsReservation` at the scan: (flavor, GPU resource) -> quota reserved
    by its Workloads, including those of namespaces the scan did not read."""
    unaudited: bool = False
    """Whether a GPU quantity of the queue, or of a Workload or PodGroup admitted to it, is no
    Kubernetes quantity, is negative or is past `limits.QUEUE_QUOTA` (a warning names it): its
    quota and use are unknown, and GPU090 does not judge it."""

    def fenced(self, q: Quota) -> float:
        """The part of `q` no other queue may use while it sits idle: a Kueue queue outside a
        cohort fences all of it, one in a cohort `nominalQuota - lendingLimit` (nothing
        without a lending limit); a Volcano queue fences its guarantee."""
        if self.system == VOLCANO:
            return q.guarantee
        if self.system == KAI:
            return 0.0  # KAI lends idle deserved quota over quota, and reclaims it
        if not self.cohort:
            return q.nominal
        if q.lending_limit is None:
            return 0.0
        return max(0.0, q.nominal - q.lending_limit)


@dataclass(frozen=True)
class Cohort:
    """A Kueue Cohort object: its parent and its own quota, shared by its members."""

    name: str
    parent: str
    quotas: tuple[Quota, ...]
    unaudited: bool = False
    """Whether a GPU quantity of its quota could not be read (see `Queue.unaudited`)."""


@dataclass(frozen=True)
class Admission:
    """A Kueue Workload or a Volcano PodGroup, and what it holds or asks of its queue."""

    system: str
    kind: str
    """`Workload` or `PodGroup`."""
    namespace: str
    name: str
    queue: str
    """The ClusterQueue (Kueue) or Queue (Volcano); empty when it cannot be told."""
    gang: str
    """The gang id its pods carry (see `gpuaudit.inventory.gangs`)."""
    usage: tuple[tuple[str, str, float], ...] = ()
    """(flavor, resource, quantity) of GPU quota it was admitted with (Kueue)."""
    requests: tuple[tuple[str, float], ...] = ()
    """(resource, quantity) of GPUs it asks for in total."""
    reserved_at: float | None = None
    """When its quota was reserved (Kueue `QuotaReserved`, else `Admitted`, True)."""
    finished_at: float | None = None
    """When it finished (Kueue `Finished` True)."""
    pending_since: float | None = None
    """When it started waiting for quota, while it waits now (Kueue); None otherwise."""
    owners: tuple[tuple[str, str], ...] = ()
    """(kind, name) of its ownerReferences."""
    unreadable: bool = False
    """Whether a GPU quantity of it could not be read (its queue is then not audited)."""


@dataclass(frozen=True)
class QueueNode:
    """What queue figures need of a node: labels, allocatable GPU resources, cordon."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, float]
    """Allocatable GPU resources (`nvidia.com/gpu`, `nvidia.com/mig-*`)."""
    cordoned: bool


@dataclass(frozen=True)
class Queues:
    """The queue objects of one snapshot. Empty when none were read."""

    queues: tuple[Queue, ...] = ()
    flavors: Mapping[str, Flavor] = field(default_factory=dict)
    """ResourceFlavors by name; empty when they were not read."""
    flavors_read: bool = False
    """Whether the ResourceFlavors list was read (a missing flavor then selects no node)."""
    cohorts: Mapping[str, Cohort] = field(default_factory=dict)
    local_queues: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """(namespace, LocalQueue) -> ClusterQueue."""
    admissions: tuple[Admission, ...] = ()
    nodes: tuple[QueueNode, ...] = ()
    pod_queue: Mapping[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    """(namespace, pod) -> (system, queue) of every pod that belongs to a queue."""
    pod_admission: Mapping[tuple[str, str], Admission] = field(default_factory=dict)
    """(namespace, pod) -> the Workload or PodGroup it runs for, where known."""

    def namespaces(self, q: Queue) -> tuple[str, ...]:
        """Namespaces that submit to `q`: those of its LocalQueues (Kueue), its admitted
        objects and its pods."""
        return self._namespaces.get((q.system, q.name), ())

    @cached_property
    def _namespaces(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """(system, queue) -> the namespaces that submit to it, gathered in one pass."""
        out: dict[tuple[str, str], set[str]] = {}
        for (ns, _), cq in self.local_queues.items():
            out.setdefault((KUEUE, cq), set()).add(ns)
        for a in self.admissions:
            out.setdefault((a.system, a.queue), set()).add(a.namespace)
        for (ns, _), sq in self.pod_queue.items():
            out.setdefault(sq, set()).add(ns)
        return {key: tuple(sorted(v)) for key, v in out.items()}

    def admitted(self, q: Queue) -> tuple[Admission, ...]:
        """The Workloads (Kueue) or PodGroups (Volcano) of `q`, in the order read."""
        return self._admitted.get((q.system, q.name), ())

    @cached_property
    def _admitted(self) -> dict[tuple[str, str], tuple[Admission, ...]]:
        out: dict[tuple[str, str], list[Admission]] = {}
        for a in self.admissions:
            out.setdefault((a.system, a.queue), []).append(a)
        return {key: tuple(v) for key, v in out.items()}

    def lends(self, q: Queue) -> bool:
        """Whether `q` has anyone to lend to: another ClusterQueue in its cohort, or a cohort
        with a parent or children (Kueue's hierarchical cohorts)."""
        if q.system != KUEUE or not q.cohort:
            return False
        members, parents = self._cohort_tree
        peers = len(members.get(q.cohort, ())) > 1
        c = self.cohorts.get(q.cohort)
        tree = (c is not None and bool(c.parent)) or q.cohort in parents
        return peers or tree

    @cached_property
    def _cohort_tree(self) -> tuple[dict[str, set[str]], set[str]]:
        """Each cohort's ClusterQueues (by name), and the cohorts some Cohort names its
        parent."""
        members: dict[str, set[str]] = {}
        for o in self.queues:
            if o.system == KUEUE and o.cohort:
                members.setdefault(o.cohort, set()).add(o.name)
        return members, {x.parent for x in self.cohorts.values() if x.parent}

    def flavor_nodes(self, flavor: str) -> tuple[QueueNode, ...] | None:
        """The nodes of a Kueue flavor (empty name: every node); None when unknown (the
        ResourceFlavors were not read)."""
        if not flavor:
            return self.nodes
        f = self.flavors.get(flavor)
        if f is None:
            return () if self.flavors_read else None
        return tuple(n for n in self.nodes if f.selects(n.labels))


# ---- reading the objects ----------------------------------------------------------------


def _map(obj: Any, key: str) -> Mapping[str, Any]:
    val = obj.get(key) if isinstance(obj, Mapping) else None
    return val if isinstance(val, Mapping) else {}


def _list(obj: Any, key: str) -> list[Any]:
    val = obj.get(key) if isinstance(obj, Mapping) else None
    return val if isinstance(val, list) else []


def _text(obj: Any, key: str) -> str:
    val = obj.get(key) if isinstance(obj, Mapping) else None
    return val if isinstance(val, str) else ""


def _meta(obj: Mapping[str, Any]) -> tuple[str, str]:
    m = _map(obj, "metadata")
    return _text(m, "namespace"), _text(m, "name")


@dataclass
class _Reader:
    """Reads the GPU quantities of one object, and says which it could not read: one that is
    no Kubernetes quantity (`NaN`, `1e400`, `١٢`), a negative one, or one past the
    bound (`limits.QUEUE_QUOTA`). Such a quantity is never read as 0 or as the bound: it makes
    the queue's figures unknown (see `Queue.unaudited`)."""

    what: str
    """The object, for warnings (`ClusterQueue team-a`)."""
    bound: int
    problems: list[str] = field(default_factory=list)

    def qty(self, raw: Any, name: str) -> float | None:
        """The quantity `raw` of the field `name` (`nominalQuota of nvidia.com/gpu in flavor
        h100`); None when absent or unreadable."""
        if raw is None:
            return None
        f = numbers.signed_quantity(raw)
        shown = f"{str(raw)[:40]!r}"
        if f is None:
            self.problems.append(f"{name} is {shown}, not a Kubernetes quantity")
        elif f < 0:
            self.problems.append(f"{name} is {shown}, a negative quantity")
        elif f > self.bound:
            self.problems.append(
                f"{name} is {shown}, more than the {self.bound:,} GPUs or MIG slices a queue "
                f"may hold ({limits.QUEUE_QUOTA.env})"
            )
        else:
            return f
        return None

    def gpus(self, res: Mapping[str, Any], name: str) -> dict[str, float]:
        """The GPU resources of a ResourceList (`name`: the field that holds it, `spec.deserved`);
        one that cannot be read is left out."""
        out: dict[str, float] = {}
        for k, v in res.items():
            if is_gpu_resource(str(k)):
                f = self.qty(v, f"{name} of {str(k)[:80]}")
                if f is not None:
                    out[str(k)] = f
        return out

    def said(self, notes: list[str], consequence: str) -> bool:
        """Add a note for each quantity that could not be read, ending with `consequence`
        (`its quota is not audited`); whether there was any."""
        notes.extend(f"{self.what}: {p}; {consequence}" for p in self.problems)
        return bool(self.problems)


def _name(raw: str) -> str:
    return raw[:_NAME_CHARS]


def _condition(obj: Mapping[str, Any], ctype: str) -> tuple[str, float | None]:
    """(status, lastTransitionTime) of a status condition; ("", None) when absent."""
    for c in _list(_map(obj, "status"), "conditions"):
        if isinstance(c, Mapping) and c.get("type") == ctype:
            return str(c.get("status", "")), timestamp(c.get("lastTransitionTime"))
    return "", None


def _quotas(groups: Iterable[Any], read: _Reader) -> tuple[Quota, ...]:
    """The GPU quotas of Kueue resourceGroups."""
    out: list[Quota] = []
    for rg in groups:
        for fl in _list(rg, "flavors"):
            fname = _text(fl, "name")
            for r in _list(fl, "resources"):
                name = _text(r, "name")
                if not fname or not is_gpu_resource(name):
                    continue
                got = {
                    key: read.qty(r.get(key), f"{key} of {name[:80]} in flavor {_name(fname)}")
                    for key in ("nominalQuota", "borrowingLimit", "lendingLimit")
                }
                out.append(
                    Quota(
                        fname,
                        name,
                        got["nominalQuota"] or 0.0,
                        borrowing_limit=got["borrowingLimit"],
                        lending_limit=got["lendingLimit"],
                    )
                )
    return tuple(out)


def _flavor(obj: Mapping[str, Any]) -> Flavor:
    spec = _map(obj, "spec")
    labels = {str(k): str(v) for k, v in _map(spec, "nodeLabels").items()}
    taints = tuple(
        f"{_text(t, 'key')}={_text(t, 'value')}:{_text(t, 'effect')}"
        for t in _list(spec, "nodeTaints")
        if isinstance(t, Mapping)
    )
    return Flavor(_meta(obj)[1], labels, taints)


_NOT_AUDITED = "its quota is not audited"


def _cluster_queue(obj: Mapping[str, Any], notes: list[str], bound: int) -> Queue:
    name = _meta(obj)[1]
    read = _Reader(f"ClusterQueue {_name(name)}", bound)
    spec = _map(obj, "spec")
    cohort = _text(spec, "cohortName") or _text(spec, "cohort")
    reserved: dict[tuple[str, str], float] = {}
    status = _map(obj, "status")
    field_name = "flavorsReservation" if _list(status, "flavorsReservation") else "flavorsUsage"
    for fu in _list(status, field_name):
        for r in _list(fu, "resources"):
            res = _text(r, "name")
            if _text(fu, "name") and is_gpu_resource(res):
                where = f"status.{field_name} of {res[:80]} in flavor {_name(_text(fu, 'name'))}"
                reserved[(_text(fu, "name"), res)] = read.qty(r.get("total"), where) or 0.0
    quotas = _quotas(_list(spec, "resourceGroups"), read)
    return Queue(
        KUEUE,
        "ClusterQueue",
        name,
        cohort,
        quotas,
        reserved=reserved,
        unaudited=read.said(notes, _NOT_AUDITED),
    )


def _cohort(obj: Mapping[str, Any], notes: list[str], bound: int) -> Cohort:
    name = _meta(obj)[1]
    read = _Reader(f"Cohort {_name(name)}", bound)
    spec = _map(obj, "spec")
    parent = _text(spec, "parentName") or _text(spec, "parent")
    quotas = _quotas(_list(spec, "resourceGroups"), read)
    return Cohort(name, parent, quotas, unaudited=read.said(notes, _NOT_AUDITED))


def _volcano_queue(obj: Mapping[str, Any], notes: list[str], bound: int) -> Queue:
    name = _meta(obj)[1]
    read = _Reader(f"Volcano queue {_name(name)}", bound)
    spec = _map(obj, "spec")
    cap = read.gpus(_map(spec, "capability"), "spec.capability")
    deserved = read.gpus(_map(spec, "deserved"), "spec.deserved")
    guarantee = read.gpus(_map(_map(spec, "guarantee"), "resource"), "spec.guarantee.resource")
    quotas = tuple(
        Quota(
            "",
            r,
            deserved.get(r, 0.0),
            guarantee=guarantee.get(r, 0.0),
            capability=cap.get(r),
        )
        for r in sorted(set(cap) | set(deserved) | set(guarantee))
    )
    allocated = read.gpus(_map(_map(obj, "status"), "allocated"), "status.allocated")
    return Queue(
        VOLCANO,
        "Queue",
        name,
        _text(spec, "parent"),
        quotas,
        allocated,
        unaudited=read.said(notes, _NOT_AUDITED),
    )


def _kai_queue(obj: Mapping[str, Any], notes: list[str], bound: int) -> Queue:
    """A KAI Queue: its GPU quota, limit and over-quota weight are numbers (GPUs, -1 for
    unlimited), not Kubernetes quantities."""
    name = _meta(obj)[1]
    read = _Reader(f"KAI queue {_name(name)}", bound)
    spec = _map(obj, "spec")
    gpu = _map(_map(spec, "resources"), "gpu")
    figures: dict[str, float | None] = {}
    for key in ("quota", "limit", "overQuotaWeight"):
        raw = gpu.get(key)
        unset = raw == -1 and not isinstance(raw, bool) and key != "overQuotaWeight"
        figures[key] = -1.0 if unset else read.qty(raw, f"spec.resources.gpu.{key}")
    quota, limit = figures["quota"], figures["limit"]
    line = Quota(
        "",
        GPU,
        max(0.0, quota or 0.0),
        capability=None if limit == -1 else (limit or 0.0),
        over_quota_weight=figures["overQuotaWeight"],
        unlimited=quota == -1,
    )
    allocated = read.gpus(_map(_map(obj, "status"), "allocated"), "status.allocated")
    return Queue(
        KAI,
        "Queue",
        name,
        _text(spec, "parentQueue"),
        (line,),
        allocated,
        unaudited=read.said(notes, _NOT_AUDITED),
    )


def _kai_waits(
    objects: Objects, pod_gang: Mapping[tuple[str, str], str]
) -> dict[str, tuple[float, float, list[tuple[str, str]]]]:
    """What KAI pods wait for, by gang id (a pod of no gang: `Pod/<namespace>/<name>`): GPUs
    (whole, and a fraction pod's `gpu-fraction` x `gpu-fraction-num-devices`, or its
    `gpu-memory` x `gpu-fraction-num-devices` over the smallest GPU memory of the nodes, as
    KAI's proportion plugin counts a pending pod's request in its queue; left out where no node
    says its GPU memory), since when, and the pods; pods `Pending` with `PodScheduled` False
    for `Unschedulable`."""
    out: dict[str, tuple[float, float, list[tuple[str, str]]]] = {}
    memories = (
        kai.gpu_memory(_map(_map(n, "metadata"), "labels")) for n in objects.get("nodes", ())
    )
    smallest = min((m for m in memories if m is not None), default=None)
    for pod in objects.get("pods", ()):
        if _text(_map(pod, "status"), "phase") != "Pending":
            continue
        cond = next(
            (
                c
                for c in _list(_map(pod, "status"), "conditions")
                if isinstance(c, Mapping) and c.get("type") == "PodScheduled"
            ),
            {},
        )
        if _text(cond, "status") != "False" or _text(cond, "reason") != "Unschedulable":
            continue
        since = timestamp(cond.get("lastTransitionTime"))
        key = _meta(pod)
        gpus, _ = gpu_requests(pod)
        req = kai.request(_map(_map(pod, "metadata"), "annotations"), "")
        if req is not None:
            gpus += req.devices * kai.pending_share(req, smallest)
        when = since or timestamp(_map(pod, "metadata").get("creationTimestamp"))
        if gpus <= 0 or when is None:
            continue
        gang = pod_gang.get(key) or f"Pod/{key[0]}/{key[1]}"
        qty, first, pods = out.get(gang, (0.0, when, []))
        out[gang] = (qty + gpus, min(first, when), [*pods, key])
    return out


def _kai_admissions(objects: Objects, pod_gang: Mapping[tuple[str, str], str]) -> list[Admission]:
    """KAI PodGroups, each with what its pods wait for; and each pod of a KAI queue (by its
    label) that waits outside any PodGroup."""
    waits = _kai_waits(objects, pod_gang)
    out: list[Admission] = []
    for obj in objects.get("kai_podgroups", ()):
        ns, name = _meta(obj)
        gang = f"scheduling.run.ai/PodGroup/{ns}/{name}"
        qty, since, _ = waits.pop(gang, (0.0, None, []))
        out.append(
            Admission(
                system=KAI,
                kind="PodGroup",
                namespace=ns,
                name=name,
                queue=_text(_map(obj, "spec"), "queue"),
                gang=gang,
                requests=((GPU, qty),) if qty > 0 else (),
                pending_since=since,
                owners=_owners(obj),
            )
        )
    labels = {_meta(p): _map(_map(p, "metadata"), "labels") for p in objects.get("pods", ())}
    for gang, (qty, since, pods) in sorted(waits.items()):
        ns, name = pods[0]
        queue = next((q for q in (_text(labels[pods[0]], k) for k in kai.QUEUE_LABELS) if q), "")
        if queue and gang.startswith("Pod/"):
            out.append(
                Admission(
                    system=KAI,
                    kind="Pod",
                    namespace=ns,
                    name=name,
                    queue=queue,
                    gang=gang,
                    requests=((GPU, qty),),
                    pending_since=since,
                )
            )
    return out


def _owners(obj: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(
        (_text(r, "kind"), _text(r, "name"))
        for r in _list(_map(obj, "metadata"), "ownerReferences")
        if isinstance(r, Mapping) and _text(r, "kind") and _text(r, "name")
    )


def _podset_requests(spec: Mapping[str, Any], read: _Reader) -> dict[str, dict[str, float]]:
    """Pod set name -> total GPU resources it asks for (count x per-pod request)."""
    out: dict[str, dict[str, float]] = {}
    for ps in _list(spec, "podSets"):
        if not isinstance(ps, Mapping):
            continue
        count = read.qty(ps.get("count"), f"podSets[{_name(_text(ps, 'name'))}].count")
        gpus, migs = gpu_requests({"spec": _map(_map(ps, "template"), "spec")})
        per_pod = {GPU: gpus, **{MIG_PREFIX + p: n for p, n in migs.items()}}
        n = 1.0 if count is None else count
        out[_text(ps, "name")] = {r: v * n for r, v in per_pod.items() if v > 0}
    return out


def _consequence(system: str, queue: str) -> str:
    kind = "ClusterQueue" if system == KUEUE else "Volcano queue"
    return f"{kind} {_name(queue)} is not audited" if queue else "it was ignored"


def _workload(
    obj: Mapping[str, Any],
    local_queues: Mapping[tuple[str, str], str],
    notes: list[str],
    bound: int,
) -> Admission:
    ns, name = _meta(obj)
    read = _Reader(f"Workload {_name(ns)}/{_name(name)}", bound)
    spec = _map(obj, "spec")
    admission = _map(_map(obj, "status"), "admission")
    per_set = _podset_requests(spec, read)
    usage: dict[tuple[str, str], float] = {}
    for psa in _list(admission, "podSetAssignments"):
        if not isinstance(psa, Mapping):
            continue
        flavors = {str(k): str(v) for k, v in _map(psa, "flavors").items()}
        field_name = f"podSetAssignments[{_name(_text(psa, 'name'))}].resourceUsage"
        used = read.gpus(_map(psa, "resourceUsage"), field_name)
        used = used or per_set.get(_text(psa, "name"), {})
        for r, v in used.items():
            if r in flavors and v > 0:
                usage[(flavors[r], r)] = usage.get((flavors[r], r), 0.0) + v
    requests: dict[str, float] = {}
    for sets in per_set.values():
        for r, v in sets.items():
            requests[r] = requests.get(r, 0.0) + v
    queue = _text(admission, "clusterQueue") or local_queues.get((ns, _text(spec, "queueName")), "")
    reserved, reserved_at = _condition(obj, "QuotaReserved")
    admitted, admitted_at = _condition(obj, "Admitted")
    finished, finished_at = _condition(obj, "Finished")
    start = reserved_at if reserved == "True" else admitted_at if admitted == "True" else None
    pending_since = None
    active = spec.get("active") is not False
    if finished != "True" and reserved != "True" and admitted != "True" and active:
        created = timestamp(_map(obj, "metadata").get("creationTimestamp"))
        pending_since = reserved_at if reserved == "False" and reserved_at else created
    return Admission(
        system=KUEUE,
        kind="Workload",
        namespace=ns,
        name=name,
        queue=queue,
        gang=f"kueue.x-k8s.io/Workload/{ns}/{name}",
        usage=tuple((f, r, v) for (f, r), v in sorted(usage.items())),
        requests=tuple(sorted(requests.items())),
        reserved_at=start,
        finished_at=finished_at if finished == "True" else None,
        pending_since=pending_since,
        owners=_owners(obj),
        unreadable=read.said(notes, _consequence(KUEUE, queue)),
    )


def _podgroup(obj: Mapping[str, Any], notes: list[str], bound: int) -> Admission:
    ns, name = _meta(obj)
    read = _Reader(f"PodGroup {_name(ns)}/{_name(name)}", bound)
    spec = _map(obj, "spec")
    queue = _text(spec, "queue") or VOLCANO_DEFAULT_QUEUE
    requests = read.gpus(_map(spec, "minResources"), "spec.minResources")
    return Admission(
        system=VOLCANO,
        kind="PodGroup",
        namespace=ns,
        name=name,
        queue=queue,
        gang=f"scheduling.volcano.sh/PodGroup/{ns}/{name}",
        requests=tuple(sorted(requests.items())),
        owners=_owners(obj),
        unreadable=read.said(notes, _consequence(VOLCANO, queue)),
    )


def _node(obj: Mapping[str, Any], bound: int) -> QueueNode:
    labels = {str(k): str(v) for k, v in _map(_map(obj, "metadata"), "labels").items()}
    # A node's unreadable GPU counts are said once, where the node's row is read
    # (`kube.node_row`): here they are 0, as there.
    alloc = {
        str(k): gpu_quantity(v, "", None, bound)
        for k, v in _map(_map(obj, "status"), "allocatable").items()
        if is_gpu_resource(str(k))
    }
    cordoned = _map(obj, "spec").get("unschedulable") is True
    return QueueNode(_meta(obj)[1], labels, alloc, cordoned)


def _pod_links(
    objects: Objects,
    pod_gang: Mapping[tuple[str, str], str],
    admissions: list[Admission],
    local_queues: Mapping[tuple[str, str], str],
) -> tuple[dict[tuple[str, str], tuple[str, str]], dict[tuple[str, str], Admission]]:
    """Which queue, and which Workload or PodGroup, each pod belongs to."""
    by_gang = {a.gang: a for a in admissions}
    own_pod = {
        (a.namespace, name): a
        for a in admissions
        if a.system == KUEUE
        for kind, name in a.owners
        if kind == "Pod"
    }
    queue_of: dict[tuple[str, str], tuple[str, str]] = {}
    admission_of: dict[tuple[str, str], Admission] = {}
    for pod in objects.get("pods", ()):
        key = _meta(pod)
        meta = _map(pod, "metadata")
        adm = by_gang.get(pod_gang.get(key, "")) or own_pod.get(key)
        if adm is not None and adm.queue:
            queue_of[key] = (adm.system, adm.queue)
            admission_of[key] = adm
            continue
        local = _text(_map(meta, "labels"), KUEUE_QUEUE_LABEL)
        cq = local_queues.get((key[0], local), "") if local else ""
        if cq:
            queue_of[key] = (KUEUE, cq)
            continue
        vq = _text(_map(meta, "annotations"), VOLCANO_QUEUE_ANNOTATION)
        if vq:
            queue_of[key] = (VOLCANO, vq)
            continue
        labels = _map(meta, "labels")
        kq = next((q for q in (_text(labels, k) for k in kai.QUEUE_LABELS) if q), "")
        if kq:
            queue_of[key] = (KAI, kq)
    return queue_of, admission_of


def build(
    objects: Objects,
    lists: Iterable[str],
    pod_gang: Mapping[tuple[str, str], str],
    notes: list[str] | None = None,
) -> Queues:
    """The queue objects among `objects` (by list key), the pods that belong to each queue
    (`pod_gang`: (namespace, pod) -> gang id, from `gpuaudit.inventory.gangs.build`).
    `lists` are the keys of the lists that were read. Each GPU quantity that cannot be read is
    a sentence in `notes`, and leaves its queue unaudited (`Queue.unaudited`)."""
    read = set(lists)
    said: list[str] = [] if notes is None else notes
    bound = limits.QUEUE_QUOTA.value()
    local_queues = {
        _meta(o): _text(_map(o, "spec"), "clusterQueue")
        for o in objects.get("kueue_localqueues", ())
        if _text(_map(o, "spec"), "clusterQueue")
    }
    queues = [_cluster_queue(o, said, bound) for o in objects.get("kueue_clusterqueues", ())]
    queues += [_volcano_queue(o, said, bound) for o in objects.get("volcano_queues", ())]
    queues += [_kai_queue(o, said, bound) for o in objects.get("kai_queues", ())]
    admissions = [
        _workload(o, local_queues, said, bound) for o in objects.get("kueue_workloads", ())
    ]
    admissions += [_podgroup(o, said, bound) for o in objects.get("volcano_podgroups", ())]
    if "kai_queues" in read:
        admissions += _kai_admissions(objects, pod_gang)
    # A queue whose Workloads or PodGroups hold quantities that cannot be read has unknown use.
    blind = {(a.system, a.queue) for a in admissions if a.unreadable}
    queues = [replace(q, unaudited=True) if (q.system, q.name) in blind else q for q in queues]
    queues.sort(key=lambda q: (q.system, q.name))
    flavors = {f.name: f for f in (_flavor(o) for o in objects.get("kueue_resourceflavors", ()))}
    cohorts = {
        c.name: c for c in (_cohort(o, said, bound) for o in objects.get("kueue_cohorts", ()))
    }
    pod_queue, pod_admission = _pod_links(objects, pod_gang, admissions, local_queues)
    node_bound = limits.NODE_GPUS.value()
    return Queues(
        queues=tuple(queues),
        flavors=flavors,
        flavors_read="kueue_resourceflavors" in read,
        cohorts=cohorts,
        local_queues=local_queues,
        admissions=tuple(admissions),
        nodes=tuple(_node(o, node_bound) for o in objects.get("nodes", ())),
        pod_queue=pod_queue,
        pod_admission=pod_admission,
    )


def capabilities(
    lists: Iterable[str], states: Mapping[str, Any]
) -> tuple[set[Capability], dict[Capability, str]]:
    """`Capability.QUEUES` when Kueue ClusterQueues and Workloads, Volcano Queues and
    PodGroups, or KAI Queues and PodGroups, were read; else why not, from the lists' states
    (`absent: ...`,
    `forbidden: ...`). Also the reasons each unread queue list is missing."""
    read = set(lists)
    missing: dict[Capability, str] = {}
    for key in QUEUE_LISTS:
        cap = Capability.of_list(key)
        if key not in read and cap is not None:
            missing[cap] = str(states.get(key) or f"{key} were not read")
    kueue = {"kueue_clusterqueues", "kueue_workloads"} <= read
    volcano = {"volcano_queues", "volcano_podgroups"} <= read
    kai_read = {"kai_queues", "kai_podgroups"} <= read
    if kueue or volcano or kai_read:
        return {Capability.QUEUES}, missing

    def why(keys: tuple[str, str], what: str) -> str:
        lacking = [k for k in keys if k not in read]
        said = "; ".join(f"{k}: {states.get(k) or 'not read'}" for k in lacking)
        return f"no {what} ({said})"

    missing[Capability.QUEUES] = (
        why(("kueue_clusterqueues", "kueue_workloads"), "Kueue ClusterQueues with Workloads")
        + " and "
        + why(("volcano_queues", "volcano_podgroups"), "Volcano Queues with PodGroups")
        + " and "
        + why(("kai_queues", "kai_podgroups"), "KAI Queues with PodGroups")
    )
    return set(), missing

"""Gangs: pods that must all run for any of them to make progress (`docs/domain.md`, Gangs).

A gang comes from, in this order of precedence (a pod joins the first gang that claims it):

1. a Volcano `PodGroup` (`scheduling.volcano.sh/v1beta1`; pods by the annotation
   `scheduling.k8s.io/group-name` or `scheduling.volcano.sh/group-name`; size `spec.minMember`);
2. a coscheduling `PodGroup` (`scheduling.x-k8s.io/v1alpha1`; pods by the label
   `scheduling.x-k8s.io/pod-group`, legacy `pod-group.scheduling.sigs.k8s.io/name`; size
   `spec.minMember`), or a KAI Scheduler `PodGroup` (`scheduling.run.ai/v2alpha2`; pods by the
   annotation `pod-group-name`; size `spec.minMember`, 0 meaning no gang: size unknown);
3. a Kueue `Workload` (pods by the plain-pod-group label `kueue.x-k8s.io/pod-group-name`, or
   by the Workload's owner: the pod's own controller, its JobSet, or its training job; size the
   admitted podSet counts, else the requested ones);
4. the job object itself: a `PyTorchJob` or `MPIJob` (replicas, or
   `runPolicy.schedulingPolicy.minAvailable`), a `JobSet` (replicas x parallelism of each
   replicated job), a `LeaderWorkerSet` group (`leaderWorkerTemplate.size` pods per group), a
   `RayCluster` (head plus desired workers);
5. pod labels and annotations alone, when the object was not read: a Kueue pod group
   (`kueue.x-k8s.io/pod-group-total-count`), a legacy coscheduling group (label
   `pod-group.scheduling.sigs.k8s.io/min-available`), a LeaderWorkerSet group (annotation
   `leaderworkerset.sigs.k8s.io/size`), or any of the above without a size (unknown).

Partial-gang signals reported by schedulers are kept as they are: a PodGroup in phase `Unknown`
(Volcano: some members run, the rest cannot be scheduled) or `Scheduling` (coscheduling: fewer
than minMember running), and a Kueue Workload that is `Admitted` while `PodsReady` is False.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuaudit.core import limits
from gpuaudit.core.numbers import index_label, whole_number
from gpuaudit.inventory.kube import Objects

VOLCANO_GROUP_ANNOTATIONS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
COSCHED_LABELS = ("scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io/name")
COSCHED_MIN_LABEL = "pod-group.scheduling.sigs.k8s.io/min-available"
KAI_GROUP_ANNOTATION = "pod-group-name"
KUEUE_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
TRAINING_JOB_LABEL = "training.kubeflow.org/job-name"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
LWS_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS_SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
RAY_LABEL = "ray.io/cluster"

GANG_LISTS = (
    "volcano_podgroups",
    "coscheduling_podgroups",
    "kai_podgroups",
    "kueue_workloads",
    "pytorchjobs",
    "mpijobs",
    "jobsets",
    "leaderworkersets",
    "rayclusters",
)
"""Kubernetes list keys (see `gpuaudit.sources.kubernetes.RESOURCES`) that define gangs."""

_VOLCANO = "scheduling.volcano.sh"
_COSCHED = "scheduling.x-k8s.io"
_KUEUE = "kueue.x-k8s.io"
_KAI = "scheduling.run.ai"
_ORDER = {_VOLCANO: 0, _COSCHED: 1, _KAI: 1, _KUEUE: 2}
Key = tuple[str, str]
"""(namespace, name) of an object."""


@dataclass
class Gang:
    """One gang and what is known of its size and state."""

    group: str
    """API group of the object that defines it (`scheduling.volcano.sh`, `kubeflow.org` ...)."""
    kind: str
    namespace: str
    name: str
    needed: int | None
    """Members it needs running at once; None when nothing says."""
    phase: str = ""
    signal: str = ""
    source: str = ""

    @property
    def id(self) -> str:
        return f"{self.group}/{self.kind}/{self.namespace}/{self.name}"

    @property
    def rank(self) -> int:
        return _ORDER.get(self.group, 3)


def _map(obj: Any, key: str) -> Mapping[str, Any]:
    val = obj.get(key) if isinstance(obj, dict) else None
    return val if isinstance(val, dict) else {}


def _list(obj: Any, key: str) -> list[Any]:
    val = obj.get(key) if isinstance(obj, dict) else None
    return val if isinstance(val, list) else []


def _int(raw: Any, default: int | None = None) -> int | None:
    """A count from an object: a non-negative int or ASCII digits (`numbers.whole_number`),
    else `default` (`"²"`, `"-1"`, `8.5` and booleans are no counts)."""
    return whole_number(raw, default)


def _meta(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = _map(obj, "metadata")
    return str(meta.get("namespace", "") or ""), str(meta.get("name", "") or "")


def _condition(obj: Mapping[str, Any], ctype: str) -> str:
    """The status (`True`, `False`, ...) of a status condition, or empty when absent."""
    for c in _list(_map(obj, "status"), "conditions"):
        if isinstance(c, dict) and c.get("type") == ctype:
            return str(c.get("status", ""))
    return ""


def _job_phase(obj: Mapping[str, Any]) -> str:
    """The last condition that is True (`Created`, `Running`, `Succeeded`, `Failed` ...)."""
    phase = ""
    for c in _list(_map(obj, "status"), "conditions"):
        if isinstance(c, dict) and c.get("status") == "True":
            phase = str(c.get("type", ""))
    return phase


def _controller(pod: Mapping[str, Any]) -> tuple[str, str]:
    refs = [r for r in _list(_map(pod, "metadata"), "ownerReferences") if isinstance(r, dict)]
    ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if ref is None:
        return "", ""
    return str(ref.get("kind", "")), str(ref.get("name", ""))


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def _replica_sum(specs: Mapping[str, Any]) -> int | None:
    total = sum(_int(_get(spec, "replicas"), 1) or 0 for spec in specs.values())
    return total or None


def _volcano(obj: Mapping[str, Any]) -> list[Gang]:
    ns, name = _meta(obj)
    phase = str(_map(obj, "status").get("phase", "") or "")
    signal = (
        "Volcano PodGroup phase Unknown: some members run, the rest cannot be scheduled"
        if phase == "Unknown"
        else ""
    )
    needed = _int(_map(obj, "spec").get("minMember"))
    source = "scheduling.volcano.sh PodGroup spec.minMember"
    return [Gang(_VOLCANO, "PodGroup", ns, name, needed, phase, signal, source)]


def _coscheduling(obj: Mapping[str, Any]) -> list[Gang]:
    ns, name = _meta(obj)
    phase = str(_map(obj, "status").get("phase", "") or "")
    signal = {
        "Unknown": "coscheduling PodGroup phase Unknown: some members are scheduled, the "
        "others cannot be",
        "Scheduling": "coscheduling PodGroup phase Scheduling: fewer than minMember run",
    }.get(phase, "")
    needed = _int(_map(obj, "spec").get("minMember"))
    source = "scheduling.x-k8s.io PodGroup spec.minMember"
    return [Gang(_COSCHED, "PodGroup", ns, name, needed, phase, signal, source)]


def _kai(obj: Mapping[str, Any]) -> list[Gang]:
    ns, name = _meta(obj)
    # minMember 0 asks for no gang: nothing says how many must run together.
    needed = _int(_map(obj, "spec").get("minMember")) or None
    source = "scheduling.run.ai PodGroup spec.minMember"
    return [Gang(_KAI, "PodGroup", ns, name, needed, "", "", source)]


def _kueue_phase(obj: Mapping[str, Any]) -> str:
    if _condition(obj, "Finished") == "True":
        return "Finished"
    if _condition(obj, "Admitted") == "True":
        return "Admitted"
    if _condition(obj, "QuotaReserved") == "True":
        return "QuotaReserved"
    return "Pending"


def _kueue(obj: Mapping[str, Any]) -> list[Gang]:
    ns, name = _meta(obj)
    assigned = [
        _int(a.get("count"))
        for a in _list(_map(_map(obj, "status"), "admission"), "podSetAssignments")
        if isinstance(a, dict)
    ]
    requested = [
        _int(ps.get("count"), 1)
        for ps in _list(_map(obj, "spec"), "podSets")
        if isinstance(ps, dict)
    ]
    if assigned and all(a is not None for a in assigned):
        needed: int | None = sum(a or 0 for a in assigned)
        source = "Kueue Workload status.admission podSetAssignments counts"
    else:
        needed = sum(r or 0 for r in requested) or None
        source = "Kueue Workload spec.podSets counts"
    admitted = _condition(obj, "Admitted") == "True"
    ready = _condition(obj, "PodsReady")
    signal = "Kueue Workload Admitted without PodsReady" if admitted and ready == "False" else ""
    return [Gang(_KUEUE, "Workload", ns, name, needed, _kueue_phase(obj), signal, source)]


def _training_job(kind: str, specs_key: str) -> Callable[[Mapping[str, Any]], list[Gang]]:
    """The reader of a Kubeflow training job kind whose replicas are under `specs_key`."""

    def read(obj: Mapping[str, Any]) -> list[Gang]:
        ns, name = _meta(obj)
        spec = _map(obj, "spec")
        min_avail = _int(_map(_map(spec, "runPolicy"), "schedulingPolicy").get("minAvailable"))
        needed = min_avail if min_avail else _replica_sum(_map(spec, specs_key))
        source = (
            f"{kind} runPolicy.schedulingPolicy.minAvailable"
            if min_avail
            else f"{kind} {specs_key} replicas"
        )
        return [Gang("kubeflow.org", kind, ns, name, needed, _job_phase(obj), "", source)]

    return read


def _jobset(obj: Mapping[str, Any]) -> list[Gang]:
    ns, name = _meta(obj)
    total = 0
    for rj in _list(_map(obj, "spec"), "replicatedJobs"):
        reps = _int(_get(rj, "replicas"), 1) or 0
        par = _int(_map(_map(rj, "template"), "spec").get("parallelism"), 1) or 1
        total += reps * par
    source = "JobSet replicatedJobs replicas x parallelism"
    return [Gang("jobset.x-k8s.io", "JobSet", ns, name, total or None, _job_phase(obj), "", source)]


def _leaderworkerset(obj: Mapping[str, Any], groups: Mapping[Key, set[int]]) -> list[Gang]:
    """One gang per group of leader and workers that has pods (`groups`: the group indices
    pods carry, by LeaderWorkerSet): a group without pods holds no GPU, and `spec.replicas`
    alone, which any tenant can set to two billion, allocates nothing."""
    ns, name = _meta(obj)
    spec = _map(obj, "spec")
    size = _int(_map(spec, "leaderWorkerTemplate").get("size"), 1) or 1
    replicas = _int(spec.get("replicas"), 1)
    source = "LeaderWorkerSet leaderWorkerTemplate.size"
    return [
        Gang("leaderworkerset.x-k8s.io", "LeaderWorkerSet", ns, f"{name}-{g}", size, "", "", source)
        for g in sorted(groups.get((ns, name), ()))
        if replicas is None or g < replicas
    ]


def _lws_groups(pods: Sequence[Mapping[str, Any]]) -> dict[Key, set[int]]:
    """(namespace, LeaderWorkerSet) -> the group indices its pods carry."""
    out: dict[Key, set[int]] = {}
    for pod in pods:
        meta = _map(pod, "metadata")
        labels = _map(meta, "labels")
        name, index = labels.get(LWS_LABEL), index_label(labels.get(LWS_GROUP_LABEL))
        if isinstance(name, str) and name and index is not None:
            out.setdefault((str(meta.get("namespace", "") or ""), name), set()).add(index)
    return out


def _raycluster(obj: Mapping[str, Any]) -> list[Gang]:
    ns, name = _meta(obj)
    workers = 0
    for wg in _list(_map(obj, "spec"), "workerGroupSpecs"):
        reps = _int(_get(wg, "replicas"), 0) or 0
        hosts = _int(_get(wg, "numOfHosts"), 1) or 1
        workers += reps * hosts
    state = str(_map(obj, "status").get("state", "") or "")
    source = "RayCluster head plus workerGroupSpecs replicas x numOfHosts"
    return [Gang("ray.io", "RayCluster", ns, name, 1 + workers, state, "", source)]


_READERS: tuple[tuple[str, Callable[[Mapping[str, Any]], list[Gang]]], ...] = (
    ("volcano_podgroups", _volcano),
    ("coscheduling_podgroups", _coscheduling),
    ("kai_podgroups", _kai),
    ("kueue_workloads", _kueue),
    ("pytorchjobs", _training_job("PyTorchJob", "pytorchReplicaSpecs")),
    ("mpijobs", _training_job("MPIJob", "mpiReplicaSpecs")),
    ("jobsets", _jobset),
    ("rayclusters", _raycluster),
)
"""The gangs each list's objects define, by list key, in order of precedence (and the
LeaderWorkerSets', whose groups are read with their pods)."""


def _from_objects(objects: Objects) -> list[Gang]:
    found = [g for key, read in _READERS for obj in objects.get(key, ()) for g in read(obj)]
    groups = _lws_groups(objects.get("pods", ()))
    found.extend(
        g for obj in objects.get("leaderworkersets", ()) for g in _leaderworkerset(obj, groups)
    )
    return found


def _kueue_owner_index(objects: Objects) -> dict[tuple[str, str, str], str]:
    """(namespace, owner kind, owner name) -> Workload name, from Workload ownerReferences."""
    out: dict[tuple[str, str, str], str] = {}
    for obj in objects.get("kueue_workloads", ()):
        ns, name = _meta(obj)
        for ref in _list(_map(obj, "metadata"), "ownerReferences"):
            if isinstance(ref, dict) and ref.get("kind") and ref.get("name"):
                out.setdefault((ns, str(ref["kind"]), str(ref["name"])), name)
    return out


def _pod_size(
    texts: Mapping[str, str],
    key: str,
    kind: str,
    meta: Mapping[str, Any],
    problems: list[str] | None,
) -> int | None:
    """A gang size a pod's label or annotation gives; None when absent or not a count (with a
    note in `problems`: `"²"` or `"8.0"` is no size, and the gang's is then unknown)."""
    raw = texts.get(key)
    if not raw:
        return None
    size = _int(raw)
    if size is None and problems is not None:
        ref = f"{str(meta.get('namespace', ''))[:80]}/{str(meta.get('name', ''))[:80]}"
        problems.append(
            f"pod {ref}: {kind} {key} {raw[:40]!r} is not a count; the gang's size is unknown"
        )
    return size


def _claims(
    pod: Mapping[str, Any],
    kueue_owner: Mapping[tuple[str, str, str], str],
    training_kinds: Mapping[tuple[str, str], str],
    problems: list[str] | None = None,
) -> list[Gang]:
    """The gangs a pod's labels, annotations and owner point at, most authoritative first.
    Sizes are filled from pod metadata only; objects, when present, override them."""
    meta = _map(pod, "metadata")
    ns = str(meta.get("namespace", "") or "")
    labels = {str(k): str(v) for k, v in _map(meta, "labels").items()}
    notes = {str(k): str(v) for k, v in _map(meta, "annotations").items()}
    okind, oname = _controller(pod)
    out: list[Gang] = []
    for a in VOLCANO_GROUP_ANNOTATIONS:
        if notes.get(a):
            out.append(Gang(_VOLCANO, "PodGroup", ns, notes[a], None, source=f"pod annotation {a}"))
            break
    for lab in COSCHED_LABELS:
        if labels.get(lab):
            minimum = _pod_size(labels, COSCHED_MIN_LABEL, "label", meta, problems)
            src = f"pod label {COSCHED_MIN_LABEL}" if minimum else f"pod label {lab}"
            out.append(Gang(_COSCHED, "PodGroup", ns, labels[lab], minimum, source=src))
            break
    if notes.get(KAI_GROUP_ANNOTATION):
        src = f"pod annotation {KAI_GROUP_ANNOTATION}"
        out.append(Gang(_KAI, "PodGroup", ns, notes[KAI_GROUP_ANNOTATION], None, source=src))
    group = labels.get(KUEUE_GROUP_LABEL)
    if group:
        total = _pod_size(notes, KUEUE_TOTAL_ANNOTATION, "annotation", meta, problems)
        src = (
            f"pod annotation {KUEUE_TOTAL_ANNOTATION}"
            if total
            else f"pod label {KUEUE_GROUP_LABEL}"
        )
        out.append(Gang(_KUEUE, "Workload", ns, group, total, source=src))
    owners = [(okind, oname)]
    if labels.get(JOBSET_LABEL):
        owners.append(("JobSet", labels[JOBSET_LABEL]))
    if labels.get(TRAINING_JOB_LABEL):
        tkind = training_kinds.get((ns, labels[TRAINING_JOB_LABEL])) or (
            okind if okind in ("PyTorchJob", "MPIJob") else "PyTorchJob"
        )
        owners.append((tkind, labels[TRAINING_JOB_LABEL]))
    for kind, name in owners:
        wl = kueue_owner.get((ns, kind, name))
        if wl:
            out.append(Gang(_KUEUE, "Workload", ns, wl, None, source="Kueue Workload owner"))
            break
    if labels.get(TRAINING_JOB_LABEL):
        name = labels[TRAINING_JOB_LABEL]
        kind = training_kinds.get((ns, name)) or (
            okind if okind in ("PyTorchJob", "MPIJob") else "PyTorchJob"
        )
        out.append(
            Gang("kubeflow.org", kind, ns, name, None, source=f"pod label {TRAINING_JOB_LABEL}")
        )
    elif okind in ("PyTorchJob", "MPIJob"):
        out.append(Gang("kubeflow.org", okind, ns, oname, None, source="pod owner"))
    if labels.get(JOBSET_LABEL):
        out.append(
            Gang(
                "jobset.x-k8s.io",
                "JobSet",
                ns,
                labels[JOBSET_LABEL],
                None,
                source=f"pod label {JOBSET_LABEL}",
            )
        )
    if labels.get(LWS_LABEL) and labels.get(LWS_GROUP_LABEL):
        size = _pod_size(notes, LWS_SIZE_ANNOTATION, "annotation", meta, problems)
        out.append(
            Gang(
                "leaderworkerset.x-k8s.io",
                "LeaderWorkerSet",
                ns,
                f"{labels[LWS_LABEL]}-{labels[LWS_GROUP_LABEL]}",
                size,
                source=f"pod annotation {LWS_SIZE_ANNOTATION}"
                if size
                else f"pod label {LWS_LABEL}",
            )
        )
    if labels.get(RAY_LABEL):
        out.append(
            Gang(
                "ray.io", "RayCluster", ns, labels[RAY_LABEL], None, source=f"pod label {RAY_LABEL}"
            )
        )
    return out


def build(
    objects: Objects, notes: list[str] | None = None
) -> tuple[list[Gang], dict[tuple[str, str], str]]:
    """Every gang, and the gang id of each pod (namespace, name) that belongs to one, from the
    Kubernetes objects by list key (`gpuaudit.inventory.kube.index`). A size larger than
    `limits.GANG_SIZE` is taken as unknown, with a note in `notes`."""
    known: dict[str, Gang] = {}
    for g in _from_objects(objects):
        known.setdefault(g.id, g)
    kueue_owner = _kueue_owner_index(objects)
    training_kinds = {
        (g.namespace, g.name): g.kind for g in known.values() if g.kind in ("PyTorchJob", "MPIJob")
    }
    member: dict[tuple[str, str], str] = {}
    for pod in objects.get("pods", ()):
        ns, name = _meta(pod)
        claims = _claims(pod, kueue_owner, training_kinds, notes)
        if not claims:
            continue
        # Objects outrank labels: the first claim naming a known gang wins, else the first claim.
        claims.sort(key=lambda g: g.rank)
        chosen = next((c for c in claims if c.id in known), claims[0])
        gang = known.setdefault(chosen.id, chosen)
        if gang.needed is None and chosen.needed is not None:
            # A gang known only from pod metadata takes its size from the first pod saying it.
            gang.needed, gang.source = chosen.needed, chosen.source
        member[(ns, name)] = gang.id
    limit = limits.GANG_SIZE.value()
    for g in known.values():
        if g.needed is not None and g.needed > limit:
            if notes is not None:
                notes.append(
                    f"{g.kind} {g.namespace}/{g.name[:120]} asks for {g.needed:,} members "
                    f"({g.source}), more than the {limit:,} allowed ({limits.GANG_SIZE.env}); "
                    "its size is taken as unknown"
                )
            g.needed = None
    return sorted(known.values(), key=lambda g: g.id), member

"""Parse recorded Kubernetes list responses into pod and node rows."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from gpuaudit.core import limits, numbers
from gpuaudit.inventory.crashes import Container
from gpuaudit.inventory.feasibility import Constraints, Requirement, Taint, Term, Toleration

GPU_RESOURCE = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"

Objects = Mapping[str, Sequence[Mapping[str, Any]]]
"""Kubernetes objects by list key (`pods`, `nodes`, `volcano_podgroups` ...), each list's pages
read once (see `index`)."""


SCHED_MESSAGE_CHARS = 8192
"""How much of a pending pod's scheduler message is kept (it is judged for `nvidia.com/`)."""


def items(pages: Iterable[Any]) -> Iterator[Mapping[str, Any]]:
    """The objects of every page of a list response; malformed entries are skipped."""
    for page in pages:
        if not isinstance(page, dict):
            continue
        objs = page.get("items")
        if not isinstance(objs, list):
            continue
        for obj in objs:
            if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
                yield obj


def index(kubernetes: Mapping[str, Iterable[Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The objects of every list of a snapshot's `kubernetes` section, by list key: the pages
    are walked once here, and every later stage reads the objects of the kind it needs."""
    return {key: list(items(pages)) for key, pages in kubernetes.items()}


def _map(obj: Any, key: str) -> Mapping[str, Any]:
    val = obj.get(key) if isinstance(obj, dict) else None
    return val if isinstance(val, dict) else {}


def _list(obj: Any, key: str) -> list[Any]:
    val = obj.get(key) if isinstance(obj, dict) else None
    return val if isinstance(val, list) else []


def quantity(raw: Any) -> float:
    """A Kubernetes quantity (`"8"`, `8`, `"1k"`); 0 when absent or unreadable (NaN, infinity,
    negative, digit-like text such as `"²"`): see `numbers.quantity`."""
    q = numbers.quantity(raw)
    return 0.0 if q is None else q


def gpu_quantity(raw: Any, what: str, notes: list[str] | None, limit: int) -> float:
    """A count of GPUs (or MIG devices) read from an object: 0 when absent; 0, with a note in
    `notes`, when unreadable or larger than one node can hold (`limit`)."""
    if raw is None or raw == "":
        return 0.0
    q = numbers.quantity(raw)
    if q is None or q > limit:
        if notes is not None:
            why = (
                "is not a count"
                if q is None
                else f"is more than the {limit:,} GPUs one node may hold ({limits.NODE_GPUS.env})"
            )
            notes.append(f"{what} {str(raw)[:40]!r} {why}; it was ignored")
        return 0.0
    return q


def timestamp(raw: Any) -> float | None:
    """RFC 3339 -> unix seconds; None when absent or unreadable."""
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


EXTENDED_PREFIX = "nvidia.com/"
"""Extended resources read from pods and nodes: the NVIDIA device plugin's (`nvidia.com/gpu`,
`nvidia.com/mig-<profile>`, `nvidia.com/gpu.shared` ...)."""
MAX_ITEMS = 256
"""At most this many containers, tolerations, taints, terms or requirements are read from one
object; a list cut short is said so where that changes an answer (see `_terms`)."""


HAMI_FIGURES = frozenset(
    (
        "nvidia.com/gpumem",
        "nvidia.com/gpumem-percentage",
        "nvidia.com/gpucores",
        "nvidia.com/priority",
    )
)
"""HAMi's per-vGPU figures (MiB, per cent, a priority; `docs/domain.md`, HAMi): no devices, and
no node advertises them (HAMi's scheduler accounts for them), so they are not read as extended
resources a pod needs (`gpuaudit.inventory.hami` reads what HAMi granted)."""


def _container_requests(c: Any, ref: str, notes: list[str] | None, bound: int) -> dict[str, float]:
    """Extended resources one container asks for: its requests, else its limits (the API
    server defaults an extended resource's request to its limit). A GPU count no node could
    hold (more than `bound`) is ignored, with a note."""
    res = _map(c, "resources")
    out: dict[str, float] = {}
    for key in ("requests", "limits"):
        for name, q in _map(res, key).items():
            if name in HAMI_FIGURES:
                continue
            if isinstance(name, str) and name.startswith(EXTENDED_PREFIX):
                got = gpu_quantity(q, f"{ref}: {key} {name[:60]}", notes, bound)
                out[name] = max(out.get(name, 0.0), got)
    return out


def extended_requests(
    pod: Mapping[str, Any], notes: list[str] | None = None, limit: int | None = None
) -> dict[str, float]:
    """Extended resources (`nvidia.com/...`) the pod needs, as the scheduler counts them
    (`resourcehelper.PodRequests`): the app containers' sum plus restartable (sidecar) init
    containers, or, when larger, the peak of each plain init container started after the
    sidecars before it. A total no node could hold (more than `limit`, `limits.NODE_GPUS`) is
    ignored, with a note in `notes`."""
    spec = _map(pod, "spec")
    bound = limits.NODE_GPUS.value() if limit is None else limit
    meta = _map(pod, "metadata")
    ref = f"pod {str(meta.get('namespace', ''))[:80]}/{str(meta.get('name', ''))[:80]}"
    apps: dict[str, float] = {}
    for c in _list(spec, "containers")[:MAX_ITEMS]:
        for k, v in _container_requests(c, ref, notes, bound).items():
            apps[k] = apps.get(k, 0.0) + v
    sidecars: dict[str, float] = {}
    peak: dict[str, float] = {}
    for c in _list(spec, "initContainers")[:MAX_ITEMS]:
        req = _container_requests(c, ref, notes, bound)
        if isinstance(c, dict) and c.get("restartPolicy") == "Always":
            for k, v in req.items():
                sidecars[k] = sidecars.get(k, 0.0) + v
            here = {k: sidecars.get(k, 0.0) for k in sidecars}
        else:
            here = {k: req.get(k, 0.0) + sidecars.get(k, 0.0) for k in set(req) | set(sidecars)}
        for k, v in here.items():
            peak[k] = max(peak.get(k, 0.0), v)
    total = {k: apps.get(k, 0.0) + sidecars.get(k, 0.0) for k in set(apps) | set(sidecars)}
    for k, v in peak.items():
        total[k] = max(total.get(k, 0.0), v)
    for k, v in list(total.items()):
        if v > bound:  # containers that each fit, but not together on one node
            total[k] = gpu_quantity(v, f"{ref}: {k} in all", notes, bound)
    return {k: v for k, v in sorted(total.items()) if v > 0}


def gpu_requests(
    pod: Mapping[str, Any], notes: list[str] | None = None, limit: int | None = None
) -> tuple[float, dict[str, float]]:
    """Whole GPUs and MIG slices (by profile) a pod asks for (see `extended_requests`)."""
    total = extended_requests(pod, notes, limit)
    gpus = total.get(GPU_RESOURCE, 0.0)
    mig = {k[len(MIG_PREFIX) :]: v for k, v in total.items() if k.startswith(MIG_PREFIX)}
    return gpus, mig


def _text(v: Any) -> str:
    return v[:1024] if isinstance(v, str) else ""


def tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    """The pod's tolerations (`spec.tolerations`); malformed entries are left out, which can
    only make a node look less available."""
    return tuple(
        Toleration(
            key=_text(t.get("key")),
            operator=_text(t.get("operator")),
            value=_text(t.get("value")),
            effect=_text(t.get("effect")),
        )
        for t in _list(spec, "tolerations")[:MAX_ITEMS]
        if isinstance(t, dict)
    )


def _requirements(raw: list[Any]) -> tuple[tuple[Requirement, ...], bool]:
    """Requirements of a term, and whether they were read whole (an entry that is not an
    object, or more than `MAX_ITEMS`, make the term unreadable)."""
    out: list[Requirement] = []
    for e in raw[:MAX_ITEMS]:
        if not isinstance(e, dict):
            return (), False
        values = _list(e, "values")
        if len(values) > 4 * MAX_ITEMS or not all(isinstance(v, str) for v in values):
            return (), False
        out.append(Requirement(_text(e.get("key")), _text(e.get("operator")), tuple(values)))
    return tuple(out), len(raw) <= MAX_ITEMS


def _terms(spec: Mapping[str, Any]) -> tuple[Term, ...] | None:
    """Required node-affinity terms, None when the pod has none. A required node selector
    with no terms matches no node (`NewLazyErrorNodeSelector`), and a term that cannot be read
    whole matches nothing (terms are ORed, so that only narrows where the pod may go)."""
    affinity = _map(_map(spec, "affinity"), "nodeAffinity")
    if KEY_REQUIRED not in affinity or affinity[KEY_REQUIRED] is None:
        return None
    required = _map(affinity, KEY_REQUIRED)
    terms: list[Term] = []
    for t in _list(required, "nodeSelectorTerms")[:MAX_ITEMS]:
        exprs, ok_e = _requirements(_list(t, "matchExpressions"))
        fields, ok_f = _requirements(_list(t, "matchFields"))
        terms.append(Term(exprs, fields, parse_error=not (ok_e and ok_f)))
    return tuple(terms)


KEY_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
NO_LABEL_VALUE = "\x00"
"""A value no Kubernetes label can hold."""


def constraints(spec: Mapping[str, Any]) -> Constraints:
    """The pod's node selector, required node affinity and tolerations. A node selector value
    that is not a string becomes one no label value can be (a NUL character), so it matches no
    node."""
    sel = _map(spec, "nodeSelector")
    pairs = tuple(
        sorted(
            (_text(k), v[:1024] if isinstance(v, str) else NO_LABEL_VALUE)
            for k, v in list(sel.items())[:MAX_ITEMS]
        )
    )
    return Constraints(node_selector=pairs, required=_terms(spec), tolerations=tolerations(spec))


def taints(node: Mapping[str, Any]) -> tuple[Taint, ...]:
    """The node's taints (`spec.taints`)."""
    return tuple(
        Taint(_text(t.get("key")), _text(t.get("value")), _text(t.get("effect")))
        for t in _list(_map(node, "spec"), "taints")[:MAX_ITEMS]
        if isinstance(t, dict)
    )


def allocatable(status: Mapping[str, Any]) -> dict[str, float]:
    """Allocatable extended resources (`nvidia.com/...`) of a node's status."""
    return {
        str(k): quantity(v)
        for k, v in list(_map(status, "allocatable").items())[: 4 * MAX_ITEMS]
        if isinstance(k, str) and k.startswith(EXTENDED_PREFIX)
    }


def owner(pod: Mapping[str, Any]) -> tuple[str, str]:
    """The workload that owns a pod: a ReplicaSet is resolved to its Deployment by name."""
    meta = _map(pod, "metadata")
    labels = _map(meta, "labels")
    refs = [r for r in _list(meta, "ownerReferences") if isinstance(r, dict)]
    ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if "notebook-name" in labels:
        return "Notebook", str(labels["notebook-name"])
    if ref is None:
        return "", ""
    kind, name = str(ref.get("kind", "")), str(ref.get("name", ""))
    if kind == "ReplicaSet":
        h = labels.get("pod-template-hash")
        if isinstance(h, str) and h and name.endswith("-" + h):
            return "Deployment", name[: -len(h) - 1]
    return kind, name


_INT32 = (-(2**31), 2**31 - 1)
"""A pod's priority and a container's restart count are int32 in the API."""


def restarts(status: Mapping[str, Any]) -> tuple[int, str]:
    """Total container restarts and the last termination (`reason: message`, shortened)."""
    total = 0
    last = ""
    for cs in _list(status, "containerStatuses"):
        n = numbers.whole_number(cs.get("restartCount") if isinstance(cs, dict) else None)
        if n is not None and n <= _INT32[1]:  # an int32 in the API
            total += n
        term = _map(_map(cs, "lastState"), "terminated") or _map(_map(cs, "state"), "terminated")
        if term:
            reason = str(term.get("reason", ""))
            msg = str(term.get("message", ""))[:300]
            last = f"{reason}: {msg}" if msg else reason
    return total, last


def containers(status: Mapping[str, Any]) -> tuple[Container, ...]:
    """Each container status of a pod's status, as a `Container`."""
    raw = status.get("containerStatuses")
    out: list[Container] = []
    for cs in raw[:MAX_ITEMS] if isinstance(raw, list) else []:
        if not isinstance(cs, dict):
            continue
        n = numbers.whole_number(cs.get("restartCount"))
        state, last = _map(cs, "state"), _map(_map(cs, "lastState"), "terminated")
        code = numbers.whole_number(last.get("exitCode"))
        out.append(
            Container(
                name=str(cs.get("name", ""))[:253],
                restarts=n if n is not None and 0 <= n <= _INT32[1] else 0,
                waiting=str(_map(state, "waiting").get("reason", "") or "")[:128],
                running_since=timestamp(_map(state, "running").get("startedAt")),
                last_reason=str(last.get("reason", "") or "")[:128],
                last_exit=code if code is not None and abs(code) <= _INT32[1] else None,
                last_started=timestamp(last.get("startedAt")),
                last_finished=timestamp(last.get("finishedAt")),
            )
        )
    return tuple(out)


ENDED_PHASES = ("Succeeded", "Failed")
"""Pod phases of a pod whose containers have all terminated."""


def finished(status: Mapping[str, Any]) -> float | None:
    """When an ended pod (phase Succeeded or Failed) ended: the latest `finishedAt` of its
    containers' terminated states; None for a pod that has not ended, or when any container
    does not say when it ended (a pod refused at admission, a snapshot that did not keep the
    field): its end is then not known."""
    if status.get("phase") not in ENDED_PHASES:
        return None
    ends = [
        timestamp(_map(_map(cs, "state"), "terminated").get("finishedAt"))
        for cs in _list(status, "containerStatuses")[:MAX_ITEMS]
    ]
    known = [t for t in ends if t is not None]
    return max(known) if known and len(known) == len(ends) else None


PRODUCT_LABEL = "nvidia.com/gpu.product"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
POOL_LABELS = (
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
    "node.kubernetes.io/pool",
)
"""Node labels that name a node pool, in the order they are preferred."""


def scheduling(status: Mapping[str, Any]) -> tuple[bool, float | None, str]:
    """Whether the pod is unschedulable (PodScheduled False, reason Unschedulable), since when,
    and the scheduler's message."""
    for cond in _list(status, "conditions"):
        if not isinstance(cond, dict) or cond.get("type") != "PodScheduled":
            continue
        if cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
            return True, timestamp(cond.get("lastTransitionTime")), str(cond.get("message", ""))
        return False, None, ""
    return False, None, ""


def selector_products(spec: Mapping[str, Any]) -> list[str]:
    """GPU products a pod is pinned to: its nodeSelector on `nvidia.com/gpu.product`, else the
    values of a required node-affinity `In` term on that label (every term must name it)."""
    sel = _map(spec, "nodeSelector").get(PRODUCT_LABEL)
    if isinstance(sel, str) and sel:
        return [sel]
    required = _map(
        _map(_map(spec, "affinity"), "nodeAffinity"),
        "requiredDuringSchedulingIgnoredDuringExecution",
    )
    terms = _list(required, "nodeSelectorTerms")
    products: list[str] = []
    for term in terms:
        found = [
            [str(v) for v in _list(e, "values")]
            for e in _list(term, "matchExpressions")
            if isinstance(e, dict) and e.get("key") == PRODUCT_LABEL and e.get("operator") == "In"
        ]
        if not found:
            return []  # one term without the label lets the pod run on any product
        products.extend(v for vals in found for v in vals)
    return sorted(set(products))


def pod_row(
    pod: Mapping[str, Any], notes: list[str] | None = None, limit: int | None = None
) -> dict[str, Any]:
    """A pod's row. Figures that cannot be read are left out, with a note in `notes`."""
    meta = _map(pod, "metadata")
    spec = _map(pod, "spec")
    status = _map(pod, "status")
    n_restarts, last_term = restarts(status)
    requests = extended_requests(pod, notes, limit)
    gpus = requests.get(GPU_RESOURCE, 0.0)
    mig = {k[len(MIG_PREFIX) :]: v for k, v in requests.items() if k.startswith(MIG_PREFIX)}
    okind, oname = owner(pod)
    prio = spec.get("priority")
    labels = _map(meta, "labels")
    unsched, since, message = scheduling(status)
    created = timestamp(meta.get("creationTimestamp"))
    return {
        "labels": {str(k): str(v) for k, v in labels.items()},
        "restarts": n_restarts,
        "last_termination": last_term,
        "containers": containers(status),
        "namespace": str(meta.get("namespace", "")),
        "pod": str(meta.get("name", "")),
        "uid": str(meta.get("uid", "")),
        "phase": str(status.get("phase", "")),
        "node": str(spec.get("nodeName", "") or ""),
        "owner_kind": okind,
        "owner_name": oname,
        "priority": prio
        if isinstance(prio, int) and not isinstance(prio, bool) and _INT32[0] <= prio <= _INT32[1]
        else None,
        "priority_class": str(spec.get("priorityClassName", "") or ""),
        "gpu_request": gpus,
        "mig_request": ",".join(f"{k}={v:g}" for k, v in sorted(mig.items())),
        "created": created,
        "started": timestamp(status.get("startTime")),
        "finished": finished(status),
        "preemption_policy": str(spec.get("preemptionPolicy", "") or ""),
        "unschedulable": unsched,
        "pending_since": (since if since is not None else created) if unsched else None,
        # The scheduler words a reason per group of nodes; on a cluster of many taints and
        # pools the message runs long and `Insufficient nvidia.com/gpu` may come last, so
        # keep enough of it to judge (a pod object is bounded anyway; reports cut it shorter).
        "sched_message": message[:SCHED_MESSAGE_CHARS],
        "selector_products": ",".join(selector_products(spec)),
        "scheduler": str(spec.get("schedulerName", "") or ""),
        "constraints": constraints(spec),
        "requests": requests,
    }


def node_row(
    node: Mapping[str, Any], notes: list[str] | None = None, limit: int | None = None
) -> dict[str, Any]:
    """A node's row. Its GPU counts are bounded by what one node can hold (`limit`,
    `limits.NODE_GPUS`): a count that is unreadable or larger is ignored (0), with a note in
    `notes`, never taken into the fleet's size."""
    meta = _map(node, "metadata")
    labels = _map(meta, "labels")
    status = _map(node, "status")
    cap = _map(status, "capacity")
    alloc = _map(status, "allocatable")
    bound = limits.NODE_GPUS.value() if limit is None else limit
    ref = f"node {str(meta.get('name', ''))[:120]}:"

    def count(raw: Any, what: str) -> float:
        return gpu_quantity(raw, f"{ref} {what}", notes, bound)

    mig_cap = sum(
        count(v, f"capacity {str(k)[:60]}") for k, v in cap.items() if str(k).startswith(MIG_PREFIX)
    )
    return {
        "node": str(meta.get("name", "")),
        "product": str(labels.get("nvidia.com/gpu.product", "")),
        "gpu_count": count(labels.get("nvidia.com/gpu.count"), "label nvidia.com/gpu.count"),
        "capacity_gpu": count(cap.get(GPU_RESOURCE), f"capacity {GPU_RESOURCE}"),
        "allocatable_gpu": count(alloc.get(GPU_RESOURCE), f"allocatable {GPU_RESOURCE}"),
        "mig_capacity": count(mig_cap, "MIG capacity in all"),
        "clique": str(labels.get("nvidia.com/gpu.clique", "")),
        "mig_strategy": str(labels.get("nvidia.com/mig.strategy", "")),
        "pool": next(
            (str(labels[k]) for k in POOL_LABELS if isinstance(labels.get(k), str) and labels[k]),
            str(labels.get(PRODUCT_LABEL, "")),
        ),
        "cordoned": _map(node, "spec").get("unschedulable") is True,
        "node_labels": {
            str(k): v[:1024] for k, v in list(labels.items())[: 4 * MAX_ITEMS] if isinstance(v, str)
        },
        "taints": taints(node),
        "allocatable": allocatable(status),
        "gpu_replicas": max(1.0, quantity(labels.get(REPLICAS_LABEL, 1))),
    }

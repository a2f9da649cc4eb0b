"""The object a team edits for a pod: its `ownerReferences` walked up to the top controller
gpuaudit reads (Pod -> ReplicaSet -> Deployment, Pod -> Job -> CronJob, Pod -> StatefulSet ->
Notebook, Pod -> RayCluster ...).

A pod resolves to one of three outcomes (`Walk`):

- **resolved**: every owner on the way was read, and the last one has no controller of its
  own: that object is what a team's manifests hold (`Walk.target`);
- **bare pod**: the pod has no owner; nothing recreates it, and there is no object to patch;
- **unread**: an owner on the way was not read, so the top cannot be known: its list was
  forbidden or failed, its CRD is not installed, it was deleted since (or left out of a list
  cut short), or it is of a kind gpuaudit does not read (a Knative Revision, a DaemonSet, an
  operator's own kind). A change to the last object read could be undone by that owner, so
  `gpuaudit fix` writes none (`Walk.why` says which owner and why).

The controller reference (`controller: true`) is followed; an object with owners but no
controller reference follows its first owner, as `gpuaudit.inventory.kube.owner` does. Owners
are matched by uid (a name may have been reused by a newer object) and must be of the kind the
reference says.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 8
"""The most owners one walk follows (a loop of references ends it as unread)."""

KINDS: dict[tuple[str, str], str] = {
    ("", "Pod"): "pods",
    ("apps", "ReplicaSet"): "replicasets",
    ("apps", "Deployment"): "deployments",
    ("apps", "StatefulSet"): "statefulsets",
    ("batch", "Job"): "jobs",
    ("batch", "CronJob"): "cronjobs",
    ("kubeflow.org", "Notebook"): "notebooks",
    ("serving.kserve.io", "InferenceService"): "inferenceservices",
    ("kubeflow.org", "PyTorchJob"): "pytorchjobs",
    ("kubeflow.org", "MPIJob"): "mpijobs",
    ("kubeflow.org", "TFJob"): "tfjobs",
    ("kubeflow.org", "XGBoostJob"): "xgboostjobs",
    ("kubeflow.org", "PaddleJob"): "paddlejobs",
    ("kubeflow.org", "JAXJob"): "jaxjobs",
    ("jobset.x-k8s.io", "JobSet"): "jobsets",
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): "leaderworkersets",
    ("ray.io", "RayCluster"): "rayclusters",
}
"""(API group, kind) -> the list (resource key) its objects are read from: the owners the walk
follows. A LeaderWorkerSet's worker StatefulSet is owned by its leader pod, so pods are owners
too."""


class Outcome(enum.Enum):
    """How a pod's walk ended."""

    RESOLVED = "resolved"
    BARE = "bare pod"
    UNREAD = "unread"


@dataclass(frozen=True)
class ObjectRef:
    """An object by its API version, kind, namespace, name and uid."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    @property
    def group(self) -> str:
        """The API group (`""` for the core group)."""
        return self.api_version.rpartition("/")[0]

    def describe(self) -> str:
        """`Deployment ml/llm`, `ClusterQueue team-a`."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


@dataclass(frozen=True)
class Walk:
    """Where a pod's `ownerReferences` led."""

    outcome: Outcome
    chain: tuple[ObjectRef, ...] = ()
    """The owners read, from the pod's own owner up."""
    why: str = ""
    """For `UNREAD`: which owner was not read, and why, as the end of a sentence."""

    @property
    def target(self) -> ObjectRef | None:
        """The object a team edits: the top of the chain when resolved, else None."""
        return self.chain[-1] if self.outcome is Outcome.RESOLVED else None


@dataclass(frozen=True)
class _Node:
    ref: ObjectRef
    owners: tuple[Mapping[str, Any], ...]
    obj: Mapping[str, Any] | None
    """The object as read (pods are not kept: only their references are walked)."""


@dataclass
class Owners:
    """The owners read, by uid, and the pods' references: `walk` resolves a pod, `read`
    gives an owner as it was read; and the other objects a change may target (`named`)."""

    nodes: dict[str, _Node] = field(default_factory=dict)
    pods: dict[tuple[str, str], str] = field(default_factory=dict)
    """(namespace, pod name) -> the pod's uid."""
    states: Mapping[str, str] = field(default_factory=dict)
    """Resource key -> `ok` or why it was not read (the manifest's `objects`)."""
    named: dict[tuple[str, str, str], Mapping[str, Any]] = field(default_factory=dict)
    """(resource key, namespace, name) -> the object as read, of the lists in `TARGETS`."""
    version: str = ""
    """The cluster's Kubernetes version (`v1.31.2`), where the snapshot recorded it."""
    pod_meta: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    """(namespace, pod name) -> the pod's `labels` and `annotations` as kept (who owns it,
    `gpuaudit.inventory.ownership`)."""

    def walk(self, namespace: str, pod: str) -> Walk:
        """Where the pod's owners lead (see the module's docstring)."""
        uid = self.pods.get((namespace, pod))
        node = self.nodes.get(uid) if uid is not None else None
        if node is None:
            return Walk(Outcome.UNREAD, why=f"the pod {namespace}/{pod} is not in the pods read")
        chain: list[ObjectRef] = []
        seen = {node.ref.uid}
        while True:
            ref = _controller(node.owners)
            if ref is None:
                return Walk(Outcome.RESOLVED, tuple(chain)) if chain else Walk(Outcome.BARE)
            up = self.nodes.get(ref.uid)
            if up is None or up.ref.kind != ref.kind or up.ref.group != ref.group:
                return Walk(Outcome.UNREAD, tuple(chain), self._why_unread(ref, namespace))
            if ref.uid in seen or len(chain) >= MAX_DEPTH:
                return Walk(Outcome.UNREAD, tuple(chain), "its owner references form a loop")
            seen.add(ref.uid)
            chain.append(up.ref)
            node = up

    def read(self, ref: ObjectRef) -> Mapping[str, Any] | None:
        """The object as read (its kept fields, with `apiVersion` and `kind`), or None."""
        node = self.nodes.get(ref.uid)
        return node.obj if node is not None else None

    def _why_unread(self, ref: ObjectRef, namespace: str) -> str:
        what = f"{ref.kind} {namespace}/{ref.name}" if namespace else f"{ref.kind} {ref.name}"
        key = KINDS.get((ref.group, ref.kind))
        if key is None:
            api = ref.api_version or "unknown API"
            return f"its owner {what} is a {ref.kind} ({api}), a kind gpuaudit does not read"
        state = self.states.get(key)
        if state is None:
            return f"its owner {what} was not read (the snapshot holds no {key})"
        if state != "ok" and not state.startswith("incomplete"):
            return f"its owner {what} was not read ({key}: {state})"
        cut = " (the list was cut short)" if state.startswith("incomplete") else ""
        return f"its owner {what} is not among the {key} read{cut}: deleted since, or left out"


def _controller(refs: Iterable[Mapping[str, Any]]) -> ObjectRef | None:
    items = [r for r in refs if isinstance(r, Mapping)]
    ref = next((r for r in items if r.get("controller") is True), items[0] if items else None)
    if ref is None:
        return None
    return ObjectRef(
        str(ref.get("apiVersion") or ""),
        str(ref.get("kind") or ""),
        "",
        str(ref.get("name") or ""),
        str(ref.get("uid") or ""),
    )


TARGETS: dict[str, str] = {
    "kueue_clusterqueues": "ClusterQueue",
    "volcano_queues": "Queue",
    "kai_queues": "Queue",
    "priorityclasses": "PriorityClass",
    "karpenter_nodepools": "NodePool",
    "nodes": "Node",
    "namespaces": "Namespace",
}
"""Lists whose objects a change may target by name, though they own no pod (resource key ->
kind): kept as read, for `Owners.named`."""


def build(kubernetes: Mapping[str, Iterable[Any]], manifest: Mapping[str, Any]) -> Owners:
    """The owners of a snapshot's Kubernetes lists (by resource key, their pages as recorded),
    with the manifest's `objects` states and the cluster's version (`kubernetes_version`, where
    the snapshot recorded it)."""
    states = manifest.get("objects")
    version = manifest.get("kubernetes_version")
    out = Owners(
        states={str(k): str(v) for k, v in states.items()} if isinstance(states, Mapping) else {},
        version=version if isinstance(version, str) else "",
    )
    keys = set(KINDS.values())
    kind_of = {key: kind for (_, kind), key in KINDS.items()}
    for key, pages in kubernetes.items():
        if key not in keys and key not in TARGETS:
            continue
        for page in pages:
            if not isinstance(page, Mapping) or not isinstance(page.get("items"), list):
                continue
            api_version = str(page.get("apiVersion") or "")
            for obj in page["items"]:
                if key in TARGETS:
                    _name(out, key, obj, api_version, TARGETS[key])
                else:
                    _add(out, key, obj, api_version, kind_of[key])
    return out


def _name(out: Owners, key: str, obj: Any, api_version: str, kind: str) -> None:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return
    where = (key, str(meta.get("namespace") or ""), meta["name"])
    api_version = str(obj.get("apiVersion") or api_version)
    out.named.setdefault(where, {**obj, "apiVersion": api_version, "kind": obj.get("kind") or kind})


def _add(out: Owners, key: str, obj: Any, api_version: str, kind: str) -> None:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping) or not isinstance(meta.get("uid"), str) or not meta["uid"]:
        return
    api_version = str(obj.get("apiVersion") or api_version)
    kind = str(obj.get("kind") or kind)
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    ref = ObjectRef(api_version, kind, ns, name, meta["uid"])
    refs = meta.get("ownerReferences")
    owners = tuple(r for r in refs if isinstance(r, Mapping)) if isinstance(refs, list) else ()
    if key == "pods":
        out.pods.setdefault((ns, name), ref.uid)
        out.pod_meta.setdefault(
            (ns, name), {k: meta[k] for k in ("labels", "annotations") if k in meta}
        )
        out.nodes.setdefault(ref.uid, _Node(ref, owners, None))
        return
    out.nodes.setdefault(
        ref.uid, _Node(ref, owners, {**obj, "apiVersion": api_version, "kind": kind})
    )

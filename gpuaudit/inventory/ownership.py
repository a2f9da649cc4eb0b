"""Who owns a resource among people: the team or person a finding is for, read from the
objects it concerns, and how to reach them.

A pod's owner is read from, in order, the objects its `ownerReferences` lead to, top first (the
Deployment before its ReplicaSet, see `gpuaudit.inventory.owners`), then the pod, then its
namespace: on each object, each key of the ordered list (`--owner-keys`; by default `owner`,
`team`, `app.kubernetes.io/part-of`), as a label, then as an annotation. The first value
found names the owner; `Owner.source` says which object and key. A resource of no pod (a node,
a queue, a node pool) is read from its own object as kept; a GPU or a GPU group from its node;
a gang from its own object where it was read (a training job), else its first pod, else its
namespace. Where nothing names one the owner is unknown
(`UNKNOWN`): reports group those findings as such, never drop them.

The contact (`gpuaudit.io/contact`, an annotation) is read from the object that named the owner
or, failing that, the objects after it in the order (an owner's pod, then its namespace); it is
kept only when it has the shape of a mail address or a chat channel (`#channel`), so that a
report can put it in a link.

Every value is data from the cluster: cut to `MAX_NAME` characters, and a value holding a
control character is no owner. Pure functions of the objects read (`Owners`): showback and the
reports call them alike.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuaudit.inventory.owners import Owners
from gpuaudit.snapshot.fields import CONTACT, OWNER_LABELS

DEFAULT_KEYS: tuple[str, ...] = OWNER_LABELS
"""The owner keys by default, first wins."""
MAX_NAME = 253
"""The most characters of an owner's name kept (an annotation's value is unbounded)."""
MAX_KEYS = 16
"""The most owner keys `--owner-keys` may name."""
_MAIL = re.compile(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(\.[A-Za-z0-9-]{1,63})+", re.ASCII)
_CHANNEL = re.compile(r"#[A-Za-z0-9][A-Za-z0-9._-]{0,79}", re.ASCII)
_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?",
    re.ASCII,
)
"""A Kubernetes label or annotation key: an optional DNS-subdomain prefix and `/`, and a name of
at most 63 characters."""

NAMED_LISTS: Mapping[str, tuple[str, ...]] = {
    "Node": ("nodes",),
    "ClusterQueue": ("kueue_clusterqueues",),
    "Queue": ("volcano_queues", "kai_queues"),
    "NodePool": ("karpenter_nodepools",),
}
"""A cluster-scoped finding's kind -> the lists its object may be read from."""


@dataclass(frozen=True)
class Owner:
    """Who a finding is for."""

    name: str | None
    """The owner as the cluster names it (untrusted text); None when nothing names one."""
    source: str = ""
    """Where the name was read: `label owner of Deployment ml/llm`; empty when unknown."""
    contact: str = ""
    """A mail address or a `#channel` (`gpuaudit.io/contact`); empty when none is given."""

    @property
    def known(self) -> bool:
        return self.name is not None


UNKNOWN = Owner(None)
"""The owner of a resource nothing names an owner of."""


def valid_key(key: str) -> bool:
    """Whether `key` is a label or annotation key Kubernetes accepts."""
    return len(key) <= 316 and _KEY.fullmatch(key) is not None


def valid_contact(text: str) -> bool:
    """Whether `text` has the shape of a mail address or a chat channel (`#gpu-team`)."""
    return len(text) <= 254 and (
        _MAIL.fullmatch(text) is not None or _CHANNEL.fullmatch(text) is not None
    )


def of_pod(owners: Owners, namespace: str, pod: str, keys: Sequence[str] = DEFAULT_KEYS) -> Owner:
    """The owner of pod `namespace/pod` (see the module's docstring)."""
    return _first(_pod_objects(owners, namespace, pod), keys)


def of_namespace(owners: Owners, namespace: str, keys: Sequence[str] = DEFAULT_KEYS) -> Owner:
    """The owner its namespace's labels and annotations name."""
    return _first(_namespace(owners, namespace), keys)


def of_resource(
    owners: Owners,
    kind: str,
    namespace: str,
    name: str,
    node: str = "",
    pods: Sequence[str] = (),
    keys: Sequence[str] = DEFAULT_KEYS,
) -> Owner:
    """The owner of a finding's resource: a pod's (`of_pod`); a node's, queue's or node pool's
    own object's; a GPU's node's; else the first of `pods` (`namespace/name`), else the
    namespace's; else unknown."""
    if kind == "Pod" and namespace:
        return of_pod(owners, namespace, name, keys)
    if kind in NAMED_LISTS and not namespace:
        return _first(_named(owners, kind, name), keys)
    if kind in ("GPU", "GPUGroup") and node:
        return _first(_named(owners, "Node", node), keys)
    if namespace:
        found = _first(_controller(owners, kind, namespace, name), keys)
        if found.known:
            return found
    for ref in pods:
        # The last `/`: a scan of every cluster writes `cluster/namespace/pod`.
        ns, _, pod = ref.rpartition("/")
        if ns and (ns, pod) in owners.pods:
            return of_pod(owners, ns, pod, keys)
    if namespace:
        return of_namespace(owners, namespace, keys)
    return UNKNOWN


_Object = tuple[str, Mapping[str, Any]]
"""An object an owner may be read from: how to name it, and its metadata."""


def _pod_objects(owners: Owners, namespace: str, pod: str) -> Iterator[_Object]:
    walk = owners.walk(namespace, pod)
    for ref in reversed(walk.chain):
        obj = owners.read(ref)
        meta = obj.get("metadata") if obj is not None else None
        if isinstance(meta, Mapping):
            yield ref.describe(), meta
    meta = owners.pod_meta.get((namespace, pod))
    if meta is not None:
        yield f"Pod {namespace}/{pod}", meta
    yield from _namespace(owners, namespace)


def _controller(owners: Owners, kind: str, namespace: str, name: str) -> Iterator[_Object]:
    """A controller read (a training job a gang finding names), then its namespace."""
    for node in owners.nodes.values():
        ref = node.ref
        if ref.kind == kind and ref.namespace == namespace and ref.name == name:
            meta = node.obj.get("metadata") if node.obj is not None else None
            if isinstance(meta, Mapping):
                yield ref.describe(), meta
            break


def _namespace(owners: Owners, namespace: str) -> Iterator[_Object]:
    obj = owners.named.get(("namespaces", "", namespace))
    meta = obj.get("metadata") if obj is not None else None
    if isinstance(meta, Mapping):
        yield f"Namespace {namespace}", meta


def _named(owners: Owners, kind: str, name: str) -> Iterator[_Object]:
    for key in NAMED_LISTS[kind]:
        obj = owners.named.get((key, "", name))
        meta = obj.get("metadata") if obj is not None else None
        if isinstance(meta, Mapping):
            yield f"{kind} {name}", meta
            return


def _first(objects: Iterable[_Object], keys: Sequence[str]) -> Owner:
    seen = list(objects)
    for i, (what, meta) in enumerate(seen):
        for key in keys:
            for where in ("labels", "annotations"):
                value = _value(meta.get(where), key)
                if value is not None:
                    source = f"{where[:-1]} {key} of {what}"
                    return Owner(value, source, _contact(seen[i:]))
    return Owner(None, "", _contact(seen))


def _value(values: object, key: str) -> str | None:
    if not isinstance(values, Mapping):
        return None
    value = values.get(key)
    if not isinstance(value, str):
        return None
    value = value.strip()[:MAX_NAME]
    if not value or any(unicodedata.category(c)[0] == "C" for c in value):
        return None
    return value


def _contact(objects: Sequence[_Object]) -> str:
    for _, meta in objects:
        notes = meta.get("annotations")
        value = notes.get(CONTACT) if isinstance(notes, Mapping) else None
        if isinstance(value, str) and valid_contact(value.strip()):
            return value.strip()
    return ""

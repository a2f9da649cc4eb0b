"""Where a pod may run, decided as the Kubernetes scheduler decides it: the one model that every
check saying "could fit", "had room" or "was free" asks.

Each rule follows the scheduler's own code (Kubernetes 1.3x), cited where it is implemented:

- **Taints and tolerations**: the `TaintToleration` filter plugin
  (`pkg/scheduler/framework/plugins/tainttoleration`) rejects a node with a taint of effect
  `NoSchedule` or `NoExecute` that no toleration of the pod tolerates; `PreferNoSchedule` only
  lowers the node's score. A toleration tolerates a taint as `Toleration.ToleratesTaint`
  (`k8s.io/api/core/v1/toleration.go`) says: an empty effect matches every effect, an empty key
  matches every key, operator `Exists` matches every value, `Equal` (or empty) needs equal
  values. `Lt`/`Gt` tolerations sit behind the alpha feature gate
  `TaintTolerationComparisonOperators`, off by default, and match nothing here.
- **Cordoned nodes**: the `NodeUnschedulable` plugin rejects a node with `spec.unschedulable`
  unless the pod tolerates the taint `node.kubernetes.io/unschedulable:NoSchedule`.
- **Node selector and required node affinity**: the `NodeAffinity` plugin, through
  `nodeaffinity.GetRequiredNodeAffinity` (`k8s.io/component-helpers/scheduling/corev1/
  nodeaffinity`): every `nodeSelector` pair must equal a node label; of
  `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms` one must match (terms are
  ORed; a term with no expressions and no fields matches nothing, and so does an empty list);
  within a term every `matchExpressions` requirement and every `matchFields` requirement must
  hold (ANDed). Operators as `labels.Requirement.Matches` (`k8s.io/apimachinery/pkg/labels`):
  `In` (label present, value listed), `NotIn` (label absent or value not listed), `Exists`,
  `DoesNotExist`, `Gt`/`Lt` (label present, both sides base-10 64-bit integers, exactly one
  value). A requirement the API would not parse (an unknown operator, `In` without values,
  `Exists` with values, `Gt` without exactly one integer) makes its term match nothing.
  `matchFields` knows `metadata.name`, with `In` or `NotIn` and exactly one value.
- **Resources**: the `NodeResourcesFit` plugin: for every extended resource a pod requests
  (`nvidia.com/gpu`, MIG resources `nvidia.com/mig-<profile>`, shared-GPU replicas, which the
  device plugin advertises as `nvidia.com/gpu` times the replicas or as `nvidia.com/gpu.shared`),
  the node's allocatable minus the requests of the pods bound to it must cover the request.
  Pods bound to a node count until they end: the scheduler's pod informer leaves out only
  phases `Succeeded` and `Failed` (`pkg/scheduler/scheduler.go`, `newPodInformer`), so a pod
  bound but not yet running holds its GPUs, and a finished one holds none. Free capacity is
  never below 0 nor above allocatable.

What the scheduler reads and this model does not: pod (anti-)affinity and topology spread,
volumes, ports, DRA claims, and scheduler extenders; checks that lean on the model say so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gpuaudit.inventory import columns as C

if TYPE_CHECKING:
    from gpuaudit.inventory.tables import Inventory

GPU = "nvidia.com/gpu"
"""The whole-GPU resource the NVIDIA device plugin advertises."""
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
"""Taint effects the `TaintToleration` filter enforces (`PreferNoSchedule` only scores)."""
_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_INT64 = 2**63


def _go_int(text: str) -> int | None:
    """`strconv.ParseInt(text, 10, 64)`: an optional sign and decimal digits in int64 range."""
    if not _INT_RE.match(text):
        return None
    value = int(text)
    return value if -_INT64 <= value < _INT64 else None


@dataclass(frozen=True)
class Taint:
    """A node taint (`spec.taints[]`)."""

    key: str
    value: str
    effect: str

    def text(self) -> str:
        """`{key: value}` as the scheduler's message names an untolerated taint."""
        return f"{{{self.key}: {self.value}}}"

    def spec(self) -> str:
        """`key=value:effect`, as `kubectl taint` writes it (`Taint.ToString`)."""
        kv = f"{self.key}={self.value}" if self.value else self.key
        return f"{kv}:{self.effect}" if self.effect else kv


@dataclass(frozen=True)
class Toleration:
    """A pod toleration (`spec.tolerations[]`)."""

    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """`Toleration.ToleratesTaint` with comparison operators off (their default)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


def untolerated(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> Taint | None:
    """The first `NoSchedule` or `NoExecute` taint no toleration tolerates, else None
    (`FindMatchingUntoleratedTaint` with the `TaintToleration` filter's predicate)."""
    tols = tuple(tolerations)
    for taint in taints:
        if taint.effect in BLOCKING_EFFECTS and not any(t.tolerates(taint) for t in tols):
            return taint
    return None


@dataclass(frozen=True)
class Requirement:
    """One `NodeSelectorRequirement` (`key`, `operator`, `values`)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def valid(self, for_fields: bool = False) -> bool:
        """Whether the API helpers would parse it (`nodeSelectorRequirementsAsSelector`, or
        `...AsFieldSelector` for `matchFields`)."""
        op, n = self.operator, len(self.values)
        if for_fields:
            return op in ("In", "NotIn") and n == 1
        if op in ("In", "NotIn"):
            return n > 0
        if op in ("Exists", "DoesNotExist"):
            return n == 0
        if op in ("Gt", "Lt"):
            return n == 1 and _go_int(self.values[0]) is not None
        return False

    def matches(self, labels: Mapping[str, str]) -> bool:
        """`labels.Requirement.Matches` on a node's labels."""
        op = self.operator
        present = self.key in labels
        if op == "In":
            return present and labels[self.key] in self.values
        if op == "NotIn":
            return not present or labels[self.key] not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt") and present and len(self.values) == 1:
            have, want = _go_int(labels[self.key]), _go_int(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == "Gt" else have < want
        return False

    def matches_field(self, fields: Mapping[str, str]) -> bool:
        """A `matchFields` requirement (`fields.OneTerm(Not)EqualSelector`): a field the node
        lacks reads as the empty string."""
        have = fields.get(self.key, "")
        if self.operator == "In":
            return have == self.values[0]
        return have != self.values[0]


@dataclass(frozen=True)
class Term:
    """One `NodeSelectorTerm`: requirements on labels and on fields, all of which must hold."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()
    parse_error: bool = False
    """Set when the term could not be read whole (too large): it then matches nothing."""

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        """`nodeSelectorTerm.match`: an empty term, or one with a requirement that does not
        parse, matches nothing."""
        if self.parse_error or not (self.expressions or self.fields):
            return False
        if not all(r.valid() for r in self.expressions):
            return False
        if not all(r.valid(for_fields=True) for r in self.fields):
            return False
        if not all(r.matches(labels) for r in self.expressions):
            return False
        # `len(nodeFields) > 0`: a node without a name is not held to its fields.
        node_fields = {"metadata.name": name} if name else {}
        return not node_fields or all(r.matches_field(node_fields) for r in self.fields)


@dataclass(frozen=True)
class Constraints:
    """What a pod's spec says about the nodes it may run on."""

    node_selector: tuple[tuple[str, str], ...] = ()
    """`spec.nodeSelector` pairs."""
    required: tuple[Term, ...] | None = None
    """`requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`; None when the pod
    has no required node affinity (then any node matches)."""
    tolerations: tuple[Toleration, ...] = ()

    def selects(self, labels: Mapping[str, str], name: str) -> bool:
        """`RequiredNodeAffinity.Match`: the node selector, then the required terms (ORed)."""
        if any(labels.get(k) != v for k, v in self.node_selector):
            return False
        if self.required is None:
            return True
        return any(t.matches(labels, name) for t in self.required)

    def tolerates_cordon(self) -> bool:
        """Whether the pod tolerates `node.kubernetes.io/unschedulable:NoSchedule` (and so a
        cordoned node, `NodeUnschedulable`)."""
        taint = Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")
        return any(t.tolerates(taint) for t in self.tolerations)


@dataclass(frozen=True)
class NodeFacts:
    """What the scheduler reads of a node."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    allocatable: Mapping[str, float] = field(default_factory=dict)
    """Allocatable quantity per extended resource (`nvidia.com/...`)."""
    replicas: int = 1
    """GPU sharing replicas (`nvidia.com/gpu.replicas`): each GPU is advertised this many
    times when time-slicing or MPS is on, or HAMi splits it (`C.GPU_REPLICAS`)."""

    @property
    def whole_gpus(self) -> float:
        """Physical GPUs it offers whole: allocatable `nvidia.com/gpu`, 0 when they are shared
        (replicas above 1: a pod gets a share, never a GPU of its own)."""
        return 0.0 if self.replicas > 1 else self.allocatable.get(GPU, 0.0)


def refusal(c: Constraints, requests: Mapping[str, float], node: NodeFacts) -> str:
    """Why the scheduler's filters reject `node` for a pod with these constraints and resource
    requests, regardless of what other pods use there; empty when they do not."""
    if node.unschedulable and not c.tolerates_cordon():
        return "cordoned"
    taint = untolerated(node.taints, c.tolerations)
    if taint is not None:
        return f"untolerated taint {taint.text()}"
    if not c.selects(node.labels, node.name):
        return "node selector or affinity"
    for res, want in sorted(requests.items()):
        if want > 0 and node.allocatable.get(res, 0.0) < want:
            return f"allocatable {res} below {want:g}"
    return ""


def finished(phase: str) -> bool:
    """Whether a pod in this phase has ended, and so holds nothing (`Succeeded`, `Failed`)."""
    return phase in ("Succeeded", "Failed")


PodKey = tuple[str, str]
"""(namespace, pod)."""


@dataclass(frozen=True)
class PodFacts:
    """What the scheduler reads of a pod."""

    constraints: Constraints
    requests: Mapping[str, float]
    node: str
    """The node it is bound to (`spec.nodeName`), or empty."""
    phase: str


class Placement:
    """The scheduler's view of the cluster at the window's end: nodes, what each pod asks for
    and where it may go, and what the pods bound to each node use."""

    def __init__(self, nodes: Iterable[NodeFacts], pods: Mapping[PodKey, PodFacts]) -> None:
        self.nodes: dict[str, NodeFacts] = {n.name: n for n in nodes}
        self.pods: Mapping[PodKey, PodFacts] = pods
        used: dict[str, dict[str, float]] = {}
        for p in pods.values():
            if not p.node or finished(p.phase):
                continue
            here = used.setdefault(p.node, {})
            for res, q in p.requests.items():
                here[res] = here.get(res, 0.0) + q
        self.used: Mapping[str, Mapping[str, float]] = used
        """Node -> resource -> requests of the pods bound to it that have not ended."""
        # Pods of one workload share their spec: their candidates are worked out once.
        self._candidates: dict[Any, tuple[list[str], dict[str, str]]] = {}
        self._allowed: dict[Any, frozenset[str]] = {}
        self._allowed_of: dict[PodKey, frozenset[str]] = {}

    @classmethod
    def of(cls, inv: Inventory) -> Placement:
        """The placement model of an inventory's pods and nodes tables."""
        nodes = [node_facts(r) for r in _records(inv.nodes, NODE_FIELDS)]
        pods: dict[PodKey, PodFacts] = {}
        for r in _records(inv.pods, POD_FIELDS):
            key = (str(r[C.NAMESPACE]), str(r[C.POD]))
            if key not in pods:
                pods[key] = pod_facts(r)
        return cls(nodes, pods)

    def free(self, node: str, resource: str = GPU) -> float:
        """Allocatable minus the requests of the pods bound to the node, within [0,
        allocatable]; 0 for a node it does not know."""
        n = self.nodes.get(node)
        if n is None:
            return 0.0
        alloc = n.allocatable.get(resource, 0.0)
        return min(alloc, max(0.0, alloc - self.used.get(node, {}).get(resource, 0.0)))

    def free_gpus(self, node: str) -> float:
        """GPUs' worth free on the node: its free `nvidia.com/gpu` (`free`) over its replicas,
        as a node whose GPUs are shared (time-slicing, MPS, HAMi) advertises each of them
        `replicas` times."""
        n = self.nodes.get(node)
        return self.free(node) / max(1, n.replicas) if n is not None else 0.0

    def refusal(self, pod: PodKey, node: str) -> str | None:
        """Why the filters reject the node for the pod (see `refusal`); empty when they do
        not; None when the pod's spec or the node is unknown."""
        p, n = self.pods.get(pod), self.nodes.get(node)
        if p is None or n is None:
            return None
        return refusal(p.constraints, p.requests, n)

    def kept_off(self, pod: PodKey, node: str) -> bool:
        """Whether only the node's taints or its cordon keep the pod off it: its selector,
        affinity and allocatable would let it in."""
        p, n = self.pods.get(pod), self.nodes.get(node)
        if p is None or n is None or not refusal(p.constraints, p.requests, n):
            return False
        bare = replace(n, taints=(), unschedulable=False)
        return not refusal(p.constraints, p.requests, bare)

    def allowed(self, pod: PodKey) -> frozenset[str]:
        """The nodes the pod may run on (see `candidates`), as a set shared by every caller."""
        got = self._allowed_of.get(pod)
        if got is not None:
            return got
        p = self.pods.get(pod)
        if p is None:
            return frozenset()
        key = (p.constraints, tuple(sorted(p.requests.items())))
        if key not in self._allowed:
            self._allowed[key] = frozenset(self.candidates(pod)[0])
        got = self._allowed_of[pod] = self._allowed[key]
        return got

    def candidates(self, pod: PodKey) -> tuple[list[str], dict[str, str]]:
        """The nodes the pod may run on (sorted), and why each other node is refused; both
        empty when the pod's spec is unknown."""
        p = self.pods.get(pod)
        if p is None:
            return [], {}
        key = (p.constraints, tuple(sorted(p.requests.items())))
        if key not in self._candidates:
            ok: list[str] = []
            refused: dict[str, str] = {}
            for name in sorted(self.nodes):
                why = refusal(p.constraints, p.requests, self.nodes[name])
                if why:
                    refused[name] = why
                else:
                    ok.append(name)
            self._candidates[key] = (ok, refused)
        ok, refused = self._candidates[key]
        return list(ok), dict(refused)


def refusal_summary(refused: Mapping[str, str], limit: int = 5) -> dict[str, Any]:
    """Refused nodes by reason, for evidence: each reason with its node count and the first
    `limit` node names."""
    by: dict[str, list[str]] = {}
    for node, why in sorted(refused.items()):
        key = "untolerated taint" if why.startswith("untolerated taint") else why
        if key.startswith("allocatable"):
            key = "too few allocatable"
        by.setdefault(key, []).append(f"{node} ({why})" if key != why else node)
    return {why: {"nodes": len(ns), "first": ns[:limit]} for why, ns in sorted(by.items())}


NODE_FIELDS = (C.NODE, C.NODE_LABELS, C.TAINTS, C.CORDONED, C.ALLOCATABLE, C.GPU_REPLICAS)
POD_FIELDS = (C.NAMESPACE, C.POD, C.CONSTRAINTS, C.REQUESTS, C.NODE, C.PHASE)


def _records(frame: Any, cols: tuple[str, ...]) -> list[dict[str, Any]]:
    if frame is None or frame.empty:
        return []
    present = [c for c in cols if c in frame.columns]
    values = [frame[c].tolist() for c in present]
    return [dict(zip(present, row, strict=True)) for row in zip(*values, strict=True)]


def _mapping(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def node_facts(row: Mapping[str, Any]) -> NodeFacts:
    """`NodeFacts` of a nodes-table row (columns missing or malformed read as empty)."""
    taints = row.get(C.TAINTS)
    replicas = row.get(C.GPU_REPLICAS)
    cordoned = row.get(C.CORDONED)
    return NodeFacts(
        name=str(row.get(C.NODE, "")),
        labels={str(k): str(v) for k, v in _mapping(row.get(C.NODE_LABELS)).items()},
        taints=tuple(t for t in taints if isinstance(t, Taint))
        if isinstance(taints, tuple)
        else (),
        unschedulable=bool(cordoned) if isinstance(cordoned, bool) else False,
        allocatable={
            str(k): float(v)
            for k, v in _mapping(row.get(C.ALLOCATABLE)).items()
            if isinstance(v, (int, float))
        },
        replicas=int(replicas) if isinstance(replicas, (int, float)) and replicas >= 1 else 1,
    )


def pod_facts(row: Mapping[str, Any]) -> PodFacts:
    """`PodFacts` of a pods-table row (columns missing or malformed read as empty)."""
    c = row.get(C.CONSTRAINTS)
    node = row.get(C.NODE)
    phase = row.get(C.PHASE)
    return PodFacts(
        constraints=c if isinstance(c, Constraints) else Constraints(),
        requests={
            str(k): float(v)
            for k, v in _mapping(row.get(C.REQUESTS)).items()
            if isinstance(v, (int, float))
        },
        node=node if isinstance(node, str) else "",
        phase=phase if isinstance(phase, str) else "",
    )

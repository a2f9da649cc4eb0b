"""Findings, severities, the two lists a finding belongs to, and the one total order they are
ranked in (`rank`)."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuaudit.inventory.ownership import Owner


class Severity(enum.Enum):
    """How urgent a finding is. The enum owns its rank and its colour."""

    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Higher is more urgent."""
        return _RANK[self]

    @property
    def colour(self) -> str:
        """The Rich style of this severity in the terminal table."""
        return _COLOUR[self]

    @classmethod
    def parse(cls, text: str) -> Severity:
        """Read a severity name, case-insensitively."""
        try:
            return cls(text.strip().lower())
        except ValueError:
            names = ", ".join(s.value for s in cls)
            raise ValueError(f"unknown severity {text!r}; use one of: {names}") from None


_RANK = {
    Severity.CRITICAL: 5,
    Severity.HIGH: 4,
    Severity.MEDIUM: 3,
    Severity.LOW: 2,
    Severity.INFO: 1,
}
_COLOUR = {
    Severity.CRITICAL: "bold red",
    Severity.HIGH: "red",
    Severity.MEDIUM: "yellow",
    Severity.LOW: "cyan",
    Severity.INFO: "dim",
}


class Confidence(enum.Enum):
    """How sure a finding is, where its check weighs a second signal (an idle finding's power
    draw): `high` when the second signal agrees, `medium` when it is unavailable (the finding
    rests on one signal), `low` when it disagrees."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Category(enum.Enum):
    """Which list a finding belongs to. Reports list the risks apart, before the waste: a risk
    is urgent, and its GPU-hours are not what fixing it saves."""

    RISK = "risk"
    """Fixing it prevents a failure, or makes GPUs auditable, rather than saving GPU-hours: a
    sick GPU (its impact is the GPU-hours of work at risk on it), memory pressure (no
    GPU-hours), GPUs no metrics describe (GPU-hours nobody can vouch for), a policy or a quota
    that cannot be honoured (no GPU-hours)."""
    WASTE = "waste"
    """Fixing it saves its GPU-hours: they were held idle, waited, or ran slower than they
    had to."""


@dataclass(frozen=True)
class Resource:
    """The thing a finding is about."""

    kind: str
    """`Pod`, `Node`, `Gang`, `GPU` ..."""
    namespace: str
    """Namespace, or an empty string for cluster-scoped resources."""
    name: str
    """Object name as the cluster spells it (untrusted text)."""
    node: str = ""
    """Node the resource ran on, when there is one."""
    gpus: float = 0.0
    """GPUs concerned, in whole-GPU equivalents (a 1g MIG slice of 7 counts 1/7)."""
    cluster: str = ""
    """The cluster of a scan of every cluster (`--cluster-label NAME`), whose name also
    qualifies `namespace`, `node` and a GPU's UUID; empty otherwise, and for a resource of no
    one cluster."""

    def ref(self) -> str:
        """`namespace/name`, or `name` for cluster-scoped resources."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class Impact:
    """What a finding costs over the audit window, in one unit every check shares."""

    gpu_hours: float
    """Wasted (or unaudited) GPU-hours over the window, in whole-GPU equivalents."""
    cost: float
    """`gpu_hours` priced at the configured price per GPU-hour of the GPU model."""


@dataclass(frozen=True)
class Drain:
    """A node, or one GPU of it, a finding says to take out of service."""

    node: str
    """The node's name."""
    gpu: str = ""
    """The GPU's UUID when only that GPU must be freed (for a reset); empty for the whole node
    (cordon and drain it)."""

    def describe(self) -> str:
        return f"GPU {self.gpu} on node {self.node}" if self.gpu else f"node {self.node}"


@dataclass(frozen=True)
class Alternative:
    """Another place a recommendation could put work, as the check would have said it."""

    targets: tuple[str, ...]
    """The nodes this alternative places work on."""
    recommendation: str
    """The recommendation as it reads for these nodes."""
    message: str = ""
    """The message as it reads for these nodes; empty when it does not name the target."""


@dataclass(frozen=True)
class Finding:
    """One problem a check found."""

    code: str
    """Stable check code, e.g. `GPU001`."""
    severity: Severity
    """How urgent it is."""
    resource: Resource
    """What it is about."""
    message: str
    """A whole sentence that names the resource and the figures."""
    impact: Impact
    """Wasted GPU-hours and their cost."""
    recommendation: str
    """What to change, concretely."""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    """The figures the rule used, by name."""
    targets: tuple[str, ...] = ()
    """Nodes the recommendation places work on (a node to make room on, a move's
    destination); the coherence pass keeps them off nodes another finding drains."""
    alternatives: tuple[Alternative, ...] = ()
    """Other targets the check found acceptable, best first, for when `targets` are drained."""
    drains: tuple[Drain, ...] = ()
    """Nodes or GPUs the recommendation takes out of service."""
    releases: tuple[str, ...] = ()
    """Nodes the recommendation says to release (let an autoscaler remove them): where another
    finding places work on one (`targets`), the coherence pass makes both say so."""
    pods: tuple[str, ...] = ()
    """`namespace/name` of the pods whose GPU-hours make up the impact, when the resource is
    not a pod (a sick GPU's holders, a gang's members); a pod's own findings leave it empty."""
    related: tuple[str, ...] = ()
    """Codes of the other findings on the same resource (set by the coherence pass)."""
    primary: bool = True
    """False when another finding on the same resource leads (set by the coherence pass):
    reports show this one under it."""
    counted: bool = True
    """Whether the impact counts toward the report's total (set by the coherence pass): of
    findings whose GPU-hours overlap, only the largest counts."""
    confidence: Confidence | None = None
    """How sure the finding is (see `Confidence`); None where the check weighs no second
    signal."""
    category: Category = Category.WASTE
    """The list it belongs to (see `Category`): the check says so, finding by finding, where
    its fix prevents a failure rather than saving GPU-hours."""
    owner: Owner | None = None
    """Who it is for (`gpuaudit.inventory.ownership`), set when the audit is assembled; None
    before."""
    history: tuple[str, ...] = ()
    """What became of it before, set when waivers are applied: each expired waiver that
    matched it (`waived until 2026-11-30 by alice: reason; expired`)."""

    def fingerprint(self) -> str:
        """A stable identity across runs: code, kind, namespace and the owning workload when
        known (pod names change with every rollout), else the resource name."""
        owner = self.evidence.get("owner") if isinstance(self.evidence, Mapping) else None
        who = str(owner) if owner else self.resource.name
        return f"{self.code}|{self.resource.kind}|{self.resource.namespace}|{who}"

    def overlap_keys(self) -> frozenset[str]:
        """What this finding's GPU-hours are made of: its resource, and the pods of `pods`.
        Findings sharing a key may count the same GPU-hours."""
        own = f"{self.resource.kind}|{self.resource.namespace}|{self.resource.name}"
        # The last `/`: a scan of every cluster writes `cluster/namespace/pod`.
        pods = {f"Pod|{p.rpartition('/')[0]}|{p.rpartition('/')[2]}" for p in self.pods if "/" in p}
        return frozenset({own, *pods})

    def sort_key(self) -> tuple[int, float, float, float, str, str, str, str, str, str, str]:
        """The finding's place in the one total order (`rank`)."""
        hours = -round(self.impact.gpu_hours, 6)
        cost = -round(self.impact.cost, 6)
        urgency = float(-self.severity.rank)
        r = self.resource
        if self.category is Category.RISK:
            first, second, third = urgency, hours, cost
        else:
            first, second, third = hours, cost, urgency
        return (
            _LIST_ORDER[self.category],
            first,
            second,
            third,
            self.code,
            r.cluster,
            r.namespace,
            r.name,
            r.kind,
            r.node,
            self.message,
        )


_LIST_ORDER = {Category.RISK: 0, Category.WASTE: 1}
"""The risks come first: short, and urgent."""


@dataclass(frozen=True)
class Skipped:
    """A check that could not run, and why: missing data never reads as healthy."""

    code: str
    reason: str


ORDER_RULE = "ranked by wasted GPU-hours; risks listed apart"
"""The order's rule in a few words, for the reports' headings."""


def rank(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """The one total order, computed once: the risks first (`Category.RISK`), most urgent first
    (severity, then the GPU-hours at risk, then cost); then the waste, the most wasted
    GPU-hours first, then the most cost, then the higher severity. Within either, ties go by
    code, then resource (cluster, namespace, name, kind, node), then message, so that no two
    findings a check can tell apart tie. Reports never re-sort."""
    return tuple(sorted(findings, key=Finding.sort_key))


def lists(findings: Iterable[Finding]) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    """`findings` (in rank order) as the two lists reports show: the risks, then the waste,
    each in the order given."""
    items = tuple(findings)
    return (
        tuple(f for f in items if f.category is Category.RISK),
        tuple(f for f in items if f.category is Category.WASTE),
    )

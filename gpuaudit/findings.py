"""Findings, severities and the one total order they are ranked in."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


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

    def ref(self) -> str:
        """`namespace/name`, or `name` for cluster-scoped resources."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "node": self.node,
            "gpus": round(self.gpus, 4),
        }


@dataclass(frozen=True)
class Impact:
    """What a finding costs over the audit window, in one unit every check shares."""

    gpu_hours: float
    """Wasted (or unaudited) GPU-hours over the window, in whole-GPU equivalents."""
    cost: float
    """`gpu_hours` priced at the configured price per GPU-hour of the GPU model."""

    def to_dict(self) -> dict[str, Any]:
        return {"gpu_hours": round(self.gpu_hours, 2), "cost": round(self.cost, 2)}


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

    def fingerprint(self) -> str:
        """A stable identity across runs: code, kind, namespace and the owning workload when
        known (pod names change with every rollout), else the resource name."""
        owner = self.evidence.get("owner") if isinstance(self.evidence, Mapping) else None
        who = str(owner) if owner else self.resource.name
        return f"{self.code}|{self.resource.kind}|{self.resource.namespace}|{who}"

    def sort_key(self) -> tuple[int, float, str, str, str, str]:
        return (
            -self.severity.rank,
            -round(self.impact.gpu_hours, 6),
            self.code,
            self.resource.namespace,
            self.resource.name,
            self.resource.node,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "fingerprint": self.fingerprint(),
            "explain": f"gpuaudit explain {self.code}",
            "severity": self.severity.value,
            "resource": self.resource.to_dict(),
            "message": self.message,
            "impact": self.impact.to_dict(),
            "evidence": dict(self.evidence),
            "recommendation": self.recommendation,
        }


@dataclass(frozen=True)
class Skipped:
    """A check that could not run, and why: missing data never reads as healthy."""

    code: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"check": self.code, "reason": self.reason}


def rank(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """The one total order: severity, then impact, then code, then resource."""
    return tuple(sorted(findings, key=Finding.sort_key))

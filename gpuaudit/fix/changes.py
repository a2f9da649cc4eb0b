"""What `gpuaudit fix` writes, as values: a change (a patch of an object as read, a new object,
or commands), what each finding gets (`FindingFix`), and the plan of one audit (`Plan`)."""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuaudit.checks.findings import Finding

HOURS_PER_WEEK = 168.0


class ChangeKind(enum.Enum):
    """How a change is made."""

    PATCH = "patch"
    """A patch of an object gpuaudit read (`kubectl patch`, or a kustomize patch)."""
    OBJECT = "object"
    """A new object (`kubectl apply`)."""
    COMMAND = "command"
    """Commands for a person to run (`commands.sh`): what no manifest change can do."""


@dataclass(frozen=True)
class Target:
    """The object a change is made to."""

    api_version: str
    kind: str
    namespace: str
    name: str
    plural: str = ""
    """Its resource name in URLs (`deployments`), for `kubectl patch RESOURCE.GROUP`."""

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def describe(self) -> str:
        """`Deployment ml/llm`, `ClusterQueue team-a`."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"

    def resource(self) -> str:
        """What `kubectl` calls it: `deployments.apps`, `clusterqueues.kueue.x-k8s.io`."""
        plural = self.plural or self.kind.lower() + "s"
        return f"{plural}.{self.group}" if self.group else plural


@dataclass(frozen=True)
class Savings:
    """What a change saves per week: the GPU-hours its findings wasted over the window, at
    the window's rate (`gpu_hours * 168 / window hours`), and their cost."""

    gpu_hours: float
    cost: float
    currency: str


@dataclass(frozen=True)
class Change:
    """One reviewable change, in one file (commands share `commands.sh`)."""

    kind: ChangeKind
    file: str
    """The file in the output folder that holds it."""
    title: str
    """What it does, in a few words: `Scale Deployment ml/llm to zero`."""
    findings: tuple[Finding, ...]
    """The findings it answers, the one it is named after first."""
    savings: Savings
    risk: str
    """What it risks, in whole sentences."""
    target: Target | None = None
    patch_type: str = ""
    """`strategic`, `merge` or `json` (`kubectl patch --type`), for a patch."""
    body: Any = None
    """The patch document (a map, or a JSON patch's list of operations), or the new object."""
    commands: tuple[str, ...] = ()
    """Shell lines of a command change (comments among them), for `commands.sh`."""
    read: Mapping[str, Any] | None = None
    """The object as read, for a patch: what it applies to (its kept fields)."""
    validated: str = ""
    """The schema it was validated against (`Kubernetes 1.34`, `Kueue v0.19.2 CRD`)."""
    notes: tuple[str, ...] = ()
    """More comment lines for its file's header: how its figures were made (a schedule's
    hours and time zone, a node selector's nodes)."""
    lands: tuple[str, ...] = ()
    """The nodes the changed workload may be placed on (a MIG slice's offering nodes), as
    findings name nodes: `gpuaudit.fix.plans.coherent` keeps it off nodes a finding drains."""
    serves: tuple[str, ...] = ()
    """For a new object made only for patches of this plan (a PriorityClass their pod templates
    name): their files. It is written only while one of them is (`gpuaudit.fix.plans.used`);
    empty for an object that stands by itself."""

    @property
    def lead(self) -> Finding:
        return self.findings[0]


@dataclass(frozen=True)
class FindingFix:
    """What `gpuaudit fix` does for one finding: the change that answers it, or why none."""

    kind: ChangeKind | None
    """None: no change is written (`reason` says why)."""
    file: str = ""
    target: Target | None = None
    reason: str = ""
    """Why no change is written, or what to know about the one that is."""


@dataclass(frozen=True)
class Plan:
    """Every change of one audit, and what each finding gets."""

    changes: tuple[Change, ...] = ()
    fixes: Mapping[str, FindingFix] = field(default_factory=dict)
    """`key(finding)` -> what it gets, for every finding of a check that has changes."""
    schema: str = ""
    """The Kubernetes version the changes were validated against, and why that one."""

    def of(self, finding: Finding) -> FindingFix | None:
        """What `finding` gets; None for a finding of a check without changes."""
        return self.fixes.get(key(finding))


def answer(
    fixes: dict[str, FindingFix], findings: Iterable[Finding], change: Change | None, why: str
) -> None:
    """Record in `fixes` what each of `findings` gets from `change` (None: not made, `why`):
    a finding answered by several changes keeps the first made, and a change made wins over
    one that was not."""
    for f in findings:
        k = key(f)
        if change is None:
            fixes.setdefault(k, FindingFix(None, "", None, why))
        elif k not in fixes or fixes[k].kind is None:
            fixes[k] = FindingFix(change.kind, change.file, change.target, why)


def one_each(
    findings: Iterable[Finding], make: Callable[[Finding, set[str]], tuple[Change | None, str]]
) -> tuple[list[Change], dict[str, FindingFix]]:
    """A change (or none, and why) for each finding, made by `make(finding, patched)`, where
    `patched` holds the uids of the objects the changes before it patch (one patch per object),
    and what each finding gets."""
    out: list[Change] = []
    fixes: dict[str, FindingFix] = {}
    patched: set[str] = set()
    for f in findings:
        change, why = make(f, patched)
        if change is None:
            fixes[key(f)] = FindingFix(None, "", None, why)
            continue
        out.append(change)
        answer(fixes, (f,), change, why)
    return out, fixes


def key(f: Finding) -> str:
    """A finding's identity within one audit: its fingerprint and its resource."""
    r = f.resource
    return "|".join((f.fingerprint(), r.kind, r.cluster, r.namespace, r.name))


def short(f: Finding) -> str:
    """The first 8 hex digits of the SHA-256 of the finding's fingerprint."""
    return hashlib.sha256(f.fingerprint().encode("utf-8")).hexdigest()[:8]


_UNSAFE = re.compile(r"[^a-z0-9.-]+")
MAX_NAME = 120
"""The longest file name written (its target's name is cut; the fingerprint keeps it apart)."""


def file_name(f: Finding, target: str, suffix: str = ".yaml") -> str:
    """`GPU001-3f2a9c1d-deployment-ml-llm.yaml`: the finding's code and fingerprint and the
    target, in lower-case letters, digits, dots and dashes only (a name from the cluster is
    data: never a path)."""
    tail = _UNSAFE.sub("-", target.lower()).strip("-.") or "object"
    head = f"{f.code}-{short(f)}-"
    return head + tail[: MAX_NAME - len(head) - len(suffix)] + suffix


def one_line(text: str, limit: int = 1000) -> str:
    """Text fit for one comment line: every control, line-breaking and non-ASCII character
    escaped (a name from the cluster cannot end the comment), at most `limit` characters."""
    out = json.dumps(text, ensure_ascii=True)[1:-1]
    return out if len(out) <= limit else out[: limit - 3] + "..."


def evidence_line(f: Finding, limit: int = 1000) -> str:
    """The finding's evidence as one line of compact JSON (cut at `limit`)."""
    text = json.dumps(dict(f.evidence), sort_keys=True, separators=(",", ":"), default=str)
    return one_line(text, limit)

"""The findings of the JSON report: `findings`, `suppressed` (waived findings) and `skipped`
(checks that could not run)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any, Literal

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from gpuaudit.checks.findings import Category, Confidence, Severity
from gpuaudit.report.models.units import Code, ReportModel, Round2, Round4

Status = Literal["new", "worse", "improved", "unchanged"]
"""A finding against an earlier report (`gpuaudit.audit.compare`)."""


class Resource(ReportModel):
    """The thing a finding is about."""

    kind: str
    """`Pod`, `Node`, `Gang`, `GPU`, ..."""
    namespace: str
    """The namespace; empty for a cluster-scoped resource."""
    name: str
    """The object's name as the cluster spells it (untrusted text)."""
    node: str
    """The node the resource ran on; empty when there is none."""
    gpus: Round4
    """GPUs concerned, in whole-GPU equivalents (a 1g slice of a GPU partitioned into 7 MIG
    slices counts 1/7)."""
    cluster: str = Field("", exclude_if=lambda value: not value)
    """The cluster of a scan of every cluster (`--cluster-label NAME`, schema 1.3); absent
    otherwise, and for a resource of no one cluster. Its name also qualifies `namespace`,
    `node` and a GPU's UUID (`cluster/name`)."""


class Impact(ReportModel):
    """What a finding costs over the audit window, in one unit every check shares."""

    gpu_hours: Round2
    """Wasted (or unaudited) GPU-hours over the window, in whole-GPU equivalents (a MIG slice
    counts its share of a GPU)."""
    cost: Round2
    """`gpu_hours` priced at the configured price per GPU-hour of the GPU model, in the
    summary's currency."""


class Drain(ReportModel):
    """A node, or one GPU of it, a recommendation takes out of service."""

    node: str
    """The node's name."""
    gpu: str
    """The GPU's UUID when only it must be freed (for a reset); empty for the whole node."""


FixKind = Literal["patch", "object", "command"]
FIX_KINDS: dict[str, FixKind] = {"patch": "patch", "object": "object", "command": "command"}
"""A change's kind (`gpuaudit.fix.changes.ChangeKind`'s values) as the report spells it."""


class FixTarget(ReportModel):
    """The object a change is made to."""

    api_version: str
    """Its `apiVersion` (`apps/v1`, `kueue.x-k8s.io/v1beta2`)."""
    kind: str
    """Its kind (`Deployment`, `ClusterQueue`, `Node`, `Pod`)."""
    namespace: str
    """Its namespace; empty for a cluster-scoped object."""
    name: str
    """Its name (untrusted text)."""


class Fix(ReportModel):
    """What `gpuaudit fix` writes for a finding (docs/fix.md)."""

    kind: FixKind | None
    """`patch`: a patch of the object a team edits, validated against the object as read;
    `object`: a new object; `command`: commands in `commands.sh` (cordon, drain, a bare pod's
    deletion); null: no change is written, and `reason` says why."""
    file: str
    """The file in the folder `gpuaudit fix` writes that holds it; empty when none."""
    target: FixTarget | None
    """The object it changes; null when none."""
    reason: str
    """Why no change is written (or why it is a command rather than a patch); may be empty."""


class Owner(ReportModel):
    """Who a finding is for (docs/config.md, owner keys): read from the object that owns the
    pod, the pod, or its namespace (a node's, queue's or node pool's own object)."""

    name: str | None
    """The owner as the cluster names it (untrusted text); null when nothing names one:
    such findings are grouped as unknown, never dropped."""
    source: str
    """Where the name was read: `label owner of Deployment ml/llm`; empty when unknown."""
    contact: str
    """A mail address or a `#channel` from the `gpuaudit.io/contact` annotation, checked for
    that shape; empty when none."""


class Finding(ReportModel):
    """One problem a check found."""

    code: Code
    """The check's stable code."""
    fingerprint: str
    """A stable identity across runs: code, kind, namespace and the owning workload when known
    (pod names change with every rollout), else the resource's name. `--baseline` and
    `--previous` match findings by it."""
    explain: str
    """The command that prints the check's documentation."""
    severity: Severity
    """How urgent the finding is: critical, high, medium, low or info, most urgent first."""
    category: Category
    """The list the finding belongs to (schema 1.4). `risk`: fixing it prevents a failure or
    makes GPUs auditable rather than saving GPU-hours (a sick GPU, memory pressure, GPUs no
    metrics describe, a priority policy or a quota that cannot be honoured); its GPU-hours, if
    any, are at risk or unaudited, not wasted. `waste`: fixing it saves its GPU-hours. Reports
    list the risks apart, before the waste; `findings` holds them in that order."""
    resource: Resource
    """What the finding is about."""
    message: str
    """A whole sentence that names the resource and the figures."""
    impact: Impact
    """Wasted GPU-hours and their cost."""
    evidence: Mapping[str, Any]
    """The figures the check's rule used, by name."""
    recommendation: str
    """What to change, concretely."""
    primary: bool
    """True for the finding that leads its resource in its list (`category`): the first of the
    resource's findings of that list in rank order; false for the others of that list on the
    same resource, which reports show under it."""
    related: tuple[Code, ...]
    """Codes of the other findings on the same resource (kind, namespace, name), of either
    list."""
    counted_in_total: bool
    """Whether `impact` counts toward `summary.findings_gpu_hours` and `findings_cost` (see
    there)."""
    confidence: Confidence | None
    """How sure the finding is where its check weighs a second signal (an idle finding's power
    draw): high when it agrees, medium when it is unavailable, low when it disagrees; null where
    the check weighs none."""
    targets: tuple[str, ...]
    """Nodes the recommendation places work on. Never a node another finding drains unless the
    recommendation says why (`evidence.coherence`)."""
    drains: tuple[Drain, ...]
    """Nodes, or GPUs of them, the recommendation takes out of service."""
    status: Status | SkipJsonSchema[None] = Field(None, exclude_if=lambda value: value is None)
    """Against `--baseline` or `--previous`: new, worse, improved or unchanged; absent without
    one."""
    fix: Fix | SkipJsonSchema[None] = Field(None, exclude_if=lambda value: value is None)
    """What `gpuaudit fix` writes for it: the change, or why none (docs/fix.md); absent for the
    findings of checks `gpuaudit fix` makes no change for."""
    owner: Owner | SkipJsonSchema[None] = Field(None, exclude_if=lambda value: value is None)
    """Who it is for (`--owner-keys`); always present in a report of `gpuaudit scan`."""
    history: tuple[str, ...] = Field((), exclude_if=lambda value: not value)
    """What became of it before: each expired waiver that matched it (`waived until 2026-11-30
    by alice: reason; expired`); absent when none."""


class Waiver(ReportModel):
    """An accepted finding's waiver, as `[[waivers]]` in `gpuaudit.toml` gives it."""

    code: str
    """The check code it accepts."""
    namespace: str
    """The namespace it is narrowed to; empty for any."""
    selector: str
    """The label selector on the pod's labels it is narrowed to (`=`, `==`, `!=`, `key`,
    `!key`); empty for any."""
    resource: str
    """The resource (`namespace/name`, or `name`) it is narrowed to; empty for any."""
    reason: str
    """Why the finding is accepted."""
    expires: date
    """The last day it applies; after it, it no longer applies and the report warns."""
    fingerprint: str = Field("", exclude_if=lambda value: not value)
    """The one finding it accepts, by fingerprint (`gpuaudit ack`); absent for a waiver by
    code, namespace, selector or resource."""
    by: str = Field("", exclude_if=lambda value: not value)
    """Who accepted it; absent when the waiver does not say."""


class Suppressed(Finding):
    """A finding a waiver accepted: counted in `suppressed_count` and listed, never silently
    dropped."""

    counted_in_total: Literal[False]
    """Always false: a waived finding counts toward no total."""
    waiver: Waiver
    """The waiver that accepted it."""


class Skipped(ReportModel):
    """A check that could not run: missing data never reads as healthy."""

    check: str
    """The check's code."""
    reason: str
    """Why it could not run: the data it needs that is missing."""

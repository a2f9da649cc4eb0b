"""Run the checks over an inventory and assemble the audit result reports render."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from gpuaudit.audit.breakdown import Breakdown, breakdown, label_warning
from gpuaudit.audit.by_cause import CauseLedger, cause_ledger, rules_of
from gpuaudit.audit.capacity import CapacityPlan, Release
from gpuaudit.audit.capacity import plan as capacity_plan
from gpuaudit.audit.coherence import make_coherent
from gpuaudit.audit.compare import Comparison, compare
from gpuaudit.audit.ledger import Ledger, ledger
from gpuaudit.audit.outcomes import Outcomes, outcomes, vet
from gpuaudit.audit.owner_rollup import OwnerSection
from gpuaudit.audit.owner_rollup import sections as owner_sections
from gpuaudit.audit.settings import Settings
from gpuaudit.audit.showback import Showback, showback
from gpuaudit.audit.summary import Summary, summarise
from gpuaudit.audit.waivers import Suppressed, Waiver
from gpuaudit.audit.waivers import apply as apply_waivers
from gpuaudit.audit.weeks import WeekPoint
from gpuaudit.checks import Check, discover
from gpuaudit.checks.findings import Finding, Severity, Skipped
from gpuaudit.core.gcpause import SCOPED, Collector, paused
from gpuaudit.fix.changes import Plan
from gpuaudit.fix.plans import plan as fix_plan
from gpuaudit.inventory import Capability, Inventory, Views, ownership
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.prom import cluster_of
from gpuaudit.inventory.scope import in_scope, narrow, same_scope


@dataclass(frozen=True)
class ClusterSection:
    """One cluster of a scan of every cluster: the fleet summary's figures over its GPUs and
    findings alone. The clusters' sums are the fleet's."""

    name: str
    summary: Summary
    findings: int
    """Findings on the cluster's resources (primary and related, waived ones not counted)."""


@dataclass(frozen=True)
class AuditResult:
    """Everything a report shows, computed once; reports never re-sort or re-compute."""

    cluster: str
    window_start: float
    window_end: float
    summary: Summary
    findings: tuple[Finding, ...]
    skipped: tuple[Skipped, ...]
    warnings: tuple[str, ...]
    complete: bool
    """False when a source answered only in part or nothing was audited."""
    incomplete_reasons: tuple[str, ...]
    checks_run: tuple[str, ...]
    breakdown: Breakdown | None = None
    """Waste by namespace and by a team label, and the hourly series charts draw."""
    suppressed: tuple[Suppressed, ...] = ()
    """Findings a waiver accepted: counted and listed, never silently dropped."""
    comparison: Comparison | None = None
    """Against `--baseline` or `--previous`, when given."""
    outcomes: Outcomes | None = None
    """What the earlier report's findings became, and the realized savings (`--previous`,
    `--history`; `gpuaudit.audit.outcomes`); None against `--baseline` or nothing."""
    weeks: tuple[WeekPoint, ...] = ()
    """The trend over the weeks `--history` keeps, oldest first, this audit last; empty
    without `--history` (`gpuaudit.app.history`)."""
    nothing_audited: tuple[str, ...] = ()
    """Why the audit audited nothing (no GPU in the data, every check skipped); empty when it
    audited something. Each reason is also one of `incomplete_reasons`."""
    attribution: Ledger | None = None
    """The attribution ledger: allocated GPU-hours by method, unattributed ones by reason."""
    causes: CauseLedger | None = None
    """The ledger of every held GPU-hour by cause (`gpuaudit.audit.by_cause`)."""
    capacity: CapacityPlan | None = None
    """The capacity plan: GPUs held and busy per product, the nodes the work needed, and the
    same after releasing the idle reservations found."""
    cluster_label: str = ""
    """The label a scan of every cluster kept clusters apart by; empty for one cluster."""
    clusters: tuple[ClusterSection, ...] = ()
    """Per cluster of a scan of every cluster, by name; empty for one cluster."""
    showback: Showback | None = None
    """The window's GPU cost by holder, on the allocation and usage bases, with the idle and
    unallocated remainder shared by the declared rule (`gpuaudit.audit.showback`)."""
    fixes: Plan = field(default_factory=Plan)
    """The changes that answer the findings, as `gpuaudit fix` writes them, and what each
    finding of a fixable check gets (`gpuaudit.fix`)."""
    by_owner: tuple[OwnerSection, ...] = ()
    """Each owner's findings, GPU-hours, ranks and changes (`--per-owner`); empty unless asked
    for (`gpuaudit.audit.owner_rollup`)."""
    namespaces: tuple[str, ...] = ()
    """`--namespace`: the namespaces the audit was narrowed to (`gpuaudit.inventory.scope`);
    empty for the whole cluster."""
    generated_at: str = field(
        default_factory=lambda: datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    )

    def worst(self) -> Severity | None:
        """The highest severity of the findings (the first finding need not have it: waste is
        ranked by GPU-hours)."""
        return max((f.severity for f in self.findings), key=lambda s: s.rank, default=None)

    @property
    def primaries(self) -> tuple[Finding, ...]:
        """The findings reports list as rows: one per resource and list (risks, waste), the
        first in rank order (the others are shown under it, see `related_to`)."""
        return tuple(f for f in self.findings if f.primary)

    def related_to(self, f: Finding) -> tuple[Finding, ...]:
        """The other findings of `f`'s list on the resource of primary finding `f`, in rank
        order."""
        if not f.related:
            return ()
        key = (f.resource.kind, f.resource.namespace, f.resource.name)
        return tuple(
            g
            for g in self.findings
            if not g.primary
            and g.category is f.category
            and (g.resource.kind, g.resource.namespace, g.resource.name) == key
        )

    def status_of(self, f: Finding) -> str:
        """new, worse, improved or unchanged against the comparison; empty without one."""
        return self.comparison.status.get(f.fingerprint(), "") if self.comparison else ""


IDLE_ACTIVITY = "idle_activity"
"""The check setting whose value also marks idle GPU-hours in the summary and breakdown."""


def run_checks(
    inv: Inventory,
    settings: Settings,
    checks: Sequence[Check] | None = None,
    waivers: tuple[Waiver, ...] = (),
    group_label: str = "",
    previous: tuple[str, dict[str, Any]] | None = None,
    progress: Callable[[int, int], None] | None = None,
    what_if: Sequence[str] = (),
    collector: Collector = SCOPED,
    idle_rule: str = "none",
    follow_up: str = "",
    per_owner: bool = False,
    namespaces: Sequence[str] = (),
) -> AuditResult:
    """Run every check whose data exists, apply waivers, make the findings agree
    (`gpuaudit.audit.coherence`), and assemble the result.

    `checks` defaults to every check `gpuaudit.checks.discover()` finds. The shared views are
    made once here and handed to every check, the summary and the breakdown. `previous` is
    (source name, an earlier JSON report) for `--baseline` or `--previous`. `progress` gets
    (checks done, checks in all) after each check. `what_if` (`--what-if`) names the
    scenarios the capacity plan's reports show (see `gpuaudit.audit.capacity.WHAT_IFS`).
    `collector` runs each check as a stage (`gpuaudit.core.gcpause.Collector`). `idle_rule`
    (`--idle-rule`) shares the showback's idle and unallocated cost (`gpuaudit.audit.showback`).
    `per_owner` (`--per-owner`) adds each owner's section (`gpuaudit.audit.owner_rollup`).
    `follow_up` names the option `previous` came from (`--previous`, `--history`) when the
    result says what its findings became (`gpuaudit.audit.outcomes`): an earlier report of
    another cluster, or of a later window, is refused before any check runs. `namespaces`
    (`--namespace`) narrows the result to their pods: the checks run over the whole inventory
    (where another team's pods sit decides a placement or a preemption), their findings are
    kept where `in_scope`, and the rest is made from the narrowed inventory
    (`gpuaudit.inventory.scope`).
    """
    vetted: tuple[str, ...] = ()
    if previous is not None:
        same_scope(previous[1], follow_up or "--baseline", namespaces)
    if previous is not None and follow_up:
        window = (inv.window_start, inv.window_end)
        vetted = vet(previous[1], follow_up, inv.cluster, window, settings.currency)
    views = Views(inv, settings.prices)
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    ran: list[str] = []
    todo = discover() if checks is None else checks
    # The row-long views some check still to run may read, after each check (see `VIEWS`).
    later: list[frozenset[str]] = []
    wanted: frozenset[str] = frozenset()
    for check in reversed(todo):
        later.append(wanted)
        declared = getattr(check, "views", None)
        wanted |= frozenset(Views.ROW_LONG) if declared is None else declared
    later.reverse()
    for done, check in enumerate(todo):
        if progress is not None:
            progress(done, len(todo))
        lacking = [r for r in check.requires if r not in inv.capabilities]
        if lacking:
            reasons = "; ".join(inv.missing.get(r, f"{r.value} is not available") for r in lacking)
            skipped.append(Skipped(check.code, reasons))
            continue
        with collector.stage():
            findings.extend(check.run(views, check.configure(settings.checks)))
        ran.append(check.code)
        views.forget(set(Views.ROW_LONG) - later[done])
    if progress is not None:
        progress(len(todo), len(todo))
    findings = _workloads_only(views, findings)
    whole = inv
    if namespaces:
        findings = [f for f in findings if in_scope(namespaces, f.resource.namespace, f.pods)]
        views = Views(narrow(inv, namespaces, views.unattributed), settings.prices)
        inv = views.inv
    # The summary, breakdown and plan with the collector paused (see `Collector.stage`).
    with paused():
        views.forget_check_rows()  # before the summary, breakdown and plan make their own
        nothing = nothing_audited(whole, ran, skipped)
        findings = _with_clusters(inv, findings)
        findings = with_owners(inv, findings, settings.owner_keys)
        kept, suppressed, waiver_warnings = apply_waivers(findings, waivers, _pod_labels(inv))
        unmatched = label_warning(inv, group_label)
        if unmatched:
            waiver_warnings = [*waiver_warnings, unmatched]
        idle = settings.checks[IDLE_ACTIVITY]
        # After waivers: a finding someone accepted neither drains nor leads another.
        ranked, totals = make_coherent(kept)
        summary = dataclasses.replace(
            summarise(views, idle, settings.currency),
            findings_gpu_hours=totals.gpu_hours,
            findings_cost=totals.cost,
        )
        sections = _sections(views, idle, settings.currency, ranked)
        comparison = None
        if previous is not None:
            comparison = compare(
                ranked, dataclasses.asdict(summary.rounded()), previous[1], previous[0]
            )
        result = AuditResult(
            cluster=inv.cluster,
            window_start=inv.window_start,
            window_end=inv.window_end,
            summary=summary,
            findings=ranked,
            skipped=tuple(skipped),
            warnings=tuple(inv.warnings) + tuple(waiver_warnings) + vetted,
            complete=inv.complete and not nothing,
            incomplete_reasons=tuple(inv.incomplete_reasons) + nothing,
            checks_run=tuple(ran),
            breakdown=breakdown(views, idle, group_label),
            # A waived finding counts toward no total (and leads, drains and relates to nothing).
            suppressed=tuple(
                Suppressed(dataclasses.replace(s.finding, counted=False), s.waiver)
                for s in sorted(suppressed, key=lambda s: s.finding.sort_key())
            ),
            comparison=comparison,
            nothing_audited=nothing,
            capacity=_capacity(views, idle, settings.currency, ranked, skipped, ran, what_if),
            attribution=ledger(views),
            causes=cause_ledger(views, rules_of(settings.checks), group_label),
            cluster_label=inv.cluster_label,
            clusters=sections,
            fixes=fix_plan(ranked, whole, settings.currency, settings.timezone),
            showback=showback(views, summary, idle, idle_rule, group_label, settings.owner_keys),
            namespaces=inv.namespaces,
        )
        if previous is not None and follow_up:
            became = outcomes(
                previous[1],
                result.findings,
                result.suppressed,
                inv.owners,
                ran,
                {s.code: s.reason for s in skipped},
                settings.currency,
            )
            result = dataclasses.replace(result, outcomes=became)
        if not per_owner:
            return result
        owners = owner_sections(
            views,
            idle,
            result.findings,
            result.suppressed,
            result.fixes,
            settings.owner_keys,
            comparison,
        )
        return dataclasses.replace(result, by_owner=owners)


def _workloads_only(views: Views, findings: list[Finding]) -> list[Finding]:
    """The findings less those about a KAI Scheduler reservation pod: it holds a shared GPU
    for its fraction pods and is no workload (its share of the GPU counts in the summary's
    allocated and idle GPU-hours, and the findings about its fraction pods name the pods)."""
    kai = views.kai_reservations
    if not kai:
        return findings
    return [
        dataclasses.replace(f, pods=tuple(q for q in f.pods if tuple(q.split("/", 1)) not in kai))
        for f in findings
        if not (f.resource.kind == "Pod" and (f.resource.namespace, f.resource.name) in kai)
    ]


def _with_clusters(inv: Inventory, findings: list[Finding]) -> list[Finding]:
    """The findings of a scan of every cluster, each naming its cluster (`Resource.cluster`):
    the cluster its namespace, node, or (a node or GPU) its own name is qualified by."""
    if not inv.cluster_label:
        return findings
    known = set(inv.clusters)
    out = []
    for f in findings:
        r = f.resource
        where = r.namespace or r.node or (r.name if r.kind in ("Node", "GPU") else "")
        cluster = cluster_of(where)
        out.append(
            dataclasses.replace(f, resource=dataclasses.replace(r, cluster=cluster))
            if cluster in known
            else f
        )
    return out


def with_owners(inv: Inventory, findings: list[Finding], keys: Sequence[str]) -> list[Finding]:
    """The findings, each naming its owner (`gpuaudit.inventory.ownership`; unknown where
    nothing names one)."""
    out = []
    for f in findings:
        r = f.resource
        who = ownership.of_resource(inv.owners, r.kind, r.namespace, r.name, r.node, f.pods, keys)
        out.append(dataclasses.replace(f, owner=who))
    return out


def _sections(
    views: Views, idle: float, currency: str, ranked: tuple[Finding, ...]
) -> tuple[ClusterSection, ...]:
    """Per cluster of a scan of every cluster: the summary over its GPUs, with the counted
    impact of its findings (each finding belongs to one cluster, so the sums are the fleet's)."""
    inv = views.inv
    if not inv.cluster_label:
        return ()
    out = []
    for name in inv.clusters:
        mine = [f for f in ranked if f.resource.cluster == name]
        counted = [f for f in mine if f.counted]
        summary = dataclasses.replace(
            summarise(views, idle, currency, name),
            findings_gpu_hours=sum(f.impact.gpu_hours for f in counted),
            findings_cost=sum(f.impact.cost for f in counted),
        )
        out.append(ClusterSection(name, summary, len(mine)))
    return tuple(out)


RELEASE_CODES = ("GPU001", "GPU002")
"""The checks whose findings are the idle reservations the capacity plan releases: GPU001's
pods for the whole window, GPU002's from the start of their idle tail."""


def _releases(ranked: tuple[Finding, ...]) -> list[Release]:
    """The idle reservations of GPU001's and GPU002's findings (after waivers), each exactly
    what its finding says was idle."""
    out = []
    for f in ranked:
        if f.code not in RELEASE_CODES or f.resource.kind != "Pod":
            continue
        since = None
        if f.code == "GPU002":
            start = f.evidence.get("idle_tail_from")
            if not isinstance(start, str):
                continue  # a tail without its start cannot be released exactly
            since = datetime.fromisoformat(start.replace("Z", "+00:00")).timestamp()
        out.append(Release(f.resource.namespace, f.resource.name, f.code, since))
    return out


def _capacity(
    views: Views,
    idle: float,
    currency: str,
    ranked: tuple[Finding, ...],
    skipped: list[Skipped],
    ran: list[str],
    what_if: Sequence[str] = (),
) -> CapacityPlan:
    """The capacity plan, releasing the idle reservations GPU001 and GPU002 reported (after
    waivers)."""
    released: list[Release] | None = None
    if any(code in ran for code in RELEASE_CODES):
        released = _releases(ranked)
    notes = [
        f"{code} was skipped: {why}" if why else f"{code} was not run"
        for code in RELEASE_CODES
        if code not in ran
        for why in [next((s.reason for s in skipped if s.code == code), "")]
    ]
    note = "; ".join(notes)
    inv = views.inv
    # Queue figures need the queue objects and the DCGM history they are measured against.
    measured = {Capability.QUEUES, Capability.ACTIVITY} <= inv.capabilities
    queues = views.queue_usage(idle) if measured else ()
    return capacity_plan(views, idle, currency, released, note, queues, what_if)


def nothing_audited(
    inv: Inventory, ran: Sequence[str], skipped: Sequence[Skipped]
) -> tuple[str, ...]:
    """Why an audit audited nothing: no GPU in the DCGM data (no series in the window, or none
    with the cluster label), or no check could run. Empty when neither holds. An empty audit
    is incomplete, never healthy: it has no findings because it looked at nothing."""
    reasons: list[str] = []
    if inv.gpus.empty:
        reasons.append("nothing was audited: no GPU appears in the DCGM data of the window")
    if not ran:
        reasons.append(
            f"nothing was audited: every check ({len(skipped)}) was skipped for lack of data"
        )
    return tuple(reasons)


def _pod_labels(inv: Inventory) -> dict[tuple[str, str], dict[str, str]]:
    """(namespace, pod) -> the pod's labels, for waivers that match on labels."""
    labels: dict[tuple[str, str], dict[str, str]] = {}
    if C.LABELS in inv.pods.columns:
        for ns, pod, lab in zip(
            inv.pods[C.NAMESPACE], inv.pods[C.POD], inv.pods[C.LABELS], strict=True
        ):
            if isinstance(lab, dict):
                labels[(str(ns), str(pod))] = lab
    return labels

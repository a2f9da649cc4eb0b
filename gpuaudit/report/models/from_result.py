"""The one place an audit result becomes the JSON report (`document`). The models check and
round what they are given; this module only says where each field comes from. The summary's
figures come rounded by `Summary.rounded`, whose rounding the comparison with an earlier
report shares."""

from __future__ import annotations

from typing import cast

from gpuaudit import __version__
from gpuaudit.audit import assemble, breakdown, capacity, compare, ledger, waivers
from gpuaudit.audit import summary as fleet_summary
from gpuaudit.audit.outcomes import Outcomes
from gpuaudit.checks import findings as checked
from gpuaudit.fix.changes import FindingFix
from gpuaudit.inventory.ownership import Owner
from gpuaudit.inventory.queue_usage import QueueUsage
from gpuaudit.inventory.window import iso
from gpuaudit.report.models import fleet, followup, held_causes, planning, problems
from gpuaudit.report.models.chargeback import of as showback_of
from gpuaudit.report.models.document import SCHEMA_VERSION, Report


def document(result: assemble.AuditResult) -> Report:
    """The JSON report of `result`."""
    return Report(
        schema_version=SCHEMA_VERSION,
        gpuaudit_version=__version__,
        generated_at=result.generated_at,
        cluster=result.cluster,
        window=fleet.Window(
            start=iso(result.window_start),
            end=iso(result.window_end),
            hours=(result.window_end - result.window_start) / 3600.0,
        ),
        complete=result.complete,
        incomplete_reasons=result.incomplete_reasons,
        nothing_audited=bool(result.nothing_audited),
        summary=summary(result.summary),
        findings=tuple(
            finding(
                f,
                result.status_of(f) if result.comparison is not None else None,
                result.fixes.of(f),
            )
            for f in result.findings
        ),
        checks_run=result.checks_run,
        skipped=tuple(problems.Skipped(check=s.code, reason=s.reason) for s in result.skipped),
        suppressed_count=len(result.suppressed),
        suppressed=tuple(suppressed(s) for s in result.suppressed),
        breakdown=_breakdown(result.breakdown),
        comparison=(
            None if result.comparison is None else comparison(result.comparison, result.outcomes)
        ),
        capacity=None if result.capacity is None else capacity_plan(result.capacity),
        attribution=None if result.attribution is None else attribution(result.attribution),
        showback=None if result.showback is None else showback_of(result.showback),
        ledger=None if result.causes is None else held_causes.of(result.causes),
        warnings=result.warnings,
        # Only in a scan of every cluster (schema 1.3): other reports stay as they were.
        cluster_label=result.cluster_label,
        clusters={
            c.name: fleet.ClusterSection(summary=summary(c.summary), findings=c.findings)
            for c in result.clusters
        }
        if result.cluster_label
        else None,
        namespaces=result.namespaces,
    )


def summary(s: fleet_summary.Summary) -> fleet.Summary:
    """The summary as the report gives it: each figure rounded (`Summary.rounded`)."""
    return fleet.Summary.model_validate(s.rounded(), from_attributes=True)


def finding(
    f: checked.Finding, status: str | None = None, fixed: FindingFix | None = None
) -> problems.Finding:
    """A finding; `status` (new, worse, improved, unchanged) against an earlier report; `fixed`
    what `gpuaudit fix` writes for it."""
    return problems.Finding(
        code=f.code,
        fingerprint=f.fingerprint(),
        explain=f"gpuaudit explain {f.code}",
        severity=f.severity,
        category=f.category,
        resource=_resource(f.resource),
        message=f.message,
        impact=problems.Impact(gpu_hours=f.impact.gpu_hours, cost=f.impact.cost),
        evidence=dict(f.evidence),
        recommendation=f.recommendation,
        primary=f.primary,
        related=f.related,
        counted_in_total=f.counted,
        confidence=f.confidence,
        targets=f.targets,
        drains=tuple(problems.Drain(node=d.node, gpu=d.gpu) for d in f.drains),
        # The model checks it is one of the four.
        status=cast(problems.Status | None, status),
        fix=None if fixed is None else _fix(fixed),
        owner=None if f.owner is None else _owner(f.owner),
        history=f.history,
    )


def _owner(o: Owner) -> problems.Owner:
    return problems.Owner(name=o.name, source=o.source, contact=o.contact)


def _fix(x: FindingFix) -> problems.Fix:
    t = x.target
    target = (
        None
        if t is None
        else problems.FixTarget(
            api_version=t.api_version, kind=t.kind, namespace=t.namespace, name=t.name
        )
    )
    kind = None if x.kind is None else problems.FIX_KINDS[x.kind.value]
    return problems.Fix(kind=kind, file=x.file, target=target, reason=x.reason)


def _resource(r: checked.Resource) -> problems.Resource:
    return problems.Resource(
        kind=r.kind, namespace=r.namespace, name=r.name, node=r.node, gpus=r.gpus, cluster=r.cluster
    )


def suppressed(s: waivers.Suppressed) -> problems.Suppressed:
    """A waived finding, with the waiver that accepted it."""
    w = s.waiver
    waiver = problems.Waiver(
        code=w.code,
        namespace=w.namespace,
        selector=w.selector,
        resource=w.resource,
        reason=w.reason,
        expires=w.expires,
        fingerprint=w.fingerprint,
        by=w.by,
    )
    return problems.Suppressed(**dict(finding(s.finding)), waiver=waiver)


def _breakdown(b: breakdown.Breakdown | None) -> fleet.Breakdown:
    if b is None:
        return fleet.Breakdown(by_namespace=(), group_label="", by_group=())
    return fleet.Breakdown(
        by_namespace=tuple(_group(g) for g in b.by_namespace),
        group_label=b.group_label,
        by_group=tuple(_group(g) for g in b.by_group),
    )


def _group(g: breakdown.Group) -> fleet.Group:
    return fleet.Group(
        key=g.key,
        allocated_gpu_hours=g.allocated_gpu_hours,
        idle_gpu_hours=g.idle_gpu_hours,
        wasted_cost=g.wasted_cost,
        mean_activity=g.mean_activity,
    )


def comparison(c: compare.Comparison, o: Outcomes | None = None) -> fleet.Comparison:
    """The comparison with an earlier report, and what its findings became (`o`)."""
    return fleet.Comparison(
        against=c.source,
        against_generated_at=c.previous_generated_at,
        new=c.count(compare.NEW),
        worse=c.count(compare.WORSE),
        improved=c.count(compare.IMPROVED),
        unchanged=c.count(compare.UNCHANGED),
        resolved=tuple(dict(r) for r in c.resolved),
        summary_delta={
            k: fleet.Delta(now=v["now"], before=v["before"], change=v["change"])
            for k, v in c.summary_delta.items()
        },
        **followup.fields(o),
    )


def attribution(book: ledger.Ledger) -> fleet.Attribution:
    """The attribution ledger, each part in hundredths so that the parts add up to the total
    (`Ledger.rounded`)."""
    parts = book.rounded()
    return fleet.Attribution(
        allocated_gpu_hours=round(sum(parts.values()), 2),
        unattributed_unknown=book.unknown or None,
        attributed=fleet.Attributed(
            **{
                k: fleet.AttributedHours(gpu_hours=parts[("attributed", k)])
                for k in book.attributed
            }
        ),
        unattributed=fleet.Unattributed(
            **{
                k: fleet.UnattributedHours(
                    gpu_hours=parts[("unattributed", k)], pods=book.unattributed_pods[k]
                )
                for k in book.unattributed
            }
        ),
    )


def capacity_plan(plan: capacity.CapacityPlan) -> planning.Capacity:
    """The capacity plan, with the figures after releasing the idle reservations whatever
    `--what-if` asked for."""
    after: dict[str, planning.ProductAfterRelease] = {}
    for product, p in plan.after_release_idle.items():
        freed = plan.freed.get(product, capacity.Freed(0, 0.0, 0.0))
        after[product] = planning.ProductAfterRelease(
            **dict(_product(p)),
            released_reservations=plan.released_by_product.get(product, 0),
            nodes_freed=freed.nodes,
            gpus_freed=freed.gpus,
            cost_freed=freed.cost,
        )
    pods = plan.released_pods
    return planning.Capacity(
        window_hours=plan.window_hours,
        idle_activity=plan.idle_activity,
        currency=plan.currency,
        headlines=tuple(plan.headlines()),
        assumptions=plan.assumptions,
        notes=plan.notes,
        by_product={k: _product(v) for k, v in plan.by_product.items()},
        # The model checks each is a scenario it knows.
        what_if=cast(tuple[planning.WhatIf, ...], plan.what_if),
        after_release_idle=planning.AfterRelease(
            released_reservations=None if pods is None else len(pods),
            released=pods,
            released_holdings=None
            if plan.released is None
            else tuple(_released(r) for r in plan.released),
            note=plan.release_note,
            by_product=after,
        ),
        queues=tuple(_queue(u) for u in plan.queues),
    )


def _product(p: capacity.ProductPlan) -> planning.ProductPlan:
    return planning.ProductPlan(
        nodes=p.nodes,
        nodes_cordoned=p.nodes_cordoned,
        nodes_unlisted=p.nodes_unlisted,
        gpus=p.gpus,
        hours_with_data=p.hours_with_data,
        gpus_held=_stat(p.gpus_held),
        gpus_busy=_stat(p.gpus_busy),
        gpus_activity_unknown=_stat(p.gpus_activity_unknown),
        gpus_without_dcgm=_stat(p.gpus_without_dcgm),
        nodes_ran_gpu_pods=p.nodes_ran_gpu_pods,
        nodes_without_dcgm=p.nodes_without_dcgm,
        min_nodes_at_peak=p.min_nodes_at_peak,
        peak_hour=None if p.peak_hour is None else iso(p.peak_hour),
        unplaced_gpus=p.unplaced_gpus,
        nodes_used_at_peak=p.nodes_used,
        whole_node_gang_members_at_peak=p.whole_node_units,
        units_without_pod_spec_at_peak=p.units_without_spec,
    )


def _stat(s: capacity.Stat) -> planning.Stat:
    return planning.Stat(peak=s.peak, p95=s.p95, mean=s.mean)


def _released(r: capacity.Release) -> planning.ReleasedHolding:
    return planning.ReleasedHolding.model_validate(
        {
            "pod": f"{r.namespace}/{r.pod}",
            "code": r.code,
            "from": None if r.since is None else iso(r.since),
        }
    )


def _queue(u: QueueUsage) -> planning.Queue:
    return planning.Queue(
        # The model checks it is Kueue or Volcano.
        system=cast(planning.System, u.system),
        kind=u.kind,
        queue=u.queue,
        cohort=u.cohort,
        flavor=u.flavor,
        resource=u.resource,
        quota=u.quota,
        guarantee=u.guarantee,
        borrowing_limit=u.borrowing_limit,
        lending_limit=u.lending_limit,
        flavor_allocatable=u.allocatable,
        quota_gpu_hours=u.quota_gpu_hours,
        admitted_gpu_hours=u.admitted_gpu_hours,
        held_gpu_hours=u.held_gpu_hours,
        busy_gpu_hours=u.busy_gpu_hours,
        peak_admitted=u.peak_admitted,
        peak_held=u.peak_held,
        peak_held_in_namespaces=u.peak_namespaces,
        pending_workloads=len({(p.namespace, p.name) for p in u.pending}),
    )

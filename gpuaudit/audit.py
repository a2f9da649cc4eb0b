"""Run the checks over an inventory and assemble the audit result reports render."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from gpuaudit import __version__
from gpuaudit.breakdown import Breakdown, breakdown
from gpuaudit.checks import Check, discover
from gpuaudit.compare import Comparison, compare
from gpuaudit.findings import Finding, Severity, Skipped, rank
from gpuaudit.inventory import Inventory, Views
from gpuaudit.inventory import columns as C
from gpuaudit.settings import Settings
from gpuaudit.summary import Summary, summarise
from gpuaudit.waivers import Suppressed, Waiver
from gpuaudit.waivers import apply as apply_waivers

SCHEMA_VERSION = "1.2"


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
    incomplete_reasons: tuple[str, ...]
    checks_run: tuple[str, ...]
    breakdown: Breakdown | None = None
    """Waste by namespace and by a team label, and the hourly series charts draw."""
    suppressed: tuple[Suppressed, ...] = ()
    """Findings a waiver accepted: counted and listed, never silently dropped."""
    comparison: Comparison | None = None
    """Against `--baseline` or `--previous`, when given."""
    generated_at: str = field(
        default_factory=lambda: datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    )

    def worst(self) -> Severity | None:
        return self.findings[0].severity if self.findings else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "gpuaudit_version": __version__,
            "generated_at": self.generated_at,
            "cluster": self.cluster,
            "window": {
                "start": _iso(self.window_start),
                "end": _iso(self.window_end),
                "hours": round((self.window_end - self.window_start) / 3600.0, 2),
            },
            "complete": self.complete,
            "incomplete_reasons": list(self.incomplete_reasons),
            "summary": self.summary.to_dict(),
            "findings": [self._finding(f) for f in self.findings],
            "checks_run": list(self.checks_run),
            "skipped": [s.to_dict() for s in self.skipped],
            "suppressed_count": len(self.suppressed),
            "suppressed": [s.to_dict() for s in self.suppressed],
            "breakdown": self._breakdown_dict(),
            "comparison": self.comparison.to_dict() if self.comparison else None,
            "warnings": list(self.warnings),
        }

    def _finding(self, f: Finding) -> dict[str, Any]:
        d = f.to_dict()
        if self.comparison is not None:
            d["status"] = self.status_of(f)
        return d

    def _breakdown_dict(self) -> dict[str, Any]:
        b = self.breakdown
        if b is None:
            return {"by_namespace": [], "group_label": "", "by_group": []}
        return {
            "by_namespace": [g.to_dict() for g in b.by_namespace],
            "group_label": b.group_label,
            "by_group": [g.to_dict() for g in b.by_group],
        }

    def status_of(self, f: Finding) -> str:
        """new, worse, improved or unchanged against the comparison; empty without one."""
        return self.comparison.status.get(f.fingerprint(), "") if self.comparison else ""


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


IDLE_ACTIVITY = "idle_activity"
"""The check setting whose value also marks idle GPU-hours in the summary and breakdown."""


def run_checks(
    inv: Inventory,
    settings: Settings,
    checks: Sequence[Check] | None = None,
    waivers: tuple[Waiver, ...] = (),
    group_label: str = "",
    previous: tuple[str, dict[str, Any]] | None = None,
) -> AuditResult:
    """Run every check whose data exists, apply waivers, and assemble the result.

    `checks` defaults to every check `gpuaudit.checks.discover()` finds. The shared views are
    made once here and handed to every check, the summary and the breakdown. `previous` is
    (source name, an earlier JSON report) for `--baseline` or `--previous`.
    """
    views = Views(inv, settings.prices)
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    ran: list[str] = []
    for check in discover() if checks is None else checks:
        lacking = [r for r in check.requires if r not in inv.capabilities]
        if lacking:
            reasons = "; ".join(inv.missing.get(r, f"{r.value} is not available") for r in lacking)
            skipped.append(Skipped(check.code, reasons))
            continue
        findings.extend(check.run(views, check.configure(settings.checks)))
        ran.append(check.code)
    kept, suppressed, waiver_warnings = apply_waivers(findings, waivers, _pod_labels(inv))
    idle = settings.checks[IDLE_ACTIVITY]
    summary = summarise(views, idle, settings.currency)
    ranked = rank(kept)
    comparison = None
    if previous is not None:
        comparison = compare(ranked, summary.to_dict(), previous[1], previous[0])
    return AuditResult(
        cluster=inv.cluster,
        window_start=inv.window_start,
        window_end=inv.window_end,
        summary=summary,
        findings=ranked,
        skipped=tuple(skipped),
        warnings=tuple(inv.warnings) + tuple(waiver_warnings),
        complete=inv.complete,
        incomplete_reasons=tuple(inv.incomplete_reasons),
        checks_run=tuple(ran),
        breakdown=breakdown(views, idle, group_label),
        suppressed=tuple(sorted(suppressed, key=lambda s: s.finding.sort_key())),
        comparison=comparison,
    )


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

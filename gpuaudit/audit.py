"""Run the checks over an inventory and assemble the audit result reports render."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from gpuaudit import __version__
from gpuaudit.checks import REGISTRY, Check
from gpuaudit.findings import Finding, Severity, Skipped, rank
from gpuaudit.inventory import Inventory
from gpuaudit.settings import Settings
from gpuaudit.summary import Summary, summarise

SCHEMA_VERSION = "1.0"


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
            "findings": [f.to_dict() for f in self.findings],
            "checks_run": list(self.checks_run),
            "skipped": [s.to_dict() for s in self.skipped],
            "warnings": list(self.warnings),
        }


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_checks(
    inv: Inventory, settings: Settings, checks: tuple[Check, ...] = REGISTRY
) -> AuditResult:
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    ran: list[str] = []
    for check in checks:
        lacking = [r for r in check.requires if r not in inv.capabilities]
        if lacking:
            reasons = "; ".join(inv.missing.get(r, f"{r} is not available") for r in lacking)
            skipped.append(Skipped(check.code, reasons))
            continue
        findings.extend(check.run(inv, settings))
        ran.append(check.code)
    summary = summarise(inv, settings.prices, settings.checks.idle_activity, settings.currency)
    return AuditResult(
        cluster=inv.cluster,
        window_start=inv.window_start,
        window_end=inv.window_end,
        summary=summary,
        findings=rank(findings),
        skipped=tuple(skipped),
        warnings=tuple(inv.warnings),
        complete=inv.complete,
        incomplete_reasons=tuple(inv.incomplete_reasons),
        checks_run=tuple(ran),
    )

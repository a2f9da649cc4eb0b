"""What every change maker reads: the inventory (its owners and objects as read), the window's
length, the currency and the schema version changes are validated against."""

from __future__ import annotations

from dataclasses import dataclass

from gpuaudit.checks.findings import Finding
from gpuaudit.fix.changes import HOURS_PER_WEEK, Savings
from gpuaudit.inventory import Inventory


@dataclass(frozen=True)
class Context:
    inv: Inventory
    currency: str
    version: str
    """The Kubernetes schema version changes are validated against (`1.34`)."""

    def per_week(self, findings: tuple[Finding, ...]) -> Savings:
        """What answering `findings` saves per week at the window's rate: each pod's (resource's)
        largest impact once (GPU001 and GPU002 of one pod count the same GPU-hours)."""
        best: dict[tuple[str, str, str], tuple[float, float]] = {}
        for f in findings:
            r = f.resource
            k = (r.kind, r.namespace, r.name)
            if k not in best or f.impact.gpu_hours > best[k][0]:
                best[k] = (f.impact.gpu_hours, f.impact.cost)
        hours = max(self.inv.window_hours, 1e-9)
        scale = HOURS_PER_WEEK / hours
        return Savings(
            gpu_hours=sum(h for h, _ in best.values()) * scale,
            cost=sum(c for _, c in best.values()) * scale,
            currency=self.currency,
        )

"""`--report showback=FILE.csv`: the showback (`gpuaudit.audit.showback`) as CSV, one row per
grouping, group and GPU product, then the remainder lines; every row names the idle rule.
Columns: `SHOWBACK_COLUMNS` (documented in `docs/showback.md`)."""

from __future__ import annotations

from gpuaudit.audit.assemble import AuditResult
from gpuaudit.inventory.window import iso
from gpuaudit.report.csvsafe import Cell, csv_text
from gpuaudit.report.renderer import ReportFormat

SHOWBACK_COLUMNS = (
    "window_start",
    "window_end",
    "group_by",
    "group",
    "product",
    "idle_rule",
    "currency",
    "price_per_gpu_hour",
    "gpu_hours_allocated",
    "gpu_hours_used",
    "gpu_hours_idle",
    "gpu_hours_unmeasured",
    "allocated_cost",
    "used_cost",
    "idle_cost",
    "shared_unallocated_cost",
    "shared_idle_cost",
    "allocation_basis_cost",
    "usage_basis_cost",
)
"""The showback CSV's columns, in order."""


def rows(result: AuditResult) -> list[list[Cell]]:
    """The CSV's rows (no header)."""
    sb = result.showback
    if sb is None:
        return []
    price = {p.product: p.price for p in sb.products}
    start, end = iso(result.window_start), iso(result.window_end)
    return [
        [
            start,
            end,
            g.by,
            ln.group,
            ln.product,
            sb.idle_rule,
            sb.currency,
            price.get(ln.product),
            ln.allocated_gpu_hours,
            ln.used_gpu_hours,
            ln.idle_gpu_hours,
            ln.unmeasured_gpu_hours,
            ln.allocated_cost,
            ln.used_cost,
            ln.idle_cost,
            ln.shared_unallocated_cost,
            ln.shared_idle_cost,
            ln.allocation_basis_cost,
            ln.usage_basis_cost,
        ]
        for g in sb.groupings
        for ln in g.lines
    ]


def render(result: AuditResult) -> str:
    """The showback CSV of `result`."""
    return csv_text(SHOWBACK_COLUMNS, rows(result))


FORMAT = ReportFormat("showback", render)

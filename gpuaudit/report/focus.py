"""`--report focus=FILE.csv`: the showback as a FOCUS 1.2 dataset (FinOps Open Cost and Usage
Specification, `specification/columns/*.md` at tag v1.2 of FinOps-Open-Cost-and-Usage-Spec/
FOCUS_Spec), one charge per namespace, GPU product and kind, on the usage basis under the
declared idle rule, so that the `BilledCost` of the file adds up to the cluster's GPU cost.

Per namespace line of the showback (`gpuaudit.audit.showback`): a `Usage` charge for the
GPU-hours it used (`ConsumedQuantity` in `GPU-Hours`), and `Adjustment` charges for its shares
of the idle and the unallocated cost under the rule; the remainder lines (`(idle)`,
`(unallocated)`) are `Adjustment` charges of no namespace. Costs are the configured prices
(`ListCost` = `ContractedCost` = `EffectiveCost` = `BilledCost`: gpuaudit knows no discounts).
Every column gpuaudit cannot fill is present and null (`FOCUS_NULL`), never invented; the unit
price columns are left out (Conditional in FOCUS 1.2): costs are apportioned to the cent so that
the charges add up exactly, and a unit price times the quantity would differ from them by a
cent. The columns and their values are documented in `docs/showback.md`.
"""

from __future__ import annotations

import json
from decimal import Decimal

from gpuaudit.audit.assemble import AuditResult
from gpuaudit.audit.showback import IDLE, UNALLOCATED, Line, Showback
from gpuaudit.inventory.window import iso
from gpuaudit.report.csvsafe import Cell, csv_text
from gpuaudit.report.renderer import ReportFormat

FOCUS_VERSION = "1.2"
UNIT = "GPU-Hours"
"""`ConsumedUnit` and `PricingUnit`: FOCUS Unit Format `<singular-unit>-<plural-time-units>`."""
SERVICE_NAME = "Kubernetes GPUs"
SERVICE_CATEGORY = "Compute"
TAG_PREFIX = "gpuaudit/"
"""The prefix of the provider-defined tags gpuaudit writes (FOCUS 1.2 Tags)."""

FOCUS_FILLED = (
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "EffectiveCost",
    "InvoiceIssuerName",
    "ListCost",
    "PricingCategory",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "SubAccountId",
    "SubAccountName",
    "Tags",
)
"""The columns gpuaudit writes values in (some null on some rows, as FOCUS requires)."""
FOCUS_NULL = (
    "AvailabilityZone",
    "CapacityReservationId",
    "CapacityReservationStatus",
    "CommitmentDiscountCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountQuantity",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "CommitmentDiscountUnit",
    "InvoiceId",
    "RegionId",
    "RegionName",
    "SkuId",
    "SkuMeter",
    "SkuPriceDetails",
    "SkuPriceId",
)
"""Columns gpuaudit cannot fill: present, and null on every row."""
FOCUS_COLUMNS = tuple(sorted(FOCUS_FILLED + FOCUS_NULL))


def _tags(sb: Showback, ln: Line, kind: str) -> str:
    tags: dict[str, str | float] = {
        f"{TAG_PREFIX}charge": kind,
        f"{TAG_PREFIX}idle_rule": sb.idle_rule,
        f"{TAG_PREFIX}product": ln.product,
    }
    if ln.group not in (IDLE, UNALLOCATED):
        tags[f"{TAG_PREFIX}namespace"] = ln.group
        for key, value in (
            ("allocated_gpu_hours", ln.allocated_gpu_hours),
            ("idle_gpu_hours", ln.idle_gpu_hours),
            ("allocation_basis_cost", ln.allocation_basis_cost),
            ("usage_basis_cost", ln.usage_basis_cost),
        ):
            tags[f"{TAG_PREFIX}{key}"] = float(value)
    return json.dumps(tags, sort_keys=True, ensure_ascii=True, allow_nan=False)


def _charges(ln: Line) -> list[tuple[str, str, Decimal, Decimal | None]]:
    """(kind, ChargeCategory, cost, consumed GPU-hours) of one showback line; none of 0."""
    if ln.group == UNALLOCATED:
        return [("unallocated", "Adjustment", ln.usage_basis_cost, None)]
    if ln.group == IDLE:
        return [("idle", "Adjustment", ln.usage_basis_cost, None)]
    out: list[tuple[str, str, Decimal, Decimal | None]] = [
        ("used", "Usage", ln.used_cost, ln.used_gpu_hours),
        ("shared_idle", "Adjustment", ln.shared_idle_cost, None),
        ("shared_unallocated", "Adjustment", ln.shared_unallocated_cost, None),
    ]
    return [c for c in out if c[2] or (c[3] is not None and c[3])]


_DESCRIBE = {
    "used": "GPU-hours used",
    "shared_idle": "share of idle GPU-hours",
    "shared_unallocated": "share of unallocated GPU capacity",
    "idle": "idle GPU-hours not shared",
    "unallocated": "unallocated GPU capacity not shared",
}


def rows(result: AuditResult) -> list[dict[str, Cell]]:
    """The dataset's rows, column -> value (None: null)."""
    sb = result.showback
    if sb is None or not sb.groupings:
        return []
    cluster = result.cluster or "(unnamed cluster)"
    start, end = iso(result.window_start), iso(result.window_end)
    out: list[dict[str, Cell]] = []
    for ln in sb.groupings[0].lines:  # by namespace: each GPU-hour once
        holder = ln.group not in (IDLE, UNALLOCATED)
        for kind, category, cost, used in _charges(ln):
            row: dict[str, Cell] = dict.fromkeys(FOCUS_COLUMNS)
            where = f"namespace {ln.group}" if holder else "no namespace"
            row.update(
                BilledCost=cost,
                BillingAccountId=cluster,
                BillingAccountName=result.cluster or None,
                BillingCurrency=sb.currency,
                BillingPeriodStart=start,
                BillingPeriodEnd=end,
                ChargeCategory=category,
                ChargeDescription=f"{_DESCRIBE[kind]} of {ln.product}, {where} "
                f"(idle rule {sb.idle_rule})",
                ChargeFrequency="Usage-Based",
                ChargePeriodStart=start,
                ChargePeriodEnd=end,
                ConsumedQuantity=used,
                ConsumedUnit=UNIT if used is not None else None,
                ContractedCost=cost,
                EffectiveCost=cost,
                InvoiceIssuerName=cluster,
                ListCost=cost,
                PricingCategory="Standard",
                PricingQuantity=used,
                PricingUnit=UNIT if used is not None else None,
                ProviderName=cluster,
                PublisherName=cluster,
                ResourceId=f"{ln.group}/{ln.product}" if holder else ln.product,
                ResourceName=ln.product,
                ResourceType="GPU",
                ServiceCategory=SERVICE_CATEGORY,
                ServiceName=SERVICE_NAME,
                SubAccountId=ln.group if holder else None,
                SubAccountName=ln.group if holder else None,
                Tags=_tags(sb, ln, kind),
            )
            out.append(row)
    return out


def render(result: AuditResult) -> str:
    """The FOCUS CSV of `result`."""
    return csv_text(FOCUS_COLUMNS, ([r[c] for c in FOCUS_COLUMNS] for r in rows(result)))


FORMAT = ReportFormat("focus", render)

"""The JSON report's `showback` section (schema 1.5): the window's GPU cost by product and by
holder on the allocation and usage bases, with the idle and unallocated remainder shared by
the declared rule (`gpuaudit.audit.showback`, `docs/showback.md`), and `of`, which makes it
from the audit's showback."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Literal

from pydantic import Field

from gpuaudit.audit import showback
from gpuaudit.report.models.units import Number, ReportModel, Round2


class ProductCost(ReportModel):
    """The cluster's figures for one GPU product (a node's `nvidia.com/gpu.product`, else the
    model DCGM names). GPU-hours in hundredths and money in cents, each column apportioned so
    that the products add up to the totals exactly."""

    product: str
    """The GPU product."""
    price: Number = Field(ge=0)
    """Price per GPU-hour, in the report's currency."""
    price_source: str
    """Where the price comes from: the configuration's `[prices]` key, or gpuaudit's default
    list price of a key."""
    gpus: int = Field(ge=0)
    """GPUs of the product (the products add up to `summary.gpus_total`)."""
    capacity_gpu_hours: Round2
    """`gpus` x the window's hours: every GPU, held or not."""
    allocated_gpu_hours: Round2
    """GPU-hours pods held (the attribution ledger's measure)."""
    used_gpu_hours: Round2
    """Allocated GPU-hours not measured idle."""
    idle_gpu_hours: Round2
    """Allocated GPU-hours in buckets below the idle threshold (the summary's measure)."""
    unmeasured_gpu_hours: Round2
    """Of `used_gpu_hours`, those of unknown activity (MIG instances with GPU_UTIL only, pods
    held without DCGM series)."""
    unallocated_gpu_hours: Round2
    """Capacity nobody held: capacity less allocated."""
    capacity_cost: Round2
    """`capacity_gpu_hours` at `price`."""
    allocated_cost: Round2
    """`allocated_gpu_hours` at `price`."""
    used_cost: Round2
    """`used_gpu_hours` at `price`."""
    idle_cost: Round2
    """`idle_gpu_hours` at `price`."""
    unallocated_cost: Round2
    """`capacity_cost` less `allocated_cost`."""


class Line(ReportModel):
    """One group's figures on one product, or a remainder the rule left unshared (group
    `(idle)` or `(unallocated)`)."""

    group: str
    """The namespace, label value or owner; `(idle)` or `(unallocated)` for a remainder."""
    product: str
    """The GPU product."""
    allocated_gpu_hours: Round2
    """GPU-hours the group's pods held of the product."""
    used_gpu_hours: Round2
    """Of them, those not measured idle."""
    idle_gpu_hours: Round2
    """Of them, those measured idle."""
    unmeasured_gpu_hours: Round2
    """Of the used ones, those of unknown activity."""
    allocated_cost: Round2
    """`allocated_gpu_hours` at the product's price."""
    used_cost: Round2
    """`used_gpu_hours` at the product's price."""
    idle_cost: Round2
    """`idle_gpu_hours` at the product's price."""
    shared_unallocated_cost: Round2
    """The group's share of the product's unallocated cost under the rule (both bases)."""
    shared_idle_cost: Round2
    """The group's share of the product's idle cost under the rule (usage basis)."""
    allocation_basis_cost: Round2
    """`allocated_cost` + `shared_unallocated_cost` (a remainder line: what stays unshared)."""
    usage_basis_cost: Round2
    """`used_cost` + `shared_unallocated_cost` + `shared_idle_cost` (a remainder line: what
    stays unshared)."""


class Grouping(ReportModel):
    """The lines of one way of grouping holders: by allocation-basis cost, highest first, then
    the remainder lines. Each column adds up to the products' total, and each basis to
    `cluster_cost`."""

    by: str
    """`namespace`, `label:NAME` for `--group-by-label NAME`, or `owner` (each pod's owner as
    `--owner-keys` name it; `(unknown owner)` where none does)."""
    lines: tuple[Line, ...]
    """Holder lines by allocation-basis cost, highest first, then the remainder lines."""


class Showback(ReportModel):
    """Schema 1.5: the window's GPU cost. The cluster's cost (every GPU at its product's price
    over the window) = allocated + unallocated; allocated = used + idle; every grouping's lines
    add up to it on both bases, and the GPU-hours to `summary.allocated_gpu_hours` and
    `summary.idle_gpu_hours`, in the hundredths and cents shown."""

    idle_rule: Literal["none", "proportional", "even"]
    """How each product's idle and unallocated cost is shared among the groups that held it
    (`--idle-rule`): none (their own lines), proportional (to allocated GPU-hours) or even."""
    idle_activity: Number
    """The idle threshold (mean engine activity of a bucket, `checks.idle_activity`)."""
    currency: str
    """The currency of every cost (`currency` in the configuration)."""
    cluster_cost: Round2
    """Every GPU the cluster has over the window, held or not, at its product's price."""
    allocated_cost: Round2
    """The products' `allocated_cost`."""
    used_cost: Round2
    """The products' `used_cost`."""
    idle_cost: Round2
    """Equals `summary.wasted_cost` when products and DCGM models price alike."""
    unallocated_cost: Round2
    """The products' `unallocated_cost`."""
    products: tuple[ProductCost, ...]
    """By product name."""
    groupings: tuple[Grouping, ...]
    """By namespace, then by `--group-by-label` value when given, then by owner."""
    notes: tuple[str, ...]
    """What a reader must know to read the figures, one sentence each."""


def _fields(item: showback.ProductTotal | showback.Line) -> dict[str, object]:
    """A showback dataclass's fields, its exact decimals as JSON numbers."""
    return {
        k: float(v) if isinstance(v, Decimal) else v for k, v in dataclasses.asdict(item).items()
    }


def of(sb: showback.Showback) -> Showback:
    """The JSON section of the audit's showback."""
    return Showback(
        idle_rule=sb.idle_rule,  # type: ignore[arg-type]  # one of IDLE_RULES, checked there
        idle_activity=sb.idle_activity,
        currency=sb.currency,
        cluster_cost=float(sb.total("capacity_cost")),
        allocated_cost=float(sb.total("allocated_cost")),
        used_cost=float(sb.total("used_cost")),
        idle_cost=float(sb.total("idle_cost")),
        unallocated_cost=float(sb.total("capacity_cost") - sb.total("allocated_cost")),
        products=tuple(
            ProductCost.model_validate(
                _fields(p)
                | {
                    "unallocated_gpu_hours": float(p.unallocated_gpu_hours),
                    "unallocated_cost": float(p.unallocated_cost),
                }
            )
            for p in sb.products
        ),
        groupings=tuple(
            Grouping(by=g.by, lines=tuple(Line.model_validate(_fields(ln)) for ln in g.lines))
            for g in sb.groupings
        ),
        notes=sb.notes,
    )

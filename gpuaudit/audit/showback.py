"""Showback: the cluster's GPU cost over the window, split by holder, on two bases, with the
idle and unallocated remainder shared by a declared rule (`docs/showback.md`).

The cost model, per GPU product (a node's `nvidia.com/gpu.product`, else the model DCGM names):

- *capacity*: every GPU the cluster has (`gpus_per_node`, the summary's count) over the whole
  window, held or not, at the product's price per GPU-hour;
- *allocated*: the GPU-hours pods held, the attribution ledger's measure (shared replicas, MIG
  slices, DRA claims, KAI fractions and HAMi shares at their share of a GPU, and the hours pods
  held without DCGM series); *unallocated* is capacity less allocated;
- *idle*: allocated GPU-hours in buckets whose mean activity was below the idle threshold, the
  summary's and the checks' measure; *used* is allocated less idle (hours of unknown activity,
  MIG instances with `GPU_UTIL` only and pods held without DCGM series, are not measured idle:
  they count as used and are stated as `unmeasured`).

Every figure is an exact decimal in hundredths (GPU-hours) or cents (money): the totals are
the summary's rounded figures (allocated and idle GPU-hours, `wasted_cost`), split first over
products, then over groups, by largest remainders, so that every column adds up exactly to
its total and every line of a grouping adds up to the cluster's cost.

Two bases per group: *allocation* (its allocated cost plus its share of the unallocated cost)
and *usage* (its used cost plus its shares of the idle and the unallocated cost). The rule
(`IDLE_RULES`) shares a product's idle and unallocated cost among the groups that held that
product: `none` (no share: the remainder stays on its own lines), `proportional` (by
allocated GPU-hours of the product), `even` (in equal parts). A product no group held keeps
its remainder on its own lines whatever the rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import TYPE_CHECKING, Any

from gpuaudit.audit.summary import Summary, gpus_per_node
from gpuaudit.domain.pricing import price_for, price_source
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.derived import held_hours
from gpuaudit.inventory.ownership import DEFAULT_KEYS, of_pod

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

IDLE_RULES = ("none", "proportional", "even")
"""How the idle and unallocated remainder is shared among the groups (`--idle-rule`)."""
UNALLOCATED = "(unallocated)"
"""The group of the unallocated remainder: capacity nobody held, not shared by the rule."""
IDLE = "(idle)"
"""The group of the idle remainder on the usage basis, not shared by the rule."""
NO_LABEL = "(no label)"
"""The group of pods without the `--group-by-label` label."""
NO_OWNER = "(unknown owner)"
"""The group of pods no owner key names an owner of (`gpuaudit.inventory.ownership`)."""
CENT = Decimal("0.01")


def _d(hundredths: int) -> Decimal:
    return Decimal(hundredths).scaleb(-2)


def _hundredths(x: float) -> int:
    """`x` in hundredths, as the reports round it (`round(x, 2)`)."""
    return int(Decimal(repr(round(x, 2))).scaleb(2).to_integral_value(ROUND_HALF_EVEN))


def apportion(total: int, weights: Mapping[str, float]) -> dict[str, int]:
    """`total` (an integer of hundredths) split over `weights` by largest remainders: each
    part within one of its exact share, the parts summing to `total`. A negative total is
    split as its opposite, negated; zero weights get 0 (all of it to the first key when every
    weight is 0)."""
    keys = list(weights)
    if not keys:
        return {}
    sign, left = (-1, -total) if total < 0 else (1, total)
    w = {k: max(0.0, float(weights[k])) for k in keys}
    whole = sum(w.values())
    if whole <= 0:
        return {k: (sign * left if i == 0 else 0) for i, k in enumerate(keys)}
    exact = {k: left * w[k] / whole for k in keys}
    out = {k: int(exact[k]) for k in keys}
    rest = left - sum(out.values())
    for k in sorted(keys, key=lambda k: (-(exact[k] - out[k]), keys.index(k)))[:rest]:
        out[k] += 1
    return {k: sign * v for k, v in out.items()}


@dataclass(frozen=True)
class ProductTotal:
    """The cluster's figures for one GPU product; money in the report's currency."""

    product: str
    price: Decimal
    """Price per GPU-hour."""
    price_source: str
    """Where the price comes from (the configuration's `[prices]` key, or a default)."""
    gpus: int
    """GPUs the cluster has of the product (their sum is the summary's `gpus_total`)."""
    capacity_gpu_hours: Decimal
    allocated_gpu_hours: Decimal
    used_gpu_hours: Decimal
    idle_gpu_hours: Decimal
    unmeasured_gpu_hours: Decimal
    """Of the used GPU-hours: those of unknown activity."""
    capacity_cost: Decimal
    allocated_cost: Decimal
    used_cost: Decimal
    idle_cost: Decimal

    @property
    def unallocated_gpu_hours(self) -> Decimal:
        return self.capacity_gpu_hours - self.allocated_gpu_hours

    @property
    def unallocated_cost(self) -> Decimal:
        return self.capacity_cost - self.allocated_cost


@dataclass(frozen=True)
class Line:
    """One group's figures on one product. A remainder line (`UNALLOCATED`, `IDLE`) holds the
    cost the rule left unshared."""

    group: str
    product: str
    allocated_gpu_hours: Decimal
    used_gpu_hours: Decimal
    idle_gpu_hours: Decimal
    unmeasured_gpu_hours: Decimal
    allocated_cost: Decimal
    used_cost: Decimal
    idle_cost: Decimal
    shared_unallocated_cost: Decimal
    """Its share of the product's unallocated cost (both bases)."""
    shared_idle_cost: Decimal
    """Its share of the product's idle cost (usage basis)."""
    allocation_basis_cost: Decimal
    """Allocated cost plus the share of the unallocated cost."""
    usage_basis_cost: Decimal
    """Used cost plus the shares of the idle and the unallocated cost."""


@dataclass(frozen=True)
class Grouping:
    """The lines of one way of grouping holders; they add up to the cluster's figures."""

    by: str
    """`namespace`, `label:NAME` for `--group-by-label NAME`, or `owner`."""
    lines: tuple[Line, ...]
    """Holder lines by allocation-basis cost (highest first), then group and product; then
    the remainder lines."""


@dataclass(frozen=True)
class Showback:
    """The window's GPU cost by holder: the cluster's figures per product and the groupings."""

    currency: str
    idle_rule: str
    idle_activity: float
    """The idle threshold (mean engine activity of a bucket), the checks' `idle_activity`."""
    window_hours: float
    products: tuple[ProductTotal, ...]
    groupings: tuple[Grouping, ...]
    notes: tuple[str, ...] = ()
    """What a reader must know to read the figures (a side unknown, capacity exceeded)."""

    def total(self, field: str) -> Decimal:
        """The sum of a `ProductTotal` figure over the products."""
        return sum((getattr(p, field) for p in self.products), Decimal(0))


@dataclass
class _Cell:
    """Raw (float) figures of one group on one product."""

    allocated: float = 0.0
    idle: float = 0.0
    unmeasured: float = 0.0


def _node_products(views: Views) -> dict[str, str]:
    """Node -> its product: its `nvidia.com/gpu.product`, else the model DCGM names."""
    inv = views.inv
    out: dict[str, str] = {}
    h = inv.holdings
    if not h.empty:
        for node, model in zip(h[C.NODE].tolist(), h[C.MODEL].tolist(), strict=True):
            if model and str(node) not in out:
                out[str(node)] = str(model)
    for node, product in zip(
        inv.nodes[C.NODE].tolist(), inv.nodes[C.PRODUCT].tolist(), strict=True
    ):
        if product:
            out[str(node)] = str(product)
    return out


def _holders(views: Views, idle_activity: float) -> pd.DataFrame:
    """One row per holding a pod held and per unattributed pod row: namespace, pod, product
    and its allocated, idle and unmeasured GPU-hours."""
    import numpy as np
    import pandas as pd

    inv = views.inv
    products = _node_products(views)
    h = inv.holdings
    frames = []
    if not h.empty:
        n = len(h)
        idle: npt.NDArray[Any] = np.zeros(n)
        unknown: npt.NDArray[Any] = np.zeros(n)
        if not inv.hourly.empty:
            rows = views.held_rows
            w = h[C.FRACTION].to_numpy(dtype="float64")[rows.holding]
            w = w * held_hours(inv)[rows.rows]
            act = inv.hourly[C.ACT].to_numpy(dtype="float64")[rows.rows]
            idle = np.bincount(
                rows.holding, weights=np.where(act < idle_activity, w, 0), minlength=n
            )
            unknown = np.bincount(rows.holding, weights=np.where(np.isnan(act), w, 0), minlength=n)
        held = h[C.HELD].to_numpy(dtype=bool)
        model = [
            products.get(str(node), str(m) or "unknown")
            for node, m in zip(h[C.NODE].tolist(), h[C.MODEL].tolist(), strict=True)
        ]
        frames.append(
            pd.DataFrame(
                {
                    C.NAMESPACE: h[C.NAMESPACE].to_numpy()[held],
                    C.POD: h[C.POD].to_numpy()[held],
                    C.MODEL: np.asarray(model, dtype=object)[held],
                    "allocated": h[C.GPU_HOURS].to_numpy(dtype="float64")[held],
                    "idle": idle[held],
                    "unmeasured": unknown[held],
                }
            )
        )
    un = views.unattributed
    if not un.empty:
        frames.append(
            pd.DataFrame(
                {
                    C.NAMESPACE: un[C.NAMESPACE].to_numpy(),
                    C.POD: un[C.POD].to_numpy(),
                    C.MODEL: [
                        products.get(str(x), str(m))
                        for x, m in zip(un[C.NODE], un[C.MODEL], strict=True)
                    ],
                    "allocated": un[C.GPU_HOURS].to_numpy(dtype="float64"),
                    "idle": 0.0,
                    "unmeasured": un[C.GPU_HOURS].to_numpy(dtype="float64"),
                }
            )
        )
    out: pd.DataFrame
    if not frames:
        out = pd.DataFrame(columns=[C.NAMESPACE, C.POD, C.MODEL, "allocated", "idle", "unmeasured"])
    else:
        out = pd.concat(frames, ignore_index=True)
    return out


def _cells(holders: pd.DataFrame, keys: Iterable[str]) -> dict[str, dict[str, _Cell]]:
    """Product -> group -> its raw figures; `keys` gives each holder row's group."""
    out: dict[str, dict[str, _Cell]] = {}
    for group, product, a, i, u in zip(
        keys,
        holders[C.MODEL].tolist(),
        holders["allocated"].tolist(),
        holders["idle"].tolist(),
        holders["unmeasured"].tolist(),
        strict=True,
    ):
        cell = out.setdefault(str(product), {}).setdefault(str(group), _Cell())
        cell.allocated += a
        cell.idle += i
        cell.unmeasured += u
    return out


@dataclass(frozen=True)
class _Split:
    """A product's totals in hundredths and cents, and the product's raw figures per group."""

    hours: dict[str, int]
    """allocated, used, idle, unmeasured (hundredths of GPU-hours)."""
    cents: dict[str, int]
    """capacity, allocated, used, idle (cents)."""


def _line(group: str, product: str, h: Mapping[str, int], c: Mapping[str, int]) -> Line:
    su, si = c.get("shared_unallocated", 0), c.get("shared_idle", 0)
    return Line(
        group,
        product,
        _d(h.get("used", 0) + h.get("idle", 0)),
        _d(h.get("used", 0)),
        _d(h.get("idle", 0)),
        _d(h.get("unmeasured", 0)),
        _d(c.get("used", 0) + c.get("idle", 0)),
        _d(c.get("used", 0)),
        _d(c.get("idle", 0)),
        _d(su),
        _d(si),
        _d(c.get("used", 0) + c.get("idle", 0) + su + c.get("unallocated", 0)),
        _d(c.get("used", 0) + su + si + c.get("unallocated", 0) + c.get("left_idle", 0)),
    )


def _grouping(
    by: str, cells: dict[str, dict[str, _Cell]], split: Mapping[str, _Split], rule: str
) -> Grouping:
    holder_lines: list[Line] = []
    remainder: list[Line] = []
    for product, tot in split.items():
        groups = cells.get(product, {})
        raw = {
            "used": {g: x.allocated - x.idle for g, x in groups.items()},
            "idle": {g: x.idle for g, x in groups.items()},
            "unmeasured": {g: x.unmeasured for g, x in groups.items()},
        }
        hours = {k: apportion(tot.hours[k], raw[k]) for k in raw}
        cents = {k: apportion(tot.cents[k], raw[k]) for k in ("used", "idle")}
        unallocated = tot.cents["capacity"] - tot.cents["allocated"]
        held = {g: x.allocated for g, x in groups.items() if x.allocated > 0}
        weights = {g: (1.0 if rule == "even" else a) for g, a in held.items()}
        shares = rule != "none" and bool(weights)
        su = apportion(unallocated, weights) if shares else {}
        si = apportion(tot.cents["idle"], weights) if shares else {}
        for g in groups:
            c = {
                "used": cents["used"][g],
                "idle": cents["idle"][g],
                "shared_unallocated": su.get(g, 0),
                "shared_idle": si.get(g, 0),
            }
            holder_lines.append(_line(g, product, {k: v[g] for k, v in hours.items()}, c))
        left_u = unallocated - sum(su.values())
        left_i = tot.cents["idle"] - sum(si.values())
        if left_u:
            remainder.append(_line(UNALLOCATED, product, {}, {"unallocated": left_u}))
        if left_i:
            remainder.append(_line(IDLE, product, {}, {"left_idle": left_i}))
    holder_lines.sort(key=lambda ln: (-ln.allocation_basis_cost, ln.group, ln.product))
    return Grouping(by, tuple(holder_lines + remainder))


def _label_of(views: Views, label: str) -> dict[tuple[str, str], str]:
    pods = views.inv.pods
    out: dict[tuple[str, str], str] = {}
    if C.LABELS in pods.columns:
        for ns, pod, lab in zip(pods[C.NAMESPACE], pods[C.POD], pods[C.LABELS], strict=True):
            if isinstance(lab, Mapping) and label in lab:
                out[(str(ns), str(pod))] = str(lab[label])
    return out


def _products(
    views: Views, summary: Summary, by_ns: Mapping[str, Mapping[str, _Cell]]
) -> tuple[dict[str, _Split], list[ProductTotal]]:
    """Per product, the totals in hundredths and cents (the summary's rounded figures split
    over the products by largest remainders) and its `ProductTotal`."""
    inv = views.inv
    # Capacity per product: GPUs per node, apportioned so that they sum to `gpus_total`.
    per_node = gpus_per_node(views, inv.holdings, inv.nodes)
    products = _node_products(views)
    raw_gpus: dict[str, float] = {}
    for node, n in per_node.items():
        key = products.get(node, "unknown")
        raw_gpus[key] = raw_gpus.get(key, 0.0) + n
    for product in by_ns:
        raw_gpus.setdefault(product, 0.0)
    gpus = apportion(summary.gpus_total, raw_gpus)
    hours_h = Decimal(repr(inv.window_hours))
    price = {p: Decimal(repr(price_for(p, views.prices))) for p in raw_gpus}
    alloc_raw = {p: sum(c.allocated for c in by_ns.get(p, {}).values()) for p in raw_gpus}
    idle_raw = {p: sum(c.idle for c in by_ns.get(p, {}).values()) for p in raw_gpus}
    unmeasured_raw = {p: sum(c.unmeasured for c in by_ns.get(p, {}).values()) for p in raw_gpus}
    alloc_h = apportion(_hundredths(summary.allocated_gpu_hours), alloc_raw)
    idle_h = apportion(_hundredths(summary.idle_gpu_hours), idle_raw)
    unmeasured_h = apportion(_hundredths(sum(unmeasured_raw.values())), unmeasured_raw)
    alloc_cost = {p: alloc_raw[p] * float(price[p]) for p in raw_gpus}
    idle_cost = {p: idle_raw[p] * float(price[p]) for p in raw_gpus}
    alloc_c = apportion(_hundredths(sum(alloc_cost.values())), alloc_cost)
    idle_c = apportion(_hundredths(sum(idle_cost.values())), idle_cost)
    split: dict[str, _Split] = {}
    totals: list[ProductTotal] = []
    for p in sorted(raw_gpus):
        cap_c = int((gpus[p] * hours_h * price[p] * 100).to_integral_value(ROUND_HALF_EVEN))
        cap_h = int((gpus[p] * hours_h * 100).to_integral_value(ROUND_HALF_EVEN))
        hours = {
            "used": alloc_h[p] - idle_h[p],
            "idle": idle_h[p],
            "unmeasured": unmeasured_h[p],
        }
        cents = {
            "capacity": cap_c,
            "allocated": alloc_c[p],
            "used": alloc_c[p] - idle_c[p],
            "idle": idle_c[p],
        }
        split[p] = _Split(hours, cents)
        totals.append(
            ProductTotal(
                p,
                price[p],
                price_source(p, views.prices),
                gpus[p],
                _d(cap_h),
                _d(alloc_h[p]),
                _d(hours["used"]),
                _d(idle_h[p]),
                _d(unmeasured_h[p]),
                _d(cap_c),
                _d(alloc_c[p]),
                _d(cents["used"]),
                _d(idle_c[p]),
            )
        )
    return split, totals


def showback(
    views: Views,
    summary: Summary,
    idle_activity: float,
    rule: str = "none",
    group_label: str = "",
    owner_keys: Sequence[str] = DEFAULT_KEYS,
) -> Showback:
    """The showback of the shared views' inventory, its totals those of `summary` (rounded as
    reports round them), by namespace, with `group_label` by that pod label's value, and by
    owner (each pod's owner as `owner_keys` name it, `gpuaudit.inventory.ownership.of_pod`)."""
    if rule not in IDLE_RULES:
        raise ValueError(f"unknown idle rule {rule!r}; known: {', '.join(IDLE_RULES)}")
    inv = views.inv
    holders = _holders(views, idle_activity)
    by_ns = _cells(holders, holders[C.NAMESPACE].tolist())
    split, totals = _products(views, summary, by_ns)
    pods = list(zip(holders[C.NAMESPACE].tolist(), holders[C.POD].tolist(), strict=True))
    groupings = [_grouping("namespace", by_ns, split, rule)]
    if group_label:
        labels = _label_of(views, group_label)
        keys = [labels.get((str(ns), str(pod)), NO_LABEL) for ns, pod in pods]
        groupings.append(_grouping(f"label:{group_label}", _cells(holders, keys), split, rule))
    owner = {pod: of_pod(inv.owners, str(pod[0]), str(pod[1]), owner_keys) for pod in set(pods)}
    keys = [NO_OWNER if owner[pod].name is None else str(owner[pod].name) for pod in pods]
    groupings.append(_grouping("owner", _cells(holders, keys), split, rule))
    return Showback(
        summary.currency,
        rule,
        idle_activity,
        inv.window_hours,
        tuple(totals),
        tuple(groupings),
        _notes(views, totals),
    )


def _notes(views: Views, totals: list[ProductTotal]) -> tuple[str, ...]:
    """What a reader must know: a product whose pods held more than its capacity, and an
    allocated side the Kubernetes pods were needed for."""
    notes = [
        f"{t.product}: pods held {t.allocated_gpu_hours} GPU-hours, more than its {t.gpus} "
        f"GPUs over the window ({t.capacity_gpu_hours}); its unallocated figures are negative"
        for t in totals
        if t.unallocated_gpu_hours < 0
    ]
    inv = views.inv
    if Capability.KUBERNETES_PODS not in inv.capabilities:
        why = inv.missing.get(Capability.KUBERNETES_PODS, "the Kubernetes pods were not read")
        notes.append(
            f"GPU-hours pods held without DCGM series are unknown and count as unallocated ({why})"
        )
    return tuple(notes)

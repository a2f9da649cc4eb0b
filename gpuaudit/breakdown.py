"""Where the waste sits (by namespace, by a team label) and the week in charts: computed once
from the inventory so reports only render them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuaudit.inventory import Inventory
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.views import hourly_with
from gpuaudit.pricing import price_for

NONE_GROUP = "(no label)"
HEATMAP_ROWS = 20


@dataclass(frozen=True)
class Group:
    """Allocated and idle GPU-hours of one namespace or label value."""

    key: str
    allocated_gpu_hours: float
    idle_gpu_hours: float
    wasted_cost: float
    mean_activity: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "allocated_gpu_hours": round(self.allocated_gpu_hours, 2),
            "idle_gpu_hours": round(self.idle_gpu_hours, 2),
            "wasted_cost": round(self.wasted_cost, 2),
            "mean_activity": None if self.mean_activity is None else round(self.mean_activity, 4),
        }


@dataclass(frozen=True)
class Charts:
    """Hourly fleet series and an activity heatmap (rows x hours)."""

    hours: tuple[float, ...]
    """Bucket end times (unix seconds)."""
    allocated: tuple[float, ...]
    """GPUs held by pods in each bucket."""
    activity: tuple[float | None, ...]
    """Mean engine activity of the allocated GPUs in each bucket."""
    heatmap_by: str
    heatmap_rows: tuple[str, ...]
    heatmap: tuple[tuple[float | None, ...], ...]
    """Mean activity per row (namespace) and bucket; None where nothing was held."""


@dataclass(frozen=True)
class Breakdown:
    by_namespace: tuple[Group, ...]
    group_label: str
    by_group: tuple[Group, ...]
    charts: Charts


def _groups(
    pts: Any, key: str, bucket_h: float, idle: float, prices: Mapping[str, float]
) -> tuple[Group, ...]:
    out: list[Group] = []
    for k, g in pts.groupby(key, sort=True):
        w = g[C.FRACTION] * bucket_h
        alloc = float(w.sum())
        is_idle = g[C.ACT] < idle
        idle_h = float(w[is_idle].sum())
        models = g.loc[is_idle, C.MODEL]
        price = models.map({m: price_for(str(m), prices) for m in models.unique()}).astype(float)
        cost = float((w[is_idle] * price).sum())
        mean = float((g[C.ACT] * w).sum() / alloc) if alloc > 0 else None
        out.append(Group(str(k), alloc, idle_h, cost, mean))
    out.sort(key=lambda grp: (-grp.wasted_cost, -grp.idle_gpu_hours, grp.key))
    return tuple(out)


def breakdown(
    inv: Inventory, prices: Mapping[str, float], idle_activity: float, group_label: str = ""
) -> Breakdown:
    import pandas as pd

    bucket_h = inv.step_s / 3600.0
    n = int(round((inv.window_end - inv.window_start) / inv.step_s))
    hours = tuple(inv.window_start + (i + 1) * inv.step_s for i in range(n))
    h = inv.holdings
    held = h[h[C.HELD]] if not h.empty else h
    empty = Charts(
        hours, tuple(0.0 for _ in hours), tuple(None for _ in hours), "namespace", (), ()
    )
    if held.empty or inv.hourly.empty:
        return Breakdown((), group_label, (), empty)
    pts = hourly_with(inv, [C.FRACTION, C.MODEL, C.NAMESPACE, C.POD], held_only=True)
    by_ns = _groups(pts, C.NAMESPACE, bucket_h, idle_activity, prices)
    by_group: tuple[Group, ...] = ()
    if group_label:
        labels: dict[tuple[str, str], str] = {}
        if C.LABELS in inv.pods.columns:
            for ns, pod, lab in zip(
                inv.pods[C.NAMESPACE], inv.pods[C.POD], inv.pods[C.LABELS], strict=True
            ):
                if isinstance(lab, Mapping) and group_label in lab:
                    labels[(str(ns), str(pod))] = str(lab[group_label])
        keys = [
            labels.get((str(a), str(b)), NONE_GROUP)
            for a, b in zip(pts[C.NAMESPACE], pts[C.POD], strict=True)
        ]
        pts = pts.assign(_group=keys)
        by_group = _groups(pts, "_group", bucket_h, idle_activity, prices)
    pts = pts.assign(_w=pts[C.FRACTION], _wa=pts[C.ACT] * pts[C.FRACTION])
    fleet = pts.groupby(C.TS).agg(alloc=("_w", "sum"), wa=("_wa", "sum"))
    alloc_map = fleet["alloc"].to_dict()
    act_map = (fleet["wa"] / fleet["alloc"]).to_dict()
    allocated = tuple(float(alloc_map.get(t, 0.0)) for t in hours)
    activity = tuple(
        float(act_map[t]) if t in act_map and alloc_map.get(t, 0) > 0 else None for t in hours
    )
    top = [g.key for g in sorted(by_ns, key=lambda g: (-g.allocated_gpu_hours, g.key))]
    top = top[:HEATMAP_ROWS]
    grid = (
        pts[pts[C.NAMESPACE].isin(top)]
        .groupby([C.NAMESPACE, C.TS])
        .agg(w=("_w", "sum"), wa=("_wa", "sum"))
    )
    cell = (grid["wa"] / grid["w"]).to_dict()
    heat = tuple(
        tuple((float(cell[(ns, t)]) if (ns, t) in cell else None) for t in hours) for ns in top
    )
    del pd
    return Breakdown(
        by_ns,
        group_label,
        by_group,
        Charts(hours, allocated, activity, "namespace", tuple(top), heat),
    )

"""Where the waste sits (by namespace, by a team label) and the week in charts: computed once
from the inventory so reports only render them."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuaudit.inventory import Inventory, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.derived import HeldRows, group_sums, held_hours, series_sum

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

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
    codes: npt.NDArray[np.signedinteger[Any]],
    names: list[str],
    w: npt.NDArray[np.float64],
    act: npt.NDArray[np.float64],
    price: tuple[npt.NDArray[np.float64], npt.NDArray[np.intp]],
    idle: float,
) -> tuple[Group, ...]:
    """One `Group` per name, over the rows whose code is its position in `names` (-1: none).
    `price`: the price of each holding, and each row's holding.

    Each group's rows are taken in table order and summed as `Series.sum` sums them, so the
    figures are those of a groupby over the rows themselves."""
    import numpy as np

    # Small integers sort stably by radix, in linear time.
    small = codes.astype(np.int16) if len(names) < 32767 else codes
    order = np.argsort(small, kind="stable")
    del small
    price_of, pos = price
    # The sorted codes run -1 (no group), 0, 1, ...: each group's rows are a run of `order`.
    sizes = np.bincount(codes + 1, minlength=len(names) + 1) if len(codes) else np.zeros(1, int)
    bounds = np.r_[0, np.cumsum(sizes)]
    out: list[Group] = []
    for k in np.flatnonzero(sizes[1:]).tolist():
        a, b = int(bounds[k + 1]), int(bounds[k + 2])
        rows = order[a:b]
        wg, ag = w[rows], act[rows]
        alloc = series_sum(wg)
        is_idle = ag < idle
        idle_w = wg[is_idle]
        idle_h = series_sum(idle_w)
        cost = series_sum(idle_w * price_of[pos[rows]][is_idle])
        # Activity unknown (a MIG instance with GPU_UTIL only) is left out of the mean.
        known = np.isfinite(ag)
        w_known = series_sum(wg[known])
        mean = series_sum(ag[known] * wg[known]) / w_known if w_known > 0 else None
        out.append(Group(names[k], alloc, idle_h, cost, mean))
    out.sort(key=lambda grp: (-grp.wasted_cost, -grp.idle_gpu_hours, grp.key))
    return tuple(out)


def _label_codes(
    inv: Inventory, held_at: npt.NDArray[np.intp], group_label: str
) -> tuple[npt.NDArray[np.intp], list[str]]:
    """Each holding's group under `group_label` (the pod's label value, else `NONE_GROUP`), as
    a code into the returned names; -1 for holdings not in `held_at`."""
    import numpy as np
    import pandas as pd

    labels: dict[tuple[str, str], str] = {}
    if C.LABELS in inv.pods.columns:
        for ns, pod, lab in zip(
            inv.pods[C.NAMESPACE], inv.pods[C.POD], inv.pods[C.LABELS], strict=True
        ):
            if isinstance(lab, Mapping) and group_label in lab:
                labels[(str(ns), str(pod))] = str(lab[group_label])
    h = inv.holdings
    keys = [
        labels.get((str(a), str(b)), NONE_GROUP)
        for a, b in zip(
            h[C.NAMESPACE].take(held_at).tolist(), h[C.POD].take(held_at).tolist(), strict=True
        )
    ]
    codes, names = pd.factorize(pd.Series(keys, dtype=object))
    out = np.full(len(h), -1, dtype=np.intp)
    out[held_at] = codes
    return out, [str(n) for n in names]


def _fleet_series(
    rows: HeldRows,
    frac: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64],
    wa: npt.NDArray[np.float64],
    hours: tuple[float, ...],
) -> tuple[tuple[float, ...], tuple[float | None, ...]]:
    """GPUs allocated and their mean activity (weighted by GPU-hours held, `w`) in each bucket
    of `hours`."""
    import numpy as np

    nb = len(rows.bucket_ts)
    timed = rows.bucket >= 0
    seen = np.bincount(rows.bucket[timed], minlength=nb) > 0
    alloc_b, w_b, wa_b = group_sums(rows.bucket, nb, [frac, w, wa])
    with np.errstate(divide="ignore", invalid="ignore"):  # 0 / 0 is NaN, as pandas divides
        act_b = wa_b / w_b
    alloc_map = {float(rows.bucket_ts[k]): float(alloc_b[k]) for k in np.flatnonzero(seen)}
    act_map = {float(rows.bucket_ts[k]): float(act_b[k]) for k in np.flatnonzero(seen)}
    allocated = tuple(float(alloc_map.get(t, 0.0)) for t in hours)
    activity = tuple(
        float(act_map[t]) if t in act_map and alloc_map.get(t, 0) > 0 else None for t in hours
    )
    return allocated, activity


def _heatmap(
    rows: HeldRows,
    ns_row: npt.NDArray[np.signedinteger[Any]],
    names: list[str],
    top: list[str],
    w: npt.NDArray[np.float64],
    wa: npt.NDArray[np.float64],
    hours: tuple[float, ...],
) -> tuple[tuple[float | None, ...], ...]:
    """Mean activity (weighted by GPU-hours held, `w`) per namespace of `top` (rows) and
    bucket of `hours`; None where the namespace held nothing."""
    import numpy as np

    nb = len(rows.bucket_ts)
    timed = rows.bucket >= 0
    row_of_ns = np.full(len(names) + 1, -1, dtype=np.intp)
    for i, key in enumerate(top):
        row_of_ns[names.index(key)] = i
    heat_row = row_of_ns[ns_row]  # -1 (the last entry) for rows with no namespace
    in_grid = (heat_row >= 0) & timed
    cell_code = np.where(in_grid, heat_row * nb + rows.bucket, -1)
    cells = len(top) * nb
    cell_seen = np.bincount(cell_code[in_grid], minlength=cells) > 0
    w_c, wa_c = group_sums(cell_code, cells, [w, wa])
    with np.errstate(divide="ignore", invalid="ignore"):
        act_c = wa_c / w_c
    cell = {
        (top[k // nb], float(rows.bucket_ts[k % nb])): float(act_c[k])
        for k in np.flatnonzero(cell_seen).tolist()
    }
    return tuple(
        tuple((float(cell[(ns, t)]) if (ns, t) in cell else None) for t in hours) for ns in top
    )


def _held(
    views: Views,
) -> tuple[
    HeldRows,
    npt.NDArray[np.intp],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    tuple[npt.NDArray[np.float64], npt.NDArray[np.intp]],
]:
    """The held hourly rows as arrays, with holding attributes looked up by holding row
    (strings are handled once per holding, never once per hourly row): the rows, the holdings
    held, each row's GPU-hours held (its samples x the scrape interval x the GPU fraction) and
    activity, and the price of each holding with each row's holding."""
    import numpy as np

    inv = views.inv
    h = inv.holdings
    rows = views.held_rows
    pos = rows.holding
    present = np.zeros(len(h), dtype=bool)
    present[pos] = True
    held_at = np.flatnonzero(present)
    frac_of = h[C.FRACTION].to_numpy(dtype="float64")
    w = frac_of[pos] * held_hours(inv)[rows.rows]
    act = inv.hourly[C.ACT].to_numpy(dtype="float64")[rows.rows]
    models = h[C.MODEL]
    unit = models.map({m: views.price(str(m)) for m in models.unique()})
    return rows, held_at, w, act, (unit.astype("float64").to_numpy(), pos)


def groups_of(
    views: Views, idle_activity: float, key_of: Callable[[str, str], str]
) -> tuple[Group, ...]:
    """Allocated and idle GPU-hours, wasted cost and mean activity per key: each held pod's
    (`key_of(namespace, pod)`), summed as the breakdown by namespace sums them (an owner's
    figures, `gpuaudit.inventory.ownership`)."""
    import numpy as np
    import pandas as pd

    inv = views.inv
    h = inv.holdings
    if h.empty or inv.hourly.empty or not h[C.HELD].any():
        return ()
    rows, held_at, w, act, price = _held(views)
    keys = [
        key_of(str(a), str(b))
        for a, b in zip(
            h[C.NAMESPACE].take(held_at).tolist(), h[C.POD].take(held_at).tolist(), strict=True
        )
    ]
    codes, names = pd.factorize(pd.Series(keys, dtype=object))
    code_of = np.full(len(h), -1, dtype=np.intp)
    code_of[held_at] = codes
    return _groups(code_of[rows.holding], [str(n) for n in names], w, act, price, idle_activity)


def breakdown(views: Views, idle_activity: float, group_label: str = "") -> Breakdown:
    """Waste by namespace (and by the pod label `group_label`), and the charts' series, from
    the held hourly rows of the shared views."""
    import numpy as np
    import pandas as pd

    inv = views.inv
    n = int(round((inv.window_end - inv.window_start) / inv.step_s))
    hours = tuple(inv.window_start + (i + 1) * inv.step_s for i in range(n))
    h = inv.holdings
    held = h[h[C.HELD]] if not h.empty else h
    empty = Charts(
        hours, tuple(0.0 for _ in hours), tuple(None for _ in hours), "namespace", (), ()
    )
    if held.empty or inv.hourly.empty:
        return Breakdown((), group_label, (), empty)
    rows, held_at, w, act, price = _held(views)
    pos = rows.holding
    frac_of = h[C.FRACTION].to_numpy(dtype="float64")
    ns_codes, ns_names = pd.factorize(h[C.NAMESPACE].take(held_at), sort=True)
    # Row-long arrays of codes in 4 bytes each (a 100,000-GPU week holds 27 million rows).
    ns_of = np.full(len(h), -1, dtype=np.int32)
    ns_of[held_at] = ns_codes
    names = [str(x) for x in ns_names]
    ns_row = ns_of[pos]
    by_ns = _groups(ns_row, names, w, act, price, idle_activity)
    by_group: tuple[Group, ...] = ()
    if group_label:
        label_of, label_names = _label_codes(inv, held_at, group_label)
        by_group = _groups(label_of[pos], label_names, w, act, price, idle_activity)
    known = np.isfinite(act)
    act *= w
    wa = np.where(known, act, 0.0)
    del act
    w = np.where(known, w, 0.0)  # the weights of activity means from here on
    del known
    allocated, activity = _fleet_series(rows, frac_of[pos], w, wa, hours)
    top = [g.key for g in sorted(by_ns, key=lambda g: (-g.allocated_gpu_hours, g.key))]
    top = top[:HEATMAP_ROWS]
    heat = _heatmap(rows, ns_row, names, top, w, wa, hours)
    return Breakdown(
        by_ns,
        group_label,
        by_group,
        Charts(hours, allocated, activity, "namespace", tuple(top), heat),
    )


def label_warning(inv: Inventory, group_label: str) -> str | None:
    """Why `--group-by-label` breaks nothing down, when no pod carries the label: the label
    names closest to it (a misspelling), else the ones most pods carry, or that no pod labels
    were read at all."""
    if not group_label:
        return None
    seen: dict[str, int] = {}
    if C.LABELS in inv.pods.columns:
        for lab in inv.pods[C.LABELS]:
            if isinstance(lab, Mapping):
                if group_label in lab:
                    return None
                for k in lab:
                    seen[str(k)] = seen.get(str(k), 0) + 1
    head = f"--group-by-label {group_label}: no pod carries the label {group_label!r}"
    if not seen:
        return (
            f"{head}, and no pod labels were read (they come from the Kubernetes API); every "
            "pod falls in (no label)."
        )
    names = sorted(seen)
    # `team` is likely meant as `app.kubernetes.io/team`, or misspelt as `tean`.
    close = [k for k in names if k.rsplit("/", 1)[-1] == group_label]
    close += difflib.get_close_matches(group_label, names, n=3, cutoff=0.6)
    if close:
        hint = f"the closest label names the pods carry: {', '.join(dict.fromkeys(close))}"
    else:
        common = sorted(names, key=lambda k: (-seen[k], k))[:5]
        hint = f"the label names most pods carry: {', '.join(common)}"
    return f"{head}, so every pod falls in (no label); {hint}."

"""GPU060 warm idle nodes: GPU nodes that sat for a day or more with no GPU work on them.

What it finds
    GPU nodes on which, for a stretch of at least 24 hours, no pod held a GPU, or only pods
    that left their GPUs idle did: capacity kept warm that a cluster autoscaler (or Karpenter)
    could have released.

Why it matters
    A GPU node costs the same whether its GPUs work or not. Autoscalers release a node only
    when it is empty and nothing blocks scale-down; an idle pod, a pod without a controller or
    a scale-down-disabled annotation keeps a whole node of GPUs running.

How it decides
    Per node and bucket (`--step`, default 1 h), from the DCGM series of its GPUs and MIG
    instances: the bucket is idle when the node's GPUs have data and no pod holding one of
    them reached `checks.idle_activity` (default 0.05) mean engine activity. Buckets without
    DCGM data break a stretch (missing data is not idle). Runs of consecutive idle buckets
    covering at least `checks.warm_idle_hours` (default 24 h) count; a bucket covers the time
    the node's samples in it stand for (the longest of its series: samples x the scrape
    interval).
    Impact: the node's GPUs (the most of those DCGM reported, its `nvidia.com/gpu.count`
    label, and, where it advertises each GPU several times, its allocatable `nvidia.com/gpu`
    over its replicas or HAMi's split count) x the hours in those runs, priced per GPU model.
    Severity: high from 500 GPU-hours, medium from 100, low below.

What to do
    Let the autoscaler remove the node when it has no GPU work: stop idle holders (GPU001),
    and remove what blocks scale-down (the `cluster-autoscaler.kubernetes.io/scale-down-disabled`
    annotation, pods without a controller or with local storage, strict PodDisruptionBudgets).
    For Karpenter, set the NodePool's `disruption.consolidationPolicy: WhenEmptyOrUnderutilized`.
    Where another finding moves work onto the node's unheld GPUs (GPU031: a job spread over a
    slow link), both findings say so: keep the GPUs that work needs there and release what it
    leaves instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import numpy as np

from gpuaudit.checks.base import NODE_WASTE, gpu_word, short_model
from gpuaudit.checks.contract import fraction, hours
from gpuaudit.checks.findings import Finding, Impact, Resource
from gpuaudit.inventory import Capability, Inventory, Views, grouped
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.arrays import grid_range, slices
from gpuaudit.inventory.derived import hourly_with, physical_slot

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

CODE = "GPU060"
TITLE = "Warm idle nodes"
REQUIRES = (Capability.ACTIVITY,)
VIEWS = ()
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


@dataclass(frozen=True)
class Thresholds:
    idle_activity: float = fraction(0.05)
    """Mean engine activity (ratio) below which a GPU counts as idle."""
    warm_idle_hours: float = hours(24.0)
    """Contiguous hours a GPU node must have had no GPU pod at work."""


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%MZ")


@dataclass(frozen=True)
class _Rows:
    """Hourly rows with a node and a time: their holding positions, node codes, times,
    activity and hours held."""

    rows: npt.NDArray[np.int64]
    node: npt.NDArray[np.int64]
    ts: npt.NDArray[np.float64]
    act: npt.NDArray[np.float64]
    held: npt.NDArray[np.float64]


def _rows(
    rows: npt.NDArray[np.int64],
    codes: npt.NDArray[np.int64],
    ts: npt.NDArray[np.float64],
    act: npt.NDArray[np.float64],
    held: npt.NDArray[np.float64],
    sl: slice,
) -> _Rows:
    """The rows of slice `sl` with a node and a time (a groupby leaves the others out)."""
    r = rows[sl]
    node = codes[r]
    t = ts[sl]
    ok = (node >= 0) & ~np.isnan(t)
    return _Rows(r[ok], node[ok].astype(np.int64), t[ok], act[sl][ok], held[sl][ok])


def _on_grid(
    rows: npt.NDArray[np.int64],
    codes: npt.NDArray[np.int64],
    ts: npt.NDArray[np.float64],
    start: float,
    step: float,
) -> tuple[float, float] | None:
    """The first and last bucket number of the rows with a node and a time (`grid_range`),
    where there are fewer than `grouped.GRID_BUCKETS` buckets (`grouped.bucket_index`'s test);
    else None."""

    def times(sl: slice) -> npt.NDArray[np.float64]:
        t = ts[sl]
        out: npt.NDArray[np.float64] = t[(codes[rows[sl]] >= 0) & ~np.isnan(t)]
        return out

    span = grid_range(len(rows), times, start, step)
    return span if span is not None and span[1] - span[0] < grouped.GRID_BUCKETS else None


def _idle_runs(
    inv: Inventory, step: float, idle_activity: float, min_hours: float
) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """Runs of idle buckets of at least `min_hours` (node, `_run`, `min`, `max`, `size`,
    `hours`: sorted by node, then time), and per node with such runs the pods that held its
    GPUs in them (`namespace/pod`, sorted).

    Grid cells (node, bucket) are integer codes: nodes are coded on the holdings table, and
    each hourly row reaches its node through its holding's row position."""
    import pandas as pd

    rows = grouped.holding_positions(inv, inv.hourly)
    if rows is not None:
        hr, keys = inv.hourly, inv.holdings
    else:
        hr = hourly_with(inv, [C.NODE, C.HELD, C.NAMESPACE, C.POD])
        keys = hr.reset_index(drop=True)
        rows = np.arange(len(hr), dtype=np.int64)
    node_names = keys[C.NODE]
    codes, names = pd.factorize(node_names, sort=True)
    codes = np.where((node_names != "").to_numpy(dtype=bool), codes, -1)
    held_k = keys[C.HELD].astype(bool).to_numpy()
    ts_all = hr[C.TS].to_numpy(dtype="float64")
    act_all = hr[C.ACT].to_numpy(dtype="float64")
    held_all = (
        hr[C.HELD_H].to_numpy(dtype="float64")
        if C.HELD_H in hr.columns
        else np.full(len(hr), step / 3600.0)
    )
    grid = _on_grid(rows, codes, ts_all, inv.window_start, step)
    if grid is None:  # a time off the window's grid: every row at once, bucketed by a sort
        pieces = [_rows(rows, codes, ts_all, act_all, held_all, slice(0, len(rows)))]
        if not len(pieces[0].rows):
            return pd.DataFrame(columns=[C.NODE, "_run", "min", "max", "size", "hours"]), {}
        bucket, ends = grouped.bucket_index(pieces[0].ts, inv.window_start, step)
        buckets = [bucket]
    else:
        lo, hi = grid
        ends = inv.window_start + np.arange(lo, hi + 1.0) * step
        pieces, buckets = [], []
    nb = len(ends)
    size = len(names) * nb
    present = np.zeros(size, dtype=bool)
    busy_cell = np.zeros(size, dtype=bool)
    # The node's time in a bucket: the longest any of its series covers (samples x interval).
    cell_held = np.zeros(size)

    def cells() -> Iterator[tuple[_Rows, npt.NDArray[np.int64]]]:
        """Each piece of rows with its cells, a slice of rows at a time on the grid."""
        if grid is None:
            yield pieces[0], pieces[0].node * nb + buckets[0]
            return
        for sl in slices(len(rows)):
            piece = _rows(rows, codes, ts_all, act_all, held_all, sl)
            k = np.rint((piece.ts - inv.window_start) / step).astype(np.int64)
            k -= int(grid[0])
            yield piece, piece.node * nb + k

    any_row = False
    for piece, cell in cells():
        any_row = any_row or bool(len(cell))
        present[cell] = True
        busy = held_k[piece.rows] & (piece.act >= idle_activity)
        busy_cell[cell[busy]] = True
        np.maximum.at(cell_held, cell, piece.held)
    if not any_row:
        return pd.DataFrame(columns=[C.NODE, "_run", "min", "max", "size", "hours"]), {}
    # Present cells in (node, time) order, split into runs as a sorted groupby would: a new run
    # where the node changes, idle turns busy or back, or a bucket is missing.
    at = np.flatnonzero(present)
    n_of, b_of = at // nb, at % nb
    t_of = ends[b_of]
    idle = ~busy_cell[at]
    new = np.ones(len(at), dtype=bool)
    if len(at) > 1:
        same_node = n_of[1:] == n_of[:-1]
        new[1:] = (
            ~same_node | (idle[1:] != idle[:-1]) | ~(same_node & (t_of[1:] - t_of[:-1] == step))
        )
    run_id = np.cumsum(new)
    starts = np.flatnonzero(new & idle)
    ends_at = np.append(np.flatnonzero(new)[1:], len(at))
    stop = ends_at[np.searchsorted(np.flatnonzero(new), starts)]  # one past each run's last cell
    sizes = stop - starts
    covered = np.r_[0.0, np.cumsum(cell_held[at])]
    runs = pd.DataFrame(
        {
            C.NODE: names.take(n_of[starts]),
            "_run": run_id[starts],
            "min": t_of[starts],
            "max": t_of[stop - 1],
            "size": sizes.astype(np.int64),
        }
    )
    runs["hours"] = covered[stop] - covered[starts]
    long_runs: pd.DataFrame = runs[runs["hours"] >= min_hours].reset_index(drop=True)
    if long_runs.empty:
        return long_runs, {}
    # Pods that held GPUs (idly) during the long runs.
    keep = runs["hours"].to_numpy() >= min_hours
    marked = np.zeros(size, dtype=bool)
    for a, z in zip(starts[keep].tolist(), stop[keep].tolist(), strict=True):
        marked[at[a:z]] = True
    mine_rows = []
    for piece, cell in cells():
        mine = held_k[piece.rows]
        mine[mine] = marked[cell[mine]]
        mine_rows.append(piece.rows[mine])
    holders = np.unique(np.concatenate(mine_rows))
    idle_pods: dict[str, set[str]] = {str(n): set() for n in long_runs[C.NODE].tolist()}
    for n, ns, p in zip(
        keys[C.NODE].to_numpy(dtype=object)[holders].tolist(),
        keys[C.NAMESPACE].to_numpy(dtype=object)[holders].tolist(),
        keys[C.POD].to_numpy(dtype=object)[holders].tolist(),
        strict=True,
    ):
        idle_pods[str(n)].add(f"{ns}/{p}")
    return long_runs, {n: sorted(v) for n, v in idle_pods.items()}


def _node_gpus(nodes: pd.DataFrame) -> dict[str, float]:
    """Node -> its GPUs as Kubernetes says: its `nvidia.com/gpu.count` label, or, on a node
    that advertises each GPU several times (time-slicing, HAMi's split), its allocatable
    `nvidia.com/gpu` over that (`C.GPU_REPLICAS`) where more."""
    if nodes.empty:
        return {}
    count = nodes[C.GPU_COUNT].fillna(0).to_numpy(dtype=np.float64)
    split = nodes[C.GPU_REPLICAS].fillna(1).to_numpy(dtype=np.float64)
    alloc = nodes[C.ALLOCATABLE_GPU].fillna(0).to_numpy(dtype=np.float64)
    gpus = np.where(split > 1, np.maximum(count, alloc / np.maximum(split, 1.0)), count)
    return dict(zip(nodes[C.NODE].astype(str).tolist(), gpus.tolist(), strict=True))


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    inv = views.inv
    h = inv.holdings
    if h.empty or inv.hourly.empty:
        return []
    step = float(inv.step_s)
    long_runs, idle_pods = _idle_runs(inv, step, cfg.idle_activity, cfg.warm_idle_hours)
    if long_runs.empty:
        return []
    # Node sizes and models for the nodes found idle only.
    h = h[h[C.NODE].isin(list(idle_pods))]
    base = h[C.UUID].where(h[C.UUID] != "", physical_slot(h))
    physical = base.groupby(h[C.NODE]).nunique()
    labelled = _node_gpus(inv.nodes)
    models = views.node_products
    dcgm_model = h.groupby(C.NODE)[C.MODEL].first()
    kai = views.kai_reservations
    out: list[Finding] = []
    for node, grp in long_runs.groupby(C.NODE, sort=True):
        node = str(node)
        gpus = float(max(physical.get(node, 0), float(labelled.get(node, 0) or 0)))
        if gpus <= 0:
            continue
        hours = float(grp["hours"].sum())
        longest = float(grp["hours"].max())
        gpu_hours = gpus * hours
        model = str(dcgm_model.get(node, "") or models.get(node, ""))
        cost = gpu_hours * views.price(model)
        # KAI's reservation pods hold GPUs for the fraction pods named beside them.
        pods = [q for q in idle_pods.get(node, []) if tuple(q.split("/", 1)) not in kai]
        what = (
            "no GPU pod at work"
            if not pods
            else f"only idle GPU pods ({', '.join(pods[:3])}{' ...' if len(pods) > 3 else ''})"
        )
        message = (
            f"Node {node} ({gpu_word(gpus)}, {short_model(model)}) had {what} for {hours:.0f} h "
            f"of the window, {longest:.0f} h in a row: {gpu_hours:,.0f} GPU-hours an autoscaler "
            "could have released."
        )
        rec = (
            f"Let the cluster autoscaler (or Karpenter) remove {node} when it has no GPU work: "
            + (f"stop the idle holders ({', '.join(pods[:3])}; see GPU001), and " if pods else "")
            + "clear what blocks scale-down (the cluster-autoscaler.kubernetes.io/"
            "scale-down-disabled annotation, pods without a controller or with local storage, "
            "strict PodDisruptionBudgets)."
        )
        out.append(
            Finding(
                code=CODE,
                severity=NODE_WASTE(gpu_hours),
                resource=Resource("Node", "", node, node, gpus),
                message=message,
                impact=Impact(gpu_hours=gpu_hours, cost=cost),
                recommendation=rec,
                releases=(node,),
                pods=tuple(pods),
                evidence={
                    "gpus": gpus,
                    "gpu_model": model,
                    "idle_hours": round(hours, 2),
                    "longest_idle_hours": round(longest, 2),
                    "idle_stretches": [
                        [_iso(float(a) - step), _iso(float(b)), round(float(n), 2)]
                        for a, b, n in zip(grp["min"], grp["max"], grp["hours"], strict=True)
                    ],
                    "idle_holders": pods,
                    "threshold_hours": cfg.warm_idle_hours,
                    "threshold_activity": cfg.idle_activity,
                },
            )
        )
    return out

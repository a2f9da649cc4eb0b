"""Derived views of the inventory that several checks and the summary share."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuaudit.inventory import columns as C
from gpuaudit.pricing import price_for

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import pandas as pd

    from gpuaudit.inventory.build import Inventory

POD_GPUS = "pod_gpus"
COST = "cost"
MODELS = "models"
WAITED = "waited_h"


def held(inv: Inventory) -> pd.DataFrame:
    """Holdings that a pod held, with the price-weighted cost of their GPU-hours."""
    h = inv.holdings
    out: pd.DataFrame = h[h[C.HELD] & (h[C.HOURS] > 0)]
    return out


def per_pod(inv: Inventory, prices: Mapping[str, float]) -> pd.DataFrame:
    """One row per holder pod (see `_per_pod`), computed once per inventory and prices."""
    key = ("per_pod", tuple(sorted(prices.items())))
    return _memo(inv, key, lambda: _per_pod(inv, prices))


def _per_pod(inv: Inventory, prices: Mapping[str, float]) -> pd.DataFrame:
    """One row per holder pod: GPUs, hours, GPU-hours, cost, activity and owner.

    Mean activity is weighted by sample counts where known (exactly the mean over every
    sample of every GPU the pod held), else by GPU-hours.
    """
    import pandas as pd

    h = held(inv).copy()
    if h.empty:
        empty: pd.DataFrame = pd.DataFrame(
            columns=[
                C.NAMESPACE,
                C.POD,
                C.NODE,
                POD_GPUS,
                C.HOURS,
                C.GPU_HOURS,
                COST,
                C.ACT_MEAN,
                C.ACT_MAX,
                C.MODEL,
                C.ACT_SOURCE,
                C.OWNER_KIND,
                C.OWNER_NAME,
                C.FIRST_TS,
                C.LAST_TS,
                C.MIG_PROFILE,
            ]
        )
        return empty
    price = {m: price_for(str(m), prices) for m in h[C.MODEL].unique()}
    h[COST] = h[C.GPU_HOURS] * h[C.MODEL].map(price).astype("float64")
    w = h[C.ACT_COUNT].where(h[C.ACT_COUNT].notna() & (h[C.ACT_COUNT] > 0), h[C.GPU_HOURS])
    h["_w"] = w.where(h[C.ACT_MEAN].notna(), 0.0)
    h["_wa"] = (h[C.ACT_MEAN] * h["_w"]).fillna(0.0)
    g = h.groupby([C.NAMESPACE, C.POD], sort=True)
    out = g.agg(
        node=(C.NODE, "first"),
        pod_gpus=(C.FRACTION, "sum"),
        hours=(C.HOURS, "max"),
        gpu_hours=(C.GPU_HOURS, "sum"),
        cost=(COST, "sum"),
        _wa=("_wa", "sum"),
        _w=("_w", "sum"),
        act_max=(C.ACT_MAX, "max"),
        model=(C.MODEL, "first"),
        act_source=(C.ACT_SOURCE, "first"),
        first_ts=(C.FIRST_TS, "min"),
        last_ts=(C.LAST_TS, "max"),
        mig_profile=(C.MIG_PROFILE, "first"),
    ).reset_index()
    out[C.ACT_MEAN] = (out["_wa"] / out["_w"]).where(out["_w"] > 0)
    out = out.drop(columns=["_wa", "_w"])
    pods = inv.pods[[C.NAMESPACE, C.POD, C.OWNER_KIND, C.OWNER_NAME]]
    merged: pd.DataFrame = out.merge(pods, on=[C.NAMESPACE, C.POD], how="left")
    merged[C.OWNER_KIND] = merged[C.OWNER_KIND].fillna("")
    merged[C.OWNER_NAME] = merged[C.OWNER_NAME].fillna("")
    return merged


def _memo(
    inv: Inventory, key: tuple[object, ...], make: Callable[[], pd.DataFrame]
) -> pd.DataFrame:
    """Views several checks share are computed once per inventory (checks must not mutate
    them)."""
    cache: dict[tuple[object, ...], pd.DataFrame] = inv.__dict__.setdefault("_views", {})
    if key not in cache:
        cache[key] = make()
    return cache[key]


def pod_hourly(inv: Inventory) -> pd.DataFrame:
    """Per holder pod and bucket: GPUs held (whole-GPU equivalents) and their mean activity."""
    return _memo(inv, ("pod_hourly",), lambda: _pod_hourly(inv))


def hourly_with(
    inv: Inventory, cols: list[str], held_only: bool = False, whole_only: bool = False
) -> pd.DataFrame:
    """The hourly table with holding columns attached (a join on the holding id done as an
    array lookup: holding ids are row positions in `inv.holdings`)."""
    import numpy as np

    h = inv.holdings
    hr = inv.hourly
    ids = hr[C.HOLDING].to_numpy()
    positional = len(h) > 0 and bool((h[C.HOLDING].to_numpy() == np.arange(len(h))).all())
    if not positional:  # a hand-built inventory: fall back to a merge
        keep = h
        if held_only:
            keep = keep[keep[C.HELD] & (keep[C.HOURS] > 0)]
        if whole_only:
            keep = keep[keep[C.MIG_ID] == ""]
        merged: pd.DataFrame = hr.merge(keep[[C.HOLDING, *cols]], on=C.HOLDING, how="inner")
        return merged
    mask = np.ones(len(h), dtype=bool)
    if held_only:
        mask &= (h[C.HELD] & (h[C.HOURS] > 0)).to_numpy(dtype=bool)
    if whole_only:
        mask &= (h[C.MIG_ID] == "").to_numpy(dtype=bool)
    rows = mask[ids]
    out = hr[rows].reset_index(drop=True)
    sel = ids[rows]
    for col in cols:
        out[col] = h[col].to_numpy()[sel]
    result: pd.DataFrame = out
    return result


def _pod_hourly(inv: Inventory) -> pd.DataFrame:
    hr = hourly_with(inv, [C.NAMESPACE, C.POD, C.FRACTION], held_only=True)
    hr["_wa"] = hr[C.ACT] * hr[C.FRACTION]
    g = hr.groupby([C.NAMESPACE, C.POD, C.TS], sort=True)
    out = g.agg(gpus=(C.FRACTION, "sum"), _wa=("_wa", "sum")).reset_index()
    out[C.ACT] = out["_wa"] / out["gpus"]
    result: pd.DataFrame = out.drop(columns=["_wa"])
    return result


def model_price(model: str, prices: Mapping[str, float]) -> float:
    return price_for(model, prices)


def whole_gpu_hourly(inv: Inventory) -> pd.DataFrame:
    """Hourly rows of whole GPUs (MIG instances left out) with node, slot, GPU index, holder
    and model: one row per (GPU, holder, bucket) that has data."""
    cols = [C.NODE, C.SLOT, C.GPU_INDEX, C.HELD, C.NAMESPACE, C.POD, C.MODEL]

    def make() -> pd.DataFrame:
        out: pd.DataFrame = hourly_with(inv, cols, whole_only=True)[[C.HOLDING, C.TS, C.ACT, *cols]]
        return out

    return _memo(inv, ("whole_gpu_hourly",), make)


def free_gpus(
    hourly: pd.DataFrame, buckets: set[float] | None = None, nodes: set[str] | None = None
) -> dict[tuple[str, float], set[str]]:
    """(node, bucket end) -> the GPU indices no pod held in that bucket, from
    `whole_gpu_hourly`, for the bucket ends in `buckets` and the nodes in `nodes` (None: all).
    A GPU with no data in a bucket is not counted free. Keys come in the order of their first
    row."""
    import numpy as np

    mask = ~hourly[C.HELD].astype(bool).to_numpy()
    if buckets is not None:
        mask &= hourly[C.TS].isin(list(buckets)).to_numpy()
    # Strings are read only for the rows left: a few buckets of a table of millions of rows.
    rows = np.flatnonzero(mask)
    out: dict[tuple[str, float], set[str]] = {}
    for node, ts, idx in zip(
        hourly[C.NODE].array[rows].tolist(),
        hourly[C.TS].to_numpy()[rows].tolist(),
        hourly[C.GPU_INDEX].array[rows].tolist(),
        strict=True,
    ):
        if node is None or node != node or ts != ts:
            continue  # a missing key: a groupby leaves the row out
        if nodes is None or str(node) in nodes:
            out.setdefault((str(node), float(ts)), set()).add(str(idx))
    return out


def node_products(inv: Inventory) -> dict[str, str]:
    """Node -> GPU product: the `nvidia.com/gpu.product` label, else the DCGM model name."""
    out: dict[str, str] = {}
    h = inv.holdings
    if not h.empty:
        # A node's first holding with a model names it; a missing value counts as named, as
        # it is truthy in a row-by-row test.
        named = h.loc[(h[C.NODE] != "") & (h[C.MODEL] != ""), [C.NODE, C.MODEL]]
        first = named.drop_duplicates(C.NODE)
        for node, model in zip(first[C.NODE].tolist(), first[C.MODEL].tolist(), strict=True):
            out.setdefault(str(node), str(model))
    if not inv.nodes.empty:
        for node, product in zip(inv.nodes[C.NODE], inv.nodes[C.PRODUCT], strict=True):
            if product:
                out[str(node)] = str(product)
    return out


def waiting_for_gpus(inv: Inventory, min_minutes: float) -> pd.DataFrame:
    """Pods unschedulable for lack of GPUs (PodScheduled False, reason Unschedulable, the
    scheduler's message naming an `nvidia.com/` resource) for at least `min_minutes` at the
    window's end, asking for whole GPUs; with a `waited_h` column."""
    p: pd.DataFrame = inv.pods
    if p.empty:
        return p
    msg = p[C.SCHED_MESSAGE].fillna("").astype(str).str.lower()
    since = p[C.PENDING_SINCE].astype("float64")
    cand = p[
        (p[C.PHASE] == "Pending")
        & p[C.UNSCHEDULABLE].fillna(False).astype(bool)
        & msg.str.contains("nvidia.com/", regex=False)
        & (p[C.GPU_REQUEST] > 0)
        & since.notna()
        & ((inv.window_end - since) >= min_minutes * 60)
    ].copy()
    cand[WAITED] = (inv.window_end - cand[C.PENDING_SINCE].astype("float64")) / 3600.0
    out: pd.DataFrame = cand
    return out


def gpu_nodes(inv: Inventory) -> pd.DataFrame:
    """Schedulable GPU nodes with whole-GPU allocatable, requested and free counts, as the
    scheduler sees them at the window's end (requests of pods bound to the node that have not
    finished)."""
    import pandas as pd

    n = inv.nodes
    cols = [C.NODE, C.PRODUCT, C.POOL, C.ALLOCATABLE_GPU, "requested", "free"]
    if n.empty:
        empty: pd.DataFrame = pd.DataFrame(columns=cols)
        return empty
    n = n[(n[C.ALLOCATABLE_GPU] > 0) & ~n[C.CORDONED].fillna(False).astype(bool)]
    p = inv.pods
    bound = p[(p[C.NODE] != "") & ~p[C.PHASE].isin(["Succeeded", "Failed"])]
    req = bound.groupby(C.NODE)[C.GPU_REQUEST].sum()
    out = n[[C.NODE, C.PRODUCT, C.POOL, C.ALLOCATABLE_GPU]].copy()
    out["requested"] = out[C.NODE].map(req).fillna(0.0).astype("float64")
    out["free"] = (out[C.ALLOCATABLE_GPU] - out["requested"]).clip(lower=0.0)
    result: pd.DataFrame = out.reset_index(drop=True)
    return result


def fits_products(selector: str, product: str) -> bool:
    """Whether a node of `product` matches a pod's pinned products (empty: any)."""
    return not selector or product in selector.split(",")

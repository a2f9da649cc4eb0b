"""Derived views of the inventory that several checks and the summary share."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuaudit.inventory import columns as C
from gpuaudit.pricing import price_for

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd

    from gpuaudit.inventory.build import Inventory

POD_GPUS = "pod_gpus"
COST = "cost"
MODELS = "models"


def held(inv: Inventory) -> pd.DataFrame:
    """Holdings that a pod held, with the price-weighted cost of their GPU-hours."""
    h = inv.holdings
    out: pd.DataFrame = h[h[C.HELD] & (h[C.HOURS] > 0)]
    return out


def per_pod(inv: Inventory, prices: Mapping[str, float]) -> pd.DataFrame:
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
    h[COST] = h[C.GPU_HOURS] * h[C.MODEL].map(lambda m: price_for(str(m), prices)).astype("float64")
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


def pod_hourly(inv: Inventory) -> pd.DataFrame:
    """Per holder pod and bucket: GPUs held (whole-GPU equivalents) and their mean activity."""
    h = held(inv)[[C.HOLDING, C.NAMESPACE, C.POD, C.FRACTION]]
    hr = inv.hourly.merge(h, on=C.HOLDING, how="inner")
    hr["_wa"] = hr[C.ACT] * hr[C.FRACTION]
    g = hr.groupby([C.NAMESPACE, C.POD, C.TS], sort=True)
    out = g.agg(gpus=(C.FRACTION, "sum"), _wa=("_wa", "sum")).reset_index()
    out[C.ACT] = out["_wa"] / out["gpus"]
    result: pd.DataFrame = out.drop(columns=["_wa"])
    return result


def model_price(model: str, prices: Mapping[str, float]) -> float:
    return price_for(model, prices)

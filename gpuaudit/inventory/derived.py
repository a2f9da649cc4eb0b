"""The views several checks, the summary and the breakdown share, each a pure function of the
inventory (and prices). `gpuaudit.inventory.Views` makes each of them once per audit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuaudit.domain.pricing import price_for
from gpuaudit.inventory import columns as C

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from gpuaudit.inventory.tables import Inventory

    Index = npt.NDArray[np.signedinteger[Any]]
    """An array of row positions or codes: 4- or 8-byte integers."""


def held_hours(inv: Inventory) -> npt.NDArray[np.float64]:
    """Hours held in each row of the hourly table (`HELD_H`: samples x the scrape interval);
    a whole bucket per row for a hand-built table without that column."""
    import numpy as np

    hr = inv.hourly
    if C.HELD_H in hr.columns:
        out: npt.NDArray[np.float64] = hr[C.HELD_H].to_numpy(dtype="float64")
        return out
    return np.full(len(hr), inv.step_s / 3600.0)


def held(inv: Inventory) -> pd.DataFrame:
    """Holdings that a pod held, with the price-weighted cost of their GPU-hours."""
    h = inv.holdings
    out: pd.DataFrame = h[h[C.HELD] & (h[C.HOURS] > 0)]
    return out


def per_pod(inv: Inventory, prices: Mapping[str, float]) -> pd.DataFrame:
    """One row per holder pod: GPUs, hours, GPU-hours, cost, activity and owner, and the most
    replicas a device it held was shared into (`REPLICAS`, 1: none shared).

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
                C.POD_GPUS,
                C.HOURS,
                C.GPU_HOURS,
                C.COST,
                C.ACT_MEAN,
                C.ACT_MAX,
                C.MODEL,
                C.ACT_SOURCE,
                C.OWNER_KIND,
                C.OWNER_NAME,
                C.FIRST_TS,
                C.LAST_TS,
                C.MIG_PROFILE,
                C.REPLICAS,
            ]
        )
        return empty
    price = {m: price_for(str(m), prices) for m in h[C.MODEL].unique()}
    h[C.COST] = h[C.GPU_HOURS] * h[C.MODEL].map(price).astype("float64")
    w = h[C.ACT_COUNT].where(h[C.ACT_COUNT].notna() & (h[C.ACT_COUNT] > 0), h[C.GPU_HOURS])
    h["_w"] = w.where(h[C.ACT_MEAN].notna(), 0.0)
    h["_wa"] = (h[C.ACT_MEAN] * h["_w"]).fillna(0.0)
    g = h.groupby([C.NAMESPACE, C.POD], sort=True)
    out = g.agg(
        node=(C.NODE, "first"),
        pod_gpus=(C.FRACTION, "sum"),
        hours=(C.HOURS, "max"),
        gpu_hours=(C.GPU_HOURS, "sum"),
        cost=(C.COST, "sum"),
        _wa=("_wa", "sum"),
        _w=("_w", "sum"),
        act_max=(C.ACT_MAX, "max"),
        model=(C.MODEL, "first"),
        act_source=(C.ACT_SOURCE, "first"),
        first_ts=(C.FIRST_TS, "min"),
        last_ts=(C.LAST_TS, "max"),
        mig_profile=(C.MIG_PROFILE, "first"),
        replicas=(C.REPLICAS, "max"),
    ).reset_index()
    out[C.ACT_MEAN] = (out["_wa"] / out["_w"]).where(out["_w"] > 0)
    out = out.drop(columns=["_wa", "_w"])
    pods = inv.pods[[C.NAMESPACE, C.POD, C.OWNER_KIND, C.OWNER_NAME]]
    merged: pd.DataFrame = out.merge(pods, on=[C.NAMESPACE, C.POD], how="left")
    merged[C.OWNER_KIND] = merged[C.OWNER_KIND].fillna("")
    merged[C.OWNER_NAME] = merged[C.OWNER_NAME].fillna("")
    return merged


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


@dataclass(frozen=True)
class HeldRows:
    """The rows of the hourly table whose holding a pod held (`held`), in the order
    `hourly_with(..., held_only=True)` gives them, as arrays rather than a frame."""

    rows: Index
    """Row positions in `inv.hourly`."""
    holding: Index
    """Row positions in `inv.holdings` of each row's holding."""
    bucket: Index
    """Each row's bucket, an index into `bucket_ts` (-1 where its time is missing).

    The three are 4-byte integers where the hourly table has fewer than 2**31 rows: they are as
    long as the hourly table, and 8 bytes each would double what they hold."""
    bucket_ts: npt.NDArray[np.float64]
    """Bucket end times, ascending."""


def _held_mask(h: pd.DataFrame) -> npt.NDArray[np.bool_]:
    import numpy as np

    mask: npt.NDArray[np.bool_] = (h[C.HELD] & (h[C.HOURS] > 0)).to_numpy(dtype=bool)
    return np.asarray(mask, dtype=bool)


def held_rows(inv: Inventory) -> HeldRows:
    """Hourly rows of held holdings (see `HeldRows`)."""
    import numpy as np
    import pandas as pd

    h, hr = inv.holdings, inv.hourly
    ids = hr[C.HOLDING].to_numpy()
    mask = _held_mask(h)
    small = np.int32 if len(hr) < 2**31 else np.intp
    if len(h) and np.array_equal(h[C.HOLDING].to_numpy(), np.arange(len(h))):
        rows = np.flatnonzero(mask[ids]).astype(small)
        pos = ids[rows].astype(small)
    else:
        # A hand-built inventory: the same rows, in the same order, as `hourly_with`'s merge.
        left = pd.DataFrame({C.HOLDING: ids, "_row": np.arange(len(ids))})
        right = pd.DataFrame({C.HOLDING: h[C.HOLDING].to_numpy(), "_pos": np.arange(len(h))})
        joined = left.merge(right[mask], on=C.HOLDING, how="inner")
        rows = joined["_row"].to_numpy(dtype=small)
        pos = joined["_pos"].to_numpy(dtype=small)
    from gpuaudit.inventory.arrays import grid_range, slices

    ts_all = hr[C.TS].to_numpy(dtype="float64")
    start, step = float(inv.window_start), float(inv.step_s)
    parts = slices(len(rows))
    # Bucket ends on the window's grid (always, for a built inventory): the bucket is integer
    # arithmetic, a slice of rows at a time, no sort of millions of times needed.
    span = grid_range(len(rows), lambda sl: ts_all[rows[sl]], start, step)
    if span is not None:
        lo, hi = int(span[0]), int(span[1])
        bucket = np.empty(len(rows), dtype=small)
        for sl in parts:
            k = np.rint((ts_all[rows[sl]] - start) / step)
            k -= lo
            bucket[sl] = k
        bucket_ts = start + np.arange(lo, hi + 1, dtype="float64") * step
    else:
        codes, uniques = pd.factorize(ts_all[rows], sort=True)
        bucket = codes.astype(small)
        bucket_ts = np.asarray(uniques, dtype="float64")
    return HeldRows(rows, pos, bucket, bucket_ts)


@dataclass(frozen=True)
class WindowHours:
    """Each held row's hour of the window (see `window_hours`)."""

    k: npt.NDArray[np.intp]
    """Each held row's hour: 0 for the bucket that ends one step after the window's start."""
    inside: npt.NDArray[np.bool_]
    """Whether the row's bucket is known and lies in the window."""
    hours: int
    """The window's hours (buckets)."""


def bucket_hours(inv: Inventory, rows: HeldRows) -> tuple[npt.NDArray[np.intp], int]:
    """Each bucket's hour of the window (0 for the bucket that ends one step after the window's
    start; an hour outside 0 .. hours-1 lies outside it), and the window's hours."""
    import numpy as np

    start, step = float(inv.window_start), float(inv.step_s)
    nb = max(0, int(round((inv.window_end - start) / step))) if step > 0 else 0
    if not len(rows.bucket_ts) or nb == 0:
        return np.zeros(len(rows.bucket_ts), dtype=np.intp), nb
    return (np.rint((rows.bucket_ts - start) / step) - 1).astype(np.intp), nb


def window_hours(inv: Inventory, rows: HeldRows) -> WindowHours:
    """Each held row's hour of the window, from its bucket's end time: worked out once per
    bucket (there are a window's hours of them, not millions), then looked up per row."""
    import numpy as np

    per_bucket, nb = bucket_hours(inv, rows)
    if len(rows.rows) == 0 or len(rows.bucket_ts) == 0:
        return WindowHours(np.zeros(0, dtype=np.intp), np.zeros(0, dtype=bool), nb)
    k = per_bucket[np.clip(rows.bucket, 0, None)]
    return WindowHours(k, (rows.bucket >= 0) & (k >= 0) & (k < nb), nb)


@dataclass(frozen=True)
class Holders:
    """The holder pods of held holdings, numbered in the (namespace, pod) order of a sorted
    groupby."""

    of_holding: npt.NDArray[np.intp]
    """Each holding row's pod number; -1 for a holding no pod held."""
    namespace: pd.Index
    """Namespace of each pod number."""
    pod: pd.Index
    """Pod name of each pod number."""


def holders(inv: Inventory) -> Holders:
    """Holder pods (see `Holders`): grouping by pod becomes grouping by a small integer, and
    strings are sorted once per holding, not once per row."""
    import numpy as np
    import pandas as pd

    h = inv.holdings
    at = np.flatnonzero(_held_mask(h))
    ns_codes, ns_names = pd.factorize(h[C.NAMESPACE].take(at), sort=True)
    pod_codes, pod_names = pd.factorize(h[C.POD].take(at), sort=True)
    # A missing namespace or pod leaves the holding out, as groupby does.
    ok = (ns_codes >= 0) & (pod_codes >= 0)
    width = max(len(pod_names), 1)
    pair = ns_codes[ok].astype(np.int64) * width + pod_codes[ok]
    pairs, number = np.unique(pair, return_inverse=True)
    of_holding = np.full(len(h), -1, dtype=np.intp)
    of_holding[at[ok]] = number.reshape(-1)
    return Holders(
        of_holding,
        pd.Index(ns_names.take(pairs // width)),
        pd.Index(pod_names.take(pairs % width)),
    )


def group_sums(
    codes: npt.NDArray[np.intp], n: int, values: list[npt.NDArray[np.float64]]
) -> list[npt.NDArray[np.float64]]:
    """Per-group sums of each of `values` over groups `codes` (0 .. n-1; -1 leaves a row out):
    a pandas groupby sum (compensated, in row order, NaN skipped), so that the figures are
    those a groupby on the original string keys gives, to the last bit."""
    import pandas as pd

    if not values:
        return []
    key = pd.Categorical.from_codes(codes, categories=pd.RangeIndex(n))
    # Each column its own block, not copied into one (row-long columns: a copy as large again).
    frame = pd.DataFrame({str(i): v for i, v in enumerate(values)}, copy=False)
    sums = frame.groupby(key, observed=False).sum()
    return [sums[str(i)].to_numpy(dtype="float64") for i in range(len(values))]


TOLERANCE = 1e-9
"""How far under a threshold, relative to it (absolutely, for a threshold under 1), a figure
summed in floating point may lie and still count as reaching it. Sums of the same numbers in
different orders differ in their last bits, some 1e-16 of the sum: far less than this, which
is itself far less than any difference a threshold is set to tell apart."""


def edge(threshold: float) -> float:
    """Where a figure made from floating-point sums starts to reach `threshold`: a little under
    it (`TOLERANCE`), so that a mean that is the threshold in exact arithmetic (8 GPUs at
    0.6762 against 0.6762) reaches it whatever order its sum was taken in. A figure reaches the
    threshold when `>= edge(threshold)` and lies under it when `< edge(threshold)`."""
    return threshold - TOLERANCE * max(abs(threshold), 1.0)


def sorted_sums(
    values: npt.NDArray[np.float64], starts: npt.NDArray[np.intp]
) -> npt.NDArray[np.float64]:
    """Per-group sums of `values` sorted by group, each group starting at `starts` (NaN
    skipped, as a pandas groupby sum skips it): numpy's sum of each group (`np.add.reduceat`).

    Sums in another order (a groupby on unsorted keys, a Python `sum`) may differ in the last
    bit (8 GPUs at 0.6762: 5.409599999999999 here, 5.4096 correctly rounded): a threshold is
    compared with a figure made from these sums at its `edge`."""
    import numpy as np

    if len(starts) == 0:
        return np.zeros(0, dtype="float64")
    x = np.asarray(values, dtype="float64")
    missing = np.isnan(x)
    if missing.any():
        x = np.where(missing, 0.0, x)
    out: npt.NDArray[np.float64] = np.add.reduceat(x, starts)
    return out


def series_sum(values: npt.NDArray[np.float64]) -> float:
    """The sum `pd.Series(values).sum()` gives (NaN skipped, numpy's pairwise order)."""
    import numpy as np

    x = np.ascontiguousarray(values, dtype="float64")
    missing = np.isnan(x)
    if missing.any():
        x = np.where(missing, 0.0, x)
    return float(x.sum())


@dataclass(frozen=True)
class PodHours:
    """`pod_hourly` as arrays: one entry per (holder pod, bucket), sorted by pod then bucket."""

    pods: Holders
    pod: Index
    """Pod number (see `Holders`; 4-byte integers where they fit, as `HeldRows`)."""
    bucket: Index
    """Bucket index (see `HeldRows`)."""
    gpus: npt.NDArray[np.float64]
    """GPUs (whole-GPU equivalents) the pod held in the bucket."""
    act: npt.NDArray[np.float64]
    bucket_ts: npt.NDArray[np.float64]
    """Bucket end times by bucket index."""
    gpu_h: npt.NDArray[np.float64]
    """GPU-hours the pod held in the bucket: its GPUs' samples x the scrape interval x their
    fractions (the bucket is the grid, this the held time in it)."""

    def held_h(self, at: slice = slice(None)) -> npt.NDArray[np.float64]:
        """Hours the pod held its GPUs in the buckets of the entries `at` (`gpu_h / gpus`:
        the GPU-weighted mean of its GPUs' held hours; 0 where it held none): made on each
        call, not kept (it is as long as the pod hours)."""
        import numpy as np

        gpus, gpu_h = self.gpus[at], self.gpu_h[at]
        with np.errstate(divide="ignore", invalid="ignore"):
            out: npt.NDArray[np.float64] = np.where(gpus > 0, gpu_h / gpus, 0.0)
        return out

    @property
    def ts(self) -> npt.NDArray[np.float64]:
        """Each entry's bucket end: made on each call (`bucket_ts[bucket]`), not kept."""
        out: npt.NDArray[np.float64] = self.bucket_ts[self.bucket]
        return out

    def spans(self) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        """(start, end) entry positions of each pod present, in pod order."""
        import numpy as np

        n = len(self.pod)
        if n == 0:
            empty = np.zeros(0, dtype=np.intp)
            return empty, empty
        starts = np.flatnonzero(np.r_[True, self.pod[1:] != self.pod[:-1]]).astype(np.intp)
        ends = np.r_[starts[1:], n].astype(np.intp)
        return starts, ends


def pod_hours(inv: Inventory, rows: HeldRows, pods: Holders) -> PodHours:
    """Per holder pod and bucket, the GPUs held and their mean activity, as arrays (see
    `PodHours`), from the inventory's `held_rows` and `holders`."""
    import numpy as np

    from gpuaudit.inventory.arrays import block_starts

    holding, bucket, at = rows.holding, rows.bucket, rows.rows
    nb = len(rows.bucket_ts)
    # (pod, bucket) keys in 4 bytes where every one fits (there are as many as held rows).
    key_t = np.int32 if (len(pods.namespace) + 1) * max(nb, 1) < 2**31 else np.int64
    pod = pods.of_holding[holding].astype(key_t)
    keep = (pod >= 0) & (bucket >= 0)
    if not keep.all():
        holding, bucket, at, pod = holding[keep], bucket[keep], at[keep], pod[keep]
    key = pod
    key *= nb
    key += bucket
    del pod
    # A stable sort keeps each (pod, bucket)'s rows in table order, the order a groupby sums
    # them in; keys come in ascending runs (one per holding), which makes the sort cheap.
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    del key
    starts = block_starts(sorted_key)
    pairs = sorted_key[starts]
    del sorted_key
    # Each array row-long: made, summed and let go one at a time.
    frac = inv.holdings[C.FRACTION].to_numpy(dtype="float64")[holding[order]]
    at = at[order]
    del order
    gpus = sorted_sums(frac, starts)
    weighted = inv.hourly[C.ACT].to_numpy(dtype="float64")[at]
    weighted *= frac
    wa = sorted_sums(weighted, starts)
    weighted = held_hours(inv)[at]
    del at
    weighted *= frac
    gpu_h = sorted_sums(weighted, starts)
    del weighted, frac
    small = np.int32 if len(pairs) < 2**31 and len(pods.namespace) < 2**31 else np.intp
    bucket = (pairs % max(nb, 1)).astype(small)
    with np.errstate(divide="ignore", invalid="ignore"):  # no GPUs held: NaN, as pandas gives
        act_mean = wa / gpus
    return PodHours(
        pods,
        (pairs // max(nb, 1)).astype(small),
        bucket,
        gpus,
        act_mean,
        rows.bucket_ts,
        gpu_h,
    )


def pod_hourly(ph: PodHours) -> pd.DataFrame:
    """`PodHours` as a table: per holder pod and bucket, GPUs held (whole-GPU equivalents),
    their mean activity and the GPU-hours held (`gpu_hours`)."""
    import pandas as pd

    out: pd.DataFrame = pd.DataFrame(
        {
            C.NAMESPACE: ph.pods.namespace.take(ph.pod).array,
            C.POD: ph.pods.pod.take(ph.pod).array,
            C.TS: ph.ts,
            "gpus": ph.gpus,
            C.ACT: ph.act,
            C.GPU_HOURS: ph.gpu_h,
        }
    )
    return out


def model_price(model: str, prices: Mapping[str, float]) -> float:
    return price_for(model, prices)


def whole_gpu_hourly(inv: Inventory) -> pd.DataFrame:
    """Hourly rows of whole GPUs (MIG instances left out) with the hours held, node, slot, GPU
    index, holder and model: one row per (GPU, holder, bucket) that has data."""
    cols = [C.NODE, C.SLOT, C.GPU_INDEX, C.HELD, C.NAMESPACE, C.POD, C.MODEL]
    joined = hourly_with(inv, cols, whole_only=True)
    held_col = [C.HELD_H] if C.HELD_H in joined.columns else []
    out: pd.DataFrame = joined[[C.HOLDING, C.TS, C.ACT, *held_col, *cols]]
    return out


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


def node_products(holdings: pd.DataFrame, nodes: pd.DataFrame) -> dict[str, str]:
    """Node -> GPU product: the `nvidia.com/gpu.product` label, else the DCGM model name."""
    out: dict[str, str] = {}
    h = holdings
    if not h.empty:
        # A node's first holding with a model names it; a missing value counts as named, as
        # it is truthy in a row-by-row test.
        named = h.loc[(h[C.NODE] != "") & (h[C.MODEL] != ""), [C.NODE, C.MODEL]]
        first = named.drop_duplicates(C.NODE)
        for node, model in zip(first[C.NODE].tolist(), first[C.MODEL].tolist(), strict=True):
            out.setdefault(str(node), str(model))
    if not nodes.empty:
        for node, product in zip(nodes[C.NODE], nodes[C.PRODUCT], strict=True):
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
    cand[C.WAITED] = (inv.window_end - cand[C.PENDING_SINCE].astype("float64")) / 3600.0
    out: pd.DataFrame = cand
    return out


def gpu_nodes(inv: Inventory) -> pd.DataFrame:
    """Schedulable GPU nodes with whole-GPU allocatable, requested and free counts, as the
    scheduler sees them at the window's end (requests of pods bound to the node that have not
    finished), in GPUs: on a node that advertises each GPU several times (time-slicing
    replicas, HAMi's split count: `GPU_REPLICAS`), over that."""
    import pandas as pd

    n = inv.nodes
    cols = [C.NODE, C.PRODUCT, C.POOL, C.ALLOCATABLE_GPU, C.REQUESTED, C.FREE]
    if n.empty:
        empty: pd.DataFrame = pd.DataFrame(columns=cols)
        return empty
    n = n[(n[C.ALLOCATABLE_GPU] > 0) & ~n[C.CORDONED].fillna(False).astype(bool)]
    p = inv.pods
    bound = p[(p[C.NODE] != "") & ~p[C.PHASE].isin(["Succeeded", "Failed"])]
    req = bound.groupby(C.NODE)[C.GPU_REQUEST].sum()
    out = n[[C.NODE, C.PRODUCT, C.POOL, C.ALLOCATABLE_GPU]].copy()
    split = n[C.GPU_REPLICAS].fillna(1.0).astype("float64").clip(lower=1.0)
    out[C.ALLOCATABLE_GPU] = out[C.ALLOCATABLE_GPU].astype("float64") / split
    out[C.REQUESTED] = out[C.NODE].map(req).fillna(0.0).astype("float64") / split
    out[C.FREE] = (out[C.ALLOCATABLE_GPU] - out[C.REQUESTED]).clip(lower=0.0)
    result: pd.DataFrame = out.reset_index(drop=True)
    return result


def physical_slot(h: pd.DataFrame) -> pd.Series:
    """The physical GPU of each holding without a UUID: its slot, less the MIG instance that
    ends a MIG slot (`<node>:gpu<i>/<instance>`). The instance is cut from the end, since a
    scan of every cluster puts its cluster in front (`prod/<node>:gpu<i>`)."""
    slot = h[C.SLOT].astype(str)
    out: pd.Series = slot.where(h[C.MIG_ID] == "", slot.str.rpartition("/")[0])
    return out

"""Grouping of the hourly table by holding attributes, done on integer codes.

The hourly table has millions of rows and only a holding id; node, pod and GPU are attributes
of the holding. Grouping the hourly rows by those strings means hashing every string of every
row. Here the attributes are looked up on the holdings table (thousands of rows) and the hourly
rows carry only the holding's row position, so grouping is integer work (`np.bincount`,
`np.fmin.at`) and strings are touched once per holding, not once per row.

Hand-built inventories may number holdings otherwise; when the hourly rows cannot be mapped to
holding rows, the hourly frame itself serves as the table of attributes (one "holding" per row),
which is slower but gives the same answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpuaudit.inventory import columns as C
from gpuaudit.inventory import derived

if TYPE_CHECKING:
    import pandas as pd

    from gpuaudit.inventory.tables import Inventory


def holding_positions(inv: Inventory, hourly: pd.DataFrame) -> np.ndarray | None:
    """The row position in `inv.holdings` of each row of `hourly` (the hourly table or a view of
    it with its holding column), or None when some row's holding cannot be placed (holding ids
    repeated or missing)."""
    import pandas as pd

    ids = hourly[C.HOLDING].to_numpy()
    hid = inv.holdings[C.HOLDING].to_numpy()
    n = len(hid)
    if n and np.array_equal(hid, np.arange(n)):  # the inventory builder numbers them so
        if len(ids) == 0 or (ids.min() >= 0 and ids.max() < n):
            return ids.astype(np.int64, copy=False)
        return None
    index = pd.Index(hid)
    if not index.is_unique:
        return None
    rows = index.get_indexer(ids)
    return None if (rows < 0).any() else rows


def is_na(v: object) -> bool:
    """A missing value as pandas stores it in a string column (NaN or None)."""
    return v is None or v != v


@dataclass(frozen=True)
class PodOnNode:
    """The whole GPUs one pod held on one node, from the held rows of `whole_gpu_hourly`."""

    namespace: str
    pod: str
    node: str
    first: float
    """The first bucket end at which it held any of them."""
    buckets: int
    """(GPU, bucket) rows held."""
    gpu_hours: float
    """GPU-hours held in those rows (samples x the scrape interval; whole GPUs)."""
    model: str
    """The model of the first held row (hourly order)."""
    holdings: tuple[int, ...]
    """Positions in the key table of the holdings that held rows (ascending)."""


@dataclass(frozen=True)
class WholeRows:
    """The hourly rows of whole GPUs (MIG instances left out), in hourly order: the rows of
    `derived.whole_gpu_hourly`, without its string columns."""

    pos: np.ndarray
    """Each row's position in `keys`."""
    ts: np.ndarray
    """Each row's bucket end."""
    held: np.ndarray
    """Each row's hours held (`HELD_H`)."""
    keys: pd.DataFrame
    """The holding columns: the holdings table, or `whole_gpu_hourly` itself when hourly rows
    cannot be placed in it."""


def whole_rows(inv: Inventory) -> WholeRows:
    """See `WholeRows`."""
    positions = holding_positions(inv, inv.hourly)
    if positions is not None:
        h = inv.holdings
        whole = (h[C.MIG_ID] == "").to_numpy(dtype=bool)
        sel = np.flatnonzero(whole[positions])
        ts = inv.hourly[C.TS].to_numpy(dtype="float64")[sel]
        return WholeRows(positions[sel], ts, derived.held_hours(inv)[sel], h)
    hourly = derived.whole_gpu_hourly(inv)
    pos = np.arange(len(hourly), dtype=np.int64)
    if C.HELD_H in hourly.columns:
        held = hourly[C.HELD_H].to_numpy(dtype="float64")
    else:
        held = np.full(len(hourly), inv.step_s / 3600.0)
    ts = hourly[C.TS].to_numpy(dtype="float64")
    return WholeRows(pos, ts, held, hourly.reset_index(drop=True))


def pods_on_nodes(whole: WholeRows) -> tuple[tuple[PodOnNode, ...], pd.DataFrame]:
    """Per (namespace, pod, node) with held rows in `derived.whole_gpu_hourly`, sorted by
    those three, with the key table its `holdings` positions refer to.

    The same groups, firsts, counts and models as a pandas groupby of the held rows on
    (namespace, pod, node) with `min`, `size` and `first`; groups with a missing key are left
    out as pandas leaves them out."""
    rows, keys = whole.pos, whole.keys
    k = len(keys)
    held = keys[C.HELD].astype(bool).to_numpy()[rows]
    hrows = rows[held]
    counts = np.bincount(hrows, minlength=k)
    hours = np.bincount(hrows, weights=whole.held[held], minlength=k)
    first = np.full(k, np.inf)
    np.fmin.at(first, hrows, whole.ts[held])
    order = np.full(k, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(order, hrows, np.flatnonzero(held))
    used = np.flatnonzero(counts)
    cols = [keys[c].to_numpy(dtype=object)[used].tolist() for c in (C.NAMESPACE, C.POD, C.NODE)]
    model = keys[C.MODEL].to_numpy(dtype=object)[used].tolist()
    used_l, first_l = used.tolist(), first[used].tolist()
    counts_l, order_l = counts[used].tolist(), order[used].tolist()
    hours_l = hours[used].tolist()
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, key in enumerate(zip(*cols, strict=True)):
        if not any(is_na(v) for v in key):
            groups.setdefault(key, []).append(i)
    out: list[PodOnNode] = []
    for key in sorted(groups):
        members = groups[key]
        named = [i for i in members if not is_na(model[i])]
        m = model[min(named, key=lambda i: order_l[i])] if named else float("nan")
        out.append(
            PodOnNode(
                namespace=key[0],
                pod=key[1],
                node=key[2],
                first=min(first_l[i] for i in members),
                buckets=sum(counts_l[i] for i in members),
                gpu_hours=sum(hours_l[i] for i in members),
                model=str(m),
                holdings=tuple(used_l[i] for i in members),
            )
        )
    return tuple(out), keys


def _at_times(rows: np.ndarray, ts: np.ndarray, times: np.ndarray | list[float]) -> np.ndarray:
    """Those of `rows` (ascending positions) whose time in `ts` is one of `times`: the test
    on the rows the cheap masks kept, not on every row."""
    return rows[np.isin(ts[rows], np.asarray(times, dtype="float64"))]


def free_counts(whole: WholeRows, buckets: set[float]) -> dict[float, dict[str, int]]:
    """Bucket end -> node -> how many whole GPUs no pod held in that bucket, for the bucket
    ends in `buckets`: the sizes of the sets `derived.free_gpus` gives (distinct GPU indices),
    counted on integer codes instead of built as sets."""
    import pandas as pd

    rows, keys, ts = whole.pos, whole.keys, whole.ts
    ends = np.array(sorted(buckets), dtype="float64")
    free = ~keys[C.HELD].astype(bool).to_numpy()
    sel = _at_times(np.flatnonzero(free[rows]), ts, ends)
    node_codes, node_names = pd.factorize(keys[C.NODE])
    index_codes, index_names = pd.factorize(keys[C.GPU_INDEX], use_na_sentinel=False)
    r = rows[sel]
    node = node_codes[r]
    ok = node >= 0  # a missing node: a groupby leaves the row out
    n_idx = max(len(index_names), 1)
    cell = node[ok] * len(ends) + np.searchsorted(ends, ts[sel][ok])
    distinct = np.unique(cell * n_idx + index_codes[r][ok]) // n_idx
    cells, counts = np.unique(distinct, return_counts=True)
    out: dict[float, dict[str, int]] = {}
    for c, n in zip(cells.tolist(), counts.tolist(), strict=True):
        out.setdefault(float(ends[c % len(ends)]), {})[str(node_names[c // len(ends)])] = n
    return out


def free_sets(
    whole: WholeRows, buckets: set[float], nodes: set[str]
) -> dict[tuple[str, float], set[str]]:
    """`derived.free_gpus` of `derived.whole_gpu_hourly` for these buckets and nodes, reading
    strings only for the rows it keeps."""
    import pandas as pd

    rows, keys, ts = whole.pos, whole.keys, whole.ts
    free = ~keys[C.HELD].astype(bool).to_numpy()
    wanted = keys[C.NODE].isin(list(nodes)).to_numpy(dtype=bool)
    sel = _at_times(np.flatnonzero(free[rows] & wanted[rows]), ts, list(buckets))
    picked = keys[[C.NODE, C.GPU_INDEX, C.HELD]].take(rows[sel]).reset_index(drop=True)
    frame = pd.concat([picked, pd.DataFrame({C.TS: ts[sel]})], axis=1)
    return derived.free_gpus(frame, buckets, nodes)


GRID_BUCKETS = 10_000_000
"""The most buckets a span of times on the window's grid is placed in by arithmetic; a longer
span goes through a sort."""


def bucket_index(ts: np.ndarray, start: float, step: float) -> tuple[np.ndarray, np.ndarray]:
    """(index, ends): each time's position in `ends`, ascending bucket ends that include every
    time of `ts`. Times on the window's grid (start + k x step, as the inventory builder makes
    them) are placed by arithmetic, a slice at a time (no temporary as long as `ts`); any other
    time sends all of them through a sort, so `ends` holds the very values of `ts` either
    way."""
    from gpuaudit.inventory.arrays import grid_range, slices

    span = grid_range(len(ts), ts.__getitem__, start, step)
    if span is not None and span[1] - span[0] < GRID_BUCKETS:
        lo, hi = span
        index = np.empty(len(ts), dtype=np.int64)
        for sl in slices(len(ts)):
            k = np.rint((ts[sl] - start) / step)
            k -= lo
            index[sl] = k
        return index, start + np.arange(lo, hi + 1.0) * step
    ends, inverse = np.unique(ts, return_inverse=True)
    return inverse.astype(np.int64).reshape(-1), ends

"""Array helpers of the inventory builder: points of many series kept as flat arrays, grouped in
contiguous blocks per key, joined on (holding, time) without a DataFrame merge."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Arr = np.ndarray[Any, np.dtype[Any]]


def distinct(a: Arr) -> Arr:
    """The sorted distinct values of `a` (a sort, where `np.unique` would hash: several times
    faster on millions of values)."""
    a = np.sort(a)
    return a[block_starts(a)]


class KeyTable:
    """Values by key: distinct non-negative integer `keys` below `space` with their `vals`, to
    look up many times (`get`). A table indexed by the key where `space` is small beside the
    keys, else the keys sorted for a search."""

    def __init__(self, keys: Arr, vals: Arr, space: int) -> None:
        self.space = space
        self.dense = 0 < space <= 4 * len(keys) + 1024
        if self.dense:
            self.table = np.full(space, np.nan)
            self.table[keys] = vals
        else:
            order = np.argsort(keys, kind="stable")
            self.keys, self.vals = keys[order], vals[order]

    @classmethod
    def of_pairs(cls, major: Arr, minor: Arr, width: int, vals: Arr, space: int) -> KeyTable:
        """The table of the keys `major * width + minor`: where it is dense, filled a slice of
        pairs at a time (no key array as long as the pairs is made)."""
        if not 0 < space <= 4 * len(major) + 1024:
            return cls(major.astype(np.int64) * width + minor, vals, space)
        out = cls.__new__(cls)
        out.space, out.dense, out.table = space, True, np.full(space, np.nan)
        for sl in slices(len(major)):
            key = major[sl].astype(np.int64)
            key *= width
            key += minor[sl]
            out.table[key] = vals[sl]
        return out

    def get(self, want: Arr) -> Arr:
        """The value of each of `want`, NaN where not found (a negative one never is)."""
        out = np.full(len(want), np.nan)
        if not len(want):
            return out
        ok = want >= 0
        if self.dense:
            ok &= want < self.space
            out[ok] = self.table[want[ok]]
            return out
        if not len(self.keys):
            return out
        at = np.clip(np.searchsorted(self.keys, want), 0, len(self.keys) - 1)
        hit = ok & (self.keys[at] == want)
        out[hit] = self.vals[at[hit]]
        return out


def nan_column(n: int) -> Arr:
    """`n` NaNs as a read-only view of one value: a table column of a series that has no
    points takes no memory (a column as long as the hourly table would)."""
    return np.broadcast_to(np.float64(np.nan), (n,))


def block_starts(k: Arr) -> Arr:
    """Where each run of equal key numbers in `k` starts (the points of a series are held in
    such a block per key, see `Parser.hourly`)."""
    if not len(k):
        return np.zeros(0, dtype=np.intp)
    edge = np.empty(len(k), dtype=bool)
    edge[0] = True
    np.not_equal(k[1:], k[:-1], out=edge[1:])
    return np.flatnonzero(edge)


def regroup(k: Arr, cols: Sequence[Arr], hid_of: Arr) -> tuple[Arr, list[Arr]]:
    """Points held in contiguous blocks per key number `k` (ascending time within each) as
    (holding id, each of `cols` at the same points), sorted by holding id, then time: the
    blocks are reordered, the points within them are not touched. The columns are gathered a
    run of blocks of about `_SLICE` points at a time, so that no index as long as the points is
    made (only the results are)."""
    if not len(k):
        return np.empty(0, dtype=np.int64), [np.empty(0, dtype=c.dtype) for c in cols]
    starts = block_starts(k)
    lengths = np.diff(np.append(starts, len(k)))
    hid = hid_of[k[starts]]
    perm = np.argsort(hid, kind="stable")
    src, lengths, hid = starts[perm], lengths[perm], hid[perm]
    ends = np.cumsum(lengths)
    outs = [np.empty(len(k), dtype=c.dtype) for c in cols]
    b = 0
    while b < len(lengths):
        lo = int(ends[b] - lengths[b])
        e = max(b + 1, int(np.searchsorted(ends, lo + _SLICE, side="right")))
        hi = int(ends[e - 1])
        idx = np.repeat(src[b:e] - (ends[b:e] - lengths[b:e]), lengths[b:e])
        idx += np.arange(lo, hi)
        for c, o in zip(cols, outs, strict=True):
            o[lo:hi] = c[idx]
        b = e
    return np.repeat(hid, lengths), outs


def first_times(h: Arr, t: Arr, n: int) -> Arr:
    """Per holding id, the first time of (h, t) sorted by holding, then time; NaN if none."""
    out = np.full(n, np.nan)
    if len(h):
        starts = np.concatenate([[True], h[1:] != h[:-1]])
        out[h[starts]] = t[starts]
    return out


def last_times(h: Arr, t: Arr, n: int) -> Arr:
    """Per holding id, the last time of (h, t) sorted by holding, then time; NaN if none."""
    out = np.full(n, np.nan)
    if len(h):
        ends = np.concatenate([h[1:] != h[:-1], [True]])
        out[h[ends]] = t[ends]
    return out


_SLICE = 1 << 20
"""Elements per slice where a long array is worked through in slices: the temporaries stay a
few MB (reused by the allocator) instead of one fresh array as long as the input each."""


def slices(n: int) -> list[slice]:
    """`range(n)` in slices of `_SLICE`."""
    return [slice(lo, min(lo + _SLICE, n)) for lo in range(0, n, _SLICE)]


def grid_range(
    n: int, times: Callable[[slice], Arr], start: float, step: float
) -> tuple[float, float] | None:
    """The lowest and highest bucket number `k` of the times `times(sl)` gives for each slice
    of `range(n)`, where every one of them is finite and equals `start + k * step` exactly (the
    window's grid); None where one does not, where there are none, or where `step` is not
    positive. Read a slice at a time: no array as long as all the times is made."""
    lo = hi = None
    if step <= 0:
        return None
    for sl in slices(n):
        t = times(sl)
        if not len(t):
            continue
        k = np.rint((t - start) / step)
        if not (np.isfinite(t).all() and np.array_equal(start + k * step, t)):
            return None
        a, b = float(k.min()), float(k.max())
        lo, hi = (a, b) if lo is None or hi is None else (min(lo, a), max(hi, b))
    if lo is None or hi is None:
        return None
    return lo, hi


def _grid_keys(k: Arr, t: Arr, start: float, step: int, low: int, width: int) -> Arr:
    """`k * width + bucket - low` of points known to lie on the grid (see `grid_range`)."""
    b = np.rint((t - start) / step).astype(np.int64)
    b -= low
    key = k.astype(np.int64) * width
    key += b
    return key


def join_at(
    hk: Arr,
    ht: Arr,
    vals: Arr | None,
    want_k: Arr,
    want_t: Arr,
    start: float,
    step: int,
) -> tuple[Arr, Arr]:
    """`vals` at each (want_k, want_t) found among (hk, ht), NaN elsewhere, and where found: a
    left join on (holding, time). The (holding, time) pairs of each side are unique; neither
    side need be sorted. `vals` None: only where found (the values come back all NaN).

    Times become integers for the join: bucket numbers when they lie on the step grid (the
    usual case), else ranks among all the times seen. On the grid, with keys dense enough, a
    table indexed by (holding, bucket) is filled and read a slice at a time, so that no
    temporary as long as either side is made."""
    out = np.full(len(want_k), np.nan)
    found = np.zeros(len(want_k), dtype=bool)
    if not len(hk) or not len(want_k):
        return out, found
    rh = grid_range(len(ht), ht.__getitem__, start, step)
    rw = grid_range(len(want_t), want_t.__getitem__, start, step)
    if rh is not None and rw is not None:
        low = int(min(rh[0], rw[0]))
        width = int(max(rh[1], rw[1])) - low + 1
        space = (int(max(hk.max(), want_k.max())) + 1) * width
        if space <= 4 * (len(hk) + len(want_k)):
            there = np.zeros(space, dtype=bool)
            table = np.full(space, np.nan) if vals is not None else None
            for sl in slices(len(hk)):
                key = _grid_keys(hk[sl], ht[sl], start, step, low, width)
                there[key] = True
                if table is not None and vals is not None:
                    table[key] = vals[sl]
            for sl in slices(len(want_k)):
                key = _grid_keys(want_k[sl], want_t[sl], start, step, low, width)
                found[sl] = there[key]
                if table is not None:
                    out[sl] = table[key]
            return out, found
        th = _grid_keys(np.zeros(len(hk), dtype=np.int64), ht, start, step, low, 1)
        tw = _grid_keys(np.zeros(len(want_k), dtype=np.int64), want_t, start, step, low, 1)
    else:
        times = distinct(np.concatenate([ht, want_t]))
        th, tw = np.searchsorted(times, ht), np.searchsorted(times, want_t)
        width = len(times)
    have = hk * width
    have += th
    del th
    want = want_k * width
    want += tw
    del tw
    order = np.argsort(have, kind="stable")
    have = have[order]
    pos = np.searchsorted(have, want)
    pos[pos >= len(have)] = 0
    found = have[pos] == want
    if vals is not None:
        out[found] = vals[order[pos[found]]]
    return out, found

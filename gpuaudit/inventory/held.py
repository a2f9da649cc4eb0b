"""Held time from the samples actually present: the scrape interval, detected from the hourly
sample counts, and each bucket's held hours.

A bucket of `--step` (default 1 h) is the grid of charts and daily patterns, never a unit of
held time. A holding held its GPU in a bucket for as long as its samples there cover: the
bucket's sample count (`count_over_time(M[step])`, or the recording rules' `:count5m` summed)
times the scrape interval. A 20-minute job scraped every 60 s has 20 samples, which is 1/3 of a
GPU-hour, not a whole bucket.

The scrape interval is not in the data as such; it is detected from the counts. In a bucket
that a series covers from end to end (it has samples in the buckets before and after it, or the
bucket is at the window's edge and the series goes on inside the window), the count is
`step / interval`, rounded one way or the other when the interval does not divide the step
(57 s: 63 or 64 samples an hour). Missed scrapes lower some counts, a few series may be scraped
at another interval. So per scrape target (`instance`) and over the whole fleet:

- the counts are centred on the value whose window of three (it and the counts one below and
  one above) holds most buckets; of those three, the ones at least a tenth as common as the
  most common are kept (the two values of a step the interval does not divide, or jitter at a
  bucket edge), the rarer left out (a missed scrape);
- the interval is `step x buckets / samples` over those buckets (the mean count, so 63 and 64
  give 57 s exactly).

The fleet's interval applies to every target whose own estimate is within 10 % of it (noise);
a target whose own estimate (from at least 3 buckets at its most common count) differs more
is scraped at another interval and keeps its own. Without any bucket a series covers end to
end, no interval is known: held time is then counted in whole buckets, and said so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from gpuaudit.inventory.arrays import Arr

NEIGHBOUR_SHARE = 0.1
"""A count one away from the centre is kept when it is at least this common relative to the
most common count."""
OWN_INTERVAL = 0.1
"""A target keeps its own interval when it differs from the fleet's by more than this share."""
MIN_MODE_BUCKETS = 3
"""Buckets at its most common count a target's own estimate needs."""


def covered(k: Arr, t: Arr, start: float, end: float, step: float) -> Arr:
    """Rows (sorted by key, then time) whose bucket the series covers from end to end, as far
    as the data can tell: it has samples in the bucket before and in the bucket after, or the
    bucket is at the window's edge and the series has samples in the bucket next to it inside
    the window. Worked out a slice of rows at a time, each with its neighbours."""
    from gpuaudit.inventory.arrays import slices

    n = len(k)
    out = np.zeros(n, dtype=bool)
    if n == 0 or round((end - start) / step) == 1:  # a one-bucket window: nothing tells
        return out
    for sl in slices(n):
        lo, hi = sl.start, sl.stop
        a, z = max(lo - 1, 0), min(hi + 1, n)
        part = _covered(k[a:z], t[a:z], start, end, step)
        out[lo:hi] = part[lo - a : hi - a]
    return out


def _covered(k: Arr, t: Arr, start: float, end: float, step: float) -> Arr:
    """`covered` of rows `k`, `t` taken as the whole table: its first row has no row before
    it, its last none after it."""
    n = len(k)
    # Bucket numbers (1 for the first bucket of the window), computed in place.
    b = t - start
    b /= step
    np.rint(b, out=b)
    adjacent = k[1:] == k[:-1]
    adjacent &= np.diff(b) == 1
    out = np.zeros(n, dtype=bool)
    out[1:] = adjacent  # samples in the bucket before
    out[0] = False
    out |= b == 1
    after = np.zeros(n, dtype=bool)
    after[:-1] = adjacent
    after |= b == round((end - start) / step)
    out &= after
    return out


HISTOGRAM_CELLS = 1 << 24
"""Largest (group x count) table the estimate is counted in; beyond it, the counts are sorted."""


def _from_histogram(hist: Arr, step: float) -> tuple[Arr, Arr]:
    """`_estimates` of groups whose counts are tallied in `hist` (group x count; the first and
    the last column empty)."""
    rows, width = hist.shape
    below = np.zeros_like(hist)
    above = np.zeros_like(hist)
    below[:, 1:] = hist[:, :-1]
    above[:, :-1] = hist[:, 1:]
    # The centre: a count seen, with the most buckets in its window of three, then the most
    # at it, then the larger count (missed scrapes only lower counts).
    window = np.where(hist > 0, below + hist + above, -1)
    best = window == window.max(axis=1, keepdims=True)
    at = np.where(best, hist, -1)
    best &= at == at.max(axis=1, keepdims=True)
    centre = width - 1 - np.argmax(best[:, ::-1], axis=1)
    r = np.arange(rows)
    cols = np.clip(centre[:, None] + np.array([-1, 0, 1]), 0, width - 1)
    f = hist[r[:, None], cols]
    top = f.max(axis=1)
    keep = (f > 0) & (f >= NEIGHBOUR_SHARE * top[:, None])
    buckets = np.where(keep, f, 0).sum(axis=1).astype(np.float64)
    samples = np.where(keep, f * cols, 0).sum(axis=1).astype(np.float64)
    interval = np.full(rows, np.nan)
    have = samples > 0
    interval[have] = step * buckets[have] / samples[have]
    support: Arr = top.astype(np.int64)
    return interval, support


def _estimates_sorted(g: Arr, c: Arr, groups: int, step: float) -> tuple[Arr, Arr]:
    """`_estimates` over sorted (group, count, frequency) triples, for counts too many or too
    large to tally in a table (a one-second scrape in one-day buckets)."""
    interval = np.full(groups, np.nan)
    support = np.zeros(groups, dtype=np.int64)
    pair = np.lexsort((c, g))
    g, c = g[pair], c[pair]
    at = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (c[1:] != c[:-1])])
    tg, tc = g[at], c[at]
    tf = np.diff(np.r_[at, len(g)])
    # Each count with its neighbours one below and one above: f(v - 1), f(v + 1).
    width = int(tc.max()) + 2
    key = tg * width + tc
    below, above = _lookup(key, tf, key - 1), _lookup(key, tf, key + 1)
    best = np.lexsort((-tc, -tf, -(below + tf + above), tg))
    head = best[np.r_[True, tg[best][1:] != tg[best][:-1]]]
    centre = np.zeros(groups, dtype=np.int64)
    top = np.zeros(groups, dtype=np.int64)
    centre[tg[head]] = tc[head]
    top[tg[head]] = np.maximum(tf[head], np.maximum(below[head], above[head]))
    near = np.abs(tc - centre[tg])
    keep = (near <= 1) & (tf >= NEIGHBOUR_SHARE * top[tg])
    buckets = np.bincount(tg[keep], weights=tf[keep], minlength=groups)
    samples = np.bincount(tg[keep], weights=(tc * tf)[keep], minlength=groups)
    have = samples > 0
    interval[have] = step * buckets[have] / samples[have]
    support[:] = top
    return interval, support


def _lookup(keys: Arr, values: Arr, want: Arr) -> Arr:
    """`values` at each of `want` found among the sorted, unique `keys`; 0 elsewhere."""
    pos = np.searchsorted(keys, want)
    pos[pos >= len(keys)] = 0
    found = keys[pos] == want
    out: Arr = np.where(found, values[pos], 0)
    return out


@dataclass(frozen=True)
class Intervals:
    """The detected scrape intervals."""

    fleet: float | None
    """The fleet's interval in seconds; None when no bucket tells it."""
    of_group: Arr
    """The interval each group's samples stand for (NaN where none is known)."""


def detect_chunks(
    chunks: Callable[[], Iterator[tuple[Arr, Arr]]], groups: int, step: float
) -> Intervals:
    """The fleet's scrape interval and each group's (scrape target's), from the sample counts
    of buckets their series cover end to end (`covered`), grouped by group number (0 ..
    groups-1), given as (group, counts) pieces: `chunks()` yields them, and is called more than
    once. Counted into a histogram a piece at a time, so that no array as long as all the
    pieces is made (unless the histogram would be too large: then they are joined)."""
    width = 0
    for _group, counts in chunks():
        rounded = np.rint(counts)
        ok = np.isfinite(rounded) & (rounded > 0)
        if ok.any():
            width = max(width, int(rounded[ok].max()) + 2)
    if width == 0:
        return Intervals(None, np.full(groups, np.nan))
    if groups * width <= HISTOGRAM_CELLS:
        hist = np.zeros(groups * width, dtype=np.int64)
        for group, counts in chunks():
            rounded = np.rint(counts)
            ok = np.isfinite(rounded) & (rounded > 0)
            cell = group[ok].astype(np.int64)
            cell *= width
            cell += rounded[ok].astype(np.int64)
            hist += np.bincount(cell, minlength=groups * width)
        table = hist.reshape(groups, width)
        fleet_arr, _ = _from_histogram(table.sum(axis=0, keepdims=True), step)
        own, support = _from_histogram(table, step)
    else:
        gs, cs = [], []
        for group, counts in chunks():
            rounded = np.rint(counts)
            ok = np.isfinite(rounded) & (rounded > 0)
            gs.append(group[ok].astype(np.int64))
            cs.append(rounded[ok].astype(np.int64))
        g, c = np.concatenate(gs), np.concatenate(cs)
        fleet_arr, _ = _estimates_sorted(np.zeros(len(c), dtype=np.int64), c, 1, step)
        own, support = _estimates_sorted(g, c, groups, step)
    fleet = float(fleet_arr[0]) if np.isfinite(fleet_arr[0]) else None
    of_group = np.full(groups, np.nan if fleet is None else fleet)
    if fleet is None:
        return Intervals(None, of_group)
    with np.errstate(invalid="ignore"):
        other = (
            np.isfinite(own)
            & (support >= MIN_MODE_BUCKETS)
            & (np.abs(own / fleet - 1.0) > OWN_INTERVAL)
        )
    of_group[other] = own[other]
    return Intervals(fleet, of_group)

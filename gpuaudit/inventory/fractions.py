"""DCGM series of GPUs KAI Scheduler shares (`gpuaudit.inventory.kai`), split among the pods
that share them.

dcgm-exporter names a shared GPU's reservation pod on every series of it, never its fraction
pods. Here each such series (a key of the `Parser`) becomes one holding per fraction pod of
its GPU group plus one for the reservation pod, all of the same series (the activity is the
whole GPU's; KAI time-slices the GPU and DCGM cannot tell the pods apart):

- a fraction pod's holding counts its share of the GPU (`Method.KAI_FRACTION`): its
  `gpu-fraction`, or its `gpu-memory` over the GPU's memory as KAI's scheduler counts it (the
  node label `nvidia.com/gpu.memory`, else DCGM's framebuffer total of the GPU);
- the reservation pod's holding counts what the fractions leave (`Method.KAI_RESERVED`): held
  by KAI for the group, asked for by no workload. It counts in the allocated GPU-hours (and as
  idle where the GPU was), so that the GPU's hours are neither dropped nor counted twice; no
  finding is about the reservation pod.

The shares of a bucket add up to the GPU: a fraction pod holds its share for exactly the time
it ran, from its start (`status.startTime`) to its end (a pod that ended in the window,
Succeeded or Failed at its containers' latest `finishedAt`) or the window's, as HAMi's pods do
(`gpuaudit.inventory.hami`): in a bucket it started or ended inside, for the part of it it ran
(at most the GPU's held time there; `clip`), the rest of its share of that bucket held by the
reservation pod. The reservation pod's part is split at each bucket a fraction pod started or
ended in, so that its share while fewer fraction pods ran is the larger one. A fraction pod
that ended at an unknown time (or was
deleted before the scan, so that it is not in the pods list) holds nothing: its share counts
as the reservation pod's. A pod whose share cannot be told (a `gpu-memory` request on a GPU
of unknown memory, an unreadable annotation) counts 0 and is a warning; fractions that ask
for more than the GPU at one time (which KAI does not place) are scaled to it, each by the
most they add up to while it ran, with a warning.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from gpuaudit.inventory import claimed, kai
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.arrays import Arr, block_starts
from gpuaudit.inventory.attribution import Method
from gpuaudit.inventory.parse import Metric, Parser, Stat, from_hourly

Hourly = tuple[Arr, Arr, Arr, Arr]
Ran = dict[int, tuple[bool, tuple[tuple[float, float, float], ...]]]
"""Key -> whether it is the reservation pod's (else a fraction pod's), and the (share, start,
end) of the fraction pods that ran in its bucket: the keys of buckets fraction pods ran only
part of (`split`, `clip`)."""
EPS = 1e-9


class Series(claimed.Series, Protocol):
    """What this module reads of the builder's series (`gpuaudit.inventory.build._Series`)."""

    @property
    def xid_max(self) -> Mapping[int, float]: ...
    @property
    def xid_codes(self) -> Mapping[int, set[int]]: ...
    @property
    def xid_msgs(self) -> Mapping[int, Mapping[int, str]]: ...
    @property
    def xid_events(self) -> Mapping[int, Mapping[int, float]] | None: ...


@dataclass(frozen=True)
class _Holder:
    """A fraction pod on one reserved GPU: its share, and the buckets it holds it in."""

    member: kai.Member
    share: float
    cut: float
    """The first bucket end that is its (-inf: all of them)."""
    stop: float = math.inf
    """Bucket ends from this on are no longer its (inf: none, it runs)."""
    ran: tuple[float, float] = (-math.inf, math.inf)
    """When it ran (unix seconds): its start (-inf: before the series) to its end (inf: it
    runs)."""
    edges: tuple[float, ...] = ()
    """The ends of the buckets it ran only part of (its first, its last)."""

    def holds(self, since: float) -> bool:
        """Whether it holds the buckets from the end `since` on (to the next cut or stop)."""
        return self.cut <= since < self.stop


def _bounds(s: Series, n: int) -> tuple[Arr, Arr]:
    """Each key's first and last bucket end (NaN where it has none)."""
    first = claimed._first_bucket(s, n)
    last = np.full(n, -np.inf)
    for h in (s.act_h, s.util_h):
        # A key's points are a block in ascending time: its last point is its latest.
        at = block_starts(h[0])
        if len(at):
            ends = np.append(at[1:], len(h[0])) - 1
            np.maximum.at(last, h[0][ends], h[1][ends])
    return first, np.where(np.isfinite(last), last, np.nan)


def _gpu_mib(s: Series, k: int, node: str, fr: kai.Fractions) -> float | None:
    """The GPU's memory (MiB) a `gpu-memory` request is divided by: the node's label as KAI
    reads it, else DCGM's used plus free framebuffer of the GPU."""
    if node in fr.memory:
        return fr.memory[node]
    used, free = s.fb_used.mean, s.fb_free.mean
    if k < len(used.present) and used.present[k] and free.present[k]:
        total = float(used.values[k] + free.values[k])
        return total if total > 0 else None
    return None


def _holders(
    s: Series,
    k: int,
    group: str,
    node: str,
    fr: kai.Fractions,
    notes: list[str],
    span: tuple[float, float, float, float],
) -> list[_Holder]:
    """The fraction pods of `group` on key `k`'s GPU, with their shares, cuts and the buckets
    they ran part of. `span`: the key's first and last bucket ends, and the grid's start and
    step."""
    first, last, origin, step = span
    ms = [m for m in fr.members.get(group, ()) if not node or not m.node or m.node == node]
    gpu_mib = _gpu_mib(s, k, node, fr) if any(m.request.share is None for m in ms) else None
    out: list[_Holder] = []
    for m in ms:
        share = m.request.of(gpu_mib)
        if share is None:
            notes.append(
                f"KAI fraction pod {m.namespace[:120]}/{m.pod[:120]} on GPU group {group[:80]}: "
                "its share of the GPU is unknown (a gpu-memory request without the GPU's memory, "
                f"neither the node label {kai.MEMORY_LABEL} nor DCGM framebuffer series, or an "
                "unreadable annotation); its GPU-hours count as the reservation pod's"
            )
            share = 0.0
        held = _held(m, (first, last), origin, step)
        if held is not None:
            out.append(replace(held, share=share))
    peaks = _peaks(out)
    total = max(peaks, default=0.0)
    if total > 1 + EPS:
        notes.append(
            f"the KAI fraction pods of GPU group {group[:80]} ask for {total:g} of one GPU "
            f"({', '.join(f'{h.member.pod[:60]} {h.share:g}' for h in out[:4])}): each share "
            "is scaled to the GPU"
        )
        out = [replace(h, share=h.share / max(1.0, p)) for h, p in zip(out, peaks, strict=True)]
    return out


def _held(m: kai.Member, bounds: tuple[float, float], origin: float, step: float) -> _Holder | None:
    """Which of a series' buckets (its first and last ends `bounds`; ends at `origin` + k x
    `step`) a fraction pod ran in, any part of: from the first that ends after its start to the
    one its end lies in. None where it ran in none of them."""
    first, last = bounds
    begin = m.started if m.started is not None else -math.inf
    end = m.ended if m.ended is not None else math.inf
    if not (np.isfinite(first) and np.isfinite(last)):
        return _Holder(m, 0.0, -math.inf)  # no buckets to tell: the whole series, as it is
    cut, stop, edges = -math.inf, math.inf, []
    if begin > first - step:  # it started after the series' first bucket began
        cut = origin + (math.floor((begin - origin) / step) + 1) * step
        if cut > last:
            return None  # it came after the series' last bucket: none of it is its
        if begin > cut - step:
            edges.append(cut)
    if end < last:
        close = origin + math.ceil((end - origin) / step) * step
        if close < max(first, cut):
            return None  # it ended before the series' first bucket or its own
        stop = close + step / 2.0
        if end < close:
            edges.append(close)
    return _Holder(m, 0.0, cut, stop, (begin, end), tuple(sorted(set(edges))))


def _peaks(holders: list[_Holder]) -> list[float]:
    """For each holder, the most the shares of the holders add up to at one instant while its
    pod ran: they only grow when one starts, so the most is at one of the starts within its run
    (its own included)."""

    def on(h: _Holder, t: float) -> bool:
        return h.ran[0] <= t < h.ran[1]

    starts = {h.ran[0] for h in holders}
    at = {t: sum(h.share for h in holders if on(h, t)) for t in starts}
    return [max((v for t, v in at.items() if on(h, t)), default=0.0) for h in holders]


def split(
    p: Parser,
    s: Series,
    fr: kai.Fractions,
    pods: Mapping[tuple[str, str], Mapping[str, Any]],
    methods: dict[int, str],
    grow: Callable[..., Any],
) -> tuple[Any, dict[int, float], list[str], Ran]:
    """The series with each reserved GPU's keys split among its holders (new keys appended to
    `p.keys` and `p.ident`), `methods` set for them, each such key's weight (the share of the
    GPU its holding counts), the warnings, and for each key with a bucket its fraction pod ran
    only part of, when that pod ran and whether the key is the reservation pod's rest of it
    (for `clip`). `grow` is `dataclasses.replace` on the builder's series."""
    ran: Ran = {}
    notes: list[str] = []
    keys = [
        k
        for k, ident in enumerate(p.ident)
        if ident.held and not ident.mig_id and (ident.namespace, ident.pod) in fr.reservations
    ]
    if not keys:
        return s, {}, notes, ran
    first, last = _bounds(s, s.n)
    origin, step = float(p.grid[0]), float(p.grid[1])
    plans: dict[int, list[_Holder]] = {}
    for k in keys:
        ident = p.ident[k]
        group = fr.reservations[(ident.namespace, ident.pod)]
        node = str(pods.get((ident.namespace, ident.pod), {}).get(C.NODE) or "")
        span = (float(first[k]), float(last[k]), origin, step)
        plans[k] = _holders(s, k, group, node, fr, notes, span)
    # Each fraction pod's holding: a copy of the GPU's series over the buckets it ran in (`clip`
    # cuts those it ran part of to that part).
    weights: dict[int, float] = {}
    copies: list[tuple[int, float, float]] = []
    for k, hs in plans.items():
        for h in hs:
            key = s.n + len(copies)
            ident = replace(p.ident[k], namespace=h.member.namespace, pod=h.member.pod)
            p.keys.append((ident.slot, ident.namespace, ident.pod))
            p.ident.append(replace(ident, container=""))
            weights[key] = h.share
            methods[key] = Method.KAI_FRACTION.value
            copies.append((k, h.cut, h.stop))
            if h.edges:
                ran[key] = (False, ((1.0, *h.ran),))
    if copies:
        s = _copy(s, copies, grow)
    # The reservation pod's key cut at each start and end, and around each bucket a fraction
    # pod ran part of: interval keys, earliest first, each holding what the fraction pods of its
    # time leave (in a bucket of its own, its held time less theirs: `clip`).
    intervals: dict[int, list[tuple[int, float]]] = {k: [(k, -math.inf)] for k in plans}
    edges = {k: {e for h in hs for e in h.edges} for k, hs in plans.items()}
    cuts = {
        k: sorted(
            {t for h in hs for t in (h.cut, h.stop) if math.isfinite(t)}
            | edges[k]
            | {e + step / 2.0 for e in edges[k]}
        )
        for k, hs in plans.items()
    }
    for r in range(max((len(c) for c in cuts.values()), default=0)):
        # One cut per key a round: `claimed._split` moves a key's buckets from one time on.
        splits: list[tuple[int, float]] = []
        for k, c in sorted(cuts.items()):
            if len(c) > r:
                src = intervals[k][-1][0]
                splits.append((src, c[r]))
                intervals[k].append((len(p.keys), c[r]))
                p.keys.append(p.keys[src])
                p.ident.append(p.ident[src])
        s = claimed._split(s, splits, grow)
    for k, hs in plans.items():
        for key, since in intervals[k]:
            methods[key] = Method.KAI_RESERVED.value
            if since in edges[k]:
                weights[key] = 1.0
                ran[key] = (True, tuple((h.share, *h.ran) for h in hs if h.holds(since)))
            else:
                weights[key] = max(0.0, 1.0 - sum(h.share for h in hs if h.holds(since)))
    return s, weights, notes, ran


def clip(ran: Ran, hourly: dict[str, Any], hours: Arr, hid_of: Arr, step: float) -> None:
    """Cut, in place, the held hours (`HELD_H`) of the buckets fraction pods ran only part of
    (`split`'s `ran`, by key), as the part of the GPU's held time in the bucket that each ran
    (the held time x the part of the bucket it ran, so that pods that held a GPU in turn
    within a bucket add up to no more than it): a fraction pod's holding keeps its part, the
    reservation pod's holding of that bucket what their shares of their parts leave; `hours`,
    each holding's held hours, lowered by as much. `hourly` holds the hourly table's columns."""
    hid = np.asarray(hourly[C.HOLDING])
    at_of = {
        int(hid_of[key]): v for key, v in ran.items() if key < len(hid_of) and hid_of[key] >= 0
    }
    if not at_of or not len(hid):
        return
    mark = np.zeros(len(hours), dtype=bool)
    mark[list(at_of)] = True
    rows = np.flatnonzero(mark[hid])
    k = hid[rows]
    ts = np.asarray(hourly[C.TS], dtype=np.float64)[rows]
    held_h = np.asarray(hourly[C.HELD_H], dtype=np.float64).copy()
    before = held_h[rows]
    kept = before.copy()
    order = np.argsort(k, kind="stable")
    keys, first = np.unique(k[order], return_index=True)
    for at, idx in zip(keys.tolist(), np.split(order, first[1:]), strict=True):
        rest, items = at_of[at]
        t, h = ts[idx], before[idx]
        used = np.zeros(len(idx))
        for share, begin, end in items:
            part = np.clip(np.minimum(end, t) - np.maximum(begin, t - step), 0.0, step)
            used += share * h * part / step
        kept[idx] = np.maximum(h - used, 0.0) if rest else used
    hours -= np.bincount(k, weights=before - kept, minlength=len(hours))
    held_h[rows] = kept
    hourly[C.HELD_H] = held_h


def weigh(fractions: Arr, weights: Mapping[int, float]) -> None:
    """Scale, in place, each key's fraction of a GPU (`fractions`, by key number) by its
    weight (`split`)."""
    for k, w in weights.items():
        fractions[k] *= w


def _copy(s: Series, src: list[tuple[int, float, float]], grow: Callable[..., Any]) -> Any:
    """`s` with new keys (numbered from `s.n`, in order) that copy the keys of `src` from a
    bucket end on and before another ((key, from, to); -inf and inf: all of it). A whole copy
    has every statistic of its key; a copy of some buckets has the activity means and sample
    counts of its buckets, and the
    statistics the snapshot holds for the whole window only (maxima, percentiles, framebuffer,
    power, link traffic, health) missing, as `claimed` does for a key split in time."""
    n0 = s.n
    idx = np.array([k for k, _, _ in src], dtype=np.int64)
    since = np.array([t for _, t, _ in src], dtype="float64")
    until = np.array([t for _, _, t in src], dtype="float64")
    new = np.arange(n0, n0 + len(src), dtype=np.int64)
    cut = np.isfinite(since) | np.isfinite(until)
    whole = np.concatenate([np.ones(n0, dtype=bool), ~cut])
    part = new[cut]

    def points(h: Hourly) -> Hourly:
        if not len(h[0]):
            return h
        at = block_starts(h[0])
        ends = np.append(at[1:], len(h[0]))
        block = {int(h[0][a]): (int(a), int(e)) for a, e in zip(at, ends, strict=True)}
        rows: list[Arr] = []
        keys: list[Arr] = []
        spans = zip(idx.tolist(), since.tolist(), until.tolist(), new.tolist(), strict=True)
        for k, t, u, nk in spans:
            a, e = block.get(k, (0, 0))
            r = np.arange(a, e)
            r = r[(h[1][r] >= t) & (h[1][r] < u)]
            if len(r):
                rows.append(r)
                keys.append(np.full(len(r), nk, dtype=h[0].dtype))
        if not rows:
            return h
        r = np.concatenate(rows)
        return (
            np.concatenate([h[0], *keys]),
            np.concatenate([h[1], h[1][r]]),
            np.concatenate([h[2], h[2][r]]),
            np.concatenate([h[3], h[3][r]]),
        )

    def stat(st: Stat, keep: Arr | None = None) -> Stat:
        values = np.concatenate([st.values[:n0], st.values[idx]])
        present = np.concatenate([st.present[:n0], st.present[idx]])
        if keep is not None:
            present &= keep
            values = np.where(keep, values, np.nan)
        return Stat(values, present)

    def metric(m: Metric, h: Hourly | None = None) -> Metric:
        out = Metric(
            stat(m.mean, whole),
            stat(m.mx, whole),
            stat(m.p95, whole),
            stat(m.count, whole),
            m.approx,
        )
        if h is not None and len(part):
            fresh = from_hourly(h, n0 + len(src), only=part)
            for mine, theirs in ((out.mean, fresh.mean), (out.count, fresh.count)):
                mine.values[part] = theirs.values[part]
                mine.present[part] = theirs.present[part]
        return out

    def keyed(d: Mapping[int, Any]) -> dict[int, Any]:
        out = dict(d)
        for k, nk in zip(idx.tolist(), new.tolist(), strict=True):
            if k in d and whole[nk]:
                out[nk] = d[k]
        return out

    act_h, util_h = points(s.act_h), points(s.util_h)
    return grow(
        s,
        n=n0 + len(src),
        act_h=act_h,
        util_h=util_h,
        sm_h=points(s.sm_h),
        tensor_h=points(s.tensor_h),
        act=metric(s.act, act_h),
        util=metric(s.util, util_h),
        fb_used=metric(s.fb_used),
        fb_free=metric(s.fb_free),
        power=metric(s.power),
        # The device's power limit holds for every copy.
        power_limit=stat(s.power_limit),
        health={c: stat(h, whole) if h is not None else None for c, h in s.health.items()},
        traffic={c: stat(t, whole) for c, t in s.traffic.items()},
        has_prof=np.concatenate([s.has_prof[:n0], s.has_prof[idx]]),
        has_util=np.concatenate([s.has_util[:n0], s.has_util[idx]]),
        mig_blind=np.concatenate([s.mig_blind[:n0], s.mig_blind[idx]]),
        xid_max=keyed(s.xid_max),
        xid_codes=keyed(s.xid_codes),
        xid_msgs=keyed(s.xid_msgs),
        xid_events=keyed(s.xid_events) if s.xid_events is not None else None,
    )


def incomplete(notes: list[str]) -> str:
    """The reason the audit is incomplete when KAI fractions could not be told (`split`'s
    warnings)."""
    return (
        f"{len(notes)} KAI Scheduler GPU fractions could not be told (see the warnings): their "
        "GPU-hours count as their reservation pods'"
    )

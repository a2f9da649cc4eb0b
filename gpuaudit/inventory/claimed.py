"""DCGM series of devices held through DRA ResourceClaims, made the pods' holdings.

`gpuaudit.inventory.dra` finds which series (key numbers of the `Parser`) describe a device a
pod holds through a claim. Here each such key becomes the pod's: the whole key where the pod
had started by the key's first bucket, else only its buckets from the pod's start on (the
bucket the pod started in counts as the pod's when the pod started in its first half, so
either side's hours may be off by up to half a bucket). Such a split key becomes two keys:
the time before, unheld, and the pod's. Their activity means and sample counts come from their
hourly buckets; maxima, percentiles and the statistics the snapshot holds for the whole window
only (framebuffer, power, link traffic) are missing for both, as they cannot be divided in
time; health maxima stay with the time before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from gpuaudit.inventory import columns as C
from gpuaudit.inventory import dra
from gpuaudit.inventory.arrays import Arr, block_starts
from gpuaudit.inventory.attribution import Method
from gpuaudit.inventory.parse import Metric, Parser, Stat, from_hourly

Hourly = tuple[Arr, Arr, Arr, Arr]


class Series(Protocol):
    """What this module reads of the builder's series (`gpuaudit.inventory.build._Series`)."""

    @property
    def n(self) -> int: ...
    @property
    def act_h(self) -> Hourly: ...
    @property
    def util_h(self) -> Hourly: ...
    @property
    def sm_h(self) -> Hourly: ...
    @property
    def tensor_h(self) -> Hourly: ...
    @property
    def split_points(self) -> Mapping[str, Hourly]: ...
    @property
    def act(self) -> Metric: ...
    @property
    def util(self) -> Metric: ...
    @property
    def fb_used(self) -> Metric: ...
    @property
    def fb_free(self) -> Metric: ...
    @property
    def power(self) -> Metric: ...
    @property
    def mig_blind(self) -> Arr: ...
    @property
    def power_limit(self) -> Stat: ...
    @property
    def health(self) -> Mapping[str, Stat | None]: ...
    @property
    def traffic(self) -> Mapping[str, Stat]: ...
    @property
    def has_prof(self) -> Arr: ...
    @property
    def has_util(self) -> Arr: ...


def methods(p: Parser) -> dict[int, str]:
    """How each key is attributed: by its pod label (with the exporter's DRA claim labels, by
    its claim), nothing where it has no pod."""
    return {
        k: (Method.DRA_CLAIM if ident.claim else Method.DCGM_POD_LABEL).value
        for k, ident in enumerate(p.ident)
        if ident.held
    }


def _first_bucket(s: Series, n: int) -> Arr:
    """Each key's first bucket end with activity (NaN where none)."""
    first = np.full(n, np.inf)
    for h in (s.act_h, s.util_h):
        # A key's points are a block in ascending time: its first point is its earliest.
        at = block_starts(h[0])
        np.minimum.at(first, h[0][at], h[1][at])
    out: Arr = np.where(np.isfinite(first), first, np.nan)
    return out


def join(
    p: Parser,
    s: Series,
    claims: dra.Claims,
    pods: Mapping[tuple[str, str], Mapping[str, Any]],
    grow: Callable[..., Any],
) -> tuple[Any, dict[int, str], list[str]]:
    """The series with the claimed devices' keys made their pods' (new keys appended to
    `p.keys` and `p.ident` where a key is split), each key's attribution method, and why
    claimed devices were not joined. `grow` is `dataclasses.replace` on the builder's
    series."""
    joins, notes = dra.match(p.ident, claims)
    how = methods(p)
    if not joins:
        return s, how, notes
    first = _first_bucket(s, s.n)
    half = p.grid[1] / 2.0
    splits: list[tuple[int, float]] = []
    for k, c in sorted(joins.items()):
        pod = pods.get((c.namespace, c.pod), {})
        started = pod.get(C.STARTED) or pod.get(C.CREATED)
        ident = replace(p.ident[k], namespace=c.namespace, pod=c.pod, container="")
        key = (ident.slot, ident.namespace, ident.pod)
        if isinstance(started, float) and np.isfinite(first[k]) and started > first[k] - half:
            # Buckets the pod held for at least half of become its own.
            splits.append((k, started + half))
            k = len(p.keys)
            p.keys.append(key)
            p.ident.append(ident)
        else:
            p.keys[k] = key
            p.ident[k] = ident
        how[k] = Method.DRA_CLAIM.value
    if splits:
        s = _split(s, splits, grow)
    return s, how, notes


def _split(s: Series, splits: list[tuple[int, float]], grow: Callable[..., Any]) -> Any:
    """`s` with each (key, time) split: the key's buckets ending at or after the time moved to
    a new key (numbered from `s.n` in order)."""
    n0 = s.n
    n = n0 + len(splits)
    src = np.array([k for k, _ in splits], dtype=np.int64)
    new = np.arange(n0, n, dtype=np.int64)
    cut = np.full(n0, np.inf)
    cut[src] = [t for _, t in splits]
    moved_to = np.arange(n0, dtype=np.int64)
    moved_to[src] = new

    def rekey(h: Hourly) -> Hourly:
        # Only the blocks (see `Parser.hourly`) of split keys change.
        at = block_starts(h[0])
        split = np.flatnonzero(np.isfinite(cut[h[0][at]]))
        if not len(split):
            return h
        ends = np.append(at[1:], len(h[0]))
        keys = h[0].copy()
        for b in split.tolist():
            rows = slice(int(at[b]), int(ends[b]))
            k = int(h[0][at[b]])
            keys[rows] = np.where(h[1][rows] >= cut[k], moved_to[k], k)
        return keys, h[1], h[2], h[3]

    affected = np.concatenate([src, new])
    act_h, util_h = rekey(s.act_h), rekey(s.util_h)

    def stat(st: Stat, keep_on_src: bool = False) -> Stat:
        values = np.concatenate([st.values[:n0], st.values[src]])
        present = np.concatenate([st.present[:n0], st.present[src]])
        gone = new if keep_on_src else affected
        present[gone] = False
        values[gone] = np.nan
        return Stat(values, present)

    def from_buckets(m: Metric, h: Hourly) -> Metric:
        fresh = from_hourly(h, n, only=affected)
        mean, count = stat(m.mean), stat(m.count)
        for mine, theirs in ((mean, fresh.mean), (count, fresh.count)):
            mine.values[affected] = theirs.values[affected]
            mine.present[affected] = theirs.present[affected]
        return Metric(mean, stat(m.mx), stat(m.p95), count, m.approx)

    def absent(m: Metric) -> Metric:
        return Metric(stat(m.mean), stat(m.mx), stat(m.p95), stat(m.count), m.approx)

    return grow(
        s,
        n=n,
        act_h=act_h,
        util_h=util_h,
        sm_h=rekey(s.sm_h),
        tensor_h=rekey(s.tensor_h),
        split_points={c: rekey(h) for c, h in s.split_points.items()},
        act=from_buckets(s.act, act_h),
        util=from_buckets(s.util, util_h),
        fb_used=absent(s.fb_used),
        fb_free=absent(s.fb_free),
        power=absent(s.power),
        health={
            c: stat(h, keep_on_src=True) if h is not None else None for c, h in s.health.items()
        },
        traffic={c: stat(t) for c, t in s.traffic.items()},
        has_prof=np.concatenate([s.has_prof[:n0], s.has_prof[src]]),
        has_util=np.concatenate([s.has_util[:n0], s.has_util[src]]),
        mig_blind=np.concatenate([s.mig_blind[:n0], s.mig_blind[src]]),
        # The device's power limit holds for both parts of a split.
        power_limit=Stat(
            np.concatenate([s.power_limit.values[:n0], s.power_limit.values[src]]),
            np.concatenate([s.power_limit.present[:n0], s.power_limit.present[src]]),
        ),
    )

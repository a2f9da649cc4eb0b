"""The Kubernetes-side join of DCGM series without pod labels, decided per bucket of the
inventory's grid (`--step`), and the holdings it splits (see
`gpuaudit.inventory.attribution.kubernetes_join`, which labels what this module finds).

When a pod ran is what the Kubernetes API says (`runs`): from its `status.startTime` to the
window's end for a Running pod, to its end (`FINISHED`: the latest `finishedAt` of its
containers) for a Succeeded or Failed one. In each bucket (its end `t`, the span `(t - step,
t]`) and per node and device kind (whole GPUs, or one MIG profile), the node's unlabelled
devices of that kind with data in the bucket (a device whose series names a pod in that bucket
is not one of them) are joined to a pod when it is the only candidate pod (see
`attribution._candidates`) requesting that kind that ran in the bucket, it requests exactly
as many as there are such devices, and its start is known (`plan`). A bucket with no candidate
stays unheld; one with two or more stays unattributed.

A pod that started or ended inside a bucket it was joined in gets the part of the bucket it
ran, at most the series' held time there (`HELD_H`); the rest of the bucket stays with the
series, unheld. A series whose buckets all went to one pod, whole, is relabelled as it is.
Otherwise it is split (`split`): one holding per pod that got buckets of it, and the series'
own holding keeps the rest, unheld; the hourly rows go with their buckets. What the buckets
give is worked out again for each part: held hours, GPU-hours, first and last bucket, mean
activity and GPU_UTIL (weighted by held time) and the activity samples (the series' own in
proportion to held time). The window figures made of buckets are worked out again from each
part's own buckets (`BUCKET_FIGURES`: the p95s, power and violation seconds), where no bucket
of the part was shared with another holding; the figures measured over the whole window
cannot be cut in time (`LOST`): the parts have none (NaN), and the inventory says so in a
warning. Device facts (XID codes and messages, health maxima, power
limit, memory size) stay with every part; XID events, which are summed, with the first pod's
part alone.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuaudit.inventory import columns as C
from gpuaudit.inventory.arrays import Arr, nan_column
from gpuaudit.inventory.kube import ENDED_PHASES

if TYPE_CHECKING:
    import pandas as pd

WHOLE = ""
"""The device kind of whole GPUs (a MIG profile names the others)."""


@dataclass(frozen=True)
class Runs:
    """When each candidate pod ran inside the window, as the Kubernetes API says (unix
    seconds, by the candidate's position)."""

    begin: Arr
    """Its start, at the earliest the window's start (the window's start when unknown)."""
    end: Arr
    """Its end (the window's end for a pod still running), at the latest the window's end."""
    timed: Arr
    """Whether its start is known: only such a pod is joined (one without blocks others)."""

    def hours(self) -> Arr:
        """Hours each ran inside the window."""
        out: Arr = np.maximum(self.end - self.begin, 0.0) / 3600.0
        return out

    def overlap_s(self, pod: Arr, t: Arr, step: float) -> Arr:
        """Seconds pods `pod` ran in the buckets ending at `t`."""
        out: Arr = np.minimum(self.end[pod], t) - np.maximum(self.begin[pod], t - step)
        return np.clip(out, 0.0, step)


def _floats(col: Any) -> Arr:
    return np.array([np.nan if v is None else float(v) for v in col], dtype=np.float64)


def runs(cand: pd.DataFrame, window: tuple[float, float]) -> Runs:
    """When the candidate pods (`attribution._candidates`) ran inside `window`."""
    start, end = window
    started = _floats(cand[C.STARTED].tolist())
    finished = _floats(cand[C.FINISHED].tolist())
    ended = cand[C.PHASE].isin(ENDED_PHASES).to_numpy(dtype=bool)
    timed = np.isfinite(started)
    begin = np.clip(np.where(timed, started, start), start, end)
    stop = np.clip(np.where(ended, finished, end), begin, end)
    return Runs(begin, stop, timed)


def migs(text: Any) -> list[tuple[str, float]]:
    """(profile, instances) of a pod's `MIG_REQUEST` (`3g.40gb=2,1g.10gb=1`)."""
    out: list[tuple[str, float]] = []
    for part in str(text).split(","):
        if "=" in part:
            prof, n = part.split("=", 1)
            out.append((prof, float(n)))
    return out


def wants(cand: pd.DataFrame) -> list[tuple[int, str, float]]:
    """(candidate position, device kind, devices) of every device kind each candidate
    requests: whole GPUs (`WHOLE`) and each MIG profile."""
    out: list[tuple[int, str, float]] = []
    for i, (gpus, mig) in enumerate(
        zip(cand[C.GPU_REQUEST].tolist(), cand[C.MIG_REQUEST].tolist(), strict=True)
    ):
        if float(gpus or 0) > 0:
            out.append((i, WHOLE, float(gpus)))
        out.extend((i, prof, n) for prof, n in migs(mig))
    return out


def kinds(holdings: pd.DataFrame) -> Arr:
    """Each holding's device kind: its MIG profile, `WHOLE` for a whole GPU, None for a MIG
    instance of no known profile."""
    mig_id = holdings[C.MIG_ID].to_numpy(dtype=object)
    out: Arr = holdings[C.MIG_PROFILE].to_numpy(dtype=object).copy()
    out[out == ""] = None
    out[mig_id == ""] = WHOLE
    return out


@dataclass(frozen=True)
class Plan:
    """The hourly rows joined to candidate pods."""

    rows: Arr
    """Positions in the hourly table."""
    pod: Arr
    """The candidate each row is joined to (its position)."""
    hours: Arr
    """Held hours the pod gets of the row: the row's, or the part of its bucket the pod ran
    (at most the row's)."""

    @staticmethod
    def none() -> Plan:
        empty = np.zeros(0, dtype=np.int64)
        return Plan(empty, empty, np.zeros(0))


def plan(
    holdings: pd.DataFrame,
    hourly: Mapping[str, Any],
    cand: pd.DataFrame,
    skip_nodes: set[str],
    window: tuple[float, float],
    step: float,
) -> Plan:
    """The rows of series without pod labels joined to a pod, bucket by bucket (see the
    module's docstring). `cand`: the candidate pods; `skip_nodes`: nodes left alone (shared
    GPUs: which replica a pod holds is not in the API)."""
    start, end = window
    nb = max(1, round((end - start) / step))
    ran = runs(cand, window)
    groups, w_group, w_pod_arr, w_n_arr = _wants(cand, skip_nodes)
    if not groups:
        return Plan.none()
    held = holdings[C.HELD].to_numpy(dtype=bool)
    g_of = np.array(
        [
            -1 if h or k is None else groups.get((str(node), str(k)), -1)
            for node, k, h in zip(
                holdings[C.NODE].tolist(), kinds(holdings).tolist(), held, strict=True
            )
        ],
        dtype=np.int64,
    )
    hid = np.asarray(hourly[C.HOLDING])
    if not len(hid) or not (g_of >= 0).any():
        return Plan.none()
    rows = np.flatnonzero((g_of >= 0)[hid])
    t_all = np.asarray(hourly[C.TS], dtype=np.float64)
    ts = t_all[rows]
    bucket = np.rint((ts - start) / step).astype(np.int64) - 1
    slot = _codes(holdings[C.SLOT])
    ok = (bucket >= 0) & (bucket < nb)
    ok &= ~_labelled(hid, t_all, rows, bucket, slot, held, nb, (start, step))
    rows, ts, bucket = rows[ok], ts[ok], bucket[ok]
    if not len(rows):
        return Plan.none()
    cell = g_of[hid[rows]] * nb + bucket
    cells, at = np.unique(cell, return_inverse=True)
    devices = _devices(cells, cell, slot[hid[rows]])
    count, who = _candidates_per_cell(cells, nb, w_group, w_pod_arr, ran, (start, step))
    pick = np.where(count == 1, who, 0)
    joined = (count == 1) & ran.timed[w_pod_arr[pick]] & (w_n_arr[pick] == devices)
    keep = joined[at] & (devices[at] > 0)
    rows, ts, pod = rows[keep], ts[keep], w_pod_arr[pick[at[keep]]]
    held_h = np.asarray(hourly[C.HELD_H], dtype=np.float64)[rows]
    ran_s = ran.overlap_s(pod, ts, step)
    hours = np.where(ran_s >= step, held_h, np.minimum(held_h, ran_s / 3600.0))
    return Plan(rows, pod, hours)


def _wants(
    cand: pd.DataFrame, skip_nodes: set[str]
) -> tuple[dict[tuple[str, str], int], Arr, Arr, Arr]:
    """The groups (node, device kind) candidates want devices of, numbered, and each want's
    group, candidate and number of devices (`wants`), on nodes not skipped."""
    groups: dict[tuple[str, str], int] = {}
    w_group, w_pod, w_n = [], [], []
    nodes = cand[C.NODE].tolist()
    for i, kind, n in wants(cand):
        if nodes[i] in skip_nodes:
            continue
        w_group.append(groups.setdefault((str(nodes[i]), kind), len(groups)))
        w_pod.append(i)
        w_n.append(n)
    return (
        groups,
        np.array(w_group, dtype=np.int64),
        np.array(w_pod, dtype=np.int64),
        np.array(w_n, dtype=np.float64),
    )


def _codes(col: pd.Series) -> Arr:
    """A number per distinct value of `col`."""
    import pandas as pd

    codes, _ = pd.factorize(col)
    return np.asarray(codes, dtype=np.int64)


def _devices(cells: Arr, cell: Arr, slot: Arr) -> Arr:
    """Distinct devices (`slot`) with rows in each of `cells` (sorted), from the rows' cells."""
    width = int(slot.max()) + 1
    pairs = np.unique(cell * width + slot)
    out: Arr = np.bincount(np.searchsorted(cells, pairs // width), minlength=len(cells))
    return out


def _labelled(
    hid: Arr,
    t_all: Arr,
    rows: Arr,
    bucket: Arr,
    slot: Arr,
    held: Arr,
    nb: int,
    grid: tuple[float, float],
) -> Arr:
    """Which of `rows` (in bucket `bucket`) are of a device whose series names a pod in that
    bucket: a held holding of the same slot has a row there."""
    start, step = grid
    mine = np.zeros(int(slot.max()) + 1, dtype=bool)
    mine[slot[hid[rows]]] = True
    others = held & mine[slot]
    if not others.any():
        return np.zeros(len(rows), dtype=bool)
    at = np.flatnonzero(others[hid])
    taken = slot[hid[at]] * (nb + 2) + np.rint((t_all[at] - start) / step).astype(np.int64) - 1
    out: Arr = np.isin(slot[hid[rows]] * (nb + 2) + bucket, taken)
    return out


def _candidates_per_cell(
    cells: Arr, nb: int, w_group: Arr, w_pod: Arr, ran: Runs, grid: tuple[float, float]
) -> tuple[Arr, Arr]:
    """For each cell (`group * nb + bucket`, sorted): how many of the wants (`w_group`,
    `w_pod`) of its group ran in its bucket, and, where one did, which (its position). Each
    want covers the keys `group * (nb + 1) + bucket` of the buckets its pod ran in, a range:
    the wants covering a key are those starting at or before it less those ending there."""
    start, step = grid
    first = np.floor((ran.begin[w_pod] - start) / step).astype(np.int64)
    last = np.ceil((ran.end[w_pod] - start) / step).astype(np.int64)
    live = last > first
    idx = np.flatnonzero(live)
    lo = w_group[live] * (nb + 1) + np.clip(first[live], 0, nb)
    hi = w_group[live] * (nb + 1) + np.clip(last[live], 0, nb)
    key = (cells // nb) * (nb + 1) + cells % nb
    o_lo, o_hi = np.argsort(lo, kind="stable"), np.argsort(hi, kind="stable")
    n_lo = np.searchsorted(lo[o_lo], key, side="right")
    n_hi = np.searchsorted(hi[o_hi], key, side="right")
    sum_lo = np.concatenate([[0], np.cumsum(idx[o_lo])])
    sum_hi = np.concatenate([[0], np.cumsum(idx[o_hi])])
    count: Arr = n_lo - n_hi
    who: Arr = sum_lo[n_lo] - sum_hi[n_hi]
    return count, who


LOST = (
    C.ACT_MAX,
    C.FB_USED_MEAN,
    C.FB_USED_MAX,
    C.FB_FREE_MEAN,
    C.NVLINK_BPS,
    C.PCIE_BPS,
    C.SM_CLOCK_MEAN,
)
"""Window statistics of a series that cannot be cut in time: a split series' parts lack them
(NaN). Each is read once over the whole window, with no figure per bucket to cut: the maxima
of activity and framebuffer (window `max` queries), and the means of framebuffer use and free
memory, link traffic and SM clock (window sums over window counts)."""

Points = tuple[Arr, Arr, Arr, Arr]
"""A window figure's buckets: (holding ids, bucket ends, values, weights), sorted by holding,
then time (`gpuaudit.inventory.build._split_points`)."""

BUCKET_FIGURES = {
    C.ACT_P95: "max",
    C.FB_USED_P95: "max",
    C.POWER_MEAN: "mean",
    C.POWER_VIOLATION_S: "sum",
    C.THERMAL_VIOLATION_S: "sum",
}
"""Window figures made of buckets, and how (as the whole window's are made,
`gpuaudit.inventory.parse`): the p95s are the largest bucket p95, the power mean the bucket
means weighted by their samples (held time), the violation seconds the sum of the buckets'
increases. A part of a split series takes them from its own buckets, where it has any and
shared none with another holding (a bucket cut between a pod and the series' unheld rest: its
figure covers both, and is neither's); the series' rest, likewise from the buckets it kept.
Otherwise the part has none (NaN): missing, never zero."""


@dataclass(frozen=True)
class _Parts:
    """The holdings a split gives: per (holding, pod) pair that got rows of a split holding,
    its holding id, and the holding each new id comes from."""

    pairs: Arr
    """`holding * pods + pod`, sorted."""
    ids: Arr
    """The holding id of each pair: the series' own where the series keeps nothing and this
    is its first pod, else a new one."""
    first: Arr
    """Whether the pair is its series' first pod (by the first bucket it got)."""
    source: Arr
    """For each new holding id (from the number of holdings on), the holding it comes from."""


def split(
    holdings: pd.DataFrame,
    hourly: MutableMapping[str, Any],
    cand: pd.DataFrame,
    joined: Plan,
    label: tuple[str, float],
    points: Mapping[str, Points] | None = None,
) -> tuple[pd.DataFrame, int]:
    """The holdings with the joined rows given to their pods (see the module's docstring):
    relabelled as they are where one pod got all of a series, whole; otherwise split, and the
    hourly table's columns in `hourly` replaced (still sorted by holding, then time). `label`:
    the attribution method the joined holdings get, and the bucket length; `points`: the
    buckets of the `BUCKET_FIGURES` (none: the parts have none of them). Returns the holdings
    and how many series were split."""
    import pandas as pd

    if not len(joined.rows):
        return holdings, 0
    method, step = label
    n, pods = len(holdings), max(1, len(cand))
    hid = np.asarray(hourly[C.HOLDING]).astype(np.int64)
    held_h = np.asarray(hourly[C.HELD_H], dtype=np.float64)
    jh = hid[joined.rows]
    whole = joined.hours >= held_h[joined.rows] - 1e-12
    rows_of = np.bincount(hid, minlength=n)
    given = np.bincount(jh[whole], minlength=n) == rows_of
    pair = jh * pods + joined.pod
    pairs, first_at = np.unique(pair, return_index=True)
    pods_of = np.bincount(pairs // pods, minlength=n)
    in_place = (pods_of == 1) & given
    out = holdings.copy()
    at = np.flatnonzero(in_place[pairs // pods])
    _label(out, pairs[at] // pods, cand.iloc[pairs[at] % pods], method)
    apart = ~in_place[pairs // pods]
    if not apart.any():
        return out, 0
    parts = _parts(pairs[apart], joined.rows[first_at[apart]], given, n, pods)
    moved = ~in_place[jh]
    target = parts.ids[np.searchsorted(parts.pairs, pair[moved])]
    ts = np.asarray(hourly[C.TS], dtype=np.float64)[joined.rows[moved]]
    moves = _Moves(jh[moved], ts, target, whole[moved])
    _move(hourly, joined.rows[moved], target, joined.hours[moved], whole[moved], n)
    src = holdings.iloc[parts.source].copy()
    src[C.HOLDING] = np.arange(n, n + len(parts.source), dtype=np.int64)
    out = pd.concat([out, src], ignore_index=True)
    _label(out, parts.ids, cand.iloc[parts.pairs % pods], method)
    series = np.unique(parts.pairs // pods)
    _restate(out, hourly, (series, parts), holdings, step)
    figures = _from_buckets(points or {}, moves, series, (len(out), step))
    touched = np.zeros(len(out), dtype=bool)
    touched[series] = True
    touched[parts.ids] = True
    for col, values in figures.items():
        arr = out[col].to_numpy(dtype=np.float64).copy()
        arr[touched] = values[touched]
        out[col] = arr
    return out, len(series)


@dataclass(frozen=True)
class _Moves:
    """The hourly rows of split series given to a part: per row, its series, bucket end, the
    part, and whether it went whole (else the series kept the rest of its bucket)."""

    series: Arr
    ts: Arr
    target: Arr
    whole: Arr


def _from_buckets(
    points: Mapping[str, Points], moves: _Moves, series: Arr, size: tuple[int, float]
) -> dict[str, Arr]:
    """The `BUCKET_FIGURES` of every holding (NaN but for the split `series` and their parts),
    from the buckets each got: a bucket moved whole is its part's, one not moved the series'
    own, one cut between the two is neither's and leaves both without the figure."""
    m, step = size

    def key(h: Arr, t: Arr) -> Arr:
        out: Arr = h.astype(np.int64) * (1 << 32) + np.rint(t / step).astype(np.int64)
        return out

    order = np.argsort(key(moves.series, moves.ts), kind="stable")
    mk = key(moves.series, moves.ts)[order]
    target, whole = moves.target[order], moves.whole[order]
    split = np.zeros(m, dtype=bool)
    split[series] = True
    out: dict[str, Arr] = {}
    for col, how in BUCKET_FIGURES.items():
        got = points.get(col)
        if got is None or not len(mk):
            out[col] = np.full(m, np.nan)
            continue
        sel = np.flatnonzero(split[got[0]])
        h, t, v, w = (a[sel] for a in got)
        at = np.minimum(np.searchsorted(mk, key(h, t)), len(mk) - 1)
        hit = mk[at] == key(h, t)
        owner = np.where(hit & whole[at], target[at], h)
        cut = hit & ~whole[at]
        shared = np.zeros(m, dtype=bool)
        shared[h[cut]] = True
        shared[target[at][cut]] = True
        ok = ~cut & np.isfinite(v)
        k, v, w = owner[ok], v[ok], w[ok]
        if how == "max":
            fig = np.full(m, -np.inf)
            np.maximum.at(fig, k, v)
        elif how == "sum":
            fig = np.bincount(k, weights=v, minlength=m).astype(np.float64)
        else:
            fig = _weighted(k, w, v, m)
        present = (np.bincount(k, minlength=m) > 0) & ~shared
        out[col] = np.where(present, fig, np.nan)
    return out


def _parts(pairs: Arr, first_row: Arr, given: Arr, n: int, pods: int) -> _Parts:
    """The holding id of each (holding, pod) pair of split holdings: the pairs of a holding
    in the order of the first row each got (its first bucket)."""
    h = pairs // pods
    order = np.lexsort((first_row, h))
    rank = np.zeros(len(pairs), dtype=np.int64)
    starts = np.r_[True, h[order][1:] != h[order][:-1]]
    run = np.arange(len(pairs)) - np.maximum.accumulate(np.where(starts, np.arange(len(pairs)), 0))
    rank[order] = run
    keeps = given[h] & (rank == 0)
    ids = np.empty(len(pairs), dtype=np.int64)
    ids[keeps] = h[keeps]
    fresh = np.flatnonzero(~keeps)
    ids[fresh] = n + np.arange(len(fresh), dtype=np.int64)
    return _Parts(pairs, ids, rank == 0, h[fresh])


def _move(
    hourly: MutableMapping[str, Any], rows: Arr, target: Arr, hours: Arr, whole: Arr, n: int
) -> None:
    """Give `rows` of the hourly table to the holdings `target`: whole rows move, the others
    stay with `hours` fewer held hours and a copy with those hours goes to the target. The
    table stays sorted by holding, then time: rows of the holdings it had (`n`) keep their
    order, those of new holdings follow them, sorted."""
    hid = np.asarray(hourly[C.HOLDING]).astype(np.int64)
    held_h = np.asarray(hourly[C.HELD_H], dtype=np.float64).copy()
    ts = np.asarray(hourly[C.TS], dtype=np.float64)
    ids = hid.copy()
    ids[rows[whole]] = target[whole]
    held_h[rows[~whole]] -= hours[~whole]
    stay = np.flatnonzero(ids < n)
    gone = np.flatnonzero(ids >= n)
    extra_src, extra_id, extra_h = rows[~whole], target[~whole], hours[~whole]
    src = np.concatenate([gone, extra_src])
    new_id = np.concatenate([ids[gone], extra_id])
    new_h = np.concatenate([held_h[gone], extra_h])
    order = np.lexsort((ts[src], new_id))
    src, new_id, new_h = src[order], new_id[order], new_h[order]
    take = np.concatenate([stay, src])
    size = len(take)
    for col, values in list(hourly.items()):
        arr = np.asarray(values)
        if col == C.HOLDING:
            hourly[col] = np.concatenate([ids[stay], new_id]).astype(arr.dtype)
        elif col == C.HELD_H:
            hourly[col] = np.concatenate([held_h[stay], new_h])
        elif arr.ndim == 1 and arr.strides == (0,) and arr.dtype.kind == "f":
            hourly[col] = nan_column(size)  # a column of no series stays one of no memory
        elif arr.ndim == 1 and len(arr) == len(hid):
            hourly[col] = arr[take]


def _label(out: pd.DataFrame, at: Arr, pods: pd.DataFrame, method: str) -> None:
    """Holdings `at` are held by `pods` (a row each), joined by `method`."""
    if not len(at):
        return
    for col, values in (
        (C.NAMESPACE, pods[C.NAMESPACE].tolist()),
        (C.POD, pods[C.POD].tolist()),
        (C.HELD, [True] * len(at)),
        (C.ATTRIBUTION, [method] * len(at)),
    ):
        arr = out[col].to_numpy(dtype=bool if col == C.HELD else object).copy()
        arr[at] = values
        out[col] = arr


def _restate(
    out: pd.DataFrame,
    hourly: Mapping[str, Any],
    split_of: tuple[Arr, _Parts],
    before: pd.DataFrame,
    step: float,
) -> None:
    """What the buckets give, worked out again for the split series and their parts (see the
    module's docstring)."""
    series, parts = split_of
    m = len(out)
    touched = np.zeros(m, dtype=bool)
    touched[series] = True
    touched[parts.ids] = True
    hid = np.asarray(hourly[C.HOLDING]).astype(np.int64)
    rows = np.flatnonzero(touched[hid])
    k = hid[rows]
    held = np.asarray(hourly[C.HELD_H], dtype=np.float64)[rows]
    ts = np.asarray(hourly[C.TS], dtype=np.float64)[rows]
    in_rows = np.bincount(k, weights=held, minlength=m)
    origin = np.arange(m)
    origin[len(before) :] = parts.source
    # The series keeps its hours less its parts' (it alone keeps any not in the hourly rows).
    hours = out[C.HOURS].to_numpy(dtype=np.float64).copy()
    own = np.setdiff1d(np.flatnonzero(touched), np.r_[parts.ids[parts.ids >= len(before)]])
    hours[touched] = in_rows[touched]
    elsewhere = np.bincount(origin[len(before) :], weights=in_rows[len(before) :], minlength=m)
    hours[own] = before[C.HOURS].to_numpy(dtype=np.float64)[own] - elsewhere[own]
    hours = np.maximum(hours, 0.0)
    total = before[C.HOURS].to_numpy(dtype=np.float64)[origin]
    count = before[C.ACT_COUNT].to_numpy(dtype=np.float64)[origin]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(total > 0, hours / total, np.nan)
    first = np.full(m, np.inf)
    np.minimum.at(first, k, ts)
    last = np.full(m, -np.inf)
    np.maximum.at(last, k, ts)
    cols: dict[str, Arr] = {
        C.HOURS: hours,
        C.GPU_HOURS: hours * out[C.FRACTION].to_numpy(dtype=np.float64),
        C.FIRST_TS: np.where(np.isfinite(first), first - step, np.nan),
        C.LAST_TS: np.where(np.isfinite(last), last, np.nan),
        C.ACT_MEAN: _weighted(k, held, np.asarray(hourly[C.ACT], dtype=np.float64)[rows], m),
        C.UTIL_MEAN: 100.0
        * _weighted(k, held, np.asarray(hourly[C.UTIL], dtype=np.float64)[rows], m),
        C.ACT_COUNT: count * share,
        **{col: np.full(m, np.nan) for col in LOST},
    }
    for col, values in cols.items():
        arr = out[col].to_numpy(dtype=np.float64).copy()
        arr[touched] = values[touched]
        out[col] = arr
    approx = out[C.ACT_APPROX].to_numpy(dtype=bool).copy()
    approx[touched] = False
    out[C.ACT_APPROX] = approx
    events = out[C.XID_EVENTS].to_numpy(dtype=object).copy()
    keep = np.zeros(m, dtype=bool)
    keep[parts.ids[parts.first]] = True
    events[touched & ~keep] = ""
    events[parts.ids[parts.first]] = before[C.XID_EVENTS].to_numpy(dtype=object)[
        origin[parts.ids[parts.first]]
    ]
    out[C.XID_EVENTS] = events


def _weighted(k: Arr, w: Arr, v: Arr, m: int) -> Arr:
    """Per holding, the mean of `v` weighted by `w` over its finite values; NaN without any."""
    ok = np.isfinite(v)
    num = np.bincount(k[ok], weights=(w * v)[ok], minlength=m)
    den = np.bincount(k[ok], weights=w[ok], minlength=m)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: Arr = np.where(den > 0, num / den, np.nan)
    return out

"""Held GPU-hours by cause: which part of each held hourly row a pod spent starting (before its
first sustained activity) or restarting (a container down after a crash), and the ledger's split
of every held row into causes that do not overlap.

Rows are the held hourly rows (`Views.held_rows`): a holding's held time in one bucket, its
GPU-hours `held_h x fraction`. A row's causes, in this precedence (the first that applies takes
the row's GPU-hours, or for restarting the part of them the down time covers):

1. not measured: the row has no activity value;
2. restarting: a container of the pod was down (after its last termination, until it ran again
   or until the pod was read: `gpuaudit.inventory.crashes.down_spans`) in the bucket: the
   smaller of the row's held hours and the hours of the bucket the down time covers;
3. starting: the bucket lies before the pod's first sustained activity (`starts`);
4. throttled: the busy GPU-hours a throttled card lost (`THROTTLED_LOST`, a holding's figure:
   see `gpuaudit.inventory.throttling`), taken from the holding's rows left after the causes
   above, in proportion to each row's busy GPU-hours (left hours x activity), never more than a
   row has left; not measured where the violation counters were not read;
5. stalled: GPU_UTIL at least `busy_util` while SM (else engine) activity stays below
   `busy_low_activity` (GPU040's measure), on a holding whose activity is profiled;
6. idle: activity below `idle_activity`;
7. productive: the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuaudit.inventory import columns as C
from gpuaudit.inventory.arrays import block_starts
from gpuaudit.inventory.crashes import Container, down_spans, overlap
from gpuaudit.inventory.derived import held_hours

if TYPE_CHECKING:
    import numpy.typing as npt

    from gpuaudit.inventory.views import Views

CAUSES = (
    "productive",
    "idle",
    "stalled",
    "throttled",
    "starting",
    "restarting",
    "not_measured",
)
"""Every cause of the ledger, in the order reports list them."""
PRECEDENCE = ("not_measured", "restarting", "starting", "throttled", "stalled", "idle")
"""Which cause takes a row that more than one describes: the first listed (productive last)."""


@dataclass(frozen=True)
class Starts:
    """Per holder pod (`Views.holders` numbers): where its first sustained activity began."""

    active_bucket: npt.NDArray[np.intp]
    """The bucket index (`HeldRows`) of the first bucket of sustained activity; -1 where the pod
    started before the window (or its start is unknown), never ran sustained, or ran from its
    first bucket."""
    started: npt.NDArray[np.float64]
    """When the pod started (`status.startTime`, else its creation; NaN unknown)."""
    first_bucket: npt.NDArray[np.intp]
    """The pod's first held bucket."""


def pod_starts(views: Views, activity: float, sustained: int) -> Starts:
    """Each holder pod's first sustained activity: the first run of `sustained` consecutive
    buckets whose mean activity of the pod's GPUs is at least `activity`. Only a pod whose start
    lies in the window counts (its `startTime`, else creation, at or after the window's start;
    without the pods read, a first held bucket after the window's first)."""
    ph = views.pod_hours
    n = len(ph.pods.namespace)
    active = np.full(n, -1, dtype=np.intp)
    first = np.full(n, -1, dtype=np.intp)
    started = np.full(n, np.nan)
    inv = views.inv
    begin = _pod_begins(inv.pods)
    ok = np.nan_to_num(ph.act, nan=-1.0) >= activity
    if not len(ph.pod):
        return Starts(active, started, first)
    starts = block_starts(np.asarray(ph.pod))
    ends = np.append(starts[1:], len(ph.pod))
    need = max(1, int(sustained))
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        p = int(ph.pod[s])
        bk = np.asarray(ph.bucket[s:e], dtype=np.intp)
        first[p] = int(bk[0])
        key = (str(ph.pods.namespace[p]), str(ph.pods.pod[p]))
        t0 = begin.get(key)
        if t0 is not None:
            started[p] = t0
            if t0 < inv.window_start:
                continue
        elif inv.pods.empty and bk[0] <= 0:
            continue
        elif not inv.pods.empty:
            continue
        at = _first_run(ok[s:e], bk, need)
        if at > 0:
            active[p] = int(bk[at])
    return Starts(active, started, first)


def _pod_begins(pods: Any) -> dict[tuple[str, str], float]:
    if pods.empty:
        return {}
    out: dict[tuple[str, str], float] = {}
    for ns, pod, st, cr in zip(
        pods[C.NAMESPACE].tolist(),
        pods[C.POD].tolist(),
        pods[C.STARTED].tolist(),
        pods[C.CREATED].tolist(),
        strict=True,
    ):
        t = st if st is not None and st == st else cr
        if t is not None and t == t:
            out[(str(ns), str(pod))] = float(t)
    return out


def _first_run(ok: npt.NDArray[np.bool_], bk: npt.NDArray[np.intp], need: int) -> int:
    """The position of the first run of `need` True entries on consecutive buckets; -1 none."""
    run = 0
    for i in range(len(ok)):
        if ok[i] and (run == 0 or bk[i] == bk[i - 1] + 1):
            run += 1
        elif ok[i]:
            run = 1
        else:
            run = 0
        if run >= need:
            return i - need + 1
    return -1


def pod_down_spans(views: Views) -> dict[int, list[tuple[float, float]]]:
    """Holder pod number -> its containers' down spans (see `crashes.down_spans`), read at
    the window's end; pods without any are left out."""
    pods = views.inv.pods
    if pods.empty or C.CONTAINERS not in pods.columns:
        return {}
    holders = views.holders
    number = {
        (str(ns), str(p)): i
        for i, (ns, p) in enumerate(zip(holders.namespace, holders.pod, strict=True))
    }
    out: dict[int, list[tuple[float, float]]] = {}
    for ns, pod, cs in zip(
        pods[C.NAMESPACE].tolist(), pods[C.POD].tolist(), pods[C.CONTAINERS].tolist(), strict=True
    ):
        i = number.get((str(ns), str(pod)))
        if i is None or not isinstance(cs, tuple):
            continue
        spans = down_spans([c for c in cs if isinstance(c, Container)], views.inv.window_end)
        if spans:
            out[i] = spans
    return out


def restarting_hours(views: Views) -> npt.NDArray[np.float64]:
    """Per held row: the hours of it a container of its pod was down (the smaller of the row's
    held hours and the part of its bucket the down spans cover); 0 elsewhere."""
    rows = views.held_rows
    held = held_hours(views.inv)[rows.rows]
    out = np.zeros(len(rows.rows))
    spans = pod_down_spans(views)
    if not spans:
        return out
    pod = views.holders.of_holding[rows.holding]
    step = float(views.inv.step_s)
    for p, sp in spans.items():
        at = np.flatnonzero(pod == p)
        for i in at.tolist():
            b = int(rows.bucket[i])
            if b < 0:
                continue
            end = float(rows.bucket_ts[b])
            out[i] = min(float(held[i]), overlap(sp, end - step, end) / 3600.0)
    return out


@dataclass(frozen=True)
class Rules:
    """The thresholds the ledger's causes use (the checks' settings of the same names)."""

    idle_activity: float = 0.05
    busy_util: float = 0.80
    busy_low_activity: float = 0.20
    start_activity: float = 0.05
    start_sustained_buckets: int = 2


def by_row(views: Views, rules: Rules) -> dict[str, npt.NDArray[np.float64]]:
    """Per held row, its GPU-hours under each cause of `CAUSES` (they sum to the row's
    `held_h x fraction`)."""
    inv, rows = views.inv, views.held_rows
    hr, h = inv.hourly, inv.holdings
    frac = h[C.FRACTION].to_numpy(dtype="float64")[rows.holding]
    held = held_hours(inv)[rows.rows]
    act = hr[C.ACT].to_numpy(dtype="float64")[rows.rows]
    out = {c: np.zeros(len(rows.rows)) for c in CAUSES}
    unmeasured = np.isnan(act)
    out["not_measured"] = np.where(unmeasured, held * frac, 0.0)
    rest = np.where(unmeasured, 0.0, held)
    down = np.minimum(restarting_hours(views), rest)
    out["restarting"] = down * frac
    rest = rest - down
    starts = pod_starts(views, rules.start_activity, rules.start_sustained_buckets)
    pod = views.holders.of_holding[rows.holding]
    fa = np.where(pod >= 0, starts.active_bucket[np.maximum(pod, 0)], -1)
    starting = (fa >= 0) & (np.asarray(rows.bucket) < fa)
    out["starting"] = np.where(starting, rest * frac, 0.0)
    rest = np.where(starting, 0.0, rest)
    throttled = _throttled(views, rest, act)
    out["throttled"] = throttled * frac
    rest = rest - throttled
    stalled = _stalled(views, rules, act)
    out["stalled"] = np.where(stalled, rest * frac, 0.0)
    rest = np.where(stalled, 0.0, rest)
    idle = act < rules.idle_activity
    out["idle"] = np.where(idle, rest * frac, 0.0)
    out["productive"] = np.where(idle, 0.0, rest * frac)
    return out


def _throttled(
    views: Views, rest: npt.NDArray[np.float64], act: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Per held row: the hours of it (of `rest`, what the causes above left) lost to
    throttling: its holding's `THROTTLED_LOST` over its fraction, shared out over the holding's
    rows by their busy hours left (`rest x act`), at most `rest` each."""
    h, rows = views.inv.holdings, views.held_rows
    if C.THROTTLED_LOST not in h.columns or h.empty:
        return np.zeros(len(rest))
    frac = h[C.FRACTION].to_numpy(dtype="float64")
    with np.errstate(invalid="ignore", divide="ignore"):
        lost_h = np.nan_to_num(h[C.THROTTLED_LOST].to_numpy(dtype="float64") / frac, nan=0.0)
    busy = rest * np.clip(np.nan_to_num(act, nan=0.0), 0.0, 1.0)
    pos = np.asarray(rows.holding, dtype=np.intp)
    busy_sum = np.bincount(pos, weights=busy, minlength=len(h))
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(busy_sum > 0, lost_h / busy_sum, 0.0)
    out: npt.NDArray[np.float64] = np.minimum(rest, busy * np.maximum(share[pos], 0.0))
    return out


def _stalled(views: Views, rules: Rules, act: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    rows, hr, h = views.held_rows, views.inv.hourly, views.inv.holdings
    profiled = (h[C.ACT_SOURCE] != "DCGM_FI_DEV_GPU_UTIL").to_numpy(dtype=bool)[rows.holding]
    util = hr[C.UTIL].to_numpy(dtype="float64")[rows.rows] if C.UTIL in hr.columns else None
    if util is None:
        return np.zeros(len(rows.rows), dtype=bool)
    sm = hr[C.SM].to_numpy(dtype="float64")[rows.rows] if C.SM in hr.columns else act
    work = np.where(np.isnan(sm), act, sm)
    out: npt.NDArray[np.bool_] = profiled & (util >= rules.busy_util)
    out &= work < rules.busy_low_activity
    return out

"""Build the inventory from a snapshot, in named stages:

1. `Parser` reads every Prometheus answer into arrays over holding keys (`inventory.parse`);
2. `_read_series` takes the hourly series and window statistics from it;
3. `_metric_capabilities` says which metrics exist, and why the others are missing;
4. `_kubernetes` reads the Kubernetes objects, indexed once by kind, into pod, node and gang
   rows, with their capabilities and completeness;
5. `_hourly` joins the hourly series into the hourly table, and `_holdings` the window
   statistics and identities into the holdings table (one row per GPU and holder);
6. `_gpus`, `_warnings`, and the nodes' GPU topologies (`--topology` files read here).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuaudit.core import limits
from gpuaudit.core.errors import SnapshotError
from gpuaudit.core.gcpause import without_gc
from gpuaudit.domain import mig
from gpuaudit.domain.topology import load_dir
from gpuaudit.inventory import (
    attribution,
    claimed,
    container_cpu,
    container_memory,
    dra,
    hami,
    held,
    kube,
    owners,
    prom,
    queues,
    serving_metrics,
    sharing,
    throttling,
)
from gpuaudit.inventory import columns as C
from gpuaudit.inventory import fractions as kai_split
from gpuaudit.inventory import gangs as gang_mod
from gpuaudit.inventory import kai as kai_mod
from gpuaudit.inventory.arrays import Arr, first_times, join_at, last_times, nan_column, regroup
from gpuaudit.inventory.capabilities import Capability
from gpuaudit.inventory.parse import (
    REDUCED,
    XID_EVENT_QUERIES,
    Metric,
    Parser,
    Stat,
    combine,
    from_hourly,
    p2p_rows,
    reduce_stat,
    xid_events,
    xids,
)
from gpuaudit.inventory.tables import (
    GANG_COLUMNS,
    GPU_COLUMNS,
    HEALTH_QUERIES,
    HOLDING_COLUMNS,
    IDENTITY_COLUMNS,
    NODE_COLUMNS,
    P2P_COLUMNS,
    POD_COLUMNS,
    Inventory,
    frame,
)
from gpuaudit.inventory.topologies import node_topologies
from gpuaudit.inventory.window import Narrowed, narrow
from gpuaudit.inventory.window import iso as _iso
from gpuaudit.snapshot import Manifest, Snapshot
from gpuaudit.sources.prometheus import catalogue as queries

if TYPE_CHECKING:
    import pandas as pd

Hourly = tuple[Arr, Arr, Arr, Arr]
_NO_HOURLY: Hourly = (
    np.empty(0, dtype=np.int64),
    np.empty(0),
    np.empty(0),
    np.empty(0),
)
"""No hourly points: what `_Series` holds once its hourly series went to `_hourly`."""
"""(key numbers, bucket end times, values, sample counts) of a range query (see
`Parser.hourly`)."""
COUNT_QUERIES = ("act_count_hourly", "util_count_hourly")
"""The queries of samples per bucket (held time); snapshots before them lack both."""


@dataclass(frozen=True)
class _Series:
    """What the Prometheus answers say, per key number (see `Parser.kid`)."""

    n: int
    """How many keys: every array below is indexed by key number."""
    act_h: Hourly
    """Profiling activity per bucket, with its samples per bucket."""
    util_h: Hourly
    """GPU_UTIL per bucket, with its samples per bucket where no profiling series has that
    bucket (NaN elsewhere)."""
    sm_h: Hourly
    tensor_h: Hourly
    counted: bool
    """Whether the snapshot holds sample counts at all (older ones do not)."""
    act: Metric
    util: Metric
    fb_used: Metric
    fb_free: Metric
    power: Metric
    power_limit: Stat
    """The highest power management limit per key, where it is exported."""
    health: Mapping[str, Stat | None]
    """Holding column -> its window maxima, None where the query is not in the catalogue."""
    xid_max: Mapping[int, float]
    xid_codes: Mapping[int, set[int]]
    xid_msgs: Mapping[int, Mapping[int, str]]
    xid_events: Mapping[int, Mapping[int, float]] | None
    """XID events per code by key number; None when the `xid_events` query was not answered."""
    p2p: list[dict[str, Any]]
    traffic: Mapping[str, Stat]
    """Holding column -> its window figure per key, of figures that cannot be cut in time: TX +
    RX means of link traffic (`nvlink_bps`, `pcie_bps`), and throttling (violation seconds,
    SM clocks: `gpuaudit.inventory.throttling`)."""
    has_prof: Arr
    """Keys with a profiling activity series (window statistics or hourly)."""
    has_util: Arr
    """Keys without one, but with `DCGM_FI_DEV_GPU_UTIL`, that are not MIG instances."""
    mig_blind: Arr
    """MIG instances without a profiling activity series but with `DCGM_FI_DEV_GPU_UTIL`, which
    reads 0 on MIG whatever the work (dcgm-exporter #216): their activity is unknown (NaN), their
    samples still count held time."""
    split_points: Mapping[str, Hourly]
    """Holding column -> the buckets its window figure is made of, of the keys without pod
    labels alone (those a Kubernetes-side join may split): see `_split_points`."""


def _within(h: Hourly, cut: Narrowed | None) -> Hourly:
    """The points of bucket ends inside a narrowed window (all of them when not narrowed)."""
    if cut is None:
        return h
    keep = (h[1] > cut.start) & (h[1] <= cut.end)
    return h[0][keep], h[1][keep], h[2][keep], h[3][keep]


_OWN_READERS = ("xid_max", *XID_EVENT_QUERIES, "p2p_max")
"""Window queries read by their own functions (their rows carry labels beside the identity)."""


def _read_series(p: Parser, cut: Narrowed | None, joinable: bool = True) -> _Series:
    """The series' statistics by key number. `joinable`: whether the snapshot holds pods a
    Kubernetes-side join could split an unlabelled series among (else no `split_points`)."""
    # Key numbers are handed out as series are first seen; every statistic below is an array
    # over them (sized once all answers have been read, so read them all first).
    act_all = p.hourly("act_hourly", "act_count_hourly")
    # GPU_UTIL's counts leave out the buckets with a profiling series (the query's `unless`).
    util_h = _within(p.hourly("util_hourly", "util_count_hourly", act_all[:2]), cut)
    act_h = _within(act_all, cut)
    del act_all
    sm_h, tensor_h = (_within(p.hourly(qid), cut) for qid in ("sm_hourly", "tensor_hourly"))
    power_h = p.hourly("power_hourly")
    for qid, spec in queries.BY_ID.items():
        # Queries grouped by labels of their own (HAMi's) name no DCGM series.
        if spec.kind == "window" and not spec.labels and qid not in _OWN_READERS:
            p.window(qid)
        elif spec.kind == "hourly" and not spec.labels and spec.stat in REDUCED:
            if qid not in _OWN_READERS and qid in p.answers:
                p.reduced(qid)
    xid_max, xid_codes, xid_msgs = xids(p)
    events = xid_events(p) if any(q in p.answers for q in XID_EVENT_QUERIES) else None
    n = len(p.keys)
    if cut is None:
        # Window means from the hourly means (`queries.HOURLY_MEANS`): the same with and without
        # the hourly recording rules.
        # The GPU_UTIL buckets whose samples its counts leave out weigh as many samples as the
        # profiling series of the same GPU and bucket (one scrape writes both); the power
        # buckets as many as either (`_weighed`).
        util_w = _weighed(p, util_h, act_h)
        act, util = combine(p, "act", n, act_h), combine(p, "util", n, util_w)
        power_w = _weighed(p, power_h, act_h, util_w)
        power = combine(p, "power", n, power_w)
        del util_w
        fb_used, fb_free = combine(p, "fb_used", n), combine(p, "fb_free", n)
        health: dict[str, Stat | None] = {
            col: reduce_stat(*p.window(qid), n, "max") if qid in queries.BY_ID else None
            for col, qid in HEALTH_QUERIES.items()
        }
        p2p = p2p_rows(p)
        power_limit = reduce_stat(*p.window("power_limit_max"), n, "max")
    else:
        # Window statistics cover the recorded window: only what the buckets give is kept.
        act, util = from_hourly(act_h, n), from_hourly(util_h, n)
        fb_used = fb_free = power = _missing_metric(n)
        health = dict.fromkeys(HEALTH_QUERIES)
        xid_max, xid_codes, xid_msgs = {}, {}, {}
        events = None
        p2p = []
        power_limit = _missing_metric(n).mx
        power_w = _NO_HOURLY
    del power_h
    in_act_h = np.zeros(n, dtype=bool)
    in_act_h[act_h[0]] = True
    in_util_h = np.zeros(n, dtype=bool)
    in_util_h[util_h[0]] = True
    has_prof = act.mean.present | in_act_h
    is_mig = np.array([bool(p.ident[k].mig_id) for k in range(n)], dtype=bool)
    util_only = ~has_prof & (util.mean.present | in_util_h)
    has_util = util_only & ~is_mig
    split_points = _split_points(p, power_w, (has_prof, has_util), cut) if joinable else {}
    del power_w
    return _Series(
        n=n,
        act_h=act_h,
        util_h=util_h,
        sm_h=sm_h,
        tensor_h=tensor_h,
        counted=any(q in p.answers for q in COUNT_QUERIES),
        act=act,
        util=util,
        fb_used=fb_used,
        fb_free=fb_free,
        power=power,
        power_limit=power_limit,
        health=health,
        xid_max=xid_max,
        xid_codes=xid_codes,
        xid_msgs=xid_msgs,
        xid_events=events,
        p2p=p2p,
        traffic={
            C.NVLINK_BPS: _traffic(p, "nvlink", n) if cut is None else _missing_metric(n).mean,
            C.PCIE_BPS: _traffic(p, "pcie", n) if cut is None else _missing_metric(n).mean,
            **throttling.read(p, n, None if cut is None else (cut.start, cut.end)),
        },
        has_prof=has_prof,
        has_util=has_util,
        mig_blind=util_only & is_mig,
        split_points=split_points,
    )


def _split_points(
    p: Parser, power: Hourly, has: tuple[Arr, Arr], cut: Narrowed | None
) -> dict[str, Hourly]:
    """Holding column -> the buckets (key numbers, bucket ends, values, weights) of the keys
    without pod labels that its window figure is made of, read as the window figure reads
    them: the p95 of activity (the profiling series' where a key has one, else GPU_UTIL's /
    100) and of the framebuffer (each bucket's p95: the figure is the largest), the power
    (bucket means with their samples, an unknown count weighing as much as the mean counted
    bucket, as `from_hourly` weighs it: the figure is their weighted mean) and the violation
    seconds (bucket increases: the figure is their sum). A snapshot that holds a figure's
    older window form (`queries.LEGACY`) has none of its buckets; in a narrowed window, whose
    holdings have the violation seconds alone of these figures, the violation buckets in it
    alone. `has`: which keys have a profiling series, which GPU_UTIL alone (`_Series`). A part
    of a split series (`gpuaudit.inventory.bucketjoin`) takes the figures from its own
    buckets."""
    n = len(p.keys)
    unheld = np.array([not ident.held for ident in p.ident], dtype=bool)
    out: dict[str, Hourly] = {}
    if not unheld.any():
        return out

    def points(qid: str) -> Hourly:
        return _within(p.hourly(qid), cut) if qid in p.answers else _NO_HOURLY

    for col, qid in zip(throttling.COUNTED, throttling.HOURLY, strict=True):
        out[col] = points(qid)
    if cut is not None:
        return _unheld(out, unheld, n)
    has_prof, has_util = has
    act, util = points("act_p95_hourly"), points("util_p95_hourly")
    a, u = has_prof[act[0]], has_util[util[0]]
    out[C.ACT_P95] = (
        np.concatenate([act[0][a], util[0][u]]),
        np.concatenate([act[1][a], util[1][u]]),
        np.concatenate([act[2][a], util[2][u] / 100.0]),
        np.ones(int(a.sum() + u.sum())),
    )
    out[C.FB_USED_P95] = points("fb_used_p95_hourly")
    if "power_sum" not in p.answers and len(power[0]):
        known = np.isfinite(power[3])
        typical = float(np.mean(power[3][known])) if known.any() else 1.0
        out[C.POWER_MEAN] = (*power[:3], np.where(known, power[3], typical))
    return _unheld(out, unheld, n)


def _unheld(points: Mapping[str, Hourly], unheld: Arr, n: int) -> dict[str, Hourly]:
    """`points` of the keys `unheld` alone (of the first `n`), those with any."""
    out: dict[str, Hourly] = {}
    for col, (k, t, v, w) in points.items():
        keep = (k < n) & unheld[np.minimum(k, n - 1)]
        if keep.any():
            out[col] = (k[keep], t[keep], v[keep], w[keep])
    return out


def _split_points_by_holding(s: _Series, hid_of: Arr) -> dict[str, Hourly]:
    """`_Series.split_points` by holding id (of the keys with a holding), each sorted by
    holding, then time."""
    out: dict[str, Hourly] = {}
    for col, (k, t, v, w) in s.split_points.items():
        keep = hid_of[k] >= 0
        hid, (ts, vs, ws) = regroup(k[keep], [t[keep], v[keep], w[keep]], hid_of)
        out[col] = (hid, ts, vs, ws)
    return out


def _weighed(p: Parser, h: Hourly, *by: Hourly) -> Hourly:
    """`h` with each point's unknown sample count (NaN) taken from the first of `by` (hourly
    points with counts) that has a count at the same key and bucket."""
    k, t, v, w = h
    for other in by:
        missing = np.flatnonzero(np.isnan(w))
        if not len(missing):
            break
        known = np.isfinite(other[3])
        got, _ = join_at(
            other[0][known], other[1][known], other[3][known], k[missing], t[missing], *p.grid
        )
        w = w.copy() if w is h[3] else w
        w[missing] = got
    return k, t, v, w


def _traffic(p: Parser, link: str, n: int) -> Stat:
    """TX + RX mean bytes per second of one link per key: the sum of the two window means
    where both are measured, the one measured where only one is."""
    tx, rx = combine(p, f"{link}_tx", n).mean, combine(p, f"{link}_rx", n).mean
    values = np.where(tx.present, tx.values, 0.0) + np.where(rx.present, rx.values, 0.0)
    return Stat(values, tx.present | rx.present)


def _missing_metric(n: int) -> Metric:
    none = Stat(np.full(n, np.nan), np.zeros(n, dtype=bool))
    return Metric(none, none, none, none, False)


def _narrowed_capabilities(
    cut: Narrowed, caps: set[Capability], missing: dict[Capability, str], by_bucket: bool = False
) -> None:
    """What a narrowed window loses: window-only statistics, and the Kubernetes state at its
    end when it ends before the objects were read. `by_bucket`: the violation counters'
    increases were recorded per bucket (`throttling.HOURLY`), and the narrowed window has
    those of its own buckets."""
    whole = "were recorded for the snapshot's whole window only and cannot be narrowed to"
    for cap, what in (
        (Capability.FRAMEBUFFER, "framebuffer statistics (DCGM_FI_DEV_FB_USED, FB_FREE)"),
        (Capability.GPU_HEALTH, "GPU-health maxima (XID, row remapping, ECC)"),
        (Capability.P2P_STATUS, "NVLink P2P status values"),
        (Capability.THROTTLING, "violation counters' increases (DCGM_FI_DEV_*_VIOLATION)"),
    ):
        if cap is Capability.THROTTLING and by_bucket:
            continue
        caps.discard(cap)
        missing[cap] = f"{what} {whole} {_iso(cut.start)} to {_iso(cut.end)}"
    if cut.earlier_end:
        for cap in [c for c in caps if c.value.startswith("kubernetes.")]:
            caps.discard(cap)
            name = cap.value.removeprefix("kubernetes.")
            missing[cap] = (
                f"the Kubernetes {name} were read at the snapshot's end "
                f"({_iso(cut.recorded_end)}), not at --end {_iso(cut.end)}"
            )


def _metric_capabilities(s: _Series) -> tuple[set[Capability], dict[Capability, str]]:
    """The metric capabilities the series give, and why each missing one is missing."""
    caps: set[Capability] = set()
    missing: dict[Capability, str] = {}
    if s.act.mean.present.any() or len(s.act_h[0]):
        caps.update({Capability.PROFILING, Capability.ACTIVITY})
    if s.util.mean.present.any() or len(s.util_h[0]):
        caps.update({Capability.GPU_UTIL, Capability.ACTIVITY})
    if s.fb_used.mean.present.any() and s.fb_free.mean.present.any():
        caps.add(Capability.FRAMEBUFFER)
    if Capability.ACTIVITY not in caps:
        missing[Capability.ACTIVITY] = (
            "no DCGM_FI_PROF_GR_ENGINE_ACTIVE or DCGM_FI_DEV_GPU_UTIL series in the window"
        )
    if len(s.sm_h[0]):
        caps.add(Capability.SM_ACTIVE)
    if len(s.tensor_h[0]):
        caps.add(Capability.TENSOR_ACTIVE)
    if Capability.PROFILING not in caps:
        missing[Capability.PROFILING] = "no DCGM_FI_PROF_* series (profiling module not loaded?)"
    if Capability.FRAMEBUFFER not in caps:
        missing[Capability.FRAMEBUFFER] = "no DCGM_FI_DEV_FB_USED/FB_FREE series in the window"
    if s.xid_max or any(h is not None and h.present.any() for h in s.health.values()):
        caps.add(Capability.GPU_HEALTH)
    else:
        missing[Capability.GPU_HEALTH] = (
            "no DCGM_FI_DEV_XID_ERRORS, row-remap or ECC series in the window "
            "(are they in dcgm-exporter's counters CSV?)"
        )
    if Capability.GPU_HEALTH in caps and s.xid_events is not None:
        caps.add(Capability.XID_EVENTS)
    elif Capability.GPU_HEALTH in caps:
        missing[Capability.XID_EVENTS] = (
            "XID events were not counted (no xid_events_hourly answer in the snapshot); each XID "
            "code seen counts as one event"
        )
    if s.p2p:
        caps.add(Capability.P2P_STATUS)
    if any(s.traffic[c].present.any() for c in throttling.COUNTED):
        caps.add(Capability.THROTTLING)
    else:
        missing[Capability.THROTTLING] = throttling.MISSING
    return caps, missing


@dataclass(frozen=True)
class _Kube:
    """The Kubernetes side of the inventory."""

    pod_rows: list[dict[str, Any]]
    """Pod rows (`kube.pod_row`) with their gang ids."""
    node_rows: list[dict[str, Any]]
    gangs: list[gang_mod.Gang]
    capabilities: set[Capability]
    missing: dict[Capability, str]
    incomplete: list[str]
    """Reasons the pods or nodes list is incomplete that the manifest does not give yet, and
    why figures were ignored."""
    notes: list[str]
    """Each figure of an object that was ignored, a sentence each (shown as warnings)."""
    queues: queues.Queues
    claims: dra.Claims
    """Devices pods hold through DRA ResourceClaims."""
    fractions: kai_mod.Fractions = kai_mod.Fractions()
    """KAI Scheduler's reservation pods and the fraction pods of each shared GPU."""


def _unique(rows: list[dict[str, Any]], key: tuple[str, ...]) -> list[dict[str, Any]]:
    """`rows` with only the first of each key: a list that repeated itself (a server handing out
    the same page again) must not count an object twice."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for r in rows:
        k = tuple(r[c] for c in key)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


def _kubernetes(snap: Snapshot, objects: kube.Objects) -> _Kube:
    """Pods, nodes and gangs from the objects (by list key), and what the lists say about
    the data: which were read, and which were cut short."""
    man = snap.manifest
    states = man.get("objects", {}) if isinstance(man.get("objects"), Mapping) else {}
    incomplete: list[str] = []
    for key in ("pods", "nodes"):
        state = str(states.get(key, "ok"))
        if key in snap.kubernetes and state.startswith("incomplete"):
            reason = f"the Kubernetes {key} list is {state}"
            if reason not in man.incomplete_reasons:
                incomplete.append(reason)
    caps: set[Capability] = set()
    missing: dict[Capability, str] = {}
    for key, cap in (("pods", Capability.KUBERNETES_PODS), ("nodes", Capability.KUBERNETES_NODES)):
        if key in snap.kubernetes:
            caps.add(cap)
        else:
            missing[cap] = str(states.get(key) or f"{key} were not read from the Kubernetes API")
    for key in snap.kubernetes:
        cap_of = Capability.of_list(key)
        if cap_of is not None:
            caps.add(cap_of)
    for key in gang_mod.GANG_LISTS:
        cap_of = Capability.of_list(key)
        if key not in snap.kubernetes and cap_of is not None:
            missing[cap_of] = str(states.get(key) or f"{key} were not read")
    notes: list[str] = []
    limit = limits.NODE_GPUS.value()
    pod_rows = _unique(
        [kube.pod_row(o, notes, limit) for o in objects.get("pods", ())], (C.NAMESPACE, C.POD)
    )
    node_rows = _unique(
        [kube.node_row(o, notes, limit) for o in objects.get("nodes", ())], (C.NODE,)
    )
    gang_list, pod_gang = gang_mod.build(objects, notes)
    queue_caps, queue_missing = queues.capabilities(snap.kubernetes, states)
    caps |= queue_caps
    missing.update(queue_missing)
    for r in pod_rows:
        r[C.GANG] = pod_gang.get((r[C.NAMESPACE], r[C.POD]), "")
    queue_objects = queues.build(objects, snap.kubernetes, pod_gang, notes)
    unread = (
        ""
        if "resourceslices" in snap.kubernetes
        else str(states.get("resourceslices") or "the snapshot has none")
    )
    claims = dra.read(objects, notes, unread)
    _count_claimed(pod_rows, claims, limit)
    fractions = kai_mod.read(objects, notes)
    if notes:
        incomplete.append(
            f"{len(notes)} figures of Kubernetes objects could not be read or were larger than "
            "a cluster can hold, and were ignored (see the warnings)"
        )
    return _Kube(
        pod_rows=pod_rows,
        node_rows=node_rows,
        gangs=gang_list,
        capabilities=caps,
        missing=missing,
        incomplete=incomplete,
        notes=notes,
        queues=queue_objects,
        claims=claims,
        fractions=fractions,
    )


def _count_claimed(pod_rows: list[dict[str, Any]], claims: dra.Claims, limit: int) -> None:
    """Devices a pod holds through DRA claims count among its GPUs (`gpu_request`,
    `mig_request`), as the Kubernetes-side views count a pod's GPUs."""
    held_by = dra.per_pod(claims, limit)
    for r in pod_rows:
        got = held_by.get((r[C.NAMESPACE], r[C.POD]))
        if got is None:
            continue
        r[C.GPU_REQUEST] = min(float(limit), r[C.GPU_REQUEST] + got.gpus)
        mig_req = {
            part.split("=", 1)[0]: float(part.split("=", 1)[1])
            for part in str(r[C.MIG_REQUEST]).split(",")
            if "=" in part
        }
        for prof, n in (got.mig or {}).items():
            mig_req[prof] = mig_req.get(prof, 0.0) + n
        r[C.MIG_REQUEST] = ",".join(f"{k}={v:g}" for k, v in sorted(mig_req.items()))


def _node_resolver(objects: kube.Objects, api_nodes: set[str]) -> Callable[[prom.Identity], str]:
    """The node a series' GPU sits on. `Hostname` is the node when dcgm-exporter has NODE_NAME,
    but the exporter's own pod name otherwise; then the scrape address (`instance`) finds the
    node: the exporter pod with that IP (its nodeName), or a node with that InternalIP
    (hostNetwork exporters)."""
    by_ip: dict[str, str] = {}
    for obj in objects.get("nodes", ()):
        name = str(obj["metadata"].get("name", ""))
        status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
        assert isinstance(status, Mapping)
        for addr in status.get("addresses", []) or []:
            if isinstance(addr, Mapping) and addr.get("type") == "InternalIP":
                by_ip[str(addr.get("address", ""))] = name
    for obj in objects.get("pods", ()):
        spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
        status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
        assert isinstance(spec, Mapping) and isinstance(status, Mapping)
        ip, node = status.get("podIP"), spec.get("nodeName")
        if isinstance(ip, str) and ip and isinstance(node, str) and node:
            by_ip.setdefault(ip, node)

    def where(ident: prom.Identity) -> str:
        if not api_nodes or ident.host in api_nodes:
            return ident.host
        ip = ident.instance.rsplit(":", 1)[0].strip("[]") if ident.instance else ""
        return by_ip.get(ip, ident.host)

    return where


@dataclass(frozen=True)
class _Spans:
    """Per holding id: hours held (samples x scrape interval), and the first and last bucket
    end seen; and how held time was found."""

    hours: Arr
    first: Arr
    last: Arr
    intervals: held.Intervals
    rounded: int
    """Buckets whose held time is counted as a whole bucket (no sample count, or no interval
    known)."""


@dataclass(frozen=True)
class _Grid:
    """The window's bucket grid, and each holding id's scrape target (the groups of
    `held.detect_chunks`)."""

    start: float
    end: float
    step: int
    target: Arr
    targets: int


def _held_hours(samples: Arr, k: Arr, t: Arr, grid: _Grid) -> tuple[Arr, held.Intervals, Arr]:
    """Hours held in each row (holding id `k`, bucket end `t`): its samples times its
    target's scrape interval, detected from the rows' counts; a whole bucket where either is
    unknown (and those rows marked)."""
    from gpuaudit.inventory.arrays import slices

    cand = held.covered(k, t, grid.start, grid.end, grid.step)
    cand &= np.isfinite(samples)
    parts = slices(len(k))

    def chunks() -> Iterator[tuple[Arr, Arr]]:
        for sl in parts:
            c = cand[sl]
            yield grid.target[k[sl][c]], samples[sl][c]

    intervals = held.detect_chunks(chunks, grid.targets, grid.step)
    out = np.empty(len(k))
    for sl in parts:
        out[sl] = intervals.of_group[grid.target[k[sl]]]
    out *= samples
    rounded = ~np.isfinite(out)
    out[rounded] = float(grid.step)
    out /= 3600.0
    return out, intervals, rounded


def _hourly(
    s: _Series, src: list[Hourly | None], hid_of: Arr, grid: _Grid
) -> tuple[dict[str, Any], _Spans]:
    """The hourly table's columns (sorted by holding, then time), and each holding's span.
    `src`: the hourly series (activity, GPU_UTIL, SM, tensor; `s` holds none), each dropped
    from the list once read, so that its arrays are let go while the table is made."""
    n = len(grid.target)
    start, step = grid.start, grid.step
    act_h, util_h = src[0], src[1]
    assert act_h is not None and util_h is not None
    # Each hourly source with holding ids, sorted by holding, then time (the activity series
    # first, let go before GPU_UTIL's are regrouped: their arrays are never all held at once).
    # The hourly table: a holding's activity series (GPU_UTIL / 100 where it has no profiling
    # series), with GPU_UTIL, SM and tensor activity of the same buckets beside it. Samples
    # of the activity series in each row: profiling counts for keys with profiling, GPU_UTIL
    # counts for the others.
    use_util = (s.has_util | s.mig_blind)[util_h[0]]
    if use_util.any():
        util_act = np.where(s.mig_blind[util_h[0][use_util]], np.nan, util_h[2][use_util] / 100.0)
        cols = [
            np.concatenate([act_h[0], util_h[0][use_util]]),
            np.concatenate([act_h[1], util_h[1][use_util]]),
            np.concatenate([act_h[2], util_act]),
            np.concatenate([act_h[3], util_h[3][use_util]]),
        ]
        del util_act
    else:  # every key with GPU_UTIL has profiling: the activity series alone, not copied
        cols = list(act_h)
    del use_util
    src[0] = act_h = None  # all in the table once regrouped
    base_k, (base_t, base_v, samples) = regroup(cols[0], cols[1:], hid_of)
    del cols
    uk, (ut, u_val, u_samples) = regroup(util_h[0], util_h[1:], hid_of)
    u_val /= 100.0
    src[1] = util_h = None
    # The table's columns in their order (GPU_UTIL's joined below).
    data: dict[str, Any] = {C.HOLDING: base_k, C.TS: base_t, C.ACT: base_v, C.UTIL: None}
    # SM and tensor activity (as long as the activity series where profiling is on): each
    # series made into its column and let go before the next; before the GPU_UTIL join, so
    # that the last of the sources (and any side-file they were read from) are let go first.
    for col, i in ((C.SM, 2), (C.TENSOR, 3)):
        h = src[i]
        src[i] = None
        assert h is not None
        k, (t, v) = regroup(h[0], h[1:3], hid_of)
        # Even an empty view of a side-file's arrays keeps the whole mapped file resident.
        del h
        if not len(k):  # no such series (profiling off): a column that takes no memory
            data[col] = nan_column(len(base_k))
            continue
        data[col], _ = join_at(k, t, v, base_k, base_t, start, step)
        del k, t, v
    data[C.UTIL], util_hit = join_at(uk, ut, u_val, base_k, base_t, start, step)
    del u_val
    held_h, intervals, rounded = _held_hours(samples, base_k, base_t, grid)
    del samples
    data[C.HELD_H] = held_h
    extra_h, extra_rounded = _util_only_hours(
        (uk, ut, u_samples), (base_k, base_t, util_hit), intervals, grid
    )
    hours = np.bincount(base_k, weights=held_h, minlength=n) + extra_h
    first = np.fmin(first_times(base_k, base_t, n), first_times(uk, ut, n))
    last = np.fmax(last_times(base_k, base_t, n), last_times(uk, ut, n))
    return data, _Spans(hours, first, last, intervals, int(rounded.sum()) + extra_rounded)


def _util_only_hours(
    util: tuple[Arr, Arr, Arr], base: tuple[Arr, Arr, Arr], intervals: held.Intervals, grid: _Grid
) -> tuple[Arr, int]:
    """Hours held per holding in GPU_UTIL buckets of profiled keys that have no activity row
    (profiling missing for a while), from `util` (its rows' holding, time and sample count)
    and `base` (the hourly rows' holding, time, and whether they have a GPU_UTIL value); and
    how many of those buckets count as whole buckets."""
    n = len(grid.target)
    base_k, base_t, util_hit = base
    extra_n = np.bincount(util[0], minlength=n) - np.bincount(base_k[util_hit], minlength=n)
    if not extra_n.any():
        return np.zeros(n), 0
    _, in_base = join_at(base_k, base_t, None, util[0], util[1], grid.start, grid.step)
    ek, samples = util[0][~in_base], util[2][~in_base]
    secs = samples * intervals.of_group[grid.target[ek]]
    rounded = ~np.isfinite(secs)
    secs = np.where(rounded, float(grid.step), secs)
    return np.bincount(ek, weights=secs, minlength=n) / 3600.0, int(rounded.sum())


def _identities(
    p: Parser,
    s: _Series,
    order: list[int],
    pod_index: Mapping[tuple[str, str], Mapping[str, Any]],
    where: Callable[[prom.Identity], str],
    methods: Mapping[int, str],
) -> tuple[dict[str, list[Any]], Arr]:
    """The identity columns of every holding, in holding order, and each holding's fraction of
    a GPU (by key number)."""
    cols: dict[str, list[Any]] = {c: [] for c in IDENTITY_COLUMNS}
    fractions = np.empty(s.n)
    for k in order:
        ident = p.ident[k]
        model = ident.model
        fraction = mig.slice_fraction(ident.mig_profile, model) if ident.mig_profile else 1.0
        pod = pod_index.get((ident.namespace, ident.pod)) if ident.held else None
        node = (pod[C.NODE] if pod and pod[C.NODE] else "") or where(ident)
        for col, val in (
            (C.SLOT, ident.slot),
            (C.UUID, ident.uuid),
            (C.GPU_INDEX, ident.gpu_index),
            (C.MIG_ID, ident.mig_id),
            (C.MIG_PROFILE, ident.mig_profile),
            (C.MODEL, model),
            (C.NODE, node),
            (C.NAMESPACE, ident.namespace),
            (C.POD, ident.pod),
            (C.CONTAINER, ident.container),
            (C.HELD, ident.held),
            (C.ATTRIBUTION, methods.get(k, "")),
            (C.CLUSTER, ident.cluster),
            (C.XID_CODES, ",".join(str(c) for c in sorted(s.xid_codes.get(k, ())))),
            (
                C.XID_MSG,
                "; ".join(f"{c}: {m}" for c, m in sorted(s.xid_msgs.get(k, {}).items())),
            ),
            (
                C.XID_EVENTS,
                ",".join(f"{c}:{n:g}" for c, n in sorted((s.xid_events or {}).get(k, {}).items())),
            ),
        ):
            cols[col].append(val)
        fractions[k] = fraction
    return cols, fractions


def _holdings(
    s: _Series, cols: Mapping[str, list[Any]], fraction: Arr, span: _Spans, order: Arr, step: int
) -> pd.DataFrame:
    """The holdings table: identity columns and window statistics, one row per holding id
    (`order`: the key number of each)."""
    import pandas as pd

    n = s.n
    act, util, fb_used, fb_free = s.act, s.util, s.fb_used, s.fb_free
    has_prof, has_util = s.has_prof, s.has_util

    def by_hid(vals: Arr) -> Arr:
        """Per key number -> per holding id."""
        out: Arr = vals[order]
        return out

    def pick(prof: Any, dev: Any, none: Any) -> Arr:
        """The profiling figure where a key has one, else the GPU_UTIL one, else `none`."""
        out: Arr = np.where(has_prof, prof, np.where(has_util, dev, none))
        return out

    hours = span.hours
    fractions = by_hid(fraction)
    used_mean, free_mean = fb_used.mean.get(n), fb_free.mean.get(n)
    data: dict[str, Any] = {
        C.HOLDING: np.arange(len(order), dtype=np.int64),
        **{c: cols[c] for c in IDENTITY_COLUMNS if c not in (C.XID_CODES, C.XID_MSG, C.XID_EVENTS)},
        C.HELD: np.array(cols[C.HELD], dtype=bool),
        C.FRACTION: fractions,
        C.REPLICAS: np.ones(len(order)),
        C.FIRST_TS: span.first - step,
        C.LAST_TS: span.last,
        C.HOURS: hours,
        C.GPU_HOURS: hours * fractions,
        C.ACT_MEAN: by_hid(pick(act.mean.get(n), util.mean.get(n) / 100, np.nan)),
        C.ACT_MAX: by_hid(pick(act.mx.get(n), util.mx.get(n) / 100, np.nan)),
        C.ACT_P95: by_hid(pick(act.p95.get(n), util.p95.get(n) / 100, np.nan)),
        C.ACT_COUNT: by_hid(pick(act.count.get(n), util.count.get(n), np.nan)),
        C.ACT_SOURCE: by_hid(pick(queries.ACT_PROF, queries.UTIL, "").astype(object)).tolist(),
        C.ACT_APPROX: by_hid(pick(act.approx, util.approx, False).astype(bool)),
        C.UTIL_MEAN: by_hid(util.mean.get(n)),
        C.FB_USED_MEAN: by_hid(used_mean),
        C.FB_USED_MAX: by_hid(fb_used.mx.get(n)),
        C.FB_USED_P95: by_hid(fb_used.p95.get(n)),
        C.FB_FREE_MEAN: by_hid(free_mean),
        C.MEM_TOTAL_MIB: by_hid(used_mean + free_mean),
        C.POWER_MEAN: by_hid(s.power.mean.get(n)),
        C.POWER_LIMIT: by_hid(s.power_limit.get(n)),
        C.XID_MAX: by_hid(np.array([s.xid_max.get(k, np.nan) for k in range(n)], dtype=np.float64)),
        C.XID_CODES: cols[C.XID_CODES],
        C.XID_MSG: cols[C.XID_MSG],
        C.XID_EVENTS: cols[C.XID_EVENTS],
        **{
            col: by_hid(st.get(n)) if st is not None else np.full(len(order), np.nan)
            for col, st in s.health.items()
        },
        **{col: by_hid(st.get(n)) for col, st in s.traffic.items()},
    }
    out: pd.DataFrame = pd.DataFrame(data, columns=HOLDING_COLUMNS)
    return out


def _gpus(holdings: pd.DataFrame) -> pd.DataFrame:
    """One row per GPU or MIG instance: its first holding, held ones first."""
    if holdings.empty:
        return frame(GPU_COLUMNS)
    out: pd.DataFrame = (
        holdings.sort_values([C.SLOT, C.HELD], ascending=[True, False])
        .groupby(C.SLOT, as_index=False)
        .first()[GPU_COLUMNS]
    )
    return out


def _warnings(man: Manifest, p: Parser, holdings: pd.DataFrame, k: _Kube) -> tuple[str, ...]:
    warnings: list[str] = list(man.warnings)
    warnings.extend(_left_out(p))
    warnings.extend(k.notes[:_NOTES])
    if len(k.notes) > _NOTES:
        warnings.append(f"... and {len(k.notes) - _NOTES} more such Kubernetes figures")
    if holdings.empty:
        warnings.append(
            "no DCGM series were found in the window: check that dcgm-exporter is scraped, "
            "the window (--window, --end) and --cluster-label"
        )
    return tuple(warnings)


_NOTES = 20
"""Ignored Kubernetes figures listed one by one; the rest are counted."""


def _left_out(p: Parser) -> list[str]:
    """What the backend sent that could not be used and was left out, a sentence each. Any of
    it makes the audit incomplete: its figures cover less than the backend sent."""
    out = []
    if p.dropped:
        out.append(f"{p.dropped} sample values were NaN, infinite or malformed and were left out")
    if p.malformed:
        out.append(
            f"{p.malformed} malformed series (labels that are not texts, or no list of points) "
            "were left out"
        )
    out.extend(
        f"{n} points of {qid} lay outside the snapshot's window and were left out "
        "(the backend answered for times it was not asked about)"
        for qid, n in sorted(p.outside.items())
    )
    out.extend(
        f"{n} points of {qid} lay inside the snapshot's window but off its bucket grid (its "
        "start plus whole steps) and were left out: a range query's answer holds its own "
        "steps alone, so they were not the backend's answer (an edited snapshot?)"
        for qid, n in sorted(p.off_grid.items())
    )
    out.extend(
        f"{r.n} {'window means' if what.endswith('_mean') else 'values'} of {what} "
        f"({r.metric}) were outside what it can read ({r.lo:g} to {r.hi:g}) and were left "
        "out: the backend's data is not what DCGM reports (a percentage where a ratio belongs, "
        "or sums that overflow)"
        for what, r in sorted(p.refused.items())
    )
    return out


def _left_out_reason(p: Parser) -> list[str]:
    """The reason the audit is incomplete when data was left out (`_left_out`)."""
    parts = [
        *([f"{p.dropped} unusable samples"] if p.dropped else []),
        *([f"{p.malformed} malformed series"] if p.malformed else []),
        *(f"{n} points of {qid} outside the window" for qid, n in sorted(p.outside.items())),
        *(f"{n} points of {qid} off the bucket grid" for qid, n in sorted(p.off_grid.items())),
        *(f"{r.n} values of {what} out of range" for what, r in sorted(p.refused.items())),
    ]
    if not parts:
        return []
    return [f"part of the backend's data was unusable and was left out: {', '.join(parts)}"]


def _grid(p: Parser, order: list[int], start: float, end: float, step: int) -> _Grid:
    """The bucket grid, with each holding id's scrape target: its series' `instance` (the
    exporter a scrape reads), numbered."""
    names: dict[str, int] = {}
    target = np.array(
        [names.setdefault(p.ident[k].instance, len(names)) for k in order], dtype=np.int32
    )
    return _Grid(start, end, step, target, max(1, len(names)))


def _held_note(s: _Series, span: _Spans) -> tuple[str, ...]:
    """A warning when some held time is counted in whole buckets, saying why."""
    if not span.rounded:
        return ()
    effect = (
        "allocated and idle GPU-hours, cost and the hours in findings may be overstated by up "
        "to one bucket per holding"
    )
    if not s.counted:
        return (
            "held time is counted in whole --step buckets (approximate): this snapshot has no "
            "per-bucket sample counts (act_count_hourly, util_count_hourly; written by an older "
            f"gpuaudit); {effect}",
        )
    if span.intervals.fleet is None:
        return (
            "held time is counted in whole --step buckets (approximate): the scrape interval "
            "could not be detected, as no series has data in a bucket and both its neighbours; "
            f"{effect}",
        )
    return (
        f"held time of {span.rounded} buckets is counted as whole --step buckets "
        "(approximate): they have activity samples but no sample count",
    )


def _frame(columns: dict[str, Any]) -> pd.DataFrame:
    """A table of these column arrays as they are: each its own block, none copied (the
    hourly table's millions of rows would otherwise be copied into one block at its peak)."""
    import pandas as pd

    out: pd.DataFrame = pd.DataFrame(columns, copy=False)
    return out


def _gang_table(gang_list: list[gang_mod.Gang]) -> pd.DataFrame:
    import pandas as pd

    out: pd.DataFrame = pd.DataFrame(
        [
            {
                C.GANG_ID: g.id,
                C.GANG_KIND: g.kind,
                C.NAMESPACE: g.namespace,
                C.GANG_NAME: g.name,
                C.NEEDED: float(g.needed) if g.needed is not None else float("nan"),
                C.GANG_PHASE: g.phase,
                C.GANG_SIGNAL: g.signal,
                C.GANG_SOURCE: g.source,
            }
            for g in gang_list
        ],
        columns=GANG_COLUMNS,
    )
    return out


@without_gc
def build(
    snap: Snapshot,
    topology: Path | None = None,
    window: tuple[float, float] | None = None,
    *,
    consume: bool = False,
) -> Inventory:
    """Join a snapshot's raw answers into the inventory tables. `consume`: empty the
    snapshot's Prometheus answers once they are read into series, and its Kubernetes lists once
    they are read into rows, for a caller that holds the snapshot only to build (both are
    large for a large fleet, and are freed before the build's peak).

    `topology` is a folder of `nvidia-smi topo -m` outputs (`--topology`: `<node>.txt` or
    `<nvidia.com/gpu.product>.txt`); each node's GPU links are resolved from it, the built-in
    table and DCGM P2P status into `Inventory.topologies`. A folder that cannot be read is a
    `ConfigError`. `window` (start, end) narrows the audit to that part of the recorded window
    (see `gpuaudit.inventory.window`); outside it, or off its bucket grid, is a
    `ConfigError`."""
    import pandas as pd

    files = load_dir(topology) if topology is not None else None
    man = snap.manifest
    recorded = man["window"]
    cut = narrow(recorded, window)
    step = int(recorded["step"])
    start = float(recorded["start"]) if cut is None else cut.start
    end = float(recorded["end"]) if cut is None else cut.end
    p = Parser(snap)
    # Without pods (`--no-kubernetes`) no series is split: its buckets' figures are not kept.
    s = _read_series(p, cut, bool(snap.kubernetes.get("pods")))
    hami_use = hami.usage(p, None if cut is None else (cut.start, cut.end))
    served = serving_metrics.read(
        p.answers, man.prometheus_url, p.cluster_label, serving_metrics.query_of(snap.prometheus)
    )
    # The most memory each GPU pod's container used: a window maximum, which a window cut in
    # time cannot narrow (it is then not measured).
    mem_use, mem_answered = container_memory.used(p.answers, p.cluster_label)
    cpu_use, cpu_answered = container_cpu.usage(
        p.answers, p.cluster_label, None if cut is None else (cut.start, cut.end)
    )
    by_bucket = any(q in p.answers for q in throttling.HOURLY)
    if consume:
        p.release()
        snap.prometheus.clear()
    caps, missing = _metric_capabilities(s)
    if cpu_use:
        caps.add(Capability.CONTAINER_CPU)
    else:
        missing[Capability.CONTAINER_CPU] = (
            container_cpu.MISSING_SERIES if cpu_answered else container_cpu.MISSING_ANSWER
        )
    objects = kube.index(snap.kubernetes)
    k = _kubernetes(snap, objects)
    walked = owners.build(snap.kubernetes, man)
    k_caps, k_missing = set(k.capabilities), dict(k.missing)
    if cut is not None:
        _narrowed_capabilities(cut, caps, missing, by_bucket)
        _narrowed_capabilities(cut, k_caps, k_missing)
    pod_index = {(r[C.NAMESPACE], r[C.POD]): r for r in k.pod_rows}
    where = _node_resolver(objects, {r[C.NODE] for r in k.node_rows})
    hami_kube = hami.read(objects)
    memory = container_memory.ContainerMemory(
        {} if cut is not None else mem_use,
        container_memory.limits(objects),
        mem_answered,
        container_memory.MISSING_NARROWED if cut is not None else "",
    )
    cpu = container_cpu.ContainerCpu(cpu_use, container_cpu.resources(objects), cpu_answered)
    del objects
    if consume:  # every object is in rows now: the parsed lists, large in a large fleet, go
        snap.kubernetes.clear()
    s, methods, dra_notes = claimed.join(p, s, k.claims, pod_index, replace)
    s, kai_weights, kai_notes, kai_ran = kai_split.split(
        p, s, k.fractions, pod_index, methods, replace
    )
    dra_notes.extend(kai_notes)  # warnings of joining series to their pods, shown together
    s, tenants = hami.join(p, s, hami_kube, hami_use, pod_index, methods, replace)
    # Holdings: every key seen (with data in a narrowed window), numbered in key order (the
    # holding id is the row).
    order = sorted(_alive(s, cut), key=p.keys.__getitem__)
    hid_of = np.full(s.n, -1, dtype=np.int64)
    hid_of[order] = np.arange(len(order), dtype=np.int64)
    # The hourly series go to `_hourly` alone, which lets each go once read.
    src: list[Hourly | None] = [s.act_h, s.util_h, s.sm_h, s.tensor_h]
    s = replace(s, act_h=_NO_HOURLY, util_h=_NO_HOURLY, sm_h=_NO_HOURLY, tensor_h=_NO_HOURLY)
    hourly_data, span = _hourly(s, src, hid_of, _grid(p, order, start, end, step))
    del src
    hami.clip(tenants, hourly_data, span.hours, hid_of, step)
    kai_split.clip(kai_ran, hourly_data, span.hours, hid_of, step)
    cols, fractions = _identities(p, s, order, pod_index, where, methods)
    kai_split.weigh(fractions, kai_weights)
    hami.fractions(tenants, fractions)
    holdings = _holdings(s, cols, fractions, span, np.array(order, dtype=np.int64), step)
    nodes = pd.DataFrame(k.node_rows, columns=NODE_COLUMNS)
    # A node HAMi shares advertises each GPU its split count times: its GPUs are those it
    # registered.
    registered = Counter(d.node for d in hami_kube.devices.values())
    nodes = sharing.with_split_devices(nodes, registered)
    pods = pd.DataFrame(k.pod_rows, columns=POD_COLUMNS)
    gpus = _gpus(holdings)
    shared = sharing.by_node(nodes, holdings)
    holdings, join_notes = attribution.kubernetes_join(
        holdings, hourly_data, pods, shared, (start, end, step), _split_points_by_holding(s, hid_of)
    )
    dra_notes.extend(join_notes)  # shown with the other warnings of joining series to pods
    attribution.share(holdings, hourly_data, shared, step)
    throttling.derive(holdings)
    tenancy, hami_caps, hami_missing, hami_notes = hami.tenancy(tenants, holdings, hid_of)
    p2p = pd.DataFrame(s.p2p, columns=P2P_COLUMNS)
    reasons = [*man.incomplete_reasons, *_left_out_reason(p), *k.incomplete]
    if kai_notes:
        reasons.append(kai_split.incomplete(kai_notes))
    narrowed = () if cut is None else (cut.note(),)
    return Inventory(
        window_start=start,
        window_end=end,
        step_s=step,
        cluster=str(man.get("cluster", "")),
        gpus=gpus,
        holdings=holdings,
        hourly=_frame(hourly_data),
        hami=tenancy,
        serving=served,
        memory=memory,
        cpu=cpu,
        pods=pods,
        nodes=nodes,
        capabilities=frozenset(caps | k_caps | hami_caps),
        missing={**missing, **k_missing, **hami_missing},
        warnings=_warnings(man, p, holdings, k)
        + tuple(dra_notes)
        + tuple(hami_notes)
        + narrowed
        + _held_note(s, span),
        complete=man.complete and not reasons,
        incomplete_reasons=tuple(reasons),
        gangs=_gang_table(k.gangs),
        p2p=p2p,
        topologies=node_topologies(holdings, nodes, p2p, files),
        queues=k.queues,
        owners=walked,
        scrape_interval_s=span.intervals.fleet,
        held_time_rounded=span.rounded > 0,
        p95_of_window=any(
            f"{m}_p95" in p.answers and f"{m}_p95_hourly" not in p.answers
            for m in ("act", "util", "fb_used")
        ),
        cluster_label=p.cluster_label,
        clusters=_clusters(man, p),
    )


def _clusters(man: Manifest, p: Parser) -> tuple[str, ...]:
    """The clusters of a scan of every cluster: those discovery listed, and those the series
    name (a cluster whose series all fell outside the window is still listed, with nothing)."""
    if not p.cluster_label:
        return ()
    caps = man.get("capabilities", {})
    listed = caps.get("clusters") if isinstance(caps, Mapping) else None
    names = {c for c in listed if isinstance(c, str) and c} if isinstance(listed, list) else set()
    names |= p.clusters
    if len(names) > limits.CLUSTERS.value():
        raise SnapshotError(
            f"the snapshot lists {len(names):,} clusters, more than the "
            f"{limits.CLUSTERS.value():,} one audit holds ({limits.CLUSTERS.env})"
        )
    return tuple(sorted(names))


def _alive(s: _Series, cut: Narrowed | None) -> range | list[int]:
    """The key numbers that make holdings: all of them, or on a narrowed window those with
    hourly data inside it."""
    if cut is None:
        return range(s.n)
    seen = np.zeros(s.n, dtype=bool)
    for h in (s.act_h, s.util_h, s.sm_h, s.tensor_h):
        seen[h[0]] = True
    out: list[int] = np.flatnonzero(seen).tolist()
    return out

"""Build the inventory from a snapshot."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuaudit import mig
from gpuaudit.errors import SnapshotError
from gpuaudit.gcpause import without_gc
from gpuaudit.inventory import columns as C
from gpuaudit.inventory import gangs as gang_mod
from gpuaudit.inventory import kube, prom
from gpuaudit.snapshot import Snapshot
from gpuaudit.snapshot.answers import Answer, Interner, from_bytes, parse
from gpuaudit.sources.prometheus import catalogue as queries

if TYPE_CHECKING:
    import pandas as pd

Arr = np.ndarray[Any, np.dtype[Any]]
Key = tuple[str, str, str]
"""(slot, namespace, pod): one holding; an unheld stretch has empty namespace and pod."""

LABEL_COLUMNS = [
    C.SLOT,
    C.UUID,
    C.GPU_INDEX,
    C.MIG_ID,
    C.MIG_PROFILE,
    C.MODEL,
    C.NODE,
    C.NAMESPACE,
    C.POD,
    C.CONTAINER,
    C.HELD,
]
IDENTITY_COLUMNS = [*LABEL_COLUMNS, C.XID_CODES, C.XID_MSG]
"""Holding columns taken from each series' labels (and the pods' nodes)."""
GANG_COLUMNS = [
    C.GANG_ID,
    C.GANG_KIND,
    C.NAMESPACE,
    C.GANG_NAME,
    C.NEEDED,
    C.GANG_PHASE,
    C.GANG_SIGNAL,
    C.GANG_SOURCE,
]
P2P_COLUMNS = [C.NODE, C.GPU_INDEX, C.PEER_INDEX, C.P2P_STATUS]
HEALTH_QUERIES = {
    C.REMAP_UNCORR_MAX: "remap_uncorr_max",
    C.REMAP_FAILURE_MAX: "remap_failure_max",
    C.ECC_DBE_MAX: "ecc_dbe_max",
    C.ECC_DBE_AGG_MAX: "ecc_dbe_agg_max",
}
"""Holding columns of GPU-health counters and gauges, by the query that fills them."""
HOLDING_COLUMNS = [
    C.HOLDING,
    *LABEL_COLUMNS,
    C.FRACTION,
    C.FIRST_TS,
    C.LAST_TS,
    C.HOURS,
    C.GPU_HOURS,
    C.ACT_MEAN,
    C.ACT_MAX,
    C.ACT_P95,
    C.ACT_COUNT,
    C.ACT_SOURCE,
    C.ACT_APPROX,
    C.UTIL_MEAN,
    C.FB_USED_MEAN,
    C.FB_USED_MAX,
    C.FB_USED_P95,
    C.FB_FREE_MEAN,
    C.MEM_TOTAL_MIB,
    C.POWER_MEAN,
    C.XID_MAX,
    C.XID_CODES,
    C.XID_MSG,
    *HEALTH_QUERIES,
]


def _frame(columns: list[str]) -> pd.DataFrame:
    import pandas as pd

    out: pd.DataFrame = pd.DataFrame(columns=columns)
    return out


def _empty_gangs() -> pd.DataFrame:
    return _frame(GANG_COLUMNS)


def _empty_p2p() -> pd.DataFrame:
    return _frame(P2P_COLUMNS)


@dataclass
class Inventory:
    """Joined tables of one snapshot. Column names live in `gpuaudit.inventory.columns`."""

    window_start: float
    window_end: float
    step_s: int
    cluster: str
    gpus: pd.DataFrame
    """One row per GPU or MIG instance seen in DCGM."""
    holdings: pd.DataFrame
    """One row per (GPU or MIG instance, holder) with its window metric summaries."""
    hourly: pd.DataFrame
    """One row per (holding, bucket end) with mean activity in that bucket."""
    pods: pd.DataFrame
    """Pods from the Kubernetes API (empty when the API was not read)."""
    nodes: pd.DataFrame
    """GPU nodes: from the Kubernetes API, else from DCGM host labels."""
    capabilities: set[str] = field(default_factory=set)
    """What data exists: `activity`, `profiling`, `gpu_util`, `framebuffer`, `gpu_health`,
    `kubernetes.pods`, `kubernetes.nodes`, and `kubernetes.<list>` for every other list read."""
    missing: dict[str, str] = field(default_factory=dict)
    """Capability -> why it is missing, for skipped checks."""
    warnings: list[str] = field(default_factory=list)
    complete: bool = True
    incomplete_reasons: list[str] = field(default_factory=list)
    gangs: pd.DataFrame = field(default_factory=_empty_gangs)
    """One row per gang (PodGroup, Kueue Workload, training job, JobSet ...); pods name theirs
    in the `gang` column."""
    p2p: pd.DataFrame = field(default_factory=_empty_p2p)
    """NVLink P2P status per (node, GPU index, peer index), where the exporter reports it."""

    @property
    def window_hours(self) -> float:
        return (self.window_end - self.window_start) / 3600.0


class _Parser:
    """Every answer of a snapshot as arrays, with each series' holding key found once.

    Keys are numbered in the order first seen (`kid`); the label objects of a series are shared
    among the answers (`Interner`), so a series is recognised by identity after the first
    time its labels are normalised."""

    def __init__(self, snap: Snapshot) -> None:
        self.intern = Interner()
        self.answers: dict[str, list[Answer]] = {}
        self.dropped = self.malformed = 0
        for qid, entries in snap.prometheus.items():
            parsed: list[Answer] = []
            for i, e in enumerate(entries):
                where = f"prometheus.{qid}[{i}]"
                if not isinstance(e, Mapping):
                    raise SnapshotError(f"{where} is not an object")
                answer = e.get("answer")
                raw = e.get("raw")
                if not isinstance(answer, Answer) and isinstance(raw, bytes):
                    answer = from_bytes(raw, where, self.intern)
                if not isinstance(answer, Answer):
                    if "body" not in e:
                        raise SnapshotError(f'{where} has no "body"')
                    answer = parse(e["body"], where, self.intern)
                parsed.append(answer)
                self.dropped += answer.dropped
                self.malformed += answer.malformed
            self.answers[qid] = parsed
        caps = snap.manifest.get("capabilities", {})
        spelling = caps.get("pod_label") if isinstance(caps, Mapping) else None
        if spelling not in ("exported", "pod"):
            spelling = (
                "exported"
                if any(
                    "exported_pod" in m for v in self.answers.values() for a in v for m in a.metrics
                )
                else "pod"
            )
        self.spelling = str(spelling)
        self.keys: list[Key] = []
        self.ident: list[prom.Identity] = []
        self._kid: dict[Key, int] = {}
        self._by_obj: dict[int, int] = {}
        self._by_items: dict[tuple[Any, ...], int] = {}
        self._windows: dict[str, tuple[Arr, Arr]] = {}

    def kid(self, labels: Mapping[str, Any]) -> int:
        """The key number of a series' labels."""
        k = self._by_obj.get(id(labels))
        if k is not None:
            return k
        # Series that differ only in labels `identity` does not read (`err_code`, `pci_bus_id`)
        # have one identity: normalise each distinct identity only once. (`identity` reads
        # string values only; anything else counts as absent.)
        items = tuple(
            [v if isinstance(v := labels.get(n), str) else None for n in prom.READ_LABELS]
        )
        k = self._by_items.get(items)
        if k is None:
            ident = prom.identity(labels, self.spelling)
            key = (ident.slot, ident.namespace, ident.pod)
            k = self._kid.get(key)
            if k is None:
                k = self._kid[key] = len(self.keys)
                self.keys.append(key)
                self.ident.append(ident)
            self._by_items[items] = k
        # The answers hold the label objects for the whole build, so ids are not reused.
        self._by_obj[id(labels)] = k
        return k

    def kids(self, answer: Answer) -> Arr:
        known = self._by_obj.get
        kid = self.kid
        return np.array(
            [k if (k := known(id(m))) is not None else kid(m) for m in answer.metrics],
            dtype=np.int64,
        )

    def window(self, qid: str) -> tuple[Arr, Arr]:
        """(key numbers, values) of every row of a window query's chunks, in order."""
        if qid not in self._windows:
            self._windows[qid] = self._window(qid)
        return self._windows[qid]

    def _window(self, qid: str) -> tuple[Arr, Arr]:
        parts = [(self.kids(a), a.values) for a in self.answers.get(qid, []) if a.rtype == "vector"]
        self._check(qid, "vector")
        if not parts:
            return np.empty(0, dtype=np.int64), np.empty(0)
        return np.concatenate([k for k, _ in parts]), np.concatenate([v for _, v in parts])

    def labelled(self, qid: str) -> list[tuple[Mapping[str, Any], float]]:
        """Every row of a window query's chunks, with its labels (for `extra_by` labels)."""
        self._check(qid, "vector")
        return [
            (m, v)
            for a in self.answers.get(qid, [])
            for m, v in zip(a.metrics, a.values.tolist(), strict=True)
        ]

    def hourly(self, qid: str) -> tuple[Arr, Arr, Arr]:
        """(key numbers, bucket end times, values) of a range query: each key's points in one
        contiguous block, in ascending time, one value per (key, time); where chunks or series
        overlap, the later one wins."""
        self._check(qid, "matrix")
        kids, lens, tss, vss = [], [], [], []
        for a in self.answers.get(qid, []):
            kids.append(self.kids(a))
            lens.append(np.diff(a.offsets))
            tss.append(a.ts)
            vss.append(a.vs)
        if not kids:
            return np.empty(0, dtype=np.int64), np.empty(0), np.empty(0)
        s_kid, s_len = np.concatenate(kids), np.concatenate(lens)
        k = np.repeat(s_kid, s_len)
        t, v = np.concatenate(tss), np.concatenate(vss)
        # Usually every key has one series, already in time order (Prometheus sorts points):
        # then the blocks are there as they are.
        if len(s_kid) == len(_distinct(s_kid)):
            rising = np.ones(len(t), dtype=bool)
            rising[1:] = (t[1:] > t[:-1]) | (k[1:] != k[:-1])
            if rising.all():
                return k, t, v
        order = np.lexsort((t, k))  # stable: equal (key, time) keep their order
        k, t, v = k[order], t[order], v[order]
        if len(k) > 1:
            last = np.ones(len(k), dtype=bool)
            last[:-1] = (k[1:] != k[:-1]) | (t[1:] != t[:-1])
            if not last.all():
                k, t, v = k[last], t[last], v[last]
        return k, t, v

    def _check(self, qid: str, rtype: str) -> None:
        for i, a in enumerate(self.answers.get(qid, [])):
            if a.rtype != rtype:
                raise SnapshotError(
                    f"prometheus.{qid}[{i}]: expected resultType {rtype!r}, got {a.rtype!r}"
                )


@dataclass
class _Stat:
    """A window statistic per key number: values, and whether the key had one."""

    values: Arr
    present: Arr

    def get(self, n: int) -> Arr:
        return np.where(self.present[:n], self.values[:n], np.nan)


def _reduce(kids: Arr, vals: Arr, n: int, how: str) -> _Stat:
    present = np.zeros(n, dtype=bool)
    present[kids] = True
    if how == "sum":
        out = np.bincount(kids, weights=vals, minlength=n).astype(np.float64)
    else:
        out = np.full(n, -np.inf)
        np.maximum.at(out, kids, vals)
    return _Stat(out, present)


@dataclass
class _Metric:
    """Window mean, max, p95 and count of one metric, combined over time chunks."""

    mean: _Stat
    mx: _Stat
    p95: _Stat
    count: _Stat
    approx: bool


def _combine(p: _Parser, short: str, n: int) -> _Metric:
    """Sums and counts add up over chunks, so the mean (sum / count) is exact however the
    window was cut; the max is the max of chunk maxima; the p95 over several chunks is the
    largest chunk p95 (an upper bound), reported as approximate. Series that normalise to one
    key (an exporter restart when both pod label spellings were kept) are parts of one
    holding: their sums add and the largest max is kept."""

    def stat(name: str, how: str) -> _Stat:
        qid = f"{short}_{name}"
        if qid not in queries.BY_ID:
            return _Stat(np.zeros(n), np.zeros(n, dtype=bool))
        k, v = p.window(qid)
        return _reduce(k, v, n, how)

    total, cnt = stat("sum", "sum"), stat("count", "sum")
    ok = total.present & cnt.present & (cnt.values > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = _Stat(np.where(ok, total.values / np.where(ok, cnt.values, 1.0), np.nan), ok)
    p95_chunks = len(p.answers.get(f"{short}_p95", [])) if f"{short}_p95" in queries.BY_ID else 0
    return _Metric(mean, stat("max", "max"), stat("p95", "max"), cnt, p95_chunks > 1)


def _xids(p: _Parser) -> tuple[dict[int, float], dict[int, set[int]], dict[int, dict[int, str]]]:
    """Largest XID value, every non-zero XID code, and the exporter's message per code, by key
    number.

    The gauge holds the last XID; the query groups on `err_code`, so each code the gauge held
    in the window is its own series whose maximum is that code."""
    mx: dict[int, float] = {}
    codes: dict[int, set[int]] = defaultdict(set)
    msgs: dict[int, dict[int, str]] = defaultdict(dict)
    for labels, v in p.labelled("xid_max"):
        k = p.kid(labels)
        mx[k] = max(v, mx.get(k, v))
        code = int(v)
        if code > 0:
            codes[k].add(code)
            msg = labels.get("err_msg")
            if isinstance(msg, str) and msg:
                msgs[k][code] = msg
    return mx, dict(codes), dict(msgs)


def _p2p(p: _Parser) -> list[dict[str, Any]]:
    """Worst NVLink P2P status per (node, GPU, peer) over the window; 0 is OK."""
    worst: dict[tuple[str, str, str], float] = {}
    for labels, v in p.labelled("p2p_max"):
        ident = prom.identity(labels, p.spelling)
        peer = labels.get("peer_gpu")
        if not ident.host or not ident.gpu_index or not isinstance(peer, str) or not peer:
            continue
        k = (ident.host, ident.gpu_index, peer)
        worst[k] = max(v, worst.get(k, v))
    return [
        {C.NODE: n, C.GPU_INDEX: g, C.PEER_INDEX: peer, C.P2P_STATUS: v}
        for (n, g, peer), v in sorted(worst.items())
    ]


def _distinct(a: Arr) -> Arr:
    """The sorted distinct values of `a` (a sort, where `np.unique` would hash: several times
    faster on millions of values)."""
    if len(a) < 2:
        return np.sort(a)
    a = np.sort(a)
    keep = np.empty(len(a), dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def _regroup(k: Arr, t: Arr, v: Arr, hid_of: Arr) -> tuple[Arr, Arr, Arr]:
    """Points held in contiguous blocks per key number (ascending time within each) as
    (holding id, time, value), sorted by holding id, then time: the blocks are reordered, the
    points within them are not touched."""
    if not len(k):
        return np.empty(0, dtype=np.int64), t, v
    starts = np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))
    lengths = np.diff(np.append(starts, len(k)))
    hid = hid_of[k[starts]]
    perm = np.argsort(hid, kind="stable")
    new_lengths = lengths[perm]
    new_starts = np.cumsum(new_lengths) - new_lengths
    idx = np.repeat(starts[perm] - new_starts, new_lengths) + np.arange(len(k))
    return np.repeat(hid[perm], new_lengths), t[idx], v[idx]


def _first(h: Arr, t: Arr, n: int) -> Arr:
    """Per holding id, the first time of (h, t) sorted by holding, then time; NaN if none."""
    out = np.full(n, np.nan)
    if len(h):
        starts = np.concatenate([[True], h[1:] != h[:-1]])
        out[h[starts]] = t[starts]
    return out


def _last(h: Arr, t: Arr, n: int) -> Arr:
    """Per holding id, the last time of (h, t) sorted by holding, then time; NaN if none."""
    out = np.full(n, np.nan)
    if len(h):
        ends = np.concatenate([h[1:] != h[:-1], [True]])
        out[h[ends]] = t[ends]
    return out


def _join(
    hk: Arr, ht: Arr, vals: Arr, want_k: Arr, want_t: Arr, start: float, step: int
) -> tuple[Arr, Arr]:
    """`vals` at each (want_k, want_t) found among (hk, ht), NaN elsewhere, and where found: a
    left join on (holding, time). Both sides are sorted by holding, then time, and unique.
    Times become integers for the join: bucket numbers when they lie on the step grid (the
    usual case), else ranks among all the times seen."""
    out = np.full(len(want_k), np.nan)
    found = np.zeros(len(want_k), dtype=bool)
    if not len(hk) or not len(want_k):
        return out, found
    rh, rw = (ht - start) / step, (want_t - start) / step
    if np.array_equal(rh, np.round(rh)) and np.array_equal(rw, np.round(rw)):
        low = min(rh.min(), rw.min())
        th, tw = (rh - low).astype(np.int64), (rw - low).astype(np.int64)
        width = int(max(th.max(), tw.max())) + 1
    else:
        times = _distinct(np.concatenate([ht, want_t]))
        th, tw = np.searchsorted(times, ht), np.searchsorted(times, want_t)
        width = len(times)
    have = hk * width + th
    want = want_k * width + tw
    space = int(max(have[-1], want.max())) + 1
    if space <= 4 * (len(have) + len(want)):
        # Dense enough for a table indexed by the key itself: no search at all.
        table = np.full(space, np.nan)
        table[have] = vals
        there = np.zeros(space, dtype=bool)
        there[have] = True
        return table[want], there[want]
    pos = np.searchsorted(have, want)
    pos[pos >= len(have)] = 0
    found = have[pos] == want
    out[found] = vals[pos[found]]
    return out, found


def _node_resolver(snap: Snapshot, api_nodes: set[str]) -> Callable[[prom.Identity], str]:
    """The node a series' GPU sits on. `Hostname` is the node when dcgm-exporter has NODE_NAME,
    but the exporter's own pod name otherwise; then the scrape address (`instance`) finds the
    node: the exporter pod with that IP (its nodeName), or a node with that InternalIP
    (hostNetwork exporters)."""
    by_ip: dict[str, str] = {}
    for obj in kube.items(snap.kubernetes.get("nodes", [])):
        name = str(obj["metadata"].get("name", ""))
        status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
        assert isinstance(status, Mapping)
        for addr in status.get("addresses", []) or []:
            if isinstance(addr, Mapping) and addr.get("type") == "InternalIP":
                by_ip[str(addr.get("address", ""))] = name
    for obj in kube.items(snap.kubernetes.get("pods", [])):
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


@without_gc
def build(snap: Snapshot) -> Inventory:
    """Join a snapshot's raw answers into the inventory tables."""
    import pandas as pd

    man = snap.manifest
    window = man["window"]
    start, end, step = float(window["start"]), float(window["end"]), int(window["step"])
    p = _Parser(snap)
    # Key numbers are handed out as series are first seen; every statistic below is an array
    # over them (sized once all answers have been read, so read them all first).
    act_h = p.hourly("act_hourly")
    util_h = p.hourly("util_hourly")
    sm_h = p.hourly("sm_hourly")
    tensor_h = p.hourly("tensor_hourly")
    for qid in queries.BY_ID:
        if queries.BY_ID[qid].kind == "window" and qid not in ("xid_max", "p2p_max"):
            p.window(qid)
    xid_max, xid_codes, xid_msgs = _xids(p)
    n = len(p.keys)
    act = _combine(p, "act", n)
    util = _combine(p, "util", n)
    fb_used = _combine(p, "fb_used", n)
    fb_free = _combine(p, "fb_free", n)
    power = _combine(p, "power", n)
    health = {
        col: _reduce(*p.window(qid), n, "max") if qid in queries.BY_ID else None
        for col, qid in HEALTH_QUERIES.items()
    }
    p2p_rows = _p2p(p)

    in_act_h = np.zeros(n, dtype=bool)
    in_act_h[act_h[0]] = True
    in_util_h = np.zeros(n, dtype=bool)
    in_util_h[util_h[0]] = True
    has_prof = act.mean.present | in_act_h
    has_util = ~has_prof & (util.mean.present | in_util_h)

    caps: set[str] = set()
    missing: dict[str, str] = {}
    if act.mean.present.any() or len(act_h[0]):
        caps.update({"profiling", "activity"})
    if util.mean.present.any() or len(util_h[0]):
        caps.update({"gpu_util", "activity"})
    if fb_used.mean.present.any() and fb_free.mean.present.any():
        caps.add("framebuffer")
    if not caps & {"activity"}:
        missing["activity"] = (
            "no DCGM_FI_PROF_GR_ENGINE_ACTIVE or DCGM_FI_DEV_GPU_UTIL series in the window"
        )
    if len(sm_h[0]):
        caps.add("sm_active")
    if len(tensor_h[0]):
        caps.add("tensor_active")
    if "profiling" not in caps:
        missing["profiling"] = "no DCGM_FI_PROF_* series (profiling module not loaded?)"
    if "framebuffer" not in caps:
        missing["framebuffer"] = "no DCGM_FI_DEV_FB_USED/FB_FREE series in the window"
    if xid_max or any(h is not None and h.present.any() for h in health.values()):
        caps.add("gpu_health")
    else:
        missing["gpu_health"] = (
            "no DCGM_FI_DEV_XID_ERRORS, row-remap or ECC series in the window "
            "(are they in dcgm-exporter's counters CSV?)"
        )
    if p2p_rows:
        caps.add("p2p_status")

    # Pods and nodes from the Kubernetes API.
    pod_rows = [kube.pod_row(o) for o in kube.items(snap.kubernetes.get("pods", []))]
    node_rows = [kube.node_row(o) for o in kube.items(snap.kubernetes.get("nodes", []))]
    objects = man.get("objects", {}) if isinstance(man.get("objects"), Mapping) else {}
    extra_reasons: list[str] = []
    for key in ("pods", "nodes"):
        state = str(objects.get(key, "ok"))
        if key in snap.kubernetes and state.startswith("incomplete"):
            reason = f"the Kubernetes {key} list is {state}"
            if reason not in man.get("incomplete_reasons", []):
                extra_reasons.append(reason)
    if "pods" in snap.kubernetes:
        caps.add("kubernetes.pods")
    else:
        missing["kubernetes.pods"] = str(
            objects.get("pods") or "pods were not read from the Kubernetes API"
        )
    if "nodes" in snap.kubernetes:
        caps.add("kubernetes.nodes")
    else:
        missing["kubernetes.nodes"] = str(
            objects.get("nodes") or "nodes were not read from the Kubernetes API"
        )
    for key in snap.kubernetes:
        if key not in ("pods", "nodes"):
            caps.add(f"kubernetes.{key}")
    for key in gang_mod.GANG_LISTS:
        if key not in snap.kubernetes:
            missing[f"kubernetes.{key}"] = str(objects.get(key) or f"{key} were not read")
    gang_list, pod_gang = gang_mod.build(
        snap.kubernetes, kube.items(snap.kubernetes.get("pods", []))
    )
    for r in pod_rows:
        r[C.GANG] = pod_gang.get((r["namespace"], r["pod"]), "")
    pod_index = {(r["namespace"], r["pod"]): r for r in pod_rows}

    where = _node_resolver(snap, {r["node"] for r in node_rows})

    # Holdings: every key seen anywhere, numbered in key order (the holding id is the row).
    order = sorted(range(n), key=p.keys.__getitem__)
    hid_of = np.empty(n, dtype=np.int64)
    hid_of[order] = np.arange(n, dtype=np.int64)

    # Each hourly source with holding ids, sorted by holding, then time.
    util_g = _regroup(*util_h, hid_of)
    # The hourly table: a holding's activity series (GPU_UTIL / 100 where it has no profiling
    # series), with GPU_UTIL, SM and tensor activity of the same buckets beside it.
    use_util = has_util[util_h[0]]
    base_k, base_t, base_v = _regroup(
        np.concatenate([act_h[0], util_h[0][use_util]]),
        np.concatenate([act_h[1], util_h[1][use_util]]),
        np.concatenate([act_h[2], util_h[2][use_util] / 100.0]),
        hid_of,
    )
    hourly_data: dict[str, Any] = {C.HOLDING: base_k, C.TS: base_t, C.ACT: base_v}
    util_hit = np.zeros(len(base_k), dtype=bool)
    for col, src, scale in (
        (C.UTIL, util_g, 100.0),
        (C.SM, _regroup(*sm_h, hid_of), 1.0),
        (C.TENSOR, _regroup(*tensor_h, hid_of), 1.0),
    ):
        vals, hit = _join(src[0], src[1], src[2] / scale, base_k, base_t, start, step)
        hourly_data[col] = vals
        if col == C.UTIL:
            util_hit = hit
    hourly = pd.DataFrame(hourly_data)

    # The buckets each holding has data in: those of its activity series and of its GPU_UTIL
    # series (the hourly rows, plus GPU_UTIL buckets that are not among them).
    buckets = (
        np.bincount(base_k, minlength=n)
        + np.bincount(util_g[0], minlength=n)
        - np.bincount(base_k[util_hit], minlength=n)
    )
    first_ts = np.fmin(_first(base_k, base_t, n), _first(util_g[0], util_g[1], n))
    last_ts = np.fmax(_last(base_k, base_t, n), _last(util_g[0], util_g[1], n))
    bucket_h = step / 3600.0
    hours = buckets * bucket_h

    # Per key number, in holding order.
    def by_hid(vals: Arr) -> Arr:
        out = np.empty(n, dtype=vals.dtype)
        out[hid_of] = vals
        return out

    act_mean = np.where(
        has_prof, act.mean.get(n), np.where(has_util, util.mean.get(n) / 100, np.nan)
    )
    act_max = np.where(has_prof, act.mx.get(n), np.where(has_util, util.mx.get(n) / 100, np.nan))
    act_p95 = np.where(has_prof, act.p95.get(n), np.where(has_util, util.p95.get(n) / 100, np.nan))
    act_cnt = np.where(has_prof, act.count.get(n), np.where(has_util, util.count.get(n), np.nan))
    source = np.where(has_prof, queries.ACT_PROF, np.where(has_util, queries.UTIL, ""))
    approx = np.where(has_prof, act.approx, np.where(has_util, util.approx, False))
    used_mean, free_mean = fb_used.mean.get(n), fb_free.mean.get(n)

    cols: dict[str, list[Any]] = {c: [] for c in IDENTITY_COLUMNS}
    fractions = np.empty(n)
    for k in order:
        ident = p.ident[k]
        model = ident.model
        fraction = mig.slice_fraction(ident.mig_profile, model) if ident.mig_profile else 1.0
        pod = pod_index.get((ident.namespace, ident.pod)) if ident.held else None
        node = (pod["node"] if pod and pod["node"] else "") or where(ident)
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
            (C.XID_CODES, ",".join(str(c) for c in sorted(xid_codes.get(k, ())))),
            (
                C.XID_MSG,
                "; ".join(f"{c}: {m}" for c, m in sorted(xid_msgs.get(k, {}).items())),
            ),
        ):
            cols[col].append(val)
        fractions[hid_of[k]] = fraction
    data: dict[str, Any] = {
        C.HOLDING: np.arange(n, dtype=np.int64),
        **{c: cols[c] for c in IDENTITY_COLUMNS if c not in (C.XID_CODES, C.XID_MSG)},
        C.HELD: np.array(cols[C.HELD], dtype=bool),
        C.FRACTION: fractions,
        C.FIRST_TS: first_ts - step,
        C.LAST_TS: last_ts,
        C.HOURS: hours,
        C.GPU_HOURS: hours * fractions,
        C.ACT_MEAN: by_hid(act_mean),
        C.ACT_MAX: by_hid(act_max),
        C.ACT_P95: by_hid(act_p95),
        C.ACT_COUNT: by_hid(act_cnt),
        C.ACT_SOURCE: by_hid(source.astype(object)).tolist(),
        C.ACT_APPROX: by_hid(approx.astype(bool)),
        C.UTIL_MEAN: by_hid(util.mean.get(n)),
        C.FB_USED_MEAN: by_hid(used_mean),
        C.FB_USED_MAX: by_hid(fb_used.mx.get(n)),
        C.FB_USED_P95: by_hid(fb_used.p95.get(n)),
        C.FB_FREE_MEAN: by_hid(free_mean),
        C.MEM_TOTAL_MIB: by_hid(used_mean + free_mean),
        C.POWER_MEAN: by_hid(power.mean.get(n)),
        C.XID_MAX: by_hid(np.array([xid_max.get(k, np.nan) for k in range(n)], dtype=np.float64)),
        C.XID_CODES: cols[C.XID_CODES],
        C.XID_MSG: cols[C.XID_MSG],
        **{
            col: by_hid(st.get(n)) if st is not None else np.full(n, np.nan)
            for col, st in health.items()
        },
    }
    holdings = pd.DataFrame(data, columns=HOLDING_COLUMNS)

    gpu_cols = [
        C.SLOT,
        C.UUID,
        C.GPU_INDEX,
        C.MIG_ID,
        C.MIG_PROFILE,
        C.MODEL,
        C.NODE,
        C.FRACTION,
        C.MEM_TOTAL_MIB,
    ]
    gpus = (
        holdings.sort_values([C.SLOT, C.HELD], ascending=[True, False])
        .groupby(C.SLOT, as_index=False)
        .first()[gpu_cols]
        if not holdings.empty
        else pd.DataFrame(columns=gpu_cols)
    )
    pod_cols = [
        "labels",
        "restarts",
        "last_termination",
        "namespace",
        "pod",
        "uid",
        "phase",
        "node",
        "owner_kind",
        "owner_name",
        "priority",
        "priority_class",
        "gpu_request",
        "mig_request",
        "created",
        "started",
        C.PREEMPTION_POLICY,
        C.UNSCHEDULABLE,
        C.PENDING_SINCE,
        C.SCHED_MESSAGE,
        C.SELECTOR_PRODUCTS,
        C.SCHEDULER,
        C.GANG,
    ]
    pods = pd.DataFrame(pod_rows, columns=pod_cols)
    node_cols = [
        "node",
        "product",
        "gpu_count",
        "capacity_gpu",
        "allocatable_gpu",
        "mig_capacity",
        "clique",
        "mig_strategy",
        C.POOL,
        C.CORDONED,
    ]
    nodes = pd.DataFrame(node_rows, columns=node_cols)

    warnings: list[str] = [str(w) for w in man.get("warnings", []) if isinstance(w, str)]
    if p.dropped:
        warnings.append(
            f"{p.dropped} sample values were NaN, infinite or malformed and were left out"
        )
    if holdings.empty:
        warnings.append(
            "no DCGM series were found in the window: check that dcgm-exporter is scraped, "
            "the window (--window, --end) and --cluster-label"
        )
    if p.malformed:
        warnings.append(f"{p.malformed} malformed series were left out")
    reasons = [str(r) for r in man.get("incomplete_reasons", []) if isinstance(r, str)]
    reasons += extra_reasons
    complete = bool(man.get("complete", True)) and not extra_reasons
    return Inventory(
        window_start=start,
        window_end=end,
        step_s=step,
        cluster=str(man.get("cluster", "")),
        gpus=gpus,
        holdings=holdings,
        hourly=hourly,
        pods=pods,
        nodes=nodes,
        capabilities=caps,
        missing=missing,
        warnings=warnings,
        complete=complete,
        incomplete_reasons=reasons,
        gangs=pd.DataFrame(
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
        ),
        p2p=pd.DataFrame(p2p_rows, columns=P2P_COLUMNS),
    )

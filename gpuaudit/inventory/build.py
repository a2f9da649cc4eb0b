"""Build the inventory from a snapshot."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuaudit import mig, queries
from gpuaudit.errors import SnapshotError
from gpuaudit.gcpause import without_gc
from gpuaudit.inventory import columns as C
from gpuaudit.inventory import gangs as gang_mod
from gpuaudit.inventory import kube, prom
from gpuaudit.snapshot import Snapshot

if TYPE_CHECKING:
    import pandas as pd

_IDENTITY_INPUTS = (
    "UUID",
    "uuid",
    "gpu",
    "GPU_I_ID",
    "GPU_I_PROFILE",
    "modelName",
    "model_name",
    "node",
    "Hostname",
    "hostname",
    "kubernetes_node",
    "exported_pod",
    "exported_namespace",
    "exported_container",
    "pod",
    "pod_name",
    "namespace",
    "pod_namespace",
    "container",
    "container_name",
)
"""Every label `prom.identity` reads."""

Key = tuple[str, str, str]
"""(slot, namespace, pod): one holding; an unheld stretch has empty namespace and pod."""

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


def _answers(snap: Snapshot, qid: str) -> list[dict[str, Any]]:
    entries = snap.prometheus.get(qid, [])
    out = []
    for i, e in enumerate(entries):
        if not isinstance(e, Mapping) or "body" not in e:
            raise SnapshotError(f'prometheus.{qid}[{i}] has no "body"')
        out.append(dict(e))
    return out


class _Parser:
    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.stats = prom.ParseStats()
        caps = snap.manifest.get("capabilities", {})
        spelling = caps.get("pod_label") if isinstance(caps, Mapping) else None
        if spelling not in ("exported", "pod"):
            bodies = [
                e.get("body") for v in snap.prometheus.values() for e in v if isinstance(e, Mapping)
            ]
            spelling = prom.detect_spelling(b for b in bodies if isinstance(b, Mapping))
        self.spelling = str(spelling)
        self.ident: dict[Key, prom.Identity] = {}
        self._cache: dict[tuple[Any, ...], Key] = {}

    def key(self, labels: Mapping[str, Any]) -> Key:
        # Identities repeat across every query (one label set per series): cache them.
        cache_key = tuple(labels.items())
        k = self._cache.get(cache_key)
        if k is not None:
            return k
        ident = prom.identity(labels, self.spelling)
        k = (ident.slot, ident.namespace, ident.pod)
        if k not in self.ident:
            self.ident[k] = ident
        self._cache[cache_key] = k
        return k

    def window_chunks(self, qid: str) -> list[dict[Key, float]]:
        additive = queries.BY_ID[qid].stat in ("sum", "count")
        chunks: list[dict[Key, float]] = []
        for i, entry in enumerate(_answers(self.snap, qid)):
            rows: dict[Key, float] = {}
            for labels, v in prom.vector(entry["body"], f"prometheus.{qid}[{i}]", self.stats):
                k = self.key(labels)
                # Series that normalise to one key (an exporter restart when both pod label
                # spellings were kept) are parts of one holding: add sums, keep the largest max.
                if k in rows:
                    rows[k] = rows[k] + v if additive else max(rows[k], v)
                else:
                    rows[k] = v
            chunks.append(rows)
        return chunks

    def labelled(self, qid: str) -> list[tuple[Mapping[str, Any], float]]:
        """Every row of a window query's chunks, with its raw labels (for `extra_by` labels)."""
        rows: list[tuple[Mapping[str, Any], float]] = []
        for i, entry in enumerate(_answers(self.snap, qid)):
            rows.extend(prom.vector(entry["body"], f"prometheus.{qid}[{i}]", self.stats))
        return rows

    def hourly(self, qid: str) -> dict[Key, tuple[Any, Any]]:
        """Per key: bucket end times and values, as sorted float64 arrays."""
        import numpy as np

        parts: dict[Key, list[tuple[Any, Any]]] = defaultdict(list)
        for i, entry in enumerate(_answers(self.snap, qid)):
            for labels, ts, vs in prom.matrix_arrays(
                entry["body"], f"prometheus.{qid}[{i}]", self.stats
            ):
                parts[self.key(labels)].append((ts, vs))
        out: dict[Key, tuple[Any, Any]] = {}
        for k, chunks in parts.items():
            if len(chunks) == 1:
                ts, vs = chunks[0]
            else:
                ts = np.concatenate([c[0] for c in chunks])
                vs = np.concatenate([c[1] for c in chunks])
            # Sorted, one value per bucket (a later duplicate wins, as a dict would keep it).
            order = np.argsort(ts, kind="stable")
            ts, vs = ts[order], vs[order]
            if len(ts) > 1 and (np.diff(ts) == 0).any():
                keep = np.append(np.diff(ts) != 0, True)
                ts, vs = ts[keep], vs[keep]
            out[k] = (ts, vs)
        return out


def _combine(
    p: _Parser, short: str
) -> tuple[dict[Key, float], dict[Key, float], dict[Key, float], dict[Key, float], bool]:
    """Window mean, max, p95 and count of one metric, combined over time chunks.

    Sums and counts add up over chunks, so the mean (sum / count) is exact however the
    window was cut; the max is the max of chunk maxima; the p95 over several chunks is the
    largest chunk p95 (an upper bound), reported as approximate.
    """

    def chunks(stat: str) -> list[dict[Key, float]]:
        qid = f"{short}_{stat}"
        return p.window_chunks(qid) if qid in queries.BY_ID else []

    total: dict[Key, float] = defaultdict(float)
    for chunk in chunks("sum"):
        for k, v in chunk.items():
            total[k] += v
    cnt: dict[Key, float] = defaultdict(float)
    for chunk in chunks("count"):
        for k, v in chunk.items():
            cnt[k] += v
    mean = {k: total[k] / cnt[k] for k in total if cnt.get(k, 0.0) > 0}
    mx: dict[Key, float] = {}
    for chunk in chunks("max"):
        for k, v in chunk.items():
            mx[k] = max(v, mx.get(k, v))
    p95: dict[Key, float] = {}
    p95_chunks = chunks("p95")
    for chunk in p95_chunks:
        for k, v in chunk.items():
            p95[k] = max(v, p95.get(k, v))
    return mean, mx, p95, dict(cnt), len(p95_chunks) > 1


def _xids(p: _Parser) -> tuple[dict[Key, float], dict[Key, set[int]], dict[Key, dict[int, str]]]:
    """Largest XID value, every non-zero XID code, and the exporter's message per code, by key.

    The gauge holds the last XID; the query groups on `err_code`, so each code the gauge held
    in the window is its own series whose maximum is that code."""
    mx: dict[Key, float] = {}
    codes: dict[Key, set[int]] = defaultdict(set)
    msgs: dict[Key, dict[int, str]] = defaultdict(dict)
    for labels, v in p.labelled("xid_max"):
        k = p.key(labels)
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


def _window_max(p: _Parser, qid: str) -> dict[Key, float]:
    out: dict[Key, float] = {}
    for chunk in p.window_chunks(qid):
        for k, v in chunk.items():
            out[k] = max(v, out.get(k, v))
    return out


def _long(parts: list[tuple[int, Any, Any]], col: str) -> pd.DataFrame:
    """(holding id, times, values) per holding -> one long table."""
    import pandas as pd

    if not parts:
        empty: pd.DataFrame = pd.DataFrame(
            {C.HOLDING: np.empty(0, dtype=np.int64), C.TS: np.empty(0), col: np.empty(0)}
        )
        return empty
    out: pd.DataFrame = pd.DataFrame(
        {
            C.HOLDING: np.concatenate(
                [np.full(len(ts), hid, dtype=np.int64) for hid, ts, _ in parts]
            ),
            C.TS: np.concatenate([ts for _, ts, _ in parts]),
            col: np.concatenate([vs for _, _, vs in parts]),
        }
    )
    return out


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


def _ratio(percent: float | None) -> float | None:
    return None if percent is None else percent / 100.0


@without_gc
def build(snap: Snapshot) -> Inventory:
    """Join a snapshot's raw answers into the inventory tables."""
    import pandas as pd

    man = snap.manifest
    window = man["window"]
    start, end, step = float(window["start"]), float(window["end"]), int(window["step"])
    p = _Parser(snap)

    act = _combine(p, "act")
    util = _combine(p, "util")
    fb_used = _combine(p, "fb_used")
    fb_free = _combine(p, "fb_free")
    power = _combine(p, "power")
    act_h = p.hourly("act_hourly")
    util_h = p.hourly("util_hourly")
    sm_h = p.hourly("sm_hourly")
    tensor_h = p.hourly("tensor_hourly")
    xid_max, xid_codes, xid_msgs = _xids(p)
    health = {col: _window_max(p, qid) for col, qid in HEALTH_QUERIES.items()}
    p2p_rows = _p2p(p)

    caps: set[str] = set()
    missing: dict[str, str] = {}
    if act[0] or act_h:
        caps.update({"profiling", "activity"})
    if util[0] or util_h:
        caps.update({"gpu_util", "activity"})
    if fb_used[0] and fb_free[0]:
        caps.add("framebuffer")
    if not caps & {"activity"}:
        missing["activity"] = (
            "no DCGM_FI_PROF_GR_ENGINE_ACTIVE or DCGM_FI_DEV_GPU_UTIL series in the window"
        )
    if sm_h:
        caps.add("sm_active")
    if tensor_h:
        caps.add("tensor_active")
    if "profiling" not in caps:
        missing["profiling"] = "no DCGM_FI_PROF_* series (profiling module not loaded?)"
    if "framebuffer" not in caps:
        missing["framebuffer"] = "no DCGM_FI_DEV_FB_USED/FB_FREE series in the window"
    if xid_max or any(health.values()):
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

    # Holdings: every key seen anywhere.
    keys = set(p.ident)
    bucket_h = step / 3600.0
    rows: list[dict[str, Any]] = []
    act_parts: list[tuple[int, Any, Any]] = []
    empty = (np.empty(0), np.empty(0))
    for hid, k in enumerate(sorted(keys)):
        ident = p.ident[k]
        has_prof = k in act[0] or k in act_h
        has_util = k in util[0] or k in util_h
        a_mean = a_max = a_p95 = a_cnt = None
        source, approx = "", False
        series: tuple[Any, Any] = empty
        if has_prof:
            a_mean, a_max, a_p95, a_cnt = (
                act[0].get(k),
                act[1].get(k),
                act[2].get(k),
                act[3].get(k),
            )
            source, approx, series = queries.ACT_PROF, bool(act[4]), act_h.get(k, empty)
        elif has_util:
            a_mean, a_max, a_p95 = (
                _ratio(util[0].get(k)),
                _ratio(util[1].get(k)),
                _ratio(util[2].get(k)),
            )
            a_cnt = util[3].get(k)
            source, approx = queries.UTIL, bool(util[4])
            u_ts, u_vs = util_h.get(k, empty)
            series = (u_ts, u_vs / 100.0)
        ts_all = np.union1d(series[0], util_h.get(k, empty)[0])
        hours = len(ts_all) * bucket_h
        model = ident.model
        fraction = mig.slice_fraction(ident.mig_profile, model) if ident.mig_profile else 1.0
        pod = pod_index.get((ident.namespace, ident.pod)) if ident.held else None
        node = (pod["node"] if pod and pod["node"] else "") or where(ident)
        used_mean, free_mean = fb_used[0].get(k), fb_free[0].get(k)
        rows.append(
            {
                C.HOLDING: hid,
                C.SLOT: ident.slot,
                C.UUID: ident.uuid,
                C.GPU_INDEX: ident.gpu_index,
                C.MIG_ID: ident.mig_id,
                C.MIG_PROFILE: ident.mig_profile,
                C.MODEL: model,
                C.NODE: node,
                C.NAMESPACE: ident.namespace,
                C.POD: ident.pod,
                C.CONTAINER: ident.container,
                C.HELD: ident.held,
                C.FRACTION: fraction,
                C.FIRST_TS: float(ts_all[0]) - step if len(ts_all) else None,
                C.LAST_TS: float(ts_all[-1]) if len(ts_all) else None,
                C.HOURS: hours,
                C.GPU_HOURS: hours * fraction,
                C.ACT_MEAN: a_mean,
                C.ACT_MAX: a_max,
                C.ACT_P95: a_p95,
                C.ACT_COUNT: a_cnt,
                C.ACT_SOURCE: source,
                C.ACT_APPROX: approx,
                C.UTIL_MEAN: util[0].get(k),
                C.FB_USED_MEAN: used_mean,
                C.FB_USED_MAX: fb_used[1].get(k),
                C.FB_USED_P95: fb_used[2].get(k),
                C.FB_FREE_MEAN: free_mean,
                C.MEM_TOTAL_MIB: (used_mean + free_mean)
                if used_mean is not None and free_mean is not None
                else None,
                C.POWER_MEAN: power[0].get(k),
                C.XID_MAX: xid_max.get(k),
                C.XID_CODES: ",".join(str(c) for c in sorted(xid_codes.get(k, ()))),
                C.XID_MSG: "; ".join(f"{c}: {m}" for c, m in sorted(xid_msgs.get(k, {}).items())),
                **{col: vals.get(k) for col, vals in health.items()},
            }
        )
        if len(series[0]):
            act_parts.append((hid, series[0], series[1]))

    holding_cols = [
        C.HOLDING,
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
    holdings = pd.DataFrame(rows, columns=holding_cols)
    hid_of = {k: i for i, k in enumerate(sorted(keys))}
    hourly = _long(act_parts, C.ACT)
    for col, src, scale in ((C.UTIL, util_h, 100.0), (C.SM, sm_h, 1.0), (C.TENSOR, tensor_h, 1.0)):
        parts = [(hid_of[k], ts, vs / scale) for k, (ts, vs) in src.items() if k in hid_of]
        if parts:
            hourly = hourly.merge(_long(parts, col), on=[C.HOLDING, C.TS], how="left")
        else:
            hourly[col] = np.nan
    if not holdings.empty:
        for col in (
            C.ACT_MEAN,
            C.ACT_MAX,
            C.ACT_P95,
            C.ACT_COUNT,
            C.UTIL_MEAN,
            C.FB_USED_MEAN,
            C.FB_USED_MAX,
            C.FB_USED_P95,
            C.FB_FREE_MEAN,
            C.MEM_TOTAL_MIB,
            C.POWER_MEAN,
            C.FIRST_TS,
            C.LAST_TS,
            C.XID_MAX,
            *HEALTH_QUERIES,
        ):
            holdings[col] = pd.to_numeric(holdings[col], errors="coerce").astype("float64")
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
    if p.stats.dropped_values:
        warnings.append(
            f"{p.stats.dropped_values} sample values were NaN, infinite or malformed and "
            "were left out"
        )
    if holdings.empty:
        warnings.append(
            "no DCGM series were found in the window: check that dcgm-exporter is scraped, "
            "the window (--window, --end) and --cluster-label"
        )
    if p.stats.malformed_series:
        warnings.append(f"{p.stats.malformed_series} malformed series were left out")
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

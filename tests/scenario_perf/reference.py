"""The per-series scenario writer that `gpuaudit.scenario.emit` replaced, kept as the reference
its output must equal byte for byte (the committed demo and the live tests depend on it)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from gpuaudit.scenario import nodes
from gpuaudit.scenario.cluster import Holding
from gpuaudit.scenario.emit import (
    _envelope,
    _esc,
    _manifest,
    fmt,
    k8s_lists,
    raw_labels,
    spelling_of,
)
from gpuaudit.scenario.generator import Scenario
from gpuaudit.scenario.series import (
    CADVISOR_WRITTEN,
    CFS_PERIODS_PER_HOUR,
    CLOCKS,
    COUNTER_BASE,
    COUNTERS,
    HAMI_METRICS,
    HEALTH,
    INT_METRICS,
    LINK_OF,
    METRICS,
    RAMPED,
    SERVING_WRITTEN,
    cadvisor_labels,
    carries_link,
    hami_labels,
    link_bps,
    serving_labels,
    xid_text,
)
from gpuaudit.snapshot import Snapshot
from gpuaudit.sources.prometheus import catalogue as queries

Arr = np.ndarray[Any, np.dtype[Any]]


@dataclass
class _Series:
    labels: dict[str, str]
    hours: Arr
    hi: dict[str, Arr]
    lo: dict[str, Arr]
    group_hours: Arr | None = None
    """For an XID series: every hour its GPU's XID gauge was exposed under these labels."""


def series(sc: Scenario, style: str) -> list[_Series]:
    groups: dict[tuple[tuple[str, str], ...], list[Holding]] = {}
    for h in sc.holdings:
        # No exporter, or a replica the exporter labels with another pod: no series.
        if not h.slot.node.exporter or (h.pod is not None and h.pod.dcgm_hidden):
            continue
        key = tuple(sorted(raw_labels(h, style).items()))
        groups.setdefault(key, []).append(h)
    out: list[_Series] = []
    for key, hs in groups.items():
        hs.sort(key=lambda h: h.h0)
        hours = np.concatenate([np.arange(h.h0, h.h1) for h in hs]).astype(np.float64)
        hi: dict[str, Arr] = {}
        lo: dict[str, Arr] = {}

        def cat(f: Any, hs: list[Holding] = hs) -> Arr:
            return np.concatenate([f(h) for h in hs]).astype(np.float64)

        hi[queries.ACT_PROF] = cat(lambda h: h.act + h.act_amp)
        lo[queries.ACT_PROF] = cat(lambda h: h.act - h.act_amp)
        if not hs[0].slot.mig_id:
            hi[queries.UTIL] = cat(lambda h: h.util + h.util_amp)
            lo[queries.UTIL] = cat(lambda h: h.util - h.util_amp)
        hi[queries.FB_USED] = cat(lambda h: h.fb_used + h.fb_amp)
        lo[queries.FB_USED] = cat(lambda h: h.fb_used - h.fb_amp)
        mem = float(hs[0].slot.mem_mib)
        hi[queries.FB_FREE] = mem - lo[queries.FB_USED]
        lo[queries.FB_FREE] = mem - hi[queries.FB_USED]
        hi[queries.POWER] = cat(lambda h: h.power)
        lo[queries.POWER] = hi[queries.POWER]
        slot = hs[0].slot
        if slot.node.model in nodes.LIMIT_EXPORTED:
            tdp = nodes.TDP[slot.node.model]
            hi[queries.POWER_LIMIT] = lo[queries.POWER_LIMIT] = cat(
                lambda h, tdp=tdp: np.full(h.h1 - h.h0, tdp)
            )
        for m in HEALTH:
            hi[m] = lo[m] = slot.health_at(m, hours)
        for m in COUNTERS + CLOCKS:  # on the GPUs whose exporter has the counter or clock
            if m in slot.health:
                hi[m] = lo[m] = slot.health_at(m, hours)
        for m in LINK_OF:
            if carries_link(slot, m):
                hi[m] = lo[m] = cat(lambda h, m=m: link_bps(h, m))
        for m in list(hi):
            if m in INT_METRICS:
                hi[m], lo[m] = np.round(hi[m]), np.round(lo[m])
            else:
                hi[m] = np.array([float(f"{v:.6f}") for v in hi[m]])
                lo[m] = np.array([float(f"{v:.6f}") for v in lo[m]])
        out.append(_Series(dict(key), hours, hi, lo))
        codes = slot.health_at(queries.XID, hours)
        for code in dict.fromkeys(codes.tolist()):
            sel = codes == code
            labels = dict(key) | {"err_code": str(int(code)), "err_msg": xid_text(int(code))}
            xid_hi = {queries.XID: codes[sel]}
            out.append(_Series(labels, hours[sel], xid_hi, xid_hi, hours))
    out.extend(_hami(sc, style))
    out.extend(_serving(sc))
    out.extend(_cadvisor(sc))
    return out


def _cadvisor(sc: Scenario) -> list[_Series]:
    """Each container's cAdvisor CPU counters, one series per pod whose CPU is emitted, last:
    each hour's CPU seconds, and with a CPU limit its CFS periods and throttled periods; then
    the working set of each pod whose memory is emitted."""
    node_of = {n.name: n for n in sc.nodes}
    out = []
    for p in sc.pods:
        if p.cpu is None or not p.alive:
            continue
        cores, share = p.cpu
        hours = np.arange(p.created_h, p.created_h + len(cores)).astype(np.float64)
        vals = {queries.CPU_USAGE: np.array([float(round(c * 3600.0)) for c in cores])}
        if "cpu" in p.resources:
            vals[queries.CPU_PERIODS] = np.full(len(cores), float(CFS_PERIODS_PER_HOUR))
            vals[queries.CPU_THROTTLED] = np.array(
                [float(round(s * CFS_PERIODS_PER_HOUR)) for s in share]
            )
        out.append(_Series(cadvisor_labels(p, node_of[p.node]), hours, vals, vals))
    for p in sc.pods:  # each container's working set, after every CPU series
        if p.memory is None or not p.alive:
            continue
        hours = np.arange(p.created_h, p.created_h + len(p.memory)).astype(np.float64)
        vals = {queries.MEMORY_WORKING_SET: np.array([float(round(b)) for b in p.memory])}
        out.append(_Series(cadvisor_labels(p, node_of[p.node]), hours, vals, vals))
    return out


def _serving(sc: Scenario) -> list[_Series]:
    """Each serving pod's own gauge, one series per pod, after HAMi's."""
    node_of = {n.name: n for n in sc.nodes}
    out = []
    for p in sc.pods:
        if p.serving is None or not p.alive:
            continue
        metric, levels = p.serving
        hours = np.arange(p.created_h, p.created_h + len(levels)).astype(np.float64)
        vals = {metric: np.asarray(levels, dtype=np.float64)}
        out.append(_Series(serving_labels(p, node_of[p.node]), hours, vals, vals))
    return out


def _hami(sc: Scenario, style: str) -> list[_Series]:
    """HAMi's vGPU monitor series of each HAMi tenant, one per container, after the DCGM ones."""
    node_of = {n.name: n for n in sc.nodes}
    util = queries.HAMI_UTIL_LEGACY if style == "old" else queries.HAMI_UTIL
    mem = queries.HAMI_MEM_LEGACY if style == "old" else queries.HAMI_MEM
    out = []
    for p in sc.pods:
        if p.hami_use is None or not p.alive:
            continue
        uuid, pct, most = p.hami_use
        hours = np.arange(p.created_h, p.created_h + len(pct)).astype(np.float64)
        vals = {util: np.round(np.asarray(pct, dtype=np.float64)), mem: np.full(len(pct), most)}
        out.append(_Series(hami_labels(p, node_of[p.node], uuid, style), hours, vals, vals))
    return out


def _onsets(s: _Series, scrape_s: int) -> list[float]:
    """Hours where the XID gauge turned to this series' code (not 0) from another code it
    showed the hour before, when the subquery can see it: a step at the first multiple of 300 s
    at or after the first sample (mid-interval) must still see the last sample of the hour
    before within its 300 s look back."""
    first = scrape_s / 2
    if math.ceil(first / 300) * 300 >= 600 - first or s.group_hours is None:
        return []
    if not len(s.hours) or s.hi[queries.XID][0] == 0:
        return []
    own = set(s.hours.tolist())
    return sorted(h for h in own if h - 1 in set(s.group_hours.tolist()) and h - 1 not in own)


def _ts(t: float) -> float | int:
    return int(t) if float(t).is_integer() else round(t, 3)


def quantile(q: float, hi: Arr, lo: Arr, k: int) -> float:
    vals = np.concatenate([hi, lo])
    vals = vals[np.argsort(vals, kind="stable")]
    n = len(vals) * k
    rank = q * (n - 1)
    lower = max(0, math.floor(rank))
    upper = min(n - 1, lower + 1)
    weight = rank - math.floor(rank)
    a, b = vals[lower // k], vals[upper // k]
    return float(a * (1 - weight) + b * weight)


def window_stat(stat: str, hi: Arr, lo: Arr, k: int) -> float:
    if stat == "increase":  # a counter's `hi`: each hour's increase
        return float(hi.sum())
    if stat == "sum":
        return float((hi.sum() + lo.sum()) * k)
    if stat == "max":
        return float(max(hi.max(), lo.max()))
    if stat == "p95":
        return quantile(0.95, hi, lo, k)
    return float(2 * k * len(hi))


def hour_stat(stat: str, hi: Arr, lo: Arr, k: int) -> float:
    """One bucket's statistic (the hour's k `hi` and k `lo` samples)."""
    if stat == "increase":  # a counter's `hi`: the hour's increase
        return float(hi[0])
    if stat == "p95":
        return quantile(0.95, hi, lo, k)
    return float((hi[0] * k + lo[0] * k) / (2 * k))


def to_snapshot(sc: Scenario, style: str = "helm", generated_by: str = "") -> Snapshot:
    spelling = spelling_of(style)
    k = 3600 // sc.scrape_s // 2
    ss = series(sc, style)
    window_s = sc.end - sc.start
    prom: dict[str, list[dict[str, Any]]] = {}
    for q in queries.CATALOGUE:
        by = set(q.by_labels(spelling))
        result: list[dict[str, Any]] = []
        for s in ss:
            if q.metric not in s.hi or q.unless in s.hi:
                continue  # `unless`: the other metric has this series over the same hours
            if q.changes:
                continue  # every hour is full: its count is not answered
            metric = {kk: v for kk, v in s.labels.items() if kk in by and v}
            hi, lo = s.hi[q.metric], s.lo[q.metric]
            if q.stat == "onsets":  # one in each hour a code appears, none elsewhere
                at = _onsets(s, sc.scrape_s)
                if at:
                    values = [[_ts(sc.start + (h + 1) * 3600), "1"] for h in at]
                    result.append({"metric": metric, "values": values})
                continue
            if q.kind == "window":
                val = window_stat(q.stat, hi, lo, k)
                result.append({"metric": metric, "value": [sc.end, fmt(val)]})
            else:
                ts = sc.start + (s.hours + 1) * 3600
                each = [hour_stat(q.stat, hi[i : i + 1], lo[i : i + 1], k) for i in range(len(hi))]
                values = [[_ts(t), fmt(float(v))] for t, v in zip(ts, each, strict=True)]
                result.append({"metric": metric, "values": values})
        if q.kind == "window":
            params: dict[str, Any] = {"time": sc.end}
            body = _envelope("vector", result)
        else:
            params = {"start": sc.start + 3600, "end": sc.end, "step": 3600}
            body = _envelope("matrix", result)
        query = (
            q.promql(window_s, spelling)
            if q.kind == "window"
            else q.promql(3600, spelling, full=3600 // sc.scrape_s)
        )
        prom[q.id] = [{"query": query, "params": params, "body": body}]
    served: list[dict[str, Any]] = []
    for s in ss:
        for m in SERVING_WRITTEN:
            if m in s.hi and (s.hi[m] > 0).any():
                keep = {k: v for k, v in s.labels.items() if k in queries.SERVING_LABELS}
                level = float(s.hi[m][s.hi[m] > 0].mean())
                metric = keep | {queries.SERVING_NAME_LABEL: m}
                served.append({"metric": metric, "value": [sc.end, fmt(level)]})
    prom[queries.SERVING.id] = [
        {
            "query": queries.SERVING.promql(window_s, spelling),
            "params": {"time": sc.end},
            "body": _envelope("vector", served),
        }
    ]
    lists = k8s_lists(sc)
    kube = {res: [lst] for res, lst in lists.items()}
    return Snapshot(
        manifest=_manifest(sc, style, generated_by, lists), prometheus=prom, kubernetes=kube
    )


def write_openmetrics(sc: Scenario, out: IO[str], style: str = "helm") -> int:
    ss = series(sc, style)
    per_hour = 3600 // sc.scrape_s
    offsets = (np.arange(per_hour) + 0.5) * sc.scrape_s
    n = 0
    for m in METRICS + HAMI_METRICS + SERVING_WRITTEN + CADVISOR_WRITTEN:
        out.write(f"# TYPE {m} gauge\n")
        for s in ss:
            if m not in s.hi:
                continue
            lab = ",".join(f'{k}="{_esc(v)}"' for k, v in s.labels.items())
            prefix = f"{m}{{{lab}}} "
            integer = m in INT_METRICS
            lines: list[str] = []
            if m in RAMPED:
                total = COUNTER_BASE
                for h, inc in zip(s.hours, s.hi[m], strict=True):
                    base = sc.start + int(h) * 3600
                    for j, off in enumerate(offsets):
                        value = total + inc / per_hour * (j + 0.5)
                        lines.append(f"{prefix}{fmt(value)} {base + int(off)}\n")
                    total += inc
                out.write("".join(lines))
                n += len(lines)
                continue
            for h, hv, lv in zip(s.hours, s.hi[m], s.lo[m], strict=True):
                base = sc.start + int(h) * 3600
                hs = f"{int(hv)}" if integer else f"{hv:.6f}"
                ls = f"{int(lv)}" if integer else f"{lv:.6f}"
                for j, off in enumerate(offsets):
                    lines.append(f"{prefix}{hs if j % 2 == 0 else ls} {base + int(off)}\n")
            out.write("".join(lines))
            n += len(lines)
    out.write("# EOF\n")
    return n

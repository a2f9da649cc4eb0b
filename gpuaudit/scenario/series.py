"""Every series a scenario's dcgm-exporters expose, held column-wise, and the exact answers
Prometheus gives about them.

Within each hour a series alternates between `level + amp` and `level - amp` (see
`gpuaudit.scenario.emit`), so a series is fully described by two values per hour: `hi` and
`lo`, the values Prometheus parses back from the exposition text. All series of one metric are
held in flat numpy arrays (series after series, hours ascending within each), which is what
makes scenarios of tens of thousands of GPUs cheap to write. Every vectorised computation here
reproduces, bit for bit, what a per-series computation in plain numpy gives (the committed demo
and the live tests rely on that); where that cannot be guaranteed for the data at hand
(non-finite values, negative zeros), the per-series computation is used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuaudit.domain import xid
from gpuaudit.scenario import nodes
from gpuaudit.scenario.cluster import Holding, NodeSpec, PodSpec, SlotSpec
from gpuaudit.scenario.generator import Scenario
from gpuaudit.sources.prometheus import catalogue as queries

Arr = np.ndarray[Any, np.dtype[Any]]
DRIVER = "570.133.20"
LABEL_STYLES = ("helm", "honor", "old")
"""`helm`: dcgm-exporter Helm chart defaults (`honorLabels: false`, workload labels arrive as
`exported_pod` ...); `honor`: `honorLabels: true` (`pod` is the workload, or the exporter for
unallocated GPUs); `old`: `--use-old-namespace` (`uuid`, `pod_name` ...)."""

METRICS = (
    queries.ACT_PROF,
    queries.UTIL,
    queries.FB_USED,
    queries.FB_FREE,
    queries.POWER,
    queries.XID,
    queries.REMAP_UNCORR,
    queries.REMAP_FAILURE,
    queries.PCIE_TX,
    queries.PCIE_RX,
    queries.NVLINK_TX,
    queries.NVLINK_RX,
    queries.REMAP_PENDING,
    queries.POWER_LIMIT,
    queries.POWER_VIOLATION,
    queries.THERMAL_VIOLATION,
    queries.SM_CLOCK,
    queries.MAX_SM_CLOCK,
)
COUNTERS = (queries.POWER_VIOLATION, queries.THERMAL_VIOLATION)
"""DCGM's violation counters (ns, `docs/domain.md`, Throttling): a series only for the GPUs whose
slot's `health` names the metric (their exporter's CSV has it), holding per hour the counter's
increase in that hour; its samples ramp up at that rate (`counter_samples`) from
`COUNTER_BASE`, so `increase` over the window is the sum of the hours' increases."""
CLOCKS = (queries.SM_CLOCK, queries.MAX_SM_CLOCK)
"""The SM clock and the GPU's maximum SM clock (MHz): like the counters, a series only for the
GPUs whose slot's `health` names the metric (the root-cause nodes,
`gpuaudit.scenario.rootcause_cases`), constant within each hour."""
COUNTER_BASE = 1e12
"""A violation counter's value at the start of its series (ns since the driver loaded): far from
0, so that Prometheus's extrapolation of `increase` never stops at a zero crossing."""
HAMI_METRICS = (
    queries.HAMI_UTIL,
    queries.HAMI_MEM,
    queries.HAMI_UTIL_LEGACY,
    queries.HAMI_MEM_LEGACY,
)
"""HAMi's vGPU monitor's per-container metrics (`docs/domain.md`, HAMi): the current names
under the `helm` and `honor` styles, the legacy ones under `old` (a cluster of HAMi v2.8)."""
SERVING_WRITTEN = (queries.SERVING_QUEUE_METRICS[0],)
"""Serving engines' gauges the scenario's serving pods export (`PodSpec.serving`): vLLM's
queue (`docs/domain.md`, serving metrics)."""
CADVISOR_WRITTEN = (*queries.CADVISOR_CPU, queries.MEMORY_WORKING_SET)
"""cAdvisor's CPU counters (through the kubelet, `docs/domain.md`, cAdvisor) of the containers
whose CPU the scenario emits (`PodSpec.cpu`): one series per container, holding per hour the
counter's increase in that hour (whole numbers), its samples ramping up as the violation
counters' do (`counter_samples`); the CFS counters only for a container with a CPU limit. And
the working-set gauge of the containers whose memory it emits (`PodSpec.memory`): bytes,
constant within each hour."""
RAMPED = COUNTERS + queries.CADVISOR_CPU
"""The counters, whose samples ramp up by each hour's increase (`counter_samples`)."""
WRITTEN = METRICS + HAMI_METRICS + SERVING_WRITTEN + CADVISOR_WRITTEN
"""Every metric family a scenario's OpenMetrics text has, in the order it is written (a `TYPE`
line each, whether or not the style has series of it)."""
INT_METRICS = {
    *HAMI_METRICS,
    *SERVING_WRITTEN,
    queries.UTIL,
    queries.FB_USED,
    queries.FB_FREE,
    queries.XID,
    queries.REMAP_UNCORR,
    queries.REMAP_FAILURE,
    queries.REMAP_PENDING,
    *RAMPED,
    *CLOCKS,
    *(m for pair in queries.LINK_TRAFFIC.values() for m in pair),
    queries.MEMORY_WORKING_SET,
}
HEALTH = (queries.REMAP_UNCORR, queries.REMAP_FAILURE, queries.REMAP_PENDING)
"""GPU-health gauges emitted for every GPU and MIG instance, constant within each hour."""
LINK_OF = {m: link for link, pair in queries.LINK_TRAFFIC.items() for m in pair}
"""Link traffic gauge -> its link (`pcie`, `nvlink`): emitted for the whole GPUs of nodes whose
exporter exports that link (`NodeSpec.links`), constant over a holding (the holder's
`PodSpec.link_bps`, 0 for a free GPU)."""


def link_bps(h: Holding, metric: str) -> Arr:
    """A holding's traffic on the link of `metric`, every hour."""
    value = h.pod.link_bps.get(LINK_OF[metric], 0.0) if h.pod is not None else 0.0
    return np.full(max(0, h.h1 - h.h0), value)


def carries_link(slot: SlotSpec, metric: str) -> bool:
    """Whether the exporter reports the link traffic `metric` for this slot."""
    return not slot.mig_id and LINK_OF[metric] in slot.node.links


def spelling_of(style: str) -> str:
    return "exported" if style == "helm" else "pod"


def raw_labels(h: Holding, style: str) -> dict[str, str]:
    s, n = h.slot, h.slot.node
    lab = {
        "gpu": str(s.index),
        ("uuid" if style == "old" else "UUID"): s.uuid,
        "pci_bus_id": s.pci_bus_id,
        "device": f"nvidia{s.index}",
        "modelName": n.model,
    }
    if s.mig_id:
        lab["GPU_I_PROFILE"] = s.profile
        lab["GPU_I_ID"] = s.mig_id
    lab["Hostname"] = n.name
    lab["DCGM_FI_DRIVER_VERSION"] = DRIVER
    target = {
        "container": "nvidia-dcgm-exporter",
        "endpoint": "gpu-metrics",
        "instance": f"{n.ip}:9400",
        "job": "nvidia-dcgm-exporter",
        "namespace": "gpu-operator",
        "pod": n.exporter_pod,
        "service": "nvidia-dcgm-exporter",
    }
    # dcgm-exporter maps pod-resources devices only: a device held through a DRA claim keeps
    # no pod labels (unless the exporter's own DRA mapping is on).
    p = h.pod if n.pod_labels and h.pod is not None and not h.pod.dra else None
    if style == "helm":
        if p:
            lab.update(
                exported_container=p.container, exported_namespace=p.namespace, exported_pod=p.name
            )
        lab.update(target)
    elif style == "honor":
        lab.update(target)
        if p:
            lab.update(container=p.container, namespace=p.namespace, pod=p.name)
    else:
        lab.update({k: v for k, v in target.items() if k not in ("pod", "namespace", "container")})
        if p:
            lab.update(container_name=p.container, pod_namespace=p.namespace, pod_name=p.name)
    return lab


def hami_labels(p: PodSpec, node: NodeSpec, uuid: str, style: str) -> dict[str, str]:
    """The labels of a HAMi tenant's container series as Prometheus stores them: HAMi's own
    (`cmd/vGPUmonitor/metrics.go`, with the `zone` its registry adds) and the scrape target's
    of the chart's ServiceMonitor, which sets no `honorLabels`."""
    target = {
        "container": "vgpu-monitor",
        "endpoint": "monitorport",
        "instance": f"{node.ip}:9394",
        "job": "hami-device-plugin-monitor",
        "namespace": "kube-system",
        "pod": f"hami-device-plugin-{node.name}",
        "service": "hami-device-plugin-monitor",
    }
    who = {"namespace": p.namespace, "pod": p.name, "container": p.container}
    if style == "old":  # HAMi v2.8: the legacy names, which collide with no target label
        legacy = {"podnamespace": p.namespace, "podname": p.name, "ctrname": p.container}
        return {**target, **legacy, "vdeviceid": "0", "deviceuuid": uuid, "zone": "vGPU"}
    own = {"vdevice_index": "0", "device_uuid": uuid, "zone": "vGPU"}
    if style == "helm":
        return {**target, **{f"exported_{k}": v for k, v in who.items()}, **own}
    return {**{k: v for k, v in target.items() if k not in who}, **who, **own}


def hami_series(sc: Scenario, style: str) -> dict[str, Values]:
    """HAMi's per-container series of the scenario's HAMi tenants (`PodSpec.hami_use`), by
    metric: each hour's utilization and the most memory, constant within the hour."""
    legacy = style == "old"
    util_m = queries.HAMI_UTIL_LEGACY if legacy else queries.HAMI_UTIL
    mem_m = queries.HAMI_MEM_LEGACY if legacy else queries.HAMI_MEM
    node_of = {n.name: n for n in sc.nodes}
    labels: list[dict[str, str]] = []
    hours: list[Arr] = []
    util: list[Arr] = []
    mem: list[Arr] = []
    for p in sc.pods:
        if p.hami_use is None or not p.alive:
            continue
        uuid, pct, most = p.hami_use
        labels.append(hami_labels(p, node_of[p.node], uuid, style))
        hours.append(np.arange(p.created_h, p.created_h + len(pct), dtype=np.float64))
        util.append(np.asarray(pct, dtype=np.float64))
        mem.append(np.full(len(pct), float(most)))
    if not labels:
        return {}
    off = np.zeros(len(labels) + 1, dtype=np.int64)
    np.cumsum([len(h) for h in hours], out=off[1:])
    at = np.concatenate(hours)
    u, m = np.concatenate(util), np.concatenate(mem)
    return {
        util_m: Values(util_m, labels, None, off, at, u, u),
        mem_m: Values(mem_m, labels, None, off, at, m, m),
    }


def serving_labels(p: PodSpec, node: NodeSpec) -> dict[str, str]:
    """The labels of a serving pod's own gauge as Prometheus stores them: the engine's
    (`model_name`, `engine`) and the scrape target's, the pod itself (a PodMonitor `vllm` on
    its metrics port): `namespace` and `pod` name it in every label style."""
    return {
        "container": p.container,
        "endpoint": "metrics",
        "engine": "0",
        "instance": f"{node.ip}:8000",
        "job": f"{p.namespace}/vllm",
        "model_name": "meta-llama/Llama-3.1-8B-Instruct",
        "namespace": p.namespace,
        "pod": p.name,
    }


def serving_series(sc: Scenario) -> dict[str, Values]:
    """The serving pods' gauges (`PodSpec.serving`), by metric: each hour's level, constant
    within the hour."""
    node_of = {n.name: n for n in sc.nodes}
    by: dict[str, tuple[list[dict[str, str]], list[Arr], list[Arr]]] = {}
    for p in sc.pods:
        if p.serving is None or not p.alive:
            continue
        metric, levels = p.serving
        labels, hours, vals = by.setdefault(metric, ([], [], []))
        labels.append(serving_labels(p, node_of[p.node]))
        hours.append(np.arange(p.created_h, p.created_h + len(levels), dtype=np.float64))
        vals.append(np.asarray(levels, dtype=np.float64))
    out: dict[str, Values] = {}
    for metric, (labels, hours, vals) in by.items():
        off = np.zeros(len(labels) + 1, dtype=np.int64)
        np.cumsum([len(h) for h in hours], out=off[1:])
        v = np.concatenate(vals)
        out[metric] = Values(metric, labels, None, off, np.concatenate(hours), v, v)
    return out


CFS_PERIODS_PER_HOUR = 36_000
"""CFS enforcement periods in an hour at the kernel's default period (100 ms)."""


def cadvisor_labels(p: PodSpec, node: NodeSpec) -> dict[str, str]:
    """The labels of a container's cAdvisor series as Prometheus stores them, scraped from the
    kubelet's `/metrics/cadvisor` by kube-prometheus-stack's kubelet ServiceMonitor (which
    keeps the kubelet's `namespace`, `pod` and `container`)."""
    return {
        "container": p.container,
        "endpoint": "https-metrics",
        "id": f"/kubepods.slice/kubepods-pod{p.uid.replace('-', '_')}.slice/{p.container}",
        "instance": f"{node.ip}:10250",
        "job": "kubelet",
        "metrics_path": "/metrics/cadvisor",
        "namespace": p.namespace,
        "node": node.name,
        "pod": p.name,
        "service": "kube-prometheus-stack-kubelet",
    }


def cadvisor_series(sc: Scenario) -> dict[str, Values]:
    """The cAdvisor CPU counters of the pods whose CPU the scenario emits (`PodSpec.cpu`), by
    metric: each hour's increase (CPU seconds; CFS periods and throttled periods for a
    container with a CPU limit); and the working set of those whose memory it emits
    (`PodSpec.memory`), each hour's level."""
    node_of = {n.name: n for n in sc.nodes}
    rows: dict[str, tuple[list[dict[str, str]], list[Arr], list[Arr]]] = {
        m: ([], [], []) for m in CADVISOR_WRITTEN
    }
    for p in sc.pods:
        if not p.alive or (p.cpu is None and p.memory is None):
            continue
        labels = cadvisor_labels(p, node_of[p.node])
        got: dict[str, Arr] = {}
        if p.cpu is not None:
            cores, share = (np.asarray(x, dtype=np.float64) for x in p.cpu)
            per = np.full(len(cores), float(CFS_PERIODS_PER_HOUR))
            got[queries.CPU_USAGE] = np.round(cores * 3600.0)
            if "cpu" in p.resources:
                got[queries.CPU_PERIODS] = per
                got[queries.CPU_THROTTLED] = np.round(share * per)
        if p.memory is not None:
            got[queries.MEMORY_WORKING_SET] = np.round(np.asarray(p.memory, dtype=np.float64))
        for m, vals in got.items():
            rows[m][0].append(labels)
            rows[m][1].append(np.arange(p.created_h, p.created_h + len(vals), dtype=np.float64))
            rows[m][2].append(vals)
    out: dict[str, Values] = {}
    for m, (names, at, got_vals) in rows.items():
        if not names:
            continue
        off = np.zeros(len(names) + 1, dtype=np.int64)
        np.cumsum([len(h) for h in at], out=off[1:])
        v = np.concatenate(got_vals)
        out[m] = Values(m, names, None, off, np.concatenate(at), v, v)
    return out


def busy_level(levels: Arr) -> float | None:
    """What the `serving_busy` query answers of a gauge constant within each hour (each hour
    the same number of its 60 s steps): the mean of the hours' levels above 0; None where none
    is."""
    up = levels[levels > 0]
    return float(up.mean()) if len(up) else None


def xid_text(code: int) -> str:
    return "No Error" if code == 0 else xid.meaning(code)


def onset_visible(scrape_s: int) -> bool:
    """Whether the `xid_events_hourly` query (`catalogue._onsets`) sees the XID gauge change code at
    an hour boundary of data scraped every `scrape_s` seconds, mid-interval: some subquery
    step `t` must have a sample of the new code in (t - step, t], none in (t - 2 step,
    t - step], and the old code's last sample in (t - 2 step, t - step] (left-open look back,
    as Prometheus 3 has it; the two cannot differ at the scrape intervals the tests use)."""
    step = queries.ONSET_STEP_S
    first = scrape_s / 2
    t = math.ceil(first / step) * step
    return t < 2 * step - first


# ---- exact vectorised number handling -------------------------------------------------


def round6(x: Arr, out: Arr | None = None, block: int = 1 << 16) -> Arr:
    """`float(f"{v:.6f}")` of every element (the value Prometheus parses from `%.6f` text),
    exactly, without formatting each one (into `out`, which may be `x`).

    `rint(v * 1e6)` is the correctly rounded `v * 10**6` unless the product lies within its own
    rounding error of a half-integer (or is huge, or not finite): those few are formatted one by
    one. The rest are `k / 1e6`, the nearest double to `k / 10**6`, which is what `float()` of
    the 6-decimal text gives."""
    v = np.ascontiguousarray(x, dtype=np.float64)
    res: Arr = np.empty_like(v) if out is None else out
    for i in range(0, len(v), block):
        part = v[i : i + block]
        y = part * 1e6
        k = np.rint(y)
        with np.errstate(invalid="ignore"):
            y -= k
            np.abs(y, out=y)
            y -= 0.5
            np.abs(y, out=y)
            ok = (y > (np.abs(k) + 1) * 2.0**-50) & (np.abs(k) < 2.0**52)
        bad = np.flatnonzero(~ok) if not ok.all() else None
        slow = [float(f"{e:.6f}") for e in part[bad].tolist()] if bad is not None else []
        np.divide(k, 1e6, out=res[i : i + block])
        if bad is not None:
            res[i + bad] = slow
    return res


def fmt(v: float) -> str:
    """A float as Prometheus's JSON writes it (shortest round-trip, no exponent)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return str(np.format_float_positional(v, trim="-"))


def distinct(x: Arr, text: Callable[[float], str], block: int = 1 << 16) -> tuple[list[str], Arr]:
    """`text` of every element, computed once per distinct value (bit pattern, so -0.0 and 0.0
    stay apart): (the texts of the distinct values, each element's index into them).
    Blockwise: sorting small blocks is much faster than sorting everything."""
    bits = np.ascontiguousarray(x, dtype=np.float64).view(np.int64)
    codes = np.empty(len(bits), dtype=np.int32 if len(bits) < 2**31 else np.int64)
    index: dict[int, int] = {}
    texts: list[str] = []
    for i in range(0, len(bits), block):
        u, inv = np.unique(bits[i : i + block], return_inverse=True)
        local = []
        for b, f in zip(u.tolist(), u.view(np.float64).tolist(), strict=True):
            c = index.get(b)
            if c is None:
                c = index[b] = len(texts)
                texts.append(text(f))
            local.append(c)
        codes[i : i + block] = np.array(local, dtype=codes.dtype)[inv.reshape(-1)]
    return texts, codes


def _scan(a: Arr, block: int = 1 << 16) -> tuple[bool, bool, float]:
    """(finite with no negative zero, all whole numbers, the largest magnitude), blockwise."""
    plain = whole = True
    top = 0.0
    for i in range(0, len(a), block):
        part = a[i : i + block]
        if not np.isfinite(part).all():
            return False, False, math.inf
        plain = plain and not (np.signbit(part) & (part == 0)).any()
        whole = whole and bool((np.floor(part) == part).all())
        if len(part):
            top = max(top, float(np.abs(part).max()))
    return plain, whole, top


# ---- per-series statistics (the reference definitions) ---------------------------------


def quantile(q: float, hi: Arr, lo: Arr, k: int) -> float:
    """Prometheus's `quantile_over_time` over a multiset where every hi and lo occurs k times."""
    vals = np.concatenate([hi, lo])
    order = np.argsort(vals, kind="stable")
    vals = vals[order]
    n = len(vals) * k
    rank = q * (n - 1)
    lower = max(0, math.floor(rank))
    upper = min(n - 1, lower + 1)
    weight = rank - math.floor(rank)
    a, b = vals[lower // k], vals[upper // k]
    return float(a * (1 - weight) + b * weight)


def window_stat(stat: str, hi: Arr, lo: Arr, k: int) -> float:
    if stat == "sum":
        return float((hi.sum() + lo.sum()) * k)
    if stat == "max":
        return float(max(hi.max(), lo.max()))
    if stat == "p95":
        return quantile(0.95, hi, lo, k)
    return float(2 * k * len(hi))


def sample_offsets_ms(scrape_s: int) -> Arr:
    """When a series' samples fall within an hour, in milliseconds: half a scrape interval
    past each scrape mark (7.5 s at a 15 s interval), so that no range selector on the hour or
    on the step has a sample on its edge."""
    return (np.arange(3600 // scrape_s, dtype=np.int64) * 2 + 1) * (scrape_s * 500)


def counter_samples(v: Values, per_hour: int) -> Arr:
    """Every sample of a counter's series, (points, `per_hour`): from `COUNTER_BASE` at its
    series' first hour's start, up by each hour's increase (`hi`) spread evenly over the hour,
    read at the samples' times (half a scrape interval past each scrape mark)."""
    out: Arr = np.empty((len(v.hi), per_hour))
    if not len(v.hi):
        return out
    step = v.hi / per_hour
    before = np.cumsum(v.hi) - v.hi
    first = np.repeat(v.off[:-1], np.diff(v.off))
    before = before - before[first]
    out[:] = COUNTER_BASE + before[:, None] + step[:, None] * (np.arange(per_hour) + 0.5)
    return out


def levels(v: Values) -> tuple[Arr, Arr]:
    """`hi` and `lo` as Prometheus holds them: parsed from the text `emit.write_openmetrics`
    writes (integers truncated, other values to 6 decimals)."""

    def text(x: float) -> str:
        return f"{int(x)}" if v.metric in INT_METRICS else f"{x:.6f}"

    out = []
    for arr in (v.hi, v.lo):
        texts, codes = distinct(arr, text)
        out.append(np.array([float(t) for t in texts], dtype=np.float64)[codes])
    return out[0], out[1]


# ---- the table ---------------------------------------------------------------------------


@dataclass
class Values:
    """One metric's levels over the series that carry it."""

    metric: str
    labels: list[dict[str, str]]
    """The labels of each series carrying the metric, in exposition order."""
    rows: Arr | None
    """Each series' index in the table's main series (XID series, for the XID metric); None:
    all of them, in order."""
    off: Arr
    """Series i's points are [off[i], off[i + 1])."""
    hours: Arr
    """Absolute hour index of every point (float64)."""
    hi: Arr
    lo: Arr
    _flags: tuple[bool, bool, float] | None = None

    @property
    def lengths(self) -> Arr:
        return np.diff(self.off)

    def flags(self) -> tuple[bool, bool, float]:
        """(`hi` and `lo` finite with no negative zero, all whole numbers, largest magnitude)."""
        if self._flags is None:
            a, b = _scan(self.hi), _scan(self.lo)
            self._flags = (a[0] and b[0], a[1] and b[1], max(a[2], b[2]))
        return self._flags

    def window(self, stat: str, k: int) -> Arr:
        """`window_stat` of every series (`increase` of a counter: its hours' increases)."""
        n = len(self.labels)
        lens = self.lengths
        hi, lo, off = self.hi, self.lo, self.off
        if stat == "increase":
            return np.array([float(hi[a:b].sum()) for a, b in zip(off[:-1], off[1:], strict=True)])
        if stat not in ("sum", "max", "p95"):
            return (2 * k * lens).astype(np.float64)
        if n == 0:
            return np.zeros(0)
        nonempty = bool((lens > 0).all())
        plain, whole, top = self.flags()
        if stat == "sum" and nonempty and whole and top * 2.0 * k * float(lens.max()) < 2.0**52:
            # Sums of whole numbers are exact in any order.
            starts = off[:-1]
            res: Arr = (np.add.reduceat(hi, starts) + np.add.reduceat(lo, starts)) * k
            return res
        if stat == "max" and nonempty and plain:
            starts = off[:-1]
            res = np.maximum(np.maximum.reduceat(hi, starts), np.maximum.reduceat(lo, starts))
            return res
        if stat == "p95" and nonempty and plain:
            return self._p95(k)
        bounds = off.tolist()
        return np.array(
            [
                window_stat(stat, hi[a:b], lo[a:b], k)
                for a, b in zip(bounds[:-1], bounds[1:], strict=True)
            ],
            dtype=np.float64,
        )

    def _p95(self, k: int, q: float = 0.95, rows: int = 4096) -> Arr:
        """`quantile` of every series, series of one length at a time (with no NaN or negative
        zero, sorting needs no stable tie-break)."""
        lens = self.lengths
        out = np.empty(len(lens))
        for length in np.unique(lens).tolist():
            which = np.flatnonzero(lens == length)
            n = 2 * length * k
            rank = q * (n - 1)
            lower = max(0, math.floor(rank))
            upper = min(n - 1, lower + 1)
            weight = rank - math.floor(rank)
            cols = np.arange(length)
            for c in range(0, len(which), rows):
                part = which[c : c + rows]
                pos = self.off[part][:, None] + cols
                vals = np.concatenate([self.hi[pos], self.lo[pos]], axis=1)
                vals.sort(axis=1)
                a, b = vals[:, lower // k], vals[:, upper // k]
                out[part] = a * (1 - weight) + b * weight
        return out

    def without(self, carried: Arr) -> Values | None:
        """These series less those whose main series `carried` marks (PromQL `unless` of a
        metric carried by those series over the same hours); None when none is left."""
        rows = np.arange(len(self.labels)) if self.rows is None else self.rows
        keep = ~carried[rows]
        if keep.all():
            return self
        idx = np.flatnonzero(keep)
        if not len(idx):
            return None
        lens = self.lengths[idx]
        off = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(lens, out=off[1:])
        points = np.repeat(keep, self.lengths)
        return Values(
            self.metric,
            [self.labels[i] for i in idx.tolist()],
            rows[idx],
            off,
            self.hours[points],
            self.hi[points],
            self.lo[points],
        )

    def hourly(self, stat: str, k: int) -> Arr:
        """Every point's bucket statistic, as an hourly query of `stat` answers it: the mean,
        the p95 (`quantile` of the hour's k `hi` and k `lo` samples), or a counter's increase
        (its `hi`, `counter_samples`)."""
        if stat == "increase":
            return self.hi
        if stat != "p95":
            return self.means(k)
        if not self.flags()[0]:
            hi, lo = self.hi, self.lo
            return np.array(
                [quantile(0.95, hi[i : i + 1], lo[i : i + 1], k) for i in range(len(hi))]
            )
        # The hour's samples sorted are k of the lower level, then k of the higher.
        n = 2 * k
        rank = 0.95 * (n - 1)
        lower = max(0, math.floor(rank))
        upper = min(n - 1, lower + 1)
        weight = rank - math.floor(rank)
        low, high = np.minimum(self.hi, self.lo), np.maximum(self.hi, self.lo)
        a = low if lower // k == 0 else high
        b = low if upper // k == 0 else high
        out: Arr = a * (1 - weight) + b * weight
        return out

    def means(self, k: int, block: int = 1 << 16) -> Arr:
        """The hourly `sum_over_time / count_over_time` of every point."""
        res: Arr = np.empty(len(self.hi))
        for i in range(0, len(res), block):
            res[i : i + block] = (self.hi[i : i + block] * k + self.lo[i : i + block] * k) / (2 * k)
        return res


class Table:
    """The series of a scenario under one label style: the main series (one per GPU or MIG
    instance and workload labels, in the order their first holding appears), each followed,
    in exposition order, by its XID series (one per XID code it showed)."""

    def __init__(self, sc: Scenario, style: str) -> None:
        groups: dict[tuple[tuple[str, str], ...], list[Holding]] = {}
        for h in sc.holdings:
            if not h.slot.node.exporter or (h.pod is not None and h.pod.dcgm_hidden):
                continue
            key = tuple(sorted(raw_labels(h, style).items()))
            groups.setdefault(key, []).append(h)
        self.labels: list[dict[str, str]] = []
        self.slots: list[SlotSpec] = []
        self.holdings: list[Holding] = []
        hser: list[int] = []
        for i, (key, hs) in enumerate(groups.items()):
            hs.sort(key=lambda h: h.h0)
            self.labels.append(dict(key))
            self.slots.append(hs[0].slot)
            self.holdings.extend(hs)
            hser.extend([i] * len(hs))
        self.hser = np.array(hser, dtype=np.int64)
        """Each holding's series."""
        h0 = np.array([h.h0 for h in self.holdings], dtype=np.int64)
        hlen = np.array([max(0, h.h1 - h.h0) for h in self.holdings], dtype=np.int64)
        n = len(self.labels)
        lengths = np.bincount(self.hser, weights=hlen, minlength=n).astype(np.int64)
        self.off = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.off[1:])
        total = int(self.off[-1])
        first = np.repeat(np.cumsum(hlen) - hlen, hlen)
        self.hours: Arr = (np.arange(total) - first + np.repeat(h0, hlen)).astype(np.float64)
        self.mig = np.array([bool(s.mig_id) for s in self.slots], dtype=bool)
        self.hami = hami_series(sc, style)
        """HAMi's per-container series by metric (none where no pod is a HAMi tenant)."""
        self.serving = serving_series(sc)
        """The serving pods' own gauges by metric (none where no pod exports one)."""
        self.cadvisor = cadvisor_series(sc)
        """cAdvisor's CPU counters of the pods whose CPU the scenario emits, by metric."""
        self._xid: tuple[list[dict[str, str]], Arr, Arr, Arr] | None = None
        self._xid_group: list[int] | None = None
        """Each XID series' main series; None while every GPU's gauge read 0 throughout."""

    @property
    def n(self) -> int:
        return len(self.labels)

    def carries(self, m: str) -> Arr:
        """Which main series carry metric `m` (over all their hours): every one, but MIG
        instances have no GPU_UTIL."""
        if m == queries.UTIL:
            return ~self.mig
        return np.ones(self.n, dtype=bool)

    # -- raw per-holding arrays, concatenated in series order --
    def _fill(self, get: Callable[[Holding], Arr], keep: Arr | None) -> Arr:
        """`get` of every holding (of the kept series), one after the other, as float64: the
        same values as concatenating them and converting (one cast per element), without the
        concatenation's copies."""
        total = int(self.off[-1]) if keep is None else int(np.diff(self.off)[keep].sum())
        out: Arr = np.empty(total)
        pos = 0
        keep_of = None if keep is None else keep[self.hser].tolist()
        for j, h in enumerate(self.holdings):
            if keep_of is not None and not keep_of[j]:
                continue
            part = get(h)
            out[pos : pos + len(part)] = part
            pos += len(part)
        if pos != total:
            raise ValueError("scenario holding arrays do not match their hours")
        return out

    def _subset(self, keep: Arr | None) -> tuple[Arr, Arr, Arr]:
        """(series indices, offsets, mask of their points) of the kept series (all of them, and
        an empty mask, when `keep` is None)."""
        if keep is None:
            return np.arange(self.n), self.off, np.ones(0, dtype=bool)
        idx = np.flatnonzero(keep)
        lens = np.diff(self.off)[idx]
        off = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(lens, out=off[1:])
        return idx, off, np.repeat(keep, np.diff(self.off))

    def values(self, m: str) -> Values | None:
        """The levels of metric `m` (None: no series carries it)."""
        if m == queries.XID:
            labels, off, hours, vals = self.xid()
            return Values(m, labels, None, off, hours, vals, vals) if labels else None
        if m in HAMI_METRICS:
            return self.hami.get(m)
        if m in SERVING_WRITTEN:
            return self.serving.get(m)
        if m in CADVISOR_WRITTEN:
            return self.cadvisor.get(m)
        if m not in METRICS:
            return None
        keep: Arr | None = None
        if m == queries.UTIL:
            keep = ~self.mig
            if not keep.any():
                return None
        if m in LINK_OF:
            keep = np.array([carries_link(s, m) for s in self.slots], dtype=bool)
            if not keep.any():
                return None
        if m == queries.POWER_LIMIT:
            keep = np.array([s.node.model in nodes.LIMIT_EXPORTED for s in self.slots], dtype=bool)
            if not keep.any():
                return None
        if m in COUNTERS or m in CLOCKS:
            keep = np.array([m in s.health for s in self.slots], dtype=bool)
            if not keep.any():
                return None
        if self.n == 0:
            return None
        idx, off, mask = self._subset(keep)
        hours = self.hours if keep is None else self.hours[mask]
        if m == queries.ACT_PROF:
            hi = round6(self._fill(lambda h: h.act + h.act_amp, keep))
            lo = round6(self._fill(lambda h: h.act - h.act_amp, keep))
        elif m == queries.UTIL:
            hi = np.round(self._fill(lambda h: h.util + h.util_amp, keep))
            lo = np.round(self._fill(lambda h: h.util - h.util_amp, keep))
        elif m == queries.FB_USED:
            hi = np.round(self._fill(lambda h: h.fb_used + h.fb_amp, keep))
            lo = np.round(self._fill(lambda h: h.fb_used - h.fb_amp, keep))
        elif m == queries.FB_FREE:
            mem = np.array([float(s.mem_mib) for s in self.slots])
            each = np.repeat(mem, np.diff(self.off))
            hi = np.round(each - self._fill(lambda h: h.fb_used - h.fb_amp, keep))
            lo = np.round(each - self._fill(lambda h: h.fb_used + h.fb_amp, keep))
        elif m == queries.POWER:
            hi = round6(self._fill(lambda h: h.power, keep))
            lo = hi
        elif m in LINK_OF:
            # Whole bytes per second: DCGM's link traffic fields are INT64, which dcgm-exporter
            # writes with `%d` (`docs/domain.md`), so their window sums are exact in any order.
            hi = np.round(self._fill(lambda h: link_bps(h, m), keep))
            lo = hi
        elif m == queries.POWER_LIMIT:
            hi = lo = self._fill(lambda h: np.full(h.h1 - h.h0, nodes.TDP[h.slot.node.model]), keep)
        elif m in COUNTERS or m in CLOCKS:
            parts = [
                self.slots[i].health_at(m, self.hours[self.off[i] : self.off[i + 1]])
                for i in idx.tolist()
            ]
            hi = lo = np.round(np.concatenate(parts)) if parts else np.zeros(0)
        else:  # GPU health, constant within each hour
            vals = np.zeros(len(hours))
            for i, slot in enumerate(self.slots):
                if slot.health.get(m):
                    a, b = int(self.off[i]), int(self.off[i + 1])
                    vals[a:b] = slot.health_at(m, self.hours[a:b])
            hi = lo = np.round(vals)
        if keep is None:
            return Values(m, self.labels, None, off, hours, hi, lo)
        rows = idx.tolist()
        return Values(m, [self.labels[i] for i in rows], idx, off, hours, hi, lo)

    def xid(self) -> tuple[list[dict[str, str]], Arr, Arr, Arr]:
        """The XID series: (labels, offsets, hours, values). The XID gauge holds the last XID
        code and names it in `err_code`/`err_msg`, so each code a GPU showed is a series of its
        own over the hours it showed it."""
        if self._xid is not None:
            return self._xid
        none = {"err_code": "0", "err_msg": xid_text(0)}
        lens = np.diff(self.off)
        if (lens > 0).all() and not any(s.health.get(queries.XID) for s in self.slots):
            labels = [lab | none for lab in self.labels]
            self._xid = (labels, self.off, self.hours, np.zeros(len(self.hours)))
            return self._xid
        labels = []
        groups: list[int] = []
        hparts: list[Arr] = []
        vparts: list[Arr | None] = []
        bounds = self.off.tolist()
        for i, slot in enumerate(self.slots):
            hours = self.hours[bounds[i] : bounds[i + 1]]
            if not slot.health.get(queries.XID) and len(hours):
                labels.append(self.labels[i] | none)
                groups.append(i)
                hparts.append(hours)
                vparts.append(None)
                continue
            codes = slot.health_at(queries.XID, hours)
            for code in dict.fromkeys(codes.tolist()):
                sel = codes == code
                c = int(code)
                labels.append(self.labels[i] | {"err_code": str(c), "err_msg": xid_text(c)})
                groups.append(i)
                hparts.append(hours[sel])
                vparts.append(codes[sel])
        off = np.zeros(len(labels) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in hparts], out=off[1:])
        vals = np.zeros(int(off[-1]))
        for j, part in enumerate(vparts):
            if part is not None:
                vals[off[j] : off[j + 1]] = part
        self._xid = (labels, off, np.concatenate(hparts) if hparts else np.zeros(0), vals)
        self._xid_group = groups
        return self._xid

    def xid_onset_hours(self, scrape_s: int) -> tuple[Arr, Arr]:
        """(XID series in `xid()` order, hour index) of every change of the gauge into a code,
        as the `xid_events_hourly` query counts them: one in each hour that starts a code other
        than 0 which the hour before, in the same series group (every hour the GPU's XID gauge
        was exposed), did not show (`onset_visible`); in series order and ascending hours."""
        labels, off, hours, vals = self.xid()
        series: list[int] = []
        at: list[float] = []
        if onset_visible(scrape_s) and self._xid_group is not None:
            bounds = off.tolist()
            for j, i in enumerate(self._xid_group):
                a, b = bounds[j], bounds[j + 1]
                if b > a and vals[a]:
                    group = set(self.hours[int(self.off[i]) : int(self.off[i + 1])].tolist())
                    own = hours[a:b].tolist()
                    mine = set(own)
                    hit = sorted(h for h in own if h - 1 in group and h - 1 not in mine)
                    series += [j] * len(hit)
                    at += hit
        return np.array(series, dtype=np.int64), np.array(at, dtype=np.float64)

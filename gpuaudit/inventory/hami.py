"""GPUs shared by HAMi: which pods hold what share of which GPU, and what each of them used.

HAMi's scheduler writes what it granted a pod into the pod's annotation
`hami.io/vgpu-devices-allocated` (per container: each GPU's UUID, the memory in MiB and the per
cent of its cores), and its device plugin registers each GPU's memory and cores in the node
annotation `hami.io/node-nvidia-register` (`docs/domain.md`, HAMi). dcgm-exporter cannot name
the pods of such a GPU (their device IDs are no UUIDs), so its DCGM series carry no pod: here
each pod HAMi placed on a GPU becomes a holder of it for the time it ran, charged its share: a
running pod, and one that ended in the window (Succeeded, Failed) at a known time (`FINISHED`,
its containers' latest `finishedAt`; one whose end is not known is not placed, as nothing says
when it held its share).

A pod's share of a GPU (`share`) is the larger of its cores over the GPU's and its memory over
the GPU's, since HAMi's scheduler keeps other pods off a GPU by either (its `Fit`). Where the
shares of a GPU's pods that ran at one time add up to more than 1 (a pod with many cores and
little memory beside one with the reverse), they are scaled down together (each by the most
they add up to while it ran; pods that held a GPU one after another are not): a GPU never
counts for more than itself, and the attribution ledger (`Method.HAMI_SHARE`) still sums to the
allocated GPU-hours. What no pod holds of the GPU stays unheld: a 25 % pod alone on a GPU is
charged 0.25 of it, in allocation, idle GPU-hours and cost alike (OpenCost charges it the whole
GPU: opencost/opencost#3828).

Each pod's holding is a copy of its GPU's DCGM series in the buckets its pod ran in, from its
start (`status.startTime`) to its end or the window's: held time is the GPU's samples x the
scrape interval, and in a bucket the pod started or ended inside, the part of it the pod ran (at
most the GPU's held time there), as the Kubernetes-side join counts it
(`gpuaudit.inventory.bucketjoin`). Its activity is its own:

- where HAMi's vGPU monitor reports the pod's containers' SM utilization of the GPU
  (`hami_container_device_utilization_ratio`, or the legacy
  `Device_utilization_desc_of_container`) and its cores are above 0 and below the GPU's (HAMi
  records the utilization only then), its activity in a bucket is that utilization over its
  share (what it used of the part it is charged for, at most 1);
- otherwise, and in buckets the monitor missed, the GPU's DCGM activity over the shares of its
  pods that ran in that bucket together: the GPU's activity split among them by share, each
  over its own.

Framebuffer, power and link figures are the GPU's, not the pod's: they are missing on its
holding (and stay on the GPU's unheld one, with the health maxima).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuaudit.inventory import columns as C
from gpuaudit.inventory.arrays import Arr, block_starts
from gpuaudit.inventory.attribution import Method
from gpuaudit.inventory.capabilities import Capability
from gpuaudit.inventory.kube import ENDED_PHASES
from gpuaudit.inventory.parse import Metric, Parser, Stat, from_hourly
from gpuaudit.sources.prometheus import catalogue as queries

if TYPE_CHECKING:
    import pandas as pd

ALLOCATED = "hami.io/vgpu-devices-allocated"
"""The pod annotation of what HAMi's scheduler granted: per container (`;`-terminated) each GPU
as `UUID,TYPE,MEMORY_MiB,CORES` (`:`-terminated)."""
REGISTER = "hami.io/node-nvidia-register"
"""The node annotation of the GPUs HAMi's device plugin registered (JSON from HAMi v2.8, text
before)."""
MAX_ANNOTATION = 65_536
"""Longest annotation read (characters); a longer one is a note and is not read."""
MAX_DEVICES = 1_024
"""Most GPUs one annotation may name; more is a note and the annotation is not read."""
MAX_MIB = 2**31 - 1
"""Largest memory figure (MiB) HAMi writes (an int32)."""
FULL_CORES = 100
"""A GPU's cores when the node annotation does not say (HAMi's `devcore` without scaling)."""
ACT_SOURCE_DEVICE = "hami_device_split"
"""`ACT_SOURCE` of a HAMi pod's holding whose activity is its GPU's DCGM activity split by
share (no per-container utilization for it)."""

Hourly = tuple[Arr, Arr, Arr, Arr]


@dataclass(frozen=True)
class Device:
    """One GPU as HAMi's device plugin registered it."""

    uuid: str
    node: str
    mem_mib: float
    """Its memory as HAMi counts it (MiB, times `deviceMemoryScaling`)."""
    cores: float
    """Its cores as HAMi counts them (100 times `deviceCoreScaling`)."""
    count: int
    """Its split count: the most containers it takes."""


@dataclass(frozen=True)
class Grant:
    """What HAMi granted one pod of one GPU (its containers' grants added up)."""

    namespace: str
    pod: str
    uuid: str
    mem_mib: float
    cores: float
    containers: int
    """How many of the pod's containers were granted part of this GPU."""


@dataclass
class Kube:
    """The HAMi side of the Kubernetes objects."""

    grants: list[Grant] = field(default_factory=list)
    devices: dict[str, Device] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    """Annotations that could not be read, a sentence each (warnings)."""
    mig: int = 0
    """Grants of MIG instances (HAMi's MIG mode), which are not joined here."""


def _int(text: str, hi: float) -> float | None:
    text = text.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 12:
        return None
    n = float(int(text))
    return n if n <= hi else None


def parse_allocated(text: str) -> tuple[list[tuple[int, str, float, float]], int] | None:
    """(container index, UUID, memory MiB, cores) of every NVIDIA GPU a pod annotation names,
    and how many MIG instances it names (left out); None when it is not HAMi's format."""
    if len(text) > MAX_ANNOTATION:
        return None
    out: list[tuple[int, str, float, float]] = []
    mig = 0
    for ctr, group in enumerate(text.split(";")):
        for dev in group.split(":"):
            if not dev.strip():
                continue
            parts = dev.split(",")
            if len(parts) < 4:
                return None
            uuid, kind = parts[0].strip(), parts[1].strip()
            mem, cores = _int(parts[2], MAX_MIB), _int(parts[3], 10**6)
            if not uuid or len(uuid) > 128 or mem is None or cores is None:
                return None
            if kind != "NVIDIA":
                continue
            if "[" in uuid:  # a MIG instance of HAMi's MIG mode: `GPU-...[gi-ci]`
                mig += 1
                continue
            out.append((ctr, uuid, mem, min(cores, float(FULL_CORES))))
            if len(out) > MAX_DEVICES:
                return None
    return out, mig


def parse_register(text: str, node: str) -> list[Device] | None:
    """The GPUs of a node annotation, JSON (HAMi v2.8 on) or text (before); None when it is
    neither."""
    if len(text) > MAX_ANNOTATION:
        return None
    out: list[Device] = []
    if text.lstrip().startswith("["):
        try:
            raw = json.loads(text)
        except ValueError:
            return None
        if not isinstance(raw, list) or len(raw) > MAX_DEVICES:
            return None
        for d in raw:
            if not isinstance(d, Mapping):
                return None
            uuid, mem, cores, count = d.get("id"), d.get("devmem"), d.get("devcore"), d.get("count")
            if not isinstance(uuid, str) or not uuid or len(uuid) > 128:
                return None
            nums = [
                v if isinstance(v, int) and not isinstance(v, bool) else None
                for v in (mem, cores, count)
            ]
            if any(v is None or v < 0 or v > MAX_MIB for v in nums):
                return None
            m, c, n = (float(v) for v in nums if v is not None)
            out.append(Device(uuid, node, m, c, int(n)))
        return out
    for dev in text.split(":"):
        if not dev.strip():
            continue
        parts = dev.split(",")
        if len(parts) not in (7, 9) or len(out) >= MAX_DEVICES:
            return None
        count, mem, cores = (_int(parts[i], MAX_MIB) for i in (1, 2, 3))
        if count is None or mem is None or cores is None or not parts[0].strip():
            return None
        out.append(Device(parts[0].strip()[:128], node, mem, cores, int(count)))
    return out


def _annotated(obj: Any, key: str) -> tuple[Mapping[str, Any], Any]:
    """An object's metadata and the value of its annotation `key` (None when absent)."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return {}, None
    annos = meta.get("annotations")
    return meta, annos.get(key) if isinstance(annos, Mapping) else None


def read(objects: Mapping[str, Any]) -> Kube:
    """The GPUs HAMi registered on the nodes, and what it granted each pod."""
    out = Kube()
    for obj in objects.get("nodes", ()):
        meta, raw = _annotated(obj, REGISTER)
        if raw is None:
            continue
        name = str(meta.get("name", ""))
        devices = parse_register(raw, name) if isinstance(raw, str) else None
        if devices is None:
            out.notes.append(
                f"node {name[:253]}'s annotation {REGISTER} is not HAMi's format and was not read"
            )
            continue
        out.devices.update((d.uuid, d) for d in devices)
    for obj in objects.get("pods", ()):
        meta, raw = _annotated(obj, ALLOCATED)
        if raw is None:
            continue
        ns, pod = str(meta.get("namespace", ""))[:253], str(meta.get("name", ""))[:253]
        parsed = parse_allocated(raw) if isinstance(raw, str) else None
        if parsed is None:
            out.notes.append(
                f"pod {ns}/{pod}'s annotation {ALLOCATED} is not HAMi's format and was not read"
            )
            continue
        granted, mig = parsed
        out.mig += mig
        per: dict[str, list[float]] = {}
        for _, uuid, mem, cores in granted:
            got = per.setdefault(uuid, [0.0, 0.0, 0.0])
            got[0] += mem
            got[1] += cores
            got[2] += 1
        out.grants.extend(
            Grant(ns, pod, uuid, m, c, int(n)) for uuid, (m, c, n) in sorted(per.items())
        )
    return out


@dataclass(frozen=True)
class Usage:
    """What HAMi's vGPU monitor measured, per (namespace, pod, UUID), its containers added up."""

    util: Mapping[tuple[str, str, str], tuple[Arr, Arr]]
    """SM utilization of the GPU (per cent) per bucket end: (times, values)."""
    mem_max_mib: Mapping[tuple[str, str, str], float]
    """The most device memory its containers used (MiB; each container's most, added up)."""
    answered: bool
    """Whether the snapshot holds any answer of HAMi's queries (series or not)."""
    series: bool
    """Whether any HAMi series was answered."""
    util_metric: str = ""
    """The utilization metric read (the current name where both were answered)."""


_UTIL = (("hami_util_hourly", False), ("hami_util_legacy_hourly", True))
_MEM = (("hami_mem_max", False), ("hami_mem_legacy_max", True))


def _who(labels: Mapping[str, Any], legacy: bool) -> tuple[str, str, str, str] | None:
    """(namespace, pod, container, UUID) of a HAMi series."""

    def get(*names: str) -> str:
        for n in names:
            v = labels.get(n)
            if isinstance(v, str) and v:
                return v[:253]
        return ""

    if legacy:
        who = (get("podnamespace"), get("podname"), get("ctrname"), get("deviceuuid"))
    elif get("exported_pod"):
        who = (
            get("exported_namespace"),
            get("exported_pod"),
            get("exported_container"),
            get("device_uuid"),
        )
    else:
        who = (get("namespace"), get("pod"), get("container"), get("device_uuid"))
    return who if who[1] and who[3] else None


def usage(p: Parser, within: tuple[float, float] | None = None) -> Usage:
    """HAMi's per-container figures in the snapshot's answers, added up per pod and GPU: each
    bucket's utilization (where time chunks overlap, the later answer wins), each container's
    most memory. The current spelling is read for a pod where it has any, else the legacy
    one. `within` (start, end): a narrowed window, whose buckets alone are kept; the memory,
    read for the recorded window only, is then unknown."""
    answered = any(q in p.answers for q, _ in _UTIL + _MEM)
    series = False
    util: dict[tuple[str, str, str], tuple[Arr, Arr]] = {}
    metric = ""
    for qid, legacy in _UTIL:
        per: dict[tuple[str, str, str, str], dict[float, float]] = {}
        for a in p.answers.get(qid, []):
            if a.rtype != "matrix":
                continue
            for i, labels in enumerate(a.metrics):
                who = _who(labels, legacy)
                if who is None:
                    continue
                ts, vs = a.series(i)
                if within is not None:
                    keep = (ts > within[0]) & (ts <= within[1])
                    ts, vs = ts[keep], vs[keep]
                per.setdefault(who, {}).update(zip(ts.tolist(), vs.tolist(), strict=True))
        series |= bool(per)
        added: dict[tuple[str, str, str], dict[float, float]] = {}
        for (ns, pod, _, uuid), points in per.items():
            into = added.setdefault((ns, pod, uuid), {})
            for t, v in points.items():
                into[t] = into.get(t, 0.0) + v
        for key, points in added.items():
            if key in util:
                continue  # read in the current spelling
            ts = np.array(sorted(points), dtype=np.float64)
            util[key] = (ts, np.minimum(np.array([points[t] for t in ts.tolist()]), 100.0))
            metric = metric or queries.BY_ID[qid].metric
    mem: dict[tuple[str, str, str], float] = {}
    for qid, legacy in _MEM if within is None else ():
        most: dict[tuple[str, str, str, str], float] = {}
        for a in p.answers.get(qid, []):
            if a.rtype != "vector":
                continue
            for labels, v in zip(a.metrics, a.values.tolist(), strict=True):
                who = _who(labels, legacy)
                if who is not None:
                    most[who] = max(most.get(who, 0.0), float(v))
        series |= bool(most)
        sums: dict[tuple[str, str, str], float] = {}
        for (ns, pod, _, uuid), v in most.items():
            sums[(ns, pod, uuid)] = sums.get((ns, pod, uuid), 0.0) + v / 2**20
        for key, v in sums.items():
            mem.setdefault(key, v)
    return Usage(util, mem, answered, series, metric)


@dataclass(frozen=True)
class Tenant:
    """One pod's share of one GPU, and how its activity is read."""

    grant: Grant
    key: int
    """Its key number (`Parser.kid`)."""
    source: int
    """The key number of its GPU's unheld series."""
    share: float
    by: str
    """What the share is of: `cores` or `memory` (the larger), `unknown` (a whole GPU: no
    cores granted, and its memory unknown)."""
    dev_cores: float
    dev_mem_mib: float
    """The GPU's memory (MiB): the node annotation's, else DCGM's used + free; NaN unknown."""
    measured: bool
    """Whether its own utilization is read from HAMi's monitor (its cores above 0 and below the
    GPU's, and series of it answered)."""
    ran: tuple[float, float] = (-math.inf, math.inf)
    """When its pod ran (unix seconds): its start (-inf unknown) to its end (`FINISHED`; inf
    while it runs)."""


@dataclass(frozen=True)
class Joined:
    """The tenants made holders (`join`), and what the audit says of them."""

    tenants: tuple[Tenant, ...] = ()
    usage: Usage = field(default_factory=lambda: Usage({}, {}, False, False))
    notes: tuple[str, ...] = ()
    unmonitored: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """(namespace, pod) -> its shares of GPUs without DCGM series in the window, added up."""


def _ran(pod: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """When a pod ran: from its start (its creation where the start is not known, -inf where
    neither is) to its end (`FINISHED`) if it ended (Succeeded, Failed), else inf; None for a
    pod that is not running nor ended at a known time (nothing says when it held its share)."""
    if pod is None:
        return None
    phase = str(pod.get(C.PHASE, ""))
    begin = pod.get(C.STARTED) or pod.get(C.CREATED)
    begin = float(begin) if isinstance(begin, float) and begin == begin else -math.inf
    if phase == "Running":
        return begin, math.inf
    end = pod.get(C.FINISHED)
    if phase in ENDED_PHASES and isinstance(end, float) and end > begin:
        return begin, end
    return None


class _Running:
    """The shares of one GPU's tenants that run at given times, added up (each tenant runs
    from `begin` to `end`, half-open)."""

    def __init__(self, begin: Arr, end: Arr, shares: Arr) -> None:
        by_begin, by_end = np.argsort(begin, kind="stable"), np.argsort(end, kind="stable")
        self.begin, self.end = begin[by_begin], end[by_end]
        self.started = np.concatenate([[0.0], np.cumsum(shares[by_begin])])
        self.ended = np.concatenate([[0.0], np.cumsum(shares[by_end])])

    def at(self, times: Arr, before: Arr | None = None) -> Arr:
        """Those started at or before `times` less those ended at or before `before` (default
        `times`): at `times` itself, or, with `before` a bucket's start and `times` its end,
        those that ran in some part of it (started before its end: pass `times` less a
        little)."""
        on = self.started[np.searchsorted(self.begin, times, side="right")]
        gone = self.ended[np.searchsorted(self.end, times if before is None else before, "right")]
        out: Arr = on - gone
        return out


def _peaks(runs: list[tuple[float, float]], shares: list[float]) -> Arr:
    """For each of one GPU's tenants, the most the shares of its tenants add up to at one time
    while it ran. They only grow when a tenant starts: the most is at one of the starts within
    its run (its own included)."""
    begin = np.array([r[0] for r in runs], dtype=np.float64)
    end = np.array([r[1] for r in runs], dtype=np.float64)
    starts = np.sort(begin)
    at_start = _Running(begin, end, np.array(shares, dtype=np.float64)).at(starts)
    # The starts within each run, [lo, hi) of `starts`: never empty (its own start is one).
    lo = np.searchsorted(starts, begin, side="left")
    hi = np.searchsorted(starts, end, side="left")
    bounds = np.column_stack([lo, hi]).ravel()
    out: Arr = np.maximum.reduceat(np.append(at_start, 0.0), bounds)[::2]
    return out


def _shares(
    grants: list[Grant],
    devices: Mapping[str, Device],
    dcgm_mib: Mapping[str, float],
    runs: Mapping[tuple[str, str], tuple[float, float]],
) -> dict[tuple[str, str, str], tuple[float, str, float, float]]:
    """(share, what it is of, GPU cores, GPU memory MiB) per (namespace, pod, UUID): the larger
    of cores and memory over the GPU's, scaled down together where those of a GPU's pods that
    ran at one time (`runs`, by pod) add up to more than 1 (each pod by the most they add up to
    while it ran, so that a GPU never counts for more than itself)."""
    out: dict[tuple[str, str, str], tuple[float, str, float, float]] = {}
    per_gpu: dict[str, list[tuple[str, str, str]]] = {}
    for g in grants:
        dev = devices.get(g.uuid)
        cores = dev.cores if dev is not None and dev.cores > 0 else float(FULL_CORES)
        mem = dev.mem_mib if dev is not None and dev.mem_mib > 0 else dcgm_mib.get(g.uuid, math.nan)
        by_cores = min(1.0, g.cores / cores)
        by_mem = min(1.0, g.mem_mib / mem) if mem > 0 else math.nan
        if not by_mem >= 0:  # memory unknown: the cores alone, the whole GPU without them
            share, by = (by_cores, "cores") if by_cores > 0 else (1.0, "unknown")
        else:
            share, by = (by_mem, "memory") if by_mem > by_cores else (by_cores, "cores")
        out[(g.namespace, g.pod, g.uuid)] = (share, by, cores, mem)
        per_gpu.setdefault(g.uuid, []).append((g.namespace, g.pod, g.uuid))
    for keys in per_gpu.values():
        if sum(out[k][0] for k in keys) <= 1.0:
            continue
        peaks = _peaks([runs[k[:2]] for k in keys], [out[k][0] for k in keys])
        for key, peak in zip(keys, peaks.tolist(), strict=True):
            share, by, cores, mem = out[key]
            out[key] = (share / max(peak, 1.0), by, cores, mem)
    return out


def join(
    p: Parser,
    s: Any,
    k: Kube,
    use: Usage,
    pods: Mapping[tuple[str, str], Mapping[str, Any]],
    methods: dict[int, str],
    grow: Callable[..., Any],
) -> tuple[Any, Joined]:
    """The series with a key appended for each HAMi pod on each GPU it was granted part of,
    running or ended at a known time (its GPU's unheld series in the buckets it ran in, with
    its own activity), `methods` updated (`Method.HAMI_SHARE`), and the tenants. `grow` is
    `dataclasses.replace` on the builder's series."""
    notes = list(k.notes)
    if k.mig:
        notes.append(
            f"{k.mig} MIG instances granted by HAMi (its MIG mode) are not joined to their pods"
        )
    runs: dict[tuple[str, str], tuple[float, float]] = {}
    for g in k.grants:
        ran = _ran(pods.get((g.namespace, g.pod)))
        if ran is not None and ran[1] > p.grid[0]:  # a pod that ended before the window: none
            runs[(g.namespace, g.pod)] = ran
    grants = [g for g in k.grants if (g.namespace, g.pod) in runs]
    if not grants or p.cluster_label:
        return s, Joined((), use, tuple(notes))
    device_key: dict[str, int] = {}
    for kid, ident in enumerate(p.ident[: s.n]):
        if ident.uuid and not ident.held and not ident.mig_id:
            device_key.setdefault(ident.uuid, kid)
    used = s.fb_used.mean.get(s.n) + s.fb_free.mean.get(s.n)
    dcgm_mib = {u: float(used[kid]) for u, kid in device_key.items() if np.isfinite(used[kid])}
    shares = _shares(grants, k.devices, dcgm_mib, runs)
    tenants: list[Tenant] = []
    unmonitored: dict[tuple[str, str], float] = {}
    for g in grants:
        src = device_key.get(g.uuid)
        if src is None:
            dark = unmonitored.get((g.namespace, g.pod), 0.0)
            unmonitored[(g.namespace, g.pod)] = dark + shares[(g.namespace, g.pod, g.uuid)][0]
            continue
        share, by, cores, mem = shares[(g.namespace, g.pod, g.uuid)]
        ident = replace(p.ident[src], namespace=g.namespace, pod=g.pod, container="")
        kid = len(p.keys)
        p.keys.append((ident.slot, g.namespace, g.pod))
        p.ident.append(ident)
        measured = 0 < g.cores < cores and (g.namespace, g.pod, g.uuid) in use.util
        ran = runs[(g.namespace, g.pod)]
        tenants.append(Tenant(g, kid, src, share, by, cores, mem, measured, ran))
        methods[kid] = Method.HAMI_SHARE.value
    if unmonitored:
        notes.append(
            f"{len(unmonitored)} pods hold GPU shares HAMi granted on GPUs without DCGM series "
            "in the window: they are not joined (the attribution ledger's unattributed side "
            "counts each at its share)"
        )
    if tenants:
        s = _grow(s, tenants, float(p.grid[1]), use, grow)
    return s, Joined(tuple(tenants), use, tuple(notes), unmonitored)


def _overlap_s(ran: tuple[float | Arr, float | Arr], times: Arr, step: float) -> Arr:
    """Seconds a pod that ran over `ran` ran in the buckets ending at `times`."""
    out: Arr = np.clip(np.minimum(ran[1], times) - np.maximum(ran[0], times - step), 0.0, step)
    return out


def _together(tenants: list[Tenant], step: float) -> Callable[[str, Arr], Arr]:
    """The shares of a GPU's tenants that ran in each bucket (by its end), added up."""
    per_gpu: dict[str, list[Tenant]] = {}
    for t in tenants:
        per_gpu.setdefault(t.grant.uuid, []).append(t)
    running = {
        uuid: _Running(
            np.array([t.ran[0] for t in ts]),
            np.array([t.ran[1] for t in ts]),
            np.array([t.share for t in ts]),
        )
        for uuid, ts in per_gpu.items()
    }

    def of(uuid: str, times: Arr) -> Arr:
        # A tenant ran in the bucket (t - step, t] when it started before t and ended after
        # t - step.
        return running[uuid].at(np.nextafter(times, -np.inf), times - step)

    return of


def _own_activity(
    t: Tenant, times: Arr, values: Arr, scale: float, together: Arr, use: Usage
) -> Arr:
    """A tenant's activity in its copied buckets (`values` its GPU's, in units where `scale` is
    all of it: 1 for a ratio, 100 for a percentage; `together` the shares of the GPU's tenants
    that ran in each)."""
    held = together > 0
    out = np.where(held, np.minimum(values / np.where(held, together, 1.0), scale), values)
    if t.measured and t.share > 0:
        mine_t, mine_v = use.util[(t.grant.namespace, t.grant.pod, t.grant.uuid)]
        at = np.searchsorted(mine_t, times)
        at_ok = at < len(mine_t)
        hit = np.zeros(len(times), dtype=bool)
        hit[at_ok] = mine_t[at[at_ok]] == times[at_ok]
        own = np.minimum(mine_v[at[hit]] / 100.0 / t.share, 1.0) * scale
        out[hit] = own
    return out


def _grow(s: Any, tenants: list[Tenant], step: float, use: Usage, grow: Callable[..., Any]) -> Any:
    """`s` with each tenant's key appended: its GPU's activity and GPU_UTIL buckets its pod ran
    in (any part of; `clip` cuts their held time to that part), as its own activity; the GPU's
    other figures missing."""
    n0 = s.n
    n = n0 + len(tenants)
    together = _together(tenants, step)
    new = np.arange(n0, n, dtype=np.int64)
    src = np.array([t.source for t in tenants], dtype=np.int64)

    def copy(h: Hourly, scale: float) -> Hourly:
        if not len(h[0]):
            return h
        # A key's points are one block (`Parser.hourly`): each source's block, found once.
        at = block_starts(h[0])
        ends = np.append(at[1:], len(h[0]))
        block = {int(h[0][a]): (int(a), int(b)) for a, b in zip(at, ends, strict=True)}
        parts: list[tuple[Arr, Arr, Arr, Arr]] = [h]
        for t in tenants:
            a, b = block.get(t.source, (0, 0))
            rows = a + np.flatnonzero(_overlap_s(t.ran, h[1][a:b], step) > 0)
            if not len(rows):
                continue
            times = h[1][rows]
            vals = _own_activity(t, times, h[2][rows], scale, together(t.grant.uuid, times), use)
            parts.append((np.full(len(rows), t.key, dtype=np.int64), times, vals, h[3][rows]))
        if len(parts) == 1:
            return h
        k, ts, vs, cs = (np.concatenate([q[i] for q in parts]) for i in range(4))
        return k, ts, vs, cs

    act_h, util_h = copy(s.act_h, 1.0), copy(s.util_h, 100.0)

    def stat(st: Stat) -> Stat:
        return Stat(
            np.concatenate([st.values, np.full(len(new), np.nan)]),
            np.concatenate([st.present, np.zeros(len(new), dtype=bool)]),
        )

    def same(st: Stat) -> Stat:
        return Stat(
            np.concatenate([st.values, st.values[src]]),
            np.concatenate([st.present, st.present[src]]),
        )

    def absent(m: Metric) -> Metric:
        return Metric(stat(m.mean), stat(m.mx), stat(m.p95), stat(m.count), m.approx)

    def own(m: Metric, h: Hourly) -> Metric:
        fresh = from_hourly(h, n, only=new)
        mean, count = stat(m.mean), stat(m.count)
        for mine, theirs in ((mean, fresh.mean), (count, fresh.count)):
            mine.values[new] = theirs.values[new]
            mine.present[new] = theirs.present[new]
        return Metric(mean, stat(m.mx), stat(m.p95), count, m.approx)

    return grow(
        s,
        n=n,
        act_h=act_h,
        util_h=util_h,
        act=own(s.act, act_h),
        util=own(s.util, util_h),
        fb_used=absent(s.fb_used),
        fb_free=absent(s.fb_free),
        power=absent(s.power),
        power_limit=same(s.power_limit),
        health={c: stat(h) if h is not None else None for c, h in s.health.items()},
        traffic={c: stat(t) for c, t in s.traffic.items()},
        has_prof=np.concatenate([s.has_prof, s.has_prof[src]]),
        has_util=np.concatenate([s.has_util, s.has_util[src]]),
        mig_blind=np.concatenate([s.mig_blind, s.mig_blind[src]]),
    )


def fractions(joined: Joined, fraction: Arr) -> None:
    """Set, in place, each tenant key's fraction of a GPU to its share."""
    for t in joined.tenants:
        fraction[t.key] = t.share


def clip(joined: Joined, hourly: dict[str, Any], hours: Arr, hid_of: Arr, step: float) -> None:
    """Cut, in place, the held hours (`HELD_H`) of each tenant's buckets its pod ran only part
    of (started or ended inside) to that part, at most the GPU's held time there, as the
    Kubernetes-side join does (`gpuaudit.inventory.bucketjoin`); `hours`, each holding's held
    hours, lowered by as much. `hourly` holds the hourly table's columns."""
    part = [t for t in joined.tenants if math.isfinite(t.ran[0]) or math.isfinite(t.ran[1])]
    hid = np.asarray(hourly[C.HOLDING])
    if not part or not len(hid):
        return
    begin = np.full(len(hours), np.nan)
    end = np.full(len(hours), np.nan)
    for t in part:
        at = int(hid_of[t.key]) if t.key < len(hid_of) else -1
        if at >= 0:
            begin[at], end[at] = t.ran
    rows = np.flatnonzero(~np.isnan(begin[hid]))
    if not len(rows):
        return
    k = hid[rows]
    ran = _overlap_s((begin[k], end[k]), np.asarray(hourly[C.TS])[rows], step) / 3600.0
    held_h = np.asarray(hourly[C.HELD_H], dtype=np.float64).copy()
    cut = np.minimum(held_h[rows], ran)
    hours -= np.bincount(k, weights=held_h[rows] - cut, minlength=len(hours))
    held_h[rows] = cut
    hourly[C.HELD_H] = held_h


TENANT_COLUMNS = [
    C.HOLDING,
    C.NAMESPACE,
    C.POD,
    C.NODE,
    C.UUID,
    C.MODEL,
    C.FRACTION,
    C.HAMI_SHARE_BY,
    C.HAMI_CORES,
    C.HAMI_MEM_MIB,
    C.HAMI_DEV_CORES,
    C.HAMI_DEV_MEM_MIB,
    C.HAMI_MEASURED,
    C.HAMI_MEM_USED_MAX_MIB,
]
"""The tenants table: one row per (pod, GPU) HAMi shares, its holding, its share (`FRACTION`)
and what it is of, its grant, its GPU's cores and memory, whether its utilization is HAMi's
own, and the most memory HAMi's monitor saw it use (NaN where not measured)."""
USAGE_COLUMNS = [C.HOLDING, C.TS, C.HAMI_UTIL_PCT]
"""The usage table: a measured tenant's SM utilization of its GPU (per cent) per bucket end."""


@dataclass(frozen=True)
class Tenancy:
    """Pods sharing GPUs through HAMi (`gpuaudit.inventory.hami`), for the checks."""

    tenants: pd.DataFrame | None = None
    """See `TENANT_COLUMNS` (None: no pod holds a HAMi share)."""
    usage: pd.DataFrame | None = None
    """See `USAGE_COLUMNS`."""
    util_metric: str = ""
    """The utilization metric read: HAMi's current name, its legacy one, or empty."""
    unmonitored: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """(namespace, pod) -> the shares HAMi granted it of GPUs without DCGM series in the
    window, added up (`attribution.unattributed` counts it at them)."""


def tenancy(
    joined: Joined, holdings: pd.DataFrame, hid_of: Arr
) -> tuple[Tenancy, set[Capability], dict[Capability, str], list[str]]:
    """The tenants and usage tables, `ACT_SOURCE` of the tenants' holdings set in place, the
    HAMi capability or why it is missing, and the warnings to give."""
    import pandas as pd

    warnings = list(joined.notes)
    use = joined.usage
    rows: list[dict[str, Any]] = []
    usage_rows: list[tuple[Arr, Arr, Arr]] = []
    source = holdings[C.ACT_SOURCE].to_numpy(dtype=object).copy() if len(holdings) else None
    for t in joined.tenants:
        hid = int(hid_of[t.key]) if t.key < len(hid_of) else -1
        if hid < 0:
            continue
        g = t.grant
        who = (g.namespace, g.pod, g.uuid)
        row = holdings.iloc[hid]
        rows.append(
            {
                C.HOLDING: hid,
                C.NAMESPACE: g.namespace,
                C.POD: g.pod,
                C.NODE: row[C.NODE],
                C.UUID: g.uuid,
                C.MODEL: row[C.MODEL],
                C.FRACTION: t.share,
                C.HAMI_SHARE_BY: t.by,
                C.HAMI_CORES: g.cores,
                C.HAMI_MEM_MIB: g.mem_mib,
                C.HAMI_DEV_CORES: t.dev_cores,
                C.HAMI_DEV_MEM_MIB: t.dev_mem_mib,
                C.HAMI_MEASURED: t.measured,
                C.HAMI_MEM_USED_MAX_MIB: use.mem_max_mib.get(who, math.nan),
            }
        )
        if source is not None:
            source[hid] = use.util_metric if t.measured else ACT_SOURCE_DEVICE
        if t.measured:
            ts, vs = use.util[who]
            usage_rows.append((np.full(len(ts), hid, dtype=np.int64), ts, vs))
    if source is not None:
        holdings[C.ACT_SOURCE] = source
    caps: set[Capability] = set()
    missing: dict[Capability, str] = {}
    if not rows:
        missing[Capability.HAMI] = (
            "no running pod holds a GPU share granted by HAMi (pod annotation "
            f"{ALLOCATED}) on a GPU with DCGM series, nor did one that ended in the window"
        )
    elif not use.series:
        missing[Capability.HAMI] = (
            "no HAMi vGPU monitor series in the window (hami_container_device_utilization_ratio, "
            "hami_vgpu_memory_used_bytes, or their legacy names)"
        )
        warnings.append(
            f"{len(rows)} GPU shares are held through HAMi, but no series of HAMi's vGPU monitor "
            "are in the window: what each pod used of its share is unknown (each reads its GPU's "
            "DCGM activity split by shares) and GPU022 is skipped; scrape the HAMi device "
            "plugin's monitor (port 9394)"
        )
    else:
        caps.add(Capability.HAMI)
    tenants = pd.DataFrame(rows, columns=TENANT_COLUMNS) if rows else None
    usage = (
        pd.DataFrame(
            {
                C.HOLDING: np.concatenate([r[0] for r in usage_rows]),
                C.TS: np.concatenate([r[1] for r in usage_rows]),
                C.HAMI_UTIL_PCT: np.concatenate([r[2] for r in usage_rows]),
            },
            columns=USAGE_COLUMNS,
        )
        if usage_rows
        else None
    )
    return Tenancy(tenants, usage, use.util_metric, joined.unmonitored), caps, missing, warnings

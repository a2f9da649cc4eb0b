"""GPU022 over its HAMi share: a pod uses more of a shared GPU than HAMi granted it.

What it finds
    Pods holding part of a GPU through HAMi that used more of it than they were granted: SM
    utilization above their `nvidia.com/gpucores` for hours, or device memory above their
    `nvidia.com/gpumem`, as HAMi's own vGPU monitor measured them.

Why it matters
    HAMi packs a GPU by what it granted: the pod's neighbours were placed on the rest. Under
    HAMi's default core policy a pod runs above its cores whenever no neighbour of its priority
    is busy, and with `disable` (or `CUDA_DISABLE_CONTROL=true`) it always may; memory past the
    grant means HAMi-core's limit was off or oversubscribed. Such a pod is charged its share
    (gpuaudit charges what HAMi granted, `docs/domain.md`) but takes more, so chargeback
    undercounts it, its neighbours slow down or run out of memory when it peaks, and its grant
    is too small for what it does.

How it decides
    For each pod and GPU HAMi granted it (`hami.io/vgpu-devices-allocated`), with HAMi's
    vGPU monitor series in the window (`hami_container_device_utilization_ratio`, or the legacy
    `Device_utilization_desc_of_container`; `hami_vgpu_memory_used_bytes`, or
    `vGPU_device_memory_usage_in_bytes`), its containers added up:
    - compute, only where HAMi measures it (cores granted above 0 and below the GPU's: HAMi
      records no utilization otherwise): the buckets whose mean SM utilization exceeds its
      cores (as a share of the GPU's) by more than `checks.hami_share_margin` (default 0.05 of
      the GPU); it is over its share when those buckets hold at least
      `checks.hami_over_min_hours` (default 1) hours. The GPU-hours taken beyond its share are,
      in those buckets, the hours held times the utilization above its cores;
    - memory: the most device memory its containers used above the memory HAMi granted them
      (each container's most, added up: at most their most at once). The memory beyond the
      grant counts as that part of the GPU for the hours held.
    A pod at exactly its share is not over it. Impact: the GPU-hours beyond its share, priced
    per GPU model. Severity: medium from 24 GPU-hours, or when memory was above the grant; low
    below. Without HAMi's vGPU monitor series the check is skipped: what a pod used of its
    share is then unknown.

What to do
    Grant the pod what it uses (`nvidia.com/gpucores`, `nvidia.com/gpumem`), so that HAMi packs
    and gpuaudit charges it for that; or, where it must stay within its grant, have HAMi throttle
    it always (`GPU_CORE_UTILIZATION_POLICY=force`, the chart's `devices.nvidia.gpuCorePolicy`)
    and make sure `CUDA_DISABLE_CONTROL` is not set in its containers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuaudit.checks.base import MODEST_WASTE, short_model
from gpuaudit.checks.contract import fraction, hours
from gpuaudit.checks.findings import Finding, Impact, Resource, Severity
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.derived import held_hours

CODE = "GPU022"
TITLE = "Over its HAMi share"
REQUIRES = (Capability.HAMI,)
VIEWS = ()
"""The row-long shared views it reads (see `gpuaudit.checks.contract`): none."""


@dataclass(frozen=True)
class Thresholds:
    hami_share_margin: float = fraction(0.05)
    """Share of the GPU above its granted cores a pod's bucket mean must reach to count as over
    its share (HAMi's throttle lets a pod overshoot a little)."""
    hami_over_min_hours: float = hours(1.0)
    """Fewest hours over its share that make a finding."""


@dataclass
class _Over:
    """What one pod took beyond its shares, over its GPUs."""

    gpus: float = 0.0
    hours: float = 0.0
    over_hours: float = 0.0
    over_gpu_hours: float = 0.0
    peak_util: float = 0.0
    cores: float = 0.0
    mem_over_mib: float = 0.0
    mem_granted_mib: float = 0.0
    mem_used_mib: float = 0.0
    mem_gpu_hours: float = 0.0
    cost: float = 0.0
    node: str = ""
    model: str = ""
    uuids: list[str] | None = None


def _buckets(views: Views) -> dict[int, tuple[Any, Any]]:
    """Per measured tenant holding: its buckets' (hours held, utilization of the GPU in per
    cent), where HAMi measured the bucket."""
    inv = views.inv
    usage = inv.hami.usage
    if usage is None or usage.empty or inv.hourly.empty:
        return {}
    hr = inv.hourly
    wanted = set(usage[C.HOLDING].tolist())
    rows = np.flatnonzero(hr[C.HOLDING].isin(wanted).to_numpy())
    held = held_hours(inv)[rows]
    hids, times = hr[C.HOLDING].to_numpy()[rows].tolist(), hr[C.TS].to_numpy()[rows].tolist()
    at = dict(zip(zip(hids, times, strict=True), held.tolist(), strict=True))
    out: dict[int, tuple[list[float], list[float]]] = {}
    for hid, ts, pct in zip(
        usage[C.HOLDING].tolist(),
        usage[C.TS].tolist(),
        usage[C.HAMI_UTIL_PCT].tolist(),
        strict=True,
    ):
        h = at.get((hid, ts))
        if h is None or h <= 0:
            continue
        got = out.setdefault(int(hid), ([], []))
        got[0].append(h)
        got[1].append(pct)
    return {k: (np.array(a), np.array(b)) for k, (a, b) in out.items()}


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    tenants = views.inv.hami.tenants
    if tenants is None or tenants.empty:
        return []
    buckets = _buckets(views)
    hours_of = views.inv.holdings[C.HOURS].to_numpy(dtype="float64")
    per: dict[tuple[str, str], _Over] = {}
    for row in tenants.itertuples(index=False):
        hid = int(getattr(row, C.HOLDING))
        ns, pod = str(getattr(row, C.NAMESPACE)), str(getattr(row, C.POD))
        model = str(getattr(row, C.MODEL))
        o = per.setdefault((ns, pod), _Over(uuids=[]))
        share = float(getattr(row, C.FRACTION))
        held = float(hours_of[hid])
        o.gpus += share
        o.hours = max(o.hours, held)
        o.node, o.model = str(getattr(row, C.NODE)), model
        assert o.uuids is not None
        o.uuids.append(str(getattr(row, C.UUID)))
        granted = float(getattr(row, C.HAMI_CORES)) / float(getattr(row, C.HAMI_DEV_CORES))
        o.cores += granted
        over_gpu_h = 0.0
        if hid in buckets:
            h, pct = buckets[hid]
            above = pct / 100.0 - granted
            over = above > cfg.hami_share_margin
            o.over_hours += float(h[over].sum())
            over_gpu_h = float((h[over] * above[over]).sum())
            o.peak_util = max(o.peak_util, float(pct.max(initial=0.0)) / 100.0)
        used = float(getattr(row, C.HAMI_MEM_USED_MAX_MIB))
        mem, total = float(getattr(row, C.HAMI_MEM_MIB)), float(getattr(row, C.HAMI_DEV_MEM_MIB))
        mem_gpu_h = 0.0
        if used == used and used > mem:
            o.mem_over_mib += used - mem
            o.mem_granted_mib += mem
            o.mem_used_mib += used
            mem_gpu_h = held * min(1.0, (used - mem) / total) if total > 0 else 0.0
        o.over_gpu_hours += over_gpu_h
        o.mem_gpu_hours += mem_gpu_h
        o.cost += (over_gpu_h + mem_gpu_h) * views.price(model)
    out = []
    for (ns, pod), o in sorted(per.items()):
        compute = o.over_hours >= cfg.hami_over_min_hours and o.over_gpu_hours > 0
        memory = o.mem_over_mib > 0
        if compute or memory:
            out.append(_finding(ns, pod, o, compute, memory, cfg))
    return out


def _finding(ns: str, pod: str, o: _Over, compute: bool, memory: bool, cfg: Thresholds) -> Finding:
    gpu_hours = (o.over_gpu_hours if compute else 0.0) + o.mem_gpu_hours
    cost = o.cost if compute else o.cost * (o.mem_gpu_hours / gpu_hours if gpu_hours else 0.0)
    assert o.uuids is not None
    on = (
        f"its {short_model(o.model)} GPU {o.uuids[0]}"
        if len(o.uuids) == 1
        else f"{len(o.uuids)} {short_model(o.model)} GPUs"
    )
    said = []
    if compute:
        said.append(
            f"ran above its {o.cores * 100:.0f} % of the GPU's cores for {o.over_hours:.1f} h "
            f"(peak {o.peak_util * 100:.0f} %), {o.over_gpu_hours:.1f} GPU-hours beyond its share"
        )
    if memory:
        said.append(
            f"used {o.mem_used_mib:,.0f} MiB of device memory, {o.mem_over_mib:,.0f} MiB above "
            f"the {o.mem_granted_mib:,.0f} MiB HAMi granted it"
        )
    message = (
        f"Pod {ns}/{pod}, which HAMi granted {o.gpus:.2f} of {on}, " + " and ".join(said) + "."
    )
    severity = MODEST_WASTE(gpu_hours)
    if memory and severity is Severity.LOW:
        severity = Severity.MEDIUM
    asks = []
    if compute:
        asks.append(f"`nvidia.com/gpucores` to at least {o.peak_util * 100:.0f}")
    if memory:
        asks.append(f"`nvidia.com/gpumem` to at least {o.mem_used_mib:,.0f}".replace(",", ""))
    rec = (
        f"Raise pod {ns}/{pod}'s {' and '.join(asks)} so HAMi packs and gpuaudit charges it for "
        "what it uses; or keep it within its grant with GPU_CORE_UTILIZATION_POLICY=force and "
        "without CUDA_DISABLE_CONTROL."
    )
    return Finding(
        code=CODE,
        severity=severity,
        resource=Resource("Pod", ns, pod, o.node, round(o.gpus, 4)),
        message=message,
        impact=Impact(gpu_hours=gpu_hours, cost=cost),
        recommendation=rec,
        evidence={
            "gpus": sorted(o.uuids),
            "share_of_gpu": round(o.gpus, 4),
            "cores_granted": round(o.cores, 4),
            "hours_held": round(o.hours, 2),
            "hours_over_share": round(o.over_hours, 2) if compute else 0.0,
            "peak_sm_utilization": round(o.peak_util, 4),
            "gpu_hours_over_share": round(o.over_gpu_hours, 4) if compute else 0.0,
            "memory_granted_mib": round(o.mem_granted_mib, 1),
            "memory_used_max_mib": round(o.mem_used_mib, 1),
            "gpu_model": o.model,
            "margin": cfg.hami_share_margin,
        },
    )

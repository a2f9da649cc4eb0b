"""GPU041 CPU-starved GPU work: a pod's GPUs wait while its CPU sits at its limit or is throttled.

What it finds
    Pods holding GPUs whose engine activity was low in the hours their containers' CPU ran at
    its limit or was throttled by the kernel's CFS quota: a data loader, a tokenizer or an
    augmentation pipeline held to a few cores, with the GPUs waiting for its batches.

Why it matters
    A CPU limit sized for a web service starves a training input pipeline: the GPUs, the
    dearest part of the pod, sit waiting for data while a utilisation dashboard shows only
    "low activity", never why. Nothing inside the job says so either; the cure is cheap (more
    cores or more loader workers).

How it decides
    From cAdvisor through the kubelet (`/metrics/cadvisor`, in the same Prometheus as DCGM),
    per container of a GPU pod and hourly bucket: the CPU used (increase of
    `container_cpu_usage_seconds_total` over the bucket, in cores: seconds over the time the
    pod held its GPUs in the bucket, its GPU-hours there over its GPUs, which DCGM's samples
    give exact to the scrape interval; a pod there 20 minutes of an hour at its limit used its
    limit, not a third of it. Not the CFS periods x 100 ms: the kernel counts periods only
    while the container's group is active, and stops its period timer after an idle period, so
    they measure the time busy, not there, and only for a container with a limit), and the
    share of its CFS periods it was throttled in (increase of
    `container_cpu_cfs_throttled_periods_total` over that of `container_cpu_cfs_periods_total`;
    only a container with a CPU limit has them). Its CPU limit and request come from the pod's
    spec (API server). A container is starved in a bucket when its use is at least
    `checks.cpu_at_limit` (default 0.9) of its limit, or it was throttled in at least
    `checks.cpu_throttled_share` (default 0.25) of its periods. A pod's hour counts when its
    GPUs' mean engine activity in the bucket is below `checks.cpu_low_activity` (default 0.4)
    while one of its containers is starved. Reported when the pod has at least
    `checks.cpu_starved_min_hours` (default 2) such hours. Impact: the idle part of the
    GPU-hours it held in those hours (GPU-hours x (1 - activity)), an upper bound of what more
    CPU can win back (the work may not keep the GPUs busier than it did in its other hours),
    priced per GPU model. Severity: medium from 24 GPU-hours, low below. The recommendation per
    starved container: a CPU limit of its 95th percentile of hourly use over the hours its pod
    held GPUs, or of its limit where it was throttled (its use cannot show more than the limit
    lets it), plus `checks.cpu_headroom` (default 0.5, 50 %), rounded up to 100 m; its request
    at least that 95th percentile. A container whose spec was not read (a pod the Kubernetes
    lists lack, or a container its spec does not list) has its limit said "not read", never
    "none": only its throttling can show it starved. Where the series name their clusters (a
    scan of every cluster), each pod's CPU is its own cluster's, keyed as its GPUs are. A use
    capped by its limit hides the true need: measure again after the change. Skipped, with the
    reason, where the snapshot holds no cAdvisor CPU series for GPU pods (the kubelet's cAdvisor
    endpoint not scraped into the same Prometheus, or a snapshot made before gpuaudit read
    them): unmeasured CPU is never read as enough CPU.

What to do
    Raise the container's CPU limit and request to the recommended figure (or drop the limit
    and keep a request: the CFS quota is what throttles), and give the input pipeline workers
    to match (PyTorch `DataLoader(num_workers=...)`, `tf.data` `AUTOTUNE`); on nodes whose
    cores are spoken for, ask for a node shape with more cores per GPU. `gpuaudit fix` writes
    the patch of a Deployment's, StatefulSet's or CronJob's pod template.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuaudit.checks.base import MODEST_WASTE, gpu_word, short_model
from gpuaudit.checks.contract import fraction, hours
from gpuaudit.checks.findings import Finding, Impact, Resource
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.container_cpu import UNREAD, Resources, Use

CODE = "GPU041"
TITLE = "CPU-starved GPU work"
REQUIRES = (Capability.ACTIVITY, Capability.CONTAINER_CPU, Capability.KUBERNETES_PODS)
VIEWS = ("pod_hourly", "per_pod", "pod_hours")
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


@dataclass(frozen=True)
class Thresholds:
    cpu_low_activity: float = fraction(0.4)
    """Mean engine activity (ratio) of a pod's GPUs in a bucket below which the GPUs count as
    waiting."""
    cpu_at_limit: float = fraction(0.9)
    """Share of its CPU limit a container must use in a bucket to count as at its limit."""
    cpu_throttled_share: float = fraction(0.25)
    """Share of its CFS periods a container must be throttled in, in a bucket, to count as
    throttled."""
    cpu_starved_min_hours: float = hours(2.0)
    """Hours of low GPU activity with a starved container from which a pod is reported."""
    cpu_headroom: float = fraction(0.5)
    """Headroom added to the measured CPU need in the recommended limit (0.5: 50 %)."""


@dataclass(frozen=True)
class _Container:
    """One container's figures over its pod's starved hours."""

    name: str
    res: Resources
    starved_h: int
    cores_p95: float
    cores_max: float
    throttled_share: float | None
    """Throttled periods over periods in the pod's starved hours (None: no periods)."""
    limit_advice: float
    request_advice: float


def _aligned(ts: Any, use_ts: Any, vals: Any) -> Any:
    """`vals` (at `use_ts`) at the times `ts`, NaN where the container has no point."""
    out = np.full(len(ts), np.nan)
    if not len(use_ts):
        return out
    idx = np.minimum(np.searchsorted(use_ts, ts), len(use_ts) - 1)
    hit = use_ts[idx] == ts
    out[hit] = vals[idx[hit]]
    return out


@dataclass(frozen=True)
class _Series:
    """One container's figures on its pod's held buckets."""

    starved: Any
    """Whether it was at its limit or throttled in the bucket."""
    cores: Any
    """Cores used (NaN where not measured)."""
    periods: Any
    throttled: Any


def _series(ts: Any, use: Use, res: Resources, present_s: Any, cfg: Thresholds) -> _Series:
    """`present_s`: the seconds the pod held its GPUs in each bucket, what its use is divided
    by (a pod that ran 20 minutes of an hour at its limit used its limit, not a third of it)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        cores = np.where(present_s > 0, _aligned(ts, use.ts, use.used_s) / present_s, np.nan)
    periods = _aligned(ts, use.ts, use.periods)
    throttled = _aligned(ts, use.ts, use.throttled)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(periods > 0, throttled / periods, np.nan)
        at = np.nan_to_num(cores / res.limit, nan=0.0) if res.limit else np.zeros(len(ts))
    starved = (at >= cfg.cpu_at_limit) | (np.nan_to_num(share, nan=0.0) >= cfg.cpu_throttled_share)
    return _Series(starved, cores, periods, throttled)


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    inv = views.inv
    cpu = inv.cpu
    if not cpu.use:
        return []
    ph = views.pod_hourly
    if ph.empty:
        return []
    ph = ph[ph[C.GPU_HOURS] > 0]
    reserved = views.kai_reservations
    per_pod = views.per_pod.set_index([C.NAMESPACE, C.POD])
    out: list[Finding] = []
    for (ns, pod), grp in ph.groupby([C.NAMESPACE, C.POD], sort=True):
        key = (str(ns), str(pod))
        containers = cpu.use.get(key)
        if not containers or key in reserved or key not in per_pod.index:
            continue
        found = _pod(views, cfg, key, grp, containers, per_pod.loc[key])
        if found is not None:
            out.append(found)
    return out


def _pod(
    views: Views,
    cfg: Thresholds,
    key: tuple[str, str],
    grp: Any,
    containers: Any,
    row: Any,
) -> Finding | None:
    ts = grp[C.TS].to_numpy(dtype=np.float64)
    act = grp[C.ACT].to_numpy(dtype=np.float64)
    gpu_h = grp[C.GPU_HOURS].to_numpy(dtype=np.float64)
    # The hours the pod held its GPUs in each bucket (GPU-hours over GPUs held), exact to the
    # scrape interval, never more than the bucket.
    gpus = grp["gpus"].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        present_s = np.minimum(np.where(gpus > 0, gpu_h / gpus, 0.0) * 3600.0, views.inv.step_s)
    low = np.nan_to_num(act, nan=1.0) < cfg.cpu_low_activity
    resources = views.inv.cpu.resources.get(key, {})
    per = {
        name: (
            _series(ts, containers[name], res, present_s, cfg),
            res,
        )
        for name in sorted(containers)
        for res in [resources.get(name, UNREAD)]
    }
    hit = np.zeros(len(ts), dtype=bool)
    for series, _ in per.values():
        hit |= series.starved & low
    n = int(hit.sum())
    if n < cfg.cpu_starved_min_hours:
        return None
    idle = float(np.sum(gpu_h[hit] * (1.0 - np.clip(act[hit], 0.0, 1.0))))
    held = float(gpu_h[hit].sum())
    mean_act = float(np.sum(act[hit] * gpu_h[hit]) / held) if held else 0.0
    figures = [
        _figures(name, series, series.starved & low, res, cfg)
        for name, (series, res) in per.items()
        if (series.starved & low).any()
    ]
    return _finding(views, key, row, n, idle, held, mean_act, figures)


def _figures(name: str, s: _Series, hit: Any, res: Resources, cfg: Thresholds) -> _Container:
    measured = s.cores[~np.isnan(s.cores)]
    p95 = float(np.percentile(measured, 95)) if len(measured) else 0.0
    total = float(np.nansum(s.periods[hit]))
    share = float(np.nansum(s.throttled[hit])) / total if total > 0 else None
    need = p95
    if share is not None and share >= cfg.cpu_throttled_share and res.limit:
        need = max(need, res.limit)  # throttled: its use cannot show more than the limit
    return _Container(
        name=name,
        res=res,
        starved_h=int(hit.sum()),
        cores_p95=p95,
        cores_max=float(measured.max()) if len(measured) else 0.0,
        throttled_share=share,
        limit_advice=_up(need * (1.0 + cfg.cpu_headroom)),
        request_advice=max(_up(p95), res.request or 0.0),
    )


def _up(cores: float) -> float:
    """`cores` rounded up to 100 m (at least 100 m)."""
    return max(0.1, math.ceil(round(cores * 10.0, 6)) / 10.0)


def quantity(cores: float) -> str:
    """A CPU quantity as Kubernetes writes it: `3` for whole cores, else millicores (`2500m`)."""
    milli = int(round(cores * 1000))
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _cores_text(res: Resources) -> str:
    v = res.limit
    if not res.read:
        return "not read"
    return "none" if v is None else f"{v:g} cores" if v != 1 else "1 core"


def _finding(
    views: Views,
    key: tuple[str, str],
    row: Any,
    hours_n: int,
    idle: float,
    held: float,
    mean_act: float,
    figures: list[_Container],
) -> Finding:
    ns, pod = key
    model = str(row[C.MODEL])
    gpus = float(row[C.POD_GPUS])
    worst = max(figures, key=lambda f: (f.starved_h, f.throttled_share or 0.0, f.name))
    throttled = (
        f", throttled in {worst.throttled_share * 100:.0f} % of its CFS periods"
        if worst.throttled_share is not None
        else ""
    )
    message = (
        f"Pod {ns}/{pod} held {gpu_word(gpus)} ({short_model(model)}) at "
        f"{mean_act * 100:.0f} % mean engine activity for {hours_n} h while its container "
        f"{worst.name} was CPU-starved (CPU limit {_cores_text(worst.res)}, "
        f"{worst.cores_p95:.2f} cores used at the 95th percentile{throttled}): {idle:,.1f} of "
        f"the {held:,.1f} GPU-hours held in those hours were idle."
    )
    advice = "; ".join(
        f"container {f.name}: limits.cpu {quantity(f.limit_advice)}, requests.cpu "
        f"{quantity(f.request_advice)}"
        for f in figures
    )
    recommendation = (
        f"Give pod {ns}/{pod}'s CPU-starved containers the CPU their measured use needs with "
        f"headroom ({advice}), or drop the CPU limit and keep the request; match the input "
        "pipeline's workers to the cores, and measure again: a use held at its limit hides the "
        "true need."
    )
    return Finding(
        code=CODE,
        severity=MODEST_WASTE(idle),
        resource=Resource("Pod", ns, pod, str(row[C.NODE]), gpus),
        message=message,
        impact=Impact(gpu_hours=idle, cost=idle * views.price(model)),
        recommendation=recommendation,
        evidence={
            "starved_hours": hours_n,
            "gpu_hours_held_in_starved_hours": round(held, 4),
            "idle_gpu_hours_in_starved_hours": round(idle, 4),
            "mean_activity_in_starved_hours": round(mean_act, 4),
            "gpu_model": model,
            "containers": [
                {
                    "container": f.name,
                    "cpu_request_cores": f.res.request,
                    "cpu_limit_cores": f.res.limit,
                    **({} if f.res.read else {"cpu_limit_read": False}),
                    "starved_hours": f.starved_h,
                    "cores_used_p95": round(f.cores_p95, 3),
                    "cores_used_max": round(f.cores_max, 3),
                    "throttled_share": None
                    if f.throttled_share is None
                    else round(f.throttled_share, 4),
                    "recommended_cpu_limit": quantity(f.limit_advice),
                    "recommended_cpu_request": quantity(f.request_advice),
                }
                for f in figures[:32]
            ],
        },
    )

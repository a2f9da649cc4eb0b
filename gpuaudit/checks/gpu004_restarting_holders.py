"""GPU004 restarting holders: a pod crash-loops or is OOM-killed and holds its GPUs while down.

What it finds
    Pods holding GPUs whose containers keep restarting: waiting in `CrashLoopBackOff`, or
    restarted at least `checks.restart_min_count` times with the last termination in the
    window (an `OOMKilled` container, a failing start, a crash on bad input).

Why it matters
    A pod keeps its GPUs while its container is down and while the kubelet backs off before the
    next try (10 s, doubling to 5 min): the cards stay reserved for work that is not running,
    and every crash loses the work since the last checkpoint.

How it decides
    From the pod's status: per container `restartCount`, the current state (running since
    `state.running.startedAt`, or `state.waiting.reason`) and the last termination
    (`lastState.terminated`: `reason`, `exitCode`, `startedAt`, `finishedAt`). Reported when a
    container waits in `CrashLoopBackOff`, or the pod's restarts are at least
    `checks.restart_min_count` (default 3) and its last termination finished inside the window.
    Measured: the GPU-hours held while a container was down after its last termination (from
    `finishedAt` to the next run's `startedAt`, or to when the pod was read for a container
    that has not run again), per hourly bucket the smaller of the pod's held time there and the
    part of the bucket the down time covers, x each GPU's fraction. Not measured: the down time
    of earlier restarts, which the API keeps only as a count; the evidence gives the least it
    can have been (each restart's back-off, at least 10 s) as an estimate, never in the impact.
    For an `OOMKilled` container the evidence states the most GPU memory DCGM saw the pod use
    (`DCGM_FI_DEV_FB_USED`) and the framebuffer; the host memory it needed
    (cAdvisor's `container_memory_working_set_bytes`) is said to be not measured where the
    snapshot does not hold it. Reported only from `checks.restart_min_gpu_hours` (default 0.5)
    GPU-hours measured. Impact: the measured GPU-hours. Severity: high from 24 GPU-hours, medium
    below.

What to do
    Read the container's last logs (`kubectl logs --previous`). For `OOMKilled`, raise the
    memory limit to what it needed plus headroom, or shrink the batch; for a crash on start,
    fix the image or its configuration. Set `backoffLimit` on Jobs so a failing run releases
    its GPUs instead of looping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuaudit.checks.base import STUCK_WORK, gpu_word, short_model
from gpuaudit.checks.contract import count, hours
from gpuaudit.checks.findings import Finding, Impact, Resource
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.causes import restarting_hours
from gpuaudit.inventory.crashes import Container
from gpuaudit.inventory.window import iso

CODE = "GPU004"
TITLE = "Restarting holders"
REQUIRES = (Capability.ACTIVITY, Capability.KUBERNETES_PODS)
VIEWS = ("per_pod",)
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""

CRASH_LOOP = "CrashLoopBackOff"
FIRST_BACKOFF_S = 10.0
"""The kubelet's first restart back-off (it doubles, up to 5 minutes)."""


@dataclass(frozen=True)
class Thresholds:
    restart_min_count: float = count(3.0)
    """Container restarts (with the last termination in the window) from which a pod that is
    not in CrashLoopBackOff is reported."""
    restart_min_gpu_hours: float = hours(0.5)
    """GPU-hours held while down (measured) from which a restarting pod is reported: a pod
    that restarts quickly wastes little GPU time, and another check's finding (a framebuffer
    that overflows, say) says more about it."""


def _reported(cs: tuple[Container, ...], start: float, end: float, least: float) -> bool:
    if any(c.waiting == CRASH_LOOP for c in cs):
        return True
    recent = any(c.last_finished is not None and start <= c.last_finished <= end for c in cs)
    return recent and sum(c.restarts for c in cs) >= least


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    pods = views.inv.pods
    if pods.empty or C.CONTAINERS not in pods.columns:
        return []
    inv = views.inv
    candidates = {
        (str(ns), str(pod)): cs
        for ns, pod, cs in zip(
            pods[C.NAMESPACE].tolist(),
            pods[C.POD].tolist(),
            pods[C.CONTAINERS].tolist(),
            strict=True,
        )
        if isinstance(cs, tuple)
        and _reported(cs, inv.window_start, inv.window_end, cfg.restart_min_count)
    }
    if not candidates:
        return []
    rows = views.held_rows
    frac = inv.holdings[C.FRACTION].to_numpy(dtype="float64")[rows.holding]
    down = restarting_hours(views) * frac
    pod_of_row = views.holders.of_holding[rows.holding]
    keep = pod_of_row >= 0
    per_number = np.bincount(pod_of_row[keep], weights=down[keep], minlength=len(views.holders.pod))
    numbers = {
        (str(ns), str(p)): i
        for i, (ns, p) in enumerate(zip(views.holders.namespace, views.holders.pod, strict=True))
    }
    per_pod = views.per_pod.set_index([C.NAMESPACE, C.POD])
    out: list[Finding] = []
    for key, cs in sorted(candidates.items()):
        i = numbers.get(key)
        if i is None:
            continue  # it held no GPU in the window that DCGM shows
        if per_number[i] < cfg.restart_min_gpu_hours:
            continue
        out.append(_finding(views, key, cs, float(per_number[i]), per_pod.loc[key]))
    return out


def _finding(
    views: Views, key: tuple[str, str], cs: tuple[Container, ...], gpu_hours: float, row: Any
) -> Finding:
    ns, name = key
    model = str(row[C.MODEL])
    gpus = float(row[C.POD_GPUS])
    restarts = sum(c.restarts for c in cs)
    last = max(
        (c for c in cs if c.last_finished is not None),
        key=lambda c: c.last_finished or 0.0,
        default=None,
    )
    looping = any(c.waiting == CRASH_LOOP for c in cs)
    reason = last.last_reason if last else ""
    state = "is in CrashLoopBackOff" if looping else f"restarted {restarts} times"
    said = f"{state} ({restarts} restarts" + (f", last {reason}" if reason else "") + ")"
    message = (
        f"Pod {ns}/{name} {said} while holding {gpu_word(gpus)} ({short_model(model)}): "
        f"{gpu_hours:.{1 if gpu_hours >= 1 else 2}f} GPU-hours held with its container down "
        "since its last termination."
    )
    earlier = max(0, restarts - 1)
    oom = reason == "OOMKilled"
    fb = _framebuffer(views, ns, name)
    evidence: dict[str, Any] = {
        "restarts": restarts,
        "crash_loop_back_off": looping,
        "last_reason": reason,
        "last_exit_code": last.last_exit if last else None,
        "last_started": iso(last.last_started) if last and last.last_started else None,
        "last_finished": iso(last.last_finished) if last and last.last_finished else None,
        "measured_down_gpu_hours": round(gpu_hours, 4),
        "earlier_restarts_not_measured": earlier,
        "earlier_down_hours_at_least_estimate": round(earlier * FIRST_BACKOFF_S / 3600.0, 4),
        "gpus": round(gpus, 4),
        "gpu_model": model,
    }
    if oom:
        unmeasured = "not measured: no DCGM_FI_DEV_FB_USED series for its GPUs in the window"
        evidence["gpu_memory_used_max_mib"] = round(fb[0], 1) if fb[0] == fb[0] else unmeasured
        evidence["gpu_memory_total_mib"] = round(fb[1], 1) if fb[1] == fb[1] else None
        evidence["host_memory_needed"] = (
            "not measured: cAdvisor's container_memory_working_set_bytes is not in the snapshot"
        )
    return Finding(
        code=CODE,
        severity=STUCK_WORK(gpu_hours),
        resource=Resource("Pod", ns, name, str(row[C.NODE]), gpus),
        message=message,
        impact=Impact(gpu_hours=gpu_hours, cost=gpu_hours * views.price(model)),
        recommendation=_advice(ns, name, reason),
        evidence=evidence,
    )


def _framebuffer(views: Views, ns: str, pod: str) -> tuple[float, float]:
    """The most framebuffer DCGM saw the pod's GPUs use (MiB) and their total (MiB)."""
    h = views.held
    mine = h[(h[C.NAMESPACE] == ns) & (h[C.POD] == pod)]
    used = mine[C.FB_USED_MAX].astype("float64")
    total = (mine[C.FB_USED_MAX].astype("float64") + mine[C.FB_FREE_MEAN].astype("float64")).where(
        mine[C.MEM_TOTAL_MIB].isna(), mine[C.MEM_TOTAL_MIB].astype("float64")
    )
    return float(used.max()), float(total.max())


def _advice(ns: str, name: str, reason: str) -> str:
    logs = f"Read its last logs (`kubectl logs --previous -n {ns} {name}`)"
    if reason == "OOMKilled":
        return (
            f"{logs}; it was OOM-killed: raise its memory limit to what it needs plus headroom "
            "(or shrink the batch), so it stops holding its GPUs between restarts."
        )
    return (
        f"{logs} and fix the crash; give Jobs a backoffLimit so a failing run releases its "
        "GPUs instead of looping."
    )

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
    (`DCGM_FI_DEV_FB_USED`) and the framebuffer, and the most host memory the container used
    in the window (cAdvisor's `container_memory_working_set_bytes`, the working set the
    kubelet measures against the limit; `memory_working_set_max`) against its memory limit
    (`spec.containers[].resources.limits.memory`); the message says both, and the
    recommendation a limit: the larger of the two x (1 + `checks.oom_memory_headroom`, default
    0.25), rounded up to whole GiB (`Gi`): a working set sampled at each scrape can miss the
    peak just before the kill, and the limit was too small, so the new one never lies under
    it. Where cAdvisor's series are absent (not scraped, not in the snapshot, or a window
    narrowed in time) the host memory is said to be not measured, and why. Reported only from
    `checks.restart_min_gpu_hours` (default 0.5) GPU-hours measured. Impact: the measured
    GPU-hours. Severity: high from 24 GPU-hours, medium below.

What to do
    Read the container's last logs (`kubectl logs --previous`). For `OOMKilled`, raise the
    memory limit (and request) to the recommended one, or shrink the batch (`gpuaudit fix`
    writes the patch of a Deployment's, StatefulSet's or CronJob's pod template); for a crash
    on start, fix the image or its configuration. Set `backoffLimit` on Jobs so a failing run
    releases its GPUs instead of looping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuaudit.checks.base import STUCK_WORK, gpu_word, short_model
from gpuaudit.checks.contract import count, fraction, hours
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
    oom_memory_headroom: float = fraction(0.25)
    """Headroom the memory limit recommended for an OOM-killed container leaves over the
    larger of the most memory it used and its limit."""
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
        out.append(_finding(views, key, cs, float(per_number[i]), per_pod.loc[key], cfg))
    return out


def _finding(
    views: Views,
    key: tuple[str, str],
    cs: tuple[Container, ...],
    gpu_hours: float,
    row: Any,
    cfg: Thresholds,
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
    host = _HostMemory.of(views, ns, name, last.name if last else "", cfg.oom_memory_headroom)
    if oom and host.used is not None:
        message += f" {host.said()}"
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
        evidence.update(host.evidence())
    return Finding(
        code=CODE,
        severity=STUCK_WORK(gpu_hours),
        resource=Resource("Pod", ns, name, str(row[C.NODE]), gpus),
        message=message,
        impact=Impact(gpu_hours=gpu_hours, cost=gpu_hours * views.price(model)),
        recommendation=_advice(ns, name, reason, host),
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


def _advice(ns: str, name: str, reason: str, host: _HostMemory) -> str:
    logs = f"Read its last logs (`kubectl logs --previous -n {ns} {name}`)"
    if reason == "OOMKilled" and host.recommended is not None:
        return (
            f"{logs}; it was OOM-killed: raise container {host.container}'s memory limit (and "
            f"request) to {host.recommended} ({host.headroom * 100:.0f} % over {host.basis()}), "
            "or shrink the batch, so it stops holding its GPUs between restarts."
        )
    if reason == "OOMKilled":
        return (
            f"{logs}; it was OOM-killed: raise its memory limit to what it needs plus headroom "
            "(or shrink the batch), so it stops holding its GPUs between restarts."
        )
    return (
        f"{logs} and fix the crash; give Jobs a backoffLimit so a failing run releases its "
        "GPUs instead of looping."
    )


GIB = 2.0**30


def _gib(b: float) -> str:
    return f"{b / GIB:,.1f} GiB"


@dataclass(frozen=True)
class _HostMemory:
    """What cAdvisor and the pod's spec say of the memory of the container that ended last."""

    container: str
    used: float | None
    """The most working-set memory it used in the window (bytes); None: not measured."""
    limit: float | None
    """Its memory limit (bytes); None: it has none."""
    why: str
    """Why `used` is not measured."""
    headroom: float

    @classmethod
    def of(cls, views: Views, ns: str, pod: str, container: str, headroom: float) -> _HostMemory:
        mem = views.inv.memory
        return cls(
            container,
            mem.used(ns, pod, container) if container else None,
            mem.limit(ns, pod, container) if container else None,
            mem.missing(),
            headroom,
        )

    @property
    def recommended_bytes(self) -> float | None:
        """The larger of the most it used and its limit, plus the headroom, in whole GiB."""
        if self.used is None:
            return None
        base = max(self.used, self.limit or 0.0) * (1.0 + self.headroom)
        return float(math.ceil(base / GIB - 1e-9) * GIB)

    @property
    def recommended(self) -> str | None:
        """`recommended_bytes` as a Kubernetes quantity (`20Gi`)."""
        b = self.recommended_bytes
        return None if b is None else f"{b / GIB:.0f}Gi"

    def basis(self) -> str:
        """What the recommendation is made from."""
        used = _gib(self.used or 0.0)
        if self.limit is not None and self.limit > (self.used or 0.0):
            return f"its {_gib(self.limit)} limit, above the {used} cAdvisor saw it use at most"
        return f"the most it used, {used}"

    def said(self) -> str:
        """The message's sentence of its memory."""
        used = _gib(self.used or 0.0)
        if self.limit is None:
            return f"Container {self.container} used at most {used} of memory, with no limit."
        share = (self.used or 0.0) / self.limit * 100.0
        return (
            f"Container {self.container} used at most {used} of memory against its "
            f"{_gib(self.limit)} limit ({share:.0f} %)."
        )

    def evidence(self) -> dict[str, Any]:
        if self.used is None:
            return {"oom_container": self.container, "host_memory_needed": self.why}
        return {
            "oom_container": self.container,
            "memory_working_set_max_bytes": round(self.used),
            "memory_limit_bytes": None if self.limit is None else round(self.limit),
            "memory_recommended_limit": self.recommended,
            "memory_recommended_limit_bytes": round(self.recommended_bytes or 0.0),
        }

"""GPU020 framebuffer pressure: a workload that barely fits in its GPU memory.

What it finds
    Holdings whose framebuffer use stays near the card's or the MIG slice's capacity, and GPU
    pods that crash-loop with GPU out-of-memory errors. On a MIG slice it usually means the
    slice is too small for its model.

Why it matters
    A model at the edge of its memory fails under the next long prompt or larger batch: the
    pod crashes, restarts, reloads its weights, and the GPU time in between is lost.

How it decides
    - Pressure: the p95 of used / (used + free) framebuffer in the holding's fullest hour,
      computed as the largest hourly p95(`DCGM_FI_DEV_FB_USED`) / mean(`FB_USED` + `FB_FREE`)
      per GPU or MIG instance (the capacity is constant), is at least
      `checks.fb_pressure_critical` (default 0.95: high), or at least
      `checks.fb_pressure_warning` (default 0.90: medium). The fullest hour, not the whole
      window: pressure concentrated in some hours (a nightly batch, the day's peak of
      traffic) is pressure all the same, and a p95 over a week would hide it under the quiet
      hours. (It is also the figure an hourly recording rule keeps, exact however the window
      is read; a snapshot older than it holds the p95 over the window.)
    - Crash loop: a pod requesting GPUs with at least `checks.crashloop_restarts` (default 3)
      container restarts whose last termination message reports CUDA or GPU out of memory
      (high).
    Impact: 0 wasted GPU-hours (the GPU-hours at risk are in the evidence); severity ranks it
    among the risks, which reports list apart from the waste.

What to do
    On a MIG slice, move to the next profile up that fits peak use plus
    `checks.fb_headroom` (default 20 %); the recommendation names it for the GPU model. (A
    part of a series the Kubernetes-side join split among the pods that held it in turn has
    its fullest hour's p95 but no peak: the profile named fits the p95, and the peak may need a
    larger one.) On a whole GPU, cut batch or context size, quantise, or move to a
    larger-memory GPU.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from gpuaudit.checks.base import short_model
from gpuaudit.checks.contract import count, fraction
from gpuaudit.checks.findings import Category, Finding, Impact, Resource, Severity
from gpuaudit.domain import mig
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C

CODE = "GPU020"
TITLE = "Framebuffer pressure"
REQUIRES = (Capability.FRAMEBUFFER,)
VIEWS = ()
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


@dataclass(frozen=True)
class Thresholds:
    fb_pressure_critical: float = fraction(0.95)
    """p95 of used/(used+free) framebuffer in the fullest hour from which a holding is under
    pressure (high)."""
    fb_pressure_warning: float = fraction(0.90)
    """p95 of used/(used+free) framebuffer in the fullest hour from which pressure is a warning
    (medium)."""
    fb_headroom: float = fraction(0.20)
    """Memory headroom over peak use a recommended MIG profile must leave."""
    crashloop_restarts: float = count(3.0)
    """Container restarts with a GPU out-of-memory message that make a crash loop."""


_GPU_OOM = re.compile(
    r"(cuda|gpu|cublas|cudnn|nccl)[^\n]{0,80}out of memory|CUDA_ERROR_OUT_OF_MEMORY|"
    r"OutOfMemoryError: CUDA|CUBLAS_STATUS_ALLOC_FAILED",
    re.IGNORECASE,
)
GIB_PER_NOMINAL_GB = 0.95
"""A MIG profile named `Ngb` offers a little under N GiB (e.g. 1g.10gb is about 9.6 GiB)."""


def next_profile(model: str, current: str, peak_mib: float, headroom: float) -> str | None:
    """The smallest profile of `model` above `current` that fits peak use plus headroom."""
    cur = mig.parse_profile(current)
    need_gib = peak_mib / 1024.0 * (1.0 + headroom)
    for p in mig.profiles_for(model):
        if cur and (p.memory_gb, p.slices) <= (cur.memory_gb, cur.slices):
            continue
        if p.memory_gb * GIB_PER_NOMINAL_GB >= need_gib:
            return p.name
    return None


def _pressure(views: Views, cfg: Thresholds) -> list[Finding]:
    """Holdings whose p95 framebuffer use is near the capacity."""
    out: list[Finding] = []
    h = views.held
    h = h[h[C.FB_USED_P95].notna() & (h[C.MEM_TOTAL_MIB] > 0)]
    # The threshold on whole columns first (the same division the loop does); the loop reads
    # only the holdings that pass.
    ratios = h[C.FB_USED_P95].astype("float64") / h[C.MEM_TOTAL_MIB].astype("float64")
    h = h[~(ratios < cfg.fb_pressure_warning)]
    for row in h.itertuples(index=False):
        total = float(getattr(row, C.MEM_TOTAL_MIB))
        p95 = float(getattr(row, C.FB_USED_P95))
        ratio = p95 / total
        if ratio < cfg.fb_pressure_warning:
            continue
        sev = Severity.HIGH if ratio >= cfg.fb_pressure_critical else Severity.MEDIUM
        ns, pod = str(getattr(row, C.NAMESPACE)), str(getattr(row, C.POD))
        model = str(getattr(row, C.MODEL))
        # An older snapshot's p95 is over the whole window (`Inventory.p95_of_window`).
        over = "over the window" if views.inv.p95_of_window else "in its fullest hour"
        profile = str(getattr(row, C.MIG_PROFILE) or "")
        peak = float(getattr(row, C.FB_USED_MAX))
        # A part of a series split among the pods that held it in turn has its fullest hour's
        # p95 but no peak (`bucketjoin.LOST`): the p95 is a floor of the peak.
        known = math.isfinite(peak)
        where = (
            f"its {profile} MIG slice"
            if profile
            else f"GPU {getattr(row, C.GPU_INDEX)} ({short_model(model)})"
        )
        of = (
            f"peak {peak / 1024:.1f} of {total / 1024:.1f} GiB"
            if known
            else f"of {total / 1024:.1f} GiB; its peak is not known: it held a part of a "
            "series split among the pods that held it in turn"
        )
        message = (
            f"Pod {ns}/{pod} used {ratio * 100:.1f} % of the memory of {where} at p95 "
            f"{over} ({of})."
        )
        if profile:
            nxt = next_profile(model, profile, peak if known else p95, cfg.fb_headroom)
            use = f"{peak / 1024:.1f} GiB peak" if known else f"{p95 / 1024:.1f} GiB p95"
            rec = (
                f"Move it from {profile} to {nxt}{'' if known else ' or larger'} (fits the "
                f"{use} plus {cfg.fb_headroom * 100:.0f} % headroom on {short_model(model)}"
                f"{'' if known else '; the peak, which the profile must fit, is not known'})."
                if nxt
                else f"No MIG profile of {short_model(model)} fits the "
                f"{'peak' if known else 'p95'} plus headroom; give it a whole GPU."
            )
        else:
            rec = (
                "Cut batch or context size, quantise the model, or move it to a GPU with "
                "more memory before it fails with out-of-memory errors."
            )
        out.append(
            Finding(
                code=CODE,
                severity=sev,
                resource=Resource(
                    "Pod", ns, pod, str(getattr(row, C.NODE)), float(getattr(row, C.FRACTION))
                ),
                message=message,
                impact=Impact(gpu_hours=0.0, cost=0.0),
                category=Category.RISK,
                recommendation=rec,
                evidence={
                    "fb_used_p95_ratio": round(ratio, 4),
                    "fb_used_p95_mib": round(p95, 1),
                    "p95_of": "the window" if views.inv.p95_of_window else "the fullest hour",
                    "fb_used_max_mib": round(peak, 1) if known else None,
                    "fb_total_mib": round(total, 1),
                    "mig_profile": profile,
                    "gpu_model": model,
                    "gpu_hours_at_risk": round(float(getattr(row, C.GPU_HOURS)), 2),
                    "threshold_critical": cfg.fb_pressure_critical,
                    "threshold_warning": cfg.fb_pressure_warning,
                    "headroom": cfg.fb_headroom,
                },
            )
        )
    return out


def _crash_loops(views: Views, cfg: Thresholds) -> list[Finding]:
    """GPU pods restarting on GPU out-of-memory errors."""
    out: list[Finding] = []
    pods = views.inv.pods
    if not pods.empty:
        gpu_pods = pods[(pods[C.GPU_REQUEST] > 0) | (pods[C.MIG_REQUEST] != "")]
        gpu_pods = gpu_pods[~(gpu_pods[C.RESTARTS] < cfg.crashloop_restarts)]
        for row in gpu_pods.itertuples(index=False):
            restarts = int(getattr(row, C.RESTARTS))
            term = str(getattr(row, C.LAST_TERMINATION))
            if restarts < cfg.crashloop_restarts or not _GPU_OOM.search(term):
                continue
            ns, pod = str(getattr(row, C.NAMESPACE)), str(getattr(row, C.POD))
            out.append(
                Finding(
                    code=CODE,
                    severity=Severity.HIGH,
                    resource=Resource(
                        "Pod",
                        ns,
                        pod,
                        str(getattr(row, C.NODE)),
                        float(getattr(row, C.GPU_REQUEST)),
                    ),
                    message=(
                        f"Pod {ns}/{pod} restarted {restarts} times; its last crash was a "
                        f"GPU out-of-memory error ({term[:120]})."
                    ),
                    impact=Impact(gpu_hours=0.0, cost=0.0),
                    category=Category.RISK,
                    recommendation=(
                        "Give it more GPU memory (a larger MIG profile or GPU) or "
                        "reduce its batch or context size; it cannot run as sized."
                    ),
                    evidence={
                        "restarts": restarts,
                        "last_termination": term[:300],
                        "threshold_restarts": cfg.crashloop_restarts,
                    },
                )
            )
    return out


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    return _pressure(views, cfg) + _crash_loops(views, cfg)

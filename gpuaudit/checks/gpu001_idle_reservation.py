"""GPU001 idle reservation: a pod holds GPUs and does not use them.

What it finds
    Pods (and holders of MIG slices) that held GPUs for at least 4 hours of the window with a
    mean engine activity below 5 %: a model server nobody calls, a notebook left open, a job
    that waits on something else while its cards sit reserved.

Why it matters
    Kubernetes counts a GPU as an integer. A reserved card is unavailable to every other pod,
    whether or not the holder uses it; an idle reservation costs as much as a busy one.

How it decides
    For each holder pod, over every GPU or MIG slice it held in the window:
    - held hours (the longest of its holdings: its activity samples x the scrape interval,
      so a 20-minute job held 1/3 h, not a whole `--step` bucket) at least
      `checks.idle_min_hours` (default 4);
    - mean engine activity below `checks.idle_activity` (default 0.05). Activity is
      `DCGM_FI_PROF_GR_ENGINE_ACTIVE` (a ratio) where it exists, else
      `DCGM_FI_DEV_GPU_UTIL` / 100; the mean is taken over every sample of every GPU the pod
      held (weighted by sample counts). With `checks.activity_noise_floor` above 0 (default
      0, off), the hourly buckets whose mean activity of the pod's GPUs was measured under it
      count as 0: their part of the mean is taken out. Buckets without a value stay out of
      the mean; a pod without activity data is never judged.
    Second signals: the message and evidence state the pod's
    GPUs' mean power draw in W and as a share of their maximum (the power management limit
    `DCGM_FI_DEV_POWER_MGMT_LIMIT` where exported, else the model's board power), and the
    framebuffer in use. Confidence is high when the draw lies at most
    `checks.idle_power_margin` (default 0.25) of the span from the model's approximate idle
    draw to its maximum above idle; low when above it (with `checks.idle_power_drop` at 1 such
    a pod is not reported at all; default 0, reported); medium when the power cannot tell (not
    measured, model figures unknown, a MIG instance or a shared GPU). Missing power data is
    never read as idle power.
    Impact: the GPU-hours held (each GPU's held hours x its share of a GPU, a MIG slice
    counting its share, e.g. 1g of 7 = 1/7, a replica of a GPU shared by time-slicing or MPS
    its share over the replicas), priced per GPU model. On a shared GPU the activity is the
    device's (DCGM cannot tell its tenants apart): a pod is idle only when the whole GPU is,
    and it wastes its replica, not the GPU. Severity: high from 100
    GPU-hours, medium from 24, low below.

What to do
    Release the cards: scale an idle Deployment to zero, by hand or with KEDA (an HPA alone
    cannot scale to zero), cull idle notebooks, stop the job. If the pod needs a GPU only
    occasionally, give it a MIG slice or a shared GPU instead of a whole card.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuaudit.checks import idle
from gpuaudit.checks.base import WASTE, gpu_word, held_text, short_model
from gpuaudit.checks.contract import fraction, hours, switch
from gpuaudit.checks.findings import Confidence, Finding, Impact, Resource
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C

CODE = "GPU001"
TITLE = "Idle reservation"
REQUIRES = (Capability.ACTIVITY,)
VIEWS = ("pod_hours", "per_pod")
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


@dataclass(frozen=True)
class Thresholds:
    idle_min_hours: float = hours(4.0)
    """Shortest holding (hours) that can be an idle reservation."""
    idle_activity: float = fraction(0.05)
    """Mean engine activity (ratio) below which a GPU counts as idle."""
    activity_noise_floor: float = fraction(0.0)
    """Hourly mean engine activity (ratio) under which a measured bucket counts as 0 activity
    (background noise); 0 turns it off. Buckets without data never count as idle."""
    idle_power_margin: float = fraction(0.25)
    """Share of the span from a GPU model's idle to its maximum power above idle from which an
    idle-looking pod's mean power draw contradicts its idleness (low confidence)."""
    idle_power_drop: float = switch(0.0)
    """1: do not report an idle-looking pod whose power draw contradicts its idleness; 0:
    report it with low confidence."""


def recommendation(kind: str, name: str, ns: str, pod: str, on_mig: bool = False) -> str:
    """A concrete fix for an idle holder, by the kind of workload that owns it."""
    target = f"{kind} {ns}/{name}" if kind and name else f"pod {ns}/{pod}"
    if kind == "Deployment":
        tail = "" if on_mig else "; if it must stay up, move it to a MIG slice or a shared GPU"
        return (
            f"Scale {target} to zero while it is not used: by hand (`kubectl scale deployment "
            f"{name} -n {ns} --replicas=0`), or with KEDA scaling it on its request rate "
            f"with minReplicaCount 0 (a plain HPA cannot go below one replica){tail}."
        )
    if kind in ("Notebook", "StatefulSet"):
        return (
            f"Cull {target} when idle (Kubeflow notebook culling, or an idle-culler "
            "CronJob) so its GPUs return to the pool."
        )
    if kind in ("Job", "CronJob"):
        return (
            f"Stop {target} and set activeDeadlineSeconds and ttlSecondsAfterFinished "
            "so finished or stuck runs release their GPUs."
        )
    return f"Stop {target} or release its GPUs; it held them without using them."


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    pods = views.per_pod
    if pods.empty:
        return []
    mean_act, held_h = pods[C.ACT_MEAN], pods[C.HOURS].astype("float64")
    counted = idle.floored_means(views, cfg.activity_noise_floor)
    if counted:
        keys = list(zip(pods[C.NAMESPACE].astype(str), pods[C.POD].astype(str), strict=True))
        mean_act = mean_act.copy()
        mean_act[:] = [counted.get(k, m) for k, m in zip(keys, mean_act.tolist(), strict=True)]
    # The rule's test on whole columns first; the loop below reads only the pods that pass.
    keep = mean_act.notna() & ~(held_h < cfg.idle_min_hours) & ~(mean_act >= cfg.idle_activity)
    pods, mean_act = pods[keep], mean_act[keep]
    if pods.empty:
        return []
    signals = idle.pod_signals(views)
    out: list[Finding] = []
    for row, mean in zip(pods.itertuples(index=False), mean_act.tolist(), strict=True):
        ns, pod = str(getattr(row, C.NAMESPACE)), str(getattr(row, C.POD))
        sig = signals.get((ns, pod))
        confidence = sig.confidence(cfg.idle_power_margin) if sig else Confidence.MEDIUM
        if confidence is Confidence.LOW and cfg.idle_power_drop >= 1:
            continue
        out.append(_finding(row, float(mean), sig, confidence, cfg))
    return out


def _finding(
    row: Any, mean: float, sig: idle.Signals | None, confidence: Confidence, cfg: Thresholds
) -> Finding:
    hours = float(getattr(row, C.HOURS))
    gpus = float(getattr(row, C.POD_GPUS))
    gpu_hours = float(getattr(row, C.GPU_HOURS))
    cost = float(getattr(row, C.COST))
    ns, pod = str(getattr(row, C.NAMESPACE)), str(getattr(row, C.POD))
    model = short_model(str(getattr(row, C.MODEL)))
    profile = str(getattr(row, C.MIG_PROFILE) or "")
    replicas = int(getattr(row, C.REPLICAS) or 1)
    what = (
        f"a {profile} MIG slice of an {model}"
        if profile and gpus < 1
        else (f"{gpu_word(gpus)} ({model})")
    )
    if replicas > 1:
        what = held_text(gpus, model, replicas)
    measured = float(getattr(row, C.ACT_MEAN))
    floor_note = (
        f" ({measured * 100:.1f} % before hours under the "
        f"{cfg.activity_noise_floor * 100:g} % noise floor were counted as 0)"
        if abs(measured - mean) > 1e-12
        else ""
    )
    message = (
        f"Pod {ns}/{pod} held {what} for {hours:.0f} h at {mean * 100:.1f} % average "
        f"engine activity{floor_note}"
        + (
            " of the shared GPU: an idle pod on a shared GPU wastes its replica, not the GPU."
            if replicas > 1
            else "."
        )
    )
    if sig is not None:
        message += " " + sig.sentence(model, cfg.idle_power_margin)
    evidence: dict[str, Any] = {
        "hours_held": round(hours, 2),
        "mean_activity": round(mean, 6),
        "max_activity": round(float(getattr(row, C.ACT_MAX)), 6)
        if getattr(row, C.ACT_MAX) == getattr(row, C.ACT_MAX)
        else None,
        "activity_metric": str(getattr(row, C.ACT_SOURCE)),
        "gpus": round(gpus, 4),
        "gpu_model": str(getattr(row, C.MODEL)),
        "owner": f"{getattr(row, C.OWNER_KIND)}/{getattr(row, C.OWNER_NAME)}"
        if getattr(row, C.OWNER_KIND)
        else "",
        **(
            {
                "shared_replicas": replicas,
                "activity_of": "the shared GPU (every pod holding a replica of it)",
            }
            if replicas > 1
            else {}
        ),
        "threshold_activity": cfg.idle_activity,
        "threshold_hours": cfg.idle_min_hours,
    }
    if cfg.activity_noise_floor > 0:
        evidence["measured_mean_activity"] = round(measured, 6)
        evidence["activity_noise_floor"] = cfg.activity_noise_floor
    if sig is not None:
        evidence.update(sig.evidence(cfg.idle_power_margin))
    return Finding(
        code=CODE,
        severity=WASTE(gpu_hours),
        resource=Resource("Pod", ns, pod, str(getattr(row, C.NODE)), gpus),
        message=message,
        impact=Impact(gpu_hours=gpu_hours, cost=cost),
        recommendation=recommendation(
            str(getattr(row, C.OWNER_KIND)),
            str(getattr(row, C.OWNER_NAME)),
            ns,
            pod,
            on_mig=bool(profile) or replicas > 1,
        ),
        evidence=evidence,
        confidence=confidence,
    )

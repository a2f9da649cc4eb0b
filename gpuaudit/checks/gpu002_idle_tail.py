"""GPU002 idle tail: a holder that worked, then went idle and kept its GPUs.

What it finds
    Pods that were active earlier in the window and have been idle for the last hours of it
    while still holding their GPUs: a training run that finished but never exited, a notebook
    left open after the work was done, a job waiting forever on a dead peer.

Why it matters
    Nothing releases a GPU that a finished process still holds. These tails are pure waste and
    the easiest to fix: the owner usually does not know.

How it decides
    For each pod still holding GPUs in the last bucket of the window (buckets of `--step`,
    default 1 h), over the mean activity of all its GPUs per bucket:
    - the trailing run of buckets below `checks.idle_activity` (default 0.05) lasts at least
      `checks.idle_tail_hours` (default 6 h);
    - some earlier bucket reached `checks.active_activity` (default 0.20): it did work before;
    - the tail is longer than every earlier idle run of the pod, so a recurring pattern (a
      nightly batch idle 21 hours a day, which GPU003 reports) is not mistaken for an end.
    With `checks.activity_noise_floor` above 0 (default 0, off), a bucket whose activity was
    measured under it counts as 0; a bucket without a value is never idle (it ends the tail).
    Second signals: the message and evidence state the pod's
    GPUs' mean power draw (W, and as a share of the power limit or board power) and the
    framebuffer in use. The power mean covers the whole holding, its active hours included,
    so it cannot speak for the tail: the confidence is medium.
    Impact: the GPU-hours held in the idle tail (its GPUs' samples x the scrape interval),
    priced per GPU model; the hours shown are the hours held in the tail. Severity: high from
    100 GPU-hours, medium from 24, low below.

What to do
    Release the GPUs and stop it recurring, by owner: for Jobs and training jobs set
    `ttlSecondsAfterFinished` and `activeDeadlineSeconds` and make the entrypoint exit when
    training ends; for notebooks run an idle culler; for Deployments scale to zero when idle.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import numpy.typing as npt

from gpuaudit.checks import idle
from gpuaudit.checks.base import WASTE, held_text, shared_note, short_model
from gpuaudit.checks.contract import fraction, hours
from gpuaudit.checks.findings import Confidence, Finding, Impact, Resource
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.derived import edge
from gpuaudit.inventory.views import PodHours

CODE = "GPU002"
TITLE = "Idle tail"
REQUIRES = (Capability.ACTIVITY,)
VIEWS = ("pod_hours", "per_pod")
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


@dataclass(frozen=True)
class Thresholds:
    idle_activity: float = fraction(0.05)
    """Mean engine activity (ratio) below which a GPU counts as idle."""
    idle_tail_hours: float = hours(6.0)
    """Idle hours at the end of a holding that make an idle tail."""
    active_activity: float = fraction(0.20)
    """Mean engine activity (ratio) from which an hour counts as active."""
    activity_noise_floor: float = fraction(0.0)
    """Hourly mean engine activity (ratio) under which a measured bucket counts as 0 activity
    (background noise); 0 turns it off. Buckets without data never count as idle."""


_TRAINING = {"Job", "PyTorchJob", "MPIJob", "JobSet", "TFJob", "TrainJob", "RayJob"}


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def recommendation(kind: str, name: str, ns: str, pod: str) -> str:
    target = f"{kind} {ns}/{name}" if kind and name else f"pod {ns}/{pod}"
    if kind in _TRAINING:
        return (
            f"Stop {target} now; set ttlSecondsAfterFinished and activeDeadlineSeconds on it "
            "and make the entrypoint exit when training ends."
        )
    if kind in ("Notebook", "StatefulSet"):
        return f"Cull {target}: enable an idle culler so idle notebooks release their GPUs."
    if kind == "Deployment":
        return (
            f"Scale {target} to zero when its work is done: by hand (`kubectl scale deployment "
            f"{name} -n {ns} --replicas=0`), or with KEDA scaling it on its queue or request "
            "rate with minReplicaCount 0 (a plain HPA cannot go below one replica)."
        )
    return f"Stop {target}; it kept its GPUs after its work ended."


def _candidates(
    ph: PodHours, act: npt.NDArray[np.float64], end: float, idle: float, min_tail: float
) -> list[tuple[int, int, int]]:
    """(pod number, start, end) entry spans of the pods that can qualify (still holding at the
    end, an idle tail at least `min_tail` buckets long after an active bucket), found without a
    Python loop per pod."""
    starts, ends = ph.spans()
    if len(starts) == 0:
        return []
    pos = np.arange(len(ph.pod), dtype=np.int32 if len(ph.pod) < 2**31 else np.intp)
    last_pos = ends - 1
    # NaN activity counts as idle here, as it did in the grouped filter; `run` decides exactly.
    busy_pos = np.maximum.reduceat(np.where(act >= edge(idle), pos, -1), starts)
    tail = last_pos - busy_pos
    ok = (
        (busy_pos >= 0)
        & (tail >= min_tail)
        & (np.abs(ph.bucket_ts[ph.bucket[last_pos]] - end) <= 1e-6)
    )
    keep = np.flatnonzero(ok)
    return list(
        zip(
            ph.pod[starts[keep]].tolist(),
            starts[keep].tolist(),
            ends[keep].tolist(),
            strict=True,
        )
    )


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    inv = views.inv
    bucket_h = inv.step_s / 3600.0
    ph = views.pod_hours
    if len(ph.pod) == 0:
        return []
    act = idle.floored(ph.act, cfg.activity_noise_floor)
    # Hourly activities are means of sums: compared at the thresholds' edges.
    idle_at, active_at = edge(cfg.idle_activity), edge(cfg.active_activity)
    candidates = _candidates(
        ph, act, inv.window_end, cfg.idle_activity, cfg.idle_tail_hours / bucket_h
    )
    if not candidates:
        return []
    pods = views.per_pod.set_index([C.NAMESPACE, C.POD])
    signals = idle.pod_signals(views, whole_holding=False)
    out: list[Finding] = []
    last_ts = inv.window_end
    for number, start, stop in candidates:
        ns, pod = str(ph.pods.namespace[number]), str(ph.pods.pod[number])
        if abs(float(ph.bucket_ts[ph.bucket[stop - 1]]) - last_ts) > 1e-6:
            continue  # no longer holding at the end of the window
        acts = act[start:stop].tolist()
        tail = 0
        for a in reversed(acts):
            if a < idle_at:
                tail += 1
            else:
                break
        if tail * bucket_h < cfg.idle_tail_hours or tail == len(acts):
            continue
        earlier = acts[: len(acts) - tail]
        peak = max(earlier)
        if peak < active_at:
            continue
        longest, run_len = 0, 0
        for a in earlier:
            run_len = run_len + 1 if a < idle_at else 0
            longest = max(longest, run_len)
        if tail <= longest:
            continue
        gpus = float(ph.gpus[stop - 1])
        info = pods.loc[(ns, pod)]
        model = str(info[C.MODEL])
        # The tail is a run of buckets; what it cost is the time held in them.
        gpu_hours = float(ph.gpu_h[stop - tail : stop].sum())
        held = ph.held_h(slice(start, stop))
        tail_h = float(held[len(acts) - tail :].sum())
        cost = gpu_hours * views.price(model)
        kind, owner = str(info[C.OWNER_KIND]), str(info[C.OWNER_NAME])
        replicas = float(info[C.REPLICAS] or 1)
        message = (
            f"Pod {ns}/{pod} has held {held_text(gpus, short_model(model), replicas)} idle for "
            f"the last {tail_h:.0f} h after working earlier (busiest hour {peak * 100:.0f} % "
            f"engine activity); it still holds them.{shared_note(replicas)}"
        )
        sig = signals.get((ns, pod))
        if sig is not None:
            message += " " + sig.sentence(short_model(model), None)
        out.append(
            Finding(
                code=CODE,
                severity=WASTE(gpu_hours),
                resource=Resource("Pod", str(ns), str(pod), str(info[C.NODE]), gpus),
                message=message,
                impact=Impact(gpu_hours=gpu_hours, cost=cost),
                recommendation=recommendation(kind, owner, str(ns), str(pod)),
                evidence={
                    "idle_tail_hours": round(tail_h, 2),
                    # Where the tail starts: the capacity plan releases the pod from here.
                    "idle_tail_from": _iso(
                        float(ph.bucket_ts[ph.bucket[stop - tail]]) - inv.step_s
                    ),
                    "tail_mean_activity": round(sum(acts[-tail:]) / tail, 6),
                    "peak_hour_activity_before": round(peak, 6),
                    "longest_earlier_idle_hours": round(longest * bucket_h, 2),
                    "hours_held": round(float(held.sum()), 2),
                    "gpus": round(gpus, 4),
                    "gpu_model": model,
                    "owner": f"{kind}/{owner}" if kind else "",
                    "threshold_idle_activity": cfg.idle_activity,
                    "threshold_tail_hours": cfg.idle_tail_hours,
                    "threshold_active_activity": cfg.active_activity,
                    **(
                        {"activity_noise_floor": cfg.activity_noise_floor}
                        if cfg.activity_noise_floor > 0
                        else {}
                    ),
                    **(sig.evidence(None) if sig is not None else {}),
                },
                confidence=Confidence.MEDIUM,
            )
        )
    return out

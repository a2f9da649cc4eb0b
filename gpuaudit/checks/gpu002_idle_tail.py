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
    Impact: the idle tail's GPU-hours (tail hours x GPUs held), priced per GPU model.
    Severity: high from 100 GPU-hours, medium from 24, low below.

What to do
    Release the GPUs and stop it recurring, by owner: for Jobs and training jobs set
    `ttlSecondsAfterFinished` and `activeDeadlineSeconds` and make the entrypoint exit when
    training ends; for notebooks run an idle culler; for Deployments scale to zero when idle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuaudit.checks.base import gpu_word, short_model
from gpuaudit.findings import Finding, Impact, Resource, Severity
from gpuaudit.inventory import Inventory, views
from gpuaudit.inventory import columns as C
from gpuaudit.settings import Settings

if TYPE_CHECKING:
    import pandas as pd

CODE = "GPU002"
TITLE = "Idle tail"
REQUIRES = ("activity",)

_TRAINING = {"Job", "PyTorchJob", "MPIJob", "JobSet", "TFJob", "TrainJob", "RayJob"}


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
        return f"Scale {target} to zero when idle (KEDA or an HPA with scale-to-zero)."
    return f"Stop {target}; it kept its GPUs after its work ended."


def _severity(gpu_hours: float) -> Severity:
    if gpu_hours >= 100:
        return Severity.HIGH
    if gpu_hours >= 24:
        return Severity.MEDIUM
    return Severity.LOW


def _candidates(ph: pd.DataFrame, end: float, idle: float, min_tail: float) -> pd.DataFrame:
    """Rows of the pods that can qualify (still holding at the end, an idle tail at least
    `min_tail` buckets long after an active bucket), found without a Python loop per pod."""
    import numpy as np
    import pandas as pd

    ph = ph.sort_values([C.NAMESPACE, C.POD, C.TS], kind="stable").reset_index(drop=True)
    gid = ph.groupby([C.NAMESPACE, C.POD], sort=False).ngroup().to_numpy()
    pos = np.arange(len(ph))
    last_pos = pd.Series(pos).groupby(gid).transform("max").to_numpy()
    busy_pos = (
        pd.Series(np.where(ph[C.ACT].to_numpy() >= idle, pos, -1))
        .groupby(gid)
        .transform("max")
        .to_numpy()
    )
    tail = last_pos - busy_pos
    ends = ph[C.TS].to_numpy()[last_pos]
    ok = (busy_pos >= 0) & (tail >= min_tail) & (np.abs(ends - end) <= 1e-6)
    out: pd.DataFrame = ph[ok]
    return out


def run(inv: Inventory, settings: Settings) -> list[Finding]:
    cfg = settings.checks
    bucket_h = inv.step_s / 3600.0
    ph = views.pod_hourly(inv)
    if ph.empty:
        return []
    ph = _candidates(ph, inv.window_end, cfg.idle_activity, cfg.idle_tail_hours / bucket_h)
    if ph.empty:
        return []
    pods = views.per_pod(inv, settings.prices).set_index([C.NAMESPACE, C.POD])
    out: list[Finding] = []
    last_ts = inv.window_end
    for (ns, pod), grp in ph.groupby([C.NAMESPACE, C.POD], sort=True):
        grp = grp.sort_values(C.TS)
        if abs(float(grp[C.TS].iloc[-1]) - last_ts) > 1e-6:
            continue  # no longer holding at the end of the window
        acts = grp[C.ACT].tolist()
        tail = 0
        for a in reversed(acts):
            if a < cfg.idle_activity:
                tail += 1
            else:
                break
        tail_h = tail * bucket_h
        if tail_h < cfg.idle_tail_hours or tail == len(acts):
            continue
        earlier = acts[: len(acts) - tail]
        peak = max(earlier)
        if peak < cfg.active_activity:
            continue
        longest, run_len = 0, 0
        for a in earlier:
            run_len = run_len + 1 if a < cfg.idle_activity else 0
            longest = max(longest, run_len)
        if tail <= longest:
            continue
        gpus = float(grp["gpus"].iloc[-1])
        info = pods.loc[(ns, pod)]
        model = str(info[C.MODEL])
        gpu_hours = tail_h * gpus
        cost = gpu_hours * views.model_price(model, settings.prices)
        kind, owner = str(info[C.OWNER_KIND]), str(info[C.OWNER_NAME])
        message = (
            f"Pod {ns}/{pod} has held {gpu_word(gpus)} ({short_model(model)}) idle for the last "
            f"{tail_h:.0f} h after working earlier (busiest hour {peak * 100:.0f} % engine "
            f"activity); it still holds them."
        )
        out.append(
            Finding(
                code=CODE,
                severity=_severity(gpu_hours),
                resource=Resource("Pod", str(ns), str(pod), str(info[C.NODE]), gpus),
                message=message,
                impact=Impact(gpu_hours=gpu_hours, cost=cost),
                recommendation=recommendation(kind, owner, str(ns), str(pod)),
                evidence={
                    "idle_tail_hours": round(tail_h, 2),
                    "tail_mean_activity": round(sum(acts[-tail:]) / tail, 6),
                    "peak_hour_activity_before": round(peak, 6),
                    "longest_earlier_idle_hours": round(longest * bucket_h, 2),
                    "hours_held": round(len(acts) * bucket_h, 2),
                    "gpus": round(gpus, 4),
                    "gpu_model": model,
                    "owner": f"{kind}/{owner}" if kind else "",
                    "threshold_idle_activity": cfg.idle_activity,
                    "threshold_tail_hours": cfg.idle_tail_hours,
                    "threshold_active_activity": cfg.active_activity,
                },
            )
        )
    return out

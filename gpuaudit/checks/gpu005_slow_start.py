"""GPU005 slow start: a pod holds its GPUs long before its first sustained work.

What it finds
    Pods that started in the window and held their GPUs for a large share of their holding
    before their activity first rose and stayed up: an image pulled after the GPUs were bound,
    model weights loaded from remote storage, a compile or a warm-up that takes hours.

Why it matters
    The GPUs are reserved from the moment the pod is bound; every minute of pulling and loading
    is paid for on every card, and for a server that scales out, again on each new replica.

How it decides
    Per holder pod whose start (`status.startTime`, else its creation; without the pods read,
    a first held bucket after the window's first) lies in the window: its first sustained
    activity is the first run of `checks.start_sustained_buckets` (default 2) consecutive
    buckets in which the mean activity of its GPUs is at least `checks.start_activity`
    (default 0.05). The starting GPU-hours are the GPU-hours it held in the buckets before that
    run (each bucket's held time: its samples x the scrape interval, x each GPU's fraction).
    The figure is resolved to the bucket: the bucket in which the activity rose counts as
    active, so the figure is a lower bound, short by less than one bucket. A pod that never
    ran sustained is not reported here (GPU001 reports an idle holder). Reported when the
    starting hours are at least `checks.start_min_hours` (default 1) and the starting
    GPU-hours at least `checks.start_min_share` (default 0.25) of the pod's held GPU-hours in
    the window. Impact: the starting GPU-hours, priced per model. Severity: high from 100
    GPU-hours, medium from 24, low below.

What to do
    Pre-pull the image on the GPU nodes (a DaemonSet that pulls it, or the node image), keep
    the model weights in a cache near the nodes (a node-local or ReadOnlyMany volume, a model
    cache such as KServe's LocalModelCache), and load them before the GPUs are requested where
    the framework allows it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuaudit.checks.base import WASTE, gpu_word, short_model
from gpuaudit.checks.contract import count, fraction, hours
from gpuaudit.checks.findings import Finding, Impact, Resource
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.causes import pod_starts
from gpuaudit.inventory.window import iso

CODE = "GPU005"
TITLE = "Slow start"
REQUIRES = (Capability.ACTIVITY,)
VIEWS = ("pod_hours", "per_pod")
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


@dataclass(frozen=True)
class Thresholds:
    start_activity: float = fraction(0.05)
    """Mean activity (ratio) of a pod's GPUs in a bucket from which the bucket counts as work."""
    start_sustained_buckets: float = count(2.0)
    """Consecutive buckets of work that make the pod's first sustained activity."""
    start_min_hours: float = hours(1.0)
    """Hours held before the first sustained activity from which a start is slow."""
    start_min_share: float = fraction(0.25)
    """Share of the pod's held GPU-hours spent starting from which it is reported."""


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    ph = views.pod_hours
    if not len(ph.pod):
        return []
    st = pod_starts(views, cfg.start_activity, int(cfg.start_sustained_buckets))
    n = len(ph.pods.namespace)
    pod = np.asarray(ph.pod, dtype=np.intp)
    before = st.active_bucket[pod] > np.asarray(ph.bucket, dtype=np.intp)
    starting = np.bincount(pod, weights=np.where(before, ph.gpu_h, 0.0), minlength=n)
    start_h = np.bincount(pod, weights=np.where(before, ph.held_h(), 0.0), minlength=n)
    total = np.bincount(pod, weights=ph.gpu_h, minlength=n)
    per_pod = views.per_pod.set_index([C.NAMESPACE, C.POD])
    out: list[Finding] = []
    for p in np.flatnonzero(st.active_bucket >= 0).tolist():
        if start_h[p] < cfg.start_min_hours or starting[p] < cfg.start_min_share * total[p]:
            continue
        ns, name = str(ph.pods.namespace[p]), str(ph.pods.pod[p])
        row = per_pod.loc[(ns, name)]
        model = str(row[C.MODEL])
        gpus = float(row[C.POD_GPUS])
        active_ts = float(ph.bucket_ts[st.active_bucket[p]]) - views.inv.step_s
        share = starting[p] / total[p]
        started = float(st.started[p])
        since = f"from its start at {iso(started)} " if started == started else ""
        out.append(
            Finding(
                code=CODE,
                severity=WASTE(float(starting[p])),
                resource=Resource("Pod", ns, name, str(row[C.NODE]), gpus),
                message=(
                    f"Pod {ns}/{name} held {gpu_word(gpus)} ({short_model(model)}) for "
                    f"{start_h[p]:.1f} h {since}before its first sustained activity (from "
                    f"{iso(active_ts)}): {starting[p]:.1f} GPU-hours, {share * 100:.0f} % of "
                    "what it held in the window."
                ),
                impact=Impact(
                    gpu_hours=float(starting[p]), cost=float(starting[p]) * views.price(model)
                ),
                recommendation=(
                    f"Pre-pull its image on the GPU nodes and keep its model weights in a cache "
                    f"near them: each start of {ns}/{name} held {starting[p]:.1f} GPU-hours "
                    "before it worked."
                ),
                evidence={
                    "starting_hours": round(float(start_h[p]), 4),
                    "starting_gpu_hours": round(float(starting[p]), 4),
                    "held_gpu_hours": round(float(total[p]), 4),
                    "starting_share": round(float(share), 4),
                    "pod_started": iso(started) if started == started else None,
                    "first_sustained_bucket_start": iso(active_ts),
                    "resolution_s": views.inv.step_s,
                    "gpus": round(gpus, 4),
                    "gpu_model": model,
                    "threshold_activity": cfg.start_activity,
                    "threshold_sustained_buckets": int(cfg.start_sustained_buckets),
                    "threshold_hours": cfg.start_min_hours,
                    "threshold_share": cfg.start_min_share,
                },
            )
        )
    return out

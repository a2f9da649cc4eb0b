"""GPU021 oversized reservation: a whole GPU for a workload a MIG slice or a shared GPU fits.

What it finds
    Pods holding one whole GPU whose peak memory and activity fit a smaller MIG profile of that
    GPU model (or, on GPUs without MIG, half a shared GPU): a 6 GB model on an 80 GB H100 at a
    few percent activity.

Why it matters
    A whole H100 for a small model strands most of the card's memory and compute. MIG or
    time-slicing puts several such workloads on one card.

How it decides
    For each pod holding exactly one whole GPU (not a replica of a shared one) for at least
    `checks.oversized_min_hours` (default 24 h):
    - need = peak framebuffer use (`DCGM_FI_DEV_FB_USED` max) plus `checks.fb_headroom`
      (default 20 %);
    - the smallest MIG profile of the model (`docs/domain.md`) whose memory (a profile named
      `Ngb` holds about 0.95 N GiB) covers the need and whose compute share (slices / 7)
      covers the p95 engine activity of the pod's busiest hour (the largest hourly p95) with
      25 % to spare, and that is smaller than the whole GPU;
    - for models without MIG (L40S, L4, A10, T4): peak memory within half the card and the
      busiest hour's p95 activity at most 0.4 fit half a time-sliced GPU.
    The busiest hour, not the whole window: a slice sized to a week's p95 would starve the
    hours the work is busy (a daily training burst is under 5 % of a week), so the advice is
    conservative and holds for every hour. (It is also the figure an hourly recording rule
    keeps, exact however the window is read; a snapshot older than it holds the p95 over the
    window.)
    Impact: the GPU-hours freed, hours x (1 - the slice's share of the GPU), priced per model.
    Severity: medium from 24 freed GPU-hours, low below.

What to do
    Request the named MIG profile (`nvidia.com/mig-1g.10gb: 1` under the mixed strategy), or a
    time-sliced GPU, instead of `nvidia.com/gpu: 1`. A MIG profile can only be requested from
    nodes partitioned into MIG slices: when the pod's node pool offers none (no node of it
    advertises an `nvidia.com/mig-*` resource), the recommendation starts with repartitioning
    some of its nodes (the GPU Operator's MIG manager, label `nvidia.com/mig.config`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuaudit.checks.base import MODEST_WASTE, short_model
from gpuaudit.checks.contract import fraction, hours
from gpuaudit.checks.findings import Finding, Impact, Resource
from gpuaudit.domain import mig
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.attribution import KAI_METHODS

CODE = "GPU021"
TITLE = "Oversized reservation"
REQUIRES = (Capability.ACTIVITY, Capability.FRAMEBUFFER)
VIEWS = ("per_pod",)
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""

GIB_PER_NOMINAL_GB = 0.95
COMPUTE_SPARE = 1.25


@dataclass(frozen=True)
class Thresholds:
    oversized_min_hours: float = hours(24.0)
    """Shortest holding (hours) worth resizing."""
    fb_headroom: float = fraction(0.20)
    """Memory headroom over peak use a recommended MIG profile must leave."""


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    h = views.held
    # A replica of a shared GPU is not a whole GPU: it is already what this check recommends
    # (as is a KAI Scheduler fraction).
    h = h[
        (h[C.MIG_PROFILE] == "")
        & ~(h[C.REPLICAS] > 1)
        & ~h[C.ATTRIBUTION].isin(KAI_METHODS)
        & h[C.FB_USED_MAX].notna()
        & h[C.ACT_P95].notna()
    ]
    if h.empty:
        return []
    counts = h.groupby([C.NAMESPACE, C.POD])[C.SLOT].transform("nunique")
    single = h[counts == 1]
    single = single[~(single[C.HOURS].astype("float64") < cfg.oversized_min_hours)]
    pods = views.per_pod.set_index([C.NAMESPACE, C.POD])
    pools = _pools(views)
    out: list[Finding] = []
    for row in single.itertuples(index=False):
        hours = float(getattr(row, C.HOURS))
        if hours < cfg.oversized_min_hours:
            continue
        model = str(getattr(row, C.MODEL))
        peak = float(getattr(row, C.FB_USED_MAX))
        total = float(getattr(row, C.MEM_TOTAL_MIB) or 0.0)
        p95 = float(getattr(row, C.ACT_P95))
        need_gib = peak / 1024.0 * (1 + cfg.fb_headroom)
        whole = mig.total_slices(model)
        fit: str | None = None
        share = 1.0
        for p in mig.profiles_for(model):
            if p.slices >= whole:
                continue
            if p.memory_gb * GIB_PER_NOMINAL_GB >= need_gib and p.slices / whole >= (
                p95 * COMPUTE_SPARE
            ):
                fit, share = p.name, p.slices / whole
                break
        if fit is None and not mig.profiles_for(model) and total > 0:
            if peak * (1 + cfg.fb_headroom) <= total / 2 and p95 <= 0.4:
                fit, share = "a half of a time-sliced GPU", 0.5
        if fit is None:
            continue
        freed = hours * (1 - share)
        ns, pod = str(getattr(row, C.NAMESPACE)), str(getattr(row, C.POD))
        cost = freed * views.price(model)
        info = pods.loc[(ns, pod)]
        is_mig = not fit.startswith("a half")
        # An older snapshot's p95 is over the whole window (`Inventory.p95_of_window`).
        of = "the window" if views.inv.p95_of_window else "its busiest hour"
        what = f"a {fit} MIG slice" if is_mig else fit
        message = (
            f"Pod {ns}/{pod} held a whole {short_model(model)} for {hours:.0f} h but peaked at "
            f"{peak / 1024:.1f} GiB and {p95 * 100:.0f} % engine activity (p95 of {of}): "
            f"{what} fits it."
        )
        kind, owner = str(info[C.OWNER_KIND]), str(info[C.OWNER_NAME])
        target = f"{kind} {ns}/{owner}" if kind and owner else f"pod {ns}/{pod}"
        node = str(getattr(row, C.NODE))
        rec = (
            _mig_advice(fit, target, pools.get(node))
            if is_mig
            else f"Run {target} on a time-sliced GPU shared with another small workload"
        ) + f"; it frees {freed:,.0f} GPU-hours over this window."
        out.append(
            Finding(
                code=CODE,
                severity=MODEST_WASTE(freed),
                resource=Resource("Pod", ns, pod, node, 1.0),
                message=message,
                impact=Impact(gpu_hours=freed, cost=cost),
                recommendation=rec,
                evidence={
                    "hours_held": round(hours, 2),
                    "fb_used_max_mib": round(peak, 1),
                    "fb_total_mib": round(total, 1),
                    "activity_p95": round(p95, 6),
                    "p95_of": "the window" if views.inv.p95_of_window else "the busiest hour",
                    "fits": fit,
                    "share_of_gpu": round(share, 4),
                    "gpu_model": model,
                    "headroom": cfg.fb_headroom,
                },
            )
        )
    return out


def _pools(views: Views) -> dict[str, tuple[str, bool]]:
    """Node -> (its node pool, whether some node of the pool offers MIG slices)."""
    nodes = views.inv.nodes
    if nodes.empty:
        return {}
    names = nodes[C.NODE].astype(str).tolist()
    pool_of = nodes[C.POOL].fillna("").astype(str).tolist()
    mig = (nodes[C.MIG_CAPACITY].fillna(0).astype("float64") > 0).tolist()
    sliced = {p for p, m in zip(pool_of, mig, strict=True) if m}
    return {n: (p, p in sliced) for n, p in zip(names, pool_of, strict=True)}


def _mig_advice(fit: str, target: str, pool: tuple[str, bool] | None) -> str:
    """How to move `target` to the MIG profile `fit`, with the repartitioning step first when
    its node pool is not (or not known to be) partitioned into MIG slices."""
    ask = f"request `nvidia.com/mig-{fit}: 1` for {target} instead of a whole GPU"
    how = (
        f"with the GPU Operator, label them `nvidia.com/mig.config=all-{fit}` or a mixed "
        "layout holding it, under the mixed MIG strategy"
    )
    if pool is None or not pool[0]:
        return (
            f"On nodes partitioned into MIG slices, {ask} (if none are, repartition some first: "
            f"{how})"
        )
    name, sliced = pool
    if sliced:
        return f"{ask[0].upper()}{ask[1:]} (node pool {name} offers MIG slices)"
    return (
        f"Node pool {name} is not partitioned into MIG slices: repartition some of its nodes "
        f"first ({how}), then {ask}"
    )

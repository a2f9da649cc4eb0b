"""Fleet summary figures, each traceable to the snapshot's raw answers."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gpuaudit.audit.ledger import ledger
from gpuaudit.inventory import Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.derived import held_hours, series_sum
from gpuaudit.inventory.prom import cluster_of

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Summary:
    """The fleet at a glance."""

    gpus_total: int
    """Physical GPUs: per node, the larger of the GPUs DCGM reported and the node's GPU count
    (its `nvidia.com/gpu` capacity over its replicas where it shares its GPUs, over its GPUs'
    split count where HAMi shares them)."""
    gpus_allocated_now: float
    """GPU equivalents held by pods in the last bucket of the window."""
    gpus_allocated_avg: float
    """Held GPU-hours divided by the window's hours."""
    allocation_rate: float | None
    """`gpus_allocated_avg / gpus_total`."""
    mean_activity: float | None
    """Mean engine activity over allocated GPU-hours (ratio): every activity sample of a held
    GPU weighted by the time it stands for (its scrape interval) and the GPU fraction."""
    allocated_gpu_hours: float
    """GPU-hours held by pods: measured ones (each holding's activity samples x the scrape
    interval x its fraction of a GPU) plus those the Kubernetes API says pods held where no
    DCGM series names them (the attribution ledger's unattributed side, `gpuaudit.audit.ledger`)."""
    idle_gpu_hours: float
    """Allocated GPU-hours held in buckets whose mean activity was below the idle threshold
    (the held time in those buckets, not whole buckets)."""
    wasted_cost: float
    """`idle_gpu_hours` priced per GPU model."""
    window_hours: float
    currency: str
    findings_gpu_hours: float = 0.0
    """The findings' impact in GPU-hours with no GPU-hour counted twice: the sum over the
    findings marked `counted_in_total` (of findings whose GPU-hours may overlap, only the
    largest counts; see `gpuaudit.audit.coherence`)."""
    findings_cost: float = 0.0
    """`findings_gpu_hours` at the configured prices."""
    scrape_interval_s: float | None = None
    """The scrape interval held time is counted in (detected from the data); None unknown."""
    held_time: str = "samples"
    """`samples`: held time is samples x the scrape interval; `buckets`: some of it is
    counted in whole buckets (older snapshots, or no interval detected), an approximation."""

    def rounded(self) -> Summary:
        """The summary as reports give it: GPUs, GPU-hours, costs and the window to 2 decimal
        places, ratios to 4, the scrape interval to 3. The JSON report writes these figures,
        and the comparison with an earlier report (`gpuaudit.audit.compare`) compares them."""

        def r(x: float | None, n: int) -> float | None:
            return None if x is None else round(x, n)

        return replace(
            self,
            gpus_allocated_now=round(self.gpus_allocated_now, 2),
            gpus_allocated_avg=round(self.gpus_allocated_avg, 2),
            allocation_rate=r(self.allocation_rate, 4),
            mean_activity=r(self.mean_activity, 4),
            allocated_gpu_hours=round(self.allocated_gpu_hours, 2),
            idle_gpu_hours=round(self.idle_gpu_hours, 2),
            wasted_cost=round(self.wasted_cost, 2),
            window_hours=round(self.window_hours, 2),
            findings_gpu_hours=round(self.findings_gpu_hours, 2),
            findings_cost=round(self.findings_cost, 2),
            scrape_interval_s=r(self.scrape_interval_s, 3),
        )


def gpus_per_node(views: Views, h: pd.DataFrame, nodes: pd.DataFrame) -> dict[str, float]:
    """Physical GPUs per node of holdings `h` and node table `nodes`: the larger of the GPUs
    DCGM reported and the node's GPU count (`Summary.gpus_total` is their sum, rounded)."""
    per_node: dict[str, float] = {}
    if not h.empty:
        phys = h[h[C.UUID] != ""].groupby(C.NODE)[C.UUID].nunique()
        no_uuid = h[h[C.UUID] == ""].groupby(C.NODE)[C.SLOT].nunique()
        for counts in (phys, no_uuid):
            for node, n in counts.to_dict().items():
                per_node[str(node)] = per_node.get(str(node), 0) + float(n)
    shared = views.sharing
    for node, count, cap, split in zip(
        nodes[C.NODE], nodes[C.GPU_COUNT], nodes[C.CAPACITY_GPU], nodes[C.GPU_REPLICAS], strict=True
    ):
        # A time-sliced node advertises each GPU once per replica, a node HAMi shares once per
        # split (`GPU_REPLICAS`).
        reps = max(shared[node].replicas if node in shared else 1, float(split or 1))
        advertised = max(float(count), float(cap) / reps)
        per_node[str(node)] = max(per_node.get(str(node), 0.0), advertised)
    return per_node


def summarise(
    views: Views, idle_activity: float, currency: str, cluster: str | None = None
) -> Summary:
    """The fleet figures of the shared views' inventory; GPU-hours count as idle in buckets
    whose mean activity is below `idle_activity`. With `cluster`, the same figures of that one
    cluster of a scan of every cluster: its holdings and nodes only, so that the clusters'
    sums are the fleet's (the window and scrape interval stay the fleet's)."""
    import numpy as np

    inv = views.inv
    h = inv.holdings
    hr = inv.hourly
    mine = np.ones(len(h), dtype=bool)
    nodes = inv.nodes
    if cluster is not None:
        mine = (h[C.CLUSTER] == cluster).to_numpy(dtype=bool) if not h.empty else mine
        h = h[mine]
        ours = np.array([cluster_of(str(n)) == cluster for n in nodes[C.NODE]], dtype=bool)
        nodes = nodes[ours]
    total = int(round(sum(gpus_per_node(views, h, nodes).values())))

    held = h[h[C.HELD]] if not h.empty else h
    if cluster is None:
        allocated = ledger(views).allocated_gpu_hours
    else:
        # A scan of every cluster reads no Kubernetes side: the measured hours are all there is.
        allocated = float(held[C.GPU_HOURS].sum()) if not held.empty else 0.0
    now = 0.0
    mean_act: float | None = None
    idle = 0.0
    cost = 0.0
    if not held.empty and not hr.empty:
        # The held hourly rows as arrays, holding attributes looked up by holding row; sums
        # run over the rows in table order, as over the joined frame.
        rows = views.held_rows
        holding, hrows = rows.holding, rows.rows
        if cluster is not None:
            keep = mine[holding]
            holding, hrows = holding[keep], hrows[keep]
        all_h = inv.holdings
        frac_of = all_h[C.FRACTION].to_numpy(dtype="float64")
        act = hr[C.ACT].to_numpy(dtype="float64")[hrows]
        # Each row weighs the GPU-hours held in it: its samples x the scrape interval.
        weights = held_hours(inv)[hrows]
        weights *= frac_of[holding]
        # Rows of unknown activity (MIG instances with GPU_UTIL only) weigh nothing in the mean.
        known = np.isfinite(act)
        w_known = weights[known]
        if series_sum(w_known) > 0:
            a_known = act[known]
            a_known *= w_known
            mean_act = series_sum(a_known) / series_sum(w_known)
            del a_known
        del w_known, known
        at_end = hr[C.TS].to_numpy(dtype="float64")[hrows] >= inv.window_end - 1e-6
        now = series_sum(frac_of[holding[at_end]])
        del at_end
        is_idle = act < idle_activity
        idle = series_sum(weights[is_idle])
        idle_models = all_h[C.MODEL].take(np.unique(holding[is_idle]))
        unit = {m: views.price(str(m)) for m in idle_models.unique()}
        price = all_h[C.MODEL].map(unit).to_numpy(dtype="float64", na_value=np.nan)
        cost = series_sum(weights[is_idle] * price[holding[is_idle]])
    hours = inv.window_hours
    avg = allocated / hours if hours > 0 else 0.0
    return Summary(
        gpus_total=total,
        gpus_allocated_now=now,
        gpus_allocated_avg=avg,
        allocation_rate=(avg / total) if total else None,
        mean_activity=mean_act,
        allocated_gpu_hours=allocated,
        idle_gpu_hours=idle,
        wasted_cost=cost,
        window_hours=hours,
        currency=currency,
        scrape_interval_s=inv.scrape_interval_s,
        held_time="buckets" if inv.held_time_rounded else "samples",
    )

"""GPU040 looks busy, does no work: GPU utilisation high while the SMs sit idle.

What it finds
    GPUs whose `DCGM_FI_DEV_GPU_UTIL` stays high while the profiling metrics say almost nothing
    runs on the streaming multiprocessors: a hung NCCL collective, a kernel spinning on a
    flag, a process waiting on a dead peer with a kernel still resident.

Why it matters
    GPU_UTIL only measures the share of time any kernel was resident. Dashboards show these
    cards as busy, so nobody looks, while the job makes no progress.

How it decides
    Per GPU and hourly bucket: GPU_UTIL at or above `checks.busy_util` (default 0.80, i.e.
    80 %) while SM activity (`DCGM_FI_PROF_SM_ACTIVE`, else `DCGM_FI_PROF_GR_ENGINE_ACTIVE`)
    stays below `checks.busy_low_activity` (default 0.20). A pod is reported when that holds
    for at least `checks.busy_min_hours` (default 3) hours on one of its GPUs. Tensor-pipe
    activity, where exported, is shown in the evidence. Skipped, with the reason, when the
    profiling metrics are absent: GPU_UTIL alone cannot tell busy from stuck.
    Hours are those held in those buckets (samples x the scrape interval). Impact: the
    GPU-hours held in those buckets, priced per model. Severity: high from 24
    GPU-hours, medium below.

What to do
    Look at the job's logs and stacks (`py-spy dump`, NCCL debug logs) for a hang. Set
    collective timeouts (`NCCL_TIMEOUT`, the `timeout` of `torch.distributed.init_process_group`)
    and a liveness probe on training progress, so a stuck job fails and frees its GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuaudit.checks.base import STUCK_WORK, gpu_word, short_model
from gpuaudit.checks.contract import fraction, hours
from gpuaudit.checks.findings import Finding, Impact, Resource
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.arrays import slices
from gpuaudit.inventory.derived import held_hours

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

CODE = "GPU040"
TITLE = "Looks busy, does no work"
REQUIRES = (Capability.PROFILING, Capability.GPU_UTIL)
VIEWS = ()
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


@dataclass(frozen=True)
class Thresholds:
    busy_util: float = fraction(0.80)
    """GPU_UTIL (ratio) from which a card looks busy."""
    busy_low_activity: float = fraction(0.20)
    """SM (else engine) activity below which a busy-looking card does no work."""
    busy_min_hours: float = hours(3.0)
    """Hours a card must look busy while doing no work."""


def _hits(views: Views, busy_util: float, low_activity: float) -> pd.DataFrame:
    """Held hourly rows with GPU_UTIL at least `busy_util` and SM (else engine) activity below
    `low_activity`, on holdings whose activity is not GPU_UTIL itself, with the holding's
    columns and the activity used (`_work`). The test runs on arrays; holding columns are
    attached only to the rows that pass, which are few."""
    rows = views.held_rows
    h, hr = views.inv.holdings, views.inv.hourly
    profiled = (h[C.ACT_SOURCE] != "DCGM_FI_DEV_GPU_UTIL").to_numpy(dtype=bool)
    util_col = hr[C.UTIL].to_numpy(dtype="float64")
    sm_col = hr[C.SM].to_numpy(dtype="float64")
    act_col = hr[C.ACT].to_numpy(dtype="float64")

    def work_at(r: npt.NDArray[np.signedinteger[Any]]) -> npt.NDArray[np.float64]:
        sm = sm_col[r]
        out: npt.NDArray[np.float64] = np.where(np.isnan(sm), act_col[r], sm)
        return out

    # A slice of rows at a time: the test is row by row, and few rows pass.
    hits = [np.zeros(0, dtype=np.intp)]
    for sl in slices(len(rows.rows)):
        r = rows.rows[sl]
        ok = profiled[rows.holding[sl]] & (util_col[r] >= busy_util)
        ok &= work_at(r) < low_activity
        hits.append(np.flatnonzero(ok) + sl.start)
    hit = np.concatenate(hits)
    at, pos = rows.rows[hit], rows.holding[hit]
    out = hr.take(at).reset_index(drop=True)
    for col in (C.NAMESPACE, C.POD, C.FRACTION, C.MODEL, C.NODE, C.ACT_SOURCE):
        out[col] = h[col].take(pos).to_numpy()
    out["_work"] = work_at(at)
    out["_held"] = held_hours(views.inv)[at]
    result: pd.DataFrame = out
    return result


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    hit = _hits(views, cfg.busy_util, cfg.busy_low_activity)
    if hit.empty:
        return []
    out: list[Finding] = []
    for (ns, pod), grp in hit.groupby([C.NAMESPACE, C.POD], sort=True):
        per_gpu = grp.groupby(C.HOLDING)["_held"].sum()
        hours = float(per_gpu.max())
        if hours < cfg.busy_min_hours:
            continue
        gpu_hours = float((grp[C.FRACTION] * grp["_held"]).sum())
        gpus = float(grp.drop_duplicates(C.HOLDING)[C.FRACTION].sum())
        model = str(grp[C.MODEL].iloc[0])
        util = float(grp[C.UTIL].mean())
        sm = float(grp["_work"].mean())
        tensor = grp[C.TENSOR].dropna()
        metric = "SM activity" if grp[C.SM].notna().any() else "engine activity"
        message = (
            f"Pod {ns}/{pod} kept {gpu_word(gpus)} ({short_model(model)}) at {util * 100:.0f} % "
            f"GPU utilisation but {sm * 100:.1f} % {metric} for {hours:.0f} h: busy-looking, "
            "doing no work."
        )
        out.append(
            Finding(
                code=CODE,
                severity=STUCK_WORK(gpu_hours),
                resource=Resource("Pod", str(ns), str(pod), str(grp[C.NODE].iloc[0]), gpus),
                message=message,
                impact=Impact(gpu_hours=gpu_hours, cost=gpu_hours * views.price(model)),
                recommendation=(
                    "Check it for a hung collective or spin loop (py-spy dump, NCCL_DEBUG=INFO); "
                    "set NCCL/torch.distributed timeouts and a liveness probe on training "
                    "progress so a stuck run fails and frees its GPUs."
                ),
                evidence={
                    "hours": round(hours, 2),
                    "mean_gpu_util": round(util, 4),
                    "mean_sm_or_engine_activity": round(sm, 6),
                    "activity_metric": metric,
                    "mean_tensor_activity": round(float(tensor.mean()), 6) if len(tensor) else None,
                    "gpus": round(gpus, 4),
                    "gpu_model": model,
                    "threshold_util": cfg.busy_util,
                    "threshold_activity": cfg.busy_low_activity,
                    "threshold_hours": cfg.busy_min_hours,
                },
            )
        )
    return out

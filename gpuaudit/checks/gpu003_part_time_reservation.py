"""GPU003 part-time reservation: GPUs held all day for work that runs a few hours a day.

What it finds
    Long-running holders whose activity falls in a recurring daily window, idle the rest of the
    day: a nightly batch busy 01:00-04:00 that keeps its card for the other 21 hours, a
    reporting job run from a Deployment with a sleep loop.

Why it matters
    A card held 24 hours for 3 hours of work wastes seven eighths of its cost, every day, and
    looks "used" to anyone who only checks allocation.

How it decides
    For each pod that held GPUs for at least `checks.part_time_min_days` (default 3) days, the
    hourly mean activity of its GPUs is folded by hour of day (UTC):
    - an hour of day is active when its activity reached `checks.active_activity` (default
      0.20) on at least `checks.part_time_recurrence` (default 80 %) of the days held;
    - the active hours number between 1 and `checks.part_time_max_hours` (default 8);
    - outside them the mean activity is below `checks.idle_activity` (default 0.05).
    Impact: the GPU-hours held outside the daily window, priced per GPU model. Severity:
    medium from 24 GPU-hours, low below.

What to do
    Run the work as a CronJob scheduled at the start of its window that requests the GPU only
    while it runs (with `activeDeadlineSeconds`), and delete the long-running holder.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

from gpuaudit.checks.base import gpu_word, short_model
from gpuaudit.findings import Finding, Impact, Resource, Severity
from gpuaudit.inventory import Inventory, views
from gpuaudit.inventory import columns as C
from gpuaudit.settings import Settings

if TYPE_CHECKING:
    import pandas as pd

CODE = "GPU003"
TITLE = "Part-time reservation"
REQUIRES = ("activity",)


def _ranges(hours: list[int]) -> list[tuple[int, int]]:
    """Hours of day -> contiguous [start, end) ranges, joined across midnight."""
    hs = sorted(set(hours))
    ranges: list[list[int]] = []
    for h in hs:
        if ranges and ranges[-1][1] == h:
            ranges[-1][1] = h + 1
        else:
            ranges.append([h, h + 1])
    if len(ranges) > 1 and ranges[0][0] == 0 and ranges[-1][1] == 24:
        first = ranges.pop(0)
        ranges[-1][1] = 24 + first[1]
    return [(a, b) for a, b in ranges]


def _fmt(r: tuple[int, int]) -> str:
    return f"{r[0] % 24:02d}:00-{r[1] % 24:02d}:00"


def _candidates(ph: pd.DataFrame, settings: Settings, bucket_h: float) -> pd.DataFrame:
    """Rows of the pods that pass the rule, found with grouped arithmetic rather than a Python
    loop per pod; `run` then describes each of them."""
    import numpy as np

    cfg = settings.checks
    keys = [C.NAMESPACE, C.POD]
    size = ph.groupby(keys)[C.TS].transform("size") * bucket_h
    ph = ph[size >= cfg.part_time_min_days * 24]
    if ph.empty:
        none: pd.DataFrame = ph
        return none
    hod = ((ph[C.TS].to_numpy() - 3600) // 3600 % 24).astype(np.int64)
    work = ph[keys].assign(_hod=hod, _act=(ph[C.ACT] >= cfg.active_activity).to_numpy())
    per_hod = work.groupby([*keys, "_hod"])["_act"].agg(["size", "sum"])
    per_hod["_win"] = per_hod["sum"] / per_hod["size"] >= cfg.part_time_recurrence
    n_win = per_hod.groupby(level=[0, 1])["_win"].sum()
    ok_n = n_win[(n_win >= 1) & (n_win <= cfg.part_time_max_hours)]
    if ok_n.empty:
        nothing: pd.DataFrame = ph.iloc[0:0]
        return nothing
    win = per_hod["_win"].rename("_w").reset_index()
    joined = work.assign(_a=ph[C.ACT].to_numpy()).merge(win, on=[*keys, "_hod"], how="left")
    outside = joined[~joined["_w"].astype(bool)]
    mean_out = outside.groupby(keys)["_a"].mean()
    good = mean_out[mean_out < cfg.idle_activity].index.intersection(ok_n.index)
    idx = ph.set_index(keys).index
    out: pd.DataFrame = ph[idx.isin(good)]
    return out


def run(inv: Inventory, settings: Settings) -> list[Finding]:
    cfg = settings.checks
    bucket_h = inv.step_s / 3600.0
    if abs(bucket_h - 1.0) > 1e-9:
        return []  # the daily profile needs hourly buckets
    ph = views.pod_hourly(inv)
    if ph.empty:
        return []
    ph = _candidates(ph, settings, bucket_h)
    if ph.empty:
        return []
    pods = views.per_pod(inv, settings.prices).set_index([C.NAMESPACE, C.POD])
    out: list[Finding] = []
    for (ns, pod), grp in ph.groupby([C.NAMESPACE, C.POD], sort=True):
        held_h = len(grp) * bucket_h
        if held_h < cfg.part_time_min_days * 24:
            continue
        # A bucket ending at t covers (t - 1 h, t]: its hour of day is that of t - 1 h.
        hod = [datetime.fromtimestamp(float(t) - 3600, timezone.utc).hour for t in grp[C.TS]]
        acts = grp[C.ACT].tolist()
        days_seen: dict[int, int] = {}
        days_active: dict[int, int] = {}
        for h, a in zip(hod, acts, strict=True):
            days_seen[h] = days_seen.get(h, 0) + 1
            if a >= cfg.active_activity:
                days_active[h] = days_active.get(h, 0) + 1
        window = [
            h
            for h in range(24)
            if days_seen.get(h) and days_active.get(h, 0) / days_seen[h] >= cfg.part_time_recurrence
        ]
        if not 1 <= len(window) <= cfg.part_time_max_hours:
            continue
        outside = [a for h, a in zip(hod, acts, strict=True) if h not in window]
        if not outside:
            continue
        outside_mean = sum(outside) / len(outside)
        if outside_mean >= cfg.idle_activity:
            continue
        gpus = float(grp["gpus"].max())
        info = pods.loc[(ns, pod)]
        model = str(info[C.MODEL])
        gpu_hours = len(outside) * bucket_h * gpus
        cost = gpu_hours * views.model_price(model, settings.prices)
        spans = _ranges(window)
        when = ", ".join(_fmt(r) for r in spans)
        first = spans[0][0] % 24
        message = (
            f"Pod {ns}/{pod} held {gpu_word(gpus)} ({short_model(model)}) around the clock for "
            f"{held_h / 24:.1f} days but worked only {when} UTC; it was idle "
            f"({outside_mean * 100:.1f} % activity) the other {24 - len(window)} hours a day."
        )
        kind, owner = str(info[C.OWNER_KIND]), str(info[C.OWNER_NAME])
        target = f"{kind} {ns}/{owner}" if kind and owner else f"pod {ns}/{pod}"
        rec = (
            f"Replace {target} with a CronJob scheduled `0 {first} * * *` that requests the GPU "
            f"only for its ~{len(window)} h run (set activeDeadlineSeconds), freeing "
            f"{gpu_hours:,.0f} GPU-hours over this window."
        )
        out.append(
            Finding(
                code=CODE,
                severity=Severity.MEDIUM if gpu_hours >= 24 else Severity.LOW,
                resource=Resource("Pod", str(ns), str(pod), str(info[C.NODE]), gpus),
                message=message,
                impact=Impact(gpu_hours=gpu_hours, cost=cost),
                recommendation=rec,
                evidence={
                    "active_hours_utc": window,
                    "days_held": round(held_h / 24, 2),
                    "outside_mean_activity": round(outside_mean, 6),
                    "gpus": round(gpus, 4),
                    "gpu_model": model,
                    "threshold_active_activity": cfg.active_activity,
                    "threshold_recurrence": cfg.part_time_recurrence,
                    "threshold_max_hours": cfg.part_time_max_hours,
                },
            )
        )
    return out

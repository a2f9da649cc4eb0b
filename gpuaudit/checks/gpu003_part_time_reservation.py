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
    With `checks.activity_noise_floor` above 0 (default 0, off), an hour whose activity was
    measured under it counts as 0 (hours without a value stay out of every figure).
    Second signals: the message and evidence state the pod's
    GPUs' mean power draw (W, and as a share of the power limit or board power) and the
    framebuffer in use. The power mean covers the whole holding, the active window included,
    so it cannot speak for the idle hours: the confidence is medium.
    Days held are the hours its GPUs' samples cover (samples x the scrape interval), not the
    buckets they fall in. Impact: the GPU-hours held outside the daily window, priced per GPU
    model. Severity: medium from 24 GPU-hours, low below.

What to do
    Run the work as a CronJob scheduled at the start of its window that requests the GPU only
    while it runs (with `activeDeadlineSeconds`), and delete the long-running holder.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import numpy.typing as npt

from gpuaudit.checks import idle
from gpuaudit.checks.base import MODEST_WASTE, held_text, shared_note, short_model
from gpuaudit.checks.contract import days, fraction, hours
from gpuaudit.checks.findings import Confidence, Finding, Impact, Resource
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.derived import edge, sorted_sums
from gpuaudit.inventory.views import PodHours

CODE = "GPU003"
TITLE = "Part-time reservation"
REQUIRES = (Capability.ACTIVITY,)
VIEWS = ("pod_hours", "per_pod")
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


@dataclass(frozen=True)
class Thresholds:
    idle_activity: float = fraction(0.05)
    """Mean engine activity (ratio) below which a GPU counts as idle."""
    active_activity: float = fraction(0.20)
    """Mean engine activity (ratio) from which an hour counts as active."""
    part_time_min_days: float = days(3.0)
    """Days a holder must have held its GPUs to show a daily pattern."""
    part_time_max_hours: float = hours(8.0)
    """Longest daily active window (hours) that still counts as part-time."""
    part_time_recurrence: float = fraction(0.8)
    """Share of days on which the active window must recur."""
    activity_noise_floor: float = fraction(0.0)
    """Hourly mean engine activity (ratio) under which a measured bucket counts as 0 activity
    (background noise); 0 turns it off. Buckets without data never count as idle."""


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


def _candidates(
    ph: PodHours, all_act: npt.NDArray[np.float64], cfg: Thresholds
) -> list[tuple[int, int, int]]:
    """(pod number, start, end) entry spans of the pods that pass the rule, found with array
    arithmetic rather than a Python loop per pod; `run` then describes each of them. Figures
    made from sums (hours held, activities) meet their thresholds at the thresholds' `edge`,
    here and in `run`, so both find the same pods whatever order they sum in."""
    starts, ends = ph.spans()
    size = ends - starts
    if len(starts) == 0:
        return []
    is_long = np.add.reduceat(ph.held_h(), starts) >= edge(cfg.part_time_min_days * 24)
    long = np.flatnonzero(is_long)
    if len(long) == 0:
        return []
    # Row-long arrays in 4 bytes where every cell number fits, and no copy of the entries
    # where every pod is long.
    small = np.int32 if len(ph.pod) * 24 < 2**31 else np.intp
    entries: slice | npt.NDArray[np.intp] = slice(None)
    if len(long) < len(starts):
        entries = np.flatnonzero(np.repeat(is_long, size))
    local = np.repeat(np.arange(len(long), dtype=small), size[long])
    hod_of_bucket = ((ph.bucket_ts - 3600) // 3600 % 24).astype(small)
    act = all_act[entries]
    cell = local * 24
    cell += hod_of_bucket[ph.bucket[entries]]
    del entries
    cells = len(long) * 24
    seen = np.bincount(cell, minlength=cells)
    active = np.bincount(cell[act >= edge(cfg.active_activity)], minlength=cells)
    with np.errstate(divide="ignore", invalid="ignore"):
        win = (seen > 0) & (active / seen >= cfg.part_time_recurrence)
    n_win = win.reshape(len(long), 24).sum(axis=1)
    ok_n = (n_win >= 1) & (n_win <= cfg.part_time_max_hours)
    # The mean activity outside the window, hours without a value left out.
    out_rows = np.flatnonzero(~win[cell])
    del cell
    out_pod = local[out_rows]
    del local
    out_act = act[out_rows]
    del act, out_rows
    mean = np.full(len(long), np.nan)
    if len(out_pod):
        first = np.flatnonzero(np.r_[True, out_pod[1:] != out_pod[:-1]])
        sums = sorted_sums(out_act, first)
        counts = np.bincount(out_pod[~np.isnan(out_act)], minlength=len(long))[out_pod[first]]
        with np.errstate(divide="ignore", invalid="ignore"):
            mean[out_pod[first]] = np.where(counts > 0, sums / counts, np.nan)
    with np.errstate(invalid="ignore"):
        good = np.flatnonzero(ok_n & (mean < edge(cfg.idle_activity)))
    chosen = long[good]
    return list(
        zip(
            ph.pod[starts[chosen]].tolist(),
            starts[chosen].tolist(),
            ends[chosen].tolist(),
            strict=True,
        )
    )


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    inv = views.inv
    bucket_h = inv.step_s / 3600.0
    if abs(bucket_h - 1.0) > 1e-9:
        return []  # the daily profile needs hourly buckets
    ph = views.pod_hours
    if len(ph.pod) == 0:
        return []
    all_act = idle.floored(ph.act, cfg.activity_noise_floor)
    candidates = _candidates(ph, all_act, cfg)
    if not candidates:
        return []
    pods = views.per_pod.set_index([C.NAMESPACE, C.POD])
    signals = idle.pod_signals(views, whole_holding=False)
    # A bucket ending at t covers (t - 1 h, t]: its hour of day is that of t - 1 h.
    hour_of = [datetime.fromtimestamp(float(t) - 3600, timezone.utc).hour for t in ph.bucket_ts]
    out: list[Finding] = []
    for number, start, stop in candidates:
        ns, pod = str(ph.pods.namespace[number]), str(ph.pods.pod[number])
        held = ph.held_h(slice(start, stop))
        held_h = float(held.sum())
        if held_h < edge(cfg.part_time_min_days * 24):
            continue
        hod = [hour_of[b] for b in ph.bucket[start:stop].tolist()]
        acts = all_act[start:stop].tolist()
        days_seen: dict[int, int] = {}
        days_active: dict[int, int] = {}
        for h, a in zip(hod, acts, strict=True):
            days_seen[h] = days_seen.get(h, 0) + 1
            if a >= edge(cfg.active_activity):
                days_active[h] = days_active.get(h, 0) + 1
        window = [
            h
            for h in range(24)
            if days_seen.get(h) and days_active.get(h, 0) / days_seen[h] >= cfg.part_time_recurrence
        ]
        if not 1 <= len(window) <= cfg.part_time_max_hours:
            continue
        at = [i for i, h in enumerate(hod) if h not in window]
        outside = [acts[i] for i in at if acts[i] == acts[i]]  # hours without a value: out
        if not outside:
            continue
        outside_mean = sum(outside) / len(outside)
        if outside_mean >= edge(cfg.idle_activity):
            continue
        gpus = float(ph.gpus[start:stop].max())
        info = pods.loc[(ns, pod)]
        model = str(info[C.MODEL])
        gpu_hours = float(ph.gpu_h[start:stop][at].sum())
        cost = gpu_hours * views.price(model)
        spans = _ranges(window)
        when = ", ".join(_fmt(r) for r in spans)
        first = spans[0][0] % 24
        replicas = float(info[C.REPLICAS] or 1)
        message = (
            f"Pod {ns}/{pod} held {held_text(gpus, short_model(model), replicas)} around the "
            f"clock for {held_h / 24:.1f} days but worked only {when} UTC; it was idle "
            f"({outside_mean * 100:.1f} % activity) the other {24 - len(window)} hours a day."
            f"{shared_note(replicas)}"
        )
        sig = signals.get((ns, pod))
        if sig is not None:
            message += " " + sig.sentence(short_model(model), None)
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
                severity=MODEST_WASTE(gpu_hours),
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

"""GPU071 throttled GPUs: busy work slowed by the card, its power limit or its cooling.

What it finds
    Pods whose GPUs spent a share of the time they held them with their clocks held down by
    the power limit or by heat, while busy: the busy GPU-hours that ran slower than the card
    can run, with the likely cause (the power cap, cooling, or a sick card).

Why it matters
    A throttled GPU looks busy and healthy on a utilisation dashboard, yet the job runs at a
    fraction of the speed it was sized and paid for, and in a gang every peer waits for the
    slowest card. Nothing inside the job says why it got slower.

How it decides
    DCGM counts the time a GPU's clocks were held down, by cause, in cumulative counters:
    `DCGM_FI_DEV_POWER_VIOLATION` (the power limit) and `DCGM_FI_DEV_THERMAL_VIOLATION`
    (thermal limits), in ns (DCGM's current `dcgm_fields.h` and dcgm-exporter's CSV; older
    headers said usec). Both are commented out in dcgm-exporter's default counters CSV
    (`etc/default-counters.csv`) and in `etc/dcp-metrics-included.csv`: add
        DCGM_FI_DEV_POWER_VIOLATION,   counter, Throttling duration (power) (in ns).
        DCGM_FI_DEV_THERMAL_VIOLATION, counter, Throttling duration (thermal) (in ns).
    to the exporter's CSV. `DCGM_FI_DEV_SM_CLOCK` (in the default CSV) and
    `DCGM_FI_DEV_MAX_SM_CLOCK` (not in it; add
        DCGM_FI_DEV_MAX_SM_CLOCK,      gauge,   Maximum supported SM clock for the device.
    to compare the clock with the card's maximum) are shown, where exported: the most throttled
    GPU's mean SM clock against its maximum in the message and the evidence, each GPU's in the
    evidence; they decide nothing (a clock below the maximum is also an idle card's). The
    clock event reasons bitmask (`DCGM_FI_DEV_CLOCKS_EVENT_REASONS`, formerly
    `DCGM_FI_DEV_CLOCK_THROTTLE_REASONS`: 0x4 SW power cap, 0x8 HW slowdown, 0x20 SW thermal,
    0x40 HW thermal, 0x80 HW power brake) and dcgm-exporter's `DCGM_EXP_CLOCK_EVENTS_COUNT`
    are not read: a gauge sampled at each scrape sees only the instant, where the violation
    counters add up every nanosecond.
    Per holding: the counters' `increase` in each hourly bucket, added up over the window, while
    the pod held the GPU; the throttled share is the longer of the two times over the held time
    (the causes can overlap), at most 1; the busy GPU-hours lost are the holding's busy
    GPU-hours (mean engine activity x GPU-hours) times that share, never more than its busy
    GPU-hours. A pod is reported when one of its GPUs was throttled for at least
    `checks.throttle_min_share` (default 0.10) of its held time and its GPUs lost at least
    `checks.throttle_min_lost_hours` (default 1) busy GPU-hours. The cause: a sick card where
    its GPU also reported XID errors or memory faults (GPU070 reports it, and its action comes
    first); else the power cap where power
    violations are the longer; else cooling. Impact: the busy GPU-hours lost, priced per GPU
    model; severity medium from 24, low below. Skipped, with the reason, when neither counter
    was collected: unmeasured throttling is never read as none. Where no GPU-health series were
    read (no XID, ECC or row-remap metric), the message says a sick card is not ruled out, and
    the evidence's `gpu_health_read` is false.

What to do
    Power cap: read the limit in force (`nvidia-smi -q -d POWER,PERFORMANCE`); a limit set
    below the board's default (`nvidia-smi -pl`, a node power policy) is raised back where the
    rack's power budget allows. Cooling: check the node's fans, airflow and inlet temperature
    (`nvidia-smi -q -d TEMPERATURE,PERFORMANCE`) and move the work elsewhere meanwhile. A sick
    card: follow GPU070's action for that GPU first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gpuaudit.checks.base import MODEST_WASTE, gpu_word, short_model
from gpuaudit.checks.contract import fraction, hours
from gpuaudit.checks.findings import Finding, Impact, Resource
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C

CODE = "GPU071"
TITLE = "Throttled GPUs"
REQUIRES = (Capability.THROTTLING, Capability.ACTIVITY)
VIEWS = ()
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


@dataclass(frozen=True)
class Thresholds:
    throttle_min_share: float = fraction(0.10)
    """Share of its held time a GPU must have been throttled."""
    throttle_min_lost_hours: float = hours(1.0)
    """Busy GPU-hours a pod's GPUs must have lost to throttling."""


POWER = "the power cap"
COOLING = "cooling"
SICK = "a sick card"


def _sick(row: pd.Series, counted: bool) -> bool:
    """Whether the holding's GPU reported what GPU070 reports: an XID event (any code seen
    where events were not counted; a code the gauge only carried over is stale), a double-bit
    ECC error, a failed or pending row remap, or rows remapped with no pending flag to say they
    are in effect."""
    xid = bool(str(row[C.XID_EVENTS] if counted else row[C.XID_CODES]))
    mem = [row[c] for c in (C.ECC_DBE_MAX, C.ECC_DBE_AGG_MAX, C.REMAP_FAILURE_MAX)]
    pending = row[C.REMAP_PENDING_MAX]
    remapped = row[C.REMAP_UNCORR_MAX]
    return (
        xid
        or any(v > 0 for v in mem if not pd.isna(v))
        or (not pd.isna(pending) and pending > 0)
        or (not pd.isna(remapped) and remapped > 0 and pd.isna(pending))
    )


def _seconds(grp: pd.DataFrame, col: str) -> float:
    vals = grp[col].dropna()
    return float(vals.sum()) if len(vals) else float("nan")


def _cause(worst: pd.Series, counted: bool) -> str:
    if _sick(worst, counted):
        return SICK
    power = worst[C.POWER_VIOLATION_S]
    thermal = worst[C.THERMAL_VIOLATION_S]
    if pd.isna(thermal) or (not pd.isna(power) and power >= thermal):
        return POWER
    return COOLING


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    h = views.held
    if h.empty:
        return []
    h = h[h[C.THROTTLED_SHARE].notna()]
    out: list[Finding] = []
    counted = Capability.XID_EVENTS in views.inv.capabilities
    health = Capability.GPU_HEALTH in views.inv.capabilities
    for (ns, pod), grp in h.groupby([C.NAMESPACE, C.POD], sort=True):
        lost = float(grp[C.THROTTLED_LOST].fillna(0.0).sum())
        top = float(grp[C.THROTTLED_SHARE].max())
        if top < cfg.throttle_min_share or lost < cfg.throttle_min_lost_hours or lost <= 0:
            continue
        out.append(_finding(views, str(ns), str(pod), grp, lost, counted, health))
    return out


def _finding(
    views: Views,
    ns: str,
    pod: str,
    grp: pd.DataFrame,
    lost: float,
    counted: bool,
    health: bool = True,
) -> Finding:
    worst = grp.iloc[int(np.argmax(grp[C.THROTTLED_LOST].fillna(0.0).to_numpy()))]
    cause = _cause(worst, counted)
    model = str(worst[C.MODEL])
    node = str(worst[C.NODE])
    act = np.clip(grp[C.ACT_MEAN].to_numpy(dtype=np.float64), 0.0, 1.0)
    busy = float(np.nansum(act * grp[C.GPU_HOURS].to_numpy(dtype=np.float64)))
    gpus = float(grp.drop_duplicates(C.SLOT)[C.FRACTION].sum())
    held_h = float(grp[C.HOURS].max())
    share = float(worst[C.THROTTLED_SHARE])
    by = {
        POWER: "their power limit",
        COOLING: "heat (thermal limits)",
        SICK: "their power or thermal limits",
    }[cause]
    message = (
        f"Pod {ns}/{pod} held {gpu_word(gpus)} ({short_model(model)}) for {held_h:,.0f} h, and "
        f"its most throttled GPU (GPU {worst[C.GPU_INDEX]} on node {node}) had its clocks held "
        f"down by {by} for {share * 100:.0f} % of that time: {lost:,.1f} of its "
        f"{busy:,.1f} busy GPU-hours ({lost / busy * 100 if busy else 0:.0f} %) ran throttled. "
        f"{_clock_said(worst)}Likely cause: {cause}"
        + (
            "."
            if health or cause == SICK
            else f" ({SICK} is not ruled out: no XID, ECC or row-remap series were read)."
        )
    )
    return Finding(
        code=CODE,
        severity=MODEST_WASTE(lost),
        resource=Resource("Pod", ns, pod, node, gpus),
        message=message,
        impact=Impact(gpu_hours=lost, cost=lost * views.price(model)),
        recommendation=_advice(cause, node, str(worst[C.GPU_INDEX])),
        evidence={**_evidence(grp, worst, cause, lost, busy), "gpu_health_read": health},
    )


def _clock_said(worst: pd.Series) -> str:
    """What the most throttled GPU's SM clock says, where it was exported: its mean against the
    card's maximum (`DCGM_FI_DEV_MAX_SM_CLOCK`), or alone where the maximum is not exported."""
    mean, top = worst[C.SM_CLOCK_MEAN], worst[C.SM_CLOCK_MAX]
    if pd.isna(mean):
        return ""
    if pd.isna(top) or top <= 0:
        return f"Its SM clock averaged {mean:,.0f} MHz. "
    return (
        f"Its SM clock averaged {mean:,.0f} MHz, {mean / top * 100:.0f} % of the card's "
        f"{top:,.0f} MHz maximum. "
    )


def _advice(cause: str, node: str, index: str) -> str:
    if cause == SICK:
        return (
            f"GPU {index} on node {node} also reported errors: follow GPU070's action for it "
            "first; throttling on a failing card is a symptom, and a card that keeps "
            "throttling after it is serviced is checked again for power and cooling."
        )
    if cause == POWER:
        return (
            f"Read the power limit in force on node {node} (`nvidia-smi -q -d "
            "POWER,PERFORMANCE`): a limit set below the board's default (`nvidia-smi -pl`, a "
            "node power policy) is raised back where the rack's power budget allows; if the "
            "default limit itself is reached, the work is power-bound on this card."
        )
    return (
        f"Check node {node}'s cooling (fans, airflow, inlet temperature; `nvidia-smi -q -d "
        "TEMPERATURE,PERFORMANCE`), and move the work to another node until it is fixed."
    )


def _num(v: Any, nd: int = 1) -> float | None:
    return None if pd.isna(v) else round(float(v), nd)


def _evidence(
    grp: pd.DataFrame, worst: pd.Series, cause: str, lost: float, busy: float
) -> dict[str, Any]:
    num = _num
    mean, top = worst[C.SM_CLOCK_MEAN], worst[C.SM_CLOCK_MAX]
    of_max = None if pd.isna(mean) or pd.isna(top) or top <= 0 else round(float(mean / top), 4)

    per_gpu = [
        {
            "gpu_uuid": str(r[C.UUID]),
            "gpu_index": str(r[C.GPU_INDEX]),
            "node": str(r[C.NODE]),
            "held_hours": num(r[C.HOURS], 2),
            "power_violation_s": num(r[C.POWER_VIOLATION_S]),
            "thermal_violation_s": num(r[C.THERMAL_VIOLATION_S]),
            "throttled_share": num(r[C.THROTTLED_SHARE], 4),
            "busy_gpu_hours_lost": num(r[C.THROTTLED_LOST], 2),
            "sm_clock_mean_mhz": num(r[C.SM_CLOCK_MEAN], 0),
            "sm_clock_max_mhz": num(r[C.SM_CLOCK_MAX], 0),
        }
        for _, r in grp.sort_values([C.NODE, C.GPU_INDEX, C.SLOT]).iterrows()
    ]
    return {
        "cause": cause,
        "busy_gpu_hours": round(busy, 2),
        "busy_gpu_hours_lost": round(lost, 2),
        "share_of_busy_lost": round(lost / busy, 4) if busy else None,
        "power_violation_s": num(_seconds(grp, C.POWER_VIOLATION_S)),
        "thermal_violation_s": num(_seconds(grp, C.THERMAL_VIOLATION_S)),
        # The most throttled GPU's SM clock (`DCGM_FI_DEV_SM_CLOCK`) against the card's maximum
        # (`DCGM_FI_DEV_MAX_SM_CLOCK`): None where not exported.
        "sm_clock_mean_mhz": num(mean, 0),
        "max_sm_clock_mhz": num(top, 0),
        "sm_clock_share_of_max": of_max,
        "gpus": per_gpu[:64],
    }

"""Throttling per holding: how long its GPU's clocks were held down, and the busy GPU-hours that
cost (GPU071, and the ledger by cause).

DCGM counts the time a GPU's clocks were held below what the work asked for, by cause, in
cumulative counters (`DCGM_FI_DEV_POWER_VIOLATION`, `DCGM_FI_DEV_THERMAL_VIOLATION`; ns in DCGM's
current `dcgm_fields.h` and dcgm-exporter's CSV, see `docs/domain.md`). The catalogue reads each
series' `increase` in each bucket (`<counter>_increase_hourly`), added up over the window
(an older snapshot's `increase` over the whole window is read as it is): the throttled time
while the holding's pod held the GPU (dcgm-exporter labels the device's counter with the pod
that holds it), exact to about a scrape interval at each end of a bucket (Prometheus
extrapolates `increase` to the range's edges by at most half an interval, so the buckets'
increases do not add up to the window's exactly; the sum is what a recording rule of the
hourly increase gives, whatever the time chunks).

The two causes may overlap in time (a hot card at its power limit), so the time throttled is at
least the longer of the two and at most the held time: the share is the longer one over the
held seconds, capped at 1. The busy GPU-hours lost are the holding's busy GPU-hours (mean
activity x GPU-hours) times that share: busy time spent throttled, never more than the busy
time. A holding with neither counter has NaN (unmeasured), never 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpuaudit.inventory import columns as C
from gpuaudit.inventory.parse import Parser, Stat, combine, reduce_stat

if TYPE_CHECKING:
    import pandas as pd

NS = 1e9
"""Violation counter units per second (ns)."""
COUNTED = (C.POWER_VIOLATION_S, C.THERMAL_VIOLATION_S)
"""The holding columns of the violation counters: one present makes throttling measured."""
MISSING = (
    "no DCGM_FI_DEV_POWER_VIOLATION or DCGM_FI_DEV_THERMAL_VIOLATION series in the window "
    "(they are commented out in dcgm-exporter's default counters CSV: add them)"
)
"""Why throttling is unmeasured when neither counter was read."""


HOURLY = ("power_violation_increase_hourly", "thermal_violation_increase_hourly")
"""The violation counters' increases per bucket, which a narrowed window can be cut to."""


def read(p: Parser, n: int, within: tuple[float, float] | None = None) -> dict[str, Stat]:
    """Holding column -> its window figure per key number: violation seconds (counter increases
    summed over buckets or time chunks), the mean SM clock, and the maximum SM clock where
    exported. `within` (a narrowed window's start and end): the buckets that end in it alone,
    and nothing of what was recorded for the whole window only (an older snapshot's increases
    over the window, the SM clocks)."""
    out: dict[str, Stat] = {}
    none = (np.empty(0, dtype=np.int64), np.empty(0))
    for col, qid in zip(COUNTED, HOURLY, strict=True):
        if qid in p.answers:
            rows = p.reduced(qid) if within is None else p.within(qid, *within)
        else:
            rows = p.window(qid.removesuffix("_hourly")) if within is None else none
        st = reduce_stat(*rows, n, "sum")
        # To the millisecond: an `increase` extrapolated in floating point reads the same.
        out[col] = Stat(np.round(st.values / NS, 3), st.present)
    out[C.SM_CLOCK_MEAN] = combine(p, "sm_clock", n).mean
    out[C.SM_CLOCK_MAX] = reduce_stat(*p.window("max_sm_clock_max"), n, "max")
    if within is not None:
        out[C.SM_CLOCK_MEAN] = out[C.SM_CLOCK_MAX] = reduce_stat(*none, n, "max")
    return out


def derive(holdings: pd.DataFrame) -> None:
    """Set, in place, each holding's throttled share and busy GPU-hours lost to throttling,
    from its violation seconds, held hours, mean activity and GPU-hours (after the holdings
    are final: joined to their pods and shared)."""
    if holdings.empty:
        return
    power = holdings[C.POWER_VIOLATION_S].to_numpy(dtype=np.float64)
    thermal = holdings[C.THERMAL_VIOLATION_S].to_numpy(dtype=np.float64)
    held_s = holdings[C.HOURS].to_numpy(dtype=np.float64) * 3600.0
    with np.errstate(invalid="ignore", divide="ignore"):
        throttled = np.fmax(power, thermal)
        share = np.where(held_s > 0, np.minimum(throttled / held_s, 1.0), np.nan)
        share = np.where(np.isnan(throttled), np.nan, np.clip(share, 0.0, 1.0))
    act = np.clip(holdings[C.ACT_MEAN].to_numpy(dtype=np.float64), 0.0, 1.0)
    busy = act * holdings[C.GPU_HOURS].to_numpy(dtype=np.float64)
    holdings[C.THROTTLED_SHARE] = share
    holdings[C.THROTTLED_LOST] = busy * share

"""What the checks that judge a holder idle share (GPU001, GPU002, GPU003): the engine-activity
noise floor, and the second signals an idle finding states (power draw against the GPU model's
idle and maximum power, framebuffer in use) with the confidence they give it.

Not a check (only `gpuNNN_*` modules are), so checks may import it; no check imports another.

Noise floor
    Activity "under the floor" is a mean engine activity, of one pod's GPUs in one bucket of
    `--step` (hourly by default), that is measured and below `activity_noise_floor`: such a
    bucket counts as 0 activity. A bucket without an activity value stays without one (it is
    left out of every mean, never read as 0 or as idle), and a pod without activity data is
    never judged at all. At 0 (the default) nothing changes.

Power corroboration
    A pod's GPUs' mean draw `P` (`DCGM_FI_DEV_POWER_USAGE`, W, weighted by hours held) is
    measured against the model's idle draw `I` (approximate, from `gpuaudit.domain.power`) and its
    maximum `M`: the GPU's power management limit (`DCGM_FI_DEV_POWER_MGMT_LIMIT`) where
    exported, else the model's board power from `gpuaudit.domain.power`. Its place between them is
    `(P - I) / (M - I)` (0 at or under idle). Above `idle_power_margin` the draw contradicts
    the activity reading: the finding has low confidence (or, with `idle_power_drop = 1`, is
    not reported); at or under it the draw agrees: high confidence. It is unavailable, and
    the finding has medium confidence, when any of the pod's GPUs lacks a power mean, when
    neither a limit nor a model figure gives `M` or `I`, on MIG instances and on shared GPUs
    (the device's draw is every holder's), and for a judgement on only some hours of a holding
    (the power mean covers the whole holding). Missing power data is never read as idle power.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuaudit.checks.findings import Confidence
from gpuaudit.domain.power import spec_for
from gpuaudit.inventory import Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.derived import edge

POWER_LIMIT_SOURCE = "DCGM_FI_DEV_POWER_MGMT_LIMIT"
"""Where the maximum came from when the GPU exported its limit."""
# The wording reports have always carried (a source name, not an import path): kept so that
# reports compare across versions.
BOARD_POWER_SOURCE = "model board power (gpuaudit.power)"
"""Where the maximum came from otherwise."""
WHOLE_HOLDING = "the power draw is a mean over the whole holding, its active hours included"
"""Why a judgement on some hours of a holding cannot use the power mean."""


@dataclass(frozen=True)
class Signals:
    """An idle pod's second signals: its GPUs' power draw and framebuffer in use."""

    power_w: float | None
    """Mean draw per GPU (W), None when not measured on every GPU it held."""
    max_w: float | None
    """Maximum power per GPU (W): the management limit or the model's board power."""
    max_source: str
    """`POWER_LIMIT_SOURCE` or `BOARD_POWER_SOURCE`; empty when unknown."""
    idle_w: float | None
    """Approximate idle draw per GPU (W), from `gpuaudit.domain.power`."""
    fb_used_mib: float | None
    """Mean framebuffer in use per GPU (MiB), None when not measured."""
    fb_used_share: float | None
    """Framebuffer in use as a share of the framebuffer, None when not measured."""
    unavailable: str
    """Why the power cannot corroborate the activity reading; empty when it can."""

    @property
    def above_idle(self) -> float | None:
        """Where the draw lies between idle (0) and maximum (1) power, 0 at or under idle;
        None when the power cannot corroborate."""
        if self.unavailable or self.power_w is None or self.max_w is None or self.idle_w is None:
            return None
        return max(0.0, (self.power_w - self.idle_w) / (self.max_w - self.idle_w))

    def confidence(self, margin: float) -> Confidence:
        """High when the draw lies at most `margin` above idle, low when above, medium when
        the power cannot tell."""
        above = self.above_idle
        if above is None:
            return Confidence.MEDIUM
        return Confidence.LOW if above > margin else Confidence.HIGH

    def evidence(self, margin: float | None) -> dict[str, Any]:
        """The figures, by name, for a finding's evidence (`margin` None: not graded)."""

        def r(x: float | None, nd: int) -> float | None:
            return None if x is None else round(x, nd)

        share = None if self.power_w is None or not self.max_w else self.power_w / self.max_w
        out: dict[str, Any] = {
            "power_mean_w": r(self.power_w, 1),
            "power_max_w": r(self.max_w, 1),
            "power_max_source": self.max_source,
            "power_share_of_max": r(share, 4),
            "power_idle_w_approx": r(self.idle_w, 1),
            "power_above_idle": r(self.above_idle, 4),
            "power_corroboration": self.unavailable or "available",
            "fb_used_mib": r(self.fb_used_mib, 0),
            "fb_used_share": r(self.fb_used_share, 4),
        }
        if margin is not None:
            out["threshold_idle_power_margin"] = margin
        return out

    def sentence(self, model: str, margin: float | None) -> str:
        """What the second signals say, as sentences for the finding's message (`margin`
        None: the power is not weighed, only stated)."""
        fb = (
            f"{self.fb_used_mib:,.0f} MiB of framebuffer in use per GPU"
            + (f" ({self.fb_used_share * 100:.0f} %)" if self.fb_used_share is not None else "")
            if self.fb_used_mib is not None
            else "framebuffer use not measured"
        )
        if self.power_w is None:
            return f"Confidence medium: no power draw was measured on its GPUs ({fb})."
        limit = "limit" if self.max_source == POWER_LIMIT_SOURCE else "board power"
        drew = f"its GPUs drew {self.power_w:.0f} W on average"
        if self.max_w:
            drew += (
                f" ({self.power_w / self.max_w * 100:.0f} % of their {self.max_w:.0f} W {limit})"
            )
        if self.unavailable or margin is None:
            why = self.unavailable or "the power draw was not weighed"
            return f"Confidence medium: {drew}, which cannot tell ({why}); {fb}."
        assert self.idle_w is not None
        if self.confidence(margin) is Confidence.LOW:
            return (
                f"Confidence low: {drew}, well above the {model}'s idle draw of about "
                f"{self.idle_w:.0f} W, so the activity reading may miss its work; {fb}."
            )
        return (
            f"Confidence high: {drew}, near the {model}'s idle draw of about "
            f"{self.idle_w:.0f} W; {fb}."
        )


def pod_signals(views: Views, whole_holding: bool = True) -> Mapping[tuple[str, str], Signals]:
    """The second signals of every holder pod, by (namespace, pod), over the GPUs it held,
    each worked out when first asked for (a check asks for the few pods it reports, of
    thousands). `whole_holding` False: the judgement covers only some hours of the holdings,
    which the window's power mean cannot speak for (the power is stated, its corroboration
    unavailable)."""
    h = views.held
    if h.empty:
        return {}
    replicas = _replicas(views)
    groups: dict[tuple[str, str], list[int]] = {}
    for i, key in enumerate(zip(h[C.NAMESPACE].tolist(), h[C.POD].tolist(), strict=True)):
        groups.setdefault((str(key[0]), str(key[1])), []).append(i)
    cols = {
        c: h[c].to_numpy()
        for c in (
            C.HOURS,
            C.POWER_MEAN,
            C.POWER_LIMIT,
            C.MODEL,
            C.MIG_ID,
            C.NODE,
            C.FB_USED_MEAN,
            C.FB_FREE_MEAN,
        )
    }
    return _Signals(groups, cols, replicas, whole_holding)


class _Signals(Mapping[tuple[str, str], Signals]):
    """`pod_signals`: each pod's signals made on first look-up, then kept."""

    def __init__(
        self,
        groups: dict[tuple[str, str], list[int]],
        cols: Mapping[str, np.ndarray[Any, Any]],
        replicas: Mapping[str, float],
        whole_holding: bool,
    ) -> None:
        self._groups, self._cols = groups, cols
        self._replicas, self._whole = replicas, whole_holding
        self._made: dict[tuple[str, str], Signals] = {}

    def __getitem__(self, key: tuple[str, str]) -> Signals:
        made = self._made.get(key)
        if made is None:
            rows = self._groups[key]
            made = self._made[key] = _signals(self._cols, rows, self._replicas, self._whole)
        return made

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._groups)

    def __len__(self) -> int:
        return len(self._groups)


def _replicas(views: Views) -> Mapping[str, float]:
    """Node -> GPU sharing replicas (1 where not shared or unknown)."""
    nodes = views.inv.nodes
    if nodes.empty or C.GPU_REPLICAS not in nodes.columns:
        return {}
    import pandas as pd

    counts = pd.to_numeric(nodes[C.GPU_REPLICAS], errors="coerce").fillna(1.0)
    return dict(zip(nodes[C.NODE].astype(str).tolist(), counts.tolist(), strict=True))


def _wmean(vals: np.ndarray[Any, Any], w: np.ndarray[Any, Any]) -> float | None:
    ok = np.isfinite(vals) & np.isfinite(w) & (w > 0)
    if not ok.any():
        return None
    return float((vals[ok] * w[ok]).sum() / w[ok].sum())


def _signals(
    cols: Mapping[str, np.ndarray[Any, Any]],
    rows: list[int],
    replicas: Mapping[str, float],
    whole_holding: bool,
) -> Signals:
    at = np.array(rows)
    hours = cols[C.HOURS][at].astype("float64")
    power = cols[C.POWER_MEAN][at].astype("float64")
    limit = cols[C.POWER_LIMIT][at].astype("float64")
    used = cols[C.FB_USED_MEAN][at].astype("float64")
    free = cols[C.FB_FREE_MEAN][at].astype("float64")
    specs = [spec_for(str(m)) for m in cols[C.MODEL][at].tolist()]
    from_limit = np.isfinite(limit) & (limit > 0)
    board = np.array([s.max_w if s else np.nan for s in specs])
    mx = np.where(from_limit, limit, board)
    idle = np.array([s.idle_w if s else np.nan for s in specs])
    weights = np.where(hours > 0, hours, 1.0)
    measured = bool(np.isfinite(power).all())
    power_w = _wmean(power, weights) if measured else None
    max_w = _wmean(mx, weights) if np.isfinite(mx).all() else None
    idle_w = _wmean(idle, weights) if np.isfinite(idle).all() else None
    fb_ok = np.isfinite(used)
    fb_used = _wmean(used, weights) if fb_ok.all() else None
    total = used + free
    share = None
    if fb_used is not None and np.isfinite(total).all() and total.sum() > 0:
        share = float(used.sum() / total.sum())
    source = ""
    if max_w is not None:
        source = POWER_LIMIT_SOURCE if from_limit.all() else BOARD_POWER_SOURCE
    reason = ""
    if any(str(m) for m in cols[C.MIG_ID][at].tolist()):
        reason = "a MIG instance's power draw is the whole GPU's, every instance's work included"
    elif any(replicas.get(str(n), 1.0) > 1 for n in cols[C.NODE][at].tolist()):
        reason = "the GPU is shared (time-slicing, MPS or HAMi): its power draw is every holder's"
    elif not measured:
        reason = "no power draw (DCGM_FI_DEV_POWER_USAGE) was measured on every GPU it held"
    elif max_w is None:
        reason = "no power limit was exported and the GPU model's board power is not known"
    elif idle_w is None:
        reason = "the GPU model's idle draw is not known"
    elif not max_w > idle_w:
        reason = f"the maximum power ({max_w:.0f} W) is not above the idle draw ({idle_w:.0f} W)"
    elif not whole_holding:
        reason = WHOLE_HOLDING
    return Signals(power_w, max_w, source, idle_w, fb_used, share, reason)


def floored(act: np.ndarray[Any, Any], floor: float) -> np.ndarray[Any, Any]:
    """Bucket activities with those measured under `floor` (at its `edge`: they are means of
    sums) counted as 0; NaN (not measured) stays NaN."""
    if floor <= 0:
        return act
    with np.errstate(invalid="ignore"):
        return np.where(act < edge(floor), 0.0, act)


def floored_means(views: Views, floor: float) -> dict[tuple[str, str], float]:
    """Per holder pod (namespace, pod) with activity under `floor` in some bucket: its window
    mean activity less what those buckets added to it (their activity x GPU-hours held, over
    the GPU-hours of every bucket with an activity value). Pods without such a bucket keep
    their window mean and are not listed."""
    ph = views.pod_hours
    if floor <= 0 or len(ph.pod) == 0:
        return {}
    act = ph.act
    with np.errstate(invalid="ignore"):
        under = np.isfinite(act) & (act < edge(floor)) & (act > 0)
    if not under.any():
        return {}
    n = len(ph.pods.pod)
    measured_h = np.bincount(ph.pod[np.isfinite(act)], ph.gpu_h[np.isfinite(act)], minlength=n)
    removed = np.bincount(ph.pod[under], act[under] * ph.gpu_h[under], minlength=n)
    pods = views.per_pod
    mean = {
        (str(ns), str(p)): float(m)
        for ns, p, m in zip(pods[C.NAMESPACE], pods[C.POD], pods[C.ACT_MEAN], strict=True)
    }
    out: dict[tuple[str, str], float] = {}
    for number in np.flatnonzero(removed > 0).tolist():
        key = (str(ph.pods.namespace[number]), str(ph.pods.pod[number]))
        m = mean.get(key, math.nan)
        if m == m and measured_h[number] > 0:
            out[key] = max(0.0, m - float(removed[number] / measured_h[number]))
    return out

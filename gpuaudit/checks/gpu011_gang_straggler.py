"""GPU011 a straggler in a gang: one slow member's GPU holds the whole distributed job back.

What it finds
    Gangs (distributed jobs whose members run in lockstep: see `docs/domain.md`, Gangs) where one
    member's GPU runs slower than its peers', throttled by its power limit or by heat, or at a
    lower SM clock, while the peers' activity sits below the slow member's: they wait for it at
    every collective. It names the member and its node.

Why it matters
    A synchronous job runs at the pace of its slowest member. One throttled card makes every
    other GPU of the job idle at each barrier; the job's dashboards show a low activity spread
    over all members and nothing points at the one card that causes it.

How it decides
    Per gang with at least two members holding GPUs in the window and throttling measured on all
    of them (GPU071's violation counters, `DCGM_FI_DEV_POWER_VIOLATION` and
    `DCGM_FI_DEV_THERMAL_VIOLATION`): a member is slow when its GPUs were throttled for at least
    `checks.straggler_min_share` (default 0.10) of their held time, or, where
    `DCGM_FI_DEV_SM_CLOCK` is exported, their mean SM clock is at least
    `checks.straggler_min_share` below the median of the peers'. A gang is reported when
    exactly one member is slow (several slow members are a node or fleet problem GPU071 reports)
    and the median of its peers' mean engine activity is at least `checks.straggler_min_gap`
    (default 0.10) below the slow member's: the peers wait while it computes. Link errors are not
    read (dcgm-exporter's NVLink error counters are not in gpuaudit's query set).
    Impact: the peers' GPU-hours spent waiting, each peer's GPU-hours x (the slow member's mean
    activity - its own), priced per GPU model; severity medium from 24, low below. Skipped,
    with the reason, when the violation counters were not collected.

What to do
    Move the slow member off its node (cordon the node and delete the pod, so that its job
    controller places it elsewhere) and fix the node's cause (GPU071 says which: the power cap,
    cooling, or a sick card GPU070 reports). Elastic frameworks can also exclude a slow rank
    (torchrun's elastic agent restarts the group without it when the node is cordoned).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gpuaudit.checks.base import MODEST_WASTE, counted, short_model
from gpuaudit.checks.contract import fraction
from gpuaudit.checks.findings import Finding, Impact, Resource
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C

CODE = "GPU011"
TITLE = "A straggler in a gang"
REQUIRES = (Capability.ACTIVITY, Capability.THROTTLING, Capability.KUBERNETES_PODS)
VIEWS = ()
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


@dataclass(frozen=True)
class Thresholds:
    straggler_min_share: float = fraction(0.10)
    """Share of its held time a member's GPU must have been throttled, or how far its SM clock
    must sit below its peers', for the member to be slow."""
    straggler_min_gap: float = fraction(0.10)
    """How far the peers' median engine activity must sit below the slow member's."""


@dataclass(frozen=True)
class _Member:
    """One member pod of a gang, over the GPUs it held."""

    ns: str
    pod: str
    node: str
    model: str
    gpus: float
    gpu_hours: float
    act: float
    """Mean engine activity, weighted by GPU-hours."""
    share: float
    """The largest throttled share of its GPUs (NaN where unmeasured)."""
    clock: float
    """Mean SM clock (MHz) of its GPUs; NaN where unexported."""
    power_s: float
    thermal_s: float


def _members(grp: pd.DataFrame) -> list[_Member]:
    out = []
    for (ns, pod), m in grp.groupby([C.NAMESPACE, C.POD], sort=True):
        gh = m[C.GPU_HOURS].to_numpy(dtype=np.float64)
        act = m[C.ACT_MEAN].to_numpy(dtype=np.float64)
        ok = ~np.isnan(act)
        clocks = m[C.SM_CLOCK_MEAN].dropna()
        out.append(
            _Member(
                ns=str(ns),
                pod=str(pod),
                node=str(m[C.NODE].iloc[0]),
                model=str(m[C.MODEL].iloc[0]),
                gpus=float(m.drop_duplicates(C.SLOT)[C.FRACTION].sum()),
                gpu_hours=float(gh.sum()),
                act=float((act[ok] * gh[ok]).sum() / gh[ok].sum()) if gh[ok].sum() else np.nan,
                share=float(m[C.THROTTLED_SHARE].max()),
                clock=float(clocks.mean()) if len(clocks) else np.nan,
                power_s=float(m[C.POWER_VIOLATION_S].fillna(0.0).sum()),
                thermal_s=float(m[C.THERMAL_VIOLATION_S].fillna(0.0).sum()),
            )
        )
    return out


def _slow(m: _Member, peers: list[_Member], min_share: float) -> str:
    """Why `m` is slow (empty: it is not)."""
    if m.share >= min_share:
        cause = "power limit" if m.power_s >= m.thermal_s else "thermal limits"
        return f"its GPU was throttled by its {cause} {m.share * 100:.0f} % of the time"
    clocks = [p.clock for p in peers if not np.isnan(p.clock)]
    if clocks and not np.isnan(m.clock):
        median = float(np.median(clocks))
        if median > 0 and m.clock <= (1.0 - min_share) * median:
            return f"its SM clock averaged {m.clock:,.0f} MHz against its peers' {median:,.0f} MHz"
    return ""


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    inv = views.inv
    if inv.gangs.empty or inv.pods.empty:
        return []
    h = views.held
    gang_of = {
        (str(ns), str(p)): str(g)
        for ns, p, g in zip(inv.pods[C.NAMESPACE], inv.pods[C.POD], inv.pods[C.GANG], strict=True)
        if g
    }
    keys = list(zip(h[C.NAMESPACE].astype(str), h[C.POD].astype(str), strict=True))
    h = h.assign(_gang=[gang_of.get(k, "") for k in keys])
    h = h[h["_gang"] != ""]
    gangs = inv.gangs.set_index(C.GANG_ID)
    out: list[Finding] = []
    for gid, grp in h.groupby("_gang", sort=True):
        if grp[C.THROTTLED_SHARE].isna().any():
            continue  # a member's throttling unmeasured: no member can be told slow or not
        members = _members(grp)
        if len(members) < 2 or any(np.isnan(m.act) for m in members):
            continue
        slow = [
            (m, why)
            for m in members
            if (why := _slow(m, [p for p in members if p is not m], cfg.straggler_min_share))
        ]
        if len(slow) != 1:
            continue
        m, why = slow[0]
        peers = [p for p in members if p is not m]
        gap = m.act - float(np.median([p.act for p in peers]))
        if gap < cfg.straggler_min_gap:
            continue
        g = gangs.loc[gid]
        out.append(_finding(views, g, m, why, peers, gap))
    return out


def _finding(
    views: Views, g: pd.Series, m: _Member, why: str, peers: list[_Member], gap: float
) -> Finding:
    kind, ns, name = str(g[C.GANG_KIND]), str(g[C.NAMESPACE]), str(g[C.GANG_NAME])
    waited = sum(max(0.0, m.act - p.act) * p.gpu_hours for p in peers)
    cost = sum(max(0.0, m.act - p.act) * p.gpu_hours * views.price(p.model) for p in peers)
    peer_act = float(np.median([p.act for p in peers]))
    message = (
        f"{kind} {ns}/{name} ({counted(len(peers) + 1, 'member')}) waited for member "
        f"{m.ns}/{m.pod} on node {m.node}: {why}, and its peers ran at a median "
        f"{peer_act * 100:.0f} % engine activity against its {m.act * 100:.0f} %, "
        f"{waited:,.1f} GPU-hours of their time spent waiting for it."
    )
    return Finding(
        code=CODE,
        severity=MODEST_WASTE(waited),
        resource=Resource(kind, ns, name, m.node, m.gpus + sum(p.gpus for p in peers)),
        message=message,
        impact=Impact(gpu_hours=waited, cost=cost),
        recommendation=(
            f"Move {m.ns}/{m.pod} off node {m.node}: cordon the node (`kubectl cordon "
            f"{m.node.rpartition('/')[2]}`) and delete the pod so that its job controller "
            "places it elsewhere, then fix the node's cause (GPU071 names it: the power cap, "
            "cooling, or a sick card GPU070 reports)."
        ),
        pods=tuple(f"{p.ns}/{p.pod}" for p in [m, *peers]),
        evidence=_evidence(m, peers, gap, waited),
    )


def _evidence(m: _Member, peers: list[_Member], gap: float, waited: float) -> dict[str, Any]:
    def row(p: _Member) -> dict[str, Any]:
        return {
            "pod": f"{p.ns}/{p.pod}",
            "node": p.node,
            "gpu_model": short_model(p.model),
            "gpu_hours": round(p.gpu_hours, 2),
            "mean_activity": round(p.act, 4),
            "throttled_share": round(p.share, 4),
            "sm_clock_mean_mhz": None if np.isnan(p.clock) else round(p.clock),
        }

    return {
        "straggler": row(m),
        "peers": [row(p) for p in peers[:64]],
        "activity_gap": round(gap, 4),
        "peer_gpu_hours_waiting": round(waited, 2),
    }

"""GPU070 sick GPUs in use: pods hold GPUs that reported XID errors or memory faults.

What it finds
    GPUs held by pods in the window that reported an XID error (`DCGM_FI_DEV_XID_ERRORS`),
    uncorrectable ECC errors (`DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`, `DCGM_FI_DEV_ECC_DBE_AGG_TOTAL`),
    rows remapped for uncorrectable errors (`DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS`), a row
    remap waiting for a GPU reset (`DCGM_FI_DEV_ROW_REMAP_PENDING`) or a failed row remap
    (`DCGM_FI_DEV_ROW_REMAP_FAILURE`), each with what NVIDIA says to do about it.

Why it matters
    Work on a failing GPU is work at risk: jobs crash or hang, results can be silently wrong,
    and a gang's healthy members wait for the sick one. But not every XID is a failing GPU:
    NVIDIA's Xid catalog sends many back to the application, and a recorded row remap lets
    unaffected work keep running until a reset. Draining a node for those costs capacity for
    nothing.

How it decides
    For every GPU (all MIG instances of one GPU together), over the holdings of pods:
    - XID events: how many times the XID gauge changed into each code in the window (the
      `xid_events_hourly` query, per bucket, added up: a code whose series appears while the
      same GPU and pod reported another value just before). dcgm-exporter's gauge keeps the
      last XID until the exporter restarts, so one event would otherwise read as a whole
      window of errors; a code the gauge only carried over from before the window, or from
      before the pod, had no event and is "stale": it is listed in the evidence but decides
      nothing. Snapshots without the query count every code seen as one event, and say so.
    - each XID with an event takes its action from NVIDIA's Xid catalog (resolution bucket,
      immediate action; docs.nvidia.com/deploy/xid-errors/): restart the application, reset the
      GPU, reboot the node, or contact support (RMA); "IGNORE" codes need no action. XID 63 (a
      row-remap recorded) means a remap waits for the next GPU reset: reset when idle. By code:
        contact support (RMA): 54
        reboot the node: 79, 154
        reset the GPU: 46, 48, 62, 64, 74, 95, 109, 110, 119, 120, 136, 140, 143, 144, 145,
          149, 150, 155, 156, 158, and any code not in the catalog
        reset the GPU when its work ends: 63
        restart the application: 8, 11, 13, 25, 31, 32, 45, 68, 69, 80, 94
        no action now: 38, 43, 44, 92, 121, 157
    - memory: a failed row remap (`ROW_REMAP_FAILURE` 1) -> contact support (RMA), NVIDIA's RMA
      criterion for row remapping; a pending row remap (`ROW_REMAP_PENDING` 1) -> reset when
      idle (NVIDIA: with the pending flag set, unaffected applications keep running and new
      workloads can be launched); volatile double-bit ECC errors -> reset the GPU; rows remapped
      for uncorrectable errors with no pending-flag series, or lifetime (aggregate) double-bit
      errors, alone -> no action now; remapped rows with the pending flag at 0 are remaps already
      in effect (the GPU protecting itself) and are not reported.
    The GPU's action is the most disruptive of these, and sets the severity: critical for
    contact support and reboot, high for reset the GPU, medium for reset when idle and restart
    the application, low for no action. GPUs with a signal only while no pod held them are left
    out (nothing was at risk), as are GPUs whose only XIDs are stale.
    Impact: the GPU-hours pods held on the GPU in the window, priced per GPU model: work at
    risk, not waste, so reports list it with the risks, apart from the waste.
    Skipped when none of these metrics were collected (they must be in dcgm-exporter's
    counters CSV; the ECC totals and the pending flag are off by default).

What to do
    Follow the action. Contact support / RMA: cordon and drain the node and have the GPU
    replaced. Reboot: cordon and drain the node, reboot it, service the GPU if the XID returns.
    Reset the GPU: move the work on it elsewhere and `nvidia-smi -r -i <index>`; drain the node
    for service if the XID returns. Reset when idle: no drain; reset the GPU when its pods
    finish so the remap takes effect. Restart the application: restart the pods and look for
    illegal memory accesses or a faulty CUDA kernel if it returns. Reports never place work on
    a node or GPU this check takes out of service.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import pandas as pd

from gpuaudit.checks.base import short_model
from gpuaudit.checks.findings import Category, Drain, Finding, Impact, Resource, Severity
from gpuaudit.domain import xid
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.derived import physical_slot

CODE = "GPU070"
TITLE = "Sick GPUs in use"
REQUIRES = (Capability.GPU_HEALTH,)
VIEWS = ()
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


@dataclass(frozen=True)
class Thresholds:
    """None: any XID event, uncorrectable ECC error or row-remap problem counts."""


class Action(enum.Enum):
    """What to do about a GPU, least disruptive first; the severity follows it."""

    NONE = "no action now"
    RESTART_APP = "restart the application"
    RESET_WHEN_IDLE = "reset the GPU when its work ends"
    RESET_GPU = "reset the GPU"
    REBOOT = "reboot the node"
    RMA = "contact support (RMA)"

    @property
    def severity(self) -> Severity:
        return _SEVERITY[self]


_SEVERITY = {
    Action.NONE: Severity.LOW,
    Action.RESTART_APP: Severity.MEDIUM,
    Action.RESET_WHEN_IDLE: Severity.MEDIUM,
    Action.RESET_GPU: Severity.HIGH,
    Action.REBOOT: Severity.CRITICAL,
    Action.RMA: Severity.CRITICAL,
}
_ORDER = list(Action)
_BY_BUCKET = {
    xid.Bucket.IGNORE: Action.NONE,
    xid.Bucket.RESTART_APP: Action.RESTART_APP,
    xid.Bucket.RESET_GPU: Action.RESET_GPU,
    xid.Bucket.REBOOT: Action.REBOOT,
    xid.Bucket.CONTACT_SUPPORT: Action.RMA,
}
ROW_REMAP_RECORDED = 63
"""The XID of a recorded row remap: the remap waits for the next GPU reset."""


def xid_action(code: int) -> Action:
    """The action an XID event calls for (XID 63: reset when idle, not the catalog's IGNORE,
    since the remap it records takes effect only at a reset)."""
    if code == ROW_REMAP_RECORDED:
        return Action.RESET_WHEN_IDLE
    return _BY_BUCKET[xid.bucket(code)]


def _worst(actions: list[Action]) -> Action:
    return max(actions, key=_ORDER.index) if actions else Action.NONE


_SIGNALS = (
    C.ECC_DBE_MAX,
    C.ECC_DBE_AGG_MAX,
    C.REMAP_UNCORR_MAX,
    C.REMAP_FAILURE_MAX,
    C.REMAP_PENDING_MAX,
)


def _codes(text: str) -> list[int]:
    return [int(c) for c in text.split(",") if c.strip().isdigit()]


def _events(texts: list[str]) -> dict[int, float]:
    out: dict[int, float] = {}
    for text in texts:
        for part in text.split(","):
            code, sep, n = part.partition(":")
            if sep and code.isdigit():
                out[int(code)] = out.get(int(code), 0.0) + float(n)
    return out


def _messages(texts: list[str]) -> dict[int, str]:
    out: dict[int, str] = {}
    for text in texts:
        for part in text.split("; "):
            code, sep, msg = part.partition(": ")
            if sep and code.isdigit():
                out.setdefault(int(code), msg)
    return out


@dataclass(frozen=True)
class _Health:
    """What one GPU reported in the window, and what it calls for."""

    active: dict[int, float]
    """XID code -> events in the window (1 per code seen when events were not counted)."""
    stale: list[int]
    """XID codes the gauge only carried over from before (no event in the window)."""
    counted: bool
    dbe: float
    dbe_agg: float
    remapped: float
    failure: float
    pending: float | None
    """The pending flag's maximum; None when the metric was not collected."""

    def action(self) -> Action:
        acts = [xid_action(c) for c in self.active]
        if self.failure > 0:
            acts.append(Action.RMA)
        if self.pending:
            acts.append(Action.RESET_WHEN_IDLE)
        if self.dbe > 0:
            acts.append(Action.RESET_GPU)
        return _worst(acts)

    def any_signal(self) -> bool:
        """Something to report: an XID event, a memory error, or remapped rows that may still
        be pending (remaps known to be applied are the GPU protecting itself)."""
        memory = (self.dbe, self.dbe_agg, self.failure, self.pending or 0)
        return (
            bool(self.active)
            or any(v > 0 for v in memory)
            or (self.remapped > 0 and self.pending is None)
        )


def _health(grp: pd.DataFrame, counted: bool) -> _Health:
    seen = sorted({c for text in grp[C.XID_CODES] for c in _codes(str(text))})
    events = _events([str(t) for t in grp[C.XID_EVENTS] if t])
    if counted:
        active = {c: events[c] for c in sorted(events) if events[c] > 0}
        stale = [c for c in seen if c not in active]
    else:
        active, stale = dict.fromkeys(seen, 1.0), []
    pend = grp[C.REMAP_PENDING_MAX]
    return _Health(
        active=active,
        stale=stale,
        counted=counted,
        dbe=float(grp[C.ECC_DBE_MAX].fillna(0).max()),
        dbe_agg=float(grp[C.ECC_DBE_AGG_MAX].fillna(0).max()),
        remapped=float(grp[C.REMAP_UNCORR_MAX].fillna(0).max()),
        failure=float(grp[C.REMAP_FAILURE_MAX].fillna(0).max()),
        pending=None if pend.isna().all() else float(pend.fillna(0).max()),
    )


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    h = views.held
    if h.empty:
        return []
    h = h.copy()
    h["_gpu"] = h[C.UUID].where(h[C.UUID] != "", physical_slot(h))
    signal = h[C.XID_CODES] != ""
    for col in _SIGNALS:
        signal |= h[col].fillna(0) > 0
    counted = Capability.XID_EVENTS in views.inv.capabilities
    out: list[Finding] = []
    for gpu, grp in h[signal].groupby("_gpu", sort=True):
        health = _health(grp, counted)
        if not health.any_signal():
            continue  # only stale XIDs: the event was before the window or before the pod
        out.append(_finding(views, str(gpu), grp, health))
    return out


def _problems(health: _Health, msgs: dict[int, str]) -> list[str]:
    problems = []
    for c, n in health.active.items():
        count = f"{n:g} event{'s' if n != 1 else ''}" if health.counted else "event count unknown"
        problems.append(f"XID {c} ({xid.meaning(c, msgs.get(c, ''))}, {count})")
    if health.failure > 0:
        problems.append("a failed row remap")
    if health.pending:
        problems.append("a row remap pending until the next GPU reset")
    if health.dbe > 0:
        errors = "error" if health.dbe == 1 else "errors"
        problems.append(f"{health.dbe:,.0f} volatile double-bit ECC {errors}")
    if health.dbe_agg > 0 and health.dbe == 0:
        errors = "error" if health.dbe_agg == 1 else "errors"
        problems.append(f"{health.dbe_agg:,.0f} double-bit ECC {errors} in its lifetime")
    if health.remapped > 0:
        rows = "row" if health.remapped == 1 else "rows"
        problems.append(f"{health.remapped:,.0f} {rows} remapped for uncorrectable errors")
    return problems


def _finding(views: Views, gpu: str, grp: pd.DataFrame, health: _Health) -> Finding:
    node = str(grp[C.NODE].iloc[0])
    model = str(grp[C.MODEL].iloc[0])
    index = str(grp[C.GPU_INDEX].iloc[0])
    gpu_hours = float(grp[C.GPU_HOURS].sum())
    pods = sorted({f"{ns}/{p}" for ns, p in zip(grp[C.NAMESPACE], grp[C.POD], strict=True)})
    # KAI's reservation pods hold a shared GPU for its fraction pods: those are the holders
    # (a reservation pod whose fraction pods are gone, which KAI deletes soon, is named).
    pods = [q for q in pods if tuple(q.split("/", 1)) not in views.kai_reservations] or pods
    msgs = _messages([str(m) for m in grp[C.XID_MSG] if m])
    action = health.action()
    problems = _problems(health, msgs)
    what = ", ".join(problems[:-1]) + (" and " if len(problems) > 1 else "") + problems[-1]
    holders = ", ".join(pods[:3]) + (f" and {len(pods) - 3} more" if len(pods) > 3 else "")
    stale = ""
    if health.stale:
        codes = ", ".join(str(c) for c in health.stale)
        stale = f" (its XID gauge also still showed XID {codes} from before, with no new event)"
    message = (
        f"GPU {index} ({short_model(model)}, {gpu}) on node {node} reported {what} while "
        f"pod{'s' if len(pods) > 1 else ''} {holders} held it for {gpu_hours:,.0f} "
        f"GPU-hours{stale}; NVIDIA's guidance: {action.value}."
    )
    rec, drains = _advice(action, node, index, gpu, holders, len(pods) == 1)
    return Finding(
        code=CODE,
        severity=action.severity,
        resource=Resource("GPU", "", gpu, node, 1.0),
        message=message,
        impact=Impact(gpu_hours=gpu_hours, cost=gpu_hours * views.price(model)),
        category=Category.RISK,
        recommendation=rec,
        drains=drains,
        pods=tuple(pods),
        evidence=_evidence(health, msgs, action, gpu, index, model, pods, gpu_hours),
    )


def _advice(
    action: Action, node: str, index: str, gpu: str, holders: str, single: bool
) -> tuple[str, tuple[Drain, ...]]:
    them, finish = ("it", "finishes") if single else ("them", "finish")
    # A scan of every cluster names the node `cluster/node`; kubectl wants the node's own name,
    # run against that cluster.
    cluster, _, bare = node.rpartition("/")
    where = f" against cluster {cluster}" if cluster else ""
    cordon = (
        f"Cordon node {node} (`kubectl cordon {bare}`{where}), drain it (`kubectl drain {bare} "
        "--ignore-daemonsets`)"
    )
    if action is Action.RMA:
        return (
            f"{cordon} and have GPU {index} replaced: a failed row remap meets NVIDIA's RMA "
            "policy, so open a support case (RMA) instead of resetting it again.",
            (Drain(node),),
        )
    if action is Action.REBOOT:
        return (
            f"{cordon}, then reboot it; if the XID returns after the reboot, have GPU {index} "
            "serviced (contact support).",
            (Drain(node),),
        )
    if action is Action.RESET_GPU:
        return (
            f"Move {holders} off GPU {index} (restart {them} elsewhere), reset the GPU "
            f"(`nvidia-smi -r -i {index}` on {node}) and watch it; cordon and drain {node} for "
            "service if the error returns.",
            (Drain(node, gpu),),
        )
    if action is Action.RESET_WHEN_IDLE:
        return (
            f"No drain is needed: unaffected work may keep running on {node} and new work may "
            f"start (NVIDIA's row-remapping guidance). Reset GPU {index} (`nvidia-smi -r -i "
            f"{index}`) once {holders} {finish} so the remap takes effect; replace the GPU only "
            "if a remap fails.",
            (),
        )
    if action is Action.RESTART_APP:
        return (
            f"Restart {holders}; NVIDIA's Xid catalog points these XIDs at the application, "
            "not the GPU: if they return, look for illegal memory accesses or a faulty CUDA "
            "kernel (compute-sanitizer).",
            (),
        )
    return (
        f"No action is needed now; check GPU {index} at the next maintenance window "
        "(`nvidia-smi -q -d ROW_REMAPPER,ECC`) and watch for further errors.",
        (),
    )


def _evidence(
    health: _Health,
    msgs: dict[int, str],
    action: Action,
    gpu: str,
    index: str,
    model: str,
    pods: list[str],
    gpu_hours: float,
) -> dict[str, Any]:
    xids = {}
    for c in [*health.active, *health.stale]:
        e = xid.entry(c)
        xids[str(c)] = {
            "meaning": xid.meaning(c, msgs.get(c, "")),
            "catalog_action": e.catalog or "not in gpuaudit's copy of the catalog",
            "action": xid_action(c).value,
            "events": health.active.get(c, 0.0) if health.counted else None,
        }
    return {
        "gpu_uuid": gpu,
        "gpu_index": index,
        "gpu_model": model,
        "action": action.value,
        "xid_codes": list(health.active),
        "stale_xid_codes": health.stale,
        "xids": xids,
        "xid_events_counted": health.counted,
        "ecc_dbe_volatile_max": health.dbe,
        "ecc_dbe_aggregate_max": health.dbe_agg,
        "uncorrectable_remapped_rows_max": health.remapped,
        "row_remap_failure_max": health.failure,
        "row_remap_pending_max": health.pending,
        "pods": pods,
        "gpu_hours_held": round(gpu_hours, 2),
    }

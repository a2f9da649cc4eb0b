"""GPU070 sick GPUs in use: pods hold GPUs that reported XID errors or memory faults.

What it finds
    GPUs held by pods in the window that reported an XID error (`DCGM_FI_DEV_XID_ERRORS`),
    uncorrectable ECC errors (`DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`, `DCGM_FI_DEV_ECC_DBE_AGG_TOTAL`),
    rows remapped for uncorrectable errors (`DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS`) or a
    failed row remap (`DCGM_FI_DEV_ROW_REMAP_FAILURE`).

Why it matters
    Work on a failing GPU is work at risk: jobs crash or hang, results can be silently wrong,
    and a gang's healthy members wait for the sick one. The scheduler keeps placing pods on
    the GPU until someone takes it out of service.

How it decides
    For every GPU (all MIG instances of one GPU together), over the holdings of pods, the
    largest value each signal took in the window (`max_over_time`):
    - an XID gauge value other than 0: every code seen (the query keeps the exporter's
      `err_code`/`err_msg` apart), with its meaning;
    - a volatile or aggregate double-bit ECC count above 0, uncorrectable remapped rows above
      0, or a row-remap failure of 1.
    GPUs with such a signal only while no pod held them are left out (nothing was at risk).
    Severity: critical for a row-remap failure, volatile double-bit ECC errors, or an XID that
    calls for a drain (48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140); high for other XIDs and
    for uncorrectable remapped rows or aggregate double-bit errors; medium when the only XIDs
    are ones applications usually cause (13, 31, 43, 45).
    Impact: the GPU-hours pods held on the GPU in the window, priced per GPU model.
    Skipped when none of these metrics were collected (they must be in dcgm-exporter's
    counters CSV; the ECC totals are off by default).

What to do
    For drain XIDs, remap failures and uncorrectable ECC errors: cordon the node, drain it,
    reset the GPU (or reboot) and, if the error comes back, have the GPU replaced. For
    application XIDs: check the pod's logs for illegal memory accesses or a bad CUDA kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuaudit import xid
from gpuaudit.checks.base import counted, short_model
from gpuaudit.findings import Finding, Impact, Resource, Severity
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C

CODE = "GPU070"
TITLE = "Sick GPUs in use"
REQUIRES = (Capability.GPU_HEALTH,)


@dataclass(frozen=True)
class Thresholds:
    """None: any XID, uncorrectable ECC error or row-remap problem counts."""


_SIGNALS = (C.ECC_DBE_MAX, C.ECC_DBE_AGG_MAX, C.REMAP_UNCORR_MAX, C.REMAP_FAILURE_MAX)


def _codes(text: str) -> list[int]:
    return [int(c) for c in text.split(",") if c.strip().isdigit()]


def _messages(texts: list[str]) -> dict[int, str]:
    out: dict[int, str] = {}
    for text in texts:
        for part in text.split("; "):
            code, sep, msg = part.partition(": ")
            if sep and code.isdigit():
                out.setdefault(int(code), msg)
    return out


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    h = views.held
    if h.empty:
        return []
    h = h.copy()
    h["_gpu"] = h[C.UUID].where(h[C.UUID] != "", h[C.SLOT].str.split("/").str[0])
    signal = h[C.XID_CODES] != ""
    for col in _SIGNALS:
        signal |= h[col].fillna(0) > 0
    sick = h[signal]
    out: list[Finding] = []
    for gpu, grp in sick.groupby("_gpu", sort=True):
        codes = sorted({c for text in grp[C.XID_CODES] for c in _codes(str(text))})
        msgs = _messages([str(m) for m in grp[C.XID_MSG] if m])
        dbe = float(grp[C.ECC_DBE_MAX].fillna(0).max())
        dbe_agg = float(grp[C.ECC_DBE_AGG_MAX].fillna(0).max())
        remapped = float(grp[C.REMAP_UNCORR_MAX].fillna(0).max())
        failure = float(grp[C.REMAP_FAILURE_MAX].fillna(0).max())
        drain = [c for c in codes if c in xid.DRAIN]
        app_only = bool(codes) and all(c in xid.APPLICATION for c in codes)
        if failure > 0 or dbe > 0 or drain:
            severity = Severity.CRITICAL
        elif (codes and not app_only) or remapped > 0 or dbe_agg > 0:
            severity = Severity.HIGH
        else:
            severity = Severity.MEDIUM
        node = str(grp[C.NODE].iloc[0])
        model = str(grp[C.MODEL].iloc[0])
        index = str(grp[C.GPU_INDEX].iloc[0])
        gpu_hours = float(grp[C.GPU_HOURS].sum())
        cost = gpu_hours * views.price(model)
        pods = sorted({f"{ns}/{p}" for ns, p in zip(grp[C.NAMESPACE], grp[C.POD], strict=True)})
        problems = [f"XID {c} ({xid.meaning(c, msgs.get(c, ''))})" for c in codes]
        if failure > 0:
            problems.append("a failed row remap")
        if dbe > 0:
            problems.append(f"{counted(dbe, 'volatile double-bit ECC error')}")
        if dbe_agg > 0 and dbe == 0:
            problems.append(f"{counted(dbe_agg, 'double-bit ECC error')} in its lifetime")
        if remapped > 0:
            problems.append(f"{counted(remapped, 'row')} remapped for uncorrectable errors")
        what = ", ".join(problems[:-1]) + (" and " if len(problems) > 1 else "") + problems[-1]
        holders = ", ".join(pods[:3]) + (f" and {len(pods) - 3} more" if len(pods) > 3 else "")
        message = (
            f"GPU {index} ({short_model(model)}, {gpu}) on node {node} reported {what} while "
            f"pod{'s' if len(pods) > 1 else ''} {holders} held it for {gpu_hours:,.0f} GPU-hours."
        )
        if severity is Severity.CRITICAL:
            rec = (
                f"Cordon and drain node {node} (`kubectl cordon {node}` then `kubectl drain "
                f"{node} --ignore-daemonsets`), reset GPU {index} or reboot the node, and have "
                "the GPU replaced if the error returns; restart the affected pods elsewhere."
            )
        elif app_only and remapped == 0 and dbe_agg == 0:
            rec = (
                f"Check the logs of {holders} for illegal memory accesses or a faulty CUDA "
                "kernel; these XIDs are usually caused by the application, not the GPU."
            )
        else:
            rec = (
                f"Watch GPU {index} on node {node}: run `dcgmi diag -r 3` at the next "
                "maintenance window and drain the node if errors recur."
            )
        out.append(
            Finding(
                code=CODE,
                severity=severity,
                resource=Resource("GPU", "", str(gpu), node, 1.0),
                message=message,
                impact=Impact(gpu_hours=gpu_hours, cost=cost),
                recommendation=rec,
                evidence={
                    "gpu_uuid": str(gpu),
                    "gpu_index": index,
                    "gpu_model": model,
                    "xid_codes": codes,
                    "xid_meanings": {str(c): xid.meaning(c, msgs.get(c, "")) for c in codes},
                    "drain_xids": drain,
                    "ecc_dbe_volatile_max": dbe,
                    "ecc_dbe_aggregate_max": dbe_agg,
                    "uncorrectable_remapped_rows_max": remapped,
                    "row_remap_failure_max": failure,
                    "pods": pods,
                    "gpu_hours_held": round(gpu_hours, 2),
                },
            )
        )
    return out

"""The ledger of every held GPU-hour by cause, beside the attribution ledger
(`gpuaudit.audit.ledger`): the allocated GPU-hours split into causes that do not overlap and
add up exactly to them, fleet-wide, per namespace and per `--group-by-label` value.

Causes, in precedence (a held hour that more than one describes goes to the first listed):

1. `not_measured`: the GPU-hours the attribution ledger's unattributed side holds (pods that
   held GPUs no DCGM series names: unmonitored, or the attribution is unknown), and held
   bucket rows without an activity value;
2. `restarting`: held while a container of the pod was down after its last termination (GPU004's
   measure; earlier restarts are known only by count and stay under the causes below);
3. `starting`: held before the pod's first sustained activity (GPU005's measure);
4. `throttled`: the busy time a throttled card lost (GPU071's measure, `THROTTLED_LOST`); listed
   as not measured, with the reason, where the violation counters were not read;
5. `stalled`: GPU_UTIL high while SM activity stays low (GPU040's per-bucket measure);
6. `idle`: activity below `checks.idle_activity`;
7. `productive`: the rest.

Each cause's rule runs per held hourly bucket row (`gpuaudit.inventory.causes`), with the same
settings the checks use. The headline, effective GPUs, is the productive GPU-hours over the
window's hours, beside the allocated GPUs (the allocated GPU-hours over the window's hours).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuaudit.audit.breakdown import NONE_GROUP
from gpuaudit.audit.ledger import _largest_remainder
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.causes import CAUSES, Rules, by_row

NOT_MEASURED_WHY = (
    "GPU-hours held without an activity value: pods no DCGM series names (the attribution "
    "ledger's unattributed side) and held buckets without an activity sample"
)


@dataclass(frozen=True)
class CauseLedger:
    """Allocated GPU-hours by cause (`CAUSES`), fleet-wide and by group."""

    window_hours: float
    fleet: Mapping[str, float]
    """Cause -> GPU-hours (every cause listed, 0 where none)."""
    by_namespace: Mapping[str, Mapping[str, float]]
    """Namespace -> cause -> GPU-hours."""
    group_label: str = ""
    by_group: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """`--group-by-label` value (`(no label)` without one) -> cause -> GPU-hours; empty without
    the option."""
    not_measured: Mapping[str, str] = field(default_factory=dict)
    """Cause -> why it was not measured (its hours lie under the causes below it)."""

    @property
    def allocated_gpu_hours(self) -> float:
        return float(sum(self.fleet.values()))

    @property
    def effective_gpus(self) -> float:
        """The GPUs' worth of productive time over the window."""
        return self.fleet["productive"] / self.window_hours if self.window_hours > 0 else 0.0

    @property
    def allocated_gpus(self) -> float:
        return self.allocated_gpu_hours / self.window_hours if self.window_hours > 0 else 0.0


def rounded(parts: Mapping[str, float]) -> dict[str, float]:
    """Every cause in hundredths of a GPU-hour, rounded so that they sum to the rounded total
    (largest remainders first)."""
    keyed = {("cause", k): v for k, v in parts.items()}
    out = _largest_remainder(keyed, round(sum(parts.values()) * 100))
    return {k: out[("cause", k)] for k in parts}


def rules_of(checks: Mapping[str, float]) -> Rules:
    """The causes' thresholds from the checks' settings (defaults where a check is absent)."""
    d = Rules()
    return Rules(
        idle_activity=float(checks.get("idle_activity", d.idle_activity)),
        busy_util=float(checks.get("busy_util", d.busy_util)),
        busy_low_activity=float(checks.get("busy_low_activity", d.busy_low_activity)),
        start_activity=float(checks.get("start_activity", d.start_activity)),
        start_sustained_buckets=int(checks.get("start_sustained_buckets", 2)),
    )


def cause_ledger(views: Views, rules: Rules, group_label: str = "") -> CauseLedger:
    """The ledger by cause of the shared views' inventory."""
    inv = views.inv
    rows = views.held_rows
    parts = by_row(views, rules)
    h = inv.holdings
    ns_of_row = h[C.NAMESPACE].to_numpy(dtype=object)[rows.holding]
    pod_of_row = h[C.POD].to_numpy(dtype=object)[rows.holding]
    un = views.unattributed
    un_ns = un[C.NAMESPACE].astype(str).tolist() if not un.empty else []
    un_pod = un[C.POD].astype(str).tolist() if not un.empty else []
    un_h = un[C.GPU_HOURS].to_numpy(dtype="float64") if not un.empty else np.zeros(0)

    def grouped(row_keys: list[str], un_keys: list[str]) -> dict[str, dict[str, float]]:
        names = sorted(set(row_keys) | set(un_keys))
        index = {k: i for i, k in enumerate(names)}
        codes = np.array([index[k] for k in row_keys], dtype=np.intp)
        out = {k: dict.fromkeys(CAUSES, 0.0) for k in names}
        for cause, vals in parts.items():
            totals = np.bincount(codes, weights=vals, minlength=len(names))
            for k, i in index.items():
                out[k][cause] = float(totals[i])
        for k, v in zip(un_keys, un_h.tolist(), strict=True):
            out[k]["not_measured"] += float(v)
        return out

    fleet = grouped(["" for _ in range(len(rows.rows))], ["" for _ in un_ns]).get(
        "", dict.fromkeys(CAUSES, 0.0)
    )
    by_ns = grouped([str(x) for x in ns_of_row], un_ns)
    by_group: dict[str, dict[str, float]] = {}
    if group_label:
        labels = _labels(inv.pods, group_label)
        by_group = grouped(
            [
                labels.get((str(a), str(b)), NONE_GROUP)
                for a, b in zip(ns_of_row, pod_of_row, strict=True)
            ],
            [labels.get(k, NONE_GROUP) for k in zip(un_ns, un_pod, strict=True)],
        )
    not_measured: dict[str, str] = {}
    if Capability.THROTTLING not in inv.capabilities:
        why = inv.missing.get(Capability.THROTTLING, "the violation counters were not read")
        not_measured["throttled"] = f"{why}; those hours lie under the cause their activity shows"
    if Capability.KUBERNETES_PODS not in inv.capabilities:
        why = inv.missing.get(Capability.KUBERNETES_PODS, "the Kubernetes pods were not read")
        not_measured["not_measured"] = (
            f"the GPU-hours pods held without DCGM series are unknown ({why}), so neither "
            "this ledger nor the allocated GPU-hours count them"
        )
    return CauseLedger(inv.window_hours, fleet, by_ns, group_label, by_group, not_measured)


def _labels(pods: Any, group_label: str) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    if pods.empty or C.LABELS not in pods.columns:
        return out
    for ns, pod, lab in zip(pods[C.NAMESPACE], pods[C.POD], pods[C.LABELS], strict=True):
        if isinstance(lab, Mapping) and group_label in lab:
            out[(str(ns), str(pod))] = str(lab[group_label])
    return out

"""The attribution ledger: the allocated GPU-hours by how they were joined to pods, and the
unattributed ones by why not (`gpuaudit.inventory.attribution`).

Allocated GPU-hours are the measured ones (held holdings: DCGM series naming a pod, or joined
to one) plus the ones the Kubernetes API says pods held without any DCGM series naming them:
the two sides of the ledger sum to the summary's `allocated_gpu_hours`, in the report's
hundredths too (each part is rounded so that the parts add up to the rounded total).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.attribution import Method, Reason


@dataclass(frozen=True)
class Ledger:
    """Allocated GPU-hours, attributed by method and unattributed by reason."""

    attributed: Mapping[str, float]
    """`Method` value -> GPU-hours (every method listed, 0 where none)."""
    unattributed: Mapping[str, float]
    """`Reason` value -> GPU-hours (every reason listed, 0 where none)."""
    unattributed_pods: Mapping[str, int]
    """`Reason` value -> pods with GPU-hours for that reason."""
    unknown: str = ""
    """Why the unattributed side is unknown (the Kubernetes pods were not read), empty when it
    is known; its figures then read 0 and say nothing."""

    @property
    def attributed_gpu_hours(self) -> float:
        return float(sum(self.attributed.values()))

    @property
    def unattributed_gpu_hours(self) -> float:
        return float(sum(self.unattributed.values()))

    @property
    def allocated_gpu_hours(self) -> float:
        return self.attributed_gpu_hours + self.unattributed_gpu_hours

    def rounded(self) -> dict[tuple[str, str], float]:
        """Every part in hundredths of a GPU-hour, rounded so that they sum to the rounded
        total (largest remainders first): (`attributed` or `unattributed`, name) -> value."""
        parts = {("attributed", k): v for k, v in self.attributed.items()}
        parts.update({("unattributed", k): v for k, v in self.unattributed.items()})
        return _largest_remainder(parts, round(self.allocated_gpu_hours * 100))


def _largest_remainder(parts: Mapping[tuple[str, str], float], total: int) -> dict[Any, float]:
    hundredths = {k: max(0.0, v) * 100 for k, v in parts.items()}
    floors = {k: int(v // 1) for k, v in hundredths.items()}
    left = total - sum(floors.values())
    order = sorted(hundredths, key=lambda k: (-(hundredths[k] - floors[k]), k))
    for k in order[: max(0, left)]:
        floors[k] += 1
    return {k: floors[k] / 100 for k in parts}


def ledger(views: Views) -> Ledger:
    """The ledger of the shared views' inventory."""
    h = views.inv.holdings
    attributed = {m.value: 0.0 for m in Method}
    if not h.empty:
        held = h[h[C.HELD]]
        sums = held.groupby(C.ATTRIBUTION)[C.GPU_HOURS].sum()
        for method, gpu_hours in sums.items():
            key = str(method) or Method.DCGM_POD_LABEL.value
            attributed[key] = attributed.get(key, 0.0) + float(gpu_hours)
    un = views.unattributed
    unattributed = {r.value: 0.0 for r in Reason}
    pods = {r.value: 0 for r in Reason}
    if not un.empty:
        for reason, group in un.groupby("reason"):
            unattributed[str(reason)] = float(group[C.GPU_HOURS].sum())
            pods[str(reason)] = int(group[[C.NAMESPACE, C.POD]].drop_duplicates().shape[0])
    inv = views.inv
    unknown = ""
    if Capability.KUBERNETES_PODS not in inv.capabilities:
        why = inv.missing.get(Capability.KUBERNETES_PODS, "the Kubernetes pods were not read")
        unknown = f"GPU-hours pods held without DCGM series need the Kubernetes pods ({why})"
    return Ledger(attributed, unattributed, pods, unknown)

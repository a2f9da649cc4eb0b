"""Whether work exchanges data between its GPUs: the evidence the placement checks (GPU030,
GPU031) need before they call a placement slow.

Two kinds of evidence, the first that exists wins:

1. **Measured traffic**: dcgm-exporter's `DCGM_FI_PROF_NVLINK_TX_BYTES`/`_RX_BYTES` and
   `DCGM_FI_PROF_PCIE_TX_BYTES`/`_RX_BYTES` (bytes per second; PCIe is in the exporter's default
   counters, NVLink has to be added to its CSV). Where any of them was collected for the
   work's GPUs, the work communicates when its mean TX + RX per GPU over NVLink, or over PCIe,
   reaches the threshold; below it, it does not, whatever owns it. PCIe also carries
   host-to-device copies, so the threshold is set well above what data loading moves.
2. **A distributed-training owner**, where no traffic was collected: a `PyTorchJob`, `MPIJob`,
   `TFJob`, `JobSet` or `LeaderWorkerSet` (by owner, by gang, or by the labels their
   controllers put on pods: `training.kubeflow.org/job-name`, `jobset.sigs.k8s.io/jobset-name`,
   `leaderworkerset.sigs.k8s.io/name`), a Ray worker group (`ray.io/node-type: worker`), or a
   Volcano job with several tasks (pods labelled `volcano.sh/job-name` whose
   `volcano.sh/task-spec` labels name two or more tasks).

Anything else (a Deployment, StatefulSet or plain Job with several GPUs and no traffic data) is
not known to communicate, and no placement finding is made about it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuaudit.inventory import columns as C

if TYPE_CHECKING:
    from gpuaudit.inventory.tables import Inventory

DISTRIBUTED_KINDS = frozenset({"PyTorchJob", "MPIJob", "TFJob", "JobSet", "LeaderWorkerSet"})
"""Owner and gang kinds whose pods run one job across GPUs and exchange data."""
DISTRIBUTED_LABELS = {
    "training.kubeflow.org/job-name": "a Kubeflow training job",
    "jobset.sigs.k8s.io/jobset-name": "a JobSet",
    "leaderworkerset.sigs.k8s.io/name": "a LeaderWorkerSet",
}
"""Pod labels that their controllers set on the pods of distributed jobs, with their name."""
RAY_NODE_TYPE = "ray.io/node-type"
VOLCANO_JOB = "volcano.sh/job-name"
VOLCANO_TASK = "volcano.sh/task-spec"

PodKey = tuple[str, str]


@dataclass(frozen=True)
class Communication:
    """What is known of whether some work exchanges data between its GPUs."""

    communicates: bool
    basis: str
    """`measured` (link traffic was collected), `owner` (no traffic data; judged by what owns
    it) or `none` (neither says it communicates)."""
    detail: str
    """In words, for messages and evidence."""
    nvlink_gb_s: float | None = None
    """Mean NVLink TX + RX per GPU (GB/s), None where not collected."""
    pcie_gb_s: float | None = None
    """Mean PCIe TX + RX per GPU (GB/s), None where not collected."""

    def evidence(self) -> dict[str, Any]:
        """The evidence fields of a finding."""
        out: dict[str, Any] = {"communication": self.detail, "communication_basis": self.basis}
        if self.nvlink_gb_s is not None:
            out["nvlink_gb_s_per_gpu"] = round(self.nvlink_gb_s, 3)
        if self.pcie_gb_s is not None:
            out["pcie_gb_s_per_gpu"] = round(self.pcie_gb_s, 3)
        return out


def _traffic(inv: Inventory) -> dict[PodKey, tuple[float | None, float | None]]:
    """Per holder pod: mean NVLink and PCIe TX + RX bytes per second per GPU over the
    holdings that have it (weighted by hours held); None where none has it."""
    h = inv.holdings
    if h.empty or C.NVLINK_BPS not in h.columns:
        return {}
    held = h[h[C.HELD] & (h[C.HOURS] > 0)]
    out: dict[PodKey, tuple[float | None, float | None]] = {}
    cols = (C.NAMESPACE, C.POD, C.HOURS, C.NVLINK_BPS, C.PCIE_BPS)
    sums: dict[PodKey, list[float]] = {}
    for ns, pod, hours, nv, pc in zip(*(held[c].tolist() for c in cols), strict=True):
        acc = sums.setdefault((str(ns), str(pod)), [0.0, 0.0, 0.0, 0.0])
        if nv == nv:
            acc[0] += nv * hours
            acc[1] += hours
        if pc == pc:
            acc[2] += pc * hours
            acc[3] += hours
    for key, (nv_sum, nv_h, pc_sum, pc_h) in sums.items():
        if nv_h or pc_h:
            out[key] = (nv_sum / nv_h if nv_h else None, pc_sum / pc_h if pc_h else None)
    return out


def _volcano_tasks(inv: Inventory) -> dict[tuple[str, str], int]:
    """(namespace, Volcano job) -> the number of tasks its pods' labels name."""
    p = inv.pods
    if p.empty:
        return {}
    tasks: dict[tuple[str, str], set[str]] = {}
    for ns, labels in zip(p[C.NAMESPACE].tolist(), p[C.LABELS].tolist(), strict=True):
        if isinstance(labels, Mapping) and labels.get(VOLCANO_JOB):
            job = (str(ns), str(labels[VOLCANO_JOB]))
            tasks.setdefault(job, set()).add(str(labels.get(VOLCANO_TASK, "")))
    return {job: len(t) for job, t in tasks.items()}


class Comms:
    """The communication evidence of an inventory's pods, made once per audit (see
    `gpuaudit.inventory.Views.comms`)."""

    def __init__(self, inv: Inventory) -> None:
        self.traffic = _traffic(inv)
        self.owners: dict[PodKey, str] = {}
        """Pod -> why its owner makes it distributed work, for pods where it does."""
        tasks = _volcano_tasks(inv)
        p = inv.pods
        if p.empty:
            return
        cols = (C.NAMESPACE, C.POD, C.OWNER_KIND, C.LABELS)
        for ns, pod, kind, labels in zip(*(p[c].tolist() for c in cols), strict=True):
            why = _owner_reason(str(ns), str(kind or ""), labels, tasks)
            if why:
                self.owners.setdefault((str(ns), str(pod)), why)

    def judge(self, pods: Sequence[PodKey], gang_kind: str, min_gb_s: float) -> Communication:
        """Whether the work of these pods (members of one gang of `gang_kind`, or one pod
        with an empty kind) exchanges data between its GPUs, and on what evidence."""
        measured = [self.traffic[p] for p in pods if p in self.traffic]
        if measured:
            nv = [v[0] for v in measured if v[0] is not None]
            pc = [v[1] for v in measured if v[1] is not None]
            nv_gb = float(np.mean(nv)) / 1e9 if nv else None
            pc_gb = float(np.mean(pc)) / 1e9 if pc else None
            links = [
                f"{name} {v:.2f} GB/s"
                for name, v in (("NVLink", nv_gb), ("PCIe", pc_gb))
                if v is not None
            ]
            yes = any(v is not None and v >= min_gb_s for v in (nv_gb, pc_gb))
            verdict = "at or above" if yes else "below"
            detail = (
                f"measured mean traffic per GPU ({', '.join(links)}) {verdict} {min_gb_s:g} GB/s"
            )
            return Communication(yes, "measured", detail, nv_gb, pc_gb)
        if gang_kind in DISTRIBUTED_KINDS:
            return Communication(True, "owner", f"a distributed-training {gang_kind}")
        for p in pods:
            if p in self.owners:
                return Communication(True, "owner", self.owners[p])
        return Communication(
            False, "none", "no link traffic collected and no distributed-training owner"
        )


def _owner_reason(ns: str, kind: str, labels: Any, tasks: Mapping[tuple[str, str], int]) -> str:
    if kind in DISTRIBUTED_KINDS:
        return f"a distributed-training {kind}"
    if not isinstance(labels, Mapping):
        return ""
    for label, name in DISTRIBUTED_LABELS.items():
        if labels.get(label):
            return f"{name} ({label}={labels[label]})"
    if labels.get(RAY_NODE_TYPE) == "worker":
        return "a Ray worker group"
    job = labels.get(VOLCANO_JOB)
    if job and tasks.get((ns, str(job)), 0) >= 2:
        return f"a Volcano job with {tasks[(ns, str(job))]} tasks"
    return ""

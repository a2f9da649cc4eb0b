"""The scenario's in-memory model: nodes, GPU slots, pods, and who held what when."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

Arr = np.ndarray[Any, np.dtype[Any]]


@dataclass
class NodeSpec:
    name: str
    kind: str
    """`h100`, `a100-mig` or `l40s`."""
    model: str
    product: str
    gpu_count: int
    ip: str
    exporter_pod: str
    clique: str = ""
    exporter: bool = True
    """Whether dcgm-exporter runs (and is scraped) on this node."""
    labels: dict[str, str] = field(default_factory=dict)
    capacity: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    """`spec.taints` as the API lists them."""
    links: tuple[str, ...] = ()
    """Links whose traffic its dcgm-exporter exports (`pcie`, `nvlink`)."""
    dra: bool = False
    """Whether NVIDIA's DRA driver publishes its GPUs (ResourceSlices) instead of the device
    plugin (`nvidia.com/gpu`)."""
    pod_labels: bool = True
    """Whether its dcgm-exporter labels series with the pods holding them (its Kubernetes
    mapping works)."""
    annotations: dict[str, str] = field(default_factory=dict)
    """`metadata.annotations` (HAMi's device plugin registers its GPUs in one)."""


@dataclass
class SlotSpec:
    """A GPU, or a MIG instance of one, as dcgm-exporter reports it."""

    node: NodeSpec
    index: int
    uuid: str
    pci_bus_id: str
    mig_id: str
    profile: str
    mem_mib: int
    fraction: float
    health: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    """GPU-health metric -> (hour index, value) steps: from that hour on the metric reads that
    value (XID code, remapped rows, remap failure); 0 before the first step."""

    def health_at(self, metric: str, hours: Arr) -> Arr:
        """The metric's value at each (absolute) hour index."""
        vals = np.zeros(len(hours), dtype=np.float64)
        for h, v in sorted(self.health.get(metric, [])):
            vals[hours >= h] = v
        return vals

    @property
    def key(self) -> str:
        return f"{self.uuid}/{self.mig_id}" if self.mig_id else self.uuid


@dataclass
class PodSpec:
    namespace: str
    name: str
    uid: str
    node: str
    container: str
    owner_kind: str
    owner_name: str
    gpus: int = 0
    mig: dict[str, int] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    priority_class: str = ""
    priority: int = 0
    created_h: int = 0
    """Hour index (from window start) the pod was created."""
    alive: bool = True
    """Whether the pod still exists at the window's end (is in the API's list)."""
    phase: str = "Running"
    owner_uid: str = ""
    restarts: int = 0
    last_termination: tuple[str, str] | None = None
    """(reason, message) of the last container termination, if any."""
    last_finished_s: int | None = None
    """Seconds from the window's start its last termination finished at (None: 10 min before
    the window's end); it runs again after the kubelet's back-off unless `waiting`."""
    waiting: str = ""
    """`state.waiting.reason` of its container (`CrashLoopBackOff`); empty: it runs."""
    scheduler_name: str = "default-scheduler"
    preemption_policy: str = ""
    """`spec.preemptionPolicy` as admission resolves it from the PriorityClass; empty: unset."""
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, str]] = field(default_factory=list)
    affinity: dict[str, Any] = field(default_factory=dict)
    """`spec.affinity` as the API lists it (required node affinity); empty: none."""
    link_bps: dict[str, float] = field(default_factory=dict)
    """Bytes per second each way (TX and RX) per GPU over a link (`pcie`, `nvlink`) while it
    holds its GPUs; 0 for a link not listed."""
    pending_message: str = ""
    """The scheduler's message of a Pending pod's PodScheduled=False condition (a default
    naming `nvidia.com/gpu` when empty)."""
    created_delta_s: int = -120
    """Seconds added to the creation hour's start for `creationTimestamp`."""
    start_delay_s: int = 5
    """Seconds from creation to `status.startTime`."""
    finished_h: int | None = None
    """Hour index its containers completed at (phase Succeeded); None while it runs."""
    dra: bool = False
    """Whether it holds its GPUs through a DRA ResourceClaim (driver `gpu.nvidia.com`) rather
    than an `nvidia.com/gpu` request: dcgm-exporter (without its DRA mapping) labels none of
    its series with it."""
    dcgm_hidden: bool = False
    """It holds a replica of a time-sliced GPU that dcgm-exporter labels with another pod (no
    `--kubernetes-virtual-gpus`): no series names it."""
    resources: dict[str, str] = field(default_factory=dict)
    """Further extended resources its container asks for (limits and requests alike), such as
    HAMi's `nvidia.com/gpucores` and `nvidia.com/gpumem`."""
    hami_use: tuple[str, tuple[float, ...], float] | None = None
    """What HAMi's vGPU monitor reports of its container, from its creation hour on: the GPU's
    UUID, its SM utilization of the GPU per hour (per cent, whole numbers) and the most device
    memory it used (bytes); None for a pod HAMi does not place (`scenario.hami_cases`)."""
    serving: tuple[str, tuple[float, ...]] | None = None
    """A serving engine's queue gauge its container exports, scraped from the pod itself: the
    metric's name and its level per hour from its creation hour on (whole numbers, constant
    within the hour); None for a pod that exports none (`scenario.serving_cases`)."""
    cpu: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    """What cAdvisor reports of its container's CPU, per hour from its creation hour on: the
    cores it used and the share of its CFS periods (100 ms, 36,000 an hour) it was throttled
    in; None for a pod whose CPU the scenario does not emit (`scenario.cpu_cases`). Its CPU
    limit is a `resources` entry (`cpu`)."""
    memory: tuple[float, ...] | None = None
    """What cAdvisor reports of its container's working set (`container_memory_working_set_bytes`,
    bytes) per hour from its creation hour on, while the container runs; None for a pod whose
    memory the scenario does not emit (`scenario.cause_cases`). Its memory limit is a
    `resources` entry (`memory`)."""


@dataclass
class Holding:
    """One slot held by one pod (or free, `pod is None`) over hours [h0, h1)."""

    slot: SlotSpec
    pod: PodSpec | None
    h0: int
    h1: int
    act: Arr
    """Per-hour activity level (ratio), length h1 - h0."""
    act_amp: Arr
    fb_used: Arr
    """Per-hour framebuffer used level (MiB, integer valued)."""
    fb_amp: Arr
    power: Arr
    util: Arr
    """Per-hour GPU_UTIL level (percent, integer valued)."""
    util_amp: Arr

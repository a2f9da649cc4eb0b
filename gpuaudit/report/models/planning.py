"""The capacity plan of the JSON report (`capacity`): per GPU product, the GPUs held and busy
per hour, the nodes that ran GPU pods against the fewest nodes the peak hour needed, the same
after releasing the idle reservations the audit found, and each queue's GPU quota against its
use (`gpuaudit.audit.capacity`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import ConfigDict, Field

from gpuaudit.report.models.units import Number, ReportModel, Round2, Round4, Timestamp

WhatIf = Literal["release-idle"]
"""A `--what-if` scenario (`gpuaudit.audit.capacity.WHAT_IFS`)."""
System = Literal["Kueue", "Volcano", "KAI"]
"""A queueing system whose GPU quota the plan reads."""


class Stat(ReportModel):
    """Peak, nearest-rank p95 and mean of hourly values."""

    peak: Round4
    """The largest hourly value."""
    p95: Round4
    """The nearest-rank 95th percentile: the ceil(0.95 n)-th smallest of n hourly values."""
    mean: Round4
    """The hourly values' average."""


class ProductPlan(ReportModel):
    """The capacity figures of one GPU product."""

    nodes: int
    """Nodes of the product (Kubernetes nodes, and nodes only DCGM saw)."""
    nodes_cordoned: int
    """Nodes of the product cordoned at the window's end; they offer no room to the packing."""
    nodes_unlisted: int
    """Nodes of the product only DCGM saw (Kubernetes did not list them): their room is the
    GPUs DCGM saw and they refuse no pod."""
    gpus: Round4
    """Their room in GPUs, cordoned nodes included: allocatable nvidia.com/gpu (or
    nvidia.com/gpu.shared) over the node's replicas; for a MIG node, and a node that advertises
    neither (its GPUs go out through DRA ResourceClaims), its nvidia.com/gpu.count label, else
    the GPUs DCGM saw; for a node only DCGM saw, the GPUs DCGM saw."""
    hours_with_data: int
    """Hours of the window in which DCGM reported some GPU of the product; for a product DCGM
    never reported, the hours in which the Kubernetes API shows some of its GPUs held."""
    gpus_held: Stat
    """GPUs held by pods per hour: every GPU DCGM shows held by a pod, and every GPU the
    Kubernetes API shows a pod holding where no DCGM series names the pod (a node without an
    exporter, a DRA ResourceClaim no series could be joined to, a pod no series names; in the
    hours the pod ran in, from the hour it started in to the hour it ended in or the window's
    last, less those the Kubernetes-side join gave it its devices in; see
    `gpus_without_dcgm`). A
    pod's whole GPUs count one each and a time-sliced replica 1/replicas. A MIG-partitioned
    GPU counts as one held GPU in an hour when any of its instances is held, whatever their
    share of it, never the sum of the instances' fractions: a GPU with an instance held cannot
    go whole to other work, and the packing behind `min_nodes_at_peak` moves it whole, so the
    plan counts physical GPUs. MIG instances held without DCGM series (which physical GPU they
    sit on is not known) first fill the room the node's MIG GPUs DCGM shows held leave (1 less
    the fractions of their held instances), then count as the fewest GPUs the rest fits on:
    its fractions on the node, added and rounded up. A GPU KAI Scheduler reserves for its
    fraction pods counts as one held GPU in an hour when its reservation pod or a fraction pod
    holds it, whatever their shares. Over the window's hourly values (`hours_with_data`):
    the largest, the nearest-rank 95th percentile (the ceil(0.95 n)-th smallest of n) and the
    mean."""
    gpus_busy: Stat
    """Held GPUs in hours whose mean engine activity is at or above the idle threshold (GPUs of
    unknown activity are not busy; see `gpus_activity_unknown`). Over the window's hourly
    values (`hours_with_data`): the largest, the nearest-rank 95th percentile (the
    ceil(0.95 n)-th smallest of n) and the mean."""
    gpus_activity_unknown: Stat
    """Held GPUs whose activity is unknown, neither busy nor idle: those without DCGM series
    (`gpus_without_dcgm`), and those whose series have no activity sample in the hour (MIG
    instances with GPU_UTIL only). Part of `gpus_held`; per hour, as `gpus_held`."""
    gpus_without_dcgm: Stat
    """Held GPUs that the Kubernetes API shows and no DCGM series measures (the attribution
    ledger's unattributed side, counted per hour). Part of `gpus_held`; per hour, as
    `gpus_held`."""
    nodes_ran_gpu_pods: int
    """Nodes on which some pod held a GPU in the window: DCGM's, and the nodes of the pods the
    Kubernetes API shows holding GPUs without DCGM series."""
    nodes_without_dcgm: int
    """Of `nodes_ran_gpu_pods`, the nodes no DCGM series came from (no exporter)."""
    min_nodes_at_peak: int
    """Nodes the holdings of the peak held hour (those without DCGM series included) fit on,
    packed first fit decreasing onto the nodes that admit them as the scheduler's filters
    decide (node selector, required node affinity, taints against tolerations, allocatable of
    the resource asked for; cordoned nodes offer no room): a pod's GPUs on one node, a
    MIG-partitioned GPU as one GPU on a node offering its profiles, a shared replica as
    1/replicas of one on a node shared as many ways, whole-node gang members a node each; a
    unit left without a place then takes the place of one unit moved out of its way (to
    another opened node, else to an unused one, opened for it)."""
    peak_hour: Timestamp | None
    """End of the hour with the most GPUs held (RFC 3339, UTC); null without data."""
    unplaced_gpus: Round4
    """GPUs of the peak hour that fit no node, even after moving one unit out of their way
    (not counted in `min_nodes_at_peak`)."""
    nodes_used_at_peak: tuple[str, ...]
    """The nodes the packing of the peak hour used, in the order it opened them."""
    whole_node_gang_members_at_peak: int
    """Units of the peak hour packed a node each as members of a gang whose members each held a
    whole node."""
    units_without_pod_spec_at_peak: int
    """Units of the peak hour holding a pod whose spec Kubernetes did not return (placed on any
    node of the product offering GPUs the same way)."""


class ProductAfterRelease(ProductPlan):
    """The capacity figures of one GPU product after releasing the idle reservations, and what
    releasing them freed."""

    released_reservations: int
    """Released pods (GPU001, GPU002) that held GPUs of this product in what was released."""
    nodes_freed: int
    """`min_nodes_at_peak` before release minus after (never below 0)."""
    gpus_freed: Round4
    """The GPUs of those nodes."""
    cost_freed: Round2
    """`gpus_freed` x the window's hours x the price per GPU-hour of the product."""


class ReleasedHolding(ReportModel):
    """An idle reservation released, per finding."""

    # `from` is a Python keyword: the field is `from_`, written as `from`.
    model_config = ConfigDict(serialize_by_alias=True)

    pod: str
    """`namespace/pod`."""
    code: Literal["GPU001", "GPU002"]
    """The finding's check: GPU001's pod is released for the whole window, GPU002's from the
    start of its idle tail."""
    from_: Timestamp | None = Field(alias="from")
    """Where the release starts: the start of GPU002's idle tail (RFC 3339, UTC); null for the
    whole window."""


class AfterRelease(ReportModel):
    """The plan after releasing the idle reservations GPU001 and GPU002 found (after waivers):
    always here; the other formats show it with `--what-if release-idle`."""

    released_reservations: int | None
    """Idle reservations released (pods of GPU001 and GPU002 findings after waivers, each
    once); null when neither check ran."""
    released: tuple[str, ...] | None
    """`namespace/pod` of each, sorted; null when neither check ran."""
    released_holdings: tuple[ReleasedHolding, ...] | None
    """What was released, per finding: GPU001's pod for the whole window (`from` null), GPU002's
    pod from the start of its idle tail; null when neither check ran."""
    note: str
    """Which of GPU001 and GPU002 did not run, and why; empty when both ran."""
    by_product: Mapping[str, ProductAfterRelease]
    """Per GPU product, as in `capacity.by_product`."""


class Queue(ReportModel):
    """One GPU resource of one flavor of one queue over the window. Quantities are in the
    resource's units (GPUs, or MIG slices for `nvidia.com/mig-*`); GPU-hours in whole-GPU
    equivalents (a slice counts its share of a GPU)."""

    system: System
    """The queueing system."""
    kind: str
    """ClusterQueue (Kueue) or Queue (Volcano, KAI Scheduler)."""
    queue: str
    """The queue's name."""
    cohort: str
    """Kueue cohort; a Volcano queue's parent; a KAI queue's parentQueue."""
    flavor: str
    """Kueue ResourceFlavor; empty for Volcano."""
    resource: str
    """nvidia.com/gpu or nvidia.com/mig-<profile>."""
    quota: Number
    """Kueue nominalQuota; Volcano deserved, else guarantee; KAI quota, 0 where unlimited
    (resource units)."""
    guarantee: Number
    """Volcano guarantee (resource units); 0 for Kueue."""
    borrowing_limit: Number | None
    """Kueue borrowingLimit (resource units); null for no limit."""
    lending_limit: Number | None
    """Kueue lendingLimit (resource units); null for no limit (all of it may be lent in a
    cohort)."""
    flavor_allocatable: Number | None
    """What the flavor's schedulable nodes allocate of the resource; null when unknown."""
    quota_gpu_hours: Round2
    """The quota over the window's hours, in GPU-hours."""
    admitted_gpu_hours: Round2
    """GPU-hours admitted under the quota (Kueue Workloads from the time their quota was
    reserved; a lower bound, the API keeps no history); Volcano: what the queue's pods held."""
    held_gpu_hours: Round2
    """GPU-hours the queue's pods held on the flavor's nodes (DCGM)."""
    busy_gpu_hours: Round2
    """Of those, the hours whose mean engine activity was at or above the idle threshold."""
    peak_admitted: Round4
    """Most admitted at any one time (Kueue Workloads; Volcano: its pods, or its allocation)."""
    peak_held: Round4
    """Most the queue's pods held in one hour (DCGM)."""
    peak_held_in_namespaces: Round4
    """Most any pod of the namespaces that submit to the queue held on the flavor's nodes in one
    hour (DCGM), whether or not the pod is still known: an upper bound on the queue's use."""
    pending_workloads: int
    """Workloads waiting now for GPU quota of the queue."""


class Capacity(ReportModel):
    """The capacity plan: per GPU product (nvidia.com/gpu.product, else the DCGM model), GPUs
    held and busy per hour, nodes that ran GPU pods against the fewest nodes the peak hour
    needed (packed with the scheduler feasibility model), and the same after releasing the idle
    reservations GPU001 and GPU002 found (always present; the other formats show it with
    `--what-if release-idle`). Every assumption is in `assumptions`."""

    window_hours: Round2
    """The window's length in hours."""
    idle_activity: Number
    """The idle threshold: a GPU is busy in an hour whose mean engine activity reaches it."""
    currency: str
    """The currency of `cost_freed`."""
    headlines: tuple[str, ...]
    """One sentence per product."""
    assumptions: tuple[str, ...]
    """What the figures assume, one sentence each."""
    notes: tuple[str, ...]
    """What the figures cannot see, one sentence each: per product, how many GPUs held in an
    hour are of unknown activity (held without DCGM series, or without an activity sample);
    without the Kubernetes pods, that GPUs held without DCGM series are not counted."""
    by_product: Mapping[str, ProductPlan]
    """Per GPU product, by name."""
    what_if: tuple[WhatIf, ...]
    """The `--what-if` scenarios asked for: with release-idle the headlines and the other
    formats carry the after-release figures; `after_release_idle` is here either way."""
    after_release_idle: AfterRelease
    """The plan after releasing the idle reservations the audit found."""
    queues: tuple[Queue, ...]
    """Every GPU quota line of every Kueue ClusterQueue and Volcano Queue over the window (empty
    without queue objects)."""

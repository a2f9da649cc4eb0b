"""The inventory: the frozen, joined tables of one snapshot, and the columns of each table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuaudit.inventory import columns as C
from gpuaudit.inventory.capabilities import Capability
from gpuaudit.inventory.container_cpu import ContainerCpu
from gpuaudit.inventory.container_memory import ContainerMemory
from gpuaudit.inventory.hami import Tenancy
from gpuaudit.inventory.owners import Owners
from gpuaudit.inventory.queues import Queues
from gpuaudit.inventory.serving_metrics import Serving

if TYPE_CHECKING:
    import pandas as pd

    from gpuaudit.domain.topology import Topology

LABEL_COLUMNS = [
    C.SLOT,
    C.UUID,
    C.GPU_INDEX,
    C.MIG_ID,
    C.MIG_PROFILE,
    C.MODEL,
    C.NODE,
    C.NAMESPACE,
    C.POD,
    C.CONTAINER,
    C.HELD,
    C.ATTRIBUTION,
    C.CLUSTER,
]
IDENTITY_COLUMNS = [*LABEL_COLUMNS, C.XID_CODES, C.XID_MSG, C.XID_EVENTS]
"""Holding columns taken from each series' labels (and the pods' nodes)."""
HEALTH_QUERIES = {
    C.REMAP_UNCORR_MAX: "remap_uncorr_max",
    C.REMAP_FAILURE_MAX: "remap_failure_max",
    C.REMAP_PENDING_MAX: "remap_pending_max",
    C.ECC_DBE_MAX: "ecc_dbe_max",
    C.ECC_DBE_AGG_MAX: "ecc_dbe_agg_max",
}
"""Holding columns of GPU-health counters and gauges, by the query that fills them."""
THROTTLE_COLUMNS = (
    C.POWER_VIOLATION_S,
    C.THERMAL_VIOLATION_S,
    C.SM_CLOCK_MEAN,
    C.SM_CLOCK_MAX,
    C.THROTTLED_SHARE,
    C.THROTTLED_LOST,
)
"""Holding columns of throttling (see `gpuaudit.inventory.throttling`)."""
HOLDING_COLUMNS = [
    C.HOLDING,
    *LABEL_COLUMNS,
    C.FRACTION,
    C.REPLICAS,
    C.FIRST_TS,
    C.LAST_TS,
    C.HOURS,
    C.GPU_HOURS,
    C.ACT_MEAN,
    C.ACT_MAX,
    C.ACT_P95,
    C.ACT_COUNT,
    C.ACT_SOURCE,
    C.ACT_APPROX,
    C.UTIL_MEAN,
    C.FB_USED_MEAN,
    C.FB_USED_MAX,
    C.FB_USED_P95,
    C.FB_FREE_MEAN,
    C.MEM_TOTAL_MIB,
    C.POWER_MEAN,
    C.POWER_LIMIT,
    C.XID_MAX,
    C.XID_CODES,
    C.XID_MSG,
    C.XID_EVENTS,
    *HEALTH_QUERIES,
    C.NVLINK_BPS,
    C.PCIE_BPS,
    *THROTTLE_COLUMNS,
]
GPU_COLUMNS = [
    C.SLOT,
    C.UUID,
    C.GPU_INDEX,
    C.MIG_ID,
    C.MIG_PROFILE,
    C.MODEL,
    C.NODE,
    C.FRACTION,
    C.MEM_TOTAL_MIB,
]
POD_COLUMNS = [
    C.LABELS,
    C.RESTARTS,
    C.LAST_TERMINATION,
    C.CONTAINERS,
    C.NAMESPACE,
    C.POD,
    C.UID,
    C.PHASE,
    C.NODE,
    C.OWNER_KIND,
    C.OWNER_NAME,
    C.PRIORITY,
    C.PRIORITY_CLASS,
    C.GPU_REQUEST,
    C.MIG_REQUEST,
    C.CREATED,
    C.STARTED,
    C.FINISHED,
    C.PREEMPTION_POLICY,
    C.UNSCHEDULABLE,
    C.PENDING_SINCE,
    C.SCHED_MESSAGE,
    C.SELECTOR_PRODUCTS,
    C.SCHEDULER,
    C.CONSTRAINTS,
    C.REQUESTS,
    C.GANG,
]
NODE_COLUMNS = [
    C.NODE,
    C.PRODUCT,
    C.GPU_COUNT,
    C.CAPACITY_GPU,
    C.ALLOCATABLE_GPU,
    C.MIG_CAPACITY,
    C.CLIQUE,
    C.MIG_STRATEGY,
    C.POOL,
    C.CORDONED,
    C.NODE_LABELS,
    C.TAINTS,
    C.ALLOCATABLE,
    C.GPU_REPLICAS,
]
GANG_COLUMNS = [
    C.GANG_ID,
    C.GANG_KIND,
    C.NAMESPACE,
    C.GANG_NAME,
    C.NEEDED,
    C.GANG_PHASE,
    C.GANG_SIGNAL,
    C.GANG_SOURCE,
]
P2P_COLUMNS = [C.NODE, C.GPU_INDEX, C.PEER_INDEX, C.P2P_STATUS]


def frame(columns: list[str]) -> pd.DataFrame:
    """An empty table with these columns."""
    import pandas as pd

    out: pd.DataFrame = pd.DataFrame(columns=columns)
    return out


def _empty_gangs() -> pd.DataFrame:
    return frame(GANG_COLUMNS)


def _empty_p2p() -> pd.DataFrame:
    return frame(P2P_COLUMNS)


@dataclass(frozen=True)
class Inventory:
    """Joined tables of one snapshot. Column names live in `gpuaudit.inventory.columns`.

    Frozen, and so are the views made from it (`gpuaudit.inventory.Views`): nothing downstream
    changes a table or keeps anything with it."""

    window_start: float
    window_end: float
    step_s: int
    cluster: str
    gpus: pd.DataFrame
    """One row per GPU or MIG instance seen in DCGM."""
    holdings: pd.DataFrame
    """One row per (GPU or MIG instance, holder) with its window metric summaries."""
    hourly: pd.DataFrame
    """One row per (holding, bucket end) with mean activity in that bucket."""
    pods: pd.DataFrame
    """Pods from the Kubernetes API (empty when the API was not read)."""
    nodes: pd.DataFrame
    """GPU nodes: from the Kubernetes API, else from DCGM host labels."""
    capabilities: frozenset[Capability] = frozenset()
    """What data exists (see `Capability`)."""
    missing: Mapping[Capability, str] = field(default_factory=dict)
    """Capability -> why it is missing, for skipped checks."""
    warnings: tuple[str, ...] = ()
    complete: bool = True
    incomplete_reasons: tuple[str, ...] = ()
    gangs: pd.DataFrame = field(default_factory=_empty_gangs)
    """One row per gang (PodGroup, Kueue Workload, training job, JobSet ...); pods name theirs
    in the `gang` column."""
    p2p: pd.DataFrame = field(default_factory=_empty_p2p)
    """NVLink P2P status per (node, GPU index, peer index), where the exporter reports it."""
    topologies: Mapping[str, Topology | None] = field(default_factory=dict)
    """Node -> its best-known GPU-to-GPU links (a `--topology` file, the built-in table by
    product, DCGM P2P status on top), for every node with whole GPUs in DCGM or P2P status;
    None where they cannot be known."""
    queues: Queues = field(default_factory=Queues)
    """Kueue and Volcano queues, their quota and what was admitted under it (see
    `gpuaudit.inventory.queues`)."""
    owners: Owners = field(default_factory=Owners)
    """The controllers read that own GPU pods, and the pods' references to them: where a
    pod's `ownerReferences` lead (see `gpuaudit.inventory.owners`)."""
    memory: ContainerMemory = field(default_factory=ContainerMemory)
    """cAdvisor's most working-set memory of GPU pods' containers in the window and their
    memory limits (see `gpuaudit.inventory.container_memory`)."""

    scrape_interval_s: float | None = None
    """The scrape interval detected from the samples per bucket (seconds); None when it could
    not be (see `gpuaudit.inventory.held`)."""
    cluster_label: str = ""
    """The label a scan of every cluster kept clusters apart by (`--cluster-label NAME`); empty
    for a scan of one cluster."""
    clusters: tuple[str, ...] = ()
    """The clusters of a scan of every cluster, sorted: those discovery listed and those the
    series name."""
    p95_of_window: bool = False
    """Whether the p95s are over the whole window (a snapshot written before the hourly p95s,
    issue 37), not the largest hourly p95: the checks then say so."""
    held_time_rounded: bool = False
    """Whether some held time is counted in whole buckets (no sample counts, or no interval
    known) rather than as samples x the scrape interval; a warning says why."""
    hami: Tenancy = field(default_factory=Tenancy)
    """Pods holding GPU shares through HAMi, their grants and what HAMi measured of them (see
    `gpuaudit.inventory.hami`)."""
    serving: Serving = field(default_factory=Serving)
    """The pods that export a serving engine's queue or request gauge, each one's busy level,
    and the Prometheus they were read from (see `gpuaudit.inventory.serving_metrics`)."""
    cpu: ContainerCpu = field(default_factory=ContainerCpu)
    """cAdvisor's CPU of GPU pods' containers per bucket and their CPU requests and limits (see
    `gpuaudit.inventory.container_cpu`)."""
    namespaces: tuple[str, ...] = ()
    """`--namespace`: the namespaces the inventory was narrowed to (`gpuaudit.inventory.scope`);
    empty for the whole cluster."""
    unattributed: pd.DataFrame | None = None
    """A narrowed inventory's unattributed rows (`Views.unattributed`), made before it was
    narrowed, so that each reason is judged over every node's series; None: made from this
    inventory."""

    @property
    def window_hours(self) -> float:
        return (self.window_end - self.window_start) / 3600.0

"""What data an inventory holds: the capabilities checks declare they need.

Each capability is a member of `Capability`, made only here and in the inventory builder, so a
check that names one that does not exist fails when its module is loaded instead of being
skipped forever. A member's value is the name reports and `gpuaudit checks` show.
"""

from __future__ import annotations

import enum


class Capability(str, enum.Enum):
    """One kind of data an inventory may hold."""

    ACTIVITY = "activity"
    """Engine activity per GPU: DCGM profiling (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`) or
    `DCGM_FI_DEV_GPU_UTIL`."""
    PROFILING = "profiling"
    """DCGM profiling series (`DCGM_FI_PROF_*`)."""
    GPU_UTIL = "gpu_util"
    """`DCGM_FI_DEV_GPU_UTIL`."""
    FRAMEBUFFER = "framebuffer"
    """Framebuffer used and free (`DCGM_FI_DEV_FB_USED`, `DCGM_FI_DEV_FB_FREE`)."""
    SM_ACTIVE = "sm_active"
    """SM activity per bucket (`DCGM_FI_PROF_SM_ACTIVE`)."""
    TENSOR_ACTIVE = "tensor_active"
    """Tensor-pipe activity per bucket (`DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`)."""
    GPU_HEALTH = "gpu_health"
    """XID errors, row remapping or ECC counters."""
    XID_EVENTS = "xid_events"
    """XID events counted as changes of the XID gauge (the `xid_events` query was answered)."""
    P2P_STATUS = "p2p_status"
    """NVLink P2P status between GPU pairs (`DCGM_EXP_P2P_STATUS`)."""
    THROTTLING = "throttling"
    """Power or thermal violation counters (`DCGM_FI_DEV_POWER_VIOLATION`,
    `DCGM_FI_DEV_THERMAL_VIOLATION`): the time each GPU was throttled."""
    CONTAINER_CPU = "container_cpu"
    """cAdvisor's CPU use and CFS throttling of GPU pods' containers per bucket
    (`container_cpu_usage_seconds_total`, `container_cpu_cfs_periods_total`,
    `container_cpu_cfs_throttled_periods_total`; see `gpuaudit.inventory.container_cpu`)."""
    KUBERNETES_PODS = "kubernetes.pods"
    KUBERNETES_NODES = "kubernetes.nodes"
    KUBERNETES_PRIORITYCLASSES = "kubernetes.priorityclasses"
    KUBERNETES_VOLCANO_PODGROUPS = "kubernetes.volcano_podgroups"
    KUBERNETES_COSCHEDULING_PODGROUPS = "kubernetes.coscheduling_podgroups"
    KUBERNETES_KUEUE_WORKLOADS = "kubernetes.kueue_workloads"
    KUBERNETES_KUEUE_CLUSTERQUEUES = "kubernetes.kueue_clusterqueues"
    KUBERNETES_KUEUE_LOCALQUEUES = "kubernetes.kueue_localqueues"
    KUBERNETES_KUEUE_RESOURCEFLAVORS = "kubernetes.kueue_resourceflavors"
    KUBERNETES_KUEUE_COHORTS = "kubernetes.kueue_cohorts"
    KUBERNETES_VOLCANO_QUEUES = "kubernetes.volcano_queues"
    KUBERNETES_KAI_QUEUES = "kubernetes.kai_queues"
    KUBERNETES_KAI_PODGROUPS = "kubernetes.kai_podgroups"
    KUBERNETES_PYTORCHJOBS = "kubernetes.pytorchjobs"
    KUBERNETES_MPIJOBS = "kubernetes.mpijobs"
    KUBERNETES_JOBSETS = "kubernetes.jobsets"
    KUBERNETES_LEADERWORKERSETS = "kubernetes.leaderworkersets"
    KUBERNETES_RAYCLUSTERS = "kubernetes.rayclusters"
    KUBERNETES_RESOURCECLAIMS = "kubernetes.resourceclaims"
    KUBERNETES_RESOURCESLICES = "kubernetes.resourceslices"
    HAMI = "hami"
    """Pods holding GPU shares through HAMi, with what HAMi's vGPU monitor measured of them
    (see `gpuaudit.inventory.hami`)."""
    QUEUES = "queues"
    """Queue quotas with what was admitted under them: Kueue ClusterQueues with their
    Workloads, Volcano Queues with their PodGroups, or KAI Scheduler Queues with their
    PodGroups (see `gpuaudit.inventory.queues`)."""

    @classmethod
    def of_list(cls, key: str) -> Capability | None:
        """The capability of a Kubernetes list read under `key` (a snapshot's `kubernetes`
        section); None for a list no capability names."""
        try:
            return cls(f"kubernetes.{key}")
        except ValueError:
            return None

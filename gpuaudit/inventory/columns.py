"""Column names of the inventory tables. Checks use these constants, never string literals."""

from __future__ import annotations

# identity of a GPU or MIG instance ("slot")
SLOT = "slot"
UUID = "uuid"
GPU_INDEX = "gpu_index"
MIG_ID = "mig_id"
MIG_PROFILE = "mig_profile"
MODEL = "model"
NODE = "node"
FRACTION = "gpu_fraction"
MEM_TOTAL_MIB = "mem_total_mib"

# holder identity
NAMESPACE = "namespace"
CLUSTER = "cluster"
"""The cluster of a scan of every cluster (`--cluster-label NAME`); empty otherwise."""
POD = "pod"
CONTAINER = "container"
HELD = "held"
HOLDING = "holding"
ATTRIBUTION = "attribution"
"""How the holding was joined to its pod: a `gpuaudit.inventory.attribution.Method` value
(empty for a GPU no pod held)."""
REPLICAS = "replicas"
"""Replicas the holding's device is shared into by time-slicing or MPS (1: not shared); a held
holding's `FRACTION` is its device's over them (see `gpuaudit.inventory.sharing`)."""

# holding time
FIRST_TS = "first_ts"
LAST_TS = "last_ts"
HOURS = "hours"
"""Hours held: the holding's activity samples x the scrape interval (whole buckets where the
samples per bucket are unknown)."""
GPU_HOURS = "gpu_hours"
"""`HOURS` x the holding's fraction of a GPU."""
TS = "ts"
HELD_H = "held_h"
"""Hourly table: hours the holding held its GPU in the bucket, its activity samples there x the
scrape interval (the whole bucket where unknown). Buckets are a grid; this is the held time in
each."""

# window metric summaries (activity is a ratio 0..1 whatever its source)
ACT_MEAN = "act_mean"
ACT_MAX = "act_max"
ACT_P95 = "act_p95"
ACT_COUNT = "act_count"
ACT_SOURCE = "act_source"
ACT_APPROX = "act_p95_approx"
UTIL_MEAN = "util_mean"
FB_USED_MEAN = "fb_used_mean"
FB_USED_MAX = "fb_used_max"
FB_USED_P95 = "fb_used_p95"
FB_FREE_MEAN = "fb_free_mean"
POWER_MEAN = "power_mean"
"""Mean power draw (W) over the holding's samples of `DCGM_FI_DEV_POWER_USAGE` (the whole GPU's
draw, also on a MIG instance)."""
POWER_LIMIT = "power_limit"
"""The highest power management limit (W) in the window (`DCGM_FI_DEV_POWER_MGMT_LIMIT`); NaN
where it is not exported."""
# GPU health over the window (largest value seen; 0 = none)
XID_MAX = "xid_max"
XID_CODES = "xid_codes"
"""Every non-zero XID code seen, comma-separated in ascending order (`"13,79"`)."""
XID_MSG = "xid_msg"
"""The exporter's `err_msg` text per code seen (`"79: GPU has fallen off the bus"`)."""
XID_EVENTS = "xid_events"
"""XID events in the window per code, as changes of the gauge into that code
(`"63:1,79:2"`); empty when none were seen or they were not counted (see
`Capability.XID_EVENTS`)."""
REMAP_UNCORR_MAX = "remap_uncorr_max"
REMAP_FAILURE_MAX = "remap_failure_max"
REMAP_PENDING_MAX = "remap_pending_max"
ECC_DBE_MAX = "ecc_dbe_max"
ECC_DBE_AGG_MAX = "ecc_dbe_agg_max"
ACT = "act"
UTIL = "util"
SM = "sm"
TENSOR = "tensor"
RESTARTS = "restarts"
LABELS = "labels"
LAST_TERMINATION = "last_termination"
CONTAINERS = "containers"
"""Of a pod: its containers' restarts, current state and last termination, a tuple of
`gpuaudit.inventory.crashes.Container`."""

# pods
UID = "uid"
PHASE = "phase"
OWNER_KIND = "owner_kind"
OWNER_NAME = "owner_name"
PRIORITY = "priority"
PRIORITY_CLASS = "priority_class"
GPU_REQUEST = "gpu_request"
MIG_REQUEST = "mig_request"
CREATED = "created"
STARTED = "started"
FINISHED = "finished"
"""When a pod in phase Succeeded or Failed ended: the latest `finishedAt` of its containers'
terminated states; None for a pod that has not ended, or whose end is not recorded."""
SPANS = "spans"
"""Of a row of the attribution ledger's unattributed side (`attribution.unattributed`): the
buckets of the window its hours lie in, as `(first, end, part)` triples: buckets `first` to
`end - 1` (0 for the bucket that ends one step after the window's start), in each of which
the pod held `part` of the row's GPUs in some part of the bucket."""
PREEMPTION_POLICY = "preemption_policy"
UNSCHEDULABLE = "unschedulable"
"""The pod's PodScheduled condition is False with reason Unschedulable."""
PENDING_SINCE = "pending_since"
"""When it became unschedulable (the condition's lastTransitionTime, else its creation)."""
SCHED_MESSAGE = "sched_message"
SELECTOR_PRODUCTS = "selector_products"
"""GPU products the pod is pinned to by nodeSelector or required node affinity on
`nvidia.com/gpu.product`, comma-separated; empty when it may run on any."""
SCHEDULER = "scheduler"
CONSTRAINTS = "constraints"
"""The pod's node selector, required node affinity and tolerations, as a
`gpuaudit.inventory.feasibility.Constraints`."""
REQUESTS = "requests"
"""Extended resources (`nvidia.com/...`) the pod requests, resource -> quantity, as the
scheduler counts them (init containers included)."""
GANG = "gang"
"""The id of the gang the pod belongs to (see the gangs table), or empty."""

# nodes
PRODUCT = "product"
GPU_COUNT = "gpu_count"
CAPACITY_GPU = "capacity_gpu"
ALLOCATABLE_GPU = "allocatable_gpu"
MIG_CAPACITY = "mig_capacity"
CLIQUE = "clique"
MIG_STRATEGY = "mig_strategy"
POOL = "pool"
"""The node pool: a cloud or Karpenter node-pool label when present, else the GPU product."""
CORDONED = "cordoned"
NODE_LABELS = "node_labels"
"""The node's labels, name -> value."""
TAINTS = "taints"
"""The node's taints, a tuple of `gpuaudit.inventory.feasibility.Taint`."""
ALLOCATABLE = "allocatable"
"""Allocatable extended resources (`nvidia.com/...`), resource -> quantity."""
GPU_REPLICAS = "gpu_replicas"
"""GPU sharing replicas (`nvidia.com/gpu.replicas`, 1 when absent); on a node HAMi shares, each
GPU's split count (allocatable `nvidia.com/gpu` over the GPUs it registered; see
`gpuaudit.inventory.sharing.with_split_devices`)."""

# gangs (pods that must run together)
GANG_ID = "gang_id"
"""`Kind/namespace/name`, unique per gang."""
GANG_KIND = "gang_kind"
GANG_NAME = "gang_name"
NEEDED = "needed"
"""Members the gang needs to run (minMember, podSet counts, replicas); NaN when unknown."""
GANG_PHASE = "gang_phase"
GANG_SIGNAL = "gang_signal"
"""A partial-gang signal its scheduler reported (PodGroup phase Unknown or Scheduling, a Kueue
Workload Admitted without PodsReady), or empty."""
GANG_SOURCE = "gang_source"
"""Where the gang and its size came from (`scheduling.volcano.sh/v1beta1 PodGroup`, a pod
annotation ...)."""

# NVLink P2P status between GPU pairs (DCGM_EXP_P2P_STATUS)
PEER_INDEX = "peer_index"
P2P_STATUS = "p2p_status"

# GPU-to-GPU traffic (holdings): mean TX + RX bytes per second over the window, NaN unmeasured
NVLINK_BPS = "nvlink_bps"
"""`DCGM_FI_PROF_NVLINK_TX_BYTES` + `_RX_BYTES` means (bytes/s)."""
PCIE_BPS = "pcie_bps"
"""`DCGM_FI_PROF_PCIE_TX_BYTES` + `_RX_BYTES` means (bytes/s)."""

# throttling (holdings, see `gpuaudit.inventory.throttling`): NaN where unmeasured
POWER_VIOLATION_S = "power_violation_s"
"""Seconds the GPU's clocks were held down by its power limit while the holding held it (the
increase of `DCGM_FI_DEV_POWER_VIOLATION`, ns, over the window)."""
THERMAL_VIOLATION_S = "thermal_violation_s"
"""The same for thermal limits (`DCGM_FI_DEV_THERMAL_VIOLATION`)."""
SM_CLOCK_MEAN = "sm_clock_mean"
"""Mean SM clock (MHz) over the holding's samples of `DCGM_FI_DEV_SM_CLOCK`."""
SM_CLOCK_MAX = "sm_clock_max"
"""The GPU's maximum SM clock (MHz, `DCGM_FI_DEV_MAX_SM_CLOCK`), where exported."""
THROTTLED_SHARE = "throttled_share"
"""The share of the holding's held time its GPU was throttled: the longer of its power and
thermal violation times over its held seconds, at most 1."""
THROTTLED_LOST = "throttled_lost"
"""Busy GPU-hours lost to throttling: the holding's busy GPU-hours (`ACT_MEAN` x `GPU_HOURS`)
x `THROTTLED_SHARE`, so never above its busy GPU-hours; NaN where neither violation counter was
measured (not zero: unmeasured is not unthrottled)."""

# views (see `gpuaudit.inventory.views`)
POD_GPUS = "pod_gpus"
"""Per holder pod: the GPUs it held, in whole-GPU equivalents."""
COST = "cost"
"""Per holder pod: its GPU-hours priced per GPU model."""
WAITED = "waited_h"
"""Per pod waiting for GPUs: hours it has waited at the window's end."""
REQUESTED = "requested"
"""Per GPU node: whole GPUs requested by pods bound to it that have not finished."""
FREE = "free"
"""Per GPU node: allocatable whole GPUs not requested."""

# HAMi tenants (see `gpuaudit.inventory.hami`)
HAMI_SHARE_BY = "hami_share_by"
"""What a HAMi pod's share of its GPU is of: `cores` or `memory`, whichever is larger."""
HAMI_CORES = "hami_cores"
"""The cores HAMi granted a pod of a GPU (per cent of the GPU, `nvidia.com/gpucores`)."""
HAMI_MEM_MIB = "hami_mem_mib"
"""The device memory HAMi granted a pod of a GPU (MiB, `nvidia.com/gpumem`)."""
HAMI_DEV_CORES = "hami_dev_cores"
"""The GPU's cores as HAMi registered them (100 unless scaled)."""
HAMI_DEV_MEM_MIB = "hami_dev_mem_mib"
"""The GPU's memory as HAMi registered it (MiB), else DCGM's; NaN where unknown."""
HAMI_MEASURED = "hami_measured"
"""Whether HAMi's vGPU monitor measured the pod's own SM utilization of the GPU."""
HAMI_MEM_USED_MAX_MIB = "hami_mem_used_max_mib"
"""The most device memory HAMi's monitor saw the pod use on the GPU (MiB); NaN unmeasured."""
HAMI_UTIL_PCT = "hami_util_pct"
"""A HAMi pod's SM utilization of its GPU in a bucket (per cent of the GPU)."""

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
POD = "pod"
CONTAINER = "container"
HELD = "held"
HOLDING = "holding"

# holding time
FIRST_TS = "first_ts"
LAST_TS = "last_ts"
HOURS = "hours"
GPU_HOURS = "gpu_hours"
TS = "ts"

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
ACT = "act"
UTIL = "util"
SM = "sm"
TENSOR = "tensor"
RESTARTS = "restarts"
LABELS = "labels"
LAST_TERMINATION = "last_termination"

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

# nodes
PRODUCT = "product"
GPU_COUNT = "gpu_count"
CAPACITY_GPU = "capacity_gpu"
ALLOCATABLE_GPU = "allocatable_gpu"
CLIQUE = "clique"
MIG_STRATEGY = "mig_strategy"

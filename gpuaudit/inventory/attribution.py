"""How allocated GPU-hours were joined to the pods that held them, and why some were not.

The names are the attribution ledger's contract: every report's `attribution` section counts
allocated GPU-hours under `attributed.<Method>` and `unattributed.<Reason>`, and the two sides
sum to the summary's allocated GPU-hours. A holding's `attribution` column (see
`gpuaudit.inventory.columns.ATTRIBUTION`) holds its `Method` value.
"""

from __future__ import annotations

import enum


class Method(str, enum.Enum):
    """How a holding was attributed to its pod."""

    DCGM_POD_LABEL = "dcgm_pod_label"
    """The DCGM series carries the pod's labels (`pod`/`namespace`, or `exported_*`)."""
    SHARED_SPLIT = "shared_split"
    """A shared (time-sliced or MPS) device's hours split among the pods holding replicas of it."""
    DRA_CLAIM = "dra_claim"
    """The device was allocated to the pod through a DRA ResourceClaim (`resource.k8s.io`)."""
    KUBERNETES_JOIN = "kubernetes_join"
    """The series had no pod labels; the holder was found from the Kubernetes side (the only
    pod on the node holding such a device)."""


class Reason(str, enum.Enum):
    """Why allocated GPU-hours could not be attributed to a pod."""

    NO_EXPORTER = "no_exporter"
    """The node's GPUs are requested by pods but no DCGM series came from the node."""
    NO_POD_LABEL = "no_pod_label"
    """DCGM series exist but carry no pod labels and no Kubernetes-side join was possible."""
    NO_LIMIT = "no_limit"
    """The pod holds GPUs without an `nvidia.com/gpu` limit, so the exporter never labels it."""
    PROFILING_ABSENT = "profiling_absent"
    """MIG instances without profiling series: GPU_UTIL reads 0 on MIG, so activity is unknown."""
    SHARED_WITHOUT_VIRTUAL_GPUS = "time_slicing_without_virtual_gpus"
    """A time-sliced device labelled with one pod only (no `--kubernetes-virtual-gpus`)."""

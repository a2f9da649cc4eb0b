"""What a snapshot keeps of the Kubernetes objects: the fields gpuaudit reads, nothing else.

A snapshot is meant to be shared (attached to an issue, sent to a colleague, kept in CI), so it
must not carry what the cluster holds but gpuaudit never reads: container `env` values, command
lines, the `kubectl.kubernetes.io/last-applied-configuration` annotation (a whole manifest, often
with secrets), pod templates of jobs, managed fields. Each object kind of the resource catalogue
(`gpuaudit.sources.kubernetes.resources.RESOURCES`) has an allowlist (`KEEP`); a live scan and
`snapshot save` both keep each list page through it as it arrives (`keep_page`), so that a scan
of a saved snapshot sees exactly what the live scan saw.

An allowlist is a tree: a mapping from key to what to keep of its value, `ALL` for the value as
it is, `Keys(...)` for a map whose listed keys (exact, or by prefix) are kept whole, or
`Each(tree)` for a map whose every value is kept through `tree`. A list
is kept item by item through the same tree. When gpuaudit starts to read a new field, it is
added here (a test builds the inventory from kept and from whole objects and compares them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from gpuaudit.sources.kubernetes.resources import RESOURCES


class _All:
    """Keep the value as it is."""

    def __repr__(self) -> str:
        return "ALL"


ALL = _All()


@dataclass(frozen=True)
class Keys:
    """Keep only these keys of a map (with their values as they are)."""

    exact: frozenset[str]
    prefixes: tuple[str, ...] = ()

    def __init__(self, *names: str, prefixes: tuple[str, ...] = ()) -> None:
        object.__setattr__(self, "exact", frozenset(names))
        object.__setattr__(self, "prefixes", prefixes)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key in self.exact or key.startswith(self.prefixes))


@dataclass(frozen=True)
class Each:
    """Keep every key of a map, each value through `tree` (the replica types of a training job:
    `Master`, `Worker`, `Launcher` ...)."""

    tree: Tree


Tree: TypeAlias = "_All | Keys | Each | dict[str, Tree]"

GPU_RESOURCES = Keys("nvidia.com/gpu", prefixes=("nvidia.com/mig-",))
"""The extended resources gpuaudit counts: whole GPUs and MIG slices."""

OWNER_LABELS = ("owner", "team", "app.kubernetes.io/part-of")
"""The label and annotation keys that name a finding's owner by default, first wins
(`gpuaudit.inventory.ownership`; `--owner-keys` orders them)."""
CONTACT = "gpuaudit.io/contact"
"""The annotation that says how to reach an owner: a mail address or a chat channel."""
OWNER_KEYS = Keys(*OWNER_LABELS, CONTACT, prefixes=("gpuaudit.io/",))
"""What is kept of the labels and annotations of the objects an owner is read from (a pod's
owners, namespaces, queues, node pools): the default owner keys, the contact annotation and
any `gpuaudit.io/` key (pods and nodes keep their labels whole)."""

POD_ANNOTATIONS = Keys(
    "scheduling.k8s.io/group-name",
    "scheduling.volcano.sh/group-name",
    "kueue.x-k8s.io/pod-group-total-count",
    "leaderworkerset.sigs.k8s.io/size",
    # Volcano: the queue a pod is placed in without a PodGroup (`inventory.queues`).
    "scheduling.volcano.sh/queue-name",
    # KAI Scheduler: the PodGroup a pod belongs to, and its GPU fraction (`inventory.kai`).
    "pod-group-name",
    "gpu-fraction",
    "gpu-memory",
    "gpu-fraction-num-devices",
    # HAMi: the GPUs, memory and cores its scheduler granted, and where (`inventory.hami`).
    "hami.io/vgpu-devices-allocated",
    "hami.io/vgpu-node",
    # Who owns it, and how to reach them (`gpuaudit.inventory.ownership`).
    *OWNER_LABELS,
    CONTACT,
    prefixes=("gpuaudit.io/",),
)
"""The pod annotations the gang and queue readers use (`gpuaudit.inventory.gangs`,
`gpuaudit.inventory.queues`), HAMi's grants
(`gpuaudit.inventory.hami`) and KAI Scheduler's GPU fraction requests
(`gpuaudit.inventory.kai`)."""

NODE_ANNOTATIONS = Keys(
    "hami.io/node-nvidia-register",
    "cluster-autoscaler.kubernetes.io/scale-down-disabled",
    *OWNER_LABELS,
    CONTACT,
    prefixes=("gpuaudit.io/",),
)
"""The node annotations the inventory reads: the GPUs HAMi's device plugin registered, with their
memory, cores and split count (`gpuaudit.inventory.hami`); and whether the cluster autoscaler
may remove the node (`gpuaudit.fix.warm_nodes`)."""

NODE_LABELS = Keys(
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.clique",
    "nvidia.com/mig.strategy",
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
    "node.kubernetes.io/pool",
)
"""The node labels the inventory reads (`gpuaudit.inventory.kube.node_row`)."""

DEVICE_ATTRIBUTES: Tree = {
    f"{domain}{name}": {"string": ALL}
    for domain in ("", "gpu.nvidia.com/")
    for name in ("uuid", "type", "parentUUID", "profile")
}
"""The DRA device attributes the inventory reads (NVIDIA's DRA driver names them without a
domain, which means its own, `gpu.nvidia.com`; `gpuaudit.inventory.dra`)."""

_NAME: dict[str, Tree] = {"name": ALL, "namespace": ALL, "uid": ALL, "creationTimestamp": ALL}
_OWNERS: Tree = {"apiVersion": ALL, "kind": ALL, "name": ALL, "uid": ALL, "controller": ALL}
_META: Tree = {**_NAME, "ownerReferences": _OWNERS}
_OWNED: Tree = {
    **_NAME,
    "ownerReferences": _OWNERS,
    "labels": OWNER_KEYS,
    "annotations": OWNER_KEYS,
}
"""An owner's metadata: who it is, who owns it, and who owns it among people (`OWNER_KEYS`)."""
_NAMED: Tree = {**_NAME, "labels": OWNER_KEYS, "annotations": OWNER_KEYS}
"""A cluster-scoped object a finding may be about (a queue, a node pool): who it is, and who
owns it among people."""
QUEUE_RESOURCES = Keys("nvidia.com/gpu", "nvidia.com/gpu.shared", prefixes=("nvidia.com/mig-",))
"""The GPU resources queue quota is read for (whole, shared and MIG)."""
_RESOURCES: Tree = {
    "resources": {"requests": QUEUE_RESOURCES, "limits": QUEUE_RESOURCES},
    "restartPolicy": ALL,
}
"""What a pod template's containers keep: their GPU requests (no env, no command)."""
_FLAVOR_USAGE: Tree = {"name": ALL, "resources": {"name": ALL, "total": ALL}}
"""A ClusterQueue's `status.flavorsReservation` / `flavorsUsage` entries."""
_QUOTA_SPEC: Tree = {
    "cohort": ALL,
    "cohortName": ALL,
    "parent": ALL,
    "parentName": ALL,
    "resourceGroups": {
        # Required by the CRD: a patch of the quota is validated with the object as read.
        "coveredResources": ALL,
        "flavors": {
            "name": ALL,
            "resources": {
                "name": ALL,
                "nominalQuota": ALL,
                "borrowingLimit": ALL,
                "lendingLimit": ALL,
            },
        },
    },
}
"""A Kueue ClusterQueue's or Cohort's quota: its cohort and resource groups."""
_CONDITIONS: dict[str, Tree] = {
    "type": ALL,
    "status": ALL,
    "reason": ALL,
    "lastTransitionTime": ALL,
}
_TERMINATION: dict[str, Tree] = {
    "terminated": {
        "reason": ALL,
        "message": ALL,
        "exitCode": ALL,
        "startedAt": ALL,
        "finishedAt": ALL,
    }
}
_TERMINATED: Tree = _TERMINATION
NVIDIA_RESOURCES = Keys(prefixes=("nvidia.com/",))
"""The NVIDIA device plugin's extended resources (whole, shared and MIG GPUs), as the feasibility
model counts them."""
CONTAINER_RESOURCES = Keys("cpu", "memory", prefixes=("nvidia.com/",))
"""What a container's requests and limits keep: its NVIDIA resources, its CPU (GPU041, a
CPU-starved pod) and its memory (GPU004, the limit an OOM-killed container reached)."""
_CONTAINER: dict[str, Tree] = {
    "name": ALL,
    "resources": {"requests": CONTAINER_RESOURCES, "limits": CONTAINER_RESOURCES},
}
_JOB_STATUS: Tree = {"conditions": _CONDITIONS}
_RUN_POLICY: Tree = {"schedulingPolicy": {"minAvailable": ALL}}
_REPLICAS: Tree = Each({"replicas": ALL})
"""Each replica type of a training job: its count, not its pod template."""

POD: Tree = {
    "metadata": {
        **_NAME,
        "labels": ALL,
        "annotations": POD_ANNOTATIONS,
        "ownerReferences": _OWNERS,
    },
    "spec": {
        "nodeName": ALL,
        "priority": ALL,
        "priorityClassName": ALL,
        "preemptionPolicy": ALL,
        "schedulerName": ALL,
        # The scheduler's inputs the feasibility model reads (`inventory.feasibility`): a
        # selector or a toleration may name any label or taint, so they are kept whole.
        "nodeSelector": ALL,
        "tolerations": {
            "key": ALL,
            "operator": ALL,
            "value": ALL,
            "effect": ALL,
            "tolerationSeconds": ALL,
        },
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": {
                        "matchExpressions": {"key": ALL, "operator": ALL, "values": ALL},
                        "matchFields": {"key": ALL, "operator": ALL, "values": ALL},
                    }
                }
            }
        },
        "containers": _CONTAINER,
        "initContainers": {**_CONTAINER, "restartPolicy": ALL},
        # DRA: the claims the pod uses (`gpuaudit.inventory.dra`).
        "resourceClaims": {
            "name": ALL,
            "resourceClaimName": ALL,
            "resourceClaimTemplateName": ALL,
        },
    },
    "status": {
        "phase": ALL,
        "resourceClaimStatuses": {"name": ALL, "resourceClaimName": ALL},
        "startTime": ALL,
        "podIP": ALL,
        "conditions": {**_CONDITIONS, "message": ALL},
        "containerStatuses": {
            "name": ALL,
            "restartCount": ALL,
            "state": {
                **_TERMINATION,
                "waiting": {"reason": ALL},
                "running": {"startedAt": ALL},
            },
            "lastState": _TERMINATED,
        },
    },
}
"""What is kept of a pod: who it is, what GPUs it asks for and where it runs, its scheduling
state and restarts, its labels, and the annotations that put it in a gang."""

NODE: Tree = {
    # Labels whole: a pod's node selector or affinity may name any of them.
    "metadata": {**_NAME, "labels": ALL, "annotations": NODE_ANNOTATIONS},
    "spec": {"unschedulable": ALL, "taints": {"key": ALL, "value": ALL, "effect": ALL}},
    "status": {
        "capacity": NVIDIA_RESOURCES,
        "allocatable": NVIDIA_RESOURCES,
        "addresses": {"type": ALL, "address": ALL},
    },
}

_TEMPLATE: Tree = {
    "spec": {
        "containers": _CONTAINER,
        "initContainers": _CONTAINER,
        "nodeSelector": ALL,
        "priorityClassName": ALL,
    }
}
"""A controller's pod template: its containers' names and NVIDIA resources, its node
selector and PriorityClass, what a change of its GPUs or its priority names; the schema's
required fields of the controller are kept beside it, so that the object as read, a patch
applied, validates."""
_SCALED: Tree = {
    "metadata": _OWNED,
    "spec": {
        "replicas": ALL,
        "selector": {
            "matchLabels": ALL,
            "matchExpressions": {"key": ALL, "operator": ALL, "values": ALL},
        },
        "serviceName": ALL,
        "template": _TEMPLATE,
    },
}
_JOB_SPEC: Tree = {
    "suspend": ALL,
    "parallelism": ALL,
    "completions": ALL,
    "activeDeadlineSeconds": ALL,
    "template": _TEMPLATE,
}
OWNER_KEEP: dict[str, Tree] = {
    "replicasets": _SCALED,
    "deployments": _SCALED,
    "statefulsets": _SCALED,
    "jobs": {"metadata": _OWNED, "spec": _JOB_SPEC},
    "cronjobs": {
        "metadata": _OWNED,
        "spec": {
            "schedule": ALL,
            "timeZone": ALL,
            "suspend": ALL,
            "jobTemplate": {"spec": _JOB_SPEC},
        },
    },
    "notebooks": {"metadata": _OWNED, "spec": {"template": _TEMPLATE}},
    "inferenceservices": {
        "metadata": _OWNED,
        "spec": {"predictor": {"minReplicas": ALL, "maxReplicas": ALL}},
    },
    "tfjobs": {"metadata": _OWNED},
    "xgboostjobs": {"metadata": _OWNED},
    "paddlejobs": {"metadata": _OWNED},
    "jaxjobs": {"metadata": _OWNED},
}
"""What is kept of the controllers that own GPU pods (`resources.OWNER_RESOURCES`): who they
are and who owns them, their replicas or suspension, and their pod template's GPUs (no env,
no command, no labels); and only those that a GPU pod leads to (`PageKeeper`)."""

KEEP: dict[str, Tree] = {
    "pods": POD,
    "nodes": NODE,
    # Who owns what runs in them (`gpuaudit.inventory.ownership`): their owner keys only.
    "namespaces": {"metadata": _NAMED},
    **OWNER_KEEP,
    "priorityclasses": {
        "metadata": _NAME,
        "value": ALL,
        "globalDefault": ALL,
        "preemptionPolicy": ALL,
    },
    "volcano_podgroups": {
        "metadata": _META,
        "spec": {"minMember": ALL, "queue": ALL, "minResources": QUEUE_RESOURCES},
        "status": {"phase": ALL},
    },
    "coscheduling_podgroups": {
        "metadata": _META,
        "spec": {"minMember": ALL},
        "status": {"phase": ALL},
    },
    "kueue_workloads": {
        "metadata": _META,
        "spec": {
            "podSets": {
                "name": ALL,
                "count": ALL,
                "minCount": ALL,
                "template": {"spec": {"containers": _RESOURCES, "initContainers": _RESOURCES}},
            },
            "queueName": ALL,
            "active": ALL,
            "priorityClassName": ALL,
        },
        "status": {
            "admission": {
                "clusterQueue": ALL,
                "podSetAssignments": {
                    "name": ALL,
                    "count": ALL,
                    "flavors": QUEUE_RESOURCES,
                    "resourceUsage": QUEUE_RESOURCES,
                },
            },
            "conditions": _CONDITIONS,
        },
    },
    "kueue_clusterqueues": {
        "metadata": _NAMED,
        "spec": _QUOTA_SPEC,
        # What its Workloads reserve now, in every namespace: a floor for what it admitted.
        "status": {"flavorsReservation": _FLAVOR_USAGE, "flavorsUsage": _FLAVOR_USAGE},
    },
    "kueue_cohorts": {"metadata": _NAME, "spec": _QUOTA_SPEC},
    "kueue_resourceflavors": {
        "metadata": _NAME,
        "spec": {"nodeLabels": ALL, "nodeTaints": {"key": ALL, "value": ALL, "effect": ALL}},
    },
    "volcano_queues": {
        "metadata": _NAMED,
        "spec": {
            "capability": QUEUE_RESOURCES,
            "deserved": QUEUE_RESOURCES,
            "guarantee": {"resource": QUEUE_RESOURCES},
            "parent": ALL,
        },
        "status": {"allocated": QUEUE_RESOURCES},
    },
    "kai_queues": {
        "metadata": _NAMED,
        "spec": {
            "parentQueue": ALL,
            "resources": {"gpu": {"quota": ALL, "limit": ALL, "overQuotaWeight": ALL}},
        },
        "status": {"allocated": QUEUE_RESOURCES},
    },
    "kai_podgroups": {"metadata": _META, "spec": {"minMember": ALL, "queue": ALL}},
    "kueue_localqueues": {"metadata": _NAME, "spec": {"clusterQueue": ALL}},
    "pytorchjobs": {
        "metadata": _OWNED,
        "spec": {"runPolicy": _RUN_POLICY, "pytorchReplicaSpecs": _REPLICAS},
        "status": _JOB_STATUS,
    },
    "mpijobs": {
        "metadata": _OWNED,
        "spec": {"runPolicy": _RUN_POLICY, "mpiReplicaSpecs": _REPLICAS},
        "status": _JOB_STATUS,
    },
    "jobsets": {
        "metadata": _OWNED,
        "spec": {
            "replicatedJobs": {
                "name": ALL,
                "replicas": ALL,
                "template": {"spec": {"parallelism": ALL}},
            }
        },
        "status": _JOB_STATUS,
    },
    "leaderworkersets": {
        "metadata": _OWNED,
        "spec": {"replicas": ALL, "leaderWorkerTemplate": {"size": ALL}},
    },
    "rayclusters": {
        "metadata": _OWNED,
        "spec": {"workerGroupSpecs": {"groupName": ALL, "replicas": ALL, "numOfHosts": ALL}},
        "status": {"state": ALL},
    },
    "resourceclaims": {
        "metadata": _META,
        "status": {
            "allocation": {
                "devices": {"results": {"request": ALL, "driver": ALL, "pool": ALL, "device": ALL}}
            },
            "reservedFor": {"apiGroup": ALL, "resource": ALL, "name": ALL, "uid": ALL},
        },
    },
    "resourceslices": {
        "metadata": _NAME,
        "spec": {
            "driver": ALL,
            "nodeName": ALL,
            "pool": {"name": ALL},
            # v1 and v1beta2 put a device's attributes on the device, v1beta1 under `basic`.
            "devices": {
                "name": ALL,
                "attributes": DEVICE_ATTRIBUTES,
                "basic": {"attributes": DEVICE_ATTRIBUTES},
            },
        },
    },
    # What lets GPU060's idle nodes go (`gpuaudit.fix.warm_nodes`), and the fields the CRD
    # requires, so that the NodePool as read, a patch applied, validates.
    "karpenter_nodepools": {
        "metadata": _NAMED,
        "spec": {
            "disruption": {"consolidationPolicy": ALL, "consolidateAfter": ALL},
            "replicas": ALL,
            "template": {
                "spec": {
                    "nodeClassRef": {"group": ALL, "kind": ALL, "name": ALL},
                    "requirements": {"key": ALL, "operator": ALL, "values": ALL, "minValues": ALL},
                }
            },
        },
    },
}
"""The allowlist of every object kind, by resource key."""

_missing = {r.key for r in RESOURCES} - set(KEEP)
if _missing:  # a resource added to the catalogue must say what a snapshot keeps of it
    raise RuntimeError(f"no allowlist for Kubernetes resources {sorted(_missing)}")


def keep(tree: Tree, value: Any) -> Any:
    """What `tree` keeps of `value` (a list item by item)."""
    if isinstance(tree, _All):
        return value
    if isinstance(value, list):
        return [keep(tree, v) for v in value]
    if not isinstance(value, dict):
        return None
    if isinstance(tree, Keys):
        return {k: v for k, v in value.items() if k in tree}
    if isinstance(tree, Each):
        return {k: keep(tree.tree, v) for k, v in value.items()}
    return {k: keep(tree[k], v) for k, v in value.items() if k in tree}


def keep_object(key: str, obj: Any) -> Any:
    """What a snapshot keeps of one object of the resource `key` (`apiVersion` and `kind` too,
    where the object has them)."""
    if not isinstance(obj, dict):
        return obj
    tree = KEEP.get(key)
    if tree is None:
        return {}
    out = keep(tree, obj)
    for k in ("apiVersion", "kind"):
        if isinstance(obj.get(k), str):
            out[k] = obj[k]
    return out


def keep_page(key: str, page: dict[str, Any]) -> dict[str, Any]:
    """What a snapshot keeps of one list page of the resource `key`: its kind, API version and
    resource version, and each object through the allowlist."""
    out: dict[str, Any] = {k: page[k] for k in ("apiVersion", "kind") if k in page}
    meta = page.get("metadata")
    if isinstance(meta, dict) and "resourceVersion" in meta:
        out["metadata"] = {"resourceVersion": meta["resourceVersion"]}
    items = page.get("items")
    out["items"] = [keep_object(key, o) for o in items] if isinstance(items, list) else items
    return out


GPU_ANNOTATIONS = ("gpu-fraction", "gpu-memory")
"""KAI Scheduler's fraction annotations: a pod that carries one holds a share of a GPU without
asking for `nvidia.com/gpu` (docs/domain.md)."""


def holds_gpus(pod: Any) -> bool:
    """Whether a pod (as the API lists it, or as kept) asks for GPUs: an NVIDIA extended
    resource in a container's requests or limits, a DRA claim, or a KAI fraction annotation."""
    if not isinstance(pod, dict):
        return False
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    if spec.get("resourceClaims"):
        return True
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    notes = meta.get("annotations") if isinstance(meta, dict) else None
    if isinstance(notes, dict) and any(k in notes for k in GPU_ANNOTATIONS):
        return True
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or ():
            res = c.get("resources") if isinstance(c, dict) else None
            for part in ("requests", "limits"):
                got = res.get(part) if isinstance(res, dict) else None
                if isinstance(got, dict) and any(
                    isinstance(k, str) and k in NVIDIA_RESOURCES for k in got
                ):
                    return True
    return False


class PageKeeper:
    """`keep_page` for one collection, which keeps of the controllers
    (`resources.OWNER_RESOURCES`) only those a GPU pod leads to through `ownerReferences`: the
    owners of the pods that ask for GPUs (`holds_gpus`), then the owners of those, and so on,
    as each list arrives (the catalogue lists pods first and each controller before its
    owner). A controller of pods without GPUs (most ReplicaSets of a cluster) is not kept.
    A Deployment or StatefulSet scaled to 0 replicas whose pod template asks for GPUs is kept
    too: no pod leads to it, and it is how a fixed finding is told scaled down from gone
    (`gpuaudit.audit.outcomes`, issue 34)."""

    def __init__(self) -> None:
        self.wanted: set[str] = set()
        """The uids of the owners kept or still to be kept."""

    def __call__(self, key: str, page: dict[str, Any]) -> dict[str, Any]:
        out = keep_page(key, page)
        items = out.get("items")
        if not isinstance(items, list):
            return out
        if key in OWNER_KEEP:
            items = out["items"] = [
                o for o in items if _uid(o) in self.wanted or _scaled_to_zero(key, o)
            ]
        elif key != "pods":
            return out
        for obj in items:
            if key != "pods" or holds_gpus(obj):
                self.wanted.update(_owner_uids(obj))
        return out


def _scaled_to_zero(key: str, obj: Any) -> bool:
    """A Deployment or StatefulSet at `spec.replicas` 0 whose pod template asks for GPUs."""
    spec = obj.get("spec") if isinstance(obj, dict) else None
    if key not in ("deployments", "statefulsets") or not isinstance(spec, dict):
        return False
    replicas = spec.get("replicas")
    return replicas == 0 and not isinstance(replicas, bool) and holds_gpus(spec.get("template"))


def _uid(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    uid = meta.get("uid") if isinstance(meta, dict) else None
    return uid if isinstance(uid, str) else ""


def _owner_uids(obj: Any) -> list[str]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    refs = meta.get("ownerReferences") if isinstance(meta, dict) else None
    if not isinstance(refs, list):
        return []
    return [r["uid"] for r in refs if isinstance(r, dict) and isinstance(r.get("uid"), str)]

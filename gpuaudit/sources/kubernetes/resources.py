"""The resource catalogue: every kind of object gpuaudit reads from the Kubernetes API, with the
API group, the versions it understands and what to call the objects in messages."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    """One kind of object gpuaudit reads from the API server."""

    key: str
    """The key under a snapshot's `kubernetes` and the manifest's `objects`."""
    group: str
    """The API group; `""` for the core group (`/api/v1`)."""
    versions: tuple[str, ...]
    """The versions gpuaudit understands, most preferred first."""
    plural: str
    """The resource name in URLs."""
    namespaced: bool
    """Whether objects live in namespaces (discovery's answer wins when there is one)."""
    title: str
    """What to call the objects in messages."""
    crd: bool = True
    """Whether the resource comes from a CRD (as opposed to Kubernetes itself)."""

    @property
    def required(self) -> bool:
        """Pods and nodes: a scan without them is refused."""
        return self.key in ("pods", "nodes")


OWNER_RESOURCES: tuple[Resource, ...] = (
    Resource("replicasets", "apps", ("v1",), "replicasets", True, "ReplicaSets", crd=False),
    Resource("statefulsets", "apps", ("v1",), "statefulsets", True, "StatefulSets", crd=False),
    Resource("jobs", "batch", ("v1",), "jobs", True, "Jobs", crd=False),
    Resource("deployments", "apps", ("v1",), "deployments", True, "Deployments", crd=False),
    Resource("cronjobs", "batch", ("v1",), "cronjobs", True, "CronJobs", crd=False),
    Resource("notebooks", "kubeflow.org", ("v1", "v1beta1"), "notebooks", True, "Notebooks"),
    Resource(
        "inferenceservices",
        "serving.kserve.io",
        ("v1beta1",),
        "inferenceservices",
        True,
        "KServe InferenceServices",
    ),
    Resource("tfjobs", "kubeflow.org", ("v1",), "tfjobs", True, "TFJobs"),
    Resource("xgboostjobs", "kubeflow.org", ("v1",), "xgboostjobs", True, "XGBoostJobs"),
    Resource("paddlejobs", "kubeflow.org", ("v1",), "paddlejobs", True, "PaddleJobs"),
    Resource("jaxjobs", "kubeflow.org", ("v1",), "jaxjobs", True, "JAXJobs"),
)
"""The controllers a GPU pod's `ownerReferences` lead to, read for `gpuaudit fix` to find the
object a team edits (`gpuaudit.inventory.owners`): read after the pods, each kind after the
kinds that name it as their owner (a ReplicaSet before its Deployment, a Job before its
CronJob), so that a snapshot keeps only the owners of GPU pods (`gpuaudit.snapshot.fields`).
PyTorchJobs, MPIJobs, JobSets, LeaderWorkerSets and RayClusters are read for the gangs above."""

RESOURCES: tuple[Resource, ...] = (
    Resource("pods", "", ("v1",), "pods", True, "pods", crd=False),
    Resource("nodes", "", ("v1",), "nodes", False, "nodes", crd=False),
    # Their owner labels and contact annotation (`gpuaudit.inventory.ownership`).
    Resource("namespaces", "", ("v1",), "namespaces", False, "namespaces", crd=False),
    Resource(
        "priorityclasses",
        "scheduling.k8s.io",
        ("v1",),
        "priorityclasses",
        False,
        "PriorityClasses",
        crd=False,
    ),
    Resource(
        "volcano_podgroups",
        "scheduling.volcano.sh",
        ("v1beta1",),
        "podgroups",
        True,
        "Volcano PodGroups",
    ),
    Resource(
        "coscheduling_podgroups",
        "scheduling.x-k8s.io",
        ("v1alpha1",),
        "podgroups",
        True,
        "coscheduling PodGroups",
    ),
    Resource(
        "kueue_workloads",
        "kueue.x-k8s.io",
        ("v1beta2", "v1beta1"),
        "workloads",
        True,
        "Kueue Workloads",
    ),
    Resource(
        "kueue_clusterqueues",
        "kueue.x-k8s.io",
        ("v1beta2", "v1beta1"),
        "clusterqueues",
        False,
        "Kueue ClusterQueues",
    ),
    Resource(
        "kueue_localqueues",
        "kueue.x-k8s.io",
        ("v1beta2", "v1beta1"),
        "localqueues",
        True,
        "Kueue LocalQueues",
    ),
    Resource(
        "kueue_resourceflavors",
        "kueue.x-k8s.io",
        ("v1beta2", "v1beta1"),
        "resourceflavors",
        False,
        "Kueue ResourceFlavors",
    ),
    Resource(
        "kueue_cohorts",
        "kueue.x-k8s.io",
        ("v1beta2", "v1beta1", "v1alpha1"),
        "cohorts",
        False,
        "Kueue Cohorts",
    ),
    Resource(
        "volcano_queues",
        "scheduling.volcano.sh",
        ("v1beta1",),
        "queues",
        False,
        "Volcano Queues",
    ),
    Resource("kai_queues", "scheduling.run.ai", ("v2",), "queues", False, "KAI Queues"),
    Resource(
        "kai_podgroups", "scheduling.run.ai", ("v2alpha2",), "podgroups", True, "KAI PodGroups"
    ),
    Resource("pytorchjobs", "kubeflow.org", ("v1",), "pytorchjobs", True, "PyTorchJobs"),
    Resource("mpijobs", "kubeflow.org", ("v2beta1", "v1"), "mpijobs", True, "MPIJobs"),
    Resource("jobsets", "jobset.x-k8s.io", ("v1alpha2",), "jobsets", True, "JobSets"),
    Resource(
        "leaderworkersets",
        "leaderworkerset.x-k8s.io",
        ("v1",),
        "leaderworkersets",
        True,
        "LeaderWorkerSets",
    ),
    Resource("rayclusters", "ray.io", ("v1",), "rayclusters", True, "RayClusters"),
    Resource(
        "resourceclaims",
        "resource.k8s.io",
        ("v1", "v1beta2", "v1beta1"),
        "resourceclaims",
        True,
        "DRA ResourceClaims",
        crd=False,
    ),
    Resource(
        "resourceslices",
        "resource.k8s.io",
        ("v1", "v1beta2", "v1beta1"),
        "resourceslices",
        False,
        "DRA ResourceSlices",
        crd=False,
    ),
    Resource(
        "karpenter_nodepools", "karpenter.sh", ("v1",), "nodepools", False, "Karpenter NodePools"
    ),
    *OWNER_RESOURCES,
)
"""Everything `collect` reads, in the order it reads them."""

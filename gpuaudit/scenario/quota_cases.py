"""GPU090's cases: Kueue ResourceFlavors, ClusterQueues in two cohorts (and a Cohort object),
LocalQueues and Workloads (running, finished, waiting), and Volcano Queues with PodGroups.

Planted: a ClusterQueue whose quota sat idle and fenced off from its cohort (lendingLimit 0), a
peer in that cohort starved next to it, a ClusterQueue whose flavor matches no node, a Volcano
queue whose guarantee sat idle and one that deserves twice
the cluster (burst: twice the GPUs when it is made; `settle_burst`, the last step, makes it a
near-miss where the nodes later cases add brought the cluster to its quota). Near-misses: a
ClusterQueue whose idle quota its cohort may borrow, one that waits
but may not borrow (borrowingLimit 0), one busy on weekdays only (windows of a week or more), a
flavor whose queues' quota equals what its nodes allocate, the Volcano queue of the partial
gang that used its whole guarantee, and the ClusterQueue of the Kueue gang case.

Placed after the hardware cases on GB200 nodes added here (4 GPUs each: no pending pod of the
other cases can use them, as those need 8 GPUs or are pinned to other products) and in MIG
slices the base scenario left free, so every earlier case stays as it was.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import NodeSpec, PodSpec, SlotSpec
from gpuaudit.scenario.nodes import KINDS

KUEUE_API = "kueue.x-k8s.io/v1beta2"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"
POOL_LABEL = "example.com/tenant-pool"
GPU = "nvidia.com/gpu"
SLICE = "nvidia.com/mig-1g.10gb"
CODE = "GPU090"
WEEK_H = 168


def plant_queues(b: Builder) -> None:
    """The queue objects, their pods and GPU090's truth."""
    for key in (
        "kueue_resourceflavors",
        "kueue_clusterqueues",
        "kueue_cohorts",
        "kueue_localqueues",
        "kueue_workloads",
        "volcano_queues",
        "volcano_podgroups",
    ):
        b.api.setdefault(key, [])
    first = len(b.of_kind("gb200"))
    research = [_pool_node(b, first + i, "research") for i in range(2)]
    _research_cohort(b, research)
    _vip(b)
    if b.H >= WEEK_H:
        _weekdays(b, _pool_node(b, first + 2, "weekday"))
    _inference_cohort(b)
    _gang_case_queue(b)
    _volcano(b, research[0])
    _cluster_queue_status(b)


# ---- Kueue objects ----------------------------------------------------------------------


def _pool_node(b: Builder, i: int, pool: str) -> NodeSpec:
    node = b.add_node("gb200", i)
    node.labels[POOL_LABEL] = pool
    return node


def _flavor(b: Builder, name: str, labels: dict[str, str]) -> None:
    b.api["kueue_resourceflavors"].append(
        {
            "apiVersion": KUEUE_API,
            "kind": "ResourceFlavor",
            "metadata": {"name": name, "uid": b.ids.uuid()},
            "spec": {"nodeLabels": dict(labels)},
        }
    )


def _gb200_flavor(b: Builder, pool: str) -> str:
    name = f"gb200-{pool}"
    _flavor(b, name, {"nvidia.com/gpu.product": KINDS["gb200"].product, POOL_LABEL: pool})
    return name


def _cluster_queue(
    b: Builder,
    name: str,
    flavor: str,
    resource: str,
    nominal: int,
    cohort: str = "",
    **limits: int,
) -> None:
    """A ClusterQueue with CPU and memory quota beside one GPU resource of one flavor;
    `limits`: `borrowingLimit` or `lendingLimit` of the GPU resource."""
    gpu: dict[str, Any] = {"name": resource, "nominalQuota": str(nominal)}
    gpu.update({k: str(v) for k, v in limits.items()})
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", resource],
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [
                            {"name": "cpu", "nominalQuota": str(24 * nominal)},
                            {"name": "memory", "nominalQuota": f"{200 * nominal}Gi"},
                            gpu,
                        ],
                    }
                ],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    b.api["kueue_clusterqueues"].append(
        {
            "apiVersion": KUEUE_API,
            "kind": "ClusterQueue",
            "metadata": {"name": name, "uid": b.ids.uuid()},
            "spec": spec,
            "status": {
                "conditions": [
                    {
                        "type": "Active",
                        "status": "True",
                        "reason": "Ready",
                        "message": "Can admit new workloads",
                        "lastTransitionTime": b.iso(0, -86400),
                    }
                ]
            },
        }
    )


def _cluster_queue_status(b: Builder) -> None:
    """Each ClusterQueue's status as Kueue keeps it: the GPU quota its running Workloads
    reserve now, and how many are admitted and waiting."""
    reserved: dict[str, dict[tuple[str, str], int]] = {}
    admitted: dict[str, int] = {}
    waiting: dict[str, int] = {}
    local = {
        (q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"]["clusterQueue"]
        for q in b.api["kueue_localqueues"]
    }
    for wl in b.api["kueue_workloads"]:
        status = wl.get("status", {})
        adm = status.get("admission")
        conds = {c["type"]: c["status"] for c in status.get("conditions", [])}
        if adm is None:
            cq = local.get((wl["metadata"]["namespace"], wl["spec"]["queueName"]), "")
            waiting[cq] = waiting.get(cq, 0) + 1
            continue
        if conds.get("Finished") == "True":
            continue
        cq = adm["clusterQueue"]
        admitted[cq] = admitted.get(cq, 0) + 1
        for psa in adm["podSetAssignments"]:
            for res, qty in psa.get("resourceUsage", {}).items():
                key = (psa["flavors"][res], res)
                reserved.setdefault(cq, {})[key] = reserved.get(cq, {}).get(key, 0) + int(qty)
    for cq in b.api["kueue_clusterqueues"]:
        name = cq["metadata"]["name"]
        usage = [
            {"name": f, "resources": [{"name": r, "total": str(v), "borrowed": "0"}]}
            for (f, r), v in sorted(reserved.get(name, {}).items())
        ]
        cq["status"].update(
            {
                "flavorsReservation": usage,
                "flavorsUsage": usage,
                "admittedWorkloads": admitted.get(name, 0),
                "reservingWorkloads": admitted.get(name, 0),
                "pendingWorkloads": waiting.get(name, 0),
            }
        )


def _local_queue(b: Builder, ns: str, name: str, cq: str) -> None:
    b.api["kueue_localqueues"].append(
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": ns, "uid": b.ids.uuid()},
            "spec": {"clusterQueue": cq},
        }
    )


def _condition(
    b: Builder, ctype: str, status: str, h: float, reason: str, msg: str
) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": msg,
        "lastTransitionTime": b.iso(h),
    }


def _workload(
    b: Builder,
    ns: str,
    job: tuple[str, str],
    queue: tuple[str, str],
    flavor: str,
    resource: str,
    per_pod: int,
    pods: int,
    hours: tuple[float, float | None] | None,
) -> None:
    """The Workload of a Job (`job`: name and uid) in LocalQueue `queue` (its name and its
    ClusterQueue) asking for `pods` pods of `per_pod` of `resource`; `hours`: (reserved,
    finished or None) hour indices when admitted, None while it waits for quota."""
    local, cq = queue
    name = f"job-{job[0]}-{b.ids.hex(5)}"
    container = {
        "name": "main",
        "image": "registry.example/main:1",
        "resources": {"requests": {resource: str(per_pod)}, "limits": {resource: str(per_pod)}},
    }
    status: dict[str, Any]
    if hours is None:
        since = float(max(0, b.H - 6))
        status = {
            "conditions": [
                _condition(
                    b,
                    "QuotaReserved",
                    "False",
                    since,
                    "Pending",
                    f"couldn't assign flavors to pod set main: insufficient unused quota for "
                    f"{resource} in flavor {flavor}, {per_pod * pods} more needed",
                )
            ]
        }
        created = since
    else:
        start, end = hours
        conds = [
            _condition(
                b,
                "QuotaReserved",
                "True",
                start,
                "QuotaReserved",
                f"Quota reserved in ClusterQueue {cq}",
            ),
            _condition(b, "Admitted", "True", start, "Admitted", "The workload is admitted"),
            _condition(
                b, "PodsReady", "True", start + 0.05, "PodsReady", "All pods reached readiness"
            ),
        ]
        if end is not None:
            conds.append(
                _condition(b, "Finished", "True", end, "Succeeded", "Job finished successfully")
            )
        status = {
            "admission": {
                "clusterQueue": cq,
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": pods,
                        "flavors": {"cpu": flavor, "memory": flavor, resource: flavor},
                        "resourceUsage": {resource: str(per_pod * pods)},
                    }
                ],
            },
            "conditions": conds,
        }
        created = start - 0.02
    b.api["kueue_workloads"].append(
        {
            "apiVersion": KUEUE_API,
            "kind": "Workload",
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": b.ids.uuid(),
                "creationTimestamp": b.iso(created),
                "labels": {"kueue.x-k8s.io/queue-name": local, "kueue.x-k8s.io/job-uid": job[1]},
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": job[0],
                        "uid": job[1],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "active": True,
                "queueName": local,
                "podSets": [
                    {
                        "name": "main",
                        "count": pods,
                        "template": {"spec": {"containers": [container]}},
                    }
                ],
            },
            "status": status,
        }
    )


def _job_pod(
    b: Builder,
    ns: str,
    job: tuple[str, str],
    node: NodeSpec,
    slots: list[SlotSpec],
    h0: int,
    h1: int,
    lo: float = 0.6,
) -> PodSpec:
    """A Job's pod holding `slots` from hour `h0` to `h1` at busy activity; Succeeded when
    it ends before the window's end."""
    mig = {s.profile: 1 for s in slots if s.profile}
    p = b.pod(
        ns,
        f"{job[0]}-{b.ids.suffix()}",
        node,
        "main",
        ("Job", job[0]),
        h0,
        gpus=0 if mig else len(slots),
        mig={k: sum(1 for s in slots if s.profile == k) for k in mig},
        labels={"batch.kubernetes.io/job-name": job[0], "kueue.x-k8s.io/podset": "main"},
        owner_uid=job[1],
        phase="Running" if h1 >= b.H else "Succeeded",
        finished_h=None if h1 >= b.H else h1,
    )
    act = b.pattern("busy", h1 - h0, h0, lo=lo, hi=0.92)
    for slot in slots:
        b.hold(slot, p, h0, h1, act + 0, 0.6)
    return p


def _admitted_job(
    b: Builder,
    ns: str,
    name: str,
    queue: tuple[str, str],
    flavor: str,
    node: NodeSpec,
    gpus: int,
) -> None:
    """A Job running all window on `gpus` GPUs of `node`, and its admitted Workload."""
    job = (name, b.ids.uuid())
    _workload(b, ns, job, queue, flavor, GPU, gpus, 1, (-2.0, None))
    _job_pod(b, ns, job, node, b.free_slots(node)[:gpus], 0, b.H)


def _research_cohort(b: Builder, nodes: list[NodeSpec]) -> None:
    """team-a-cq holds 4 GPUs it does not lend and uses 1; team-b-cq uses its 4 and has a
    Workload waiting for 2 more. The flavor's quota (8) equals its 2 nodes' GPUs."""
    flavor = _gb200_flavor(b, "research")
    b.api["kueue_cohorts"].append(
        {
            "apiVersion": KUEUE_API,
            "kind": "Cohort",
            "metadata": {"name": "research", "uid": b.ids.uuid()},
            "spec": {},
        }
    )
    _cluster_queue(b, "team-a-cq", flavor, GPU, 4, "research", lendingLimit=0)
    _cluster_queue(b, "team-b-cq", flavor, GPU, 4, "research")
    _local_queue(b, "team-a", "team-a", "team-a-cq")
    _local_queue(b, "team-b", "team-b", "team-b-cq")
    _admitted_job(b, "team-a", "train-a", ("team-a", "team-a-cq"), flavor, nodes[0], 1)
    _admitted_job(b, "team-b", "train-b", ("team-b", "team-b-cq"), flavor, nodes[1], 4)
    waiting = ("sweep-large", b.ids.uuid())
    _workload(b, "team-b", waiting, ("team-b", "team-b-cq"), flavor, GPU, 2, 1, None)
    b.plant_name(CODE, "ClusterQueue", "", "team-a-cq")
    b.plant_name(CODE, "ClusterQueue", "", "team-b-cq")
    b.plant_name(
        CODE, "ResourceFlavor", "", flavor, "its queues' quota equals what its nodes allocate"
    )


def _vip(b: Builder) -> None:
    """vip-cq's quota is 8 GPUs of a flavor no node matches (its nodes were never added)."""
    flavor = _gb200_flavor(b, "vip")
    _cluster_queue(b, "vip-cq", flavor, GPU, 8)
    _local_queue(b, "vip", "vip", "vip-cq")
    b.plant_name(CODE, "ClusterQueue", "", "vip-cq")


def _weekdays(b: Builder, node: NodeSpec) -> None:
    """weekday-cq's 4 GPUs fill from 08:00 to 20:00 UTC on weekdays and idle otherwise."""
    flavor = _gb200_flavor(b, "weekday")
    _cluster_queue(b, "weekday-cq", flavor, GPU, 4)
    _local_queue(b, "sweeps", "sweeps", "weekday-cq")
    slots = b.free_slots(node)[:4]
    for day in range(b.H // 24):
        h0 = day * 24 + 8
        when = datetime.fromtimestamp(b.start + h0 * 3600, timezone.utc)
        if when.weekday() >= 5 or h0 + 12 > b.H:
            continue
        job = (f"daily-sweep-{when:%a-%d}".lower(), b.ids.uuid())
        _workload(
            b, "sweeps", job, ("sweeps", "weekday-cq"), flavor, GPU, 4, 1, (h0 - 0.1, h0 + 12)
        )
        _job_pod(b, "sweeps", job, node, slots, h0, h0 + 12)
    b.plant_name(
        CODE, "ClusterQueue", "", "weekday-cq", "busy on weekdays only: its peak filled its quota"
    )


def _inference_cohort(b: Builder) -> None:
    """MIG quota: serve-cq lends its idle slices to the cohort; batch-cq uses its 2 and has a
    Workload waiting for one more, but may not borrow (borrowingLimit 0)."""
    a100 = b.of_kind("a100-mig")
    if not a100:
        return
    flavor = "a100-mig"
    _flavor(b, flavor, {"nvidia.com/gpu.product": KINDS["a100-mig"].product})
    _cluster_queue(b, "serve-cq", flavor, SLICE, 4, "inference")
    _cluster_queue(b, "batch-cq", flavor, SLICE, 2, "inference", borrowingLimit=0)
    _local_queue(b, "inference-team", "serve", "serve-cq")
    _local_queue(b, "batch-team", "batch", "batch-cq")
    # As many pods as there are free slices: a Workload admitted with fewer running pods than
    # it counts would be a partial gang (GPU010).
    free = [(n, s) for n in a100 for s in b.free_slots(n) if s.profile == "1g.10gb"]
    for ns, name, local, cq, wanted in (
        ("inference-team", "serve-llm", "serve", "serve-cq", 1),
        ("batch-team", "batch-embed", "batch", "batch-cq", 2),
    ):
        pods = min(wanted, len(free))
        if not pods:
            continue
        job = (name, b.ids.uuid())
        _workload(b, ns, job, (local, cq), flavor, SLICE, 1, pods, (-2.0, None))
        for _ in range(pods):
            node, slot = free.pop(0)
            _job_pod(b, ns, job, node, [slot], 0, b.H)
    waiting = ("batch-extra", b.ids.uuid())
    _workload(b, "batch-team", waiting, ("batch", "batch-cq"), flavor, SLICE, 1, 1, None)
    b.plant_name(CODE, "ClusterQueue", "", "serve-cq", "its idle quota is lent to its cohort")
    b.plant_name(
        CODE, "ClusterQueue", "", "batch-cq", "waits, but may not borrow (borrowingLimit 0)"
    )


def _gang_case_queue(b: Builder) -> None:
    """The ClusterQueue and LocalQueue of GPU010's Kueue gang case, when it was planted."""
    wl = next((w for w in b.api["kueue_workloads"] if w["metadata"]["name"] == "eval-group"), None)
    if wl is None:
        return
    _flavor(b, "h100", {"nvidia.com/gpu.product": KINDS["h100"].product})
    _cluster_queue(b, "gpu-cluster-queue", "h100", GPU, 3)
    _local_queue(b, "ml-eval", "eval", "gpu-cluster-queue")
    b.plant_name(
        CODE, "ClusterQueue", "", "gpu-cluster-queue", "admitted its whole quota at its peak"
    )


# ---- Volcano ------------------------------------------------------------------------------


def _volcano_queue(b: Builder, name: str, allocated: int, **quota: dict[str, str]) -> None:
    spec: dict[str, Any] = {"weight": 1, "reclaimable": True}
    for key, res in quota.items():
        spec[key] = {"resource": res} if key == "guarantee" else res
    b.api["volcano_queues"].append(
        {
            "apiVersion": VOLCANO_API,
            "kind": "Queue",
            "metadata": {"name": name, "uid": b.ids.uuid()},
            "spec": spec,
            "status": {"state": "Open", "allocated": {GPU: str(allocated)} if allocated else {}},
        }
    )


def _volcano(b: Builder, node: NodeSpec) -> None:
    """vision-reserved guarantees 8 GPUs and uses 1; burst deserves twice the cluster's GPUs;
    rl (the partial gang's queue) is guaranteed the 4 GPUs its running members hold."""
    total = sum(n.gpu_count for n in b.nodes)
    _volcano_queue(b, "default", 0)
    if any(pg["metadata"]["name"] == "ppo-rollout" for pg in b.api["volcano_podgroups"]):
        _volcano_queue(b, "rl", 4, guarantee={GPU: "4"}, deserved={GPU: "8"})
        b.plant_name(CODE, "Queue", "", "rl", "its pods held its whole guarantee")
    _volcano_queue(
        b, "vision-reserved", 1, guarantee={GPU: "8"}, deserved={GPU: "8"}, capability={GPU: "8"}
    )
    _volcano_queue(b, "burst", 0, deserved={GPU: str(2 * total)})
    ns, pg = "vision-lab", "vision-batch"
    job = (pg, b.ids.uuid())
    p = _job_pod(b, ns, job, node, b.free_slots(node)[:1], 0, b.H, lo=0.75)
    p.scheduler_name = "volcano"
    p.annotations = {"scheduling.k8s.io/group-name": pg}
    b.api["volcano_podgroups"].append(
        {
            "apiVersion": VOLCANO_API,
            "kind": "PodGroup",
            "metadata": {
                "name": pg,
                "namespace": ns,
                "uid": b.ids.uuid(),
                "creationTimestamp": b.iso(0, -180),
            },
            "spec": {"minMember": 1, "queue": "vision-reserved", "minResources": {GPU: "1"}},
            "status": {"phase": "Running", "running": 1, "succeeded": 0, "failed": 0},
        }
    )
    b.plant_name(CODE, "Queue", "", "vision-reserved")
    b.plant_name(CODE, "Queue", "", "burst")


def settle_burst(b: Builder) -> None:
    """The last step of the build: burst deserves twice the cluster's GPUs when it is made, but
    later cases add nodes, and a small cluster (60 GPUs) outgrows that quota. Where the nodes'
    allocatable GPUs (all schedulable) reach its deserved quota, it cannot be a finding: its
    truth entry is moved from planted to the near-misses. Draws nothing from the random stream,
    and changes no object."""
    queue = next((q for q in b.api["volcano_queues"] if q["metadata"]["name"] == "burst"), None)
    entry = {"kind": "Queue", "namespace": "", "name": "burst"}
    planted = b.truth["planted"].get(CODE, [])
    if queue is None or entry not in planted:
        return
    allocatable = sum(float(n.capacity.get(GPU, 0)) for n in b.nodes)
    if float(queue["spec"]["deserved"][GPU]) > allocatable:
        return
    planted.remove(entry)
    b.plant_name(
        CODE, "Queue", "", "burst", f"deserves no more than the {allocatable:g} GPUs nodes allocate"
    )

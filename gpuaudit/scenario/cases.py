"""Scenario cases of GPU010-GPU070: gangs, placement, pending pods and sick GPUs.

They are placed after the base workloads of `gpuaudit.scenario.generator`, in GPUs the base
left free and on nodes added here, so that the base scenario (and every case of the checks
before them) stays exactly as it was.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuaudit.scenario.model import NodeSpec, PodSpec, SlotSpec
from gpuaudit.sources.prometheus import catalogue as queries

if TYPE_CHECKING:
    from gpuaudit.scenario.generator import Arr, _Builder


def _iso_h(b: _Builder, h: float, delta_s: int = 0) -> str:
    ts = b.start + h * 3600 + delta_s
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def place(
    b: _Builder, pod: PodSpec, slots: list[SlotSpec], h0: int, act: Arr, fb_level: float
) -> None:
    for slot in slots:
        b.hold(slot, pod, h0, b.H, act + 0, fb_level)


def pending(
    b: _Builder, ns: str, name: str, owner: tuple[str, str], created_h: int, gpus: int, **kw: Any
) -> PodSpec:
    p = b.pod(ns, name, b.nodes[0], "main", owner, created_h, gpus=gpus, phase="Pending", **kw)
    p.node = ""
    return p


def _gang_pods(
    b: _Builder,
    node: NodeSpec,
    ns: str,
    names: list[str],
    owner: tuple[str, str],
    starts: list[int],
    gpus: int,
    act: list[Arr],
    **kw: Any,
) -> list[PodSpec]:
    out = []
    for name, h0, a in zip(names, starts, act, strict=True):
        p = b.pod(ns, name, node, "worker", owner, h0, gpus=gpus, **kw)
        place(b, p, b.free_slots(node)[:gpus], h0, a, 0.6)
        out.append(p)
    return out


def plant_gangs(b: _Builder, h100: list[NodeSpec]) -> None:
    """GPU010: partial gangs of each kind, a slow-starting gang and near-misses, on the
    H100 nodes with the most free GPUs left."""
    H = b.H
    roomy = sorted(
        (n for n in h100 if n.exporter),
        key=lambda n: (-len(b.free_slots(n)), n.name),
    )
    node_a = roomy[0] if roomy and len(b.free_slots(roomy[0])) >= 7 else None
    node_b = roomy[1] if len(roomy) > 1 and len(b.free_slots(roomy[1])) >= 7 else None
    if node_a is not None:
        # Volcano: 2 of 4 members run (phase Unknown), 2 cannot be scheduled.
        pg, ns, h0 = "ppo-rollout", "rl", max(0, H - 30)
        common: dict[str, Any] = {
            "labels": {"volcano.sh/job-name": pg, "volcano.sh/task-spec": "worker"},
            "annotations": {"scheduling.k8s.io/group-name": pg, "volcano.sh/job-name": pg},
            "priority_class": "training",
            "priority": 1000,
            "scheduler_name": "volcano",
        }
        names = [f"{pg}-worker-{w}" for w in range(4)]
        level = b.pattern("level", H - h0, h0, x=0.25, jitter=0.02)
        _gang_pods(b, node_a, ns, names[:2], ("Job", pg), [h0, h0], 2, [level, level], **common)
        for name in names[2:]:
            pending(
                b,
                ns,
                name,
                ("Job", pg),
                h0,
                2,
                pending_message="2/4 tasks in gang unschedulable: pod group is not ready, "
                "2 Pending, 4 minAvailable; Pending: 2 Unschedulable",
                **common,
            )
        b.api["volcano_podgroups"].append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {
                    "name": pg,
                    "namespace": ns,
                    "uid": b.ids.uuid(),
                    "creationTimestamp": _iso_h(b, h0, -120),
                },
                "spec": {
                    "minMember": 4,
                    "queue": "rl",
                    "priorityClassName": "training",
                    "minResources": {"nvidia.com/gpu": "8"},
                },
                "status": {
                    "phase": "Unknown",
                    "running": 2,
                    "succeeded": 0,
                    "failed": 0,
                    "conditions": [
                        {
                            "type": "Unschedulable",
                            "status": "True",
                            "reason": "NotEnoughResources",
                            "message": "2/4 tasks in gang unschedulable: pod group is not "
                            "ready, 2 Pending, 4 minAvailable",
                            "transitionID": b.ids.uuid(),
                            "lastTransitionTime": _iso_h(b, h0, 60),
                        }
                    ],
                },
            }
        )
        b.plant_name("GPU010", "PodGroup", ns, pg)
        # coscheduling: complete, but the third member started 3 h after the first two.
        pg, ns, h0 = "dpo-train", "ml-train", max(0, H - 60)
        late = h0 + min(3, max(1, (H - h0) // 4))
        waiting = b.pattern("busy", H - h0, h0)
        waiting[: late - h0] = 0.01
        cosched: dict[str, Any] = {
            "labels": {
                "scheduling.x-k8s.io/pod-group": pg,
                "batch.kubernetes.io/job-name": pg,
            },
            "scheduler_name": "scheduler-plugins-scheduler",
        }
        _gang_pods(
            b,
            node_a,
            ns,
            [f"{pg}-{r}" for r in range(3)],
            ("Job", pg),
            [h0, h0, late],
            1,
            [waiting, waiting, b.pattern("busy", H - late, late)],
            **cosched,
        )
        b.api["coscheduling_podgroups"].append(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {
                    "name": pg,
                    "namespace": ns,
                    "uid": b.ids.uuid(),
                    "creationTimestamp": _iso_h(b, h0, -120),
                },
                "spec": {"minMember": 3, "scheduleTimeoutSeconds": 600},
                "status": {
                    "phase": "Running",
                    "running": 3,
                    "succeeded": 0,
                    "failed": 0,
                    "scheduleStartTime": _iso_h(b, h0, -60),
                },
            }
        )
        b.plant_name("GPU010", "PodGroup", ns, pg)
    if node_b is not None:
        # PyTorchJob: master and 2 of 3 workers run, one worker cannot be placed.
        job, ns, h0 = "bert-ft", "ml-train", max(0, H - 40)
        uid = b.ids.uuid()
        b.pytorchjobs.append({"namespace": ns, "name": job, "uid": uid, "workers": 3})
        level = b.pattern("level", H - h0, h0, x=0.15, jitter=0.02)
        for role, idx in (("master", 0), ("worker", 0), ("worker", 1), ("worker", 2)):
            labels = {
                "training.kubeflow.org/job-name": job,
                "training.kubeflow.org/replica-type": role,
                "training.kubeflow.org/replica-index": str(idx),
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
            }
            kw: dict[str, Any] = {
                "labels": labels,
                "priority_class": "training",
                "priority": 1000,
                "owner_uid": uid,
            }
            name = f"{job}-{role}-{idx}"
            if role == "worker" and idx == 2:
                pending(
                    b,
                    ns,
                    name,
                    ("PyTorchJob", job),
                    h0,
                    1,
                    pending_message="0/64 nodes are available: 64 node(s) didn't match pod "
                    "topology spread constraints.",
                    **kw,
                )
            else:
                _gang_pods(b, node_b, ns, [name], ("PyTorchJob", job), [h0], 1, [level], **kw)
        b.plant_name("GPU010", "PyTorchJob", ns, job)
        # Kueue plain-pod group: the Workload is Admitted, PodsReady is False, 2 of 3 run.
        group, ns, h0 = "eval-group", "ml-eval", max(0, H - 10)
        kueue: dict[str, Any] = {
            "labels": {
                "kueue.x-k8s.io/queue-name": "eval",
                "kueue.x-k8s.io/pod-group-name": group,
            },
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3"},
        }
        level = b.pattern("level", H - h0, h0, x=0.2, jitter=0.02)
        _gang_pods(
            b,
            node_b,
            ns,
            [f"{group}-0", f"{group}-1"],
            ("", ""),
            [h0, h0],
            1,
            [level] * 2,
            **kueue,
        )
        pending(
            b,
            ns,
            f"{group}-2",
            ("", ""),
            h0,
            1,
            pending_message="0/64 nodes are available: 64 node(s) had untolerated taint "
            "{dedicated: eval}.",
            **kueue,
        )
        b.api["kueue_workloads"].append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {
                    "name": group,
                    "namespace": ns,
                    "uid": b.ids.uuid(),
                    "creationTimestamp": _iso_h(b, h0, -180),
                    "labels": {"kueue.x-k8s.io/queue-name": "eval"},
                },
                "spec": {
                    "active": True,
                    "queueName": "eval",
                    "podSets": [
                        {
                            "name": "main",
                            "count": 3,
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "worker",
                                            "image": "registry.example/worker:1",
                                            "resources": {"requests": {"nvidia.com/gpu": "1"}},
                                        }
                                    ]
                                }
                            },
                        }
                    ],
                },
                "status": {
                    "admission": {
                        "clusterQueue": "gpu-cluster-queue",
                        "podSetAssignments": [
                            {
                                "name": "main",
                                "count": 3,
                                "flavors": {"nvidia.com/gpu": "h100"},
                                "resourceUsage": {"nvidia.com/gpu": "3"},
                            }
                        ],
                    },
                    "conditions": [
                        {
                            "type": "QuotaReserved",
                            "status": "True",
                            "reason": "QuotaReserved",
                            "message": "Quota reserved in ClusterQueue gpu-cluster-queue",
                            "lastTransitionTime": _iso_h(b, h0, -150),
                        },
                        {
                            "type": "Admitted",
                            "status": "True",
                            "reason": "Admitted",
                            "message": "The workload is admitted",
                            "lastTransitionTime": _iso_h(b, h0, -150),
                        },
                        {
                            "type": "PodsReady",
                            "status": "False",
                            "reason": "WaitForStart",
                            "message": "Not all pods are ready or succeeded",
                            "lastTransitionTime": _iso_h(b, h0, -149),
                        },
                    ],
                },
            }
        )
        b.plant_name("GPU010", "Workload", ns, group)
        # JobSet: complete, members started 10 minutes apart (under the 30-minute bar).
        js, ns, h0 = "sweep", "ml-train", max(0, H - 20)
        busy = b.pattern("busy", H - h0, h0)
        for j, delay in ((0, 5), (1, 605)):
            _gang_pods(
                b,
                node_b,
                ns,
                [f"{js}-workers-{j}-0-{b.ids.suffix()}"],
                ("Job", f"{js}-workers-{j}"),
                [h0],
                1,
                [busy],
                labels={
                    "jobset.sigs.k8s.io/jobset-name": js,
                    "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                    "jobset.sigs.k8s.io/job-index": str(j),
                },
                start_delay_s=delay,
            )
        b.api["jobsets"].append(
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": {"name": js, "namespace": ns, "uid": b.ids.uuid()},
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "workers",
                            "replicas": 2,
                            "template": {"spec": {"parallelism": 1, "completions": 1}},
                        }
                    ]
                },
                "status": {"replicatedJobsStatus": [{"name": "workers", "active": 2}]},
            }
        )
        b.plant_name("GPU010", "JobSet", ns, js, "members started 10 min apart")
    # coscheduling: a gang none of whose members runs holds nothing.
    pg, ns = "hpo-trials", "ml-tune"
    for i in range(4):
        pending(
            b,
            ns,
            f"{pg}-{i}",
            ("Job", pg),
            max(0, H - 5),
            1,
            labels={"scheduling.x-k8s.io/pod-group": pg},
            scheduler_name="scheduler-plugins-scheduler",
            pending_message=f"pod group {pg} is not ready: 0 of 4 members scheduled",
        )
    b.api["coscheduling_podgroups"].append(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": pg, "namespace": ns, "uid": b.ids.uuid()},
            "spec": {"minMember": 4, "scheduleTimeoutSeconds": 300},
            "status": {"phase": "Pending", "running": 0, "succeeded": 0, "failed": 0},
        }
    )
    b.plant_name("GPU010", "PodGroup", ns, pg, "no member runs: nothing is held")
    if b.pytorchjobs and b.pytorchjobs[0]["name"] == "llm-pretrain-000":
        b.plant_name("GPU010", "PyTorchJob", "ml-train", "llm-pretrain-000", "complete")
        b.plant_name(
            "GPU031",
            "PyTorchJob",
            "ml-train",
            "llm-pretrain-000",
            "spans only the nodes it needs",
        )


def plant_placement(b: _Builder, l40s: list[NodeSpec]) -> None:
    """GPU030, GPU031, GPU060 and GPU070 on three GB200 trays in two NVLink domains, one
    more L40S node, and an L40S node with room."""
    H = b.H
    cluster = b.ids.uuid()
    trays = [b.add_node("gb200", i) for i in range(3)]
    for tray, clique in zip(trays, (1, 1, 2), strict=True):
        tray.clique = f"{cluster}.{clique}"
        tray.labels["nvidia.com/gpu.clique"] = tray.clique
    # GPU060: tray 0 stays empty; trays 1 and 2 wait a while for the MoE job.
    b.plant_name("GPU060", "Node", "", trays[0].name)
    h0 = min(20, H // 2)
    job, ns = "moe-train", "ml-train"
    uid = b.ids.uuid()
    b.pytorchjobs.append({"namespace": ns, "name": job, "uid": uid, "workers": 1})
    for j, tray in enumerate(trays[1:]):
        role = "master" if j == 0 else "worker"
        p = b.pod(
            ns,
            f"{job}-{role}-0",
            tray,
            "pytorch",
            ("PyTorchJob", job),
            h0,
            gpus=4,
            labels={
                "training.kubeflow.org/job-name": job,
                "training.kubeflow.org/replica-type": role,
                "training.kubeflow.org/replica-index": "0",
            },
            priority_class="training",
            priority=1000,
            owner_uid=uid,
        )
        place(b, p, b.free_slots(tray), h0, b.pattern("busy", H - h0, h0), 0.8)
    # GPU031: the job spans both NVLink domains while domain 1 (trays 0 and 1) had room.
    b.plant_name("GPU031", "PyTorchJob", ns, job)
    b.plant_name("GPU010", "PyTorchJob", ns, job, "complete, members started together")
    if h0 < 24:
        b.plant_name("GPU060", "Node", "", trays[1].name, f"idle for {h0} h only")
    # GPU070: a failed row remap on one of the worker's GPUs.
    sick = b.slots_by_node[trays[2].name][2]
    when = H - min(48, (H - h0) // 2)
    sick.health[queries.REMAP_UNCORR] = [(when, 8)]
    sick.health[queries.REMAP_FAILURE] = [(when, 1)]
    b.plant_name("GPU070", "GPU", "", sick.uuid)
    # GPU030 on a PCIe-only L40S board: pairs (0, 1) and (2, 3) share a switch.
    extra = b.add_node("l40s", len(l40s))
    slots = b.slots_by_node[extra.name]
    pinned = {"nvidia.com/gpu.product": extra.product}
    tp2 = b.deployment_pod(
        "serving",
        "vllm-tp2",
        extra,
        0,
        gpus=2,
        priority_class="serving",
        priority=10000,
        node_selector=pinned,
    )
    place(b, tp2, [slots[0], slots[2]], 0, b.pattern("diurnal", H, 0, base=0.3), 0.5)
    b.plant("GPU030", tp2)
    late_h = min(6, H // 4)
    late = b.deployment_pod(
        "serving",
        "vllm-tp2-late",
        extra,
        late_h,
        gpus=2,
        priority_class="serving",
        priority=10000,
        node_selector=pinned,
    )
    act = b.pattern("diurnal", H - late_h, late_h, base=0.3)
    place(b, late, [slots[1], slots[3]], late_h, act, 0.5)
    b.plant("GPU030", late, "no better-connected pair was free when it started")
    b.plant("GPU031", late, "pinned to L40S by its nodeSelector")
    # GPU031: a 2-GPU job on PCIe-only L40S GPUs while NVLink nodes had room (tray 0 at least).
    roomy = sorted(l40s, key=lambda n: (-len(b.free_slots(n)), n.name))
    if roomy and len(b.free_slots(roomy[0])) >= 2:
        node = roomy[0]
        free = {s.index: s for s in b.free_slots(node)}
        pair = next(
            ([free[a], free[a + 1]] for a in (0, 2) if a in free and a + 1 in free),
            list(free.values())[:2],
        )
        p = b.pod(
            "ml-train",
            "sdxl-finetune-0",
            node,
            "main",
            ("Job", "sdxl-finetune"),
            0,
            gpus=2,
            labels={"batch.kubernetes.io/job-name": "sdxl-finetune"},
        )
        place(b, p, pair, 0, b.pattern("busy", H, 0, lo=0.5, hi=0.8), 0.7)
        b.plant("GPU031", p)


def plant_health(b: _Builder, h100: list[NodeSpec]) -> None:
    """GPU070: an XID 63 on a GPU a job holds; an XID 79 on a GPU nobody holds."""
    H = b.H
    roomy = sorted(
        (n for n in h100 if n.exporter and 2 <= len(b.free_slots(n)) <= 6),
        key=lambda n: (-len(b.free_slots(n)), n.name),
    )
    if roomy:
        node = roomy[0]
        p = b.pod(
            "ml-train",
            "ft-ecc-0",
            node,
            "main",
            ("Job", "ft-ecc"),
            0,
            gpus=2,
            labels={"batch.kubernetes.io/job-name": "ft-ecc"},
        )
        slots = b.free_slots(node)[:2]
        place(b, p, slots, 0, b.pattern("busy", H, 0), 0.6)
        when = H - min(40, H // 2)
        slots[0].health[queries.XID] = [(when, 63)]
        slots[0].health[queries.REMAP_UNCORR] = [(when, 1)]
        b.plant_name("GPU070", "GPU", "", slots[0].uuid)
    spare = next(
        (s for n in h100 if n.exporter for s in b.free_slots(n)),
        None,
    )
    if spare is not None:
        spare.health[queries.XID] = [(H - min(10, H // 3), 79)]
        b.plant_name("GPU070", "GPU", "", spare.uuid, "XID 79 on a GPU no pod held")


def plant_pending(b: _Builder) -> None:
    """GPU050 and GPU051: pods pending for GPUs."""
    H = b.H
    b.api["priorityclasses"].append(
        {
            "name": "research-high",
            "value": 5000,
            "preemptionPolicy": "Never",
            "description": "Urgent research runs that must not evict others.",
        }
    )
    msg = "0/{n} nodes are available: {n} Insufficient nvidia.com/gpu."
    n_nodes = len(b.nodes)
    pending(
        b,
        "research",
        "eval-llm-0",
        ("Job", "eval-llm"),
        max(0, H - 3),
        4,
        priority_class="research-high",
        priority=5000,
        preemption_policy="Never",
        node_selector={"nvidia.com/gpu.product": "NVIDIA-L40S"},
        pending_message=msg.format(n=n_nodes),
    )
    pending(
        b,
        "research",
        "eval-4gpu-0",
        ("Job", "eval-4gpu"),
        max(0, H - 5),
        4,
        node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        pending_message=msg.format(n=n_nodes),
    )
    hot = pending(
        b,
        "ml-train",
        "hotfix-train-0",
        ("Job", "hotfix-train"),
        H,
        8,
        priority_class="training",
        priority=1000,
        created_delta_s=-600,
        pending_message=msg.format(n=n_nodes),
    )
    b.plant("GPU050", hot, "pending 10 min")
    b.plant("GPU051", hot, "pending 10 min")


def truth_from_state(b: _Builder) -> None:
    """Truth of the rules that depend on the whole cluster's end state (GPU050, GPU051,
    GPU060), derived from the model with the checks' documented rules."""
    cap = {n.name: int(n.capacity.get("nvidia.com/gpu", "0")) for n in b.nodes}
    product = {n.name: n.product for n in b.nodes}
    bound = [p for p in b.pods if p.alive and p.node and p.phase != "Pending"]
    used: dict[str, int] = {}
    holders: dict[str, list[int]] = {}
    for p in bound:
        used[p.node] = used.get(p.node, 0) + p.gpus
        if p.gpus:
            prio = p.priority if p.priority_class else 0
            holders.setdefault(p.node, []).extend([prio] * p.gpus)
    free = {n: cap[n] - used.get(n, 0) for n in cap if cap[n] > 0}
    for p in b.pods:
        if not p.alive or p.phase != "Pending" or not p.gpus:
            continue
        if "nvidia.com/" not in p.pending_message and p.pending_message:
            continue
        created = p.created_h * 3600 + p.created_delta_s + 1
        if b.H * 3600 - created < 30 * 60:
            continue
        sel = p.node_selector.get("nvidia.com/gpu.product")
        pool = [n for n in free if cap[n] >= p.gpus and (not sel or product[n] == sel)]
        if not pool or any(free[n] >= p.gpus for n in pool):
            continue
        prio = p.priority if p.priority_class else 0
        if any(free[n] + sum(1 for q in holders.get(n, []) if q < prio) >= p.gpus for n in pool):
            b.plant("GPU050", p)
        else:
            b.plant("GPU050", p, "no lower-priority pod holds GPUs it could use")
        if p.gpus >= 2 and sum(free[n] for n in pool) >= p.gpus:
            b.plant("GPU051", p)
        elif p.gpus >= 2:
            b.plant("GPU051", p, "the pool has fewer free GPUs than it needs")
    # GPU050 policy: pools where serving and batch GPU pods share nodes, some unclassed.
    pools: dict[str, dict[str, bool]] = {}
    for p in bound:
        if not (p.gpus or p.mig) or p.phase != "Running":
            continue
        kind = "Deployment" if p.owner_kind == "ReplicaSet" else p.owner_kind
        if "notebook-name" in p.labels:
            kind = "Notebook"
        f = pools.setdefault(product[p.node], {"serving": False, "batch": False, "bare": False})
        f["serving"] |= kind in ("Deployment", "StatefulSet", "LeaderWorkerSet")
        f["batch"] |= kind in ("Job", "CronJob", "PyTorchJob", "MPIJob", "JobSet")
        f["bare"] |= not p.priority_class
    for pool_name, f in sorted(pools.items()):
        if f["serving"] and f["batch"] and f["bare"]:
            b.plant_name("GPU050", "NodePool", "", pool_name)
        else:
            b.plant_name("GPU050", "NodePool", "", pool_name, "serving and batch do not share it")
    # GPU060: nodes with a 24-hour run of hours where no held GPU reached 5 % activity.
    idle = {n.name: np.ones(b.H, dtype=bool) for n in b.nodes if n.exporter}
    for h in b.holdings:
        if h.pod is not None and h.slot.node.name in idle:
            idle[h.slot.node.name][h.h0 : h.h1] &= h.act < 0.05
    planted = {e["name"] for e in b.truth["planted"].get("GPU060", [])}
    for name, flags in idle.items():
        run = best = 0
        for f in flags:
            run = run + 1 if f else 0
            best = max(best, run)
        if best >= 24 and name not in planted:
            b.plant_name("GPU060", "Node", "", name)

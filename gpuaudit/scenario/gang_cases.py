"""GPU010's cases: partial gangs of each kind (Volcano, coscheduling, PyTorchJob, Kueue), a
slow-starting gang, and near-misses (a JobSet whose members started close together, a gang none
of whose members runs), with the gang objects their schedulers keep.

They are placed after the base scenario and its background, in the GPUs those left free on the
H100 nodes with the most room, so that the base scenario stays exactly as it was.
"""

from __future__ import annotations

from typing import Any

from gpuaudit.scenario.builder import Arr, Builder
from gpuaudit.scenario.cluster import NodeSpec, PodSpec
from gpuaudit.scenario.workloads import pending, place


def plant_gangs(b: Builder) -> None:
    """The gang cases, on the two H100 nodes (with a dcgm-exporter) with the most free GPUs
    left, each only when it still has 7 free."""
    roomy = sorted(
        (n for n in b.of_kind("h100") if n.exporter),
        key=lambda n: (-len(b.free_slots(n)), n.name),
    )
    node_a = roomy[0] if roomy and len(b.free_slots(roomy[0])) >= 7 else None
    node_b = roomy[1] if len(roomy) > 1 and len(b.free_slots(roomy[1])) >= 7 else None
    if node_a is not None:
        _volcano(b, node_a)
        _coscheduled_late(b, node_a)
    if node_b is not None:
        _pytorchjob(b, node_b)
        _kueue(b, node_b)
        _jobset(b, node_b)
    _none_running(b)
    if b.pytorchjobs and b.pytorchjobs[0]["name"] == "llm-pretrain-000":
        # Its last worker's GPUs show in DCGM an hour after the rest: at the job's start that
        # node's GPUs were free and are the job's own, counted once.
        worker = [p for p in b.pods if p.owner_name == "llm-pretrain-000"][-1]
        b.start_later(worker, 1)
        b.plant_name("GPU010", "PyTorchJob", "ml-train", "llm-pretrain-000", "complete")
        b.plant_name(
            "GPU031",
            "PyTorchJob",
            "ml-train",
            "llm-pretrain-000",
            "8-GPU pods on 8-GPU nodes: it spans only the nodes it needs",
        )


def _members(
    b: Builder,
    node: NodeSpec,
    ns: str,
    names: list[str],
    owner: tuple[str, str],
    starts: list[int],
    gpus: int,
    act: list[Arr],
    **kw: Any,
) -> list[PodSpec]:
    """Running members of a gang on `node`, each on `gpus` free GPUs from its start hour."""
    out = []
    for name, h0, a in zip(names, starts, act, strict=True):
        p = b.pod(ns, name, node, "worker", owner, h0, gpus=gpus, **kw)
        place(b, p, b.free_slots(node)[:gpus], h0, a, 0.6)
        out.append(p)
    return out


def _volcano(b: Builder, node: NodeSpec) -> None:
    """Volcano: 2 of 4 members run (phase Unknown), 2 cannot be scheduled."""
    pg, ns, h0 = "ppo-rollout", "rl", max(0, b.H - 30)
    common: dict[str, Any] = {
        "labels": {"volcano.sh/job-name": pg, "volcano.sh/task-spec": "worker"},
        "annotations": {"scheduling.k8s.io/group-name": pg, "volcano.sh/job-name": pg},
        "priority_class": "training",
        "priority": 1000,
        "scheduler_name": "volcano",
    }
    names = [f"{pg}-worker-{w}" for w in range(4)]
    level = b.pattern("level", b.H - h0, h0, x=0.25, jitter=0.02)
    _members(b, node, ns, names[:2], ("Job", pg), [h0, h0], 2, [level, level], **common)
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
    b.api["volcano_podgroups"].append(_volcano_podgroup(b, pg, ns, h0))
    b.plant_name("GPU010", "PodGroup", ns, pg)


def _volcano_podgroup(b: Builder, pg: str, ns: str, h0: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": pg,
            "namespace": ns,
            "uid": b.ids.uuid(),
            "creationTimestamp": b.iso(h0, -120),
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
                    "lastTransitionTime": b.iso(h0, 60),
                }
            ],
        },
    }


def _coscheduled_late(b: Builder, node: NodeSpec) -> None:
    """coscheduling: complete, but the third member started 3 h after the first two."""
    H = b.H
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
    last = b.pattern("busy", H - late, late)
    _members(
        b,
        node,
        ns,
        [f"{pg}-{r}" for r in range(3)],
        ("Job", pg),
        [h0, h0, late],
        1,
        [waiting, waiting, last],
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
                "creationTimestamp": b.iso(h0, -120),
            },
            "spec": {"minMember": 3, "scheduleTimeoutSeconds": 600},
            "status": {
                "phase": "Running",
                "running": 3,
                "succeeded": 0,
                "failed": 0,
                "scheduleStartTime": b.iso(h0, -60),
            },
        }
    )
    b.plant_name("GPU010", "PodGroup", ns, pg)


def _pytorchjob(b: Builder, node: NodeSpec) -> None:
    """PyTorchJob: master and 2 of 3 workers run, one worker cannot be placed."""
    job, ns, h0 = "bert-ft", "ml-train", max(0, b.H - 40)
    uid = b.ids.uuid()
    b.pytorchjobs.append({"namespace": ns, "name": job, "uid": uid, "workers": 3})
    level = b.pattern("level", b.H - h0, h0, x=0.15, jitter=0.02)
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
            _members(b, node, ns, [name], ("PyTorchJob", job), [h0], 1, [level], **kw)
    b.plant_name("GPU010", "PyTorchJob", ns, job)


def _kueue(b: Builder, node: NodeSpec) -> None:
    """Kueue plain-pod group: the Workload is Admitted, PodsReady is False, 2 of 3 run."""
    group, ns, h0 = "eval-group", "ml-eval", max(0, b.H - 10)
    kueue: dict[str, Any] = {
        "labels": {
            "kueue.x-k8s.io/queue-name": "eval",
            "kueue.x-k8s.io/pod-group-name": group,
        },
        "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3"},
    }
    level = b.pattern("level", b.H - h0, h0, x=0.2, jitter=0.02)
    members = [f"{group}-0", f"{group}-1"]
    _members(b, node, ns, members, ("", ""), [h0, h0], 1, [level] * 2, **kueue)
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
    b.api["kueue_workloads"].append(_kueue_workload(b, group, ns, h0))
    b.plant_name("GPU010", "Workload", ns, group)


def _kueue_workload(b: Builder, group: str, ns: str, h0: int) -> dict[str, Any]:
    container = {
        "name": "worker",
        "image": "registry.example/worker:1",
        "resources": {"requests": {"nvidia.com/gpu": "1"}},
    }
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": group,
            "namespace": ns,
            "uid": b.ids.uuid(),
            "creationTimestamp": b.iso(h0, -180),
            "labels": {"kueue.x-k8s.io/queue-name": "eval"},
        },
        "spec": {
            "active": True,
            "queueName": "eval",
            "podSets": [
                {"name": "main", "count": 3, "template": {"spec": {"containers": [container]}}}
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
            "conditions": _kueue_conditions(b, h0),
        },
    }


def _kueue_conditions(b: Builder, h0: int) -> list[dict[str, Any]]:
    """Quota reserved and admitted, but not all pods ready."""
    return [
        {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "QuotaReserved",
            "message": "Quota reserved in ClusterQueue gpu-cluster-queue",
            "lastTransitionTime": b.iso(h0, -150),
        },
        {
            "type": "Admitted",
            "status": "True",
            "reason": "Admitted",
            "message": "The workload is admitted",
            "lastTransitionTime": b.iso(h0, -150),
        },
        {
            "type": "PodsReady",
            "status": "False",
            "reason": "WaitForStart",
            "message": "Not all pods are ready or succeeded",
            "lastTransitionTime": b.iso(h0, -149),
        },
    ]


def _jobset(b: Builder, node: NodeSpec) -> None:
    """JobSet: complete, members started 10 minutes apart (under the 30-minute bar)."""
    js, ns, h0 = "sweep", "ml-train", max(0, b.H - 20)
    busy = b.pattern("busy", b.H - h0, h0)
    for j, delay in ((0, 5), (1, 605)):
        _members(
            b,
            node,
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


def _none_running(b: Builder) -> None:
    """coscheduling: a gang none of whose members runs holds nothing."""
    pg, ns = "hpo-trials", "ml-tune"
    for i in range(4):
        pending(
            b,
            ns,
            f"{pg}-{i}",
            ("Job", pg),
            max(0, b.H - 5),
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

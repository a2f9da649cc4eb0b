"""Kueue and Volcano queue objects read into `Queues`, and the capability they give."""

from __future__ import annotations

from typing import Any

from gpuaudit.inventory import Capability
from gpuaudit.inventory.gangs import build as gangs
from gpuaudit.inventory.queues import KUEUE, VOLCANO, Quota, build, capabilities
from tests.support.factories import START, make_node, make_pod
from tests.support.queue_objects import (
    cluster_queue,
    flavor,
    local_queue,
    podgroup,
    volcano_queue,
    workload,
)

H = 3600.0


def _queues(lists: dict[str, list[dict[str, Any]]]) -> Any:
    _, member = gangs(lists)
    return build(lists, lists.keys(), member)


def test_cluster_queue_gpu_quota_of_both_api_versions() -> None:
    limits = {("h100", "nvidia.com/gpu"): {"lendingLimit": "0", "borrowingLimit": 4}}
    v2 = cluster_queue("a", [("h100", "nvidia.com/gpu", "8")], "research", limits)
    v1 = cluster_queue("b", [("a100", "nvidia.com/mig-1g.10gb", 14)], "research", v1beta1=True)
    qs = _queues({"kueue_clusterqueues": [v2, v1]})
    a, b = qs.queues
    assert (a.system, a.kind, a.name, a.cohort) == (KUEUE, "ClusterQueue", "a", "research")
    # CPU quota is not a GPU resource and is left out.
    assert a.quotas == (Quota("h100", "nvidia.com/gpu", 8.0, 4.0, 0.0),)
    assert b.cohort == "research"
    assert b.quotas == (Quota("a100", "nvidia.com/mig-1g.10gb", 14.0),)


def test_fenced_quota_follows_cohort_and_lending_limit() -> None:
    q = Quota("f", "nvidia.com/gpu", 8.0, lending_limit=3.0)
    open_q = Quota("f", "nvidia.com/gpu", 8.0)
    qs = _queues(
        {
            "kueue_clusterqueues": [
                cluster_queue("alone", [("f", "nvidia.com/gpu", "8")]),
                cluster_queue("member", [("f", "nvidia.com/gpu", "8")], "c"),
            ],
            "volcano_queues": [volcano_queue("v", guarantee=2, deserved=6)],
        }
    )
    alone, member, v = qs.queues
    assert alone.fenced(open_q) == 8.0  # no cohort: nobody may borrow it
    assert member.fenced(open_q) == 0.0  # in a cohort without a lending limit: all lendable
    assert member.fenced(q) == 5.0  # nominal - lendingLimit
    assert v.system == VOLCANO
    (vq,) = v.quotas
    assert (vq.nominal, vq.guarantee, vq.capability) == (6.0, 2.0, None)
    assert v.fenced(vq) == 2.0


def test_volcano_queue_and_its_podgroups() -> None:
    qs = _queues(
        {
            "volcano_queues": [volcano_queue("vq", guarantee=4, capability=16, allocated=3)],
            "volcano_podgroups": [podgroup("ml", "pg", "vq", 2), podgroup("ml", "other", "")],
        }
    )
    (q,) = qs.queues
    assert q.allocated == {"nvidia.com/gpu": 3.0}
    assert q.quotas[0].capability == 16.0
    pg, other = qs.admissions
    assert (pg.queue, pg.gang, pg.requests) == (
        "vq",
        "scheduling.volcano.sh/PodGroup/ml/pg",
        (("nvidia.com/gpu", 2.0),),
    )
    assert other.queue == "default"  # a PodGroup without spec.queue goes to Volcano's default


def test_workload_admission_interval_usage_and_pending() -> None:
    lists = {
        "kueue_localqueues": [local_queue("ml", "lq", "cq")],
        "kueue_workloads": [
            workload("ml", "run", "cq", "h100", 2, reserved=START, finished=START + 5 * H, count=3),
            # No resourceUsage (an older Kueue): count x the pod template's request.
            workload("ml", "old", "cq", "h100", 4, reserved=START + H, usage=False, count=2),
            workload("ml", "wait", "", "", 8, pending_since=START + 2 * H, local_queue="lq"),
        ],
    }
    run, old, wait = _queues(lists).admissions
    assert run.usage == (("h100", "nvidia.com/gpu", 6.0),)
    assert (run.reserved_at, run.finished_at, run.pending_since) == (START, START + 5 * H, None)
    assert old.usage == (("h100", "nvidia.com/gpu", 8.0),)
    assert old.finished_at is None
    # Not admitted: its ClusterQueue through its LocalQueue, waiting since QuotaReserved=False.
    assert (wait.queue, wait.pending_since, wait.usage) == ("cq", START + 2 * H, ())
    assert wait.requests == (("nvidia.com/gpu", 8.0),)


def test_pods_join_queues_by_gang_owner_label_and_annotation() -> None:
    pods = [
        make_pod("job-a-x", namespace="ml", owner=("Job", "job-a")),
        make_pod("plain", namespace="ml"),
        make_pod("labelled", namespace="ml", labels={"kueue.x-k8s.io/queue-name": "lq"}),
        make_pod(
            "vol",
            namespace="rl",
            annotations={"scheduling.k8s.io/group-name": "pg"},
        ),
        make_pod("vq-only", namespace="rl", annotations={"scheduling.volcano.sh/queue-name": "v"}),
        make_pod("loose", namespace="ml", labels={"kueue.x-k8s.io/queue-name": "nope"}),
    ]
    lists = {
        "pods": pods,
        "kueue_localqueues": [local_queue("ml", "lq", "cq2")],
        "kueue_workloads": [
            workload("ml", "wl-a", "cq", "f", 1, reserved=START, owner=("Job", "job-a")),
            workload("ml", "wl-plain", "cq", "f", 1, reserved=START, owner=("Pod", "plain")),
        ],
        "volcano_podgroups": [podgroup("rl", "pg", "v")],
    }
    qs = _queues(lists)
    assert qs.pod_queue == {
        ("ml", "job-a-x"): (KUEUE, "cq"),
        ("ml", "plain"): (KUEUE, "cq"),
        ("ml", "labelled"): (KUEUE, "cq2"),
        ("rl", "vol"): (VOLCANO, "v"),
        ("rl", "vq-only"): (VOLCANO, "v"),
    }
    assert qs.pod_admission[("ml", "job-a-x")].name == "wl-a"


def test_flavor_nodes_by_node_labels() -> None:
    nodes = [make_node("a"), make_node("b", "NVIDIA-L40S", 4), make_node("c", cordoned=True)]
    taint = {"key": "team", "value": "x", "effect": "NoSchedule"}
    lists = {
        "nodes": nodes,
        "kueue_resourceflavors": [
            flavor("h100", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, [taint]),
            flavor("any", {}),
        ],
    }
    qs = _queues(lists)
    assert qs.flavors["h100"].node_taints == ("team=x:NoSchedule",)
    assert [n.name for n in qs.flavor_nodes("h100") or ()] == ["a", "c"]
    assert [n.name for n in qs.flavor_nodes("any") or ()] == ["a", "b", "c"]
    assert qs.flavor_nodes("missing") == ()  # flavors were read: an unknown one selects nothing
    unread = build({"nodes": nodes}, ["nodes"], {})
    assert unread.flavor_nodes("h100") is None  # not read: unknown, never "no nodes"
    assert qs.nodes[2].cordoned and qs.nodes[0].allocatable == {"nvidia.com/gpu": 8.0}


def test_queue_capability_and_why_it_is_missing() -> None:
    caps, missing = capabilities(["kueue_clusterqueues", "kueue_workloads"], {})
    assert caps == {Capability.QUEUES}
    assert Capability.KUBERNETES_VOLCANO_QUEUES in missing
    states = {
        "kueue_clusterqueues": "absent: the CRD clusterqueues.kueue.x-k8s.io is not installed",
        "volcano_queues": "forbidden: queues.scheduling.volcano.sh is forbidden",
    }
    caps, missing = capabilities(["kueue_workloads", "volcano_podgroups"], states)
    assert caps == set()
    why = missing[Capability.QUEUES]
    assert "kueue_clusterqueues: absent: the CRD clusterqueues.kueue.x-k8s.io" in why
    assert "volcano_queues: forbidden" in why
    assert (
        missing[Capability.KUBERNETES_KUEUE_RESOURCEFLAVORS]
        == "kueue_resourceflavors were not read"
    )


def test_hostile_quantities_are_bounded() -> None:
    # A finite quota above the bound is read as the bound; one that is no finite number
    # (`1e400` overflows, like a node's GPU count `Infinity`) or is negative is read as none
    # (`numbers.quantity`).
    resources = [
        ("f", "nvidia.com/gpu", "1e9"),
        ("g", "nvidia.com/gpu", "1e400"),
        ("f", "nvidia.com/mig-1g.10gb", -3),
        ("g", "nvidia.com/mig-1g.10gb", "nan"),
    ]
    (q,) = _queues({"kueue_clusterqueues": [cluster_queue("x", resources)]}).queues
    assert [x.nominal for x in q.quotas] == [1e7, 0.0, 0.0, 0.0]

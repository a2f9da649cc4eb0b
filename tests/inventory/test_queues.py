"""Kueue and Volcano queue objects read into `Queues`, and the capability they give."""

from __future__ import annotations

from typing import Any

import pytest

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


def _read(lists: dict[str, list[dict[str, Any]]]) -> tuple[Any, list[str]]:
    notes: list[str] = []
    _, member = gangs(lists)
    return build(lists, lists.keys(), member, notes), notes


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("NaN", "not a Kubernetes quantity"),
        ("1e400", "not a Kubernetes quantity"),
        ("\u0661\u0662", "not a Kubernetes quantity"),
        ("8 ", "not a Kubernetes quantity"),
        ("-4", "a negative quantity"),
        (-4, "a negative quantity"),
        (
            "1e9",
            "more than the 10,000,000 GPUs or MIG slices a queue may hold "
            "(GPUAUDIT_MAX_QUEUE_QUOTA)",
        ),
    ],
)
def test_an_unreadable_quota_is_unknown_and_said_never_0_or_clamped(raw: Any, why: str) -> None:
    cqs = [
        cluster_queue("team-a", [("h100", "nvidia.com/gpu", raw)]),
        cluster_queue("team-b", [("h100", "nvidia.com/gpu", "8")]),
    ]
    qs, notes = _read({"kueue_clusterqueues": cqs})
    a, b = qs.queues
    assert notes == [
        f"ClusterQueue team-a: nominalQuota of nvidia.com/gpu in flavor h100 is {str(raw)!r}, "
        f"{why}; its quota is not audited"
    ]
    assert a.unaudited and not b.unaudited
    assert b.quotas[0].nominal == 8.0


def test_the_quota_bound_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAUDIT_MAX_QUEUE_QUOTA", "100")
    cq = cluster_queue("big", [("h100", "nvidia.com/gpu", "1k")])
    qs, notes = _read({"kueue_clusterqueues": [cq]})
    assert qs.queues[0].unaudited
    assert "more than the 100 GPUs or MIG slices a queue may hold" in notes[0]
    monkeypatch.setenv("GPUAUDIT_MAX_QUEUE_QUOTA", "1000")
    qs, notes = _read({"kueue_clusterqueues": [cq]})
    assert not qs.queues[0].unaudited and qs.queues[0].quotas[0].nominal == 1000.0
    assert notes == []


def test_unreadable_quantities_of_every_queue_object_are_said() -> None:
    limits = {("h100", "nvidia.com/gpu"): {"lendingLimit": "Infinity", "borrowingLimit": "2"}}
    cq = cluster_queue("lim", [("h100", "nvidia.com/gpu", "8")], "c", limits)
    cq["status"] = {
        "flavorsReservation": [
            {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "x"}]}
        ]
    }
    cohort = {
        "metadata": {"name": "c"},
        "spec": {
            "resourceGroups": [
                {
                    "flavors": [
                        {
                            "name": "h100",
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "nan"}],
                        }
                    ]
                }
            ]
        },
    }
    vq = volcano_queue("vq", guarantee=2, deserved=4)
    vq["spec"]["capability"] = {"nvidia.com/gpu": "1e3Ki"}
    vq["status"]["allocated"] = {"nvidia.com/gpu": "-1"}
    fine = cluster_queue("fine", [("h100", "nvidia.com/gpu", "8")])
    wl = workload("ml", "run", "fine", "h100", 2, reserved=START)
    wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] = {"nvidia.com/gpu": "2²"}
    pg = podgroup("ml", "pg", "other")
    pg["spec"]["minResources"] = {"nvidia.com/gpu": True}
    lists = {
        "kueue_clusterqueues": [cq, fine],
        "kueue_cohorts": [cohort],
        "kueue_workloads": [wl],
        "volcano_queues": [vq, volcano_queue("other", deserved=1)],
        "volcano_podgroups": [pg],
    }
    qs, notes = _read(lists)
    assert notes == [
        "ClusterQueue lim: status.flavorsReservation of nvidia.com/gpu in flavor h100 is 'x', "
        "not a Kubernetes quantity; its quota is not audited",
        "ClusterQueue lim: lendingLimit of nvidia.com/gpu in flavor h100 is 'Infinity', not a "
        "Kubernetes quantity; its quota is not audited",
        "Volcano queue vq: spec.capability of nvidia.com/gpu is '1e3Ki', not a Kubernetes "
        "quantity; its quota is not audited",
        "Volcano queue vq: status.allocated of nvidia.com/gpu is '-1', a negative quantity; its "
        "quota is not audited",
        "Workload ml/run: podSetAssignments[main].resourceUsage of nvidia.com/gpu is '2²', not "
        "a Kubernetes quantity; ClusterQueue fine is not audited",
        "PodGroup ml/pg: spec.minResources of nvidia.com/gpu is 'True', not a Kubernetes "
        "quantity; Volcano queue other is not audited",
        "Cohort c: nominalQuota of nvidia.com/gpu in flavor h100 is 'nan', not a Kubernetes "
        "quantity; its quota is not audited",
    ]
    assert [(q.name, q.unaudited) for q in qs.queues] == [
        ("fine", True),
        ("lim", True),
        ("other", True),
        ("vq", True),
    ]
    assert qs.cohorts["c"].unaudited
    # What could be read still is: a readable figure beside an unreadable one is kept.
    lim = next(q for q in qs.queues if q.name == "lim")
    assert lim.quotas[0].borrowing_limit == 2.0

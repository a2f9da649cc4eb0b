from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.checks import gpu050_priority_inversion as gpu050
from gpuaudit.checks.findings import Severity
from tests.support.factories import (
    START,
    STEP,
    Series,
    gpu_labels,
    inventory,
    make_node,
    make_pod,
    run_check,
)

HOURS = 10
END = START + HOURS * STEP
GPU_MSG = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def _inv(pods: list[dict[str, Any]], nodes: list[dict[str, Any]] | None = None):  # type: ignore[no-untyped-def]
    nodes = nodes if nodes is not None else [make_node("n1"), make_node("n2", "NVIDIA-L40S", 4)]
    return inventory([Series(gpu_labels(), act=[0.0] * HOURS)], HOURS, pods=pods, nodes=nodes)


def _waiting(since: float = START + 4 * STEP, **kw: Any) -> dict[str, Any]:
    kw.setdefault("priority", 1000)
    kw.setdefault("priority_class", "training")
    kw.setdefault("gpus", 8)
    kw.setdefault("unschedulable", GPU_MSG)
    return make_pod("urgent-0", namespace="ml", node="", phase="Pending", pending_since=since, **kw)


def _holders() -> list[dict[str, Any]]:
    return [
        make_pod(
            "batch-a",
            namespace="b",
            node="n1",
            gpus=4,
            owner=("Job", "a"),
            priority=100,
            priority_class="batch",
        ),
        make_pod("batch-b", namespace="b", node="n1", gpus=4, owner=("Job", "b")),
        make_pod(
            "srv",
            namespace="s",
            node="n2",
            gpus=4,
            owner=("StatefulSet", "srv"),
            priority=10000,
            priority_class="serving",
        ),
    ]


def test_pending_pod_waits_behind_lower_priority_holders() -> None:
    found = run_check(gpu050, _inv([_waiting(), *_holders()]))
    (f,) = [x for x in found if x.resource.kind == "Pod"]
    assert f.code == "GPU050" and f.severity is Severity.HIGH
    assert f.resource.name == "urgent-0" and f.resource.gpus == 8
    assert f.message == (
        "Pod ml/urgent-0 (priority 1000, class training) has waited 6.0 h for 8 GPUs while "
        "lower-priority pods hold the NVIDIA-H100-80GB-HBM3 GPUs it needs on n1: b/batch-b "
        "(priority 0, 4 GPUs), b/batch-a (priority 100, 4 GPUs); preemption did not free them."
    )
    assert f.impact.gpu_hours == pytest.approx(48)
    assert f.impact.cost == pytest.approx(48 * 6.88)
    assert f.evidence["gpus_to_evict"] == 8


def test_a_long_message_that_names_the_gpus_last_is_still_a_wait_for_gpus() -> None:
    """The scheduler words one reason per group of nodes: on a cluster of many taints the
    `Insufficient nvidia.com/gpu` group comes last, past the first 500 characters."""
    taints = ", ".join(
        f"1 node(s) had untolerated taint {{team-{i:02d}: reserved}}" for i in range(20)
    )
    msg = f"0/22 nodes are available: {taints}, 2 Insufficient nvidia.com/gpu."
    assert len(msg) > 900
    found = run_check(gpu050, _inv([_waiting(unschedulable=msg), *_holders()]))
    assert [x.resource.name for x in found if x.resource.kind == "Pod"] == ["urgent-0"]


def test_preemption_policy_never_says_it_cannot_preempt() -> None:
    found = run_check(gpu050, _inv([_waiting(preemption_policy="Never"), *_holders()]))
    (f,) = [x for x in found if x.resource.kind == "Pod"]
    assert "its preemptionPolicy is Never, so it cannot preempt them" in f.message
    assert "PreemptLowerPriority" in f.recommendation


@pytest.mark.parametrize(
    "pod, why",
    [
        (_waiting(since=END - 600), "pending 10 minutes"),
        (_waiting(priority=0, priority_class=""), "no lower priority"),
        (
            _waiting(unschedulable="0/2 nodes are available: 2 node(s) had untolerated taint."),
            "not GPUs",
        ),
        (
            _waiting(gpus=4, node_selector={"nvidia.com/gpu.product": "NVIDIA-L40S"}),
            "holder outranks",
        ),
    ],
)
def test_near_misses(pod: dict[str, Any], why: str) -> None:
    found = run_check(gpu050, _inv([pod, *_holders()]))
    assert [f for f in found if f.resource.kind == "Pod"] == [], why


def test_a_node_with_room_means_the_wait_is_not_for_gpus() -> None:
    nodes = [make_node("n1"), make_node("n3")]
    found = run_check(gpu050, _inv([_waiting(), *_holders()], nodes))
    assert [f for f in found if f.resource.kind == "Pod"] == []


def test_serving_and_batch_share_a_pool_without_priority_classes() -> None:
    pods = [
        make_pod(
            "api-7f-x",
            namespace="web",
            node="n1",
            gpus=2,
            owner=("ReplicaSet", "api-7f"),
            labels={"pod-template-hash": "7f"},
        ),
        make_pod(
            "train-0",
            namespace="ml",
            node="n1",
            gpus=4,
            owner=("Job", "train"),
            priority=100,
            priority_class="batch",
        ),
        make_pod("srv-0", namespace="s", node="n2", gpus=1, owner=("StatefulSet", "srv")),
    ]
    found = run_check(gpu050, _inv(pods))
    (f,) = found
    assert (f.resource.kind, f.resource.name) == ("NodePool", "NVIDIA-H100-80GB-HBM3")
    assert f.severity is Severity.LOW and f.impact.gpu_hours == 0
    assert f.message == (
        "Node pool NVIDIA-H100-80GB-HBM3 runs long-running GPU workloads (Deployment web/api) "
        "and run-to-completion ones (Job ml/train), yet 1 of its 2 GPU pods has no "
        "PriorityClass (web/api-7f-x): the scheduler cannot tell which may preempt which."
    )
    assert f.evidence["pods_without_priority_class"] == ["web/api-7f-x"]


def test_classed_pools_stay_quiet() -> None:
    pods = [
        make_pod(
            "api-0", node="n1", owner=("StatefulSet", "api"), priority_class="serving", priority=1
        ),
        make_pod("job-0", node="n1", owner=("Job", "j"), priority_class="batch", priority=0),
    ]
    assert run_check(gpu050, _inv(pods)) == []


def test_a_node_with_room_behind_an_untolerated_taint_does_not_end_the_wait() -> None:
    """n3 has 8 free GPUs but a taint the waiting pod does not tolerate: the wait is still for
    GPUs, and lower-priority pods on n1 hold them; tolerating the taint, it would fit on n3."""
    tainted = make_node("n3")
    tainted["spec"]["taints"] = [{"key": "team", "value": "vision", "effect": "NoExecute"}]
    nodes = [make_node("n1"), make_node("n2", "NVIDIA-L40S", 4), tainted]
    found = run_check(gpu050, _inv([_waiting(), *_holders()], nodes))
    (f,) = [x for x in found if x.resource.kind == "Pod"]
    assert f.evidence["node"] == "n1"
    assert f.evidence["refused_nodes"]["untolerated taint"]["first"] == [
        "n3 (untolerated taint {team: vision})"
    ]
    tolerant = _waiting()
    tolerant["spec"]["tolerations"] = [{"key": "team", "operator": "Equal", "value": "vision"}]
    found = run_check(gpu050, _inv([tolerant, *_holders()], nodes))
    assert [x for x in found if x.resource.kind == "Pod"] == []


def test_required_affinity_keeps_holders_off_limits() -> None:
    """Pinned by affinity to L40S nodes (n2 only), the pod cannot use n1's GPUs however low the
    priority of their holders; n2's holder outranks it."""
    pod = _waiting(gpus=4)
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "nvidia.com/gpu.product",
                                "operator": "In",
                                "values": ["NVIDIA-L40S"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    found = run_check(gpu050, _inv([pod, *_holders()]))
    assert [x for x in found if x.resource.kind == "Pod"] == []

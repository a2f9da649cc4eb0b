from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.checks import gpu051_fragmentation as gpu051
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
GPU_MSG = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."


def _cluster(extra: list[dict[str, Any]], held: dict[str, list[int]]):  # type: ignore[no-untyped-def]
    """Three 8-GPU nodes; `held` maps node -> GPU counts of the pods running there."""
    pods = list(extra)
    for node, sizes in held.items():
        pods += [
            make_pod(f"{node}-p{i}", namespace="w", node=node, gpus=n, owner=("Job", f"{node}-{i}"))
            for i, n in enumerate(sizes)
        ]
    nodes = [make_node(n) for n in ("a", "b", "c")] + [make_node("small", "NVIDIA-L40S", 2)]
    return inventory([Series(gpu_labels(), act=[0.0] * HOURS)], HOURS, pods=pods, nodes=nodes)


def _waiting(gpus: int = 4, since_h: int = 5) -> dict[str, Any]:
    return make_pod(
        "big-0",
        namespace="ml",
        node="",
        phase="Pending",
        gpus=gpus,
        unschedulable=GPU_MSG,
        pending_since=START + since_h * STEP,
    )


def test_free_gpus_scattered_two_per_node() -> None:
    inv = _cluster([_waiting()], {"a": [4, 2], "b": [6], "c": [5, 1], "small": [2]})
    (f,) = run_check(gpu051, inv)
    assert f.code == "GPU051" and f.severity is Severity.HIGH
    assert f.message == (
        "Pod ml/big-0 has waited 5.0 h for 4 GPUs although the 3 nodes that could run it have 6 "
        "free GPUs, at most 2 per node (2 free on 3 nodes); moving w/a-p1 (2 GPUs) off a would "
        "make room."
    )
    assert f.impact.gpu_hours == pytest.approx(20)
    assert f.impact.cost == pytest.approx(20 * 6.88)
    assert f.evidence["free_gpu_histogram"] == {"2": 3}
    assert f.evidence["free_gpus_by_node"] == {"a": 2.0, "b": 2.0, "c": 2.0}
    assert f.evidence["blocking_pods"] == [{"pod": "w/a-p1", "gpus": 2.0}]


@pytest.mark.parametrize(
    "pod, held, why",
    [
        (_waiting(), {"a": [8], "b": [6], "c": [7]}, "only 3 free in all"),
        (_waiting(), {"a": [4], "b": [8], "c": [8]}, "a node has room"),
        (_waiting(gpus=1), {"a": [7], "b": [8], "c": [8]}, "one GPU is never fragmented"),
        (_waiting(since_h=HOURS), {"a": [6], "b": [6], "c": [8]}, "just started waiting"),
    ],
)
def test_near_misses(pod: dict[str, Any], held: dict[str, list[int]], why: str) -> None:
    assert run_check(gpu051, _cluster([pod], held)) == [], why


TAINT_MSG = (
    "0/5 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint "
    "{dedicated: inference}, 3 Insufficient nvidia.com/gpu."
)


def _tainted_cluster(
    effect: str = "NoSchedule", tolerate: bool = False, extra: list[dict[str, Any]] | None = None
):  # type: ignore[no-untyped-def]
    """Three nodes with 2 free GPUs each, and a fourth with 4 free and a taint."""
    waiting = make_pod(
        "big-0",
        namespace="ml",
        node="",
        phase="Pending",
        gpus=4,
        unschedulable=TAINT_MSG,
        pending_since=START + 5 * STEP,
    )
    if tolerate:
        waiting["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    pods = [waiting, *(extra or [])]
    for node, sizes in {"a": [4, 2], "b": [6], "c": [5, 1], "t": [4]}.items():
        pods += [
            make_pod(f"{node}-p{i}", namespace="w", node=node, gpus=n, owner=("Job", f"{node}-{i}"))
            for i, n in enumerate(sizes)
        ]
    tainted = make_node("t")
    tainted["spec"]["taints"] = [{"key": "dedicated", "value": "inference", "effect": effect}]
    nodes = [make_node(n) for n in ("a", "b", "c")] + [tainted]
    return inventory([Series(gpu_labels(), act=[0.0] * HOURS)], HOURS, pods=pods, nodes=nodes)


def test_a_tainted_node_with_room_does_not_count_and_is_named() -> None:
    """The scheduler's message says one node had an untolerated taint; the finding names that
    node, with its free GPUs and the same reason, and does not count it as room."""
    (f,) = run_check(gpu051, _tainted_cluster())
    assert f.message == (
        "Pod ml/big-0 has waited 5.0 h for 4 GPUs although the 3 nodes that could run it have 6 "
        "free GPUs, at most 2 per node (2 free on 3 nodes); t has 4 free but is refused "
        "(untolerated taint {dedicated: inference}); moving w/a-p1 (2 GPUs) off a would make "
        "room."
    )
    assert f.evidence["refused_with_room"] == {
        "t": {"free": 4.0, "why": "untolerated taint {dedicated: inference}"}
    }
    assert f.evidence["refused_nodes"] == {
        "untolerated taint": {"nodes": 1, "first": ["t (untolerated taint {dedicated: inference})"]}
    }
    # The model agrees with the pod's own message: one node refused for a taint.
    assert (
        "1 node(s) had untolerated taint {dedicated: inference}" in f.evidence["scheduler_message"]
    )


@pytest.mark.parametrize(
    "kw, why",
    [
        ({"tolerate": True}, "it tolerates the taint: t has room, the wait is not for GPUs"),
        ({"effect": "PreferNoSchedule"}, "PreferNoSchedule does not keep it off t"),
    ],
)
def test_taint_near_misses(kw: dict[str, Any], why: str) -> None:
    assert run_check(gpu051, _tainted_cluster(**kw)) == [], why


def test_finished_pods_hold_nothing_and_bound_pods_hold_their_gpus() -> None:
    done = make_pod("done-0", namespace="w", node="a", gpus=2, phase="Succeeded")
    # a's 2 free GPUs plus the 2 of a finished pod: still 2 free (it was never counted twice).
    (f,) = run_check(gpu051, _cluster([_waiting(), done], {"a": [4, 2], "b": [6], "c": [5, 1]}))
    assert f.evidence["free_gpus_by_node"] == {"a": 2.0, "b": 2.0, "c": 2.0}
    starting = make_pod("start-0", namespace="w", node="a", gpus=2, phase="Pending")
    # Bound but not yet running: a has no free GPU left, and the pool only 4.
    (g,) = run_check(gpu051, _cluster([_waiting(), starting], {"a": [4, 2], "b": [6], "c": [5, 1]}))
    assert g.evidence["free_gpus_by_node"] == {"b": 2.0, "c": 2.0}


def test_a_blocking_pod_that_may_run_nowhere_else_is_not_moved() -> None:
    pinned = make_pod("pin-0", namespace="w", node="a", gpus=2, owner=("Job", "pin"))
    pinned["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    }
    held = {"a": [4], "b": [4, 1, 1], "c": [6]}
    free_to_move = make_pod("free-0", namespace="w", node="a", gpus=2, owner=("Job", "free"))
    (f,) = run_check(gpu051, _cluster([_waiting(), free_to_move], held))
    assert f.evidence["consolidate_on"] == "a"  # 2 GPUs to move, the first such node
    (f,) = run_check(gpu051, _cluster([_waiting(), pinned], held))
    assert f.evidence["consolidate_on"] == "b"
    assert f.evidence["blocking_pods"] == [
        {"pod": "w/b-p1", "gpus": 1.0},
        {"pod": "w/b-p2", "gpus": 1.0},
    ]

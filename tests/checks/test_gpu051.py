from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.checks import gpu051_fragmentation as gpu051
from gpuaudit.findings import Severity
from tests.factories import (
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

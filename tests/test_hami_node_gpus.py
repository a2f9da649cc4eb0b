"""A node HAMi shares counts its physical GPUs, not its splits (issue 32): HAMi's device plugin
advertises `nvidia.com/gpu` = GPUs x split count (4 GPUs split 10 ways are 40), and the GPUs
are those its annotation `hami.io/node-nvidia-register` registers. Hand-computed: the summary's
`gpus_total`, the capacity plan's room, GPU051's free GPUs and GPU060's node size."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.audit.capacity import plan
from gpuaudit.audit.summary import summarise
from gpuaudit.checks import gpu051_fragmentation as gpu051
from gpuaudit.checks import gpu060_warm_idle_nodes as gpu060
from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory import Inventory, Views
from gpuaudit.inventory import columns as C
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
from tests.support.hami import hami_node, hami_pod

HOURS = 30
H100 = "NVIDIA-H100-80GB-HBM3"
H_GPUS = tuple(f"GPU-h-{i}" for i in range(4))
"""node-h's GPUs, split 10 ways (allocatable nvidia.com/gpu 40)."""
I_GPUS = ("GPU-i-0", "GPU-i-1")
"""node-i's GPUs (allocatable 20)."""


def _unlabelled(node: dict[str, Any]) -> dict[str, Any]:
    """`node` without its `nvidia.com/gpu.count` label: its GPUs are only in HAMi's annotation."""
    del node["metadata"]["labels"]["nvidia.com/gpu.count"]
    return node


def _cluster() -> Inventory:
    """30 hours. node-h (HAMi, 4 GPUs registered, DCGM reports 2): v1 and v2 hold 25 % of
    GPU 0 each, v3, v4 and v5 25 % of GPU 1 each (5 of its 40 splits). node-i (HAMi, 2 GPUs
    registered, DCGM reports 1, no pod, idle all window). node-p (4 whole GPUs): p1 holds 3,
    busy. big-0 has waited for 4 GPUs since hour 5."""
    series = [
        Series(gpu_labels(H_GPUS[0], "0", "node-h"), act=[0.3] * HOURS),
        Series(gpu_labels(H_GPUS[1], "1", "node-h"), act=[0.6] * HOURS),
        Series(gpu_labels(I_GPUS[0], "0", "node-i"), act=[0.0] * HOURS),
        *(
            Series(
                gpu_labels(f"GPU-p-{i}", str(i), "node-p", pod="p1", namespace="w"), [0.9] * HOURS
            )
            for i in range(3)
        ),
    ]
    shares = {"v1": H_GPUS[0], "v2": H_GPUS[0], "v3": H_GPUS[1], "v4": H_GPUS[1], "v5": H_GPUS[1]}
    pods = [hami_pod(name, 25, 20_390, uuid) for name, uuid in shares.items()]
    pods += [
        make_pod("p1", namespace="w", node="node-p", gpus=3),
        make_pod(
            "big-0",
            node="",
            phase="Pending",
            gpus=4,
            unschedulable="0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
            pending_since=START + 5 * STEP,
        ),
    ]
    nodes = [
        _unlabelled(hami_node("node-h", H_GPUS)),
        _unlabelled(hami_node("node-i", I_GPUS)),
        make_node("node-p", H100, 4),
    ]
    return inventory(series, HOURS, pods=pods, nodes=nodes)


@pytest.fixture(scope="module")
def views() -> Views:
    return Views(_cluster(), DEFAULT_PRICES)


def test_a_hami_node_counts_its_registered_gpus(views: Views) -> None:
    nodes = views.inv.nodes.set_index(C.NODE)
    # 40 splits over 4 GPUs, 20 over 2: each GPU is advertised 10 times.
    assert nodes.loc["node-h", C.GPU_REPLICAS] == 10 and nodes.loc["node-i", C.GPU_REPLICAS] == 10
    assert views.sharing["node-h"].replicas == 10  # not 40 / the 2 GPUs DCGM reported
    # node-h 4, node-i 2, node-p 4 (not 40 + 20 + 4).
    assert summarise(views, 0.05, "USD").gpus_total == 10
    # node-h: 4 GPUs, 5 splits requested (half a GPU's worth), 3.5 free.
    free = views.gpu_nodes.set_index(C.NODE)
    assert free.loc["node-h", [C.ALLOCATABLE_GPU, C.REQUESTED, C.FREE]].tolist() == [4, 0.5, 3.5]


def test_the_capacity_plan_packs_into_physical_gpus(views: Views) -> None:
    h = plan(views, 0.05, "USD", []).by_product[H100]
    assert (h.nodes, h.gpus) == (3, 10.0)
    # Every hour: p1's 3 GPUs and the five 0.25 shares.
    assert h.held_by_hour == (3 + 5 * 0.25,) * HOURS


def test_gpu051_counts_free_gpus_not_free_splits(views: Views) -> None:
    (f,) = run_check(gpu051, views.inv)
    # node-h: 35 splits free, 3.5 GPUs; node-i: 20, 2 GPUs; node-p: 1 GPU. No node has 4.
    assert f.evidence["free_gpus_by_node"] == {"node-h": 3.5, "node-i": 2.0, "node-p": 1.0}
    assert (f.evidence["pool_free_gpus"], f.evidence["most_free_on_one_node"]) == (6.5, 3.5)
    assert f.message.startswith(
        "Pod ml/big-0 has waited 25.0 h for 4 GPUs although the 3 nodes that could run it have "
        "6.5 free GPUs, at most 3.5 per node"
    )


def test_gpu060_sizes_a_hami_node_by_its_gpus(views: Views) -> None:
    (f,) = [f for f in run_check(gpu060, views.inv) if f.resource.name == "node-i"]
    # Its 2 registered GPUs (DCGM reported 1) x the 30 idle hours.
    assert f.impact.gpu_hours == pytest.approx(2 * 30)
    assert f.message.startswith("Node node-i (2 GPUs, ")

"""Inventory columns for GPU health, P2P status, pending pods and node pools."""

from __future__ import annotations

import pytest

from gpuaudit.inventory import columns as C
from gpuaudit.sources.prometheus import catalogue as queries
from tests.support.factories import START, Series, gpu_labels, inventory, make_node, make_pod


def test_xid_codes_and_health_maxima_per_holding() -> None:
    sick = Series(
        gpu_labels(uuid="G0", pod="p", namespace="ml"),
        act=[0.5] * 4,
        xids=[0, 13, 79],
        health={"remap_uncorr_max": 2.0, "remap_failure_max": 1.0, "ecc_dbe_max": 0.0},
    )
    well = Series(gpu_labels(uuid="G1", gpu="1"), act=[0.0] * 4, xids=[0])
    inv = inventory([sick, well], 4)
    h = inv.holdings.set_index(C.UUID)
    assert h.at["G0", C.XID_MAX] == 79
    assert h.at["G0", C.XID_CODES] == "13,79"
    assert h.at["G0", C.XID_MSG] == "13: xid 13; 79: xid 79"
    assert h.at["G0", C.REMAP_UNCORR_MAX] == 2 and h.at["G0", C.REMAP_FAILURE_MAX] == 1
    assert h.at["G1", C.XID_CODES] == "" and h.at["G1", C.XID_MAX] == 0
    assert "gpu_health" in inv.capabilities


def test_without_health_series_the_capability_is_missing_with_a_reason() -> None:
    inv = inventory([Series(gpu_labels(), act=[0.1])], 1)
    assert "gpu_health" not in inv.capabilities
    assert queries.XID in inv.missing["gpu_health"]


def test_xid_query_groups_on_err_code_and_keeps_the_old_query_texts() -> None:
    xid = queries.BY_ID["xid_max"]
    text = xid.promql(3600, "exported")
    assert text.startswith("max by (UUID, uuid, gpu,") and "err_code, err_msg)" in text
    act = queries.BY_ID["act_sum"].promql(3600, "exported")
    assert act == (
        "sum by (UUID, uuid, gpu, GPU_I_ID, GPU_I_PROFILE, modelName, Hostname, hostname, "
        "pci_bus_id, node, instance, exported_pod, exported_namespace, exported_container, "
        "pod_uid, dra_claim_name, dra_claim_namespace) "
        "(sum_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[3600s]))"
    )
    for metric in (queries.XID, queries.REMAP_UNCORR, queries.REMAP_FAILURE, queries.P2P_STATUS):
        assert metric in queries.DCGM_METRICS


def test_p2p_rows() -> None:
    lab = gpu_labels(uuid="G0", gpu="0", host="n1")
    inv = inventory(
        [Series(lab, act=[0.0])], 1, p2p=[(lab, "1", 0.0), (lab, "2", 5.0), ({"gpu": "x"}, "1", 0)]
    )
    rows = inv.p2p.to_dict("records")
    assert rows == [
        {C.NODE: "n1", C.GPU_INDEX: "0", C.PEER_INDEX: "1", C.P2P_STATUS: 0.0},
        {C.NODE: "n1", C.GPU_INDEX: "0", C.PEER_INDEX: "2", C.P2P_STATUS: 5.0},
    ]
    assert "p2p_status" in inv.capabilities


def test_pending_pod_columns() -> None:
    affinity_pod = make_pod("aff", node="", phase="Pending")
    affinity_pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "nvidia.com/gpu.product",
                                "operator": "In",
                                "values": ["NVIDIA-L40S", "NVIDIA-L4"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    pods = [
        make_pod(
            "wait",
            node="",
            phase="Pending",
            priority=5,
            preemption_policy="Never",
            node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            unschedulable="0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
            pending_since=START + 600,
        ),
        affinity_pod,
        make_pod("run"),
    ]
    inv = inventory([Series(gpu_labels(), act=[0.0])], 1, pods=pods)
    p = inv.pods.set_index(C.POD)
    assert bool(p.at["wait", C.UNSCHEDULABLE])
    assert p.at["wait", C.PENDING_SINCE] == pytest.approx(START + 600)
    assert p.at["wait", C.PREEMPTION_POLICY] == "Never"
    assert p.at["wait", C.SELECTOR_PRODUCTS] == "NVIDIA-H100-80GB-HBM3"
    assert "Insufficient nvidia.com/gpu" in p.at["wait", C.SCHED_MESSAGE]
    assert p.at["aff", C.SELECTOR_PRODUCTS] == "NVIDIA-L4,NVIDIA-L40S"
    assert not bool(p.at["run", C.UNSCHEDULABLE]) and p.at["run", C.SELECTOR_PRODUCTS] == ""


def test_node_pool_and_cordon() -> None:
    pooled = make_node("a")
    pooled["metadata"]["labels"]["karpenter.sh/nodepool"] = "gpu-spot"
    nodes = [pooled, make_node("b", cordoned=True)]
    inv = inventory([Series(gpu_labels(), act=[0.0])], 1, nodes=nodes)
    n = inv.nodes.set_index(C.NODE)
    assert n.at["a", C.POOL] == "gpu-spot" and not n.at["a", C.CORDONED]
    assert n.at["b", C.POOL] == "NVIDIA-H100-80GB-HBM3" and n.at["b", C.CORDONED]

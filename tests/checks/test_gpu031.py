from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.checks import gpu031_gang_spread as gpu031
from gpuaudit.checks.base import pack
from gpuaudit.findings import Severity
from tests.factories import Series, gpu_labels, inventory, make_node, make_pod, run_check

HOURS = 30
GB200 = "NVIDIA GB200"
H100 = "NVIDIA H100 80GB HBM3"


def _gpus(host: str, model: str, holders: list[str]) -> list[Series]:
    return [
        Series(
            gpu_labels(
                uuid=f"{host}-{i}",
                gpu=str(i),
                host=host,
                model=model,
                pod=p,
                namespace="ml" if p else "",
            ),
            act=[0.6 if p else 0.0] * HOURS,
        )
        for i, p in enumerate(holders)
    ]


def _job(name: str, workers: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": workers}}
        },
    }


def _member(pod: str, job: str, node: str, gpus: int, **kw: Any) -> dict[str, Any]:
    return make_pod(
        pod,
        node=node,
        gpus=gpus,
        owner=("PyTorchJob", job),
        labels={"training.kubeflow.org/job-name": job},
        **kw,
    )


def test_pack_uses_the_fewest_nodes_or_says_none() -> None:
    assert pack([4, 4], {"a": 8, "b": 4, "c": 4}) == ["a"]
    assert sorted(pack([4, 4], {"b": 4, "c": 4}) or []) == ["b", "c"]
    assert pack([8], {"a": 4, "b": 4}) is None


def test_gang_across_nvlink_domains_while_one_domain_had_room() -> None:
    series = (
        _gpus("t0", GB200, [""] * 4)
        + _gpus("t1", GB200, ["moe-master-0"] * 4)
        + _gpus("t2", GB200, ["moe-worker-0"] * 4)
    )
    nodes = [
        make_node("t0", "NVIDIA-GB200", 4, clique="c.1"),
        make_node("t1", "NVIDIA-GB200", 4, clique="c.1"),
        make_node("t2", "NVIDIA-GB200", 4, clique="c.2"),
    ]
    pods = [_member("moe-master-0", "moe", "t1", 4), _member("moe-worker-0", "moe", "t2", 4)]
    inv = inventory(series, HOURS, pods=pods, nodes=nodes, lists={"pytorchjobs": [_job("moe", 1)]})
    (f,) = run_check(gpu031, inv)
    assert f.code == "GPU031" and f.severity is Severity.MEDIUM
    assert (f.resource.kind, f.resource.namespace, f.resource.name) == ("PyTorchJob", "ml", "moe")
    assert f.message == (
        "PyTorchJob ml/moe (2 pods, 8 GPUs, GB200) spans 2 NVLink domains (gpu.clique c.1, "
        "c.2) while domain c.1 had room for all of it."
    )
    assert f.impact.gpu_hours == pytest.approx(8 * HOURS * 0.10)
    assert f.impact.cost == pytest.approx(8 * HOURS * 0.10 * 10.50)
    assert f.evidence["tighter_clique"] == "c.1"
    assert sorted(f.evidence["tighter_nodes"]) == ["t0", "t1"]


def test_gang_on_more_nodes_than_needed() -> None:
    series = _gpus("a", H100, ["g-master-0"] * 2 + [""] * 6) + _gpus(
        "b", H100, ["g-worker-0"] * 2 + ["x"] * 6
    )
    pods = [_member("g-master-0", "g", "a", 2), _member("g-worker-0", "g", "b", 2)]
    inv = inventory(series, HOURS, pods=pods, lists={"pytorchjobs": [_job("g", 1)]})
    (f,) = run_check(gpu031, inv)
    assert "runs on 2 nodes (a, b) while 1 (a) had room for all of it" in f.message


def test_gang_spread_only_because_it_had_to_stays_quiet() -> None:
    series = _gpus("a", H100, ["g-master-0"] * 2 + ["x"] * 6) + _gpus(
        "b", H100, ["g-worker-0"] * 2 + ["y"] * 6
    )
    pods = [_member("g-master-0", "g", "a", 2), _member("g-worker-0", "g", "b", 2)]
    inv = inventory(series, HOURS, pods=pods, lists={"pytorchjobs": [_job("g", 1)]})
    assert run_check(gpu031, inv) == []


@pytest.mark.parametrize("pinned", [False, True])
def test_multi_gpu_pod_on_pcie_while_nvlink_had_room(pinned: bool) -> None:
    series = _gpus("l", "NVIDIA L40S", ["sd-0", "sd-0", "", ""]) + _gpus(
        "h", H100, ["z"] * 6 + ["", ""]
    )
    selector = {"nvidia.com/gpu.product": "NVIDIA-L40S"} if pinned else None
    pods = [make_pod("sd-0", node="l", gpus=2, owner=("Job", "sd"), node_selector=selector)]
    found = run_check(gpu031, inventory(series, HOURS, pods=pods))
    if pinned:
        assert found == []
        return
    (f,) = found
    assert f.resource.kind == "Pod" and f.resource.name == "sd-0"
    assert f.message == (
        "Pod ml/sd-0 (2 GPUs, L40S) runs on PCIe-only GPUs (l) while h, whose GPUs are all "
        "NVLink-connected, had 2 free."
    )

"""Communication evidence: measured link traffic first, else a distributed-training owner."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.inventory.comms import Comms
from tests.support.factories import SAMPLES_PER_HOUR, Series, gpu_labels, inventory, make_pod

HOURS = 4


def _series(pod: str, links: dict[str, float] | None = None) -> Series:
    """One GPU `pod` holds, with `links` (link -> bytes/s each way) measured."""
    n = float(SAMPLES_PER_HOUR * HOURS)
    health: dict[str, float] = {}
    for link, bps in (links or {}).items():
        for way in ("tx", "rx"):
            health[f"{link}_{way}_sum"] = bps * n
            health[f"{link}_{way}_count"] = n
    lab = gpu_labels(uuid=f"GPU-{pod}", pod=pod, namespace="ml")
    return Series(lab, act=[0.5] * HOURS, health=health)


def _comms(series: list[Series], pods: list[dict[str, Any]]) -> Comms:
    return Comms(inventory(series, HOURS, pods=pods))


def test_measured_traffic_decides_whatever_owns_the_pod() -> None:
    pods = [make_pod("a", owner=("PyTorchJob", "j")), make_pod("b", owner=("Deployment", "d"))]
    c = _comms([_series("a", {"pcie": 0.1e9}), _series("b", {"nvlink": 20e9})], pods)
    quiet = c.judge([("ml", "a")], "PyTorchJob", 1.0)
    assert not quiet.communicates and quiet.basis == "measured"
    assert quiet.pcie_gb_s == pytest.approx(0.2) and quiet.nvlink_gb_s is None
    loud = c.judge([("ml", "b")], "", 1.0)
    assert loud.communicates and loud.nvlink_gb_s == pytest.approx(40.0)
    assert loud.detail == "measured mean traffic per GPU (NVLink 40.00 GB/s) at or above 1 GB/s"


@pytest.mark.parametrize(
    "owner, labels, expected",
    [
        (("PyTorchJob", "j"), {}, "a distributed-training PyTorchJob"),
        (("MPIJob", "j"), {}, "a distributed-training MPIJob"),
        (("TFJob", "j"), {}, "a distributed-training TFJob"),
        (("LeaderWorkerSet", "l"), {}, "a distributed-training LeaderWorkerSet"),
        (("Job", "j-0"), {"jobset.sigs.k8s.io/jobset-name": "js"}, "a JobSet"),
        (("RayCluster", "r"), {"ray.io/node-type": "worker"}, "a Ray worker group"),
        (("RayCluster", "r"), {"ray.io/node-type": "head"}, ""),
        (("StatefulSet", "render"), {}, ""),
        (("Job", "embed"), {"batch.kubernetes.io/job-name": "embed"}, ""),
    ],
)
def test_owners_of_distributed_work(
    owner: tuple[str, str], labels: dict[str, str], expected: str
) -> None:
    c = _comms([_series("p")], [make_pod("p", owner=owner, labels=labels)])
    verdict = c.judge([("ml", "p")], "", 1.0)
    assert verdict.communicates is bool(expected)
    assert verdict.basis == ("owner" if expected else "none")
    if expected:
        assert verdict.detail.startswith(expected)


def test_a_volcano_job_counts_with_several_tasks_only() -> None:
    def member(name: str, job: str, task: str) -> dict[str, Any]:
        labels = {"volcano.sh/job-name": job, "volcano.sh/task-spec": task}
        return make_pod(name, owner=("Job", job), labels=labels)

    pods = [
        member("mpi-master-0", "mpi", "master"),
        member("mpi-worker-0", "mpi", "worker"),
        member("solo-worker-0", "solo", "worker"),
        member("solo-worker-1", "solo", "worker"),
    ]
    c = _comms([_series(p["metadata"]["name"]) for p in pods], pods)
    assert c.judge([("ml", "mpi-worker-0")], "", 1.0).detail == "a Volcano job with 2 tasks"
    assert not c.judge([("ml", "solo-worker-0")], "", 1.0).communicates


def test_a_gang_kind_alone_is_enough() -> None:
    c = _comms([_series("w-0")], [make_pod("w-0", owner=("Job", "w"))])
    assert c.judge([("ml", "w-0")], "JobSet", 1.0).communicates
    assert not c.judge([("ml", "w-0")], "PodGroup", 1.0).communicates
